package buckets

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/minkdb/mink/buckets/s3stream"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/kv"
	"github.com/minkdb/mink/kv/kvcodec"
	"github.com/minkdb/mink/metalog"
	"github.com/minkdb/mink/objstore"
)

// kvSpec is the table the KV tests use: k bigint primary key, v text.
var kvSpec = catalog.TableSpec{Name: "kvt", Columns: []catalog.Column{{Name: "k", Type: "bigint", NotNull: true}, {Name: "v", Type: "text"}},
	PrimaryKey: []string{"k"}, Buckets: 1}

// startKVNode is startNode with a data directory and a snapshot interval.
func (e *testEnv) startKVNode(node catalog.NodeID, live func(catalog.NodeID) bool, dataDir string, snapEvery time.Duration, store objstore.Store) (*Manager, *metalog.Catalog) {
	cat := e.catalog()
	var expect uint64
	cat.Read(func(v *catalog.View) {
		if n, ok := v.Nodes[node]; ok {
			expect = n.Epoch
		}
	})
	out, err := cat.Propose(context.Background(), catalog.RegisterNode{Node: node, ExpectEpoch: expect, Addrs: catalog.Addrs{Flight: fmt.Sprintf("node%d:1", node)}})
	if err != nil {
		e.t.Fatal(err)
	}
	if store == nil {
		store = e.store
	}
	logger := e.logger
	if logger == nil {
		logger = quiet()
	}
	var meta Metadata = cat
	if e.meta != nil {
		meta = e.meta(cat)
	}
	m, err := NewManager(Config{Node: node, NodeEpoch: out.Epoch, Meta: meta, Store: store, Live: live, Logger: logger,
		SyncInterval: 20 * time.Millisecond, Stream: s3stream.Config{BatchWindow: time.Millisecond, FlushInterval: 50 * time.Millisecond},
		DataDir: dataDir, KVSnapshotInterval: snapEvery, KVLake: e.kvLake})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { m.Close() })
	return m, cat
}

// createKVTable creates kvSpec led by node 1 and returns its bucket.
func createKVTable(t *testing.T, cat *metalog.Catalog, leader catalog.NodeID) catalog.BucketID {
	t.Helper()
	ctx := context.Background()
	if _, err := cat.Propose(ctx, catalog.RegisterCoordinator{Node: leader, NodeEpoch: 1}); err != nil {
		t.Fatal(err)
	}
	out, err := cat.Propose(ctx, catalog.CreateTable{Spec: kvSpec})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cat.Propose(ctx, catalog.LeadBucket{Bucket: out.Buckets[0], Node: leader, CoordinatorEpoch: 1}); err != nil {
		t.Fatal(err)
	}
	return out.Buckets[0]
}

