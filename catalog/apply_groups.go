package catalog

import (
	"fmt"
	"maps"
	"slices"
)

// Committed offsets of Kafka consumer groups: CommitGroupOffsets and
// DeleteGroupOffsets, and what table records do to them. Group membership is
// not here; server/kafka/groups keeps it in memory on the coordinator.

func applyCommitGroupOffsets(v *View, r CommitGroupOffsets) Outcome {
	what := fmt.Sprintf("commit offsets of group %q", r.Group)
	if r.Group == "" {
		return reject(ErrInvalid, "%s: empty group id", what)
	}
	if out := v.checkGroupCoordinator(what, r.CoordinatorEpoch); out != nil {
		return *out
	}
	if len(r.Offsets) == 0 {
		return reject(ErrInvalid, "%s: no offsets", what)
	}
	seen := make(map[GroupPartition]bool, len(r.Offsets))
	partitions := map[string]int{}
	for _, o := range r.Offsets {
		p := GroupPartition{Topic: o.Topic, Partition: o.Partition}
		switch {
		case o.Topic == "":
			return reject(ErrInvalid, "%s: empty topic", what)
		case o.Partition < 0 || o.Offset < 0:
			return reject(ErrInvalid, "%s: topic %q partition %d offset %d: partitions and offsets are not negative", what, o.Topic, o.Partition, o.Offset)
		case len(o.Metadata) > MaxGroupOffsetMetadata:
			return reject(ErrInvalid, "%s: topic %q partition %d: metadata of %d bytes, at most %d", what, o.Topic, o.Partition, len(o.Metadata), MaxGroupOffsetMetadata)
		case seen[p]:
			return reject(ErrInvalid, "%s: topic %q partition %d appears twice", what, o.Topic, o.Partition)
		}
		seen[p] = true
		n, ok := partitions[o.Topic]
		if !ok {
			if _, n, ok = v.Topic(o.Topic); !ok {
				return reject(ErrNotFound, "%s: topic %q is not a log table", what, o.Topic)
			}
			partitions[o.Topic] = n
		}
		if int(o.Partition) >= n {
			return reject(ErrNotFound, "%s: topic %q has %d partitions, no partition %d", what, o.Topic, n, o.Partition)
		}
	}
	g := v.Groups[r.Group]
	if g == nil {
		g = &Group{Name: r.Group, Offsets: map[string]map[int32]CommittedOffset{}}
		v.Groups[r.Group] = g
	}
	for _, o := range r.Offsets {
		topic := g.Offsets[o.Topic]
		if topic == nil {
			topic = map[int32]CommittedOffset{}
			g.Offsets[o.Topic] = topic
		}
		topic[o.Partition] = CommittedOffset{Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata}
	}
	return Outcome{}
}

func applyDeleteGroupOffsets(v *View, r DeleteGroupOffsets) Outcome {
	what := fmt.Sprintf("delete offsets of group %q", r.Group)
	if r.Group == "" {
		return reject(ErrInvalid, "%s: empty group id", what)
	}
	if out := v.checkGroupCoordinator(what, r.CoordinatorEpoch); out != nil {
		return *out
	}
	if r.All == (len(r.Partitions) > 0) {
		return reject(ErrInvalid, "%s: give either all or partitions", what)
	}
	g := v.Groups[r.Group]
	if g == nil {
		// Nothing committed: the same delete again, or nothing to do.
		return Outcome{}
	}
	if r.All {
		delete(v.Groups, r.Group)
		return Outcome{}
	}
	for _, p := range r.Partitions {
		if topic := g.Offsets[p.Topic]; topic != nil {
			delete(topic, p.Partition)
			if len(topic) == 0 {
				delete(g.Offsets, p.Topic)
			}
		}
	}
	if len(g.Offsets) == 0 {
		delete(v.Groups, r.Group)
	}
	return Outcome{}
}

// checkGroupCoordinator rejects a group record whose coordinator epoch is not
// the current one: only the coordinator lease holder coordinates groups.
func (v *View) checkGroupCoordinator(what string, epoch uint64) *Outcome {
	if epoch == 0 {
		out := reject(ErrInvalid, "%s: coordinator epoch must not be 0", what)
		return &out
	}
	if epoch != v.Coordinator.Epoch {
		out := reject(ErrStaleEpoch, "%s: record carries coordinator epoch %d, current is %d (node %d)",
			what, epoch, v.Coordinator.Epoch, v.Coordinator.Node)
		return &out
	}
	return nil
}

// dropTopicOffsets removes the committed offsets of topic, at partitions
// from on, from every group (DropTable, TruncateTable: from 0; DropPartition:
// from the first partition it renumbers). Groups left without offsets leave
// the view. Map iteration order does not matter: every group is visited and
// the result is the same.
func (v *View) dropTopicOffsets(topic string, from int32) {
	for name, g := range v.Groups {
		offsets := g.Offsets[topic]
		if offsets == nil {
			continue
		}
		maps.DeleteFunc(offsets, func(p int32, _ CommittedOffset) bool { return p >= from })
		if len(offsets) == 0 {
			delete(g.Offsets, topic)
		}
		if len(g.Offsets) == 0 {
			delete(v.Groups, name)
		}
	}
}

// firstPartitionOf returns the topic partition number of the first bucket of
// partition p of the partitioned table t (see TopicBuckets).
func firstPartitionOf(t *Table, p PartitionID) int32 {
	n := 0
	for _, pid := range slices.Sorted(maps.Keys(t.Partitions)) {
		if pid == p {
			break
		}
		n += len(t.Partitions[pid].Buckets)
	}
	return int32(n)
}

func (g *Group) clone() *Group {
	c := &Group{Name: g.Name, Offsets: make(map[string]map[int32]CommittedOffset, len(g.Offsets))}
	for topic, offsets := range g.Offsets {
		c.Offsets[topic] = maps.Clone(offsets)
	}
	return c
}

// checkGroupInvariants is the part of checkInvariants about Groups.
func (v *View) checkGroupInvariants() error {
	for _, name := range slices.Sorted(maps.Keys(v.Groups)) {
		g := v.Groups[name]
		if g == nil || g.Name != name || name == "" || len(g.Offsets) == 0 {
			return fmt.Errorf("group %q: bad entry, or no offsets", name)
		}
		for _, topic := range slices.Sorted(maps.Keys(g.Offsets)) {
			offsets := g.Offsets[topic]
			_, n, ok := v.Topic(topic)
			if !ok || len(offsets) == 0 {
				return fmt.Errorf("group %q: offsets of topic %q, which is not a log table, or none", name, topic)
			}
			for _, p := range slices.Sorted(maps.Keys(offsets)) {
				o := offsets[p]
				if p < 0 || int(p) >= n || o.Offset < 0 || len(o.Metadata) > MaxGroupOffsetMetadata {
					return fmt.Errorf("group %q: topic %q (%d partitions) partition %d: bad offset %+v", name, topic, n, p, o)
				}
			}
		}
	}
	return nil
}
