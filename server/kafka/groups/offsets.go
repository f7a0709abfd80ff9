package groups

import (
	"context"
	"errors"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/minkdb/mink/catalog"
)

// Committed offsets: OffsetCommit, OffsetFetch, OffsetDelete, DeleteGroups.
// They are records in the metadata log; a request is answered after its
// record is applied.

// maxCommitRecordBytes bounds the estimated size of one CommitGroupOffsets
// record; a larger commit is split into several (a record must stay below
// 1 MiB, docs/metadata.md).
const maxCommitRecordBytes = 256 << 10

func (c *Coordinator) offsetCommit(ctx context.Context, req *kmsg.OffsetCommitRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	codes := map[catalog.GroupPartition]int16{}
	// The last of a partition named twice wins, as in Kafka.
	latest := map[catalog.GroupPartition]kmsg.OffsetCommitRequestTopicPartition{}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			latest[catalog.GroupPartition{Topic: t.Topic, Partition: p.Partition}] = p
		}
	}
	fillAll := func(code int16) {
		for gp := range latest {
			codes[gp] = code
		}
	}
	defer func() {
		for _, t := range req.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition = p.Partition
				rp.ErrorCode = codes[catalog.GroupPartition{Topic: t.Topic, Partition: p.Partition}]
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}()

	generation, memberID := req.Generation, req.MemberID
	if req.Version == 0 {
		generation, memberID = -1, ""
	}
	epoch, code := c.checkCommit(req.Group, generation, memberID)
	if code != 0 {
		fillAll(code)
		return resp
	}

	var offsets []catalog.GroupOffset
	c.cfg.Meta.Read(func(v *catalog.View) {
		partitions := map[string]int{} // by topic; -1: not a topic
		topicHas := func(topic string, partition int32) bool {
			n, ok := partitions[topic]
			if !ok {
				n = -1
				if _, count, isTopic := v.Topic(topic); isTopic {
					n = count
				}
				partitions[topic] = n
			}
			return partition >= 0 && int(partition) < n
		}
		for _, gp := range slices.SortedFunc(maps.Keys(latest), compareGroupPartition) {
			p := latest[gp]
			meta := ""
			if p.Metadata != nil {
				meta = *p.Metadata
			}
			switch {
			case !topicHas(gp.Topic, gp.Partition):
				codes[gp] = kerr.UnknownTopicOrPartition.Code
			case len(meta) > catalog.MaxGroupOffsetMetadata:
				codes[gp] = kerr.OffsetMetadataTooLarge.Code
			case p.Offset < 0:
				codes[gp] = kerr.OffsetOutOfRange.Code
			default:
				leaderEpoch := p.LeaderEpoch
				if req.Version < 6 {
					leaderEpoch = -1
				}
				offsets = append(offsets, catalog.GroupOffset{Topic: gp.Topic, Partition: gp.Partition,
					Offset: p.Offset, LeaderEpoch: leaderEpoch, Metadata: meta})
			}
		}
	})
	for _, batch := range commitBatches(offsets) {
		c.commit(ctx, req.Group, epoch, batch, codes)
	}
	return resp
}

// checkCommit decides whether a commit to group by memberID at generation
// may go to the log, and returns the coordinator epoch to propose it under.
// Commits with generation -1 and no member (a consumer that assigns its
// partitions itself, or an admin tool) are allowed while the group has no
// members; a member's commit must name the current generation.
func (c *Coordinator) checkCommit(group string, generation int32, memberID string) (uint64, int16) {
	c.mu.Lock()
	defer c.mu.Unlock()
	epoch, code := c.ownLocked()
	if code != 0 {
		return 0, code
	}
	if group == "" {
		return 0, kerr.InvalidGroupID.Code
	}
	g := c.mu.groups[group]
	if g == nil || len(g.members) == 0 {
		switch {
		case generation < 0:
			return epoch, 0
		case g == nil:
			// The group's generation is not known here (the coordinator
			// moved, or the group emptied): the member rejoins.
			return 0, kerr.IllegalGeneration.Code
		default:
			return 0, kerr.UnknownMemberID.Code
		}
	}
	m := g.members[memberID]
	switch {
	case m == nil:
		return 0, kerr.UnknownMemberID.Code
	case generation != g.generation:
		return 0, kerr.IllegalGeneration.Code
	case g.state == stateCompletingRebalance:
		return 0, kerr.RebalanceInProgress.Code
	}
	m.sessionDeadline = c.now().Add(m.sessionTimeout)
	return epoch, 0
}