func waitKV(t *testing.T, m *Manager, id catalog.BucketID) *KVBucket {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, err := m.KVBucket(id)
		if err == nil {
			return b
		}
		// NotLeader too: the test just proposed the lead, and this node's
		// view may not have applied it yet.
		if !errors.Is(err, ErrUnavailable) && !errors.Is(err, ErrNotLeader) || time.Now().After(deadline) {
			t.Fatalf("bucket %d: %v", id, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// kvRows builds one record of the codec's schema; a nil value is NULL.
func kvRows(c *kvcodec.Codec, keys []int64, vals []*string) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, c.Schema())
	defer b.Release()
	for i, k := range keys {
		b.Field(0).(*array.Int64Builder).Append(k)
		if vals == nil || vals[i] == nil {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append(*vals[i])
		}
	}
	return b.NewRecordBatch()
}

func sp(s string) *string { return &s }

// kw is one test write: op on key k with value v.
type kw struct {
	op kvcodec.WriteOp
	k  int64
	v  string
}

func encodeWrites(t testing.TB, c *kvcodec.Codec, ws []kw) []kvcodec.Write {
	out := make([]kvcodec.Write, 0, len(ws))
	for _, w := range ws {
		rec := kvRows(c, []int64{w.k}, []*string{sp(w.v)})
		one, err := c.Writes(w.op, rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, one...)
	}
	return out
}

func keyOf(t testing.TB, c *kvcodec.Codec, k int64) []byte {
	arr := array.NewInt64Builder(memory.DefaultAllocator)
	arr.Append(k)
	a := arr.NewArray()
	defer a.Release()
	arr.Release()
	key, err := c.AppendKeyOf(nil, []arrow.Array{a}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// valueOf decodes row's v.
func valueOf(t testing.TB, c *kvcodec.Codec, row []byte) string {
	rec, err := c.DecodeRows(memory.DefaultAllocator, [][]byte{row})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	return rec.Column(1).(*array.String).Value(0)
}

// scanAll reads the bucket's whole state through a Reader.
func scanAll(t testing.TB, b *KVBucket) map[int64]string {
	r, err := b.NewReader()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rr, err := kv.NewRecordReader(r, b.Codec(), memory.DefaultAllocator, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	out := map[int64]string{}
	for rr.Next() {
		rec := rr.RecordBatch()
		ks := rec.Column(0).(*array.Int64)
		vs := rec.Column(1).(*array.String)
		for i := 0; i < int(rec.NumRows()); i++ {
			out[ks.Value(i)] = vs.Value(i)
		}
	}
	if err := rr.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// changelogText renders the changelog as "+I 1=a" lines with offsets.
func changelogText(t testing.TB, b *KVBucket) []string {
	batches, err := b.ReadChangelog(context.Background(), 0, b.End())
	if err != nil {
		t.Fatal(err)
	}
	defer ReleaseBatches(batches)
	var out []string
	next := uint64(0)
	for _, bt := range batches {
		if bt.Offset != next {
			t.Fatalf("changelog batch at offset %d, want %d", bt.Offset, next)
		}
		if !bt.Record.Schema().Equal(b.Codec().ChangelogSchema()) {
			t.Fatalf("changelog schema %v", bt.Record.Schema())
		}
		ct := bt.Record.Column(0).(*array.String)
		ks := bt.Record.Column(1).(*array.Int64)
		vs := bt.Record.Column(2).(*array.String)
		for i := 0; i < int(bt.Record.NumRows()); i++ {
			out = append(out, fmt.Sprintf("%d %s %d=%s", next, ct.Value(i), ks.Value(i), vs.Value(i)))
			next++
		}
	}
	return out
}

// A sequence of inserts, upserts, updates and deletes yields exactly the
// expected changelog, with dense offsets; no-op writes append nothing; a
// duplicate insert appends nothing and fails the whole batch.
func TestKVBucketChangelog(t *testing.T) {
	env := &testEnv{t: t, log: metalog.NewMemLog(), store: objstore.NewMem()}
	m, cat := env.startKVNode(1, func(catalog.NodeID) bool { return true }, t.TempDir(), time.Hour, nil)
	id := createKVTable(t, cat, 1)
	if _, err := m.Bucket(id); err == nil || !strings.Contains(err.Error(), "primary-key") {
		t.Fatalf("Manager.Bucket of a primary-key bucket: %v", err)
	}
	b := waitKV(t, m, id)
	c := b.Codec()
	ctx := context.Background()
	steps := []struct {
		writes []kw
		first  uint64
		n      int
	}{
		{[]kw{{kvcodec.OpInsert, 1, "a"}, {kvcodec.OpInsert, 2, "b"}}, 0, 2},
		{[]kw{{kvcodec.OpUpsert, 1, "a2"}, {kvcodec.OpUpsert, 3, "c"}}, 2, 3},
		{[]kw{{kvcodec.OpUpdate, 2, "b2"}, {kvcodec.OpUpdate, 9, "none"}}, 5, 2},
		{[]kw{{kvcodec.OpInsertIfAbsent, 3, "ignored"}, {kvcodec.OpInsertIfAbsent, 4, "d"}}, 7, 1},
		{[]kw{{kvcodec.OpDelete, 1, ""}, {kvcodec.OpDelete, 9, ""}}, 8, 1},
		{[]kw{{kvcodec.OpInsert, 1, "a3"}, {kvcodec.OpDelete, 1, ""}}, 9, 2},
	}
	for i, s := range steps {
		recs, first, err := b.Write(ctx, encodeWrites(t, c, s.writes))
		if err != nil || first != s.first || len(recs) != s.n {
			t.Fatalf("step %d: %d records at %d, %v; want %d at %d", i, len(recs), first, err, s.n, s.first)
		}
	}
	// No-ops append nothing.
	recs, end, err := b.Write(ctx, encodeWrites(t, c, []kw{{kvcodec.OpDelete, 1, ""}, {kvcodec.OpInsertIfAbsent, 2, "x"}}))
	if err != nil || len(recs) != 0 || end != 11 {
		t.Fatalf("no-op batch: %d records, end %d, %v", len(recs), end, err)
	}
	// A duplicate key fails the batch; nothing is appended, not even the
	// batch's other writes.
	_, _, err = b.Write(ctx, encodeWrites(t, c, []kw{{kvcodec.OpInsert, 7, "x"}, {kvcodec.OpInsert, 2, "dup"}}))
	var dup *kv.DuplicateKeyError
	if !errors.As(err, &dup) || dup.Write != 1 {
		t.Fatalf("duplicate insert: %v", err)
	}
	if b.End() != 11 {
		t.Fatalf("end after a failed batch %d, want 11", b.End())
	}
	want := []string{
		"0 +I 1=a", "1 +I 2=b",
		"2 -U 1=a", "3 +U 1=a2", "4 +I 3=c",
		"5 -U 2=b", "6 +U 2=b2",
		"7 +I 4=d",
		"8 -D 1=a2",
		"9 +I 1=a3", "10 -D 1=a3",
	}
	if got := changelogText(t, b); !slices.Equal(got, want) {
		t.Fatalf("changelog:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	wantState := map[int64]string{2: "b2", 3: "c", 4: "d"}
	if got := scanAll(t, b); fmt.Sprint(got) != fmt.Sprint(wantState) {
		t.Fatalf("state %v, want %v", got, wantState)
	}
	if row, ok, err := b.Get(keyOf(t, c, 3)); err != nil || !ok || valueOf(t, c, row) != "c" {
		t.Fatalf("Get(3): %v %v", ok, err)
	}
	if _, ok, err := b.Get(keyOf(t, c, 1)); err != nil || ok {
		t.Fatalf("Get(1) after delete: %v %v", ok, err)
	}
	// The changelog reads the same after it is committed to stream objects.
	if err := b.stream.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := changelogText(t, b); !slices.Equal(got, want) {
		t.Fatalf("committed changelog:\n%s", strings.Join(got, "\n"))
	}
}

// kvModel is the expected state: key → value.
type kvModel map[int64]string

func (m kvModel) clone() kvModel {
	out := make(kvModel, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// apply applies a batch the way kv.Changes does; ok is false if the batch
// fails (a duplicate key) and changes nothing.
func (m kvModel) apply(ws []kw) (kvModel, bool) {
	out := m.clone()
	for _, w := range ws {
		_, exists := out[w.k]
		switch w.op {
		case kvcodec.OpInsert:
			if exists {
				return m, false
			}
			out[w.k] = w.v
		case kvcodec.OpInsertIfAbsent:
			if !exists {
				out[w.k] = w.v
			}
		case kvcodec.OpUpsert:
			out[w.k] = w.v
		case kvcodec.OpUpdate:
			if exists {
				out[w.k] = w.v
			}
		case kvcodec.OpDelete:
			delete(out, w.k)
		}
	}
	return out, true
}

func (m kvModel) String() string {
	keys := make([]int64, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var sb strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&sb, "%d=%s ", k, m[k])
	}
	return sb.String()
}

func randomBatch(rng *rand.Rand, step int) []kw {
	ws := make([]kw, 1+rng.IntN(4))
	for i := range ws {
		ws[i] = kw{op: kvcodec.WriteOp(rng.IntN(5)), k: int64(rng.IntN(40)), v: fmt.Sprintf("s%d.%d", step, i)}
	}
	return ws
}

// The model-based test: seeded random batches of inserts, inserts-if-absent,
// upserts, updates and deletes, and point lookups, through KVBucket.Write
// and Get, interleaved with snapshots (some failing half-way), clean
// restarts, crash restarts (the manager abandoned: kill -9 at this level)
// and WAL uploads that fail or lose their response. After every restart the
// state equals the model of the acknowledged writes; a write whose outcome
// is unknown may have happened or not, and the next recovery decides.
func TestKVBucketModel(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("MINK_TEST_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (rerun with MINK_TEST_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	faulty := objstore.NewFaulty(objstore.NewMem())
	faulty.Seed(seed)
	logs := &syncBuffer{}
	snapFaults := &snapshotCommitFaults{}
	env := &testEnv{t: t, log: metalog.NewMemLog(), store: faulty,
		logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelError})),
		meta:   func(c *metalog.Catalog) Metadata { return &faultyMeta{Catalog: c, f: snapFaults} }}
	live := func(catalog.NodeID) bool { return true }
	dir := t.TempDir()
	m, cat := env.startKVNode(1, live, dir, time.Hour, nil)
	id := createKVTable(t, cat, 1)
	b := waitKV(t, m, id)
	c := b.Codec()
	ctx := context.Background()

	model := kvModel{}
	var uncertain []kvModel // candidate states after writes of unknown outcome
	var acked, unknown, dups, snaps, restarts, crashes, reopened int
	check := func(when string) {
		t.Helper()
		got := kvModel(scanAll(t, b))
		if uncertain == nil {
			if got.String() != model.String() {
				t.Fatalf("seed %d, %s: state\n  %v\nwant\n  %v", seed, when, got, model)
			}
			return
		}
		for _, cand := range uncertain {
			if got.String() == cand.String() {
				model, uncertain = got, nil
				return
			}
		}
		t.Fatalf("seed %d, %s: state\n  %v\nis none of the %d possible states, e.g.\n  %v", seed, when, got, len(uncertain), uncertain[0])
	}
	gc := NewKVCollector(faulty, cat, 0)
	restart := func(crash bool) {
		t.Helper()
		if crash {
			crashes++
		} else {
			restarts++
			if err := m.CloseBuckets(ctx); err != nil {
				t.Fatalf("seed %d: close buckets: %v", seed, err)
			}
		}
		// The restart reuses the local tablet, or (a third of the time)
		// finds it lost and restores; a crash loses what the tablet applied
		// since its last flush half the time.
		lose := rng.IntN(3) == 0
		if crash && rng.IntN(2) == 0 {
			m.crashTablets.Store(true)
		}
		m.Close()
		if lose {
			loseDisk(t, dir)
		}
		m, _ = env.startKVNode(1, live, dir, time.Hour, nil)
		b = waitKV(t, m, id)
		check(fmt.Sprintf("after restart (crash %v, disk lost %v)", crash, lose))
		// No fault here corrupts a snapshot: a restore that skips one
		// means something a retained snapshot needs was deleted.
		if l := logs.String(); strings.Contains(l, "corrupt snapshot") || strings.Contains(l, "no usable snapshot") {
			t.Fatalf("seed %d: a restore skipped a snapshot:\n%s", seed, l)
		}
	}
	const steps = 400
	for step := 0; step < steps; step++ {
		switch r := rng.IntN(100); {
		case r < 60:
			ws := randomBatch(rng, step)
			next, ok := model.apply(ws)
			recs, _, err := b.Write(ctx, encodeWrites(t, c, ws))
			var dup *kv.DuplicateKeyError
			switch {
			case err == nil && uncertain == nil:
				if !ok {
					t.Fatalf("seed %d step %d: batch %v succeeded, the model says duplicate key", seed, step, ws)
				}
				model = next
				acked++
				_ = recs
			case err == nil:
				// Based on an uncertain state: any candidate, then this.
				for i, cand := range uncertain {
					uncertain[i], _ = cand.apply(ws)
				}
			case errors.As(err, &dup):
				dups++
				if ok && uncertain == nil {
					t.Fatalf("seed %d step %d: duplicate key %v, the model has none", seed, step, err)
				}
			case errors.Is(err, ErrUnknownOutcome):
				unknown++
				if uncertain == nil {
					uncertain = []kvModel{model}
				}
				for _, cand := range slices.Clone(uncertain) {
					if nc, ok := cand.apply(ws); ok {
						uncertain = append(uncertain, nc)
					}
				}
				if rng.IntN(2) == 0 {
					restart(true)
					continue
				}
				// The manager closes the failed bucket and reopens it at
				// a new leader epoch by itself.
				old := b.Epoch()
				deadline := time.Now().Add(20 * time.Second)
				for b = waitKV(t, m, id); b.Epoch() == old; b = waitKV(t, m, id) {
					if time.Now().After(deadline) {
						t.Fatalf("seed %d: the failed bucket was not reopened", seed)
					}
					time.Sleep(5 * time.Millisecond)
				}
				reopened++
				check("after the failed bucket reopened")
			case errors.Is(err, ErrUnavailable):
				// Failed before the append (the bucket is reopening).
				restart(true)
			default:
				t.Fatalf("seed %d step %d: write: %v", seed, step, err)
			}
		case r < 75:
			if uncertain != nil {
				continue
			}
			k := int64(rng.IntN(40))
			row, found, err := b.Get(keyOf(t, c, k))
			if err != nil {
				t.Fatalf("seed %d step %d: get: %v", seed, step, err)
			}
			want, wantFound := model[k]
			if found != wantFound || (found && valueOf(t, c, row) != want) {
				t.Fatalf("seed %d step %d: Get(%d) = %v %q, model %v %q", seed, step, k, found, row, wantFound, want)
			}
		case r < 85:
			var remove func()
			switch rng.IntN(5) {
			case 0:
				remove = faulty.Inject(objstore.Rule{Ops: objstore.OpPut, Prefix: "kv/", Prob: 0.3, Err: errors.New("injected snapshot upload failure")})
			case 1:
				// The commit fails, before or after it is applied.
				snapFaults.arm(rng.IntN(2) == 0)
				remove = snapFaults.disarm
			}
			err := b.Snapshot(ctx)
			if remove != nil {
				remove()
			} else if err != nil {
				t.Fatalf("seed %d step %d: snapshot: %v", seed, step, err)
			}
			if err == nil {
				snaps++
			}
			// Collect garbage with no delay: never a file a retained
			// snapshot needs.
			if _, err := gc.Collect(ctx); err != nil {
				t.Fatalf("seed %d step %d: gc: %v", seed, step, err)
			}
		case r < 90:
			// The next WAL upload fails (or lands but loses its response).
			rule := objstore.Rule{Ops: objstore.OpPut, Prefix: "wal/", Times: 1, Err: errors.New("injected WAL failure")}
			if rng.IntN(2) == 0 {
				rule.Err, rule.LoseResponse = nil, true
			}
			faulty.Inject(rule)
		case r < 95:
			restart(false)
		default:
			restart(true)
		}
	}
	faulty.Reset()
	restart(true)
	t.Logf("%d acknowledged batches, %d unknown outcomes (%d reopened by the manager), %d duplicate-key failures, %d snapshots, %d clean restarts, %d crashes; %d keys",
		acked, unknown, reopened, dups, snaps, restarts, crashes, len(model))
	if acked == 0 || snaps == 0 || crashes == 0 {
		t.Fatalf("seed %d: the run did not exercise writes, snapshots and crashes", seed)
	}
}

// snapshotCommitFaults makes the next CommitKVSnapshot fail: before it is
// proposed, or after it is applied (a lost response).
type snapshotCommitFaults struct {
	mu         sync.Mutex
	armed      bool
	afterApply bool
}

func (f *snapshotCommitFaults) arm(afterApply bool) {
	f.mu.Lock()
	f.armed, f.afterApply = true, afterApply
	f.mu.Unlock()
}

func (f *snapshotCommitFaults) disarm() {
	f.mu.Lock()
	f.armed = false
	f.mu.Unlock()
}

// faultyMeta is the catalog with snapshotCommitFaults.
type faultyMeta struct {
	*metalog.Catalog
	f *snapshotCommitFaults
}

func (m *faultyMeta) Propose(ctx context.Context, rec catalog.Record) (catalog.Outcome, error) {
	if _, ok := rec.(catalog.CommitKVSnapshot); ok {
		m.f.mu.Lock()
		armed, after := m.f.armed, m.f.afterApply
		m.f.armed = false
		m.f.mu.Unlock()
		if armed && !after {
			return catalog.Outcome{}, errors.New("injected metadata failure before the commit")
		}
		if armed {
			m.Catalog.Propose(ctx, rec)
			return catalog.Outcome{}, errors.New("injected lost response after the commit")
		}
	}
	return m.Catalog.Propose(ctx, rec)
}
