package s3stream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/metalog"
	"github.com/minkdb/mink/objstore"
)

const sid = catalog.StreamID(7)

func mustAppend(t *testing.T, s *Stream, id uint64) uint64 {
	t.Helper()
	off, err := s.Append(context.Background(), payload(id), 1)
	if err != nil {
		t.Fatalf("append %d: %v", id, err)
	}
	return off
}

func mustOpen(t *testing.T, n *testNode, id catalog.StreamID, epoch uint64) *Stream {
	t.Helper()
	s, err := n.OpenStream(context.Background(), id, epoch)
	if err != nil {
		t.Fatalf("node %d open stream %d at epoch %d: %v", n.id, id, epoch, err)
	}
	return s
}

func TestFormatRoundTripAndCorruption(t *testing.T) {
	w := walObject{Node: 3, Epoch: 9, Seq: 12, Entries: []walEntry{
		{Stream: 1, StreamEpoch: 2, Entry: Entry{Offset: 5, Count: 3, Payload: []byte("abc")}},
		{Stream: 4, StreamEpoch: 1, Entry: Entry{Offset: 0, Count: 1, Payload: nil}},
	}}
	b := encodeWAL(w)
	got, err := decodeWAL(b)
	if err != nil || got.Node != 3 || got.Epoch != 9 || got.Seq != 12 || len(got.Entries) != 2 ||
		string(got.Entries[0].Payload) != "abc" || got.Entries[0].Offset != 5 || got.Entries[1].Stream != 4 {
		t.Fatalf("WAL round trip: %+v, %v", got, err)
	}
	for i := range b {
		bad := bytes.Clone(b)
		bad[i] ^= 0x40
		if _, err := decodeWAL(bad); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("flipping byte %d: %v, want ErrCorrupt", i, err)
		}
	}
	if _, err := decodeWAL(b[:len(b)-1]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("truncated WAL object: %v", err)
	}
	o := streamObject{Stream: 1, Epoch: 2, Start: 5, End: 9, Entries: []Entry{{Offset: 5, Count: 3, Payload: []byte("x")}, {Offset: 8, Count: 1, Payload: []byte("yz")}}}
	ob := encodeStreamObject(o)
	gotO, err := decodeStreamObject(ob)
	if err != nil || gotO.End != 9 || len(gotO.Entries) != 2 || string(gotO.Entries[1].Payload) != "yz" {
		t.Fatalf("stream object round trip: %+v, %v", gotO, err)
	}
	ob[len(ob)-10] ^= 1
	if _, err := decodeStreamObject(ob); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("corrupt stream object: %v", err)
	}
}

func TestAppendReadFlush(t *testing.T) {
	h := newHarness(t)
	a := h.start(1)
	s := mustOpen(t, a, sid, 1)
	for i := uint64(0); i < 10; i++ {
		if off := mustAppend(t, s, 100+i); off != i {
			t.Fatalf("append %d got offset %d", i, off)
		}
	}
	// Unflushed: served by the leader from memory, nothing committed yet.
	entries, err := s.Read(context.Background(), 3, 7)
	if err != nil {
		t.Fatal(err)
	}
	if ids := idsOf(t, entries, 3, 7); !slices.Equal(ids, []uint64{103, 104, 105, 106}) {
		t.Fatalf("memory read: %v", ids)
	}
	if got := readAll(t, h.store, a.meta, sid); len(got) != 0 {
		t.Fatalf("committed before any flush: %v", got)
	}
	if err := s.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, 110)
	// Committed plus memory, across the boundary.
	entries, err = s.Read(context.Background(), 8, 100)
	if err != nil {
		t.Fatal(err)
	}
	if ids := idsOf(t, entries, 8, 11); !slices.Equal(ids, []uint64{108, 109, 110}) {
		t.Fatalf("read across the committed end: %v", ids)
	}
	// Any node reads the committed part.
	other := h.catalog()
	h.waitCatchUp(other)
	if got := readAll(t, h.store, other, sid); len(got) != 10 || got[9] != 109 {
		t.Fatalf("committed read from another node: %v", got)
	}
	// The WAL below the trim is garbage once everything is committed.
	if err := a.FlushAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	var trim uint64
	a.meta.Read(func(v *catalog.View) { trim = v.WALTrims[catalog.WALID{Node: 1, Epoch: a.cfg.NodeEpoch}] })
	if trim == 0 {
		t.Fatal("WAL trim did not advance after everything was committed")
	}
	gc := NewCollector(h.store, a.meta, 0)
	st, err := gc.Collect(context.Background())
	if err != nil || st.Deleted == 0 {
		t.Fatalf("gc: %+v %v", st, err)
	}
	walLeft, _ := h.store.List(context.Background(), walPrefix(1, a.cfg.NodeEpoch))
	if len(walLeft) != 0 {
		t.Fatalf("WAL objects below the trim survive GC: %v", walLeft)
	}
	h.waitCatchUp(other)
	if got := readAll(t, h.store, other, sid); len(got) != 11 {
		t.Fatalf("after GC: %v", got)
	}
}

