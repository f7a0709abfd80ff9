package buckets

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
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

// countingStore counts the reads of KV snapshot objects (keys under kv/):
// a bucket that reuses its local tablet reads none.
type countingStore struct {
	objstore.Store
	kvReads atomic.Int64
}

func (s *countingStore) Get(ctx context.Context, key string) ([]byte, error) {
	if strings.HasPrefix(key, "kv/") {
		s.kvReads.Add(1)
	}
	return s.Store.Get(ctx, key)
}

func (s *countingStore) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if strings.HasPrefix(key, "kv/") {
		s.kvReads.Add(1)
	}
	return s.Store.GetRange(ctx, key, off, n)
}

// loseDisk removes a node's KV tablet directories, as if it came back on a
// new disk: its next open restores from the object store.
func loseDisk(t testing.TB, dataDir string) {
	t.Helper()
	if err := os.RemoveAll(filepath.Join(dataDir, "kv")); err != nil {
		t.Fatal(err)
	}
}

// reuseEnv is a node with a counting store and a log the test reads.
func reuseEnv(t *testing.T) (*testEnv, *countingStore, *syncBuffer) {
	logs := &syncBuffer{}
	store := &countingStore{Store: objstore.NewMem()}
	env := &testEnv{t: t, log: metalog.NewMemLog(), store: store,
		logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(logs.String())
		}
	})
	return env, store, logs
}

// writeSome writes n upserts (and a delete every 7th) under tag.
func writeSome(t *testing.T, b *KVBucket, model kvModel, n int, tag string) kvModel {
	t.Helper()
	for i := 0; i < n; i++ {
		ws := []kw{{kvcodec.OpUpsert, int64(i % 23), fmt.Sprintf("%s.%d", tag, i)}}
		if i%7 == 6 {
			ws = append(ws, kw{kvcodec.OpDelete, int64((i + 3) % 23), ""})
		}
		model, _ = writeModel(t, b, model, ws)
	}
	return model
}

func assertRows(t *testing.T, b *KVBucket, model kvModel, when string) {
	t.Helper()
	if got := kvModel(scanAll(t, b)); got.String() != model.String() {
		t.Fatalf("%s: rows\n  %v\nwant\n  %v", when, got, model)
	}
}

// A clean restart (CloseBuckets, then Close) and then a crash-like one
// (Close alone, and the tablet losing its unflushed writes) reopen the
// bucket from the local tablet: no snapshot object is read, the rows are
// exactly the acknowledged ones, and the bucket writes on.
func TestKVReuseCleanAndCrashRestart(t *testing.T) {
	env, store, logs := reuseEnv(t)
	live := func(catalog.NodeID) bool { return true }
	dir := t.TempDir()
	ctx := context.Background()
	m, cat := env.startKVNode(1, live, dir, time.Hour, nil)
	id := createKVTable(t, cat, 1)
	b := waitKV(t, m, id)
	model := writeSome(t, b, kvModel{}, 60, "a")
	if err := b.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	model = writeSome(t, b, model, 40, "b")
	end := b.End()

	// Clean restart.
	if err := m.CloseBuckets(ctx); err != nil {
		t.Fatal(err)
	}
	m.Close()
	store.kvReads.Store(0)
	m, _ = env.startKVNode(1, live, dir, time.Hour, nil)
	b = waitKV(t, m, id)
	assertRows(t, b, model, "after a clean restart")
	if n := store.kvReads.Load(); n != 0 {
		t.Fatalf("a clean restart read %d KV snapshot objects, want 0 (the local tablet is reused)", n)
	}
	if !strings.Contains(logs.String(), "KV tablet reused") || b.End() != end {
		t.Fatalf("the reuse was not logged, or the end moved (%d, was %d)", b.End(), end)
	}
	model = writeSome(t, b, model, 30, "c")
	lost := b.End() - end

	// A crash: the tablet loses what it applied since its last flush (all
	// of the writes above: the memtable was never flushed), and the stream
	// is left open by the dead incarnation.
	m.crashTablets.Store(true)
	m.Close()
	store.kvReads.Store(0)
	m, _ = env.startKVNode(1, live, dir, time.Hour, nil)
	b = waitKV(t, m, id)
	assertRows(t, b, model, "after a crash")
	if n := store.kvReads.Load(); n != 0 {
		t.Fatalf("a crash restart read %d KV snapshot objects, want 0", n)
	}
	if want := fmt.Sprintf("reused_tablet=true snapshot=0 snapshot_offset=%d downloaded_bytes=0 replayed_records=%d", end, lost); !strings.Contains(logs.String(), want) {
		t.Fatalf("the crash restart did not reuse the tablet at offset %d and replay the %d lost records (%q)", end, lost, want)
	}
	model = writeSome(t, b, model, 10, "d")
	assertRows(t, b, model, "writing after a crash restart")
	if _, _, err := b.Write(ctx, encodeWrites(t, b.Codec(), []kw{{kvcodec.OpInsert, 1, "dup"}})); err == nil {
		t.Fatal("an insert of an existing key succeeded after the reuse")
	}
}

