package tiering

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/sqltypes"
)

// minkSchema is the bucket (engine) schema of the named columns of spec.
func minkSchema(t *testing.T, spec catalog.TableSpec, names ...string) *arrow.Schema {
	t.Helper()
	var cols []sqltypes.Column
	for _, n := range names {
		for _, c := range spec.Columns {
			if c.Name == n {
				typ, err := sqltypes.Parse(c.Type)
				if err != nil {
					t.Fatal(err)
				}
				cols = append(cols, sqltypes.Column{Name: c.Name, Type: typ, NotNull: c.NotNull})
			}
		}
	}
	return sqltypes.Schema(cols)
}

// scanIDs scans a snapshot and returns the ids (column "id") and the total
// row count; it fails the test on a batch not of schema.
func scanIDs(t *testing.T, e *env, r *LakeReader, req ScanRequest) (ids []int64, rows int64, err error) {
	t.Helper()
	err = r.Scan(e.ctx, req, func(rec arrow.RecordBatch) error {
		if !rec.Schema().Equal(req.Schema) {
			t.Fatalf("batch schema %s, want %s", rec.Schema(), req.Schema)
		}
		rows += rec.NumRows()
		if idx := rec.Schema().FieldIndices("id"); len(idx) == 1 {
			col := rec.Column(idx[0]).(*array.Int64)
			for i := range col.Len() {
				ids = append(ids, col.Value(i))
			}
		}
		return nil
	})
	slices.Sort(ids)
	return ids, rows, err
}

