package catalog

import (
	"cmp"
	"fmt"
	"slices"
)

func applyOpenStream(v *View, r OpenStream) Outcome {
	what := fmt.Sprintf("open stream %d at epoch %d on node %d", r.Stream, r.Epoch, r.Node)
	if r.Stream == 0 || r.Node == 0 || r.Epoch == 0 {
		return reject(ErrInvalid, "%s: stream, node and epoch must not be 0", what)
	}
	if out := v.checkNodeEpoch(what, r.Node, r.NodeEpoch); out != nil {
		return *out
	}
	s := v.Streams[r.Stream]
	if s != nil && s.Retired && !(s.Open && s.Node == r.Node && s.NodeEpoch == r.NodeEpoch && s.Epoch == r.Epoch) {
		return reject(ErrNotFound, "%s: the stream is retired (its bucket was dropped)", what)
	}
	if s != nil {
		if s.Open && s.Node == r.Node && s.NodeEpoch == r.NodeEpoch && s.Epoch == r.Epoch {
			// The same open again, after a lost response.
			return Outcome{Epoch: s.Epoch, End: s.End}
		}
		if r.Epoch < s.Epoch {
			return reject(ErrFenced, "%s: the stream is at epoch %d", what, s.Epoch)
		}
		if r.Epoch == s.Epoch && !s.Open {
			// An epoch is used once: writes of the holder that closed it must
			// stay distinguishable from writes of a new holder.
			return reject(ErrFenced, "%s: the stream was closed at epoch %d; open it at a new leader epoch", what, s.Epoch)
		}
	}
	if b := v.Buckets[BucketID(r.Stream)]; b != nil {
		// A bucket's stream is opened by its leader at its leader epoch: this
		// is the fence that keeps a replaced leader from opening it again.
		if b.Leader == 0 {
			return reject(ErrStaleEpoch, "%s: bucket %d has no leader yet", what, b.ID)
		}
		if r.Node != b.Leader || r.Epoch != b.LeaderEpoch {
			return reject(ErrStaleEpoch, "%s: bucket %d is led by node %d at leader epoch %d",
				what, b.ID, b.Leader, b.LeaderEpoch)
		}
	}
	if s != nil && s.Open {
		held := &HeldByError{Stream: s.ID, Node: s.Node, NodeEpoch: s.NodeEpoch, Epoch: s.Epoch}
		return Outcome{Err: fmt.Errorf("%s: %w", what, held)}
	}
	if s == nil {
		s = &Stream{ID: r.Stream}
		v.Streams[s.ID] = s
	}
	s.Epoch, s.Open, s.Node, s.NodeEpoch = r.Epoch, true, r.Node, r.NodeEpoch
	return Outcome{Epoch: s.Epoch, End: s.End}
}

func applyCloseStream(v *View, r CloseStream) Outcome {
	what := fmt.Sprintf("close stream %d at epoch %d", r.Stream, r.Epoch)
	s := v.Streams[r.Stream]
	if s == nil {
		return reject(ErrNotFound, "%s: no such stream", what)
	}
	if r.Epoch < s.Epoch {
		return reject(ErrFenced, "%s: the stream is at epoch %d", what, s.Epoch)
	}
	if r.Epoch > s.Epoch {
		return reject(ErrInvalid, "%s: the stream was never opened at that epoch (it is at epoch %d)", what, s.Epoch)
	}
	// Closing a closed stream at its epoch again (a lost response) is accepted.
	s.Open = false
	if s.Retired {
		delete(v.Streams, s.ID)
	}
	return Outcome{}
}

