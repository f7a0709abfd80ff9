package s3stream

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/metalog"
	"github.com/minkdb/mink/objstore"
)

// harness is a set of simulated nodes sharing one metadata log and one object
// store. Each node has its own Catalog tailing the log, as real nodes do.
type harness struct {
	t     testing.TB
	ctx   context.Context
	log   *metalog.MemLog
	store faultyStore
	cats  []*metalog.Catalog
}

// faultyStore is an *objstore.Faulty, or an *objstore.FaultySegments whose
// nodes keep their WAL in segments.
type faultyStore interface {
	objstore.Store
	Inject(objstore.Rule) (remove func())
	Seed(uint64)
	SetHooks(objstore.Hooks)
	Reset()
	Inner() objstore.Store
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newHarness(t testing.TB) *harness {
	t.Helper()
	h := &harness{t: t, ctx: context.Background(), log: metalog.NewMemLog(), store: objstore.NewFaulty(objstore.NewMem())}
	t.Cleanup(func() {
		for _, c := range h.cats {
			c.Close()
		}
	})
	return h
}

// newSegmentHarness is a harness on a local directory, where the nodes keep
// their WAL in segments.
func newSegmentHarness(t testing.TB) *harness {
	t.Helper()
	h := newHarness(t)
	dir, err := objstore.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h.store = objstore.NewFaultySegments(dir)
	return h
}

func (h *harness) catalog() *metalog.Catalog {
	h.t.Helper()
	c, err := metalog.Open(h.ctx, h.log, metalog.Options{Logger: quietLogger()})
	if err != nil {
		h.t.Fatal(err)
	}
	h.cats = append(h.cats, c)
	return c
}

// register gives node a new node epoch, as a node does on every start and a
// taker does to fence a dead node.
func (h *harness) register(meta Metadata, node catalog.NodeID) uint64 {
	h.t.Helper()
	for {
		var expect uint64
		meta.Read(func(v *catalog.View) {
			if n, ok := v.Nodes[node]; ok {
				expect = n.Epoch
			}
		})
		out, err := meta.Propose(h.ctx, catalog.RegisterNode{Node: node, ExpectEpoch: expect})
		if errors.Is(err, catalog.ErrStaleEpoch) {
			continue
		}
		if err != nil {
			h.t.Fatal(err)
		}
		return out.Epoch
	}
}

type testNode struct {
	*Node
	id   catalog.NodeID
	meta *metalog.Catalog
}

// start registers node with a new epoch and starts an s3stream Node for it.
func (h *harness) start(node catalog.NodeID, tweak ...func(*Config)) *testNode {
	h.t.Helper()
	meta := h.catalog()
	epoch := h.register(meta, node)
	cfg := Config{
		Node: node, NodeEpoch: epoch, Store: h.store, Meta: meta, Logger: quietLogger(),
		BatchWindow: time.Millisecond, FlushInterval: time.Hour, RetryBackoff: 5 * time.Millisecond, CompactMinObjects: 3,
	}
	for _, f := range tweak {
		f(&cfg)
	}
	n, err := NewNode(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { n.Close() })
	return &testNode{Node: n, id: node, meta: meta}
}

// payload encodes a record id so that reads can be checked against a model.
func payload(id uint64) []byte {
	return binary.LittleEndian.AppendUint64(nil, id)
}

func payloadID(t testing.TB, b []byte) uint64 {
	t.Helper()
	if len(b) != 8 {
		t.Fatalf("payload of %d bytes, want 8", len(b))
	}
	return binary.LittleEndian.Uint64(b)
}

// readAll reads [0, end) of a stream's committed data through a fresh Reader
// on meta, and returns the record ids in offset order, checking that offsets
// are dense.
func readAll(t testing.TB, store objstore.Store, meta Metadata, id catalog.StreamID) []uint64 {
	t.Helper()
	r := NewReader(store, meta, nil)
	end := r.CommittedEnd(id)
	entries, err := r.Read(context.Background(), id, 0, end)
	if err != nil {
		t.Fatal(err)
	}
	return idsOf(t, entries, 0, end)
}

func idsOf(t testing.TB, entries []Entry, from, end uint64) []uint64 {
	t.Helper()
	var ids []uint64
	next := from
	for _, e := range entries {
		if e.Offset != next || e.Count != 1 {
			t.Fatalf("entry at offset %d count %d, want offset %d count 1", e.Offset, e.Count, next)
		}
		ids = append(ids, payloadID(t, e.Payload))
		next = e.End()
	}
	if next != end {
		t.Fatalf("entries end at %d, want %d", next, end)
	}
	return ids
}

// waitCatchUp waits until meta has applied everything in the log.
func (h *harness) waitCatchUp(meta *metalog.Catalog) {
	h.t.Helper()
	head, err := h.log.Head(h.ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(h.ctx, 10*time.Second)
	defer cancel()
	if err := meta.WaitIndex(ctx, head); err != nil {
		h.t.Fatal(err)
	}
}

// faultyMeta wraps Metadata and can fail or "lose" proposals.
type faultyMeta struct {
	Metadata
	mu     sync.Mutex
	before func(rec catalog.Record) error // non-nil error: the proposal is not made
}

func (f *faultyMeta) Propose(ctx context.Context, rec catalog.Record) (catalog.Outcome, error) {
	f.mu.Lock()
	hook := f.before
	f.mu.Unlock()
	if hook != nil {
		if err := hook(rec); err != nil {
			return catalog.Outcome{}, err
		}
	}
	return f.Metadata.Propose(ctx, rec)
}

func (f *faultyMeta) setBefore(hook func(rec catalog.Record) error) {
	f.mu.Lock()
	f.before = hook
	f.mu.Unlock()
}

var errCrash = fmt.Errorf("simulated crash")

// failoverBy returns FailoverOptions for node by at its current epoch in meta.
func failoverBy(meta Metadata, by catalog.NodeID) FailoverOptions {
	var epoch uint64
	meta.Read(func(v *catalog.View) {
		if n, ok := v.Nodes[by]; ok {
			epoch = n.Epoch
		}
	})
	return FailoverOptions{By: by, ByEpoch: epoch, Logger: quietLogger()}
}