// TestLakeReaderSnapshots: a reader returns exactly the rows of the snapshot
// it is asked for (an older one too), in the engine's types, only the
// buckets asked for, and a row count without columns; through a cache
// bounded so small that it evicts.
func TestLakeReaderSnapshots(t *testing.T) {
	e := newEnv(t)
	spec := testSpec("events", 3, "")
	id := e.createTable(spec)
	buckets := sortedKeys(e.ends(id))
	model := map[catalog.BucketID][]row{}
	next := int64(0)
	tr := e.tierer()
	var snaps []int64
	var wantIDs [][]int64
	for round := 0; round < 2; round++ {
		for i, b := range buckets {
			n := 50 + 10*i + round
			model[b] = append(model[b], e.appendRows(id, b, next, n)...)
			next += int64(n)
		}
		if _, err := tr.Round(e.ctx, id, e.epoch); err != nil {
			t.Fatal(err)
		}
		snaps = append(snaps, e.tiered(id).LakeSnapshotID)
		wantIDs = append(wantIDs, seqIDs(0, next))
	}
	cache, err := NewFileCache(t.TempDir(), 1)
	if err != nil {
		t.Fatal(err)
	}
	r := NewLakeReader(e.store.Inner(), storeURL, cache)
	schema := minkSchema(t, spec, "small", "id", "ts", "amount", "s", "ok")
	for i, snap := range snaps {
		ids, rows, err := scanIDs(t, e, r, ScanRequest{Table: id, Snapshot: snap, Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids, wantIDs[i]) || rows != int64(len(wantIDs[i])) {
			t.Fatalf("snapshot %d: %d rows, ids %v…, want %d", i, rows, ids[:min(5, len(ids))], len(wantIDs[i]))
		}
	}
	// Values in the engine's types: small is int16, amount decimal.
	var got []row
	err = r.Scan(e.ctx, ScanRequest{Table: id, Snapshot: snaps[1], Schema: schema, Buckets: []catalog.BucketID{buckets[1]}}, func(rec arrow.RecordBatch) error {
		for i := range int(rec.NumRows()) {
			var rw row
			rw.small = rec.Column(0).(*array.Int16).Value(i)
			rw.id = rec.Column(1).(*array.Int64).Value(i)
			rw.ts = int64(rec.Column(2).(*array.Timestamp).Value(i))
			rw.amount = int64(rec.Column(3).(*array.Decimal128).Value(i).LowBits())
			if s := rec.Column(4).(*array.String); s.IsValid(i) {
				v := s.Value(i)
				rw.s = &v
			}
			rw.ok = rec.Column(5).(*array.Boolean).Value(i)
			got = append(got, rw)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(a, b row) int { return int(a.id - b.id) })
	if len(got) != len(model[buckets[1]]) {
		t.Fatalf("bucket %d: %d rows, want %d", buckets[1], len(got), len(model[buckets[1]]))
	}
	for i, want := range model[buckets[1]] {
		if !sameRow(got[i], want) {
			t.Fatalf("bucket %d row %d: %s, want %s", buckets[1], i, fmtRow(got[i]), fmtRow(want))
		}
	}
	// No columns: the row count.
	_, rows, err := scanIDs(t, e, r, ScanRequest{Table: id, Snapshot: snaps[1], Schema: arrow.NewSchema(nil, nil), Buckets: []catalog.BucketID{buckets[0], buckets[2]}})
	if err != nil || rows != int64(len(model[buckets[0]])+len(model[buckets[2]])) {
		t.Fatalf("row count of buckets 0 and 2: %d (%v)", rows, err)
	}
	// No buckets: nothing.
	if _, rows, err = scanIDs(t, e, r, ScanRequest{Table: id, Snapshot: snaps[1], Schema: schema, Buckets: []catalog.BucketID{}}); err != nil || rows != 0 {
		t.Fatalf("scan of no buckets: %d rows (%v)", rows, err)
	}
	if hits, misses := cache.Stats(); misses == 0 || cache.Size() > 64<<10 {
		t.Fatalf("cache: %d hits %d misses, %d bytes kept (bound 1 byte: one file at most)", hits, misses, cache.Size())
	}
}

func seqIDs(from, to int64) []int64 {
	var out []int64
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// TestLakeReaderBadFile: a corrupt data file is a LakeFileError naming it
// (not NotFound), a deleted one a NotFound LakeFileError; once the file is
// good again the scan succeeds (the cache dropped the bad copy).
func TestLakeReaderBadFile(t *testing.T) {
	e := newEnv(t)
	id, spec, snap, key, good := tieredFile(t, e)
	store := e.store.Inner()
	replace := func(data []byte) {
		if err := store.Delete(e.ctx, key); err != nil {
			t.Fatal(err)
		}
		if data != nil {
			if err := store.PutIfAbsent(e.ctx, key, data); err != nil {
				t.Fatal(err)
			}
		}
	}
	cache, err := NewFileCache(t.TempDir(), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	for _, withCache := range []bool{true, false} {
		c := cache
		if !withCache {
			c = nil
		}
		r := NewLakeReader(store, storeURL, c)
		req := ScanRequest{Table: id, Snapshot: snap, Schema: minkSchema(t, spec, "id", "s")}
		bad := append([]byte(nil), good...)
		for i := 4; i < len(bad)-8; i++ {
			bad[i] ^= 0x5a
		}
		replace(bad)
		_, _, err = scanIDs(t, e, r, req)
		var fe *LakeFileError
		if !errors.As(err, &fe) || fe.Key != key || fe.NotFound || !strings.Contains(err.Error(), key) {
			t.Fatalf("cache %v: scan of a corrupt file: %v, want a LakeFileError naming %s", withCache, err, key)
		}
		replace(nil)
		_, _, err = scanIDs(t, e, r, req)
		if !errors.As(err, &fe) || fe.Key != key || !fe.NotFound {
			t.Fatalf("cache %v: scan of a missing file: %v, want a NotFound LakeFileError naming %s", withCache, err, key)
		}
		replace(good)
		if ids, _, err := scanIDs(t, e, r, req); err != nil || !slices.Equal(ids, seqIDs(0, 100)) {
			t.Fatalf("cache %v: scan after the file is good again: %d ids, %v", withCache, len(ids), err)
		}
	}
}

// TestFileCacheStart: a new cache removes the files of an earlier one in
// its directory, and nothing else.
func TestFileCacheStart(t *testing.T) {
	dir := t.TempDir()
	keep := filepath.Join(dir, "notes.txt")
	old := filepath.Join(dir, "0123456789abcdef0123456789abcdef.parquet")
	tmp := filepath.Join(dir, "tmp-123")
	for _, p := range []string{keep, old, tmp} {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := NewFileCache(dir, 1<<20); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]bool{keep: true, old: false, tmp: false} {
		if _, err := os.Stat(p); (err == nil) != want {
			t.Errorf("%s exists: %v, want %v", filepath.Base(p), err == nil, want)
		}
	}
}

// tieredFile tiers 100 rows of a one-bucket log table and returns the
// table, its spec, the lake snapshot and the key and bytes of its one data
// file.
func tieredFile(t *testing.T, e *env) (id catalog.TableID, spec catalog.TableSpec, snap int64, key string, good []byte) {
	t.Helper()
	spec = testSpec("events", 1, "")
	id = e.createTable(spec)
	e.appendRows(id, sortedKeys(e.ends(id))[0], 0, 100)
	if _, err := e.tierer().Round(e.ctx, id, e.epoch); err != nil {
		t.Fatal(err)
	}
	snap = e.tiered(id).LakeSnapshotID
	objs, err := e.store.Inner().List(e.ctx, LakePrefix(id)+"data/")
	if err != nil || len(objs) != 1 {
		t.Fatalf("data files: %v (%v)", objs, err)
	}
	key = objs[0].Key
	if good, err = e.store.Inner().Get(e.ctx, key); err != nil {
		t.Fatal(err)
	}
	return id, spec, snap, key, good
}
