package server

import (
	"context"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/objstore"
	"github.com/minkdb/mink/tiering"
)

// memSource serves one committed batch per bucket for the tierer.
type memSource map[catalog.BucketID]arrow.RecordBatch

func (m memSource) ReadCommitted(_ context.Context, b catalog.BucketID, from, to uint64) ([]tiering.Batch, error) {
	rec, ok := m[b]
	if !ok || from >= uint64(rec.NumRows()) {
		return nil, nil
	}
	rec.Retain()
	return []tiering.Batch{{Offset: 0, Record: rec}}, nil
}

// lakeRows counts the current lake snapshot's rows per partition value.
func lakeRows(t *testing.T, lake *tiering.Lake, id catalog.TableID) map[string]int {
	t.Helper()
	ctx := context.Background()
	tbl, err := lake.Load(ctx, id)
	if err != nil || tbl == nil {
		t.Fatalf("load lake: %v", err)
	}
	_, recs, err := tbl.Scan().ToArrowRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		col := rec.Column(rec.Schema().FieldIndices("p")[0]).(*array.String)
		for i := range int(rec.NumRows()) {
			out[col.Value(i)]++
		}
		rec.Release()
	}
	return out
}

// An expired partition leaves the lake and the table. The first attempt
// "crashes" after the lake delete (the delete is committed, DropPartition
// never proposed); the next pass finds nothing left to delete in the lake,
// drops the partition and records the lake snapshot; tiering goes on.
func TestExpirePartitionAfterCrash(t *testing.T) {
	ctx := context.Background()
	logger := quietLogger()
	cat, propose := memCatalog(t)
	propose(catalog.RegisterNode{Node: 1})
	epoch := propose(catalog.RegisterCoordinator{Node: 1, NodeEpoch: 1}).Epoch
	id := propose(catalog.CreateTable{Spec: catalog.TableSpec{Name: "t", Buckets: 1, PartitionBy: "p",
		Columns: []catalog.Column{{Name: "id", Type: "bigint", NotNull: true}, {Name: "p", Type: "text", NotNull: true}}}}).Table
	src := memSource{}
	parts := map[string]catalog.PartitionID{}
	for _, value := range []string{"old", "new"} {
		out := propose(catalog.CreatePartition{Table: id, Value: value})
		parts[value] = out.Partition
		b := out.Buckets[0]
		le := propose(catalog.LeadBucket{Bucket: b, Node: 1, CoordinatorEpoch: epoch}).Epoch
		propose(catalog.OpenStream{Stream: catalog.StreamID(b), Epoch: le, Node: 1, NodeEpoch: 1})
		propose(catalog.CommitStreamObjects{Stream: catalog.StreamID(b), Epoch: le,
			Objects: []catalog.StreamObject{{Key: value, Start: 0, End: 3, Size: 1}}})
		schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "p", Type: arrow.BinaryTypes.String}}, nil)
		bld := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		bld.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 2, 3}, nil)
		bld.Field(1).(*array.StringBuilder).AppendValues([]string{value, value, value}, nil)
		src[b] = bld.NewRecordBatch()
		bld.Release()
	}
	store := objstore.NewMem()
	tr := tiering.New(tiering.Config{Store: store, StoreURL: "mem://lake", Meta: cat, Source: src, Logger: logger})
	if _, err := tr.Round(ctx, id, epoch); err != nil {
		t.Fatal(err)
	}
	if got := lakeRows(t, tr.Lake(), id); got["old"] != 3 || got["new"] != 3 {
		t.Fatalf("lake before expiry: %v", got)
	}
	s := &Server{cat: cat, logger: logger, tiering: &tieringWorker{tierer: tr}}

	// Attempt 1: the lake delete commits, then the lease holder dies.
	if _, seq, err := dropLakePartition(ctx, tr.Lake(), id, "p", "old", epoch); err != nil || seq == 0 {
		t.Fatalf("lake delete: sequence %d, %v", seq, err)
	}
	if got := lakeRows(t, tr.Lake(), id); got["old"] != 0 || got["new"] != 3 {
		t.Fatalf("lake after the delete: %v", got)
	}
	// Attempt 2 (the next pass): nothing left in the lake, the partition goes.
	if err := s.expirePartition(ctx, catalog.DropPartition{Table: id, Partition: parts["old"]}, epoch); err != nil {
		t.Fatal(err)
	}
	cat.Read(func(v *catalog.View) {
		if _, ok := v.Tables[id].Partitions[parts["old"]]; ok {
			t.Fatal("the expired partition is still in the view")
		}
	})
	// The lake snapshot of the first attempt is recorded by the next round
	// (repair), and tiering still works.
	res, err := tr.Round(ctx, id, epoch)
	if err != nil {
		t.Fatalf("round after expiry: %v", err)
	}
	if !res.Repaired {
		t.Fatalf("round after expiry: %+v, want the lake snapshot repaired into the log", res)
	}
	if got := lakeRows(t, tr.Lake(), id); got["old"] != 0 || got["new"] != 3 {
		t.Fatalf("lake at the end: %v", got)
	}
	// A pass for a partition that is gone does nothing.
	if err := s.expirePartition(ctx, catalog.DropPartition{Table: id, Partition: parts["old"]}, epoch); err != nil {
		t.Fatal(err)
	}
	for _, r := range src {
		r.Release()
	}
}