// Fault 1: ownership moves A → B → A with one append at each step.
func TestOwnershipABA(t *testing.T) {
	h := newHarness(t)
	a, b := h.start(1), h.start(2)

	s := mustOpen(t, a, sid, 1)
	if off := mustAppend(t, s, 1000); off != 0 {
		t.Fatalf("first append at %d", off)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.waitCatchUp(b.meta)
	s = mustOpen(t, b, sid, 2)
	if off := mustAppend(t, s, 1001); off != 1 {
		t.Fatalf("second append at %d", off)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.waitCatchUp(a.meta)
	// A's old epoch is fenced.
	if _, err := a.OpenStream(context.Background(), sid, 1); !errors.Is(err, catalog.ErrFenced) {
		t.Fatalf("reopen at the old epoch: %v, want ErrFenced", err)
	}
	s = mustOpen(t, a, sid, 3)
	if off := mustAppend(t, s, 1002); off != 2 {
		t.Fatalf("third append at %d", off)
	}
	if err := s.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, meta := range []*metalog.Catalog{a.meta, b.meta, h.catalog()} {
		h.waitCatchUp(meta)
		if got := readAll(t, h.store, meta, sid); !slices.Equal(got, []uint64{1000, 1001, 1002}) {
			t.Fatalf("read: %v", got)
		}
	}
}

// Fault 6: two nodes racing to open the same stream; exactly one wins and the
// loser is told who holds it.
func TestOpenRace(t *testing.T) {
	for round := 0; round < 20; round++ {
		h := newHarness(t)
		a, b := h.start(1), h.start(2)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, n := range []*testNode{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = n.OpenStream(context.Background(), sid, 1)
			}()
		}
		wg.Wait()
		wins := 0
		for i, err := range errs {
			if err == nil {
				wins++
				continue
			}
			var held *catalog.HeldByError
			if !errors.As(err, &held) || held.Node != catalog.NodeID(2-i) {
				t.Fatalf("loser %d: %v, want held by node %d", i+1, err, 2-i)
			}
		}
		if wins != 1 {
			t.Fatalf("round %d: %d winners (%v)", round, wins, errs)
		}
	}
}

// Fault 2: a zombie leader keeps appending after B has taken over. Nothing it
// appends after the seal is acknowledged; everything it acknowledged before
// is in the stream; and nothing it refused outright (ErrFenced without
// ErrUnknownOutcome, which a caller may write again elsewhere) is: an entry
// of a WAL object below the seal is replayed by B, so its appender is told
// the outcome is unknown.
func TestZombieLeader(t *testing.T) {
	h := newHarness(t)
	a := h.start(1)
	s := mustOpen(t, a, sid, 1)

	var mu sync.Mutex
	var acked, refused []uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := uint64(0); ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := uint64(w)<<32 | i
				if _, err := s.Append(context.Background(), payload(id), 1); err != nil {
					if !errors.Is(err, ErrFenced) {
						t.Errorf("zombie append: %v, want ErrFenced", err)
					}
					if !errors.Is(err, ErrUnknownOutcome) {
						mu.Lock()
						refused = append(refused, id)
						mu.Unlock()
					}
					return
				}
				mu.Lock()
				acked = append(acked, id)
				mu.Unlock()
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	if err := s.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)

	// B takes over: bump A's epoch, fail over A's WAL, open at a new epoch.
	b := h.start(2)
	h.register(b.meta, 1)
	h.waitCatchUp(b.meta)
	if _, err := Failover(context.Background(), h.store, b.meta, 1, a.cfg.NodeEpoch, failoverBy(b.meta, 2)); err != nil {
		t.Fatal(err)
	}
	sb := mustOpen(t, b, sid, 2)
	// Garbage collection of the sealed WAL must keep the seal: otherwise the
	// zombie's next create-only put would find its seq free again.
	if _, err := NewCollector(h.store, b.meta, 0).Collect(context.Background()); err != nil {
		t.Fatal(err)
	}

	// The zombie is fenced: its appends fail from here on.
	deadline := time.Now().Add(5 * time.Second)
	for a.Fenced() == nil && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if a.Fenced() == nil {
		t.Fatal("zombie not fenced after the seal")
	}
	if _, err := s.Append(context.Background(), payload(1<<60), 1); !errors.Is(err, ErrFenced) {
		t.Fatalf("append after fencing: %v", err)
	}
	mu.Lock()
	ackedSet := map[uint64]bool{}
	for _, id := range acked {
		ackedSet[id] = true
	}
	mu.Unlock()

	// B continues at the committed end; no offset is reused.
	end := sb.End()
	if off := mustAppend(t, sb, 1<<61); off != end {
		t.Fatalf("B appended at %d, want the committed end %d", off, end)
	}
	if err := sb.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := readAll(t, h.store, b.meta, sid)
	seen := map[uint64]bool{}
	for _, id := range got {
		if seen[id] {
			t.Fatalf("record %x twice", id)
		}
		seen[id] = true
	}
	for id := range ackedSet {
		if !seen[id] {
			t.Fatalf("acknowledged record %x lost (acked %d, stream %d)", id, len(ackedSet), len(got))
		}
	}
	mu.Lock()
	for _, id := range refused {
		if seen[id] {
			t.Fatalf("record %x is in the stream, but its append failed with a plain ErrFenced: a caller writing it again elsewhere duplicates it", id)
		}
	}
	mu.Unlock()
	if len(ackedSet) == 0 {
		t.Fatal("the zombie acknowledged nothing before the takeover; the test proves nothing")
	}
	t.Logf("zombie acked %d, stream holds %d records", len(ackedSet), len(got))
}

