package s3stream

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/objstore"
)

// TestRandomHistory runs a seeded random history of appends, flushes, clean
// handovers, crashes, zombies, restarts and object-store faults on one stream
// and checks it against a model: every acknowledged record is readable
// exactly once and in acknowledgement order, and no record appears twice.
//
// Replay a failure with S3STREAM_SEED=<seed>; lengthen with S3STREAM_STEPS.
func TestRandomHistory(t *testing.T) {
	seeds := []uint64{uint64(time.Now().UnixNano()), 1, 2, 3}
	if s := os.Getenv("S3STREAM_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		seeds = []uint64{seed}
	}
	steps := 300
	if s := os.Getenv("S3STREAM_STEPS"); s != "" {
		steps, _ = strconv.Atoi(s)
	}
	for _, store := range []string{"objects", "segments"} {
		for _, seed := range seeds {
			t.Run(store+"/"+strconv.FormatUint(seed, 10), func(t *testing.T) {
				t.Logf("seed %d (replay with S3STREAM_SEED=%d)", seed, seed)
				runRandomHistory(t, seed, steps, store == "segments")
			})
		}
	}
}

type historyLeader struct {
	node   *testNode
	stream *Stream
}

// runRandomHistory runs one history. With segments the store is a local
// directory and the WAL is kept in segments, half the nodes with segments
// so small that every few appends start a new one.
func runRandomHistory(t *testing.T, seed uint64, steps int, segments bool) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	h := newHarness(t)
	if segments {
		h = newSegmentHarness(t)
	}
	h.store.Seed(seed)
	ctx := context.Background()

	var (
		acked     []uint64 // in acknowledgement order
		unknown   = map[uint64]bool{}
		nextID    uint64
		epoch     uint64 // highest stream epoch used
		leader    *historyLeader
		zombies   []*historyLeader
		removeAll []func()
	)
	clearFaults := func() {
		for _, r := range removeAll {
			r()
		}
		removeAll = nil
	}
	appendVia := func(l *historyLeader, isZombie bool) {
		nextID++
		id := nextID
		actx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		_, err := l.stream.Append(actx, payload(id), 1)
		cancel()
		switch {
		case err == nil:
			acked = append(acked, id)
		case errors.Is(err, ErrUnknownOutcome), errors.Is(err, ErrFenced), errors.Is(err, ErrClosed):
			unknown[id] = true
		default:
			t.Fatalf("seed %d: append: unexpected error %v", seed, err)
		}
	}
	// takeOver makes node id the leader at a new epoch after recovering
	// whatever the previous owner left open.
	takeOver := func(id catalog.NodeID) {
		clearFaults()
		// Half the nodes commit in groups, as on a local directory.
		group := []int{0, 16}[rng.IntN(2)]
		segBytes := []int64{0, 512}[rng.IntN(2)]
		n := h.start(id, func(c *Config) { c.GroupCommitBytes, c.WALSegmentBytes = group, segBytes })
		h.waitCatchUp(n.meta)
		for _, dead := range []catalog.NodeID{1, 2, 3} {
			var open, current bool
			n.meta.Read(func(v *catalog.View) {
				st := v.Streams[sid]
				open = st != nil && st.Open && st.Node == dead
				current = open && st.NodeEpoch == v.Nodes[dead].Epoch
			})
			if !open {
				continue
			}
			if current {
				h.register(n.meta, dead) // fence the dead node's epoch
			}
			if _, err := RecoverNode(ctx, h.store, n.meta, dead, failoverBy(n.meta, id)); err != nil {
				t.Fatalf("seed %d: recover node %d: %v", seed, dead, err)
			}
		}
		epoch++
		s, err := n.OpenStream(ctx, sid, epoch)
		if err != nil {
			t.Fatalf("seed %d: open at epoch %d on node %d: %v", seed, epoch, id, err)
		}
		leader = &historyLeader{node: n, stream: s}
	}

	takeOver(1)
	trace := os.Getenv("S3STREAM_TRACE") != ""
	for step := 0; step < steps; step++ {
		r := rng.IntN(100)
		if trace {
			t.Logf("step %d r=%d next id %d leader node %d epoch %d", step, r, nextID+1, leader.node.id, epoch)
		}
		switch {
		case r < 55:
			appendVia(leader, false)
		case r < 62 && len(zombies) > 0:
			appendVia(zombies[rng.IntN(len(zombies))], true)
		case r < 70:
			_ = leader.stream.Flush(ctx)
		case r < 72:
			_ = leader.node.FlushAll(ctx)
		case r < 74:
			// Garbage collection with no grace delay, from the leader's view.
			if _, err := NewCollector(h.store, leader.node.meta, 0).Collect(ctx); err != nil && !errors.Is(err, objstore.ErrInjected) {
				t.Fatalf("seed %d: gc: %v", seed, err)
			}
		case r < 80:
			// Store faults for a while: errors or lost responses on puts
			// and on writes into WAL segments.
			rule := objstore.Rule{Ops: objstore.OpPut | objstore.OpWrite, Times: 1 + rng.IntN(3), Prob: 0.5}
			if rng.IntN(2) == 0 {
				rule.LoseResponse = true
			} else {
				rule.Err = errors.New("injected 500")
			}
			removeAll = append(removeAll, h.store.Inject(rule))
		case r < 84:
			clearFaults()
		case r < 88:
			// Clean handover to another node.
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			err := leader.stream.Close(cctx)
			cancel()
			if err != nil {
				leader.node.Close() // could not hand over: it crashes instead
			}
			takeOver(catalog.NodeID(1 + rng.IntN(3)))
		case r < 93:
			// Crash: the node is abandoned.
			leader.node.Close()
			takeOver(catalog.NodeID(1 + rng.IntN(3)))
		case r < 97:
			// Zombie: the old leader keeps running after a takeover.
			old := leader
			next := catalog.NodeID(1 + rng.IntN(3))
			if next == old.node.id {
				next = next%3 + 1
			}
			zombies = append(zombies, old)
			takeOver(next)
		default:
			// The same node restarts.
			id := leader.node.id
			leader.node.Close()
			takeOver(id)
		}
	}

	// Final: hand over cleanly once more so everything is committed, and read.
	clearFaults()
	for _, z := range zombies {
		z.node.Close()
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	if err := leader.stream.Close(cctx); err != nil {
		t.Fatalf("seed %d: final close: %v", seed, err)
	}
	cancel()
	meta := h.catalog()
	h.waitCatchUp(meta)
	got := readAll(t, h.store, meta, sid)

	if segments {
		objs, err := h.store.List(ctx, "wal/")
		if err != nil {
			t.Fatal(err)
		}
		var segs, fences int
		for _, o := range objs {
			segs += boolInt(strings.HasSuffix(o.Key, walSegmentSuffix))
			fences += boolInt(strings.HasSuffix(o.Key, "/"+walFenceName))
		}
		if fences == 0 {
			t.Fatalf("seed %d: no WAL was fenced on segments (%d objects under wal/)", seed, len(objs))
		}
		t.Logf("seed %d: %d WAL segments and %d fences left after the history", seed, segs, fences)
	}
	seen := map[uint64]int{}
	for i, id := range got {
		if seen[id] != 0 {
			t.Fatalf("seed %d: record %d appears twice (offsets %d and %d)", seed, id, seen[id]-1, i)
		}
		seen[id] = i + 1
	}
	last := 0
	for _, id := range acked {
		pos := seen[id]
		if pos == 0 {
			t.Fatalf("seed %d: acknowledged record %d is missing (%d acked, %d in stream)", seed, id, len(acked), len(got))
		}
		if pos < last {
			t.Fatalf("seed %d: acknowledged record %d at offset %d, before an earlier acknowledged record", seed, id, pos-1)
		}
		last = pos
	}
	for _, id := range got {
		if !unknown[id] && !contains(acked, id) {
			t.Fatalf("seed %d: record %d in the stream was never appended", seed, id)
		}
	}
	t.Logf("seed %d: %d steps, %d acknowledged, %d unknown outcome, %d in stream, %d stream epochs",
		seed, steps, len(acked), len(unknown), len(got), epoch)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func contains(s []uint64, x uint64) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}
