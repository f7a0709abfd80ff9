package plan

import (
	"github.com/minkdb/mink/catalog"
)

// Move is one step of a rebalance: bucket goes from one node to another.
type Move struct {
	Bucket catalog.BucketID `json:"bucket"`
	From   catalog.NodeID   `json:"from"` // 0: the bucket had no live leader
	To     catalog.NodeID   `json:"to"`
}

// Rebalance is `mink cluster rebalance` (spec, "Assignment"): orphans first
// (buckets whose leader is not live, or that have none), in id order, each to
// the least-loaded live node; then, while some node leads more than 110% of
// the mean load and another less than 90% of it, one bucket moves from the
// most loaded to the least loaded node. Ties go to the lowest node id; the
// bucket moved is the highest id the source leads, so plans are
// deterministic. A move between loads that differ by one is not made (it
// would only swap them). From of an orphan's move is its dead leader, or 0.
// live must be sorted; with no live node the plan is empty.
func Rebalance(v *catalog.View, live []catalog.NodeID) []Move {
	if len(live) == 0 {
		return nil
	}
	l, orphans := newLoads(v, live)
	total := len(v.Buckets)
	var moves []Move
	for _, b := range orphans {
		to := l.leastLoaded()
		moves = append(moves, Move{Bucket: b.ID, From: b.Leader, To: to})
		l.add(to, b.ID)
	}
	mean := float64(total) / float64(len(live))
	for len(moves) <= total { // each move narrows the spread; bounded anyway
		from, to := l.mostLoaded(), l.leastLoaded()
		if float64(l.count(from)) <= 1.1*mean || float64(l.count(to)) >= 0.9*mean || from == to {
			break
		}
		// A move between loads that differ by one only swaps them: the band
		// holds no whole number of buckets, and this is as even as it gets.
		if l.count(from)-l.count(to) <= 1 {
			break
		}
		id := l.takeLast(from)
		l.add(to, id)
		moves = append(moves, Move{Bucket: id, From: from, To: to})
	}
	return moves
}