// Writes in flight when the node crashes: every acknowledged write is in
// the reopened bucket; a write whose outcome is unknown is either wholly
// there or not at all.
func TestKVReuseCrashDuringWrites(t *testing.T) {
	env, store, _ := reuseEnv(t)
	live := func(catalog.NodeID) bool { return true }
	dir := t.TempDir()
	m, cat := env.startKVNode(1, live, dir, time.Hour, nil)
	id := createKVTable(t, cat, 1)
	b := waitKV(t, m, id)
	ctx := context.Background()
	const writers, perWriter = 4, 400
	type outcome struct {
		acked   []string // value of key w*1000+i, acknowledged
		unknown map[int64]string
	}
	outcomes := make([]outcome, writers)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outcomes[w].unknown = map[int64]string{}
			for i := 0; i < perWriter; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key, val := int64(w*1000+i), fmt.Sprintf("w%d.%d", w, i)
				_, _, err := b.Write(ctx, encodeWrites(t, b.Codec(), []kw{{kvcodec.OpUpsert, key, val}}))
				if err != nil {
					outcomes[w].unknown[key] = val
					return
				}
				outcomes[w].acked = append(outcomes[w].acked, val)
			}
		}()
	}
	time.Sleep(150 * time.Millisecond)
	m.crashTablets.Store(true)
	m.Close()
	close(stop)
	wg.Wait()
	store.kvReads.Store(0)
	m, _ = env.startKVNode(1, live, dir, time.Hour, nil)
	b = waitKV(t, m, id)
	got := scanAll(t, b)
	total := 0
	for w, o := range outcomes {
		for i, val := range o.acked {
			if key := int64(w*1000 + i); got[key] != val {
				t.Fatalf("acknowledged write of key %d = %q: the reopened bucket has %q", key, val, got[key])
			}
			delete(got, int64(w*1000+i))
		}
		total += len(o.acked)
		for key, val := range o.unknown {
			if v, ok := got[key]; ok && v != val {
				t.Fatalf("write of unknown outcome, key %d = %q: the bucket has %q", key, val, v)
			}
			delete(got, key)
		}
	}
	if len(got) != 0 {
		t.Fatalf("the reopened bucket has rows nobody wrote: %v", got)
	}
	if total == 0 {
		t.Fatal("no write was acknowledged before the crash")
	}
	if n := store.kvReads.Load(); n != 0 {
		t.Fatalf("the crash restart read %d KV snapshot objects, want 0", n)
	}
	t.Logf("%d writes acknowledged before the crash", total)
}

