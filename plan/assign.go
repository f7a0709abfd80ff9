package plan

import (
	"cmp"
	"slices"

	"github.com/minkdb/mink/catalog"
)

// bucketGroup is the buckets of one table or one partition, by index.
type bucketGroup struct {
	table     catalog.TableID
	partition catalog.PartitionID
}

// Assign gives every bucket without a leader to a live node (spec,
// "Assignment": a table or partition created): bucket i of a table or
// partition goes to live[(i + start) % n], with start = clock + the group's
// rank among the groups with unassigned buckets (by table, then partition),
// so that consecutive tables begin on different nodes. The plan lists the
// groups in that order and each group's buckets by index. clock is the
// caller's clock as a number (the coordinator passes Unix milliseconds);
// every LeadBucket carries the coordinator epoch. live must be sorted; with
// no live node the plan is empty.
func Assign(v *catalog.View, live []catalog.NodeID, clock uint64, epoch uint64) []catalog.LeadBucket {
	if len(live) == 0 {
		return nil
	}
	groups := map[bucketGroup][]*catalog.Bucket{}
	for _, b := range v.Buckets {
		if b.Leader == 0 {
			g := bucketGroup{b.Table, b.Partition}
			groups[g] = append(groups[g], b)
		}
	}
	keys := make([]bucketGroup, 0, len(groups))
	for g := range groups {
		keys = append(keys, g)
	}
	slices.SortFunc(keys, func(x, y bucketGroup) int {
		if x.table != y.table {
			return cmp.Compare(x.table, y.table)
		}
		return cmp.Compare(x.partition, y.partition)
	})
	var out []catalog.LeadBucket
	for gi, g := range keys {
		start := int((clock + uint64(gi)) % uint64(len(live)))
		bs := groups[g]
		slices.SortFunc(bs, func(x, y *catalog.Bucket) int { return x.Index - y.Index })
		for _, b := range bs {
			out = append(out, catalog.LeadBucket{Bucket: b.ID, Node: live[(b.Index+start)%len(live)], CoordinatorEpoch: epoch})
		}
	}
	return out
}

// Failover moves every bucket whose leader is not live to the least-loaded
// live node (spec, "Assignment": a node stops heartbeating), in bucket id
// order: load is the number of buckets a node leads, counting the moves
// planned so far, and ties go to the lowest node id. Buckets without a
// leader are Assign's. live must be sorted; with no live node the plan is
// empty.
func Failover(v *catalog.View, live []catalog.NodeID, epoch uint64) []catalog.LeadBucket {
	if len(live) == 0 {
		return nil
	}
	l, orphans := newLoads(v, live)
	var out []catalog.LeadBucket
	for _, b := range orphans {
		if b.Leader == 0 {
			continue
		}
		to := l.leastLoaded()
		l.add(to, b.ID)
		out = append(out, catalog.LeadBucket{Bucket: b.ID, Node: to, CoordinatorEpoch: epoch})
	}
	return out
}
