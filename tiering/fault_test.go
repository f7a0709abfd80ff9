package tiering

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/objstore"
)

// faultEnv is a table with two buckets and rows in both, ready for a round.
func faultEnv(t *testing.T) (*env, catalog.TableID, map[catalog.BucketID][]row) {
	e := newEnv(t)
	id := e.createTable(testSpec("events", 2, ""))
	bs := sortedKeys(e.ends(id))
	model := map[catalog.BucketID][]row{}
	model[bs[0]] = e.appendRows(id, bs[0], 0, 40)
	model[bs[1]] = e.appendRows(id, bs[1], 100, 25)
	return e, id, model
}

// lakePuts counts the object-store writes of one successful first round.
func lakePuts(t *testing.T) []string {
	e, id, _ := faultEnv(t)
	var mu sync.Mutex
	var keys []string
	e.store.SetHooks(objstore.Hooks{Before: func(_ context.Context, op objstore.Op, key string) error {
		if op == objstore.OpPut {
			mu.Lock()
			keys = append(keys, key)
			mu.Unlock()
		}
		return nil
	}})
	if _, err := e.tierer().Round(e.ctx, id, e.epoch); err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestRoundFailsAtEveryWrite fails a round at each of its object-store
// writes, once before the write reaches the store and once after it took
// effect (the response is lost), then runs the next round without faults:
// the lake and the log hold every row exactly once, and the files of the
// failed round are garbage that the collector removes without touching the
// lake's live files.
func TestRoundFailsAtEveryWrite(t *testing.T) {
	puts := lakePuts(t)
	if len(puts) < 5 {
		t.Fatalf("a round made only %d writes: %v", len(puts), puts)
	}
	for i, key := range puts {
		for _, lost := range []bool{false, true} {
			kind := "data"
			switch base := key[strings.LastIndexByte(key, '/')+1:]; {
			case strings.HasSuffix(base, ".metadata.json"):
				kind = "metadata-" + strings.TrimSuffix(base, ".metadata.json")
			case strings.HasPrefix(base, "snap-"):
				kind = "manifest-list"
			case strings.HasSuffix(base, ".avro"):
				kind = "manifest"
			}
			name := fmt.Sprintf("write%d-%s-lost=%v", i, kind, lost)
			t.Run(name, func(t *testing.T) {
				e, id, model := faultEnv(t)
				e.failPut(i, lost)
				tr := e.tierer()
				if _, err := tr.Round(e.ctx, id, e.epoch); err == nil {
					t.Fatalf("round succeeded with write %d (%s) failing", i, key)
				}
				e.store.SetHooks(objstore.Hooks{})
				res, err := tr.Round(e.ctx, id, e.epoch)
				if err != nil {
					t.Fatal(err)
				}
				// Only a lost response of the final metadata put leaves a
				// committed lake snapshot behind, which the next round
				// records instead of tiering again.
				lastPut := i == len(puts)-1
				if lost && lastPut {
					if !res.Repaired || res.Committed {
						t.Fatalf("after a lost lake commit response: %+v", res)
					}
				} else if !res.Committed || res.Rows != 65 {
					t.Fatalf("retry round: %+v", res)
				}
				e.checkLake(id, model)
				checkGC(t, e, id, model)
			})
		}
	}
}

// checkGC runs the lake collector with no delay: it may delete only garbage,
// and the lake must read the same afterwards.
func checkGC(t *testing.T, e *env, id catalog.TableID, model map[catalog.BucketID][]row) {
	t.Helper()
	before, err := e.store.Inner().List(e.ctx, LakePrefix(id))
	if err != nil {
		t.Fatal(err)
	}
	refs, err := NewLake(e.store.Inner(), storeURL).references(e.ctx, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k := range refs {
		if _, err := e.store.Inner().Get(e.ctx, k); err != nil {
			t.Fatalf("lake references %s: %v", k, err)
		}
	}
	gc := NewLakeCollector(NewLake(e.store.Inner(), storeURL), 0)
	st, err := gc.Collect(e.ctx, []catalog.TableID{id})
	if err != nil {
		t.Fatal(err)
	}
	after, err := e.store.Inner().List(e.ctx, LakePrefix(id))
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(refs) || st.Deleted != len(before)-len(refs) {
		t.Fatalf("gc deleted %d of %d objects, %d referenced, %d left", st.Deleted, len(before), len(refs), len(after))
	}
	e.checkLake(id, model)
}

// TestRoundProposeFails: the lake commit succeeds and CommitTieringRound is
// lost, before it reaches the log or after it was applied. The next round
// keeps the offsets right: it records the lake snapshot (repair) or finds the
// log already up to date, and tiers nothing twice.
func TestRoundProposeFails(t *testing.T) {
	for _, afterApply := range []bool{false, true} {
		t.Run(fmt.Sprintf("applied=%v", afterApply), func(t *testing.T) {
			e, id, model := faultEnv(t)
			tr := e.tierer()
			e.meta.failTiering(1, afterApply)
			first, err := tr.Round(e.ctx, id, e.epoch)
			if !errors.Is(err, errLostProposal) || !first.Committed {
				t.Fatalf("round with a lost proposal: %+v, %v", first, err)
			}
			if got := e.tiered(id).LakeSequence; (got == first.Sequence) != afterApply {
				t.Fatalf("log lake sequence %d after the lost proposal (applied=%v)", got, afterApply)
			}
			res, err := tr.Round(e.ctx, id, e.epoch)
			if err != nil {
				t.Fatal(err)
			}
			if res.Committed || res.Repaired == afterApply {
				t.Fatalf("round after the lost proposal: %+v", res)
			}
			if ts := e.tiered(id); ts.LakeSnapshotID != first.SnapshotID || ts.LakeSequence != first.Sequence {
				t.Fatalf("log records %+v, the lake is at snapshot %d seq %d", ts, first.SnapshotID, first.Sequence)
			}
			e.checkLake(id, model)

			// And tiering goes on from there.
			bs := sortedKeys(model)
			model[bs[1]] = append(model[bs[1]], e.appendRows(id, bs[1], 500, 9)...)
			if res, err := tr.Round(e.ctx, id, e.epoch); err != nil || res.Rows != 9 {
				t.Fatalf("next round: %+v, %v", res, err)
			}
			e.checkLake(id, model)
		})
	}
}

// TestRoundFencedBeforeLakeCommit: a new coordinator registers while a round
// of the old one writes its files. The old round notices at its heartbeat and
// commits nothing; the new holder's round tiers everything once.
func TestRoundFencedBeforeLakeCommit(t *testing.T) {
	e, id, model := faultEnv(t)
	old := e.epoch
	var once sync.Once
	e.store.SetHooks(objstore.Hooks{Before: func(_ context.Context, op objstore.Op, key string) error {
		if op == objstore.OpPut && strings.Contains(key, "/data/") {
			once.Do(e.newCoordinator)
		}
		return nil
	}})
	res, err := e.tierer().Round(e.ctx, id, old)
	if !errors.Is(err, ErrFenced) || res.Committed {
		t.Fatalf("round of the fenced coordinator: %+v, %v", res, err)
	}
	e.store.SetHooks(objstore.Hooks{})
	if tbl, err := NewLake(e.store.Inner(), storeURL).Load(e.ctx, id); err != nil || tbl.CurrentSnapshot() != nil {
		t.Fatalf("the fenced round left a lake snapshot: %v", err)
	}
	if _, err := e.tierer().Round(e.ctx, id, e.epoch); err != nil {
		t.Fatal(err)
	}
	e.checkLake(id, model)
	checkGC(t, e, id, model)
}

// TestRoundFencedAfterLakeCommit: the old coordinator's round commits its
// lake snapshot just as the new coordinator registers. Its late
// CommitTieringRound is rejected (stale epoch); the new holder records the
// snapshot from the lake and tiers nothing twice.
func TestRoundFencedAfterLakeCommit(t *testing.T) {
	e, id, model := faultEnv(t)
	old := e.epoch
	var once sync.Once
	e.store.SetHooks(objstore.Hooks{After: func(_ context.Context, op objstore.Op, key string, err error) error {
		if op == objstore.OpPut && strings.HasSuffix(key, "v2.metadata.json") && err == nil {
			once.Do(e.newCoordinator)
		}
		return err
	}})
	res, err := e.tierer().Round(e.ctx, id, old)
	if !errors.Is(err, ErrFenced) || !res.Committed {
		t.Fatalf("round of the fenced coordinator: %+v, %v", res, err)
	}
	e.store.SetHooks(objstore.Hooks{})
	if ts := e.tiered(id); ts.Offsets != nil {
		t.Fatalf("a stale round was recorded: %+v", ts)
	}
	res, err = e.tierer().Round(e.ctx, id, e.epoch)
	if err != nil || !res.Repaired || res.Committed {
		t.Fatalf("new holder's round: %+v, %v", res, err)
	}
	e.checkLake(id, model)
}

// TestRoundLosesCommitRace: the old coordinator's round is paused just before
// its lake commit while the new coordinator runs a whole round. The old round
// then loses the create-only commit (ErrLakeConflict), its files are garbage,
// and the lake holds each row once.
func TestRoundLosesCommitRace(t *testing.T) {
	e, id, model := faultEnv(t)
	old := e.epoch
	paused, resume := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	first := true
	e.store.SetHooks(objstore.Hooks{Before: func(_ context.Context, op objstore.Op, key string) error {
		if op == objstore.OpPut && strings.HasSuffix(key, "v2.metadata.json") {
			mu.Lock()
			pause := first
			first = false
			mu.Unlock()
			if pause {
				close(paused)
				<-resume
			}
		}
		return nil
	}})
	done := make(chan error, 1)
	go func() {
		_, err := e.tierer().Round(e.ctx, id, old)
		done <- err
	}()
	<-paused
	e.newCoordinator()
	res, err := e.tierer().Round(e.ctx, id, e.epoch)
	if err != nil || !res.Committed || res.Rows != 65 {
		t.Fatalf("new holder's round: %+v, %v", res, err)
	}
	close(resume)
	if err := <-done; !errors.Is(err, ErrLakeConflict) {
		t.Fatalf("old holder's round: %v", err)
	}
	e.store.SetHooks(objstore.Hooks{})
	e.checkLake(id, model)
	checkGC(t, e, id, model)
}

// TestRoundStaleEpochAtStart: a round under an epoch that is not the
// coordinator's does nothing.
func TestRoundStaleEpochAtStart(t *testing.T) {
	e, id, _ := faultEnv(t)
	old := e.epoch
	e.newCoordinator()
	if _, err := e.tierer().Round(e.ctx, id, old); !errors.Is(err, ErrFenced) {
		t.Fatalf("round under a stale epoch: %v", err)
	}
	if objs, _ := e.store.Inner().List(e.ctx, "lake/"); len(objs) != 0 {
		t.Fatalf("a stale round wrote %d objects", len(objs))
	}
}

// TestGCKeepsUnreferencedWithinDelay: garbage younger than the delay stays.
func TestGCKeepsUnreferencedWithinDelay(t *testing.T) {
	e, id, model := faultEnv(t)
	e.store.SetHooks(objstore.Hooks{Before: func(_ context.Context, op objstore.Op, key string) error {
		if op == objstore.OpPut && strings.Contains(key, "/metadata/v2") {
			return objstore.ErrInjected
		}
		return nil
	}})
	if _, err := e.tierer().Round(e.ctx, id, e.epoch); err == nil {
		t.Fatal("round succeeded with its commit failing")
	}
	e.store.SetHooks(objstore.Hooks{})
	gc := NewLakeCollector(NewLake(e.store.Inner(), storeURL), 1<<40)
	st, err := gc.Collect(e.ctx, []catalog.TableID{id})
	if err != nil || st.Deleted != 0 || st.Waiting == 0 {
		t.Fatalf("collect within the delay: %+v, %v", st, err)
	}
	if _, err := e.tierer().Round(e.ctx, id, e.epoch); err != nil {
		t.Fatal(err)
	}
	e.checkLake(id, model)
}

// TestRoundHeartbeatStopsWriting: once the coordinator epoch moves on, a
// round writes no further files.
func TestRoundHeartbeatStopsWriting(t *testing.T) {
	defer func(n int) { fileRows = n }(fileRows)
	fileRows = 5
	e := newEnv(t)
	id := e.createTable(testSpec("events", 1, ""))
	b := sortedKeys(e.ends(id))[0]
	e.appendRows(id, b, 0, 50) // 10 files' worth
	old := e.epoch
	var mu sync.Mutex
	puts := 0
	e.store.SetHooks(objstore.Hooks{Before: func(_ context.Context, op objstore.Op, key string) error {
		if op == objstore.OpPut && strings.Contains(key, "/data/") {
			mu.Lock()
			puts++
			first := puts == 1
			mu.Unlock()
			if first {
				e.newCoordinator()
			}
		}
		return nil
	}})
	if _, err := e.tierer().Round(e.ctx, id, old); !errors.Is(err, ErrFenced) {
		t.Fatalf("round after the epoch moved: %v", err)
	}
	if puts != 1 {
		t.Fatalf("the fenced round wrote %d data files, want 1", puts)
	}
}

// TestGCAcrossRounds: one collector (with its cache of manifests) over
// several rounds, each preceded by a failed one: after every pass the store
// holds exactly what the lake references.
func TestGCAcrossRounds(t *testing.T) {
	e := newEnv(t)
	id := e.createTable(testSpec("events", 2, ""))
	bs := sortedKeys(e.ends(id))
	model := map[catalog.BucketID][]row{}
	gc := NewLakeCollector(NewLake(e.store.Inner(), storeURL), 0)
	for i := range 4 {
		b := bs[i%2]
		model[b] = append(model[b], e.appendRows(id, b, int64(i*100), 5+i)...)
		version, err := NewLake(e.store.Inner(), storeURL).currentVersion(e.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		next := fmt.Sprintf("/metadata/v%d.metadata.json", max(version, 1)+1)
		e.store.SetHooks(objstore.Hooks{Before: func(_ context.Context, op objstore.Op, key string) error {
			if op == objstore.OpPut && strings.HasSuffix(key, next) {
				return objstore.ErrInjected
			}
			return nil
		}})
		if _, err := e.tierer().Round(e.ctx, id, e.epoch); err == nil {
			t.Fatalf("round %d succeeded with its commit failing", i)
		}
		e.store.SetHooks(objstore.Hooks{})
		if _, err := e.tierer().Round(e.ctx, id, e.epoch); err != nil {
			t.Fatal(err)
		}
		if _, err := gc.Collect(e.ctx, []catalog.TableID{id}); err != nil {
			t.Fatal(err)
		}
		refs, err := NewLake(e.store.Inner(), storeURL).references(e.ctx, id, nil)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := e.store.Inner().List(e.ctx, LakePrefix(id))
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if !refs[o.Key] {
				t.Errorf("pass %d left garbage %s", i, o.Key)
			}
		}
		if len(objs) != len(refs) {
			t.Fatalf("pass %d: %d objects stored, %d referenced", i, len(objs), len(refs))
		}
		e.checkLake(id, model)
	}
}
