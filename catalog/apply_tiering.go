package catalog

import (
	"fmt"
	"maps"
	"slices"
)

func applyCommitTieringRound(v *View, r CommitTieringRound) Outcome {
	what := fmt.Sprintf("commit tiering round of table %d (lake snapshot %d)", r.Table, r.LakeSnapshotID)
	t := v.Tables[r.Table]
	if t == nil {
		return reject(ErrNotFound, "%s: no such table", what)
	}
	if r.CoordinatorEpoch == 0 {
		return reject(ErrInvalid, "%s: coordinator epoch must not be 0", what)
	}
	if r.CoordinatorEpoch != v.Coordinator.Epoch {
		return reject(ErrStaleEpoch, "%s: record carries coordinator epoch %d, current is %d (node %d)",
			what, r.CoordinatorEpoch, v.Coordinator.Epoch, v.Coordinator.Node)
	}
	if len(r.Offsets) == 0 {
		return reject(ErrInvalid, "%s: no bucket offsets", what)
	}
	at := r.At.UTC()
	if _, err := at.MarshalJSON(); err != nil {
		return reject(ErrInvalid, "%s: time %v cannot be encoded", what, r.At)
	}
	same := r.LakeSnapshotID == t.Tiering.LakeSnapshotID && r.LakeSequence == t.Tiering.LakeSequence
	for _, id := range slices.Sorted(maps.Keys(r.Offsets)) {
		b := v.Buckets[id]
		if b == nil {
			return reject(ErrNotFound, "%s: no bucket %d", what, id)
		}
		if b.Table != t.ID {
			return reject(ErrInvalid, "%s: bucket %d belongs to table %d", what, id, b.Table)
		}
		previous, ok := t.Tiering.Offsets[id]
		if r.Offsets[id] < previous {
			return reject(ErrInvalid, "%s: bucket %d is tiered to offset %d already, the round says %d; offsets only move forward",
				what, id, previous, r.Offsets[id])
		}
		same = same && ok && r.Offsets[id] == previous
	}
	if same {
		// The same round again, after a lost response.
		return Outcome{}
	}
	if r.LakeSequence <= t.Tiering.LakeSequence {
		return reject(ErrInvalid, "%s: the table's lake is at sequence number %d (snapshot %d) already, the round says %d; lake sequence numbers only increase",
			what, t.Tiering.LakeSequence, t.Tiering.LakeSnapshotID, r.LakeSequence)
	}
	offsets := maps.Clone(t.Tiering.Offsets)
	if offsets == nil {
		offsets = map[BucketID]uint64{}
	}
	maps.Copy(offsets, r.Offsets)
	t.Tiering = TieringState{Offsets: offsets, LakeSnapshotID: r.LakeSnapshotID, LakeSequence: r.LakeSequence, At: at}
	return Outcome{}
}
