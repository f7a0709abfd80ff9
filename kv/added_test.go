package kv

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/sqltypes"
	"github.com/minkdb/mink/kv/kvcodec"
	"github.com/minkdb/mink/objstore"
)

// widerCodec is the codec of the test table after ALTER TABLE … ADD
// COLUMN x integer DEFAULT 5: rows stored without x read x = 5.
func widerCodec(t testing.TB) *kvcodec.Codec {
	var cols []sqltypes.Column
	for _, c := range []struct{ name, typ string }{{"id", "bigint"}, {"name", "text"}, {"v", "text"}, {"n", "bigint"}, {"x", "integer"}} {
		typ, err := sqltypes.Parse(c.typ)
		if err != nil {
			t.Fatal(err)
		}
		cols = append(cols, sqltypes.Column{Name: c.name, Type: typ})
	}
	cols[4].Missing = ptr("5")
	c, err := kvcodec.NewTableCodec(cols, 4, []int{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// readAll formats every row of tab, in key order, as the codec reads it.
func readAll(t testing.TB, c *kvcodec.Codec, tab *Tablet) []string {
	t.Helper()
	r, err := tab.NewReader()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rr, err := NewRecordReader(r, c, memory.DefaultAllocator, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	var out []string
	for rr.Next() {
		out = append(out, formatRows(rr.RecordBatch())...)
	}
	if err := rr.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func formatRows(rec arrow.RecordBatch) []string {
	var out []string
	for r := range int(rec.NumRows()) {
		var vals []string
		for _, col := range rec.Columns() {
			if col.IsNull(r) {
				vals = append(vals, "NULL")
			} else {
				vals = append(vals, col.ValueStr(r))
			}
		}
		out = append(out, strings.Join(vals, "|"))
	}
	return out
}

// readModifyWrite is what the SQL layer's UPDATE does: read the row of key
// with c, set v, re-encode it with c and write it conditionally on the row
// it read (re-encoded, as pk_update does).
func readModifyWrite(t testing.TB, c *kvcodec.Codec, r RowReader, key []byte, v string) kvcodec.Write {
	t.Helper()
	stored, ok, err := r.Get(key)
	if err != nil || !ok {
		t.Fatalf("get %x: %v %v", key, ok, err)
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
	b := array.NewRecordBuilder(memory.DefaultAllocator, c.Schema())
	defer b.Release()
	for i, f := range b.Fields() {
		if i == 2 {
			f.(*array.StringBuilder).Append(v)
			continue
		}
		if err := f.AppendValueFromString(old.Column(i).ValueStr(0)); err != nil {
			t.Fatal(err)
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	row, err := c.AppendRow(nil, rec, 0)
	if err != nil {
		t.Fatal(err)
	}
	return kvcodec.Write{Op: kvcodec.OpUpdate, Key: key, Row: row, CheckRow: true, IfRow: ifRow}
}

// TestAddedColumnWrites: rows stored before ADD COLUMN read with the
// column's missing value; an UPDATE, upsert or DELETE conditional on such
// a row (re-encoded with the new column) matches it; writers of both
// widths mix; and a replay of the changelog, from scratch or from a
// snapshot taken before the column was added, gives the same rows.
func TestAddedColumnWrites(t *testing.T) {
	ctx := context.Background()
	old, wide := testCodec(t), widerCodec(t)
	mv := newMetaView(t)
	store := objstore.NewMem()
	root := t.TempDir()
	tab, err := Open(filepath.Join(root, "live"), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()
	var log memLog
	p := NewPending(tab)
	apply := func(c *kvcodec.Codec, writes []kvcodec.Write) error {
		t.Helper()
		records, err := p.Changes(c, writes)
		if err != nil || len(records) == 0 {
			return err
		}
		return p.Apply(records, log.append(t, c, records))
	}

	// Before the ALTER: format-1 rows, old-width changelog entries.
	keys, rows := encodeRows(t, old, testRow{id: 1, name: "a", v: ptr("one")}, testRow{id: 2, name: "b"}, testRow{id: 3, name: "c", n: ptr(int64(30))})
	var writes []kvcodec.Write
	for i := range keys {
		writes = append(writes, kvcodec.Write{Op: kvcodec.OpInsert, Key: keys[i], Row: rows[i]})
	}
	if err := apply(old, writes); err != nil {
		t.Fatal(err)
	}
	res, err := mv.snapshot(ctx, tab, store)
	if err != nil {
		t.Fatal(err)
	}
	beforeAlter := snapshotOf(res.Record)

	want := []string{"1|a|one|NULL|5", "2|b|NULL|NULL|5", "3|c|NULL|30|5"}
	if got := readAll(t, wide, tab); !slices.Equal(got, want) {
		t.Fatalf("rows stored before the column was added read as %v, want %v", got, want)
	}

	// UPDATE of a row stored before the ALTER: the re-encoded old row is
	// 5 columns in format 2, the stored one 4 in format 1.
	upd := readModifyWrite(t, wide, p, keys[0], "uno")
	if _, err := Changes(p, []kvcodec.Write{upd}); !errors.Is(err, ErrConflict) {
		t.Fatalf("a bytewise CheckRow of a re-encoded format-1 row: %v (the test no longer shows why ChangesWith compares semantically)", err)
	}
	if err := apply(wide, []kvcodec.Write{upd}); err != nil {
		t.Fatalf("UPDATE of a row stored before ADD COLUMN: %v", err)
	}
	// DELETE conditional on a re-encoded row stored before the ALTER.
	del := readModifyWrite(t, wide, p, keys[1], "")
	del.Op, del.Row = kvcodec.OpDelete, nil
	if err := apply(wide, []kvcodec.Write{del}); err != nil {
		t.Fatalf("DELETE of a row stored before ADD COLUMN: %v", err)
	}
	// A writer that has not learned of x yet: a 4-column upsert,
	// conditional on the format-1 row it read.
	_, rows3 := encodeRows(t, old, testRow{id: 3, name: "c", v: ptr("three"), n: ptr(int64(31))})
	stored3, _, _ := p.Get(keys[2])
	if err := apply(wide, []kvcodec.Write{{Op: kvcodec.OpUpsert, Key: keys[2], Row: rows3[0], CheckRow: true, IfRow: stored3}}); err != nil {
		t.Fatalf("a narrower upsert after ADD COLUMN: %v", err)
	}
	// An UPDATE computed from x = 6 (not what the row holds) conflicts.
	stale := readModifyWrite(t, wide, p, keys[0], "x")
	staleRec, err := wide.DecodeRows(nil, [][]byte{stale.IfRow})
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, wide.Schema())
	for i, f := range b.Fields() {
		v := staleRec.Column(i).ValueStr(0)
		if i == 4 {
			v = "6"
		}
		if staleRec.Column(i).IsNull(0) {
			f.AppendNull()
		} else if err := f.AppendValueFromString(v); err != nil {
			t.Fatal(err)
		}
	}
	six := b.NewRecordBatch()
	b.Release()
	staleRec.Release()
	if stale.IfRow, err = wide.AppendRow(nil, six, 0); err != nil {
		t.Fatal(err)
	}
	six.Release()
	var ce *ConflictError
	if _, err := p.Changes(wide, []kvcodec.Write{stale}); !errors.As(err, &ce) || ce.Write != 0 {
		t.Fatalf("an UPDATE conditional on x = 6 of a row reading x = 5: %v, want a conflict", err)
	}
	// A new row with all five columns.
	newRec := func() arrow.RecordBatch {
		b := array.NewRecordBuilder(memory.DefaultAllocator, wide.Schema())
		defer b.Release()
		b.Field(0).(*array.Int64Builder).Append(4)
		b.Field(1).(*array.StringBuilder).Append("d")
		b.Field(2).AppendNull()
		b.Field(3).AppendNull()
		b.Field(4).(*array.Int32Builder).Append(40)
		return b.NewRecordBatch()
	}()
	defer newRec.Release()
	w4, err := wide.Writes(kvcodec.OpInsert, newRec)
	if err != nil {
		t.Fatal(err)
	}
	if err := apply(wide, w4); err != nil {
		t.Fatal(err)
	}

	want = []string{"1|a|uno|NULL|5", "3|c|three|31|5", "4|d|NULL|NULL|40"}
	if got := readAll(t, wide, tab); !slices.Equal(got, want) {
		t.Fatalf("after the writes: %v, want %v", got, want)
	}

	// Replay from scratch, and from the snapshot taken before the ALTER.
	fresh, err := Open(filepath.Join(root, "replayed"), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	log.replay(t, wide, fresh, 0)
	if got := readAll(t, wide, fresh); !slices.Equal(got, want) {
		t.Errorf("replayed from offset 0: %v, want %v", got, want)
	}
	restored, rres, err := Restore(ctx, store, filepath.Join(root, "restored"), RestoreOptions{
		Bucket: mv.bucket, Snapshots: []catalog.KVSnapshot{beforeAlter}, Tablet: testOptions()})
	if err != nil || rres.Snapshot == nil {
		t.Fatalf("restore: %v %v", err, rres.Skipped)
	}
	defer restored.Close()
	log.replay(t, wide, restored, rres.LogOffset)
	if got := readAll(t, wide, restored); !slices.Equal(got, want) {
		t.Errorf("restored from the snapshot before ADD COLUMN and replayed: %v, want %v", got, want)
	}
	// A replay with the codec from before the ALTER stops at the first
	// entry holding x, rather than misreading it.
	stale2, err := Open(filepath.Join(root, "stale"), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer stale2.Close()
	var replayErr error
	for _, e := range log.entries {
		if replayErr = stale2.ApplyEntry(old, e.offset, e.count, e.payload); replayErr != nil {
			break
		}
	}
	if !errors.Is(replayErr, kvcodec.ErrNewerColumns) {
		t.Errorf("replay of entries holding x with the old codec: %v, want kvcodec.ErrNewerColumns", replayErr)
	}
}

// TestLoadRowsAddedColumn: a base state loaded from lake files written
// before ADD COLUMN (a batch of the older columns) reads with the missing
// value; a batch of columns the codec does not know is refused.
func TestLoadRowsAddedColumn(t *testing.T) {
	wide := widerCodec(t)
	tab, err := Open(t.TempDir(), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()
	b := array.NewRecordBuilder(memory.DefaultAllocator, testSchema)
	b.Field(0).(*array.Int64Builder).Append(1)
	b.Field(1).(*array.StringBuilder).Append("lake")
	b.Field(2).AppendNull()
	b.Field(3).(*array.Int64Builder).Append(10)
	old := b.NewRecordBatch()
	b.Release()
	defer old.Release()
	if err := tab.LoadRows(wide, old); err != nil {
		t.Fatal(err)
	}
	if err := tab.FinishLoad(3); err != nil {
		t.Fatal(err)
	}
	if got, want := readAll(t, wide, tab), []string{"1|lake|NULL|10|5"}; !slices.Equal(got, want) {
		t.Fatalf("rows loaded from a batch of the older columns: %v, want %v", got, want)
	}
	other, err := Open(t.TempDir(), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	wideRec, err := wide.DecodeRows(nil, [][]byte{mustRow(t, wide, old)})
	if err != nil {
		t.Fatal(err)
	}
	defer wideRec.Release()
	if err := other.LoadRows(testCodec(t), wideRec); !errors.Is(err, kvcodec.ErrNewerColumns) {
		t.Fatalf("a load of 5 columns with a 4-column codec: %v, want kvcodec.ErrNewerColumns", err)
	}
}

func mustRow(t testing.TB, c *kvcodec.Codec, rec arrow.RecordBatch) []byte {
	t.Helper()
	row, err := c.AppendRow(nil, rec, 0)
	if err != nil {
		t.Fatal(err)
	}
	return row
}