// Fault 3: the response of a successful WAL put is lost.
func TestLostWALResponse(t *testing.T) {
	h := newHarness(t)
	a := h.start(1)
	s := mustOpen(t, a, sid, 1)
	mustAppend(t, s, 1)
	remove := h.store.Inject(objstore.Rule{Ops: objstore.OpPut, Prefix: "wal/", Times: 1, LoseResponse: true})
	defer remove()
	_, err := s.Append(context.Background(), payload(2), 1)
	if !errors.Is(err, ErrUnknownOutcome) {
		t.Fatalf("append with a lost response: %v, want ErrUnknownOutcome", err)
	}
	// The retry finds the object in place with the same bytes: the entry is
	// durable once, and later appends continue after it.
	if off := mustAppend(t, s, 3); off != 2 {
		t.Fatalf("append after the lost response at %d, want 2", off)
	}
	if err := s.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, h.store, a.meta, sid); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("stream: %v, want [1 2 3]", got)
	}
}

// Fault 4: the object store fails puts for a while.
func TestStoreOutage(t *testing.T) {
	h := newHarness(t)
	a := h.start(1)
	s := mustOpen(t, a, sid, 1)
	mustAppend(t, s, 1)
	remove := h.store.Inject(objstore.Rule{Ops: objstore.OpPut, Prefix: "wal/", Err: errors.New("503 slow down")})
	var errsSeen atomic.Int32
	var wg sync.WaitGroup
	for i := uint64(0); i < 5; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if _, err := s.Append(ctx, payload(100+i), 1); err != nil {
				if !errors.Is(err, ErrUnknownOutcome) {
					t.Errorf("append during the outage: %v", err)
				}
				errsSeen.Add(1)
			}
		}()
	}
	wg.Wait()
	if errsSeen.Load() != 5 {
		t.Fatalf("%d of 5 appends during the outage failed; want all", errsSeen.Load())
	}
	// The appenders were told at the first failure; their WAL objects are
	// still being retried, and Stalled says for how long (what
	// --store-outage-timeout reads).
	time.Sleep(200 * time.Millisecond)
	if d := a.Stalled(); d < 200*time.Millisecond || d > time.Minute {
		t.Fatalf("Stalled = %v 200 ms into the outage", d)
	}
	remove()
	// Later appends succeed and continue after the failed ones: no gap, no reuse.
	off := mustAppend(t, s, 200)
	if d := a.Stalled(); d != 0 {
		t.Fatalf("Stalled = %v once every WAL object is durable, want 0", d)
	}
	if off != 6 {
		t.Fatalf("append after the outage at offset %d, want 6", off)
	}
	if err := s.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := readAll(t, h.store, a.meta, sid)
	if len(got) != 7 || got[0] != 1 || got[6] != 200 {
		t.Fatalf("stream after the outage: %v", got)
	}
	mid := slices.Clone(got[1:6])
	slices.Sort(mid)
	if !slices.Equal(mid, []uint64{100, 101, 102, 103, 104}) {
		t.Fatalf("the retried entries: %v", mid)
	}
}

// Fault 5a: a crash at every step of the stream-object commit, then recovery
// by failover: every acknowledged record is present exactly once.
func TestCrashDuringFlush(t *testing.T) {
	steps := []struct {
		name  string
		setup func(h *harness, fm *faultyMeta)
	}{
		{"stream object put fails", func(h *harness, fm *faultyMeta) {
			h.store.Inject(objstore.Rule{Ops: objstore.OpPut, Prefix: "streams/", Err: errCrash})
		}},
		{"stream object put response lost", func(h *harness, fm *faultyMeta) {
			h.store.Inject(objstore.Rule{Ops: objstore.OpPut, Prefix: "streams/", LoseResponse: true})
		}},
		{"commit not proposed", func(h *harness, fm *faultyMeta) {
			fm.setBefore(func(rec catalog.Record) error {
				if _, ok := rec.(catalog.CommitStreamObjects); ok {
					return errCrash
				}
				return nil
			})
		}},
		{"commit applied, response lost", func(h *harness, fm *faultyMeta) {
			fm.setBefore(func(rec catalog.Record) error {
				if _, ok := rec.(catalog.CommitStreamObjects); ok {
					fm.Metadata.Propose(context.Background(), rec)
					return errCrash
				}
				return nil
			})
		}},
		{"trim not proposed", func(h *harness, fm *faultyMeta) {
			fm.setBefore(func(rec catalog.Record) error {
				if _, ok := rec.(catalog.CommitWALTrim); ok {
					return errCrash
				}
				return nil
			})
		}},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			h := newHarness(t)
			fm := &faultyMeta{Metadata: h.catalog()}
			epoch := h.register(fm, 1)
			n, err := NewNode(Config{Node: 1, NodeEpoch: epoch, Store: h.store, Meta: fm, Logger: quietLogger(),
				BatchWindow: time.Millisecond, FlushInterval: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			s, err := n.OpenStream(context.Background(), sid, 1)
			if err != nil {
				t.Fatal(err)
			}
			var want []uint64
			for i := uint64(0); i < 5; i++ {
				mustAppend(t, s, i)
				want = append(want, i)
			}
			if err := n.FlushAll(context.Background()); err != nil {
				t.Fatal(err)
			}
			for i := uint64(5); i < 10; i++ {
				mustAppend(t, s, i)
				want = append(want, i)
			}
			step.setup(h, fm)
			_ = n.FlushAll(context.Background()) // the crash
			n.Close()                            // abandon the writer
			h.store.Reset()
			fm.setBefore(nil)

			// The node restarts: new epoch, recovers its old epoch's WAL.
			meta := h.catalog()
			h.register(meta, 1)
			h.waitCatchUp(meta)
			if _, err := RecoverNode(context.Background(), h.store, meta, 1, failoverBy(meta, 1)); err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, h.store, meta, sid); !slices.Equal(got, want) {
				t.Fatalf("after recovery: %v, want %v", got, want)
			}
		})
	}
}

