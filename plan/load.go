package plan

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/minkdb/mink/catalog"
)

// loads is the number of buckets each live node leads, with the buckets, as
// failover and rebalance count them while they plan: a bucket moved by the
// plan counts for its new leader at once.
type loads struct {
	live []catalog.NodeID                      // sorted
	led  map[catalog.NodeID][]catalog.BucketID // by id, for each live node
}

// newLoads counts the buckets of v led by each live node and returns the
// orphans, by id: the buckets whose leader is not live, or that have no
// leader (Leader 0). live must be sorted and not empty.
func newLoads(v *catalog.View, live []catalog.NodeID) (*loads, []*catalog.Bucket) {
	if !slices.IsSorted(live) {
		panic(fmt.Sprintf("plan: live nodes %v are not sorted", live))
	}
	l := &loads{live: live, led: make(map[catalog.NodeID][]catalog.BucketID, len(live))}
	for _, n := range live {
		l.led[n] = nil
	}
	var orphans []*catalog.Bucket
	for _, b := range v.Buckets {
		if _, ok := l.led[b.Leader]; ok {
			l.led[b.Leader] = append(l.led[b.Leader], b.ID)
		} else {
			orphans = append(orphans, b)
		}
	}
	for _, n := range live {
		slices.Sort(l.led[n])
	}
	slices.SortFunc(orphans, func(x, y *catalog.Bucket) int { return cmp.Compare(x.ID, y.ID) })
	return l, orphans
}

// leastLoaded is the live node that leads the fewest buckets, the lowest id
// on ties (spec, "Assignment": "the least-loaded live node, lowest id on
// ties").
func (l *loads) leastLoaded() catalog.NodeID {
	best := l.live[0]
	for _, n := range l.live[1:] {
		if len(l.led[n]) < len(l.led[best]) {
			best = n
		}
	}
	return best
}

// mostLoaded is the live node that leads the most buckets, the lowest id on
// ties.
func (l *loads) mostLoaded() catalog.NodeID {
	best := l.live[0]
	for _, n := range l.live[1:] {
		if len(l.led[n]) > len(l.led[best]) {
			best = n
		}
	}
	return best
}

func (l *loads) count(n catalog.NodeID) int { return len(l.led[n]) }

// add counts bucket b for node n, after the buckets n leads already.
func (l *loads) add(n catalog.NodeID, b catalog.BucketID) {
	l.led[n] = append(l.led[n], b)
}

// takeLast removes and returns the last bucket in n's count: the highest id
// n led in the view, unless the plan added buckets to n since.
// REQUIRES: l.count(n) > 0.
func (l *loads) takeLast(n catalog.NodeID) catalog.BucketID {
	bs := l.led[n]
	b := bs[len(bs)-1]
	l.led[n] = bs[:len(bs)-1]
	return b
}
