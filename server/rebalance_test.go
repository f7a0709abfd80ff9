package server

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/plan"
)

var rebalanceSeed = flag.Uint64("rebalance.seed", 0, "seed of TestRebalanceConvergesAcrossCoordinatorChanges (0: from the clock)")

// fakeCluster is the bucket leadership a rebalance plans from and moves.
type fakeCluster struct {
	leader map[catalog.BucketID]catalog.NodeID
	live   []catalog.NodeID
	epoch  uint64 // the current coordinator epoch
}

func (c *fakeCluster) view() *catalog.View {
	v := catalog.NewView()
	for id, n := range c.leader {
		v.Buckets[id] = &catalog.Bucket{ID: id, Leader: n}
	}
	return v
}

// steps are a coordinator's rebalance steps at epoch: like rebalancePlan
// and LeadBucket, they fail with ErrStaleEpoch once the epoch moved on.
// before runs before each step (the faults).
func (c *fakeCluster) steps(epoch uint64, before func()) rebalanceSteps {
	stale := func() error {
		if c.epoch != epoch {
			return fmt.Errorf("coordinator epoch %d, current is %d: %w", epoch, c.epoch, catalog.ErrStaleEpoch)
		}
		return nil
	}
	return rebalanceSteps{
		plan: func(context.Context) ([]plan.Move, error) {
			before()
			if err := stale(); err != nil {
				return nil, err
			}
			return plan.Rebalance(c.view(), c.live), nil
		},
		move: func(_ context.Context, m plan.Move) error {
			before()
			if err := stale(); err != nil {
				return err
			}
			c.leader[m.Bucket] = m.To
			return nil
		},
	}
}

// inBand reports whether every live node leads within 90%–110% of the
// mean, or as close as whole buckets get (loads differ by at most one).
func (c *fakeCluster) inBand() bool {
	counts := map[catalog.NodeID]int{}
	for _, n := range c.live {
		counts[n] = 0
	}
	for _, n := range c.leader {
		if _, ok := counts[n]; !ok {
			return false // an orphan
		}
		counts[n]++
	}
	lo, hi := len(c.leader), 0
	for _, k := range counts {
		lo, hi = min(lo, k), max(hi, k)
	}
	mean := float64(len(c.leader)) / float64(len(c.live))
	return hi-lo <= 1 || (float64(hi) <= 1.1*mean && float64(lo) >= 0.9*mean)
}

// TestRebalanceConvergesAcrossCoordinatorChanges: a fault at every step of
// a rebalance in turn, chosen by the seed: either the coordinator stops
// (another takes the lease, and the stopped node's buckets fail over to
// the others), or a node dies and its buckets fail over while the
// coordinator goes on. The first coordinator's rebalance stops with
// ErrStaleEpoch and is run again on the next, as the CLI does. Every
// history ends in the band of the live nodes with no bucket on a dead
// node, and no rebalance moves anything after its coordinator lost the
// lease. The seed is printed; replay with -rebalance.seed.
func TestRebalanceConvergesAcrossCoordinatorChanges(t *testing.T) {
	seed := *rebalanceSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay: -args -rebalance.seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	for stopAt := 1; stopAt <= 34; stopAt++ {
		c := &fakeCluster{leader: map[catalog.BucketID]catalog.NodeID{}, live: []catalog.NodeID{1, 2, 3}, epoch: 1}
		for id := catalog.BucketID(1); id <= 24; id++ {
			c.leader[id] = 1 // nodes 2 and 3 joined late: node 1 leads all
		}
		coordinatorStops := rng.IntN(2) == 0
		fail := func(dead catalog.NodeID) {
			c.live = slices.DeleteFunc(slices.Clone(c.live), func(n catalog.NodeID) bool { return n == dead })
			for id, n := range c.leader {
				if n == dead {
					c.leader[id] = c.live[rng.IntN(len(c.live))]
				}
			}
		}
		step := 0
		before := func() {
			if step++; step != stopAt {
				return
			}
			if coordinatorStops {
				c.epoch++
				fail(1)
			} else {
				fail(2)
			}
		}
		stale := 0
		for run := 0; ; run++ {
			if run == 3 {
				t.Fatalf("seed %d, fault at step %d: three rebalances stopped", seed, stopAt)
			}
			err := runRebalance(context.Background(), c.steps(c.epoch, before), false, func(RebalanceEvent) {})
			if err == nil {
				break
			}
			if !errors.Is(err, catalog.ErrStaleEpoch) {
				t.Fatalf("seed %d, fault at step %d: rebalance: %v", seed, stopAt, err)
			}
			stale++
		}
		if !c.inBand() {
			loads := map[catalog.NodeID]int{}
			for _, n := range c.leader {
				loads[n]++
			}
			t.Fatalf("seed %d, fault at step %d (coordinator stops: %v): loads %v of live nodes %v", seed, stopAt, coordinatorStops, loads, c.live)
		}
		// 16 moves take 17 plans and 16 moves: a fault within them stops
		// the first coordinator's rebalance; one after it ended does not.
		if wantStale := coordinatorStops && stopAt <= 33; (stale == 1) != wantStale {
			t.Fatalf("seed %d, fault at step %d (coordinator stops: %v): %d rebalances stopped", seed, stopAt, coordinatorStops, stale)
		}
	}
}
