package tiering

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/objstore"
)

// lakeRow is a row as read back from the lake through iceberg-go.
type lakeRow struct {
	row
	bucket catalog.BucketID
	offset uint64
}

// readLake scans the current lake snapshot of a table with iceberg-go (its
// own metadata reader and arrow-go's Parquet reader, independent of
// parquet-go) and returns the rows by bucket and offset. It fails the test if
// any (bucket, offset) appears twice.
func (e *env) readLake(id catalog.TableID) map[catalog.BucketID]map[uint64]lakeRow {
	e.t.Helper()
	lake := NewLake(e.store.Inner(), storeURL)
	tbl, err := lake.Load(e.ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[catalog.BucketID]map[uint64]lakeRow{}
	if tbl == nil || tbl.CurrentSnapshot() == nil {
		return out
	}
	scan := tbl.Scan()
	_, recs, err := scan.ToArrowRecords(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	for rec, err := range recs {
		if err != nil {
			e.t.Fatal(err)
		}
		col := func(name string) arrow.Array {
			idx := rec.Schema().FieldIndices(name)
			if len(idx) != 1 {
				e.t.Fatalf("lake record has no column %q: %s", name, rec.Schema())
			}
			return rec.Column(idx[0])
		}
		for i := range int(rec.NumRows()) {
			var r lakeRow
			r.bucket = catalog.BucketID(col(BucketColumn).(*array.Int64).Value(i))
			r.offset = uint64(col(OffsetColumn).(*array.Int64).Value(i))
			r.id = col("id").(*array.Int64).Value(i)
			if s := col("s").(*array.String); s.IsValid(i) {
				v := s.Value(i)
				r.s = &v
			}
			r.amount = int64(col("amount").(*array.Decimal128).Value(i).LowBits())
			r.ts = int64(col("ts").(*array.Timestamp).Value(i))
			r.small = int16(col("small").(*array.Int32).Value(i))
			r.ok = col("ok").(*array.Boolean).Value(i)
			if idx := rec.Schema().FieldIndices("dt"); len(idx) == 1 {
				r.part = rec.Column(idx[0]).(*array.String).Value(i)
			}
			if out[r.bucket] == nil {
				out[r.bucket] = map[uint64]lakeRow{}
			}
			if prev, dup := out[r.bucket][r.offset]; dup {
				e.t.Fatalf("bucket %d offset %d is in the lake twice: %+v and %+v", r.bucket, r.offset, prev, r)
			}
			out[r.bucket][r.offset] = r
		}
		rec.Release()
	}
	return out
}

// checkLake asserts the lake holds exactly offsets [0, want[b]) of every
// bucket, equal to the model rows, and that the log records the same offsets.
func (e *env) checkLake(id catalog.TableID, model map[catalog.BucketID][]row) {
	e.t.Helper()
	got := e.readLake(id)
	for b, rows := range model {
		if len(got[b]) != len(rows) {
			e.t.Errorf("bucket %d: lake has %d rows, want %d", b, len(got[b]), len(rows))
		}
		for off, want := range rows {
			r, ok := got[b][uint64(off)]
			if !ok {
				e.t.Errorf("bucket %d offset %d is missing from the lake", b, off)
				continue
			}
			if !sameRow(r.row, want) {
				e.t.Errorf("bucket %d offset %d: lake has %s, want %s", b, off, fmtRow(r.row), fmtRow(want))
			}
		}
	}
	for b := range got {
		if _, ok := model[b]; !ok {
			e.t.Errorf("lake has rows of bucket %d, which has none", b)
		}
	}
	ts := e.tiered(id)
	for b, rows := range model {
		if ts.Offsets[b] != uint64(len(rows)) {
			e.t.Errorf("bucket %d: the log records tiered offset %d, want %d", b, ts.Offsets[b], len(rows))
		}
	}
}

func sameRow(a, b row) bool {
	if (a.s == nil) != (b.s == nil) || (a.s != nil && *a.s != *b.s) {
		return false
	}
	a.s, b.s = nil, nil
	return a == b
}

func fmtRow(r row) string {
	s := "NULL"
	if r.s != nil {
		s = *r.s
	}
	return fmt.Sprintf("{id=%d s=%s amount=%d ts=%d small=%d ok=%v part=%q}", r.id, s, r.amount, r.ts, r.small, r.ok, r.part)
}

var _ = decimal128.FromI64

func TestRoundTiersLogTable(t *testing.T) {
	e := newEnv(t)
	id := e.createTable(testSpec("events", 2, ""))
	bs := e.ends(id)
	buckets := sortedKeys(bs)
	model := map[catalog.BucketID][]row{}
	model[buckets[0]] = append(model[buckets[0]], e.appendRows(id, buckets[0], 0, 100)...)
	model[buckets[0]] = append(model[buckets[0]], e.appendRows(id, buckets[0], 100, 50)...)
	model[buckets[1]] = append(model[buckets[1]], e.appendRows(id, buckets[1], 1000, 7)...)

	tr := e.tierer()
	res, err := tr.Round(e.ctx, id, e.epoch)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Committed || res.Rows != 157 || res.Repaired {
		t.Fatalf("round: %+v", res)
	}
	e.checkLake(id, model)
	if ts := e.tiered(id); ts.LakeSnapshotID != res.SnapshotID || ts.LakeSequence != res.Sequence {
		t.Fatalf("log records snapshot %d seq %d, the round committed %d seq %d", ts.LakeSnapshotID, ts.LakeSequence, res.SnapshotID, res.Sequence)
	}

	// Nothing new: no snapshot.
	res2, err := tr.Round(e.ctx, id, e.epoch)
	if err != nil || res2.Committed || res2.Rows != 0 {
		t.Fatalf("empty round: %+v, %v", res2, err)
	}

	// More rows in one bucket: the next round appends exactly those.
	model[buckets[1]] = append(model[buckets[1]], e.appendRows(id, buckets[1], 2000, 30)...)
	res3, err := tr.Round(e.ctx, id, e.epoch)
	if err != nil {
		t.Fatal(err)
	}
	if res3.Rows != 30 || res3.From[buckets[1]] != 7 || res3.To[buckets[1]] != 37 || len(res3.To) != 1 {
		t.Fatalf("second round: %+v", res3)
	}
	if res3.Sequence != res.Sequence+1 {
		t.Fatalf("sequence %d after %d", res3.Sequence, res.Sequence)
	}
	e.checkLake(id, model)
}

func TestRoundPartitionedTable(t *testing.T) {
	e := newEnv(t)
	id := e.createTable(testSpec("clicks", 2, "dt"))
	p1 := e.createPartition(id, "2025-01-01")
	p2 := e.createPartition(id, "2025-01-02")
	model := map[catalog.BucketID][]row{}
	model[p1[0]] = e.appendRows(id, p1[0], 0, 10)
	model[p1[1]] = e.appendRows(id, p1[1], 10, 11)
	model[p2[1]] = e.appendRows(id, p2[1], 30, 12)
	if _, err := e.tierer().Round(e.ctx, id, e.epoch); err != nil {
		t.Fatal(err)
	}
	e.checkLake(id, model)

	// The lake is partitioned by dt (identity), and each data file carries
	// its partition value.
	tbl, err := NewLake(e.store.Inner(), storeURL).Load(e.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	spec := tbl.Spec()
	if spec.NumFields() != 1 || spec.Field(0).Name != "dt" || spec.Field(0).Transform.String() != "identity" {
		t.Fatalf("partition spec: %s", spec)
	}
	tasks, err := tbl.Scan().PlanFiles(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	parts := map[string]int64{}
	for _, task := range tasks {
		for _, v := range task.File.Partition() {
			parts[fmt.Sprint(v)] += task.File.Count()
		}
	}
	if parts["2025-01-01"] != 21 || parts["2025-01-02"] != 12 || len(parts) != 2 {
		t.Fatalf("rows per lake partition: %v", parts)
	}
}

var _ = objstore.ErrExists

// TestRoundSplitsFiles: a bucket's backlog is read and written one file of
// at most fileRows rows at a time.
func TestRoundSplitsFiles(t *testing.T) {
	defer func(n int) { fileRows = n }(fileRows)
	fileRows = 7
	e := newEnv(t)
	id := e.createTable(testSpec("events", 1, ""))
	b := sortedKeys(e.ends(id))[0]
	model := map[catalog.BucketID][]row{}
	model[b] = append(e.appendRows(id, b, 0, 20), e.appendRows(id, b, 20, 20)...)
	res, err := e.tierer().Round(e.ctx, id, e.epoch)
	if err != nil {
		t.Fatal(err)
	}
	if res.Files != 6 || res.Rows != 40 {
		t.Fatalf("round: %+v, want 40 rows in 6 files", res)
	}
	if e.src.widest != 7 {
		t.Fatalf("widest stream read: %d rows, want 7", e.src.widest)
	}
	e.checkLake(id, model)
}

// TestRoundStreamReadFails: a bucket whose stream cannot be read fails the
// round (naming the bucket) and commits nothing; the next round tiers all.
func TestRoundStreamReadFails(t *testing.T) {
	e := newEnv(t)
	id := e.createTable(testSpec("events", 3, ""))
	bs := sortedKeys(e.ends(id))
	model := map[catalog.BucketID][]row{}
	for i, b := range bs {
		model[b] = e.appendRows(id, b, int64(i*100), 10+i)
	}
	e.src.mu.Lock()
	e.src.fail = map[catalog.BucketID]error{bs[1]: errors.New("stream object unreadable")}
	e.src.mu.Unlock()
	res, err := e.tierer().Round(e.ctx, id, e.epoch)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("bucket %d", bs[1])) || res.Committed {
		t.Fatalf("round with an unreadable bucket: %+v, %v", res, err)
	}
	if ts := e.tiered(id); ts.Offsets != nil {
		t.Fatalf("the failed round recorded %+v", ts)
	}
	e.src.mu.Lock()
	e.src.fail = nil
	e.src.mu.Unlock()
	if _, err := e.tierer().Round(e.ctx, id, e.epoch); err != nil {
		t.Fatal(err)
	}
	e.checkLake(id, model)
}
