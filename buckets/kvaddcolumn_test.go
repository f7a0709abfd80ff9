package buckets

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/sqltypes"
	"github.com/minkdb/mink/kv"
	"github.com/minkdb/mink/kv/kvcodec"
	"github.com/minkdb/mink/metalog"
	"github.com/minkdb/mink/objstore"
)

// rowsOf builds a batch of c's schema from rows of column values in text
// form ("NULL" is NULL).
func rowsOf(t testing.TB, c *kvcodec.Codec, rows ...[]string) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, c.Schema())
	defer b.Release()
	for _, row := range rows {
		if len(row) != c.NumColumns() {
			t.Fatalf("row %v for a codec of %d columns", row, c.NumColumns())
		}
		for i, v := range row {
			if v == "NULL" {
				b.Field(i).AppendNull()
			} else if err := b.Field(i).AppendValueFromString(v); err != nil {
				t.Fatal(err)
			}
		}
	}
	return b.NewRecordBatch()
}

func batchText(rec arrow.RecordBatch, r int) string {
	vals := make([]string, rec.NumCols())
	for i, col := range rec.Columns() {
		vals[i] = "NULL"
		if col.IsValid(r) {
			vals[i] = col.ValueStr(r)
		}
	}
	return strings.Join(vals, "|")
}

