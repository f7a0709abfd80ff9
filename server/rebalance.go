package server

import (
	"sort"

	"github.com/minkdb/mink/catalog"
)

// Move is one step of a rebalance: bucket goes from one node to another.
type Move struct {
	Bucket catalog.BucketID `json:"bucket"`
	From   catalog.NodeID   `json:"from"` // 0: the bucket had no live leader
	To     catalog.NodeID   `json:"to"`
}

// planRebalance is `mink cluster rebalance` (spec, "Assignment"): orphans
// first (buckets whose leader is not live, or that have none), to the
// least-loaded live node; then, while some node leads more than 110% of the
// mean load and another less than 90% of it, one bucket moves from the most
// loaded to the least loaded node. Ties go to the lowest node id; the bucket
// moved is the highest id the source leads, so plans are deterministic.
// live must be sorted.
func planRebalance(v *catalog.View, live []catalog.NodeID) []Move {
	if len(live) == 0 {
		return nil
	}
	isLive := map[catalog.NodeID]bool{}
	led := map[catalog.NodeID][]catalog.BucketID{}
	for _, n := range live {
		isLive[n] = true
		led[n] = nil
	}
	var orphans []catalog.BucketID
	total := 0
	for id, b := range v.Buckets {
		total++
		if isLive[b.Leader] {
			led[b.Leader] = append(led[b.Leader], id)
		} else {
			orphans = append(orphans, id)
		}
	}
	sort.Slice(orphans, func(i, j int) bool { return orphans[i] < orphans[j] })
	for _, n := range live {
		sort.Slice(led[n], func(i, j int) bool { return led[n][i] < led[n][j] })
	}
	least := func() catalog.NodeID {
		best := live[0]
		for _, n := range live[1:] {
			if len(led[n]) < len(led[best]) {
				best = n
			}
		}
		return best
	}
	most := func() catalog.NodeID {
		best := live[0]
		for _, n := range live[1:] {
			if len(led[n]) > len(led[best]) {
				best = n
			}
		}
		return best
	}
	var moves []Move
	for _, id := range orphans {
		to := least()
		moves = append(moves, Move{Bucket: id, From: v.Buckets[id].Leader, To: to})
		led[to] = append(led[to], id)
	}
	mean := float64(total) / float64(len(live))
	for len(moves) <= total { // each move narrows the spread; bounded anyway
		from, to := most(), least()
		if float64(len(led[from])) <= 1.1*mean || float64(len(led[to])) >= 0.9*mean || from == to {
			break
		}
		// A move between loads that differ by one only swaps them: the band
		// holds no whole number of buckets, and this is as even as it gets.
		if len(led[from])-len(led[to]) <= 1 {
			break
		}
		bs := led[from]
		id := bs[len(bs)-1]
		led[from] = bs[:len(bs)-1]
		led[to] = append(led[to], id)
		moves = append(moves, Move{Bucket: id, From: from, To: to})
	}
	return moves
}
