package s3stream

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/objstore"
)

// becomeCoordinator registers node as coordinator and returns the epoch.
func (h *harness) becomeCoordinator(n *testNode) uint64 {
	h.t.Helper()
	var expect uint64
	n.meta.Read(func(v *catalog.View) { expect = v.Coordinator.Epoch })
	out, err := n.meta.Propose(h.ctx, catalog.RegisterCoordinator{Node: n.id, NodeEpoch: n.cfg.NodeEpoch, ExpectEpoch: expect})
	if err != nil {
		h.t.Fatal(err)
	}
	return out.Epoch
}

// appendFlushed appends ids, flushing every perObject entries, so that the
// stream gets one committed object per perObject entries.
func appendFlushed(t *testing.T, s *Stream, from, to, perObject uint64) {
	t.Helper()
	for i := from; i < to; i++ {
		mustAppend(t, s, i)
		if (i+1)%perObject == 0 {
			if err := s.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func streamOf(meta Metadata, id catalog.StreamID) catalog.Stream {
	var st catalog.Stream
	meta.Read(func(v *catalog.View) {
		if s, ok := v.Streams[id]; ok {
			st = *s
			st.Objects = slices.Clone(s.Objects)
		}
	})
	return st
}

func seq(from, to uint64) []uint64 {
	var out []uint64
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// A trim moves the start forward: reads below it fail with ErrTrimmed from
// the leader and from any node, reads above it are unchanged, appends go on,
// and the trimmed objects are deleted only after the collector's delay.
func TestTrimStream(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	a := h.start(1)
	coord := h.becomeCoordinator(a)
	s := mustOpen(t, a, sid, 1)
	appendFlushed(t, s, 0, 30, 10)
	st := streamOf(a.meta, sid)
	if len(st.Objects) != 3 {
		t.Fatalf("%d objects, want 3", len(st.Objects))
	}
	for _, o := range st.Objects {
		if o.At.IsZero() || time.Since(o.At) > time.Minute {
			t.Fatalf("object %s has write time %v", o.Key, o.At)
		}
	}
	trimmed := []string{st.Objects[0].Key, st.Objects[1].Key}
	if _, err := a.meta.Propose(ctx, catalog.TrimStream{Stream: sid, Start: 20, CoordinatorEpoch: coord}); err != nil {
		t.Fatal(err)
	}
	other := h.catalog()
	h.waitCatchUp(other)
	for name, read := range map[string]func(from, to uint64) ([]Entry, error){
		"leader": func(from, to uint64) ([]Entry, error) { return s.Read(ctx, from, to) },
		"reader": func(from, to uint64) ([]Entry, error) { return NewReader(h.store, other, nil).Read(ctx, sid, from, to) },
	} {
		_, err := read(5, 25)
		if !errors.Is(err, ErrTrimmed) || !strings.Contains(err.Error(), "starts at offset 20") {
			t.Fatalf("%s: read [5, 25) after a trim to 20: %v, want ErrTrimmed naming offset 20", name, err)
		}
		entries, err := read(20, 30)
		if err != nil {
			t.Fatal(err)
		}
		if got := idsOf(t, entries, 20, 30); !slices.Equal(got, seq(20, 30)) {
			t.Fatalf("%s: read [20, 30): %v", name, got)
		}
	}
	if got := NewReader(h.store, other, nil).Start(sid); got != 20 {
		t.Fatalf("Start = %d, want 20", got)
	}
	// The leader goes on appending and committing at the end.
	appendFlushed(t, s, 30, 40, 10)
	entries, err := s.Read(ctx, 20, 40)
	if err != nil {
		t.Fatal(err)
	}
	if got := idsOf(t, entries, 20, 40); !slices.Equal(got, seq(20, 40)) {
		t.Fatalf("after more appends: %v", got)
	}
	// The trimmed objects wait for the delay, then go; the rest stay.
	gc := NewCollector(h.store, a.meta, time.Hour)
	now := time.Now()
	gc.now = func() time.Time { return now }
	if _, err := gc.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	for _, k := range trimmed {
		if _, err := h.store.Get(ctx, k); err != nil {
			t.Fatalf("trimmed object %s deleted within the delay: %v", k, err)
		}
	}
	now = now.Add(2 * time.Hour)
	if _, err := gc.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	for _, k := range trimmed {
		if _, err := h.store.Get(ctx, k); !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("trimmed object %s after the delay: %v, want deleted", k, err)
		}
	}
	entries, err = NewReader(h.store, a.meta, nil).Read(ctx, sid, 20, 40)
	if err != nil {
		t.Fatal(err)
	}
	if got := idsOf(t, entries, 20, 40); !slices.Equal(got, seq(20, 40)) {
		t.Fatalf("after GC: %v", got)
	}
	// A compaction output that a trim removes is garbage too: no later
	// committed compaction ever covers its offsets.
	appendFlushed(t, s, 40, 43, 1)
	if n, err := s.Compact(ctx); err != nil || n < 3 {
		t.Fatalf("compact: %d, %v", n, err)
	}
	st = streamOf(a.meta, sid)
	compacted := st.Objects[0].Key
	if !strings.HasSuffix(compacted, "c") || st.Objects[0].At.IsZero() {
		t.Fatalf("first object after compaction: %+v", st.Objects[0])
	}
	if _, err := a.meta.Propose(ctx, catalog.TrimStream{Stream: sid, Start: st.End, CoordinatorEpoch: coord}); err != nil {
		t.Fatal(err)
	}
	if _, err := gc.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Hour)
	if _, err := gc.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := h.store.Get(ctx, compacted); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("trimmed compaction output %s: %v, want deleted", compacted, err)
	}
	if left, _ := h.store.List(ctx, "streams/"); len(left) != 0 {
		t.Fatalf("stream objects left after trimming everything: %v", left)
	}
	if entries, err := s.Read(ctx, st.End, st.End+10); err != nil || len(entries) != 0 {
		t.Fatalf("read at the end of a fully trimmed stream: %v %v", entries, err)
	}
}

// Trim, then crash at each step of the deletion: the trim is recorded but
// no object deleted (a collector that dies before its first delete); some
// deleted, then a crash. A new collector finishes, and no object the view
// references is ever deleted.
func TestTrimCrashHalfway(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	a := h.start(1)
	coord := h.becomeCoordinator(a)
	s := mustOpen(t, a, sid, 1)
	appendFlushed(t, s, 0, 50, 10)
	if _, err := a.meta.Propose(ctx, catalog.TrimStream{Stream: sid, Start: 40, CoordinatorEpoch: coord}); err != nil {
		t.Fatal(err)
	}
	keep := streamOf(a.meta, sid).Objects
	if len(keep) != 1 || keep[0].Start != 40 {
		t.Fatalf("objects after the trim: %+v", keep)
	}
	check := func(when string) {
		t.Helper()
		if _, err := h.store.Get(ctx, keep[0].Key); err != nil {
			t.Fatalf("%s: the retained object is gone: %v", when, err)
		}
		entries, err := NewReader(h.store, a.meta, nil).Read(ctx, sid, 40, 50)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if got := idsOf(t, entries, 40, 50); !slices.Equal(got, seq(40, 50)) {
			t.Fatalf("%s: %v", when, got)
		}
		if _, err := NewReader(h.store, a.meta, nil).Read(ctx, sid, 0, 50); !errors.Is(err, ErrTrimmed) {
			t.Fatalf("%s: read from 0: %v, want ErrTrimmed", when, err)
		}
	}
	countStreamObjects := func() int {
		objs, err := h.store.Inner().List(ctx, "streams/")
		if err != nil {
			t.Fatal(err)
		}
		return len(objs)
	}
	// Crash 1: every delete fails (the collector dies before deleting).
	remove := h.store.Inject(objstore.Rule{Ops: objstore.OpDelete, Prefix: "streams/", Err: errors.New("crash")})
	if _, err := NewCollector(h.store, a.meta, 0).Collect(ctx); err == nil {
		t.Fatal("collect with failing deletes succeeded")
	}
	remove()
	check("trim recorded, nothing deleted")
	if n := countStreamObjects(); n != 5 {
		t.Fatalf("%d stream objects, want 5 (nothing deleted yet)", n)
	}
	// Crash 2: two deletes succeed, the third fails.
	var deletes atomic.Int32
	h.store.SetHooks(objstore.Hooks{Before: func(_ context.Context, op objstore.Op, key string) error {
		if op == objstore.OpDelete && deletes.Add(1) > 2 {
			return errors.New("crash")
		}
		return nil
	}})
	if _, err := NewCollector(h.store, a.meta, 0).Collect(ctx); err == nil {
		t.Fatal("collect that crashed half-way succeeded")
	}
	h.store.SetHooks(objstore.Hooks{})
	check("some trimmed objects deleted, then a crash")
	if n := countStreamObjects(); n != 3 {
		t.Fatalf("%d stream objects after 2 deletes, want 3", n)
	}
	// A fresh collector (a new lease holder) finishes after its own delay.
	gc := NewCollector(h.store, a.meta, time.Hour)
	now := time.Now()
	gc.now = func() time.Time { return now }
	if st, err := gc.Collect(ctx); err != nil || st.Deleted != 0 || st.Waiting != 2 {
		t.Fatalf("new collector, first pass: %+v %v", st, err)
	}
	now = now.Add(2 * time.Hour)
	if st, err := gc.Collect(ctx); err != nil || st.Deleted != 2 {
		t.Fatalf("new collector after the delay: %+v %v", st, err)
	}
	check("after the new collector")
	if n := countStreamObjects(); n != 1 {
		t.Fatalf("%d stream objects at the end, want 1", n)
	}
}

// Readers race a trimmer and a collector. Every read returns exactly the
// entries asked for, or ErrTrimmed for a range that starts below the start at
// the time of the error; never wrong data, never another error. Two cases:
// readers sharing the collector's view with no collector delay (the worst
// case: an object is deleted between a reader's view and its get), and
// readers on another node's view with a delay (which is what the delay is
// for: that view may lag the collector's).
func TestReadsRacingTrim(t *testing.T) {
	t.Run("same view, no delay", func(t *testing.T) { testReadsRacingTrim(t, true, 0) })
	t.Run("other view, delay", func(t *testing.T) { testReadsRacingTrim(t, false, 100*time.Millisecond) })
}

func testReadsRacingTrim(t *testing.T, sameView bool, delay time.Duration) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	h := newHarness(t)
	ctx := context.Background()
	a := h.start(1)
	coord := h.becomeCoordinator(a)
	s := mustOpen(t, a, sid, 1)
	const n, per = 200, 5
	appendFlushed(t, s, 0, n, per)
	var readerMeta Metadata = a.meta
	if !sameView {
		other := h.catalog()
		h.waitCatchUp(other)
		readerMeta = other
	}

	var wg sync.WaitGroup
	stop := make(chan struct{})
	var reads, trimmedErrs atomic.Int64
	errs := make(chan error, 8)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			r := NewReader(h.store, readerMeta, nil)
			for {
				select {
				case <-stop:
					return
				default:
				}
				from := uint64(rng.IntN(n))
				to := from + 1 + uint64(rng.IntN(n-int(from)))
				entries, err := r.Read(ctx, sid, from, to)
				reads.Add(1)
				if errors.Is(err, ErrTrimmed) {
					if start := r.Start(sid); from >= start {
						errs <- fmt.Errorf("read [%d, %d): %v, but the stream starts at %d", from, to, err, start)
						return
					}
					trimmedErrs.Add(1)
					continue
				}
				if err != nil {
					errs <- fmt.Errorf("read [%d, %d): %v", from, to, err)
					return
				}
				var got []uint64
				for _, e := range entries {
					if e.End() > from && e.Offset < to {
						got = append(got, payloadIDNoT(e.Payload))
					}
				}
				if !slices.Equal(got, seq(from, to)) {
					errs <- fmt.Errorf("read [%d, %d): %v", from, to, got)
					return
				}
			}
		}()
	}
	gc := NewCollector(h.store, a.meta, delay)
	for start := uint64(per); start <= n-per; start += per {
		if _, err := a.meta.Propose(ctx, catalog.TrimStream{Stream: sid, Start: start, CoordinatorEpoch: coord}); err != nil {
			t.Fatal(err)
		}
		if _, err := gc.Collect(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	close(stop)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	t.Logf("%d reads, %d got ErrTrimmed", reads.Load(), trimmedErrs.Load())
	if trimmedErrs.Load() == 0 {
		t.Fatal("no read ever raced a trim; the test checks nothing")
	}
}

func payloadIDNoT(b []byte) uint64 {
	if len(b) != 8 {
		return ^uint64(0)
	}
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// DROP TABLE while the bucket's stream is open: the stream is retired, its
// holder still commits what it has and closes it (a lost close response is
// retried and taken as closed), the stream leaves the view and all its
// objects become garbage.
func TestDropTableRetiresOpenStream(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	fm := &faultyMeta{}
	a := h.start(1, func(c *Config) { fm.Metadata = c.Meta; c.Meta = fm })
	coord := h.becomeCoordinator(a)
	out, err := a.meta.Propose(ctx, catalog.CreateTable{Spec: catalog.TableSpec{Name: "t", Columns: []catalog.Column{{Name: "v", Type: "text"}}, Buckets: 1}})
	if err != nil {
		t.Fatal(err)
	}
	bucket := out.Buckets[0]
	lead, err := a.meta.Propose(ctx, catalog.LeadBucket{Bucket: bucket, Node: 1, CoordinatorEpoch: coord})
	if err != nil {
		t.Fatal(err)
	}
	id := catalog.StreamID(bucket)
	s := mustOpen(t, a, id, lead.Epoch)
	appendFlushed(t, s, 0, 10, 5)
	mustAppend(t, s, 10) // acknowledged, not committed yet
	if _, err := a.meta.Propose(ctx, catalog.DropTable{Table: out.Table}); err != nil {
		t.Fatal(err)
	}
	if st := streamOf(a.meta, id); !st.Retired || !st.Open {
		t.Fatalf("after DROP TABLE the open stream is %+v, want open and retired", st)
	}
	// The close's response is lost: CloseStream is applied, the caller
	// gets an error, and retries.
	fm.setBefore(func(rec catalog.Record) error {
		if _, ok := rec.(catalog.CloseStream); ok {
			fm.setBefore(nil)
			if _, err := fm.Metadata.Propose(ctx, rec); err != nil {
				return err
			}
			return errCrash
		}
		return nil
	})
	if err := s.Close(ctx); !errors.Is(err, errCrash) {
		t.Fatalf("close with a lost response: %v", err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatalf("close again: %v", err)
	}
	var inView bool
	a.meta.Read(func(v *catalog.View) { _, inView = v.Streams[id] })
	if inView {
		t.Fatal("the retired stream is still in the view after its close")
	}
	prefix := fmt.Sprintf("streams/%d/", id)
	if objs, _ := h.store.List(ctx, prefix); len(objs) != 3 {
		t.Fatalf("%d objects of the dropped stream before GC, want 3 (the last flush at close)", len(objs))
	}
	gc := NewCollector(h.store, a.meta, time.Hour)
	now := time.Now()
	gc.now = func() time.Time { return now }
	if st, err := gc.Collect(ctx); err != nil || st.Deleted != 0 {
		t.Fatalf("first pass: %+v %v", st, err)
	}
	now = now.Add(2 * time.Hour)
	if _, err := gc.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	if objs, _ := h.store.List(ctx, prefix); len(objs) != 0 {
		t.Fatalf("objects of the dropped stream after GC: %v", objs)
	}
}
