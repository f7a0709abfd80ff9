package buckets

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/kv"
	"github.com/minkdb/mink/kv/kvcodec"
	"github.com/minkdb/mink/metalog"
	"github.com/minkdb/mink/objstore"
	"github.com/minkdb/mink/plan"
)

// waitCommitted waits until the bucket's stream has committed everything
// acknowledged (its objects reach b.End()).
func waitCommitted(t *testing.T, cat *metalog.Catalog, b *KVBucket) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var end uint64
		cat.Read(func(v *catalog.View) { end = v.Streams[catalog.StreamID(b.id)].End })
		if end == b.End() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("bucket %d: committed end %d, acknowledged end %d", b.id, end, b.End())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A primary-key bucket whose changelog retention trimmed below its oldest
// retained KV snapshot reopens exactly: from the newest snapshot, and, with
// that one corrupt, from the older one (whose offset the trim respected).
// With every retained snapshot unusable it stays Unavailable with
// ErrStateLost naming the trimmed start; it never serves a partial state.
// Once a snapshot is repaired the next attempt opens it exactly.
func TestKVBucketTrimmedChangelogReopen(t *testing.T) {
	logs := &syncBuffer{}
	env := &testEnv{t: t, log: metalog.NewMemLog(), store: objstore.NewMem(),
		logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelError}))}
	live := func(catalog.NodeID) bool { return true }
	dir := t.TempDir()
	m, cat := env.startKVNode(1, live, dir, time.Hour, nil)
	ctx := context.Background()
	if _, err := cat.Propose(ctx, catalog.RegisterCoordinator{Node: 1, NodeEpoch: 1}); err != nil {
		t.Fatal(err)
	}
	spec := kvSpec
	spec.Options = map[string]string{"tiering": "off"}
	out, err := cat.Propose(ctx, catalog.CreateTable{Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	id := out.Buckets[0]
	if _, err := cat.Propose(ctx, catalog.LeadBucket{Bucket: id, Node: 1, CoordinatorEpoch: 1}); err != nil {
		t.Fatal(err)
	}
	b := waitKV(t, m, id)
	model := kvModel{}
	for round := 0; round < 3; round++ {
		for j := 0; j < 20; j++ {
			model, _ = writeModel(t, b, model, []kw{
				{kvcodec.OpUpsert, int64(j*3 + round), fmt.Sprintf("r%d.%d", round, j)},
				{kvcodec.OpDelete, int64(j + round), ""},
			})
		}
		waitCommitted(t, cat, b)
		if round < 2 {
			if err := b.Snapshot(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	snaps := retained(cat, id)
	if len(snaps) != 2 || snaps[0].LogOffset == 0 {
		t.Fatalf("retained snapshots %+v, want two above offset 0", snaps)
	}

	// Trim as the retention loop would: to the last object boundary at or
	// below the oldest retained snapshot. Past it is refused.
	var st catalog.Stream
	cat.Read(func(v *catalog.View) { st = *v.Streams[catalog.StreamID(id)] })
	point := plan.TrimPoint(&st, snaps[0].LogOffset, time.Time{})
	if point == 0 {
		t.Fatalf("no trim point below snapshot offset %d; objects %+v", snaps[0].LogOffset, st.Objects)
	}
	if _, err := cat.Propose(ctx, catalog.TrimStream{Stream: st.ID, Start: st.End, CoordinatorEpoch: 1}); !errors.Is(err, catalog.ErrInvalid) {
		t.Fatalf("a trim to the end %d, past the oldest snapshot at %d: %v, want ErrInvalid", st.End, snaps[0].LogOffset, err)
	}
	if _, err := cat.Propose(ctx, catalog.TrimStream{Stream: st.ID, Start: point, CoordinatorEpoch: 1}); err != nil {
		t.Fatal(err)
	}
	t.Logf("snapshots at %d and %d, changelog trimmed to %d, end %d", snaps[0].LogOffset, snaps[1].LogOffset, point, b.End())
	if b.Start() != point {
		t.Fatalf("Start() = %d, want %d", b.Start(), point)
	}
	// The changelog now starts at the trim point.
	batches, err := b.ReadChangelog(ctx, 0, b.End())
	if err != nil {
		t.Fatal(err)
	}
	if len(batches) == 0 || batches[0].Offset != point {
		t.Fatalf("changelog after the trim: %d batches, first at %v, want first at %d", len(batches), batches, point)
	}
	ReleaseBatches(batches)

	reopen := func() *KVBucket {
		t.Helper()
		m.Close()
		loseDisk(t, dir) // restore from the object store
		m, _ = env.startKVNode(1, live, dir, time.Hour, nil)
		return waitKV(t, m, id)
	}
	b = reopen()
	if got := kvModel(scanAll(t, b)); got.String() != model.String() {
		t.Fatalf("reopened after the trim: %v\nwant %v", got, model)
	}
	model, _ = writeModel(t, b, model, []kw{{kvcodec.OpUpsert, 500, "after reopen"}})

	// The newest snapshot's manifest is gone: the older one (at or above
	// the trim point) still restores the exact state.
	newest, err := env.store.Get(ctx, snaps[1].Manifest)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.store.Delete(ctx, snaps[1].Manifest); err != nil {
		t.Fatal(err)
	}
	b = reopen()
	if got := kvModel(scanAll(t, b)); got.String() != model.String() {
		t.Fatalf("restored from the older snapshot after the trim: %v\nwant %v", got, model)
	}

	// Both are gone: a full replay would need the trimmed offsets.
	if err := env.store.Delete(ctx, snaps[0].Manifest); err != nil {
		t.Fatal(err)
	}
	m.Close()
	loseDisk(t, dir)
	m, _ = env.startKVNode(1, live, dir, time.Hour, nil)
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := m.KVBucket(id)
		if err == nil {
			t.Fatal("the bucket serves with every retained snapshot gone and its changelog trimmed")
		}
		if errors.Is(err, ErrStateLost) {
			if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), fmt.Sprintf("trimmed to offset %d", point)) ||
				!strings.Contains(err.Error(), snaps[0].Manifest) {
				t.Fatalf("state-lost error %q: want Unavailable, naming the trim point %d and the missing manifest", err, point)
			}
			break
		}
		if !errors.Is(err, ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("with every snapshot gone: %v, want ErrUnavailable wrapping ErrStateLost", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	if _, err := m.KVBucket(id); !errors.Is(err, ErrStateLost) {
		t.Fatalf("later: %v, want still ErrStateLost", err)
	}
	if l := logs.String(); !strings.Contains(l, "cannot be restored") {
		t.Fatalf("the lost state was not logged at error level; log:\n%s", l)
	}

	// Repair: put the newest snapshot's manifest back; a later attempt
	// opens the bucket with the exact state.
	if err := env.store.PutIfAbsent(ctx, snaps[1].Manifest, newest); err != nil {
		t.Fatal(err)
	}
	b = waitKV(t, m, id)
	if got := kvModel(scanAll(t, b)); got.String() != model.String() {
		t.Fatalf("after repairing a snapshot: %v\nwant %v", got, model)
	}
}

// A tiered primary-key bucket whose retained KV snapshots are all gone after
// its changelog was trimmed is restored from the lake: the rows of the lake
// snapshot the view records, at the bucket's tiered offset, then the
// changelog from there. The state is exact. A lake read that fails keeps
// the bucket Unavailable with ErrStateLost naming the lake's error.
func TestKVBucketTrimmedRestoreFromLake(t *testing.T) {
	logs := &syncBuffer{}
	var (
		lakeMu    sync.Mutex
		lakeRows  kvModel // the bucket's state at the tiered offset
		lakeSnap  int64
		lakeErr   error
		lakeReads int
	)
	env := &testEnv{t: t, log: metalog.NewMemLog(), store: objstore.NewMem(),
		logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelError})),
		kvLake: func(ctx context.Context, table catalog.TableID, snapshot int64, bucket catalog.BucketID, schema *arrow.Schema, fn func(arrow.RecordBatch) error) error {
			lakeMu.Lock()
			defer lakeMu.Unlock()
			lakeReads++
			if lakeErr != nil {
				return lakeErr
			}
			if snapshot != lakeSnap {
				return fmt.Errorf("lake snapshot %d asked, the test tiered %d", snapshot, lakeSnap)
			}
			c, err := NewKVCodec(kvSpec)
			if err != nil {
				return err
			}
			if !schema.Equal(c.Schema()) {
				return fmt.Errorf("schema %s, want %s", schema, c.Schema())
			}
			var keys []int64
			var vals []*string
			for _, k := range slices.Sorted(maps.Keys(lakeRows)) {
				keys, vals = append(keys, k), append(vals, sp(lakeRows[k]))
			}
			rec := kvRows(c, keys, vals)
			defer rec.Release()
			return fn(rec)
		}}
	live := func(catalog.NodeID) bool { return true }
	dir := t.TempDir()
	m, cat := env.startKVNode(1, live, dir, time.Hour, nil)
	id := createKVTable(t, cat, 1) // tiering on (the default)
	b := waitKV(t, m, id)
	ctx := context.Background()
	model := kvModel{}
	for round := 0; round < 3; round++ {
		for j := 0; j < 20; j++ {
			model, _ = writeModel(t, b, model, []kw{
				{kvcodec.OpUpsert, int64(j*3 + round), fmt.Sprintf("r%d.%d", round, j)},
				{kvcodec.OpDelete, int64(j + round), ""},
			})
		}
		waitCommitted(t, cat, b)
		if round == 0 {
			// Tier the state after round 0 (as a round would: the lake
			// snapshot's rows are the state at the tiered offset).
			lakeMu.Lock()
			lakeRows, lakeSnap = model.clone(), 4242
			lakeMu.Unlock()
			if _, err := cat.Propose(ctx, catalog.CommitTieringRound{Table: 1, CoordinatorEpoch: 1, Offsets: map[catalog.BucketID]uint64{id: b.End()},
				LakeSnapshotID: 4242, LakeSequence: 1, At: time.Now()}); err != nil {
				t.Fatal(err)
			}
		}
		if round < 2 {
			if err := b.Snapshot(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	var tiered uint64
	cat.Read(func(v *catalog.View) { tiered = v.Tables[1].Tiering.Offsets[id] })
	snaps := retained(cat, id)
	var st catalog.Stream
	cat.Read(func(v *catalog.View) { st = *v.Streams[catalog.StreamID(id)] })
	point := plan.TrimPoint(&st, min(snaps[0].LogOffset, tiered), time.Time{})
	if point == 0 {
		t.Fatalf("nothing to trim: snapshots %+v, tiered %d", snaps, tiered)
	}
	if _, err := cat.Propose(ctx, catalog.TrimStream{Stream: st.ID, Start: point, CoordinatorEpoch: 1}); err != nil {
		t.Fatal(err)
	}
	for _, s := range snaps {
		if err := env.store.Delete(ctx, s.Manifest); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("tiered to %d, trimmed to %d, end %d; every snapshot manifest deleted", tiered, point, b.End())

	// The lake read fails first: Unavailable, naming the lake's error.
	lakeMu.Lock()
	lakeErr = errors.New("lake file lake/1/data/x.parquet is corrupt: test")
	lakeMu.Unlock()
	m.Close()
	loseDisk(t, dir)
	m, _ = env.startKVNode(1, live, dir, time.Hour, nil)
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor("ErrStateLost naming the lake's error", func() bool {
		_, err := m.KVBucket(id)
		if err == nil {
			t.Fatal("the bucket serves while the lake read fails")
		}
		return errors.Is(err, ErrStateLost) && strings.Contains(err.Error(), "nor restored from the lake") &&
			strings.Contains(err.Error(), "x.parquet is corrupt")
	})

	// The lake answers: the bucket opens with the exact state.
	lakeMu.Lock()
	lakeErr = nil
	lakeMu.Unlock()
	b = waitKV(t, m, id)
	if got := kvModel(scanAll(t, b)); got.String() != model.String() {
		t.Fatalf("restored from the lake and the changelog: %v\nwant %v", got, model)
	}
	if l := logs.String(); !strings.Contains(l, "restored from the lake") {
		t.Fatalf("the restore from the lake was not logged; log:\n%s", l)
	}
	// It writes on, and its next snapshot makes the lake unnecessary again.
	model, _ = writeModel(t, b, model, []kw{{kvcodec.OpUpsert, 900, "after the lake"}})
	if err := b.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	lakeMu.Lock()
	lakeErr, lakeReads = errors.New("the lake must not be read again"), 0
	lakeMu.Unlock()
	m.Close()
	loseDisk(t, dir)
	m, _ = env.startKVNode(1, live, dir, time.Hour, nil)
	b = waitKV(t, m, id)
	if got := kvModel(scanAll(t, b)); got.String() != model.String() {
		t.Fatalf("reopened from the new snapshot: %v\nwant %v", got, model)
	}
	lakeMu.Lock()
	defer lakeMu.Unlock()
	if lakeReads != 0 {
		t.Fatalf("the lake was read %d times with a usable snapshot", lakeReads)
	}
}

// A seeded model test of changelog retention: random batches, snapshots,
// trims as far as the rule allows (below the oldest retained snapshot), KV
// garbage collection, clean and crash restarts, and restarts with the
// newest or every retained snapshot's manifest missing. After each restart
// the bucket is exactly the model; with every snapshot missing after a
// trim it stays Unavailable with ErrStateLost (never a partial state) until
// the manifests are back.
func TestKVBucketTrimModel(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("MINK_TEST_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (rerun with MINK_TEST_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	logs := &syncBuffer{}
	env := &testEnv{t: t, log: metalog.NewMemLog(), store: objstore.NewMem(), logger: slog.New(slog.NewTextHandler(logs, nil))}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(logs.String())
		}
	})
	live := func(catalog.NodeID) bool { return true }
	dir := t.TempDir()
	m, cat := env.startKVNode(1, live, dir, time.Hour, nil)
	ctx := context.Background()
	if _, err := cat.Propose(ctx, catalog.RegisterCoordinator{Node: 1, NodeEpoch: 1}); err != nil {
		t.Fatal(err)
	}
	spec := kvSpec
	spec.Options = map[string]string{"tiering": "off"}
	out, err := cat.Propose(ctx, catalog.CreateTable{Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	id := out.Buckets[0]
	if _, err := cat.Propose(ctx, catalog.LeadBucket{Bucket: id, Node: 1, CoordinatorEpoch: 1}); err != nil {
		t.Fatal(err)
	}
	b := waitKV(t, m, id)
	c := b.Codec()
	model := kvModel{}
	var trims, restarts, fallbacks, lost int
	start := func() uint64 { return changelogStart(cat, id) }
	check := func(when string) {
		t.Helper()
		if got := kvModel(scanAll(t, b)); got.String() != model.String() {
			t.Fatalf("seed %d, %s: state\n  %v\nwant\n  %v", seed, when, got, model)
		}
	}
	reopen := func(crash bool) {
		t.Helper()
		if !crash {
			if err := m.CloseBuckets(ctx); err != nil {
				t.Fatalf("seed %d: close buckets: %v", seed, err)
			}
		}
		m.Close()
		// This model is of the restore paths: no local tablet to reuse.
		loseDisk(t, dir)
		// The new manager's catalog: the old one tails the log on its own
		// and may lag behind the new manager's commits.
		m, cat = env.startKVNode(1, live, dir, time.Hour, nil)
	}
	manifests := func() map[string][]byte {
		out := map[string][]byte{}
		for _, s := range retained(cat, id) {
			data, err := env.store.Get(ctx, s.Manifest)
			if err != nil {
				t.Fatalf("seed %d: manifest %s: %v", seed, s.Manifest, err)
			}
			out[s.Manifest] = data
		}
		return out
	}
	const steps = 250
	for step := 0; step < steps; step++ {
		switch r := rng.IntN(100); {
		case r < 60:
			ws := randomBatch(rng, step)
			next, ok := model.apply(ws)
			_, _, err := b.Write(ctx, encodeWrites(t, c, ws))
			var dup *kv.DuplicateKeyError
			switch {
			case err == nil && ok:
				model = next
			case errors.As(err, &dup) && !ok:
			default:
				t.Fatalf("seed %d step %d: write %v: %v (model ok %v)", seed, step, ws, err, ok)
			}
		case r < 72:
			waitCommitted(t, cat, b)
			if err := b.Snapshot(ctx); err != nil {
				t.Fatalf("seed %d step %d: snapshot: %v", seed, step, err)
			}
		case r < 82:
			snaps := retained(cat, id)
			if len(snaps) == 0 {
				continue
			}
			var st catalog.Stream
			var epoch uint64
			cat.Read(func(v *catalog.View) { st, epoch = *v.Streams[catalog.StreamID(id)], v.Coordinator.Epoch })
			st.Objects = slices.Clone(st.Objects)
			// Past the rule is refused.
			if len(st.Objects) > 0 && st.End > snaps[0].LogOffset {
				if _, err := cat.Propose(ctx, catalog.TrimStream{Stream: st.ID, Start: st.End, CoordinatorEpoch: epoch}); !errors.Is(err, catalog.ErrInvalid) {
					t.Fatalf("seed %d step %d: trim to the end %d past snapshot offset %d: %v", seed, step, st.End, snaps[0].LogOffset, err)
				}
			}
			// The stream's compaction runs in the background and may merge
			// the objects the trim point was chosen between, as it may
			// under the coordinator's trim: then the trim is refused, and
			// a fresh view gives the next point.
			for attempt := 0; ; attempt++ {
				p := plan.TrimPoint(&st, snaps[0].LogOffset, time.Time{})
				if p <= st.Start {
					break
				}
				_, err := cat.Propose(ctx, catalog.TrimStream{Stream: st.ID, Start: p, CoordinatorEpoch: epoch})
				if err == nil {
					trims++
					break
				}
				var now catalog.Stream
				cat.Read(func(v *catalog.View) { now, epoch = *v.Streams[catalog.StreamID(id)], v.Coordinator.Epoch })
				now.Objects = slices.Clone(now.Objects)
				if !errors.Is(err, catalog.ErrInvalid) || slices.Equal(now.Objects, st.Objects) || attempt == 10 {
					t.Fatalf("seed %d step %d: trim to %d: %v", seed, step, p, err)
				}
				st = now
			}
			if _, err := NewKVCollector(env.store, cat, 0).Collect(ctx); err != nil {
				t.Fatalf("seed %d step %d: kv gc: %v", seed, step, err)
			}
		case r < 92:
			restarts++
			reopen(rng.IntN(2) == 0)
			b = waitKV(t, m, id)
			check(fmt.Sprintf("step %d: after a restart", step))
		default:
			// Snapshot manifests go missing: the newest only, or all.
			snaps := retained(cat, id)
			if len(snaps) == 0 {
				continue
			}
			saved := manifests()
			all := rng.IntN(2) == 0 || len(snaps) == 1
			victims := snaps[len(snaps)-1:]
			if all {
				victims = snaps
			}
			for _, s := range victims {
				if err := env.store.Delete(ctx, s.Manifest); err != nil {
					t.Fatal(err)
				}
			}
			reopen(true)
			// Fallback to an older snapshot, or a full replay when nothing
			// is trimmed, is exact; otherwise the state is lost loudly.
			if all && start() > 0 {
				deadline := time.Now().Add(20 * time.Second)
				for {
					_, err := m.KVBucket(id)
					if err == nil {
						t.Fatalf("seed %d step %d: the bucket serves with every snapshot missing and its changelog trimmed to %d", seed, step, start())
					}
					if errors.Is(err, ErrStateLost) {
						break
					}
					if !errors.Is(err, ErrUnavailable) || time.Now().After(deadline) {
						t.Fatalf("seed %d step %d: %v, want ErrStateLost", seed, step, err)
					}
					time.Sleep(5 * time.Millisecond)
				}
				lost++
			} else {
				fallbacks++
			}
			for k, data := range saved {
				if _, err := env.store.Get(ctx, k); err != nil {
					if err := env.store.PutIfAbsent(ctx, k, data); err != nil {
						t.Fatal(err)
					}
				}
			}
			b = waitKV(t, m, id)
			check(fmt.Sprintf("step %d: after missing manifests (all %v)", step, all))
		}
	}
	reopen(true)
	b = waitKV(t, m, id)
	check("at the end")
	t.Logf("seed %d: %d trims (changelog starts at %d of %d), %d restarts, %d restores past missing manifests, %d lost-state checks",
		seed, trims, start(), b.End(), restarts, fallbacks, lost)
}