// Another leader wrote while this node was down: its tablet directory is of
// an older history and is not reused; the bucket restores from the
// snapshot and the changelog, with every write of both leaders.
func TestKVReuseNotAfterAnotherLeader(t *testing.T) {
	env, store, logs := reuseEnv(t)
	var deadMu sync.Mutex
	dead := map[catalog.NodeID]bool{}
	live := func(n catalog.NodeID) bool { deadMu.Lock(); defer deadMu.Unlock(); return !dead[n] }
	dir1 := t.TempDir()
	ctx := context.Background()
	m1, cat := env.startKVNode(1, live, dir1, time.Hour, nil)
	id := createKVTable(t, cat, 1)
	b := waitKV(t, m1, id)
	model := writeSome(t, b, kvModel{}, 50, "n1")
	if err := m1.CloseBuckets(ctx); err != nil {
		t.Fatal(err)
	}
	m1.Close()
	deadMu.Lock()
	dead[1] = true
	deadMu.Unlock()

	m2, _ := env.startKVNode(2, live, t.TempDir(), time.Hour, nil)
	if _, err := cat.Propose(ctx, catalog.LeadBucket{Bucket: id, Node: 2, CoordinatorEpoch: 1}); err != nil {
		t.Fatal(err)
	}
	b2 := waitKV(t, m2, id)
	assertRows(t, b2, model, "node 2")
	model = writeSome(t, b2, model, 25, "n2")
	if err := b2.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	model = writeSome(t, b2, model, 5, "n2b")
	if err := m2.CloseBuckets(ctx); err != nil {
		t.Fatal(err)
	}
	m2.Close()

	// Back to node 1, whose tablet directory is of its old epoch.
	if _, err := cat.Propose(ctx, catalog.LeadBucket{Bucket: id, Node: 1, CoordinatorEpoch: 1}); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir1, "kv")); len(entries) != 1 {
		t.Fatalf("node 1's tablet directory is not there to be refused: %v", entries)
	}
	store.kvReads.Store(0)
	deadMu.Lock()
	dead[1] = false
	deadMu.Unlock()
	m1, _ = env.startKVNode(1, live, dir1, time.Hour, nil)
	b = waitKV(t, m1, id)
	assertRows(t, b, model, "node 1 after node 2 wrote")
	if store.kvReads.Load() == 0 {
		t.Fatal("node 1 read no snapshot: it reused a tablet that misses node 2's writes")
	}
	if l := logs.String(); !strings.Contains(l, "KV tablet not reused") || !strings.Contains(l, "the stream was last opened at leader epoch") {
		t.Fatalf("the refusal was not logged with its reason")
	}
}