// Fault 5b: a crash at every step of failover, then failover again.
func TestCrashDuringFailover(t *testing.T) {
	type crashPoint struct {
		name  string
		setup func(h *harness, fm *faultyMeta)
	}
	points := []crashPoint{
		{"seal put fails", func(h *harness, fm *faultyMeta) {
			h.store.Inject(objstore.Rule{Ops: objstore.OpPut, Prefix: "wal/", Err: errCrash})
		}},
		{"seal put response lost", func(h *harness, fm *faultyMeta) {
			h.store.Inject(objstore.Rule{Ops: objstore.OpPut, Prefix: "wal/", LoseResponse: true})
		}},
		{"WAL read fails", func(h *harness, fm *faultyMeta) {
			h.store.Inject(objstore.Rule{Ops: objstore.OpGet, Prefix: "wal/", Err: errCrash, Times: 1})
		}},
		{"recovered object put fails", func(h *harness, fm *faultyMeta) {
			h.store.Inject(objstore.Rule{Ops: objstore.OpPut, Prefix: "streams/", Err: errCrash})
		}},
	}
	for _, kind := range []string{"CommitStreamObjects", "CloseStream", "CommitWALTrim"} {
		points = append(points,
			crashPoint{kind + " not proposed", func(h *harness, fm *faultyMeta) {
				fm.setBefore(func(rec catalog.Record) error {
					if fmt.Sprintf("%T", rec) == "catalog."+kind {
						return errCrash
					}
					return nil
				})
			}},
			crashPoint{kind + " applied, response lost", func(h *harness, fm *faultyMeta) {
				fm.setBefore(func(rec catalog.Record) error {
					if fmt.Sprintf("%T", rec) == "catalog."+kind {
						fm.Metadata.Propose(context.Background(), rec)
						return errCrash
					}
					return nil
				})
			}})
	}
	for _, p := range points {
		t.Run(p.name, func(t *testing.T) {
			h := newHarness(t)
			a := h.start(1)
			s := mustOpen(t, a, sid, 1)
			s2 := mustOpen(t, a, sid+1, 1)
			var want []uint64
			for i := uint64(0); i < 6; i++ {
				mustAppend(t, s, i)
				mustAppend(t, s2, 100+i)
				want = append(want, i)
				if i == 2 {
					if err := a.FlushAll(context.Background()); err != nil {
						t.Fatal(err)
					}
				}
			}
			a.Close() // A dies

			fm := &faultyMeta{Metadata: h.catalog()}
			h.register(fm, 1)
			p.setup(h, fm)
			if _, err := Failover(context.Background(), h.store, fm, 1, a.cfg.NodeEpoch, failoverBy(fm, 1)); err == nil {
				t.Fatal("failover did not hit the crash point")
			}
			h.store.Reset()
			fm.setBefore(nil)
			// A new taker runs failover again and finishes the job.
			meta := h.catalog()
			h.waitCatchUp(meta)
			if _, err := Failover(context.Background(), h.store, meta, 1, a.cfg.NodeEpoch, failoverBy(meta, 1)); err != nil {
				t.Fatal(err)
			}
			// And once more: idempotent.
			if _, err := Failover(context.Background(), h.store, meta, 1, a.cfg.NodeEpoch, failoverBy(meta, 1)); err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, h.store, meta, sid); !slices.Equal(got, want) {
				t.Fatalf("stream after failover: %v, want %v", got, want)
			}
			if got := readAll(t, h.store, meta, sid+1); len(got) != 6 || got[5] != 105 {
				t.Fatalf("second stream after failover: %v", got)
			}
			var open bool
			meta.Read(func(v *catalog.View) { open = v.Streams[sid].Open || v.Streams[sid+1].Open })
			if open {
				t.Fatal("streams still open after failover")
			}
			// The next owner continues at the end.
			b := h.start(2)
			sb := mustOpen(t, b, sid, 2)
			if off := mustAppend(t, sb, 99); off != 6 {
				t.Fatalf("new owner appended at %d, want 6", off)
			}
		})
	}
}

func TestFailoverRefusesLiveEpoch(t *testing.T) {
	h := newHarness(t)
	a := h.start(1)
	mustOpen(t, a, sid, 1)
	_, err := Failover(context.Background(), h.store, a.meta, 1, a.cfg.NodeEpoch, failoverBy(a.meta, 1))
	if !errors.Is(err, ErrNotFenced) {
		t.Fatalf("failover of a live epoch: %v, want ErrNotFenced", err)
	}
}

