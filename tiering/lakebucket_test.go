package tiering

import (
	"errors"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/sqltypes"
)

// readBucketIDs reads req and returns the offset and id of every row, in
// the order fn got them; it fails the test on a batch not of req.Schema.
func readBucketIDs(t *testing.T, e *env, r *LakeReader, req BucketRead) (offsets, ids []int64, err error) {
	t.Helper()
	err = r.ReadBucket(e.ctx, req, func(first uint64, rec arrow.RecordBatch) error {
		if !rec.Schema().Equal(req.Schema) {
			t.Fatalf("batch schema %s, want %s", rec.Schema(), req.Schema)
		}
		col := rec.Column(0).(*array.Int64)
		for i := range col.Len() {
			offsets = append(offsets, int64(first)+int64(i))
			ids = append(ids, col.Value(i))
		}
		return nil
	})
	return offsets, ids, err
}

// TestReadBucket: the rows of a bucket's offset range come in offset order,
// each once, across files of several rounds and any chunk size; a range
// the lake does not hold is ErrLakeIncomplete before any of its chunk's
// rows; fn's error stops the read and is returned as it is; a missing file
// is a LakeFileError naming it.
func TestReadBucket(t *testing.T) {
	e := newEnv(t)
	spec := testSpec("events", 1, "")
	id := e.createTable(spec)
	bucket := sortedKeys(e.ends(id))[0]
	tr := e.tierer()
	next := int64(0)
	for _, n := range []int{40, 25, 60} { // a file each: offsets 0..124
		e.appendRows(id, bucket, next, n) // one bucket: a row's id is its offset
		next += int64(n)
		if _, err := tr.Round(e.ctx, id, e.epoch); err != nil {
			t.Fatal(err)
		}
	}
	var snapshot int64
	var split uint64
	e.cat.Read(func(v *catalog.View) { snapshot, split = LakeSplit(v, id, bucket, 1000) })
	if snapshot == 0 || split != 125 {
		t.Fatalf("LakeSplit below 1000: snapshot %d, end %d; want the table's snapshot, 125 (the tiered offset)", snapshot, split)
	}
	e.cat.Read(func(v *catalog.View) { _, split = LakeSplit(v, id, bucket, 30) })
	if split != 30 {
		t.Fatalf("LakeSplit below 30: end %d, want 30", split)
	}
	typ, _ := sqltypes.Parse("bigint")
	cols := []sqltypes.Column{{Name: "id", Type: typ, NotNull: true}}
	r := NewLakeReader(e.store.Inner(), storeURL, nil)
	req := BucketRead{Table: id, Snapshot: snapshot, Bucket: bucket, Schema: sqltypes.Schema(cols), Columns: cols}
	for _, c := range []struct{ from, to, chunk uint64 }{{0, 125, 0}, {0, 125, 7}, {39, 41, 1}, {64, 125, 16}, {10, 11, 0}} {
		req.From, req.To, req.ChunkRows = c.from, c.to, c.chunk
		offsets, ids, err := readBucketIDs(t, e, r, req)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if len(offsets) != int(c.to-c.from) {
			t.Fatalf("%+v: %d rows, want %d", c, len(offsets), c.to-c.from)
		}
		for i := range offsets {
			if offsets[i] != int64(c.from)+int64(i) || ids[i] != offsets[i] {
				t.Fatalf("%+v: row %d at offset %d has id %d, want both %d", c, i, offsets[i], ids[i], int64(c.from)+int64(i))
			}
		}
	}

	req.From, req.To, req.ChunkRows = 100, 130, 50
	if offsets, _, err := readBucketIDs(t, e, r, req); !errors.Is(err, ErrLakeIncomplete) || len(offsets) != 0 {
		t.Fatalf("[100, 130) of a lake holding [0, 125): %d rows, %v; want none and ErrLakeIncomplete", len(offsets), err)
	}

	stop := errors.New("enough")
	calls := 0
	req.From, req.To, req.ChunkRows = 0, 125, 0
	err := r.ReadBucket(e.ctx, req, func(uint64, arrow.RecordBatch) error { calls++; return stop })
	if err != stop || calls != 1 {
		t.Fatalf("fn's error: ReadBucket returned %v after %d calls, want %v after 1", err, calls, stop)
	}

	objs, err := e.store.Inner().List(e.ctx, LakePrefix(id)+"data/")
	if err != nil || len(objs) != 3 {
		t.Fatalf("data files: %v (%v), want 3", objs, err)
	}
	key := objs[1].Key
	if err := e.store.Inner().Delete(e.ctx, key); err != nil {
		t.Fatal(err)
	}
	_, _, err = readBucketIDs(t, e, r, req)
	var fe *LakeFileError
	if !errors.As(err, &fe) || !fe.NotFound || fe.Key != key || err.Error() != fmt.Sprintf("bucket %d: read the lake: %v", bucket, fe) {
		t.Fatalf("read with %s removed: %v, want \"bucket %d: read the lake: \" and a NotFound LakeFileError naming it", key, err, bucket)
	}
}
