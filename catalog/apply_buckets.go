package catalog

import (
	"fmt"
	"slices"
)

func applyLeadBucket(v *View, r LeadBucket) Outcome {
	what := fmt.Sprintf("lead bucket %d on node %d", r.Bucket, r.Node)
	b := v.Buckets[r.Bucket]
	if b == nil {
		return reject(ErrNotFound, "%s: no such bucket", what)
	}
	if r.Node == 0 {
		return reject(ErrInvalid, "%s: node ids start at 1", what)
	}
	node := v.Nodes[r.Node]
	if node == nil {
		return reject(ErrNotFound, "%s: node %d is not registered", what, r.Node)
	}
	if r.CoordinatorEpoch != 0 {
		// Coordinator form. The other fields belong to the renewal form; a
		// coordinator setting them would expect a check that is not made.
		if r.ExpectLeaderEpoch != 0 || r.NodeEpoch != 0 {
			return reject(ErrInvalid, "%s: coordinator form (coordinator epoch %d) carries expect leader epoch %d and node epoch %d, want 0",
				what, r.CoordinatorEpoch, r.ExpectLeaderEpoch, r.NodeEpoch)
		}
		if r.CoordinatorEpoch != v.Coordinator.Epoch {
			return reject(ErrStaleEpoch, "%s: record carries coordinator epoch %d, current is %d (node %d)",
				what, r.CoordinatorEpoch, v.Coordinator.Epoch, v.Coordinator.Node)
		}
	} else {
		// Renewal form: the leader asks for a fresh epoch for itself.
		if b.Leader == 0 {
			return reject(ErrStaleEpoch, "%s: renewal, but bucket %d has no leader yet", what, b.ID)
		}
		if b.Leader != r.Node {
			return reject(ErrStaleEpoch, "%s: renewal by node %d, but bucket %d is led by node %d at leader epoch %d",
				what, r.Node, b.ID, b.Leader, b.LeaderEpoch)
		}
		if r.ExpectLeaderEpoch != b.LeaderEpoch {
			return reject(ErrStaleEpoch, "%s: renewal expects leader epoch %d, current is %d",
				what, r.ExpectLeaderEpoch, b.LeaderEpoch)
		}
		if out := v.checkNodeEpoch(what, r.Node, r.NodeEpoch); out != nil {
			return *out
		}
	}
	b.Leader = r.Node
	b.LeaderEpoch++
	return Outcome{Epoch: b.LeaderEpoch}
}

func applyCommitKVSnapshot(v *View, r CommitKVSnapshot) Outcome {
	what := fmt.Sprintf("commit KV snapshot %d of bucket %d at offset %d", r.SnapshotID, r.Bucket, r.LogOffset)
	b := v.Buckets[r.Bucket]
	if b == nil {
		return reject(ErrNotFound, "%s: no such bucket", what)
	}
	if r.LeaderEpoch == 0 || r.Manifest == "" {
		return reject(ErrInvalid, "%s: leader epoch and manifest must be set", what)
	}
	if r.LeaderEpoch != b.LeaderEpoch {
		return reject(ErrStaleEpoch, "%s: record carries leader epoch %d, current is %d (node %d)",
			what, r.LeaderEpoch, b.LeaderEpoch, b.Leader)
	}
	snap := KVSnapshot{ID: r.SnapshotID, LeaderEpoch: r.LeaderEpoch, LogOffset: r.LogOffset, Manifest: r.Manifest}
	for _, s := range b.Snapshots {
		if s.ID == r.SnapshotID {
			if s == snap {
				// The same commit again, after a lost response.
				return Outcome{}
			}
			return reject(ErrExists, "%s: snapshot %d is committed already (leader epoch %d, offset %d, manifest %q)",
				what, s.ID, s.LeaderEpoch, s.LogOffset, s.Manifest)
		}
	}
	if n := len(b.Snapshots); n > 0 && r.LeaderEpoch == b.Snapshots[n-1].LeaderEpoch && r.SnapshotID <= b.Snapshots[n-1].ID {
		// Ids increase within a leader epoch (a tablet numbers its attempts);
		// an older attempt committed late would undo a newer snapshot.
		return reject(ErrInvalid, "%s: the latest snapshot of leader epoch %d is %d; snapshot ids only increase",
			what, r.LeaderEpoch, b.Snapshots[n-1].ID)
	}
	if n := len(b.Snapshots); n > 0 && r.LogOffset < b.Snapshots[n-1].LogOffset {
		return reject(ErrInvalid, "%s: the latest snapshot %d is at offset %d; snapshots only move forward",
			what, b.Snapshots[n-1].ID, b.Snapshots[n-1].LogOffset)
	}
	snapshots := append(slices.Clone(b.Snapshots), snap)
	if len(snapshots) > KVSnapshotsRetained {
		snapshots = slices.Clone(snapshots[len(snapshots)-KVSnapshotsRetained:])
	}
	b.Snapshots = snapshots
	return Outcome{}
}
