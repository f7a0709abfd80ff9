package server

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/objstore"
	"github.com/minkdb/mink/tiering"
)

// TestTieringWorkerClearsTruncatedLake: after TRUNCATE, the worker starts a
// round of the table even though no bucket has new rows, and that round
// deletes the old rows from the lake; the status shows the new buckets,
// nothing to tier, and the buckets the round retired. Rows written after
// that reach the lake alone.
func TestTieringWorkerClearsTruncatedLake(t *testing.T) {
	ctx := context.Background()
	logger := quietLogger()
	cat, propose := memCatalog(t)
	propose(catalog.RegisterNode{Node: 1})
	epoch := propose(catalog.RegisterCoordinator{Node: 1, NodeEpoch: 1}).Epoch
	out := propose(catalog.CreateTable{Spec: catalog.TableSpec{Name: "t", Buckets: 2,
		Columns: []catalog.Column{{Name: "id", Type: "bigint", NotNull: true}, {Name: "p", Type: "text", NotNull: true}}}})
	id := out.Table
	src := memSource{}
	defer func() {
		for _, r := range src {
			r.Release()
		}
	}()
	// write gives each bucket one committed batch of rows tagged tag.
	write := func(buckets []catalog.BucketID, tag string) {
		for _, b := range buckets {
			le := propose(catalog.LeadBucket{Bucket: b, Node: 1, CoordinatorEpoch: epoch}).Epoch
			propose(catalog.OpenStream{Stream: catalog.StreamID(b), Epoch: le, Node: 1, NodeEpoch: 1})
			propose(catalog.CommitStreamObjects{Stream: catalog.StreamID(b), Epoch: le,
				Objects: []catalog.StreamObject{{Key: tag, Start: 0, End: 3, Size: 1}}})
			schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "p", Type: arrow.BinaryTypes.String}}, nil)
			bld := array.NewRecordBuilder(memory.DefaultAllocator, schema)
			bld.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 2, 3}, nil)
			bld.Field(1).(*array.StringBuilder).AppendValues([]string{tag, tag, tag}, nil)
			src[b] = bld.NewRecordBatch()
			bld.Release()
		}
	}
	store := objstore.NewMem()
	tr := tiering.New(tiering.Config{Store: store, StoreURL: "mem://lake", Meta: cat, Source: src, Logger: logger})
	s := &Server{cat: cat, logger: logger, cfg: Config{Tiering: true, TieringFreshness: time.Nanosecond}}
	w := &tieringWorker{s: s, tierer: tr}
	w.mu.tables = map[catalog.TableID]*tableTiering{}
	s.tiering = w
	runDue := func() {
		t.Helper()
		time.Sleep(time.Millisecond) // the freshness since the last attempt
		if w.runDue(ctx, epoch) {
			t.Fatal("worker fenced")
		}
		if st := w.table(id); st.lastErr != "" {
			t.Fatalf("round failed: %s", st.lastErr)
		}
	}
	status := func() TableTiering {
		t.Helper()
		for _, tt := range s.tieringStatus(epoch, time.Now()).Tables {
			if tt.ID == id {
				return tt
			}
		}
		t.Fatal("table missing from the status")
		return TableTiering{}
	}

	oldBuckets := out.Buckets
	write(oldBuckets, "old")
	runDue()
	runDue()
	if got := lakeRows(t, tr.Lake(), id); got["old"] != 6 {
		t.Fatalf("lake before TRUNCATE: %v", got)
	}

	var oldSnapshot int64
	cat.Read(func(v *catalog.View) { oldSnapshot = v.Tables[id].Tiering.LakeSnapshotID })
	newBuckets := propose(catalog.TruncateTable{Table: id}).Buckets
	committed := w.counters.committed.Load()
	runDue()
	if w.counters.committed.Load() != committed+1 {
		t.Fatal("no round committed after TRUNCATE with no new rows")
	}
	if got := lakeRows(t, tr.Lake(), id); len(got) != 0 {
		t.Fatalf("lake after the cleanup round: %v, want no rows", got)
	}
	if n := w.counters.retiredFiles.Load(); n != 2 {
		t.Fatalf("%d retired files counted, want 2", n)
	}
	st := status()
	if st.Tiered != 0 || st.LagRows != 0 || st.LagSeconds != 0 || len(st.Buckets) != 2 {
		t.Fatalf("status after the cleanup: %+v", st)
	}
	if st.LastRound == nil || !slices.Equal(st.LastRound.RetiredBuckets, oldBuckets) || st.LastRound.RetiredFiles != 2 {
		t.Fatalf("last round after the cleanup: %+v", st.LastRound)
	}
	// A primary-key restore reads only its bucket's rows, also from the
	// snapshot before the cleanup.
	s.lakeReader.Store(tiering.NewLakeReader(store, "mem://lake", nil))
	rowsOf := func(snapshot int64, b catalog.BucketID) int64 {
		t.Helper()
		var n int64
		schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "p", Type: arrow.BinaryTypes.String}}, nil)
		if err := s.kvLakeRows(ctx, id, snapshot, b, schema, func(rec arrow.RecordBatch) error {
			n += rec.NumRows()
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := rowsOf(oldSnapshot, newBuckets[0]); n != 0 {
		t.Fatalf("restore of new bucket %d from the snapshot before TRUNCATE read %d rows", newBuckets[0], n)
	}
	if n := rowsOf(oldSnapshot, oldBuckets[0]); n != 3 {
		t.Fatalf("restore of old bucket %d from the snapshot before TRUNCATE read %d rows, want 3", oldBuckets[0], n)
	}
	// Nothing left to retire or tier: no more rounds commit.
	runDue()
	if w.counters.committed.Load() != committed+1 {
		t.Fatal("a round committed with nothing to do")
	}

	write(newBuckets, "new")
	runDue() // sees the buckets behind
	runDue()
	if got := lakeRows(t, tr.Lake(), id); got["old"] != 0 || got["new"] != 6 {
		t.Fatalf("lake after new rows: %v", got)
	}
	if st := status(); st.Tiered != 6 || st.LagRows != 0 || st.LastRound == nil || len(st.LastRound.RetiredBuckets) != 0 {
		t.Fatalf("status after new rows: %+v (last round %+v)", st, st.LastRound)
	}
}
