package buckets

import (
	"fmt"
	"sort"

	"github.com/minkdb/mink/catalog"
)

// actionKind is what the sync task does for one bucket.
type actionKind int

const (
	// actOpen opens the bucket's stream at the view's leader epoch.
	actOpen actionKind = iota + 1
	// actRenew proposes LeadBucket for a fresh leader epoch: the stream was
	// closed at the current leader epoch (this node restarted), and an epoch
	// is used once.
	actRenew
	// actRecover fails over this node's own earlier epoch, which still holds
	// the stream open: that incarnation is dead.
	actRecover
	// actTakeover fences a dead holder (RegisterNode at epoch + 1 unless it
	// already moved on) and fails over its WAL, closing its streams.
	actTakeover
	// actClose flushes, commits and closes a bucket this node no longer leads.
	actClose
	// actWait: the stream is held by another live node that has not seen the
	// change yet (HeldBy). Retry on the next sync.
	actWait
)

func (k actionKind) String() string {
	switch k {
	case actOpen:
		return "open"
	case actRenew:
		return "renew"
	case actRecover:
		return "recover"
	case actTakeover:
		return "takeover"
	case actClose:
		return "close"
	case actWait:
		return "wait"
	}
	return fmt.Sprintf("action(%d)", int(k))
}

// action is one step for one bucket.
type action struct {
	kind   actionKind
	bucket catalog.BucketID
	// epoch: actOpen — the leader epoch to open at; actRenew — the leader
	// epoch expected; actClose — the local epoch to close.
	epoch uint64
	// holder, holderEpoch: actRecover, actTakeover, actWait — the node and
	// node epoch holding the stream open.
	holder      catalog.NodeID
	holderEpoch uint64
}

func (a action) String() string {
	switch a.kind {
	case actRecover, actTakeover, actWait:
		return fmt.Sprintf("%v bucket %d (held by node %d epoch %d)", a.kind, a.bucket, a.holder, a.holderEpoch)
	}
	return fmt.Sprintf("%v bucket %d at epoch %d", a.kind, a.bucket, a.epoch)
}

// localState is what decide needs to know about this node's buckets.
type localState struct {
	// open maps each bucket open here to the leader epoch it is open at.
	open map[catalog.BucketID]uint64
	// busy are buckets with an action still running; decide leaves them be.
	busy map[catalog.BucketID]bool
}

// decide compares the view with this node's buckets and returns what to do,
// by bucket id. It is pure: the same inputs always give the same actions.
//
// For a bucket this node leads and has not open, by the state of its stream
// in the view (spec, "Opening a bucket"):
//
//	no stream yet                          → open at the leader epoch
//	open here at this node epoch           → nothing (an open is in flight)
//	open by this node at an older epoch    → recover (that incarnation is dead)
//	open by another node that is live      → wait (HeldBy)
//	open by another node that is dead, or
//	  by an older epoch of another node    → take over
//	closed at the current leader epoch     → renew (LeadBucket), then open
//	closed at an older epoch               → open at the leader epoch
//
// A bucket open here that this node no longer leads, that is open at an
// older leader epoch, or that was dropped, is closed.
func decide(v *catalog.View, self catalog.NodeID, selfEpoch uint64, live func(catalog.NodeID) bool, local localState) []action {
	var out []action
	for id, b := range v.Buckets {
		if local.busy[id] {
			continue
		}
		openEpoch, isOpen := local.open[id]
		if b.Leader != self {
			if isOpen {
				out = append(out, action{kind: actClose, bucket: id, epoch: openEpoch})
			}
			continue
		}
		if isOpen {
			if openEpoch != b.LeaderEpoch {
				out = append(out, action{kind: actClose, bucket: id, epoch: openEpoch})
			}
			continue
		}
		st := v.Streams[catalog.StreamID(id)]
		switch {
		case st == nil:
			out = append(out, action{kind: actOpen, bucket: id, epoch: b.LeaderEpoch})
		case st.Open && st.Node == self && st.NodeEpoch == selfEpoch:
			// Opened by this incarnation; the local open has not finished.
		case st.Open && st.Node == self:
			out = append(out, action{kind: actRecover, bucket: id, holder: self, holderEpoch: st.NodeEpoch})
		case st.Open:
			holder := v.Nodes[st.Node]
			if live(st.Node) && holder != nil && holder.Epoch == st.NodeEpoch {
				out = append(out, action{kind: actWait, bucket: id, holder: st.Node, holderEpoch: st.NodeEpoch})
			} else {
				out = append(out, action{kind: actTakeover, bucket: id, holder: st.Node, holderEpoch: st.NodeEpoch})
			}
		case st.Epoch == b.LeaderEpoch:
			out = append(out, action{kind: actRenew, bucket: id, epoch: b.LeaderEpoch})
		case st.Epoch < b.LeaderEpoch:
			out = append(out, action{kind: actOpen, bucket: id, epoch: b.LeaderEpoch})
		default:
			panic(fmt.Sprintf("buckets: stream %d closed at epoch %d, above bucket %d's leader epoch %d", st.ID, st.Epoch, id, b.LeaderEpoch))
		}
	}
	for id, epoch := range local.open {
		if _, ok := v.Buckets[id]; !ok && !local.busy[id] {
			out = append(out, action{kind: actClose, bucket: id, epoch: epoch})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].bucket < out[j].bucket })
	return out
}