// commit proposes one CommitGroupOffsets and sets the codes of its
// partitions. A table dropped or truncated meanwhile makes the log reject
// the record (ErrNotFound); the partitions still valid are then proposed
// again, once.
func (c *Coordinator) commit(ctx context.Context, group string, epoch uint64, offsets []catalog.GroupOffset, codes map[catalog.GroupPartition]int16) {
	for attempt := 0; ; attempt++ {
		_, err := c.propose(ctx, catalog.CommitGroupOffsets{Group: group, CoordinatorEpoch: epoch, Offsets: offsets})
		if !errors.Is(err, catalog.ErrNotFound) || attempt > 0 {
			code := proposeCode(err)
			if err != nil {
				c.logger.Warn("offset commit failed", "group", group, "partitions", len(offsets), "err", err)
			}
			for _, o := range offsets {
				codes[catalog.GroupPartition{Topic: o.Topic, Partition: o.Partition}] = code
			}
			return
		}
		valid := offsets[:0:0]
		c.cfg.Meta.Read(func(v *catalog.View) {
			for _, o := range offsets {
				if topicHas(v, o.Topic, o.Partition) {
					valid = append(valid, o)
				} else {
					codes[catalog.GroupPartition{Topic: o.Topic, Partition: o.Partition}] = kerr.UnknownTopicOrPartition.Code
				}
			}
		})
		if len(valid) == 0 {
			return
		}
		offsets = valid
	}
}

// propose proposes rec and returns the outcome's error or the proposal's.
func (c *Coordinator) propose(ctx context.Context, rec catalog.Record) (catalog.Outcome, error) {
	out, err := c.cfg.Meta.Propose(ctx, rec)
	if err == nil {
		err = out.Err
	}
	return out, err
}

// proposeCode is the Kafka error code for a proposal's error: a stale
// coordinator epoch means another node coordinates now; anything else
// (the metadata log unavailable, the request's context ended) is retriable.
func proposeCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, catalog.ErrStaleEpoch):
		return kerr.NotCoordinator.Code
	case errors.Is(err, catalog.ErrNotFound):
		return kerr.UnknownTopicOrPartition.Code
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return kerr.RequestTimedOut.Code
	}
	return kerr.CoordinatorNotAvailable.Code
}

// commitBatches splits offsets into records of at most about
// maxCommitRecordBytes each.
func commitBatches(offsets []catalog.GroupOffset) [][]catalog.GroupOffset {
	var batches [][]catalog.GroupOffset
	start, size := 0, 0
	for i, o := range offsets {
		n := 96 + len(o.Topic) + 2*len(o.Metadata) // JSON escaping at most doubles most text
		if i > start && size+n > maxCommitRecordBytes {
			batches = append(batches, offsets[start:i])
			start, size = i, 0
		}
		size += n
	}
	if start < len(offsets) {
		batches = append(batches, offsets[start:])
	}
	return batches
}

// topicHas reports whether topic is a log table with the partition.
func topicHas(v *catalog.View, topic string, partition int32) bool {
	_, n, ok := v.Topic(topic)
	return ok && partition >= 0 && int(partition) < n
}

func compareGroupPartition(a, b catalog.GroupPartition) int {
	if a.Topic != b.Topic {
		if a.Topic < b.Topic {
			return -1
		}
		return 1
	}
	return int(a.Partition) - int(b.Partition)
}