// Whatever is wrong with the local tablet, the bucket restores from the
// object store instead, says why at Info level, and serves exactly the
// acknowledged rows.
func TestKVReuseFallbacks(t *testing.T) {
	for _, tc := range []struct {
		name string
		// spoil damages the tablet directory dir (of leader epoch epoch) of
		// a node shut down cleanly.
		spoil func(t *testing.T, dataDir, dir string, epoch uint64)
		why   string
	}{
		{"missing directory", func(t *testing.T, dataDir, dir string, epoch uint64) { loseDisk(t, dataDir) }, "no local tablet directory"},
		{"directory of another epoch", func(t *testing.T, dataDir, dir string, epoch uint64) {
			if err := os.Rename(dir, filepath.Join(filepath.Dir(dir), fmt.Sprintf("%s-%d", strings.Split(filepath.Base(dir), "-")[0], epoch-1))); err != nil {
				t.Fatal(err)
			}
		}, "the local tablet directories are of leader epochs"},
		{"stray file", func(t *testing.T, dataDir, dir string, epoch uint64) {
			if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "is not a tablet directory"},
		{"garbled pebble manifest", func(t *testing.T, dataDir, dir string, epoch uint64) {
			ms, _ := filepath.Glob(filepath.Join(dir, "db", "MANIFEST-*"))
			if len(ms) == 0 {
				t.Fatal("no MANIFEST")
			}
			for _, f := range ms {
				if err := os.WriteFile(f, []byte("not a manifest"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}, "open tablet"},
		{"missing sstable", func(t *testing.T, dataDir, dir string, epoch uint64) {
			ssts, _ := filepath.Glob(filepath.Join(dir, "db", "*.sst"))
			if len(ssts) == 0 {
				t.Fatal("no sstable")
			}
			if err := os.Remove(ssts[len(ssts)-1]); err != nil {
				t.Fatal(err)
			}
		}, "sstable"},
		{"truncated sstable", func(t *testing.T, dataDir, dir string, epoch uint64) {
			ssts, _ := filepath.Glob(filepath.Join(dir, "db", "*.sst"))
			if len(ssts) == 0 {
				t.Fatal("no sstable")
			}
			if err := os.Truncate(ssts[0], 100); err != nil {
				t.Fatal(err)
			}
		}, ".sst"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, store, logs := reuseEnv(t)
			live := func(catalog.NodeID) bool { return true }
			dataDir := t.TempDir()
			ctx := context.Background()
			m, cat := env.startKVNode(1, live, dataDir, time.Hour, nil)
			id := createKVTable(t, cat, 1)
			b := waitKV(t, m, id)
			model := writeSome(t, b, kvModel{}, 40, "a")
			if err := b.Snapshot(ctx); err != nil {
				t.Fatal(err)
			}
			model = writeSome(t, b, model, 20, "b")
			epoch, dir := b.Epoch(), b.tablet.Dir()
			if err := m.CloseBuckets(ctx); err != nil {
				t.Fatal(err)
			}
			m.Close()
			tc.spoil(t, dataDir, dir, epoch)
			store.kvReads.Store(0)
			m, _ = env.startKVNode(1, live, dataDir, time.Hour, nil)
			b = waitKV(t, m, id)
			assertRows(t, b, model, "after the fallback")
			if store.kvReads.Load() == 0 {
				t.Fatal("no snapshot object was read: the damaged tablet was reused")
			}
			var line string
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, "KV tablet not reused") {
					line = l
				}
			}
			if !strings.Contains(line, "level=INFO") || !strings.Contains(line, tc.why) {
				t.Fatalf("the fallback was not logged at Info with %q: %q", tc.why, line)
			}
			// The restored tablet is this epoch's: the next clean restart
			// reuses it.
			model = writeSome(t, b, model, 5, "c")
			if err := m.CloseBuckets(ctx); err != nil {
				t.Fatal(err)
			}
			m.Close()
			store.kvReads.Store(0)
			m, _ = env.startKVNode(1, live, dataDir, time.Hour, nil)
			b = waitKV(t, m, id)
			assertRows(t, b, model, "after the next clean restart")
			if n := store.kvReads.Load(); n != 0 {
				t.Fatalf("the restart after the fallback read %d snapshot objects, want 0", n)
			}
		})
	}
}

// A changelog trimmed past the local tablet's offset cannot be replayed
// from it: checkHistory refuses it. (Retention trims below the oldest
// retained snapshot only, so a restart does not meet this; the check keeps
// a wrong state out if it ever does.)
func TestKVReuseCheckHistory(t *testing.T) {
	c, err := NewKVCodec(kvSpec)
	if err != nil {
		t.Fatal(err)
	}
	type hist struct {
		bucket           catalog.BucketID
		epoch, dirEpoch  uint64
		cols             int
		applied, st, end uint64
	}
	for _, tc := range []struct {
		h    hist
		want string
	}{
		{hist{5, 3, 3, 2, 10, 0, 10}, ""},
		{hist{5, 3, 3, 2, 4, 0, 10}, ""},
		{hist{6, 3, 3, 2, 10, 0, 10}, "of bucket 6"},
		{hist{5, 2, 3, 2, 10, 0, 10}, "last opened at leader epoch 2"},
		{hist{5, 3, 3, 3, 10, 0, 10}, "3 columns"},
		{hist{5, 3, 3, 2, 11, 0, 10}, "past the changelog's end"},
		{hist{5, 3, 3, 2, 4, 6, 10}, "below the changelog's start"},
	} {
		h := tc.h
		err := checkHistory(kv.History{Bucket: h.bucket, LeaderEpoch: h.epoch, Columns: h.cols}, 5, h.dirEpoch, c, h.applied, h.st, h.end)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.h, err, tc.want)
		}
	}
}
