package buckets

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/minkdb/mink/buckets/s3stream"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/metalog"
	"github.com/minkdb/mink/objstore"
)

type testEnv struct {
	t     *testing.T
	log   *metalog.MemLog
	store objstore.Store
	// logger, if set, is the managers' logger (default: discard).
	logger *slog.Logger
	// meta, if set, wraps the catalog the managers see (fault seams).
	meta func(*metalog.Catalog) Metadata
	// kvLake, if set, is the managers' Config.KVLake.
	kvLake LakeRows
	// flushInterval, if set, is the managers' s3stream FlushInterval
	// (default 50 ms).
	flushInterval time.Duration
	// held and fenced, if set, are the managers' Config.LeaseHeld and
	// Config.OnFenced.
	held   func() bool
	fenced func(error)
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func (e *testEnv) catalog() *metalog.Catalog {
	c, err := metalog.Open(context.Background(), e.log, metalog.Options{Logger: quiet()})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	return c
}

// startNode registers node with a new epoch and starts a Manager for it.
func (e *testEnv) startNode(node catalog.NodeID, live func(catalog.NodeID) bool) (*Manager, *metalog.Catalog) {
	cat := e.catalog()
	var expect uint64
	cat.Read(func(v *catalog.View) {
		if n, ok := v.Nodes[node]; ok {
			expect = n.Epoch
		}
	})
	out, err := cat.Propose(context.Background(), catalog.RegisterNode{Node: node, ExpectEpoch: expect})
	if err != nil {
		e.t.Fatal(err)
	}
	flush := e.flushInterval
	if flush == 0 {
		flush = 50 * time.Millisecond
	}
	m, err := NewManager(Config{Node: node, NodeEpoch: out.Epoch, Meta: cat, Store: e.store, Live: live, Logger: quiet(),
		SyncInterval: 20 * time.Millisecond, Stream: s3stream.Config{BatchWindow: time.Millisecond, FlushInterval: flush},
		LeaseHeld: e.held, OnFenced: e.fenced})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { m.Close() })
	return m, cat
}

func rowsRecord(ids ...int64) arrow.RecordBatch {
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for _, id := range ids {
		b.Field(0).(*array.Int64Builder).Append(id)
	}
	return b.NewRecordBatch()
}