// A WAL object that does not decode is never skipped silently. A stream
// with an entry in a later WAL object is recovered (the gap check shows
// whether the damaged object held any of its writes); any other stream
// stays open, and Failover names the object and the streams. The WAL trim
// point stays, so that once the object is restored, Failover recovers
// everything.
func TestFailoverCorruptWAL(t *testing.T) {
	a, b := sid, sid+1
	// The WAL objects, one per append: seq 0 a:0, 1 b:100, 2 a:1, 3 b:101,
	// 4 a:2, 5 b:102. After the flush, a and b are committed up to seq 1.
	cases := []struct {
		name     string
		damage   []uint64                      // the seqs of the damaged objects
		lost     []catalog.StreamID            // the streams left open
		complete map[catalog.StreamID][]uint64 // the recovered streams and their ids
	}{
		{name: "committed entries only", damage: []uint64{1},
			complete: map[catalog.StreamID][]uint64{a: {0, 1, 2}, b: {100, 101, 102}}},
		{name: "uncommitted entry of a, b continues after it", damage: []uint64{2},
			lost: []catalog.StreamID{a}, complete: map[catalog.StreamID][]uint64{b: {100, 101, 102}}},
		{name: "two objects of a", damage: []uint64{2, 4},
			lost: []catalog.StreamID{a}, complete: map[catalog.StreamID][]uint64{b: {100, 101, 102}}},
		{name: "the last object: nothing follows it", damage: []uint64{5},
			lost: []catalog.StreamID{a, b}},
		{name: "the last object of a, b follows it", damage: []uint64{4},
			lost: []catalog.StreamID{a}, complete: map[catalog.StreamID][]uint64{b: {100, 101, 102}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			h := newHarness(t)
			mem := objstore.NewMem()
			h.store = objstore.NewFaulty(mem)
			n := h.start(1)
			sa, sb := mustOpen(t, n, a, 1), mustOpen(t, n, b, 1)
			for i := uint64(0); i < 3; i++ {
				mustAppend(t, sa, i)
				mustAppend(t, sb, 100+i)
				if i == 0 {
					// Commit the first entries without moving the WAL trim
					// point: seqs 0 and 1 are replayed but already committed.
					if err := sa.Flush(ctx); err != nil {
						t.Fatal(err)
					}
					if err := sb.Flush(ctx); err != nil {
						t.Fatal(err)
					}
				}
			}
			n.Close()
			epoch := n.cfg.NodeEpoch
			originals := map[string][]byte{}
			var keys []string
			for _, seq := range c.damage {
				key := walKey(1, epoch, seq)
				data, err := mem.Get(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				originals[key] = slices.Clone(data)
				data[len(data)/2] ^= 0xff
				mem.Delete(ctx, key)
				mem.PutIfAbsent(ctx, key, data)
				keys = append(keys, key)
			}
			meta := h.catalog()
			h.register(meta, 1)
			_, err := Failover(ctx, h.store, meta, 1, epoch, failoverBy(meta, 1))
			var wc *WALCorruptError
			if len(c.lost) == 0 {
				if err != nil {
					t.Fatalf("failover: %v, want every stream recovered", err)
				}
			} else {
				if !errors.As(err, &wc) || !errors.Is(err, ErrCorrupt) {
					t.Fatalf("failover: %v, want a WALCorruptError", err)
				}
				for _, key := range keys {
					if !strings.Contains(err.Error(), key) {
						t.Fatalf("failover error %q does not name %s", err, key)
					}
				}
				if got := slices.Sorted(maps.Keys(wc.Streams)); !slices.Equal(got, c.lost) {
					t.Fatalf("streams left open: %v, want %v (%v)", got, c.lost, err)
				}
			}
			var trim uint64
			open := map[catalog.StreamID]bool{}
			meta.Read(func(v *catalog.View) {
				trim = v.WALTrims[catalog.WALID{Node: 1, Epoch: epoch}]
				open[a], open[b] = v.Streams[a].Open, v.Streams[b].Open
			})
			for _, id := range c.lost {
				if !open[id] {
					t.Fatalf("stream %d was closed after losing entries to a damaged WAL object", id)
				}
			}
			for id, want := range c.complete {
				if open[id] {
					t.Fatalf("stream %d still open", id)
				}
				if got := readAll(t, h.store, meta, id); !slices.Equal(got, want) {
					t.Fatalf("stream %d after failover: %v, want %v", id, got, want)
				}
			}
			if len(c.lost) > 0 && trim != 0 {
				t.Fatalf("WAL trimmed to %d past a damaged object", trim)
			}
			// Running it again changes nothing; with the objects restored
			// it recovers the rest.
			if _, err := Failover(ctx, h.store, meta, 1, epoch, failoverBy(meta, 1)); (err == nil) != (len(c.lost) == 0) {
				t.Fatalf("failover again: %v", err)
			}
			for key, data := range originals {
				mem.Delete(ctx, key)
				mem.PutIfAbsent(ctx, key, data)
			}
			if _, err := Failover(ctx, h.store, meta, 1, epoch, failoverBy(meta, 1)); err != nil {
				t.Fatalf("failover with the objects restored: %v", err)
			}
			for id, want := range map[catalog.StreamID][]uint64{a: {0, 1, 2}, b: {100, 101, 102}} {
				if got := readAll(t, h.store, meta, id); !slices.Equal(got, want) {
					t.Fatalf("stream %d after the objects were restored: %v, want %v", id, got, want)
				}
			}
		})
	}
}

func TestGCKeepsWhatMayStillCommit(t *testing.T) {
	h := newHarness(t)
	a := h.start(1)
	s := mustOpen(t, a, sid, 1)
	mustAppend(t, s, 1)
	if err := s.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// An uncommitted object at the current epoch beyond the end: maybe in flight.
	inflight := streamObjectKey(sid, 1, 2, 1)
	h.store.PutIfAbsent(ctx, inflight, []byte("x"))
	// An orphan of a fenced epoch and a duplicate below the end: garbage.
	fenced := streamObjectKey(sid, 1, 2, 0)
	dup := streamObjectKey(sid, 0, 1, 5)
	h.store.PutIfAbsent(ctx, fenced, []byte("x"))
	h.store.PutIfAbsent(ctx, dup, []byte("x"))
	gc := NewCollector(h.store, a.meta, time.Hour)
	now := time.Now()
	gc.now = func() time.Time { return now }
	if st, err := gc.Collect(ctx); err != nil || st.Deleted != 0 || st.Waiting != 2 {
		t.Fatalf("first pass within the delay: %+v %v", st, err)
	}
	now = now.Add(2 * time.Hour)
	if st, err := gc.Collect(ctx); err != nil || st.Deleted != 2 {
		t.Fatalf("second pass: %+v %v", st, err)
	}
	for key, want := range map[string]bool{inflight: true, fenced: false, dup: false} {
		_, err := h.store.Get(ctx, key)
		if exists := err == nil; exists != want {
			t.Fatalf("%s exists=%v, want %v", key, exists, want)
		}
	}
	if got := readAll(t, h.store, a.meta, sid); !slices.Equal(got, []uint64{1}) {
		t.Fatalf("committed data after GC: %v", got)
	}
}

func TestCompaction(t *testing.T) {
	h := newHarness(t)
	a := h.start(1)
	ctx := context.Background()
	s := mustOpen(t, a, sid, 1)
	var want []uint64
	for i := uint64(0); i < 10; i++ {
		mustAppend(t, s, i)
		want = append(want, i)
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	objectsOf := func() []catalog.StreamObject {
		var objs []catalog.StreamObject
		a.meta.Read(func(v *catalog.View) { objs = slices.Clone(v.Streams[sid].Objects) })
		return objs
	}
	before := objectsOf()
	if len(before) != 10 {
		t.Fatalf("%d objects after 10 flushes", len(before))
	}
	n, err := s.Compact(ctx)
	if err != nil || n != 10 {
		t.Fatalf("compact: %d objects, %v", n, err)
	}
	after := objectsOf()
	if len(after) != 1 || after[0].Start != 0 || after[0].End != 10 || !strings.HasSuffix(after[0].Key, "c") {
		t.Fatalf("after compaction: %+v", after)
	}
	if got := readAll(t, h.store, a.meta, sid); !slices.Equal(got, want) {
		t.Fatalf("read after compaction: %v", got)
	}
	// A reader with a cache reads the same.
	cache, err := NewCache(t.TempDir(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := NewReader(h.store, a.meta, cache).Read(ctx, sid, 3, 7)
	if err != nil || !slices.Equal(idsOf(t, entries, 3, 7), want[3:7]) {
		t.Fatalf("cached read after compaction: %v", err)
	}

	// An in-flight compaction output at the current epoch survives GC; the
	// replaced objects go once the delay has passed.
	inflight := compactionKey(sid, 10, 20, 1)
	h.store.PutIfAbsent(ctx, inflight, []byte("x"))
	gc := NewCollector(h.store, a.meta, 0)
	st, err := gc.Collect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range before {
		if _, err := h.store.Get(ctx, o.Key); !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("replaced object %s survived GC (%+v): %v", o.Key, st, err)
		}
	}
	if _, err := h.store.Get(ctx, inflight); err != nil {
		t.Fatalf("in-flight compaction output deleted: %v", err)
	}
	if got := readAll(t, h.store, a.meta, sid); !slices.Equal(got, want) {
		t.Fatalf("read after GC: %v", got)
	}

	// A compaction from a fenced epoch is rejected and deletes nothing.
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	s2 := mustOpen(t, a, sid, 2)
	for i := uint64(10); i < 14; i++ {
		mustAppend(t, s2, i)
		want = append(want, i)
		if err := s2.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	objs := objectsOf()
	_, err = a.meta.Propose(ctx, catalog.CompactStreamObjects{Stream: sid, Epoch: 1, Replaces: objs[1:3],
		With: catalog.StreamObject{Key: compactionKey(sid, objs[1].Start, objs[2].End, 1), Start: objs[1].Start, End: objs[2].End}})
	if !errors.Is(err, catalog.ErrFenced) {
		t.Fatalf("compaction at a fenced epoch: %v", err)
	}
	if _, err := gc.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := h.store.Get(ctx, inflight); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("the old epoch's uncommitted compaction output survived GC: %v", err)
	}
	if err := a.FlushAll(ctx); err != nil { // compacts the 4 new objects with the old one
		t.Fatal(err)
	}
	if got := objectsOf(); len(got) != 1 || got[0].End != 14 {
		t.Fatalf("second compaction: %+v", got)
	}
	if got := readAll(t, h.store, a.meta, sid); !slices.Equal(got, want) {
		t.Fatalf("read after the second compaction: %v", got)
	}
}

func TestPlanCompaction(t *testing.T) {
	obj := func(start, end uint64, size int64) catalog.StreamObject {
		return catalog.StreamObject{Key: fmt.Sprint(start), Start: start, End: end, Size: size}
	}
	objs := []catalog.StreamObject{obj(0, 1, 10), obj(1, 2, 1000), obj(2, 3, 10), obj(3, 4, 10), obj(4, 5, 10), obj(5, 6, 10)}
	if got := planCompaction(objs, 100, 3, 1<<20); len(got) != 4 || got[0].Start != 2 {
		t.Fatalf("plan: %+v", got)
	}
	if got := planCompaction(objs, 100, 5, 1<<20); got != nil {
		t.Fatalf("plan with too few small objects: %+v", got)
	}
	if got := planCompaction(objs, 100, 2, 25); len(got) != 2 || got[0].Start != 2 {
		t.Fatalf("plan capped by size: %+v", got)
	}
}

// A zombie's WAL is sealed while two of its uploads are in flight: object
// k is written but not yet acknowledged, object k+1 is not written. The
// node taking over seals at k+1 and replays k. So the append in k is
// durable though unacknowledged, and its appender must hear the outcome is
// unknown (a caller that wrote it again elsewhere would duplicate it); the
// append in k+1 is refused outright (ErrFenced) and is not in the stream.
func TestFenceAcrossInflightUploads(t *testing.T) {
	h := newHarness(t)
	a := h.start(1)
	s := mustOpen(t, a, sid, 1)
	mustAppend(t, s, 1)

	var mu sync.Mutex
	var walPuts []string
	written, releaseWritten := make(chan string, 1), make(chan struct{})
	unwritten, releaseUnwritten := make(chan string, 1), make(chan struct{})
	h.store.SetHooks(objstore.Hooks{
		Before: func(ctx context.Context, op objstore.Op, key string) error {
			if op != objstore.OpPut || !strings.HasPrefix(key, "wal/1/") {
				return nil
			}
			mu.Lock()
			walPuts = append(walPuts, key)
			n := len(walPuts)
			mu.Unlock()
			if n == 2 { // object k+1: held before it is written
				unwritten <- key
				<-releaseUnwritten
			}
			return nil
		},
		After: func(ctx context.Context, op objstore.Op, key string, err error) error {
			mu.Lock()
			first := len(walPuts) >= 1 && walPuts[0] == key
			mu.Unlock()
			if op == objstore.OpPut && first && err == nil {
				written <- key // object k: written, its answer held
				<-releaseWritten
			}
			return err
		},
	})
	type result struct {
		id  uint64
		err error
	}
	results := make(chan result, 2)
	go func() { _, err := s.Append(context.Background(), payload(2), 1); results <- result{2, err} }()
	<-written
	go func() { _, err := s.Append(context.Background(), payload(3), 1); results <- result{3, err} }()
	<-unwritten

	// B takes over while both uploads are held: it seals at k+1 and replays
	// everything below, object k too.
	b := h.start(2)
	h.register(b.meta, 1)
	h.waitCatchUp(b.meta)
	if _, err := Failover(context.Background(), h.store, b.meta, 1, a.cfg.NodeEpoch, failoverBy(b.meta, 2)); err != nil {
		t.Fatal(err)
	}
	close(releaseUnwritten) // k+1's put finds the seal: A is fenced
	deadline := time.Now().Add(5 * time.Second)
	for a.Fenced() == nil && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if a.Fenced() == nil {
		t.Fatal("A not fenced after its put met the seal")
	}
	close(releaseWritten)
	got := map[uint64]error{}
	for range 2 {
		r := <-results
		got[r.id] = r.err
	}
	h.store.SetHooks(objstore.Hooks{})
	if err := got[2]; !errors.Is(err, ErrUnknownOutcome) {
		t.Fatalf("the append in the written object: %v, want ErrUnknownOutcome (it is below the seal)", err)
	}
	if err := got[3]; !errors.Is(err, ErrFenced) || errors.Is(err, ErrUnknownOutcome) {
		t.Fatalf("the append in the object past the seal: %v, want ErrFenced alone", err)
	}
	sb := mustOpen(t, b, sid, 2)
	if err := sb.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ids := readAll(t, h.store, b.meta, sid); !slices.Equal(ids, []uint64{1, 2}) {
		t.Fatalf("stream after the takeover: %v, want [1 2] (2 replayed from below the seal, 3 never written)", ids)
	}
}

// A stream object that does not decode is ErrCorrupt naming its key, also
// through the disk cache, which does not keep the damaged copy: once the
// object is restored in the store, the next read returns its entries.
func TestReaderCorruptStreamObject(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	mem := objstore.NewMem()
	h.store = objstore.NewFaulty(mem)
	n := h.start(1)
	s := mustOpen(t, n, sid, 1)
	for i := uint64(0); i < 3; i++ {
		mustAppend(t, s, i)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var key string
	n.meta.Read(func(v *catalog.View) { key = v.Streams[sid].Objects[0].Key })
	orig, err := mem.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	bad := slices.Clone(orig)
	bad[len(bad)-8] ^= 0x01 // in the last entry's payload
	mem.Delete(ctx, key)
	mem.PutIfAbsent(ctx, key, bad)

	cache, err := NewCache(t.TempDir(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	r := NewReader(h.store, n.meta, cache)
	for range 2 {
		if entries, err := r.Read(ctx, sid, 0, 3); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), key) || entries != nil {
			t.Fatalf("read of a corrupt stream object: %d entries, %v; want ErrCorrupt naming %s and no entries", len(entries), err, key)
		}
	}
	mem.Delete(ctx, key)
	mem.PutIfAbsent(ctx, key, orig)
	entries, err := r.Read(ctx, sid, 0, 3)
	if err != nil {
		t.Fatalf("read once the object is restored: %v", err)
	}
	if got := idsOf(t, entries, 0, 3); !slices.Equal(got, []uint64{0, 1, 2}) {
		t.Fatalf("entries once the object is restored: %v", got)
	}
}

// With group commit, appends that arrive while a WAL put is in flight wait
// for it and all go in the next object: 21 concurrent appends take 2 puts,
// every one is acknowledged, and the stream holds them all in offset order.
// A backlog of GroupCommitBytes does not wait: its put starts beside the one
// in flight.
func TestGroupCommit(t *testing.T) {
	h := newHarness(t)
	a := h.start(1, func(c *Config) { c.GroupCommitBytes = 64 << 10; c.BatchWindow = time.Hour })
	s := mustOpen(t, a, sid, 1)

	var mu sync.Mutex
	puts, inflight, maxInflight := 0, 0, 0
	held, release := make(chan struct{}, 1), make(chan struct{})
	// A failed check must not leave the held put blocking the node's Close.
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		select {
		case <-release:
		default:
			close(release)
		}
	})
	h.store.SetHooks(objstore.Hooks{
		Before: func(ctx context.Context, op objstore.Op, key string) error {
			if op != objstore.OpPut || !strings.HasPrefix(key, "wal/") {
				return nil
			}
			mu.Lock()
			puts++
			first := puts == 1
			inflight++
			maxInflight = max(maxInflight, inflight)
			hold, wait := held, release
			mu.Unlock()
			if first {
				hold <- struct{}{}
				<-wait
			}
			return nil
		},
		After: func(ctx context.Context, op objstore.Op, key string, err error) error {
			if op == objstore.OpPut && strings.HasPrefix(key, "wal/") {
				mu.Lock()
				inflight--
				mu.Unlock()
			}
			return err
		},
	})
	errs := make(chan error, 21)
	go func() { _, err := s.Append(context.Background(), payload(0), 1); errs <- err }()
	<-held
	for id := uint64(1); id <= 20; id++ {
		go func() { _, err := s.Append(context.Background(), payload(id), 1); errs <- err }()
	}
	queued := func() int { a.wal.mu.Lock(); defer a.wal.mu.Unlock(); return len(a.wal.mu.pending) }
	waitFor(t, "20 appends queued", func() bool { return queued() == 20 })
	time.Sleep(20 * time.Millisecond) // time enough for a batcher without group commit to start a put
	mu.Lock()
	if puts != 1 || queued() != 20 {
		t.Fatalf("%d WAL puts while the first was held and %d appends queued, want 1 and 20: small appends must wait for it", puts, queued())
	}
	mu.Unlock()
	mu.Lock()
	close(release)
	mu.Unlock()
	for range 21 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	if puts != 2 {
		t.Fatalf("%d WAL puts for 21 appends, want 2 (one in flight, one group behind it)", puts)
	}
	mu.Unlock()
	if err := s.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	ids := readAll(t, h.store, a.meta, sid)
	if len(ids) != 21 || ids[0] != 0 {
		t.Fatalf("stream holds %v, want 21 ids starting with 0", ids)
	}
	slices.Sort(ids[1:])
	for i, id := range ids {
		if id != uint64(i) {
			t.Fatalf("stream holds %v, want each of 0..20 once", ids)
		}
	}

	// A backlog at the threshold uploads in parallel with the held put.
	mu.Lock()
	puts, maxInflight = 0, 0
	held, release = make(chan struct{}, 1), make(chan struct{})
	mu.Unlock()
	big := mustOpen(t, a, sid+1, 1)
	errs = make(chan error, 2)
	go func() { _, err := big.Append(context.Background(), make([]byte, 100), 1); errs <- err }()
	<-held
	go func() { _, err := big.Append(context.Background(), make([]byte, 64<<10), 1); errs <- err }()
	waitFor(t, "the backlog's put to start", func() bool { mu.Lock(); defer mu.Unlock(); return puts == 2 })
	mu.Lock()
	close(release)
	mu.Unlock()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if maxInflight != 2 {
		t.Fatalf("at most %d WAL puts in flight, want 2", maxInflight)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