// scanText reads the bucket's rows, every column, in key order.
func scanText(t testing.TB, b *KVBucket) []string {
	t.Helper()
	r, err := b.NewReader()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rr, err := kv.NewRecordReader(r, b.Codec(), memory.DefaultAllocator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	var out []string
	for rr.Next() {
		for i := range int(rr.RecordBatch().NumRows()) {
			out = append(out, batchText(rr.RecordBatch(), i))
		}
	}
	if err := rr.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// changelogRows reads the bucket's whole changelog, every column.
func changelogRows(t testing.TB, b *KVBucket) []string {
	t.Helper()
	batches, err := b.ReadChangelog(context.Background(), 0, b.End())
	if err != nil {
		t.Fatal(err)
	}
	defer ReleaseBatches(batches)
	var out []string
	for _, bt := range batches {
		if want := b.Codec().ChangelogSchema(); !bt.Record.Schema().Equal(want) {
			t.Fatalf("changelog batch at %d has schema %s, want %s", bt.Offset, bt.Record.Schema(), want)
		}
		for i := range int(bt.Record.NumRows()) {
			out = append(out, batchText(bt.Record, i))
		}
	}
	return out
}

func write(t testing.TB, b *KVBucket, writes []kvcodec.Write) {
	t.Helper()
	if _, _, err := b.Write(context.Background(), writes); err != nil {
		t.Fatal(err)
	}
}

func addColumn(t testing.TB, cat *metalog.Catalog, id catalog.BucketID, col catalog.Column) {
	t.Helper()
	var table catalog.TableID
	cat.Read(func(v *catalog.View) { table = v.Buckets[id].Table })
	if _, err := cat.Propose(context.Background(), catalog.AddColumn{Table: table, Column: col}); err != nil {
		t.Fatal(err)
	}
}

// updateOf is the SQL layer's UPDATE of one row: read it with c, set the
// columns in set (index → text), and write it conditionally on the row it
// read, re-encoded with c.
func updateOf(t testing.TB, b *KVBucket, c *kvcodec.Codec, key int64, set map[int]string) kvcodec.Write {
	t.Helper()
	k := keyOf(t, c, key)
	stored, ok, err := b.Get(k)
	if err != nil || !ok {
		t.Fatalf("get %d: %v %v", key, ok, err)
	}
	old, err := c.DecodeRows(nil, [][]byte{stored})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Release()
	ifRow, err := c.AppendRow(nil, old, 0)
	if err != nil {
		t.Fatal(err)
	}
	vals := strings.Split(batchText(old, 0), "|")
	for i, v := range set {
		vals[i] = v
	}
	rec := rowsOf(t, c, vals)
	defer rec.Release()
	row, err := c.AppendRow(nil, rec, 0)
	if err != nil {
		t.Fatal(err)
	}
	return kvcodec.Write{Op: kvcodec.OpUpdate, Key: k, Row: row, CheckRow: true, IfRow: ifRow}
}

// TestKVBucketAddColumn: a bucket open across ALTER TABLE … ADD COLUMN
// reads the rows and changelog entries stored before it with the column's
// missing value, takes writes of both widths, matches the CheckRow of an
// UPDATE or DELETE of a row stored before it, waits for its catalog to
// learn of a column a write holds, and another node that opens the bucket
// from a snapshot taken before the ALTER replays to the same rows.
func TestKVBucketAddColumn(t *testing.T) {
	env := &testEnv{t: t, log: metalog.NewMemLog(), store: objstore.NewMem()}
	live := func(catalog.NodeID) bool { return true }
	m1, cat := env.startKVNode(1, live, t.TempDir(), time.Hour, nil)
	m2, cat2 := env.startKVNode(2, live, t.TempDir(), time.Hour, nil)
	id := createKVTable(t, cat, 1)
	ctx := context.Background()
	b := waitKV(t, m1, id)
	c0 := b.Codec()

	upserts := func(c *kvcodec.Codec, rows ...[]string) []kvcodec.Write {
		rec := rowsOf(t, c, rows...)
		defer rec.Release()
		w, err := c.Writes(kvcodec.OpUpsert, rec)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	write(t, b, upserts(c0, []string{"1", "a"}, []string{"2", "b"}, []string{"3", "c"}))
	if err := b.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	write(t, b, upserts(c0, []string{"4", "d"}))

	addColumn(t, cat, id, catalog.Column{Name: "x", Type: "integer", Missing: sp("5")})
	c1 := b.Codec()
	if c1.NumColumns() != 3 {
		t.Fatalf("after ADD COLUMN the bucket's codec has %d columns", c1.NumColumns())
	}
	want := []string{"1|a|5", "2|b|5", "3|c|5", "4|d|5"}
	if got := scanText(t, b); !slices.Equal(got, want) {
		t.Fatalf("rows stored before ADD COLUMN: %v, want %v", got, want)
	}

	// A writer that has not learned of x, and one that has.
	write(t, b, upserts(c0, []string{"5", "old writer"}))
	write(t, b, upserts(c1, []string{"6", "f", "60"}))
	// UPDATE and DELETE of rows stored before ADD COLUMN, conditional on
	// the rows read and re-encoded with x: no endless 40001.
	write(t, b, []kvcodec.Write{updateOf(t, b, c1, 1, map[int]string{1: "a2"})})
	del := updateOf(t, b, c1, 2, nil)
	del.Op, del.Row = kvcodec.OpDelete, nil
	write(t, b, []kvcodec.Write{del})
	// An UPDATE read before a concurrent change still conflicts.
	stale := updateOf(t, b, c1, 3, map[int]string{2: "33"})
	write(t, b, upserts(c1, []string{"3", "c", "30"}))
	if _, _, err := b.Write(ctx, []kvcodec.Write{stale}); !errors.Is(err, kv.ErrConflict) {
		t.Fatalf("stale UPDATE: %v, want a conflict", err)
	}

	want = []string{"1|a2|5", "3|c|30", "4|d|5", "5|old writer|5", "6|f|60"}
	if got := scanText(t, b); !slices.Equal(got, want) {
		t.Fatalf("after writes of both widths: %v, want %v", got, want)
	}
	wantLog := []string{
		"+I|1|a|5", "+I|2|b|5", "+I|3|c|5", "+I|4|d|5", "+I|5|old writer|5", "+I|6|f|60",
		"-U|1|a|5", "+U|1|a2|5", "-D|2|b|5", "-U|3|c|5", "+U|3|c|30",
	}
	if got := changelogRows(t, b); !slices.Equal(got, wantLog) {
		t.Fatalf("changelog:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantLog, "\n"))
	}
	if err := b.stream.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := changelogRows(t, b); !slices.Equal(got, wantLog) {
		t.Fatalf("committed changelog:\n%s", strings.Join(got, "\n"))
	}

	// A write holding a column this node's catalog does not know yet (its
	// writer applied the ADD COLUMN first) waits for the catalog.
	yType, err := sqltypes.Parse("text")
	if err != nil {
		t.Fatal(err)
	}
	var cols []sqltypes.Column
	for _, f := range c1.Schema().Fields() {
		cols = append(cols, sqltypes.Column{Name: f.Name, Type: sqltypes.FromArrowField(f)})
	}
	c2, err := kvcodec.NewTableCodec(append(cols, sqltypes.Column{Name: "y", Type: yType}), 2, []int{0})
	if err != nil {
		t.Fatal(err)
	}
	wide := upserts(c2, []string{"7", "g", "70", "y7"})
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, _, err = b.Write(short, wide)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || b.End() != 11 {
		t.Fatalf("a write of an unknown column: %v, end %d; want it to wait, nothing appended", err, b.End())
	}
	done := make(chan error, 1)
	go func() { _, _, err := b.Write(ctx, wide); done <- err }()
	time.Sleep(20 * time.Millisecond)
	addColumn(t, cat, id, catalog.Column{Name: "y", Type: "text"})
	if err := <-done; err != nil {
		t.Fatalf("a write of a column the catalog then learned of: %v", err)
	}
	want = []string{"1|a2|5|NULL", "3|c|30|NULL", "4|d|5|NULL", "5|old writer|5|NULL", "6|f|60|NULL", "7|g|70|y7"}
	if got := scanText(t, b); !slices.Equal(got, want) {
		t.Fatalf("after ADD COLUMN y: %v, want %v", got, want)
	}

	// Node 2 takes over: restore from the snapshot taken before both ALTERs
	// and replay entries of three widths.
	if _, err := cat.Propose(ctx, catalog.LeadBucket{Bucket: id, Node: 2, CoordinatorEpoch: 1}); err != nil {
		t.Fatal(err)
	}
	var catalogIndex uint64
	cat.Read(func(v *catalog.View) { catalogIndex = v.Index })
	if err := cat2.WaitIndex(ctx, catalogIndex); err != nil {
		t.Fatal(err)
	}
	b2 := waitKV(t, m2, id)
	if got := scanText(t, b2); !slices.Equal(got, want) {
		t.Fatalf("node 2 after the move: %v, want %v", got, want)
	}
	c3 := b2.Codec()
	write(t, b2, []kvcodec.Write{updateOf(t, b2, c3, 4, map[int]string{3: "y4"})})
	write(t, b2, []kvcodec.Write{updateOf(t, b2, c3, 5, map[int]string{2: "50"})})
	want[2], want[3] = "4|d|5|y4", "5|old writer|50|NULL"
	if got := scanText(t, b2); !slices.Equal(got, want) {
		t.Fatalf("node 2 after updates of rows stored before the ALTERs: %v, want %v", got, want)
	}
}

// lagMeta is a catalog whose view, while lagging is set, does not show the
// tables' added columns yet: a node that has not applied an AddColumn
// another node has.
type lagMeta struct {
	*metalog.Catalog
	lagging atomic.Bool
}

func (m *lagMeta) Read(fn func(v *catalog.View)) {
	if !m.lagging.Load() {
		m.Catalog.Read(fn)
		return
	}
	m.Catalog.Read(func(v *catalog.View) {
		v = v.Clone()
		for _, t := range v.Tables {
			t.Spec.Columns = slices.DeleteFunc(t.Spec.Columns, func(c catalog.Column) bool { return c.Added })
		}
		fn(v)
	})
}

// TestKVBucketOpenBehindAddColumn: a node whose catalog has not learned of
// a column the changelog holds does not open the bucket with a misread
// state: the open fails and is retried until the catalog has the column.
// Once open, a write holding a column it does not know waits for it.
func TestKVBucketOpenBehindAddColumn(t *testing.T) {
	env := &testEnv{t: t, log: metalog.NewMemLog(), store: objstore.NewMem()}
	live := func(catalog.NodeID) bool { return true }
	m1, cat := env.startKVNode(1, live, t.TempDir(), time.Hour, nil)
	var lag *lagMeta
	env.meta = func(c *metalog.Catalog) Metadata { lag = &lagMeta{Catalog: c}; return lag }
	m2, cat2 := env.startKVNode(2, live, t.TempDir(), time.Hour, nil)
	env.meta = nil
	id := createKVTable(t, cat, 1)
	ctx := context.Background()
	b := waitKV(t, m1, id)
	c0 := b.Codec()
	rec := rowsOf(t, c0, []string{"1", "a"})
	w, err := c0.Writes(kvcodec.OpUpsert, rec)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	write(t, b, w)
	addColumn(t, cat, id, catalog.Column{Name: "x", Type: "integer", Missing: sp("5")})
	c1 := b.Codec()
	rec = rowsOf(t, c1, []string{"2", "b", "20"})
	w, err = c1.Writes(kvcodec.OpUpsert, rec)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	write(t, b, w)

	lag.lagging.Store(true)
	if _, err := cat.Propose(ctx, catalog.LeadBucket{Bucket: id, Node: 2, CoordinatorEpoch: 1}); err != nil {
		t.Fatal(err)
	}
	var index uint64
	cat.Read(func(v *catalog.View) { index = v.Index })
	if err := cat2.WaitIndex(ctx, index); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := m2.KVBucket(id)
		if err == nil {
			t.Fatal("node 2 opened the bucket without knowing the column its changelog holds")
		}
		if errors.Is(err, kvcodec.ErrNewerColumns) {
			break // the open attempt failed for the right reason
		}
		if time.Now().After(deadline) {
			t.Fatalf("node 2's open: %v, want it to fail with ErrNewerColumns", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	lag.lagging.Store(false)
	b2 := waitKV(t, m2, id)
	if got, want := scanText(t, b2), []string{"1|a|5", "2|b|20"}; !slices.Equal(got, want) {
		t.Fatalf("node 2 once its catalog has the column: %v, want %v", got, want)
	}

	// The next column: node 2 learns of it late; a write holding it waits.
	lag.lagging.Store(true)
	addColumn(t, cat, id, catalog.Column{Name: "y", Type: "text"})
	var cols []sqltypes.Column
	cat.Read(func(v *catalog.View) {
		for _, c := range v.Tables[v.Buckets[id].Table].Spec.Columns {
			typ, err := sqltypes.Parse(c.Type)
			if err != nil {
				t.Error(err)
			}
			cols = append(cols, sqltypes.Column{Name: c.Name, Type: typ, Missing: c.Missing})
		}
	})
	c2, err := kvcodec.NewTableCodec(cols, 2, []int{0})
	if err != nil {
		t.Fatal(err)
	}
	rec = rowsOf(t, c2, []string{"3", "c", "30", "y3"})
	w, err = c2.Writes(kvcodec.OpUpsert, rec)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, _, err := b2.Write(ctx, w); done <- err }()
	select {
	case err := <-done:
		t.Fatalf("a write of a column node 2 does not know returned %v before its catalog learned of it", err)
	case <-time.After(100 * time.Millisecond):
	}
	lag.lagging.Store(false)
	// The catalog applies something: the waiting write looks again.
	addColumn(t, cat, id, catalog.Column{Name: "z", Type: "bigint"})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got, want := scanText(t, b2), []string{"1|a|5|NULL|NULL", "2|b|20|NULL|NULL", "3|c|30|y3|NULL"}; !slices.Equal(got, want) {
		t.Fatalf("node 2 after the write: %v, want %v", got, want)
	}
}