func applyCommitStreamObjects(v *View, r CommitStreamObjects) Outcome {
	what := fmt.Sprintf("commit %d objects to stream %d at epoch %d", len(r.Objects), r.Stream, r.Epoch)
	s := v.Streams[r.Stream]
	if s == nil {
		return reject(ErrNotFound, "%s: no such stream", what)
	}
	if r.Epoch < s.Epoch {
		return reject(ErrFenced, "%s: the stream is at epoch %d", what, s.Epoch)
	}
	if r.Epoch > s.Epoch {
		return reject(ErrInvalid, "%s: the stream was never opened at that epoch (it is at epoch %d)", what, s.Epoch)
	}
	if len(r.Objects) == 0 {
		return reject(ErrInvalid, "%s: no objects", what)
	}
	for i, o := range r.Objects {
		if o.Key == "" || o.Start >= o.End || o.Size < 0 {
			return reject(ErrInvalid, "%s: object %d (key %q, offsets [%d, %d), size %d) needs a key, start < end and size >= 0",
				what, i, o.Key, o.Start, o.End, o.Size)
		}
		if i > 0 && o.Start != r.Objects[i-1].End {
			return reject(ErrGap, "%s: object %d starts at offset %d, object %d ended at %d",
				what, i, o.Start, i-1, r.Objects[i-1].End)
		}
		if _, err := o.At.UTC().MarshalJSON(); err != nil {
			return reject(ErrInvalid, "%s: object %d: time %v cannot be encoded", what, i, o.At)
		}
	}
	objects := slices.Clone(r.Objects)
	for i := range objects {
		objects[i].At = objects[i].At.UTC()
	}
	if first := objects[0]; first.Start != s.End {
		if committedAlready(s, objects) {
			// The same commit again, after a lost response.
			return Outcome{End: s.End}
		}
		if last := objects[len(objects)-1]; last.End <= s.Start {
			// Unreachable in practice: a commit retried after its offsets
			// were trimmed away. Only the stream's writer commits at its
			// epoch, so these are its own objects; they are garbage now.
			return Outcome{End: s.End}
		}
		return reject(ErrGap, "%s: the first object starts at offset %d, the stream's committed end is %d",
			what, first.Start, s.End)
	}
	s.Objects = append(s.Objects, objects...)
	s.End = objects[len(objects)-1].End
	return Outcome{End: s.End}
}

// committedAlready reports whether objects are, key, offsets and size, a run
// of objects the stream has committed. Their times are not compared: a
// writer that retries a commit after a lost response stamps the same objects
// again with a later time.
func committedAlready(s *Stream, objects []StreamObject) bool {
	i, found := slices.BinarySearchFunc(s.Objects, objects[0].Start, func(o StreamObject, start uint64) int {
		return cmp.Compare(o.Start, start)
	})
	if !found || len(s.Objects)-i < len(objects) {
		return false
	}
	return slices.EqualFunc(s.Objects[i:i+len(objects)], objects, func(a, b StreamObject) bool {
		return a.Key == b.Key && a.Start == b.Start && a.End == b.End && a.Size == b.Size
	})
}

func applyCompactStreamObjects(v *View, r CompactStreamObjects) Outcome {
	what := fmt.Sprintf("compact %d objects of stream %d at epoch %d", len(r.Replaces), r.Stream, r.Epoch)
	s := v.Streams[r.Stream]
	if s == nil {
		return reject(ErrNotFound, "%s: no such stream", what)
	}
	if r.Epoch < s.Epoch {
		return reject(ErrFenced, "%s: the stream is at epoch %d", what, s.Epoch)
	}
	if r.Epoch > s.Epoch || !s.Open {
		return reject(ErrStaleEpoch, "%s: the stream is not open at that epoch (epoch %d, open %v)", what, s.Epoch, s.Open)
	}
	if len(r.Replaces) < 2 {
		return reject(ErrInvalid, "%s: a compaction replaces at least 2 objects", what)
	}
	w := r.With
	w.At = w.At.UTC()
	if _, err := w.At.MarshalJSON(); err != nil {
		return reject(ErrInvalid, "%s: time %v cannot be encoded", what, r.With.At)
	}
	replaces := slices.Clone(r.Replaces)
	for i := range replaces {
		replaces[i].At = replaces[i].At.UTC()
	}
	if w.Key == "" || w.Start != r.Replaces[0].Start || w.End != r.Replaces[len(r.Replaces)-1].End || w.Size < 0 {
		return reject(ErrInvalid, "%s: the new object (key %q, offsets [%d, %d)) must cover the replaced objects' offsets [%d, %d)",
			what, w.Key, w.Start, w.End, r.Replaces[0].Start, r.Replaces[len(r.Replaces)-1].End)
	}
	if slices.IndexFunc(s.Objects, func(o StreamObject) bool { return o.Key == w.Key }) >= 0 {
		if committedAlready(s, []StreamObject{w}) {
			return Outcome{} // the same compaction again, after a lost response
		}
		return reject(ErrExists, "%s: key %q is already a different object of the stream", what, w.Key)
	}
	if !committedAlready(s, replaces) {
		return reject(ErrGap, "%s: the replaced objects are not a run of the stream's objects", what)
	}
	i := slices.IndexFunc(s.Objects, func(o StreamObject) bool { return o.Key == replaces[0].Key })
	s.Objects = slices.Concat(s.Objects[:i], []StreamObject{w}, s.Objects[i+len(replaces):])
	return Outcome{}
}

