package tiering

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apache/iceberg-go/table"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/objstore"
)

// truncate proposes TruncateTable and opens the table's new buckets; for
// a partitioned table it creates partition value again when value is not
// empty. It returns the table's buckets afterwards.
func (e *env) truncate(id catalog.TableID, value string) []catalog.BucketID {
	e.t.Helper()
	o := e.propose(catalog.TruncateTable{Table: id})
	e.openBuckets(o.Buckets)
	if value != "" {
		e.createPartition(id, value)
	}
	return sortedKeys(e.ends(id))
}

// viewBuckets are the table's buckets in the view, never nil (a nil
// ScanRequest.Buckets reads every bucket).
func (e *env) viewBuckets(id catalog.TableID) []catalog.BucketID {
	out := []catalog.BucketID{}
	e.cat.Read(func(v *catalog.View) { out = append(out, v.BucketsOf(id)...) })
	slices.Sort(out)
	return out
}

// currentSnapshot is the lake's current snapshot of the table.
func (e *env) currentSnapshot(id catalog.TableID) *table.Snapshot {
	e.t.Helper()
	tbl, err := NewLake(e.store.Inner(), storeURL).Load(e.ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	if tbl == nil {
		return nil
	}
	return tbl.CurrentSnapshot()
}

// idsOf are the ids of rows, sorted.
func idsOf(model map[catalog.BucketID][]row) []int64 {
	var out []int64
	for _, rows := range model {
		for _, r := range rows {
			out = append(out, r.id)
		}
	}
	slices.Sort(out)
	return out
}

// truncateEnv is a table (partitioned by dt when partitioned) with rows in
// two buckets, tiered, then truncated; with newRows, rows are written to
// its new buckets (a partition created again). It returns the new rows by
// bucket and the ids of the truncated ones.
func truncateEnv(t *testing.T, partitioned, newRows bool) (*env, catalog.TableID, map[catalog.BucketID][]row, []int64) {
	e := newEnv(t)
	by, value := "", ""
	if partitioned {
		by, value = "dt", "2026-01-01"
	}
	id := e.createTable(testSpec("events", 2, by))
	if partitioned {
		e.createPartition(id, value)
	}
	old := map[catalog.BucketID][]row{}
	for i, b := range sortedKeys(e.ends(id)) {
		old[b] = e.appendRows(id, b, int64(1000*i), 30+10*i)
	}
	if _, err := e.tierer().Round(e.ctx, id, e.epoch); err != nil {
		t.Fatal(err)
	}
	e.checkLake(id, old)
	if !newRows {
		value = ""
	}
	model := map[catalog.BucketID][]row{}
	for i, b := range e.truncate(id, value) {
		if newRows {
			model[b] = e.appendRows(id, b, int64(50_000+1000*i), 7+i)
		}
	}
	return e, id, model, idsOf(old)
}

// checkTruncated asserts that the lake's current snapshot holds exactly
// model's rows, that the log records them, and that mink's reader returns
// none of the truncated rows from the snapshot the log records, whether it
// is given the table's buckets or not.
func (e *env) checkTruncated(id catalog.TableID, model map[catalog.BucketID][]row, truncated []int64) {
	e.t.Helper()
	e.checkLake(id, model)
	ts := e.tiered(id)
	for b, off := range ts.Offsets {
		if _, ok := model[b]; !ok && off != 0 {
			e.t.Errorf("the log records bucket %d tiered to %d: it has no rows", b, off)
		}
	}
	if len(ts.Offsets) == 0 {
		return // readers read no lake rows
	}
	r := NewLakeReader(e.store.Inner(), storeURL, nil)
	schema := minkSchema(e.t, testSpec("events", 1, ""), "id")
	for _, buckets := range [][]catalog.BucketID{nil, e.viewBuckets(id)} {
		if buckets == nil && ts.LakeSnapshotID != e.currentSnapshot(id).SnapshotID {
			continue
		}
		ids, _, err := scanIDs(e.t, e, r, ScanRequest{Table: id, Snapshot: ts.LakeSnapshotID, Schema: schema, Buckets: buckets})
		if err != nil {
			e.t.Fatal(err)
		}
		if want := idsOf(model); !slices.Equal(ids, want) {
			e.t.Errorf("scan of snapshot %d (buckets %v): ids %v, want %v", ts.LakeSnapshotID, buckets, ids, want)
		}
	}
}

// TestTruncateClearsLake: the first round after TRUNCATE deletes every row
// of the retired buckets from the lake in its snapshot (an overwrite), with
// or without new rows, for unpartitioned and partitioned tables; a second
// round has nothing to do; the snapshot before the cleanup still holds the
// old rows, which mink's reader skips when given the table's buckets; and
// once that snapshot expires, the collector deletes the old files.
func TestTruncateClearsLake(t *testing.T) {
	for _, partitioned := range []bool{false, true} {
		for _, newRows := range []bool{false, true} {
			t.Run(fmt.Sprintf("partitioned=%v/new-rows=%v", partitioned, newRows), func(t *testing.T) {
				e, id, model, truncated := truncateEnv(t, partitioned, newRows)
				before := e.currentSnapshot(id).SnapshotID
				oldFiles := e.lakeDataFiles(id)
				tr := e.tierer()
				res, err := tr.Round(e.ctx, id, e.epoch)
				if err != nil {
					t.Fatal(err)
				}
				if !res.Committed || len(res.Retired) != 2 || res.FilesDeleted != 2 {
					t.Fatalf("cleanup round: %+v", res)
				}
				snap := e.currentSnapshot(id)
				if snap.Summary.Operation != table.OpOverwrite {
					t.Errorf("cleanup snapshot is a %q, want overwrite", snap.Summary.Operation)
				}
				if got := snap.Summary.Properties["deleted-data-files"]; got != "2" {
					t.Errorf("cleanup snapshot deleted %q data files, want 2", got)
				}
				e.checkTruncated(id, model, truncated)
				ts := e.tiered(id)
				if partitioned && !newRows {
					// No bucket to record the snapshot for: the log keeps
					// no offsets, and readers read no lake rows.
					if len(ts.Offsets) != 0 {
						t.Errorf("log records %v for a table without buckets", ts.Offsets)
					}
				} else if ts.LakeSnapshotID != snap.SnapshotID {
					t.Errorf("log records lake snapshot %d, the cleanup is %d", ts.LakeSnapshotID, snap.SnapshotID)
				}
				if res, err := tr.Round(e.ctx, id, e.epoch); err != nil || res.Committed || res.Repaired || len(res.Retired) > 0 {
					t.Fatalf("round after the cleanup: %+v, %v", res, err)
				}

				// The old snapshot keeps the truncated rows; given the
				// table's buckets, the reader skips them.
				r := NewLakeReader(e.store.Inner(), storeURL, nil)
				schema := minkSchema(t, testSpec("events", 1, ""), "id")
				ids, _, err := scanIDs(t, e, r, ScanRequest{Table: id, Snapshot: before, Schema: schema})
				if err != nil || !slices.Equal(ids, truncated) {
					t.Fatalf("old snapshot read whole: %d rows (%v), want %d", len(ids), err, len(truncated))
				}
				ids, _, err = scanIDs(t, e, r, ScanRequest{Table: id, Snapshot: before, Schema: schema, Buckets: e.viewBuckets(id)})
				if err != nil || len(ids) != 0 {
					t.Fatalf("old snapshot read for the new buckets: %v (%v), want none", ids, err)
				}

				// Expiry, then the collector, delete the old files.
				if _, err := tr.Expire(e.ctx, id, e.epoch, ExpirePolicy{KeepLast: 1}); err != nil {
					t.Fatal(err)
				}
				if _, err := NewLakeCollector(NewLake(e.store.Inner(), storeURL), 0).Collect(e.ctx, []catalog.TableID{id}); err != nil {
					t.Fatal(err)
				}
				for _, f := range oldFiles {
					if _, err := e.store.Inner().Get(e.ctx, f.Key); !errors.Is(err, objstore.ErrNotFound) {
						t.Errorf("truncated file %s after expiry and GC: %v", f.Key, err)
					}
				}
				e.checkStoreIsReferenced(id)
				e.checkTruncated(id, model, truncated)
			})
		}
	}
}

// TestTruncatePKTable: a primary-key table's lake after TRUNCATE holds only
// the rows of its new buckets.
func TestTruncatePKTable(t *testing.T) {
	for _, partitioned := range []bool{false, true} {
		for _, newRows := range []bool{false, true} {
			t.Run(fmt.Sprintf("partitioned=%v/new-rows=%v", partitioned, newRows), func(t *testing.T) {
				e := newEnv(t)
				s := seed(t)
				id := e.createTable(pkSpec("kv", 2, partitioned))
				if partitioned {
					e.createPartition(id, "2026-01-01")
				}
				m := newPKModel(e, id, s)
				for _, b := range sortedKeys(e.ends(id)) {
					m.change(b, 40)
				}
				tr := e.tierer()
				if _, err := tr.Round(e.ctx, id, e.epoch); err != nil {
					t.Fatal(err)
				}
				m.check()
				if len(m.rows) == 0 {
					t.Fatal("the model has no rows to truncate")
				}
				value := ""
				if partitioned && newRows {
					value = "2026-01-02"
				}
				buckets := e.truncate(id, value)
				m = newPKModel(e, id, s+1)
				if newRows {
					for _, b := range buckets {
						m.change(b, 30)
					}
				}
				res, err := tr.Round(e.ctx, id, e.epoch)
				if err != nil {
					t.Fatal(err)
				}
				if !res.Committed || len(res.Retired) != 2 {
					t.Fatalf("cleanup round: %+v", res)
				}
				m.check()
				if res, err := tr.Round(e.ctx, id, e.epoch); err != nil || res.Committed || len(res.Retired) > 0 {
					t.Fatalf("round after the cleanup: %+v, %v", res, err)
				}
			})
		}
	}
}

// TestTruncateDuringRound: a round planned before TRUNCATE commits its lake
// snapshot (the old buckets' rows) after it, and its CommitTieringRound is
// rejected (the buckets are gone). The log keeps no offsets meanwhile, so
// readers read no lake rows; the next round deletes those rows too.
func TestTruncateDuringRound(t *testing.T) {
	for _, newRows := range []bool{false, true} {
		t.Run(fmt.Sprintf("new-rows=%v", newRows), func(t *testing.T) {
			e := newEnv(t)
			id := e.createTable(testSpec("events", 2, ""))
			var truncated []int64
			for i, b := range sortedKeys(e.ends(id)) {
				for _, r := range e.appendRows(id, b, int64(1000*i), 20) {
					truncated = append(truncated, r.id)
				}
			}
			tr := e.tierer()
			var once sync.Once
			model := map[catalog.BucketID][]row{}
			_, err := tr.RoundWithProgress(e.ctx, id, e.epoch, func(p Progress) {
				if p.Stage != "planned" {
					return
				}
				once.Do(func() {
					for i, b := range e.truncate(id, "") {
						if newRows {
							model[b] = e.appendRows(id, b, int64(50_000+1000*i), 5)
						}
					}
				})
			})
			if !errors.Is(err, catalog.ErrNotFound) {
				t.Fatalf("round planned before TRUNCATE: %v, want its record rejected (ErrNotFound)", err)
			}
			if ts := e.tiered(id); len(ts.Offsets) != 0 {
				t.Fatalf("log records %v after TRUNCATE", ts.Offsets)
			}
			if got := len(e.readLake(id)); got != 2 {
				t.Fatalf("the late round's lake snapshot has %d buckets, want the 2 old ones", got)
			}
			res, err := tr.Round(e.ctx, id, e.epoch)
			if err != nil {
				t.Fatal(err)
			}
			if !res.Committed || len(res.Retired) != 2 || res.Repaired {
				t.Fatalf("cleanup round: %+v", res)
			}
			e.checkTruncated(id, model, truncated)
		})
	}
}

// TestTruncateRoundFailsAtEveryWrite fails the first round after TRUNCATE
// at each of its object-store writes (before the write, and with the
// response lost after it), then at its CommitTieringRound: whatever the lake
// holds then, mink's reader of the view's pin returns no truncated row, and
// the next round leaves exactly the new rows in the lake, recorded.
func TestTruncateRoundFailsAtEveryWrite(t *testing.T) {
	for _, newRows := range []bool{false, true} {
		e, id, _, _ := truncateEnv(t, false, newRows)
		var puts []string
		var mu sync.Mutex
		e.store.SetHooks(objstore.Hooks{Before: func(_ context.Context, op objstore.Op, key string) error {
			if op == objstore.OpPut {
				mu.Lock()
				puts = append(puts, key)
				mu.Unlock()
			}
			return nil
		}})
		if _, err := e.tierer().Round(e.ctx, id, e.epoch); err != nil {
			t.Fatal(err)
		}
		if len(puts) < 3 {
			t.Fatalf("the cleanup round made %d writes: %v", len(puts), puts)
		}
		for i, key := range puts {
			for _, lost := range []bool{false, true} {
				base := key[strings.LastIndexByte(key, '/')+1:]
				t.Run(fmt.Sprintf("new-rows=%v/write%d-%s-lost=%v", newRows, i, base[:min(len(base), 12)], lost), func(t *testing.T) {
					e, id, model, truncated := truncateEnv(t, false, newRows)
					e.failPut(i, lost)
					tr := e.tierer()
					if _, err := tr.Round(e.ctx, id, e.epoch); err == nil {
						t.Fatalf("round succeeded with write %d (%s) failing", i, key)
					}
					e.store.SetHooks(objstore.Hooks{})
					// The log keeps no offsets: readers read nothing of
					// the lake, whatever it holds.
					if ts := e.tiered(id); len(ts.Offsets) != 0 {
						t.Fatalf("log records %v after a failed cleanup", ts.Offsets)
					}
					if _, err := tr.Round(e.ctx, id, e.epoch); err != nil {
						t.Fatal(err)
					}
					e.checkTruncated(id, model, truncated)
					checkGC(t, e, id, model)
				})
			}
		}
		t.Run(fmt.Sprintf("new-rows=%v/record-lost", newRows), func(t *testing.T) {
			for _, afterApply := range []bool{false, true} {
				e, id, model, truncated := truncateEnv(t, false, newRows)
				e.meta.failTiering(1, afterApply)
				tr := e.tierer()
				if _, err := tr.Round(e.ctx, id, e.epoch); !errors.Is(err, errLostProposal) {
					t.Fatalf("round with its record lost: %v", err)
				}
				res, err := tr.Round(e.ctx, id, e.epoch)
				if err != nil {
					t.Fatal(err)
				}
				if res.Repaired == afterApply || res.Committed {
					t.Fatalf("round after the lost record (applied: %v): %+v", afterApply, res)
				}
				e.checkTruncated(id, model, truncated)
			}
		})
	}
}

// TestCompactSkipsRetiredBuckets: compaction before the cleanup round does
// not merge the files of truncated buckets into new files.
func TestCompactSkipsRetiredBuckets(t *testing.T) {
	e := newEnv(t)
	id := e.createTable(testSpec("events", 1, ""))
	b := sortedKeys(e.ends(id))[0]
	tr := e.tierer()
	var truncated []int64
	for i := range 4 {
		for _, r := range e.appendRows(id, b, int64(10*i), 10) {
			truncated = append(truncated, r.id)
		}
		if _, err := tr.Round(e.ctx, id, e.epoch); err != nil {
			t.Fatal(err)
		}
	}
	nb := e.truncate(id, "")[0]
	model := map[catalog.BucketID][]row{nb: e.appendRows(id, nb, 500, 3)}
	res, err := tr.Compact(e.ctx, id, e.epoch, CompactPolicy{TargetFileSize: 1 << 20, MinFiles: 2})
	if err != nil || res.Committed {
		t.Fatalf("compaction of a truncated table's files: %+v, %v", res, err)
	}
	if _, err := tr.Round(e.ctx, id, e.epoch); err != nil {
		t.Fatal(err)
	}
	e.checkTruncated(id, model, truncated)
}

// TestRoundRetiresDroppedPartitionRows: rows tiered into a partition after
// retention's lake delete and before its DropPartition (so still named by
// the lake snapshot's offsets) are deleted by the next round.
func TestRoundRetiresDroppedPartitionRows(t *testing.T) {
	e := newEnv(t)
	id := e.createTable(testSpec("events", 1, "dt"))
	gone := e.createPartition(id, "2026-01-01")[0]
	kept := e.createPartition(id, "2026-01-02")[0]
	model := map[catalog.BucketID][]row{kept: e.appendRows(id, kept, 0, 5)}
	truncated := idsOf(map[catalog.BucketID][]row{gone: e.appendRows(id, gone, 100, 5)})
	tr := e.tierer()
	if _, err := tr.Round(e.ctx, id, e.epoch); err != nil {
		t.Fatal(err)
	}
	var part catalog.PartitionID
	e.cat.Read(func(v *catalog.View) { part = v.Buckets[gone].Partition })
	e.propose(catalog.DropPartition{Table: id, Partition: part})
	res, err := tr.Round(e.ctx, id, e.epoch)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Committed || !slices.Equal(res.Retired, []catalog.BucketID{gone}) {
		t.Fatalf("round after the drop: %+v", res)
	}
	e.checkTruncated(id, model, truncated)
}

// laggingMeta serves a fixed, older view (a deposed coordinator whose view
// lags behind the log) and proposes to the real log.
type laggingMeta struct {
	Metadata
	view *catalog.View
}

func (m laggingMeta) Read(fn func(v *catalog.View)) { fn(m.view) }

// TestTruncateLaggingRound: a round whose view predates TRUNCATE (and any
// round) runs after a round of the new buckets and tiers the old ones (its
// lake commit succeeds, its record is rejected). The next round neither records that snapshot (it
// holds truncated rows), not even when its own lake commit fails, nor leaves
// its rows in the lake.
func TestTruncateLaggingRound(t *testing.T) {
	e := newEnv(t)
	id := e.createTable(testSpec("events", 2, ""))
	old := map[catalog.BucketID][]row{}
	for i, b := range sortedKeys(e.ends(id)) {
		old[b] = e.appendRows(id, b, int64(1000*i), 10)
	}
	tr := e.tierer()
	before := e.cat.View() // the old buckets have rows, none tiered
	model := map[catalog.BucketID][]row{}
	for i, b := range e.truncate(id, "") {
		model[b] = e.appendRows(id, b, int64(50_000+1000*i), 4)
	}
	if _, err := tr.Round(e.ctx, id, e.epoch); err != nil {
		t.Fatal(err)
	}
	cleaned := e.tiered(id).LakeSnapshotID

	lagging := New(Config{Store: e.store, StoreURL: storeURL, Meta: laggingMeta{Metadata: e.cat, view: before}, Source: e.src})
	res, err := lagging.Round(e.ctx, id, e.epoch)
	if !res.Committed || !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("lagging round: %+v, %v; want a lake commit whose record is rejected", res, err)
	}
	if got := len(e.readLake(id)); got != 4 {
		t.Fatalf("the lagging round's snapshot has %d buckets, want the 2 old and 2 new", got)
	}

	// The next round's lake commit fails: the log stays at the cleanup.
	e.store.SetHooks(objstore.Hooks{Before: func(_ context.Context, op objstore.Op, key string) error {
		if op == objstore.OpPut && strings.HasSuffix(key, ".metadata.json") {
			return objstore.ErrInjected
		}
		return nil
	}})
	if _, err := tr.Round(e.ctx, id, e.epoch); err == nil {
		t.Fatal("round succeeded with its lake commit failing")
	}
	if got := e.tiered(id).LakeSnapshotID; got != cleaned {
		t.Fatalf("the log records lake snapshot %d, want %d: a snapshot with truncated rows was recorded", got, cleaned)
	}
	e.store.SetHooks(objstore.Hooks{})
	res, err = tr.Round(e.ctx, id, e.epoch)
	if err != nil || !res.Committed || len(res.Retired) != 2 || res.Repaired {
		t.Fatalf("round after the lagging one: %+v, %v", res, err)
	}
	e.checkTruncated(id, model, idsOf(old))
}