// waitBucket waits until the manager serves the bucket.
func waitBucket(t *testing.T, m *Manager, id catalog.BucketID) *LogBucket {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := m.Bucket(id)
		if err == nil {
			return b
		}
		// NotLeader too: the test just proposed the lead, and this node's
		// view may not have applied it yet.
		if !errors.Is(err, ErrUnavailable) && !errors.Is(err, ErrNotLeader) || time.Now().After(deadline) {
			t.Fatalf("bucket %d: %v", id, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func readIDs(t *testing.T, b *LogBucket) []int64 {
	t.Helper()
	batches, err := b.Read(context.Background(), 0, b.End())
	if err != nil {
		t.Fatal(err)
	}
	defer ReleaseBatches(batches)
	var ids []int64
	next := uint64(0)
	for _, bt := range batches {
		if bt.Offset != next {
			t.Fatalf("batch at offset %d, want %d", bt.Offset, next)
		}
		next += uint64(bt.Record.NumRows())
		ids = append(ids, bt.Record.Column(0).(*array.Int64).Int64Values()...)
	}
	return ids
}

// A single node goes through the sync task: the first open, a crash (the
// manager is abandoned) and restart through recovery and renewal, and a
// clean shutdown and restart through renewal.
func TestManagerSingleNodeRestarts(t *testing.T) {
	env := &testEnv{t: t, log: metalog.NewMemLog(), store: objstore.NewMem()}
	self := func(catalog.NodeID) bool { return true }
	m, cat := env.startNode(1, self)
	ctx := context.Background()
	if _, err := cat.Propose(ctx, catalog.RegisterCoordinator{Node: 1, NodeEpoch: 1}); err != nil {
		t.Fatal(err)
	}
	out, err := cat.Propose(ctx, catalog.CreateTable{Spec: catalog.TableSpec{Name: "t", Columns: []catalog.Column{{Name: "id", Type: "bigint"}}, Buckets: 1}})
	if err != nil {
		t.Fatal(err)
	}
	id := out.Buckets[0]
	if _, err := m.Bucket(id); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("bucket without a leader: %v, want ErrUnavailable", err)
	}
	if _, err := cat.Propose(ctx, catalog.LeadBucket{Bucket: id, Node: 1, CoordinatorEpoch: 1}); err != nil {
		t.Fatal(err)
	}
	b := waitBucket(t, m, id)
	for i := int64(0); i < 3; i++ {
		rec := rowsRecord(i*10, i*10+1)
		off, err := b.Append(ctx, rec)
		rec.Release()
		if err != nil || off != uint64(2*i) {
			t.Fatalf("append %d: offset %d, %v", i, off, err)
		}
	}

	// Crash: abandon the manager; a new incarnation recovers its WAL.
	m.Close()
	m2, cat2 := env.startNode(1, self)
	b = waitBucket(t, m2, id)
	if got := readIDs(t, b); len(got) != 6 || got[5] != 21 {
		t.Fatalf("after crash and restart: %v", got)
	}
	var leaderEpoch uint64
	cat2.Read(func(v *catalog.View) { leaderEpoch = v.Buckets[id].LeaderEpoch })
	if leaderEpoch != 2 || b.Epoch() != 2 {
		t.Fatalf("leader epoch after restart %d (open at %d), want 2", leaderEpoch, b.Epoch())
	}
	rec := rowsRecord(99)
	if off, err := b.Append(ctx, rec); err != nil || off != 6 {
		t.Fatalf("append after restart: %d %v", off, err)
	}
	rec.Release()

	// Clean shutdown, restart: renewal to epoch 3.
	if err := m2.CloseBuckets(ctx); err != nil {
		t.Fatal(err)
	}
	m2.Close()
	m3, _ := env.startNode(1, self)
	b = waitBucket(t, m3, id)
	if got := readIDs(t, b); len(got) != 7 || got[6] != 99 || b.Epoch() != 3 {
		t.Fatalf("after clean restart: %v at epoch %d", got, b.Epoch())
	}
}

// Two nodes: a bucket moves from node 1 to node 2 (clean close, open at the
// next epoch), node 1 redirects, then node 2 dies and node 1 takes over.
func TestManagerMoveAndTakeover(t *testing.T) {
	env := &testEnv{t: t, log: metalog.NewMemLog(), store: objstore.NewMem()}
	dead := map[catalog.NodeID]bool{}
	live := func(n catalog.NodeID) bool { return !dead[n] }
	m1, cat := env.startNode(1, live)
	m2, _ := env.startNode(2, live)
	ctx := context.Background()
	cat.Propose(ctx, catalog.RegisterCoordinator{Node: 1, NodeEpoch: 1})
	out, err := cat.Propose(ctx, catalog.CreateTable{Spec: catalog.TableSpec{Name: "t", Columns: []catalog.Column{{Name: "id", Type: "bigint"}}, Buckets: 1}})
	if err != nil {
		t.Fatal(err)
	}
	id := out.Buckets[0]
	cat.Propose(ctx, catalog.LeadBucket{Bucket: id, Node: 1, CoordinatorEpoch: 1})
	b := waitBucket(t, m1, id)
	rec := rowsRecord(1)
	b.Append(ctx, rec)
	rec.Release()

	var nle *NotLeaderError
	if _, err := m2.Bucket(id); !errors.As(err, &nle) || nle.Leader != 1 {
		t.Fatalf("node 2 serving node 1's bucket: %v", err)
	}
	cat.Propose(ctx, catalog.LeadBucket{Bucket: id, Node: 2, CoordinatorEpoch: 1})
	b2 := waitBucket(t, m2, id)
	rec = rowsRecord(2)
	if off, err := b2.Append(ctx, rec); err != nil || off != 1 {
		t.Fatalf("append on node 2: %d %v", off, err)
	}
	rec.Release()
	if _, err := m1.Bucket(id); !errors.As(err, &nle) || nle.Leader != 2 {
		t.Fatalf("node 1 after the move: %v", err)
	}

	// Node 2 dies (abandoned, and no longer live); node 1 takes over.
	m2.Close()
	dead[2] = true
	cat.Propose(ctx, catalog.LeadBucket{Bucket: id, Node: 1, CoordinatorEpoch: 1})
	b = waitBucket(t, m1, id)
	if got := readIDs(t, b); len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("after takeover: %v", got)
	}
	var epoch2 uint64
	cat.Read(func(v *catalog.View) { epoch2 = v.Nodes[2].Epoch })
	if epoch2 != 2 {
		t.Fatalf("dead node 2 not fenced: epoch %d", epoch2)
	}
}

// While its lease is in doubt (etcd does not answer) a leader acknowledges
// no write but goes on serving reads, each proven by a look at its WAL;
// once a takeover has sealed the WAL, the look fences the node (the sync
// task's, with no read asking) and nothing is served from the old state.
func TestManagerLeaseInDoubt(t *testing.T) {
	var held atomic.Bool
	held.Store(true)
	fenced := make(chan error, 1)
	env := &testEnv{t: t, log: metalog.NewMemLog(), store: objstore.NewMem(), held: held.Load,
		fenced: func(err error) { fenced <- err }}
	self := func(catalog.NodeID) bool { return true }
	m, cat := env.startNode(1, self)
	ctx := context.Background()
	cat.Propose(ctx, catalog.RegisterCoordinator{Node: 1, NodeEpoch: 1})
	out, err := cat.Propose(ctx, catalog.CreateTable{Spec: catalog.TableSpec{Name: "t", Columns: []catalog.Column{{Name: "id", Type: "bigint"}}, Buckets: 1}})
	if err != nil {
		t.Fatal(err)
	}
	id := out.Buckets[0]
	if _, err := cat.Propose(ctx, catalog.LeadBucket{Bucket: id, Node: 1, CoordinatorEpoch: 1}); err != nil {
		t.Fatal(err)
	}
	appendRow := func(b *LogBucket, v int64) error {
		rec := rowsRecord(v)
		defer rec.Release()
		_, err := b.Append(ctx, rec)
		return err
	}
	b := waitBucket(t, m, id)
	for _, v := range []int64{1, 2} {
		if err := appendRow(b, v); err != nil {
			t.Fatal(err)
		}
	}

	held.Store(false)
	if err := appendRow(b, 3); !errors.Is(err, ErrLeaseInDoubt) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("append while the lease is in doubt: %v, want ErrLeaseInDoubt", err)
	}
	b, err = m.Bucket(id)
	if err != nil {
		t.Fatalf("read while the lease is in doubt and nobody took over: %v", err)
	}
	if got := readIDs(t, b); !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("rows read in doubt: %v, want [1 2] (the refused append must not be there)", got)
	}
	// A write waits a moment for a renewal rather than fail at once.
	go func() { time.Sleep(200 * time.Millisecond); held.Store(true) }()
	if err := appendRow(b, 4); err != nil {
		t.Fatalf("append with a renewal granted while it waited: %v", err)
	}
	held.Store(false)

	// Node 2 takes node 1 over as the coordinator would once etcd expired
	// node 1's lease: fence its node epoch, seal and replay its WAL. Node
	// 1's view does not say so (it is cut off from etcd).
	var epoch1 uint64
	cat.Read(func(v *catalog.View) { epoch1 = v.Nodes[1].Epoch })
	cat2 := env.catalog()
	reg, err := cat2.Propose(ctx, catalog.RegisterNode{Node: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cat2.Propose(ctx, catalog.RegisterNode{Node: 1, ExpectEpoch: epoch1}); err != nil {
		t.Fatal(err)
	}
	if _, err := s3stream.Failover(ctx, env.store, cat2, 1, epoch1, s3stream.FailoverOptions{By: 2, ByEpoch: reg.Epoch, Logger: quiet()}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-fenced:
		if !errors.Is(err, s3stream.ErrFenced) {
			t.Fatalf("fenced with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the sync task did not find the seal while the lease was in doubt")
	}
	if _, err := m.Bucket(id); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("read after the takeover: %v, want ErrUnavailable", err)
	}
}
