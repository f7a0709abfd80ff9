package plan

import (
	"fmt"
	"testing"

	"github.com/minkdb/mink/catalog"
)

func applyAll(t *testing.T, recs ...catalog.Record) *catalog.View {
	t.Helper()
	v := catalog.NewView()
	for _, r := range recs {
		if out := catalog.Apply(v, v.Index+1, r); out.Err != nil {
			t.Fatalf("%T: %v", r, out.Err)
		}
	}
	return v
}

func table(name string, buckets int) catalog.CreateTable {
	return catalog.CreateTable{Spec: catalog.TableSpec{Name: name, Columns: []catalog.Column{{Name: "a", Type: "bigint"}}, Buckets: buckets}}
}

func describe(leads []catalog.LeadBucket) string {
	s := ""
	for _, lb := range leads {
		s += fmt.Sprintf("%d→%d ", lb.Bucket, lb.Node)
	}
	return s
}

func TestAssign(t *testing.T) {
	v := applyAll(t, catalog.RegisterNode{Node: 1}, catalog.RegisterNode{Node: 2}, catalog.RegisterNode{Node: 3},
		table("a", 4), table("b", 2))
	// Table a has buckets 2..5, table b 7..8. With start 1: bucket i of a
	// goes to live[(i+1)%3], and b starts one node later.
	got := describe(Assign(v, []catalog.NodeID{1, 2, 3}, 1, 9))
	if want := "2→2 3→3 4→1 5→2 7→3 8→1 "; got != want {
		t.Fatalf("assign: %s, want %s", got, want)
	}
	for _, lb := range Assign(v, []catalog.NodeID{1, 2, 3}, 1, 9) {
		if lb.CoordinatorEpoch != 9 {
			t.Fatalf("LeadBucket without the coordinator epoch: %+v", lb)
		}
	}
	if leads := Assign(v, nil, 0, 9); leads != nil {
		t.Fatalf("assigned with no live node: %v", describe(leads))
	}
}

func TestFailover(t *testing.T) {
	v := applyAll(t, catalog.RegisterNode{Node: 1}, catalog.RegisterNode{Node: 2}, catalog.RegisterNode{Node: 3},
		catalog.RegisterCoordinator{Node: 1, NodeEpoch: 1}, table("a", 5))
	for i, n := range []catalog.NodeID{1, 2, 2, 3, 3} {
		if out := catalog.Apply(v, v.Index+1, catalog.LeadBucket{Bucket: catalog.BucketID(2 + i), Node: n, CoordinatorEpoch: 1}); out.Err != nil {
			t.Fatal(out.Err)
		}
	}
	// Node 3 dies: its buckets 5 and 6 go to the least loaded live node,
	// node 1 (load 1) first, then the tie between 1 and 2 goes to 1.
	if got, want := describe(Failover(v, []catalog.NodeID{1, 2}, 1)), "5→1 6→1 "; got != want {
		t.Fatalf("failover: %s, want %s", got, want)
	}
	// Nothing to do while everyone is live; a joining node moves nothing.
	if leads := Failover(v, []catalog.NodeID{1, 2, 3, 4}, 1); leads != nil {
		t.Fatalf("failover with all live: %s", describe(leads))
	}
}

func TestRebalance(t *testing.T) {
	// 9 buckets all on node 1; nodes 2 and 3 joined later.
	recs := []catalog.Record{catalog.RegisterNode{Node: 1}, catalog.RegisterNode{Node: 2}, catalog.RegisterNode{Node: 3},
		catalog.RegisterCoordinator{Node: 1, NodeEpoch: 1}, table("a", 9)}
	v := applyAll(t, recs...)
	for id := catalog.BucketID(2); id <= 10; id++ {
		catalog.Apply(v, v.Index+1, catalog.LeadBucket{Bucket: id, Node: 1, CoordinatorEpoch: 1})
	}
	moves := Rebalance(v, []catalog.NodeID{1, 2, 3})
	load := map[catalog.NodeID]int{1: 9}
	for _, m := range moves {
		load[m.From]--
		load[m.To]++
	}
	if len(moves) != 6 || load[1] != 3 || load[2] != 3 || load[3] != 3 {
		t.Fatalf("moves %+v give load %v, want 3/3/3 in 6 moves", moves, load)
	}
	// Balanced already (within the band): nothing moves.
	for _, m := range moves {
		catalog.Apply(v, v.Index+1, catalog.LeadBucket{Bucket: m.Bucket, Node: m.To, CoordinatorEpoch: 1})
	}
	if again := Rebalance(v, []catalog.NodeID{1, 2, 3}); len(again) != 0 {
		t.Fatalf("second rebalance moves %+v", again)
	}
	// Node 3 dies: its orphans move first, to the least loaded.
	moves = Rebalance(v, []catalog.NodeID{1, 2})
	if len(moves) < 3 {
		t.Fatalf("orphans not moved: %+v", moves)
	}
	for _, m := range moves[:3] {
		if m.From != 3 {
			t.Fatalf("orphans must come first: %+v", moves)
		}
	}
}

// When the 110%/90% band holds no whole number of buckets (3 buckets on 2
// nodes: mean 1.5, band 1.35–1.65), a move that cannot narrow the spread is
// not made: the plan used to swing a bucket back and forth (2/1 → 1/2 → 2/1
// …) until its length bound, moving buckets for nothing.
func TestRebalanceStopsWhenAMoveCannotHelp(t *testing.T) {
	recs := []catalog.Record{catalog.RegisterNode{Node: 1}, catalog.RegisterNode{Node: 2},
		catalog.RegisterCoordinator{Node: 1, NodeEpoch: 1}, table("a", 3)}
	v := applyAll(t, recs...)
	for id := catalog.BucketID(2); id <= 4; id++ {
		catalog.Apply(v, v.Index+1, catalog.LeadBucket{Bucket: id, Node: 1, CoordinatorEpoch: 1})
	}
	moves := Rebalance(v, []catalog.NodeID{1, 2})
	if len(moves) != 1 || moves[0].From != 1 || moves[0].To != 2 {
		t.Fatalf("3/0 on two nodes: moves %+v, want one move from node 1 to node 2", moves)
	}
	catalog.Apply(v, v.Index+1, catalog.LeadBucket{Bucket: moves[0].Bucket, Node: 2, CoordinatorEpoch: 1})
	if again := Rebalance(v, []catalog.NodeID{1, 2}); len(again) != 0 {
		t.Fatalf("2/1 on two nodes: moves %+v, want none", again)
	}
}
