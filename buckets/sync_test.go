package buckets

import (
	"fmt"
	"strings"
	"testing"

	"github.com/minkdb/mink/catalog"
)

// viewOf applies records to an empty view, failing on any rejection.
func viewOf(t *testing.T, recs ...catalog.Record) *catalog.View {
	t.Helper()
	v := catalog.NewView()
	for _, r := range recs {
		if out := catalog.Apply(v, v.Index+1, r); out.Err != nil {
			t.Fatalf("%T %+v: %v", r, r, out.Err)
		}
	}
	return v
}

// The base history: nodes 1 and 2 registered, node 1 coordinator, a table
// with one bucket (id 2) led by node 1 at leader epoch 1.
func base() []catalog.Record {
	return []catalog.Record{
		catalog.RegisterNode{Node: 1},
		catalog.RegisterNode{Node: 2},
		catalog.RegisterCoordinator{Node: 1, NodeEpoch: 1},
		catalog.CreateTable{Spec: catalog.TableSpec{Name: "t", Columns: []catalog.Column{{Name: "a", Type: "bigint"}}, Buckets: 1}},
		catalog.LeadBucket{Bucket: 2, Node: 1, CoordinatorEpoch: 1},
	}
}

func TestDecide(t *testing.T) {
	liveAll := func(catalog.NodeID) bool { return true }
	only := func(ids ...catalog.NodeID) func(catalog.NodeID) bool {
		return func(n catalog.NodeID) bool {
			for _, id := range ids {
				if id == n {
					return true
				}
			}
			return false
		}
	}
	cases := []struct {
		name      string
		recs      []catalog.Record
		self      catalog.NodeID
		selfEpoch uint64
		live      func(catalog.NodeID) bool
		local     localState
		want      string
	}{
		{name: "new bucket: open at the leader epoch", self: 1, selfEpoch: 1, live: liveAll,
			want: "open bucket 2 at epoch 1"},
		{name: "not the leader, not open: nothing", self: 2, selfEpoch: 1, live: liveAll, want: ""},
		{name: "open here at the leader epoch: nothing", self: 1, selfEpoch: 1, live: liveAll,
			recs:  []catalog.Record{catalog.OpenStream{Stream: 2, Epoch: 1, Node: 1, NodeEpoch: 1}},
			local: localState{open: map[catalog.BucketID]uint64{2: 1}}, want: ""},
		{name: "opened by this incarnation, local open in flight: nothing", self: 1, selfEpoch: 1, live: liveAll,
			recs: []catalog.Record{catalog.OpenStream{Stream: 2, Epoch: 1, Node: 1, NodeEpoch: 1}}, want: ""},
		{name: "busy bucket is left alone", self: 1, selfEpoch: 1, live: liveAll,
			local: localState{busy: map[catalog.BucketID]bool{2: true}}, want: ""},
		{name: "held by own older epoch: recover", self: 1, selfEpoch: 2, live: liveAll,
			recs: []catalog.Record{catalog.OpenStream{Stream: 2, Epoch: 1, Node: 1, NodeEpoch: 1}, catalog.RegisterNode{Node: 1, ExpectEpoch: 1}},
			want: "recover bucket 2 (held by node 1 epoch 1)"},
		{name: "held by another live node: wait (HeldBy)", self: 2, selfEpoch: 1, live: liveAll,
			recs: []catalog.Record{catalog.OpenStream{Stream: 2, Epoch: 1, Node: 1, NodeEpoch: 1}, catalog.LeadBucket{Bucket: 2, Node: 2, CoordinatorEpoch: 1}},
			want: "wait bucket 2 (held by node 1 epoch 1)"},
		{name: "held by a dead node: take over", self: 2, selfEpoch: 1, live: only(2),
			recs: []catalog.Record{catalog.OpenStream{Stream: 2, Epoch: 1, Node: 1, NodeEpoch: 1}, catalog.LeadBucket{Bucket: 2, Node: 2, CoordinatorEpoch: 1}},
			want: "takeover bucket 2 (held by node 1 epoch 1)"},
		{name: "held by an older epoch of a live node: take over", self: 2, selfEpoch: 1, live: liveAll,
			recs: []catalog.Record{catalog.OpenStream{Stream: 2, Epoch: 1, Node: 1, NodeEpoch: 1}, catalog.LeadBucket{Bucket: 2, Node: 2, CoordinatorEpoch: 1},
				catalog.RegisterNode{Node: 1, ExpectEpoch: 1}},
			want: "takeover bucket 2 (held by node 1 epoch 1)"},
		{name: "closed at the current leader epoch: renew", self: 1, selfEpoch: 2, live: liveAll,
			recs: []catalog.Record{catalog.OpenStream{Stream: 2, Epoch: 1, Node: 1, NodeEpoch: 1}, catalog.CloseStream{Stream: 2, Epoch: 1},
				catalog.RegisterNode{Node: 1, ExpectEpoch: 1}},
			want: "renew bucket 2 at epoch 1"},
		{name: "closed at an older epoch: open at the leader epoch", self: 2, selfEpoch: 1, live: liveAll,
			recs: []catalog.Record{catalog.OpenStream{Stream: 2, Epoch: 1, Node: 1, NodeEpoch: 1}, catalog.CloseStream{Stream: 2, Epoch: 1},
				catalog.LeadBucket{Bucket: 2, Node: 2, CoordinatorEpoch: 1}},
			want: "open bucket 2 at epoch 2"},
		{name: "moved away: close", self: 1, selfEpoch: 1, live: liveAll,
			recs:  []catalog.Record{catalog.OpenStream{Stream: 2, Epoch: 1, Node: 1, NodeEpoch: 1}, catalog.LeadBucket{Bucket: 2, Node: 2, CoordinatorEpoch: 1}},
			local: localState{open: map[catalog.BucketID]uint64{2: 1}}, want: "close bucket 2 at epoch 1"},
		{name: "moved away and back: close the old epoch first", self: 1, selfEpoch: 1, live: liveAll,
			recs: []catalog.Record{catalog.OpenStream{Stream: 2, Epoch: 1, Node: 1, NodeEpoch: 1},
				catalog.LeadBucket{Bucket: 2, Node: 2, CoordinatorEpoch: 1}, catalog.LeadBucket{Bucket: 2, Node: 1, CoordinatorEpoch: 1}},
			local: localState{open: map[catalog.BucketID]uint64{2: 1}}, want: "close bucket 2 at epoch 1"},
		{name: "dropped table: close", self: 1, selfEpoch: 1, live: liveAll,
			recs:  []catalog.Record{catalog.OpenStream{Stream: 2, Epoch: 1, Node: 1, NodeEpoch: 1}, catalog.DropTable{Table: 1}},
			local: localState{open: map[catalog.BucketID]uint64{2: 1}}, want: "close bucket 2 at epoch 1"},
		{name: "no leader yet: nothing", self: 1, selfEpoch: 1, live: liveAll,
			recs: []catalog.Record{catalog.CreateTable{Spec: catalog.TableSpec{Name: "u", Columns: []catalog.Column{{Name: "a", Type: "bigint"}}, Buckets: 1}}},
			want: "open bucket 2 at epoch 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := viewOf(t, append(base(), c.recs...)...)
			var got []string
			for _, a := range decide(v, c.self, c.selfEpoch, c.live, c.local) {
				got = append(got, a.String())
			}
			if s := strings.Join(got, "; "); s != c.want {
				t.Fatalf("decide: %q, want %q", s, c.want)
			}
		})
	}
}