func (c *Coordinator) offsetFetch(req *kmsg.OffsetFetchRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	c.mu.Lock()
	_, code := c.ownLocked()
	c.mu.Unlock()
	if req.Version < 8 {
		// A null topic list (v2+) asks for every committed offset.
		var topics []kmsg.OffsetFetchRequestGroupTopic
		if req.Topics != nil || req.Version < 2 {
			topics = make([]kmsg.OffsetFetchRequestGroupTopic, 0, len(req.Topics))
		}
		for _, t := range req.Topics {
			topics = append(topics, kmsg.OffsetFetchRequestGroupTopic{Topic: t.Topic, Partitions: t.Partitions})
		}
		g := c.fetchGroup(req.Group, topics, code)
		resp.ErrorCode = g.ErrorCode
		for _, t := range g.Topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
				if req.Version < 2 && g.ErrorCode != 0 {
					rp.ErrorCode = g.ErrorCode // v0-v1 have no group error code
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	for _, rg := range req.Groups {
		resp.Groups = append(resp.Groups, c.fetchGroup(rg.Group, rg.Topics, code))
	}
	return resp
}

// fetchGroup answers one group of an OffsetFetch from the metadata view;
// topics nil asks for every committed offset of the group. A partition
// without a commit has offset -1. code is the ownership check's error.
func (c *Coordinator) fetchGroup(group string, topics []kmsg.OffsetFetchRequestGroupTopic, code int16) kmsg.OffsetFetchResponseGroup {
	rg := kmsg.NewOffsetFetchResponseGroup()
	rg.Group = group
	if code != 0 {
		rg.ErrorCode = code
		for _, t := range topics {
			rt := kmsg.NewOffsetFetchResponseGroupTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = p, -1, -1, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			rg.Topics = append(rg.Topics, rt)
		}
		return rg
	}
	c.cfg.Meta.Read(func(v *catalog.View) {
		var committed map[string]map[int32]catalog.CommittedOffset
		if g := v.Groups[group]; g != nil {
			committed = g.Offsets
		}
		if topics == nil {
			for _, topic := range slices.Sorted(maps.Keys(committed)) {
				t := kmsg.OffsetFetchRequestGroupTopic{Topic: topic}
				t.Partitions = slices.Sorted(maps.Keys(committed[topic]))
				topics = append(topics, t)
			}
		}
		for _, t := range topics {
			rt := kmsg.NewOffsetFetchResponseGroupTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch = p, -1, -1
				if o, ok := committed[t.Topic][p]; ok {
					meta := o.Metadata
					rp.Offset, rp.LeaderEpoch, rp.Metadata = o.Offset, o.LeaderEpoch, &meta
				} else {
					rp.Metadata = kmsg.StringPtr("")
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			rg.Topics = append(rg.Topics, rt)
		}
	})
	return rg
}

func (c *Coordinator) offsetDelete(ctx context.Context, req *kmsg.OffsetDeleteRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	codes := map[catalog.GroupPartition]int16{}
	defer func() {
		for _, t := range req.Topics {
			rt := kmsg.NewOffsetDeleteResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetDeleteResponseTopicPartition()
				rp.Partition = p.Partition
				rp.ErrorCode = codes[catalog.GroupPartition{Topic: t.Topic, Partition: p.Partition}]
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}()
	c.mu.Lock()
	epoch, code := c.ownLocked()
	g := c.mu.groups[req.Group]
	var drop []catalog.GroupPartition
	if code == 0 {
		for _, t := range req.Topics {
			subscribed := g != nil && g.subscribedTo(t.Topic)
			for _, p := range t.Partitions {
				gp := catalog.GroupPartition{Topic: t.Topic, Partition: p.Partition}
				if subscribed {
					codes[gp] = kerr.GroupSubscribedToTopic.Code
				} else if !slices.Contains(drop, gp) {
					drop = append(drop, gp)
				}
			}
		}
	}
	c.mu.Unlock()
	if code != 0 {
		resp.ErrorCode = code
		return resp
	}
	var known bool
	c.cfg.Meta.Read(func(v *catalog.View) { known = v.Groups[req.Group] != nil })
	if !known && (g == nil || len(g.members) == 0) {
		resp.ErrorCode = kerr.GroupIDNotFound.Code
		return resp
	}
	if len(drop) == 0 {
		return resp
	}
	if _, err := c.propose(ctx, catalog.DeleteGroupOffsets{Group: req.Group, CoordinatorEpoch: epoch, Partitions: drop}); err != nil {
		c.logger.Warn("offset delete failed", "group", req.Group, "err", err)
		resp.ErrorCode = proposeCode(err)
	}
	return resp
}

func (c *Coordinator) deleteGroups(ctx context.Context, req *kmsg.DeleteGroupsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, name := range req.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group = name
		rg.ErrorCode = c.deleteGroup(ctx, name)
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

// deleteGroup deletes an empty group: its committed offsets, and its
// in-memory state.
func (c *Coordinator) deleteGroup(ctx context.Context, name string) int16 {
	c.mu.Lock()
	epoch, code := c.ownLocked()
	g := c.mu.groups[name]
	switch {
	case code != 0:
	case name == "":
		code = kerr.InvalidGroupID.Code
	case g != nil && !g.removable():
		code = kerr.NonEmptyGroup.Code
	}
	c.mu.Unlock()
	if code != 0 {
		return code
	}
	var known bool
	c.cfg.Meta.Read(func(v *catalog.View) { known = v.Groups[name] != nil })
	if !known {
		return kerr.GroupIDNotFound.Code
	}
	if _, err := c.propose(ctx, catalog.DeleteGroupOffsets{Group: name, CoordinatorEpoch: epoch, All: true}); err != nil {
		c.logger.Warn("group delete failed", "group", name, "err", err)
		return proposeCode(err)
	}
	return 0
}