// TestLakeMaintenance runs the lifecycle loop's lake maintenance pass
// (maintain) on a partitioned table whose "old" partition expired: once the
// snapshots that still held the partition's file expire
// (lake_snapshot_retention = '0s', the 3 newest kept), the file is deleted
// and the other partitions' rows stay. After DROP TABLE the next pass
// deletes the table's whole lake.
func TestLakeMaintenance(t *testing.T) {
	ctx := context.Background()
	logger := quietLogger()
	cat, propose := memCatalog(t)
	propose(catalog.RegisterNode{Node: 1})
	epoch := propose(catalog.RegisterCoordinator{Node: 1, NodeEpoch: 1}).Epoch
	id := propose(catalog.CreateTable{Spec: catalog.TableSpec{Name: "t", Buckets: 1, PartitionBy: "p",
		Options: map[string]string{"lake_snapshot_retention": "0s"},
		Columns: []catalog.Column{{Name: "id", Type: "bigint", NotNull: true}, {Name: "p", Type: "text", NotNull: true}}}}).Table
	src := memSource{}
	defer func() {
		for _, r := range src {
			r.Release()
		}
	}()
	parts := map[string]catalog.PartitionID{}
	addPartition := func(value string) {
		out := propose(catalog.CreatePartition{Table: id, Value: value})
		parts[value] = out.Partition
		b := out.Buckets[0]
		le := propose(catalog.LeadBucket{Bucket: b, Node: 1, CoordinatorEpoch: epoch}).Epoch
		propose(catalog.OpenStream{Stream: catalog.StreamID(b), Epoch: le, Node: 1, NodeEpoch: 1})
		propose(catalog.CommitStreamObjects{Stream: catalog.StreamID(b), Epoch: le,
			Objects: []catalog.StreamObject{{Key: value, Start: 0, End: 3, Size: 1}}})
		schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "p", Type: arrow.BinaryTypes.String}}, nil)
		bld := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		bld.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 2, 3}, nil)
		bld.Field(1).(*array.StringBuilder).AppendValues([]string{value, value, value}, nil)
		src[b] = bld.NewRecordBatch()
		bld.Release()
	}
	store := objstore.NewMem()
	tr := tiering.New(tiering.Config{Store: store, StoreURL: "mem://lake", Meta: cat, Source: src, Logger: logger})
	round := func() {
		t.Helper()
		if res, err := tr.Round(ctx, id, epoch); err != nil || !res.Committed {
			t.Fatalf("round: %+v, %v", res, err)
		}
	}
	s := &Server{cat: cat, logger: logger, cfg: Config{Tiering: true, TieringFreshness: time.Minute,
		LakeTargetFileSize: tiering.DefaultTargetFileSize, LakeCompactFiles: tiering.DefaultCompactMinFiles}}
	w := &tieringWorker{s: s, tierer: tr, gc: tiering.NewLakeCollector(tr.Lake(), 0)}
	w.mu.tables = map[catalog.TableID]*tableTiering{}
	s.tiering = w
	objects := func(prefix string) int {
		t.Helper()
		objs, err := store.List(ctx, prefix)
		if err != nil {
			t.Fatal(err)
		}
		return len(objs)
	}
	oldFiles := tiering.LakePrefix(id) + "data/p=old/"

	addPartition("old")
	addPartition("new")
	round()
	if err := s.expirePartition(ctx, catalog.DropPartition{Table: id, Partition: parts["old"]}, epoch); err != nil {
		t.Fatal(err)
	}
	if w.maintain(ctx, epoch) {
		t.Fatal("maintenance fenced")
	}
	if n := objects(oldFiles); n != 1 {
		t.Fatalf("%d files of the dropped partition stored while a kept snapshot holds them, want 1", n)
	}
	// Two more snapshots: the first one, the only one with the old
	// partition's file, is no longer among the 3 newest.
	addPartition("a")
	round()
	addPartition("b")
	round()
	if w.maintain(ctx, epoch) {
		t.Fatal("maintenance fenced")
	}
	if n := objects(oldFiles); n != 0 {
		t.Fatalf("%d files of the dropped partition stored after its snapshots expired", n)
	}
	if got := lakeRows(t, tr.Lake(), id); got["old"] != 0 || got["new"] != 3 || got["a"] != 3 || got["b"] != 3 {
		t.Fatalf("lake after maintenance: %v", got)
	}
	if w.counters.expired.Load() != 1 || w.counters.lakeDeleted.Load() == 0 {
		t.Fatalf("counters: %d snapshots expired, %d objects deleted", w.counters.expired.Load(), w.counters.lakeDeleted.Load())
	}
	// A pass under a stale epoch stops.
	propose(catalog.RegisterCoordinator{Node: 1, NodeEpoch: 1, ExpectEpoch: epoch})
	if !w.maintain(ctx, epoch) {
		t.Fatal("maintenance under a stale epoch did not stop")
	}
	epoch = cat.View().Coordinator.Epoch

	propose(catalog.DropTable{Table: id})
	if objects(tiering.LakePrefix(id)) == 0 {
		t.Fatal("no lake before the drop")
	}
	if w.maintain(ctx, epoch) {
		t.Fatal("maintenance fenced")
	}
	if n := objects(tiering.LakePrefix(id)); n != 0 {
		t.Fatalf("%d objects of the dropped table's lake left", n)
	}
}
