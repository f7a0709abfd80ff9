package buckets

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/kv"
	"github.com/minkdb/mink/kv/kvcodec"
	"github.com/minkdb/mink/metalog"
	"github.com/minkdb/mink/objstore"
)

// syncBuffer is a bytes.Buffer safe for concurrent log writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// writeModel applies ws to the bucket and the model; the write must succeed.
func writeModel(t testing.TB, b *KVBucket, model kvModel, ws []kw) (kvModel, uint64) {
	t.Helper()
	recs, first, err := b.Write(context.Background(), encodeWrites(t, b.Codec(), ws))
	next, ok := model.apply(ws)
	if err != nil || !ok {
		t.Fatalf("write %v: %v (model ok %v)", ws, err, ok)
	}
	return next, first + uint64(len(recs))
}

func retained(cat *metalog.Catalog, id catalog.BucketID) []catalog.KVSnapshot {
	var out []catalog.KVSnapshot
	cat.Read(func(v *catalog.View) { out = append(out, v.Buckets[id].Snapshots...) })
	return out
}

// Snapshots taken while writes continue hold exactly the state at their
// log offset: each committed snapshot, restored on its own, equals the
// model after the last write it covers (no lost update, no resurrected
// delete), and the bucket reopened from the newest one plus the changelog
// equals the final model.
func TestKVBucketSnapshotDuringWrites(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	env := &testEnv{t: t, log: metalog.NewMemLog(), store: objstore.NewMem()}
	live := func(catalog.NodeID) bool { return true }
	dir := t.TempDir()
	m, cat := env.startKVNode(1, live, dir, time.Hour, nil)
	id := createKVTable(t, cat, 1)
	b := waitKV(t, m, id)
	ctx := context.Background()

	history := map[uint64]kvModel{0: {}} // end offset → state
	var mu sync.Mutex
	done := make(chan struct{})
	final := kvModel{}
	go func() {
		defer close(done)
		rng := rand.New(rand.NewPCG(seed, 1))
		model := kvModel{}
		for i := 0; i < 800; i++ {
			ws := make([]kw, 1+rng.IntN(3))
			for j := range ws {
				op := kvcodec.OpUpsert
				if rng.IntN(3) == 0 {
					op = kvcodec.OpDelete
				}
				ws[j] = kw{op: op, k: int64(rng.IntN(60)), v: fmt.Sprintf("w%d.%d", i, j)}
			}
			recs, first, err := b.Write(ctx, encodeWrites(t, b.Codec(), ws))
			if err != nil {
				t.Errorf("seed %d: write %d: %v", seed, i, err)
				return
			}
			model, _ = model.apply(ws)
			if len(recs) > 0 {
				mu.Lock()
				history[first+uint64(len(recs))] = model.clone()
				mu.Unlock()
			}
		}
		final = model
	}()
	var committed []catalog.KVSnapshot
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		time.Sleep(10 * time.Millisecond)
		if err := b.Snapshot(ctx); err != nil {
			t.Fatalf("snapshot: %v", err)
		}
		snaps := retained(cat, id)
		if n := len(snaps); n > 0 && (len(committed) == 0 || committed[len(committed)-1] != snaps[n-1]) {
			committed = append(committed, snaps[n-1])
		}
	}
	if t.Failed() {
		return
	}
	if len(committed) < 3 {
		t.Fatalf("only %d snapshots committed during the writes", len(committed))
	}
	for _, s := range committed {
		want, ok := history[s.LogOffset]
		if !ok {
			t.Fatalf("snapshot %d at offset %d: not the end of any write", s.ID, s.LogOffset)
		}
		tab, res, err := kv.Restore(ctx, env.store, t.TempDir()+"/t", kv.RestoreOptions{Bucket: id, Snapshots: []catalog.KVSnapshot{s}, Tablet: kv.Options{Logger: quiet()}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Snapshot == nil || res.LogOffset != s.LogOffset {
			t.Fatalf("snapshot %d not restored: %+v", s.ID, res)
		}
		got := kvModel{}
		r, _ := tab.NewReader()
		r.Scan(nil, nil, func(key, row []byte) error {
			rec, err := b.Codec().DecodeRows(nil, [][]byte{row})
			if err != nil {
				return err
			}
			got[rec.Column(0).(interface{ Value(int) int64 }).Value(0)] = valueOf(t, b.Codec(), row)
			rec.Release()
			return nil
		})
		r.Close()
		tab.Close()
		if got.String() != want.String() {
			t.Fatalf("seed %d: snapshot %d at offset %d restores\n  %v\nwant\n  %v", seed, s.ID, s.LogOffset, got, want)
		}
	}
	m.Close()
	m, _ = env.startKVNode(1, live, dir, time.Hour, nil)
	b = waitKV(t, m, id)
	if got := kvModel(scanAll(t, b)); got.String() != final.String() {
		t.Fatalf("seed %d: after reopening: %v\nwant %v", seed, got, final)
	}
	t.Logf("%d snapshots checked, end offset %d", len(committed), b.End())
}

// corruptObject replaces an object with bytes of the same size that differ.
func corruptObject(t *testing.T, store objstore.Store, key string) {
	t.Helper()
	ctx := context.Background()
	data, err := store.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(data)
	bad[len(bad)/2] ^= 0xff
	if err := store.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if err := store.PutIfAbsent(ctx, key, bad); err != nil {
		t.Fatal(err)
	}
}

// A corrupt file in the newest snapshot: the restore says so at error level
// and falls back to the older snapshot and a longer replay; with that one's
// manifest gone too, to a full replay. The state is exact every time.
func TestKVBucketCorruptSnapshot(t *testing.T) {
	logs := &syncBuffer{}
	env := &testEnv{t: t, log: metalog.NewMemLog(), store: objstore.NewMem(),
		logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelError}))}
	live := func(catalog.NodeID) bool { return true }
	dir := t.TempDir()
	m, cat := env.startKVNode(1, live, dir, time.Hour, nil)
	id := createKVTable(t, cat, 1)
	b := waitKV(t, m, id)
	ctx := context.Background()
	model := kvModel{}
	for i := 0; i < 3; i++ {
		for j := 0; j < 20; j++ {
			model, _ = writeModel(t, b, model, []kw{{kvcodec.OpUpsert, int64(j*3 + i), fmt.Sprintf("r%d.%d", i, j)}, {kvcodec.OpDelete, int64(j + i), ""}})
		}
		if i < 2 {
			if err := b.Snapshot(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	snaps := retained(cat, id)
	if len(snaps) != 2 {
		t.Fatalf("%d snapshots retained", len(snaps))
	}
	// Corrupt a file the newest snapshot uploaded itself.
	data, err := env.store.Get(ctx, snaps[1].Manifest)
	if err != nil {
		t.Fatal(err)
	}
	var man kv.Manifest
	if err := json.Unmarshal(data, &man); err != nil {
		t.Fatal(err)
	}
	prefix := path.Dir(snaps[1].Manifest) + "/"
	var victim string
	for _, f := range man.Files {
		if strings.HasPrefix(f.Key, prefix) && strings.HasSuffix(f.Key, ".sst") {
			victim = f.Key
		}
	}
	if victim == "" {
		t.Fatalf("the newest snapshot uploaded no file of its own: %+v", man.Files)
	}
	corruptObject(t, env.store, victim)

	m.Close()
	loseDisk(t, dir) // restore from the object store, not the local tablet
	m, _ = env.startKVNode(1, live, dir, time.Hour, nil)
	b = waitKV(t, m, id)
	if got := kvModel(scanAll(t, b)); got.String() != model.String() {
		t.Fatalf("after falling back to the older snapshot: %v\nwant %v", got, model)
	}
	if l := logs.String(); !strings.Contains(l, "level=ERROR") || !strings.Contains(l, victim) {
		t.Fatalf("the corrupt snapshot file was not reported at error level; log:\n%s", l)
	}

	// Now the older one is gone too: a full replay.
	if err := env.store.Delete(ctx, snaps[0].Manifest); err != nil {
		t.Fatal(err)
	}
	model, _ = writeModel(t, b, model, []kw{{kvcodec.OpUpsert, 1000, "late"}})
	m.Close()
	loseDisk(t, dir)
	m, _ = env.startKVNode(1, live, dir, time.Hour, nil)
	b = waitKV(t, m, id)
	if got := kvModel(scanAll(t, b)); got.String() != model.String() {
		t.Fatalf("after a full replay: %v\nwant %v", got, model)
	}
	if l := logs.String(); !strings.Contains(l, snaps[0].Manifest) {
		t.Fatalf("the missing manifest was not reported; log:\n%s", l)
	}
}

// A primary-key bucket moves: cleanly from node 1 to node 2, which then
// dies; node 1 takes over. Each new leader serves exactly the acknowledged
// state and keeps writing; the old leader redirects.
func TestKVBucketMoveAndFailover(t *testing.T) {
	env := &testEnv{t: t, log: metalog.NewMemLog(), store: objstore.NewMem()}
	var deadMu sync.Mutex
	dead := map[catalog.NodeID]bool{}
	live := func(n catalog.NodeID) bool { deadMu.Lock(); defer deadMu.Unlock(); return !dead[n] }
	m1, cat := env.startKVNode(1, live, t.TempDir(), time.Hour, nil)
	m2, _ := env.startKVNode(2, live, t.TempDir(), time.Hour, nil)
	id := createKVTable(t, cat, 1)
	ctx := context.Background()
	b := waitKV(t, m1, id)
	model := kvModel{}
	for i := 0; i < 50; i++ {
		model, _ = writeModel(t, b, model, []kw{{kvcodec.OpUpsert, int64(i % 17), fmt.Sprintf("n1.%d", i)}})
	}
	if err := b.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	model, _ = writeModel(t, b, model, []kw{{kvcodec.OpDelete, 3, ""}, {kvcodec.OpInsert, 100, "after-snapshot"}})
	var nle *NotLeaderError
	if _, err := m2.KVBucket(id); !errors.As(err, &nle) || nle.Leader != 1 || nle.To != "node1:1" {
		t.Fatalf("node 2 before the move: %v", err)
	}

	// Clean move to node 2.
	if _, err := cat.Propose(ctx, catalog.LeadBucket{Bucket: id, Node: 2, CoordinatorEpoch: 1}); err != nil {
		t.Fatal(err)
	}
	b2 := waitKV(t, m2, id)
	if got := kvModel(scanAll(t, b2)); got.String() != model.String() {
		t.Fatalf("node 2 after the move: %v\nwant %v", got, model)
	}
	if _, err := m1.KVBucket(id); !errors.As(err, &nle) || nle.Leader != 2 {
		t.Fatalf("node 1 after the move: %v", err)
	}
	// Node 1 closed the bucket and dropped its tablet directory.
	deadline := time.Now().Add(10 * time.Second)
	for {
		entries, _ := os.ReadDir(filepath.Join(m1.cfg.DataDir, "kv"))
		if len(entries) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node 1 still has tablet directories after the move: %v", entries)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, _, err := b.Write(ctx, encodeWrites(t, b.Codec(), []kw{{kvcodec.OpUpsert, 1, "stale"}})); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("write through the old leader's handle: %v", err)
	}
	for i := 0; i < 20; i++ {
		model, _ = writeModel(t, b2, model, []kw{{kvcodec.OpUpsert, int64(i % 7), fmt.Sprintf("n2.%d", i)}})
	}

	// Node 2 dies; node 1 takes over.
	m2.Close()
	deadMu.Lock()
	dead[2] = true
	deadMu.Unlock()
	if _, err := cat.Propose(ctx, catalog.LeadBucket{Bucket: id, Node: 1, CoordinatorEpoch: 1}); err != nil {
		t.Fatal(err)
	}
	b = waitKV(t, m1, id)
	if got := kvModel(scanAll(t, b)); got.String() != model.String() {
		t.Fatalf("node 1 after the takeover: %v\nwant %v", got, model)
	}
	if _, _, err := b.Write(ctx, encodeWrites(t, b.Codec(), []kw{{kvcodec.OpInsert, 0, "dup"}})); err == nil {
		t.Fatal("insert of an existing key after the takeover succeeded")
	}
	_, _ = writeModel(t, b, model, []kw{{kvcodec.OpUpsert, 500, "n1 again"}})
	if row, ok, err := b.Get(keyOf(t, b.Codec(), 500)); err != nil || !ok || valueOf(t, b.Codec(), row) != "n1 again" {
		t.Fatalf("Get after takeover: %v %v", ok, err)
	}
}

// An object-store outage while a bucket opens (the snapshot's objects and
// then the changelog's cannot be read) keeps it Unavailable; the open is
// retried, and once the store answers the bucket serves the exact state,
// restored from the snapshot (an outage is not a corrupt snapshot: nothing
// is skipped).
func TestKVBucketOpenRetriesThroughOutage(t *testing.T) {
	faulty := objstore.NewFaulty(objstore.NewMem())
	logs := &syncBuffer{}
	env := &testEnv{t: t, log: metalog.NewMemLog(), store: faulty,
		logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	live := func(catalog.NodeID) bool { return true }
	dir := t.TempDir()
	m, cat := env.startKVNode(1, live, dir, time.Hour, nil)
	id := createKVTable(t, cat, 1)
	b := waitKV(t, m, id)
	ctx := context.Background()
	model := kvModel{}
	for i := 0; i < 40; i++ {
		model, _ = writeModel(t, b, model, []kw{{kvcodec.OpUpsert, int64(i % 13), fmt.Sprintf("a%d", i)}})
	}
	if err := b.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		model, _ = writeModel(t, b, model, []kw{{kvcodec.OpUpsert, int64(i % 7), fmt.Sprintf("b%d", i)}, {kvcodec.OpDelete, int64(i % 5), ""}})
	}
	if err := m.CloseBuckets(ctx); err != nil {
		t.Fatal(err)
	}
	m.Close()
	loseDisk(t, dir)

	outage := errors.New("injected outage")
	removeKV := faulty.Inject(objstore.Rule{Ops: objstore.OpGet | objstore.OpGetRange, Prefix: "kv/", Err: outage})
	removeStreams := faulty.Inject(objstore.Rule{Ops: objstore.OpGet | objstore.OpGetRange, Prefix: "streams/", Err: outage})
	m, _ = env.startKVNode(1, live, dir, time.Hour, nil)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "opening primary-key bucket failed") {
		if time.Now().After(deadline) {
			t.Fatalf("no failed open logged:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := m.KVBucket(id); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("during the outage: %v, want ErrUnavailable", err)
	}
	removeKV() // the snapshot restores, the replay still fails
	time.Sleep(300 * time.Millisecond)
	if _, err := m.KVBucket(id); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("with the changelog unreadable: %v, want ErrUnavailable", err)
	}
	removeStreams()
	b = waitKV(t, m, id)
	if got := kvModel(scanAll(t, b)); got.String() != model.String() {
		t.Fatalf("after the outage: %v\nwant %v", got, model)
	}
	if l := logs.String(); strings.Contains(l, "corrupt snapshot") || strings.Contains(l, "no usable snapshot") {
		t.Fatalf("an outage was taken for a corrupt snapshot:\n%s", l)
	}
}

// Concurrent writers (each owning its keys) while WAL uploads fail at
// random: appends pipeline, failures make the bucket reopen by itself, and
// every write reports success, a failure before its append, or an unknown
// outcome. After a crash and restart each key holds the value of its last
// acknowledged write or of a later write whose outcome was unknown.
func TestKVBucketConcurrentWritersWithFaults(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	faulty := objstore.NewFaulty(objstore.NewMem())
	faulty.Seed(seed)
	env := &testEnv{t: t, log: metalog.NewMemLog(), store: faulty}
	live := func(catalog.NodeID) bool { return true }
	dir := t.TempDir()
	m, cat := env.startKVNode(1, live, dir, 20*time.Millisecond, nil)
	id := createKVTable(t, cat, 1)
	waitKV(t, m, id)
	faulty.Inject(objstore.Rule{Ops: objstore.OpPut, Prefix: "wal/", Prob: 0.05, Err: errors.New("injected WAL failure")})
	ctx := context.Background()

	const writers, keys, rounds = 4, 8, 60
	// candidates[k]: the values k may hold: the last acknowledged write's
	// (or absent: "") and every later write of unknown outcome.
	candidates := make([][]string, writers*keys)
	for i := range candidates {
		candidates[i] = []string{""}
	}
	var acked, unknown, refused atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for r := 0; r < rounds; r++ {
				k := int64(w*keys + rng.IntN(keys))
				v := fmt.Sprintf("w%d.%d", w, r)
				b, err := m.KVBucket(id)
				for errors.Is(err, ErrUnavailable) {
					time.Sleep(2 * time.Millisecond)
					b, err = m.KVBucket(id)
				}
				if err != nil {
					t.Errorf("bucket: %v", err)
					return
				}
				_, _, err = b.Write(ctx, encodeWrites(t, b.Codec(), []kw{{kvcodec.OpUpsert, k, v}}))
				switch {
				case err == nil:
					acked.Add(1)
					candidates[k] = []string{v}
				case errors.Is(err, ErrUnknownOutcome):
					unknown.Add(1)
					candidates[k] = append(candidates[k], v)
				case errors.Is(err, ErrUnavailable):
					refused.Add(1)
				default:
					t.Errorf("write: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	faulty.Reset()
	m.Close()
	m, _ = env.startKVNode(1, live, dir, time.Hour, nil)
	b := waitKV(t, m, id)
	got := scanAll(t, b)
	for k, cands := range candidates {
		v := got[int64(k)]
		if !slices.Contains(cands, v) {
			t.Fatalf("seed %d: key %d holds %q, want one of %q", seed, k, v, cands)
		}
	}
	t.Logf("%d acknowledged, %d unknown outcomes, %d refused before the append", acked.Load(), unknown.Load(), refused.Load())
	if acked.Load() == 0 {
		t.Fatal("nothing acknowledged")
	}
}