// Every combination of stream state, leader and liveness yields at most one
// action per bucket, and never opens a bucket this node does not lead.
func TestDecideExhaustive(t *testing.T) {
	for _, leader := range []catalog.NodeID{1, 2} {
		for _, streamState := range []string{"none", "open-1-1", "open-1-2", "open-2-1", "closed-1"} {
			for _, live2 := range []bool{true, false} {
				recs := base()
				recs = append(recs, catalog.RegisterNode{Node: 1, ExpectEpoch: 1}) // node 1 now at epoch 2
				switch streamState {
				case "open-1-1":
					recs = []catalog.Record{recs[0], recs[1], recs[2], recs[3], recs[4], catalog.OpenStream{Stream: 2, Epoch: 1, Node: 1, NodeEpoch: 1}, recs[5]}
				case "open-1-2":
					recs = append(recs, catalog.OpenStream{Stream: 2, Epoch: 1, Node: 1, NodeEpoch: 2})
				case "closed-1":
					recs = append(recs, catalog.OpenStream{Stream: 2, Epoch: 1, Node: 1, NodeEpoch: 2}, catalog.CloseStream{Stream: 2, Epoch: 1})
				case "open-2-1":
					recs = append(recs, catalog.LeadBucket{Bucket: 2, Node: 2, CoordinatorEpoch: 1}, catalog.OpenStream{Stream: 2, Epoch: 2, Node: 2, NodeEpoch: 1})
				}
				if leader == 2 && streamState != "open-2-1" {
					recs = append(recs, catalog.LeadBucket{Bucket: 2, Node: 2, CoordinatorEpoch: 1})
				}
				if leader == 1 && streamState == "open-2-1" {
					recs = append(recs, catalog.LeadBucket{Bucket: 2, Node: 1, CoordinatorEpoch: 1})
				}
				v := viewOf(t, recs...)
				acts := decide(v, 1, 2, func(n catalog.NodeID) bool { return n == 1 || live2 }, localState{})
				name := fmt.Sprintf("leader %d stream %s node2 live %v", leader, streamState, live2)
				if len(acts) > 1 {
					t.Fatalf("%s: %v", name, acts)
				}
				if leader == 2 && len(acts) != 0 {
					t.Fatalf("%s: acts on a bucket it does not lead: %v", name, acts)
				}
				if leader == 1 && len(acts) == 0 && streamState != "open-1-2" {
					t.Fatalf("%s: does nothing for a bucket it leads", name)
				}
			}
		}
	}
}