func applyTrimStream(v *View, r TrimStream) Outcome {
	what := fmt.Sprintf("trim stream %d to offset %d", r.Stream, r.Start)
	if r.Stream == 0 {
		return reject(ErrInvalid, "%s: stream must not be 0", what)
	}
	if r.CoordinatorEpoch == 0 {
		return reject(ErrInvalid, "%s: coordinator epoch must not be 0", what)
	}
	if r.CoordinatorEpoch != v.Coordinator.Epoch {
		return reject(ErrStaleEpoch, "%s: record carries coordinator epoch %d, current is %d (node %d)",
			what, r.CoordinatorEpoch, v.Coordinator.Epoch, v.Coordinator.Node)
	}
	s := v.Streams[r.Stream]
	if s == nil {
		return reject(ErrNotFound, "%s: no such stream", what)
	}
	if s.Retired {
		return reject(ErrNotFound, "%s: the stream is retired (its bucket was dropped)", what)
	}
	if r.Start == s.Start {
		return Outcome{} // the same trim again, or nothing to trim
	}
	if r.Start < s.Start {
		return reject(ErrInvalid, "%s: the stream starts at offset %d already; start offsets only move forward", what, s.Start)
	}
	if r.Start > s.End {
		return reject(ErrInvalid, "%s: the stream's committed end is %d; a trim never passes it", what, s.End)
	}
	i, found := slices.BinarySearchFunc(s.Objects, r.Start, func(o StreamObject, start uint64) int {
		return cmp.Compare(o.Start, start)
	})
	if !found && r.Start != s.End {
		return reject(ErrInvalid, "%s: offset %d is inside an object; a trim removes whole objects", what, r.Start)
	}
	if b := v.Buckets[BucketID(r.Stream)]; b != nil {
		t := v.Tables[b.Table]
		if len(t.Spec.PrimaryKey) > 0 {
			// The changelog is the bucket's state: a tablet restores from a
			// retained KV snapshot and replays the changelog from its
			// offset. Retained snapshots only move forward (a new one is
			// never below the latest, and the oldest leaves first), so a
			// trim at or below the oldest stays valid for good.
			if len(b.Snapshots) == 0 {
				return reject(ErrInvalid, "%s: bucket %d of primary-key table %q has no KV snapshot; its changelog is its only copy and is never trimmed",
					what, b.ID, t.Spec.Name)
			}
			if oldest := b.Snapshots[0]; r.Start > oldest.LogOffset {
				return reject(ErrInvalid, "%s: the oldest retained KV snapshot of bucket %d (primary-key table %q) is snapshot %d at offset %d; the changelog from there on is needed to restore the bucket",
					what, b.ID, t.Spec.Name, oldest.ID, oldest.LogOffset)
			}
		}
		if t.Spec.Options["tiering"] != "off" {
			if tiered := t.Tiering.Offsets[b.ID]; r.Start > tiered {
				return reject(ErrInvalid, "%s: bucket %d of table %q is tiered to offset %d; untiered data is never trimmed",
					what, b.ID, t.Spec.Name, tiered)
			}
		}
	}
	if !found {
		i = len(s.Objects)
	}
	s.Objects = nilIfEmpty(slices.Clone(s.Objects[i:]))
	s.Start = r.Start
	return Outcome{}
}

// retireStream retires the stream of a dropped bucket: a closed stream leaves
// the view, an open one is marked Retired and leaves it when it is closed.
func (v *View) retireStream(id StreamID) {
	s := v.Streams[id]
	switch {
	case s == nil:
	case s.Open:
		s.Retired = true
	default:
		delete(v.Streams, id)
	}
}

func applyCommitWALTrim(v *View, r CommitWALTrim) Outcome {
	what := fmt.Sprintf("trim WAL of node %d at node epoch %d to seq %d", r.Node, r.NodeEpoch, r.TrimSeq)
	if r.Node == 0 || r.NodeEpoch == 0 {
		return reject(ErrInvalid, "%s: node and node epoch must not be 0", what)
	}
	n := v.Nodes[r.Node]
	if n == nil {
		return reject(ErrNotFound, "%s: node %d is not registered", what, r.Node)
	}
	if r.NodeEpoch > n.Epoch {
		return reject(ErrInvalid, "%s: node %d is at node epoch %d, no WAL exists at a later one", what, r.Node, n.Epoch)
	}
	if out := v.checkNodeEpoch(what+fmt.Sprintf(" by node %d", r.By), r.By, r.ByEpoch); out != nil {
		return *out
	}
	id := WALID{Node: r.Node, Epoch: r.NodeEpoch}
	current := v.WALTrims[id]
	if r.TrimSeq < current {
		return reject(ErrInvalid, "%s: the WAL is trimmed to seq %d already; trim points only move forward", what, current)
	}
	if r.TrimSeq > current {
		v.WALTrims[id] = r.TrimSeq
	}
	// Equal: the same trim again; a WAL never trimmed has trim point 0 and
	// no entry.
	return Outcome{}
}
