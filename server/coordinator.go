package server

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/minkdb/mink/buckets"
	"github.com/minkdb/mink/buckets/s3stream"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/metalog"
)

// The coordinator's decisions are pure functions of the view and the live
// set (spec: "Assignment"); coordinate is the thin loop that proposes them.

// bucketGroup is the buckets of one table or one partition, by index.
type bucketGroup struct {
	table     catalog.TableID
	partition catalog.PartitionID
}

// planAssign gives every bucket without a leader to a live node: bucket i of
// a table or partition goes to live[(i + start) % n], with start derived from
// the clock so that consecutive tables begin on different nodes. live must
// be sorted.
func planAssign(v *catalog.View, live []catalog.NodeID, clock uint64, epoch uint64) []catalog.LeadBucket {
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
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].table != keys[j].table {
			return keys[i].table < keys[j].table
		}
		return keys[i].partition < keys[j].partition
	})
	var out []catalog.LeadBucket
	for gi, g := range keys {
		start := int((clock + uint64(gi)) % uint64(len(live)))
		bs := groups[g]
		sort.Slice(bs, func(i, j int) bool { return bs[i].Index < bs[j].Index })
		for _, b := range bs {
			out = append(out, catalog.LeadBucket{Bucket: b.ID, Node: live[(b.Index+start)%len(live)], CoordinatorEpoch: epoch})
		}
	}
	return out
}

// planFailover moves every bucket whose leader is not live to the
// least-loaded live node (load = buckets led, counting the moves planned so
// far), lowest id on ties. live must be sorted.
func planFailover(v *catalog.View, live []catalog.NodeID, epoch uint64) []catalog.LeadBucket {
	if len(live) == 0 {
		return nil
	}
	isLive := map[catalog.NodeID]bool{}
	load := map[catalog.NodeID]int{}
	for _, n := range live {
		isLive[n] = true
		load[n] = 0
	}
	var orphans []*catalog.Bucket
	for _, b := range v.Buckets {
		switch {
		case b.Leader == 0:
		case isLive[b.Leader]:
			load[b.Leader]++
		default:
			orphans = append(orphans, b)
		}
	}
	sort.Slice(orphans, func(i, j int) bool { return orphans[i].ID < orphans[j].ID })
	var out []catalog.LeadBucket
	for _, b := range orphans {
		best := live[0]
		for _, n := range live[1:] {
			if load[n] < load[best] {
				best = n
			}
		}
		load[best]++
		out = append(out, catalog.LeadBucket{Bucket: b.ID, Node: best, CoordinatorEpoch: epoch})
	}
	return out
}

// coordinate runs the coordinator's loops while this node holds the
// coordinator lease at epoch: it assigns new buckets as soon as they appear
// and fails over buckets of dead nodes on every tick. It returns when ctx is
// done or a proposal shows the epoch is stale.
func (s *Server) coordinate(ctx context.Context, epoch uint64, live *metalog.LiveCache) {
	tick := time.NewTicker(s.cfg.CoordinatorTick)
	defer tick.Stop()
	// The lifecycle loops and the tiering worker run while this node
	// coordinates at epoch; all of them stop before coordinate returns,
	// also when it steps down with the lease still held.
	loopCtx, stopLoops := context.WithCancel(ctx)
	var loops sync.WaitGroup
	defer func() {
		stopLoops()
		loops.Wait()
	}()
	loops.Go(func() { s.collectGarbage(loopCtx) })
	loops.Go(func() { s.retain(loopCtx, epoch, live) })
	loops.Go(func() { s.tiering.run(loopCtx, epoch) })
	for {
		changed := s.cat.Changed()
		liveChanged := live.Changed()
		if stale := s.coordinateOnce(ctx, epoch, live, true); stale {
			s.logger.Warn("coordinator epoch is stale; stepping down", "coordinator_epoch", epoch)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-liveChanged:
		case <-tick.C:
		}
	}
}

// collectGarbage runs the object store's only delete path while this node
// holds the coordinator lease: unreferenced stream objects and trimmed WAL
// objects go after a grace delay that lets readers finish.
func (s *Server) collectGarbage(ctx context.Context) {
	gc := s3stream.NewCollector(s.store, s.cat, s.cfg.GCDelay)
	kvgc := buckets.NewKVCollector(s.store, s.cat, s.cfg.GCDelay)
	t := time.NewTicker(s.cfg.GCInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		st, err := gc.Collect(ctx)
		if err != nil && ctx.Err() == nil {
			s.logger.Warn("garbage collection failed; will retry", "err", err)
			continue
		}
		if st.Deleted > 0 {
			s.logger.Info("garbage collected", "deleted", st.Deleted, "waiting", st.Waiting)
		}
		// KV snapshot objects that left retention, and those of dropped
		// buckets. Changelog streams are never trimmed (TrimStream refuses
		// primary-key buckets), so every retained snapshot's log offset
		// stays replayable.
		kst, err := kvgc.Collect(ctx)
		if err != nil && ctx.Err() == nil {
			s.logger.Warn("KV snapshot garbage collection failed; will retry", "err", err)
			continue
		}
		if kst.Deleted > 0 {
			s.logger.Info("KV snapshot garbage collected", "deleted", kst.Deleted, "waiting", kst.Waiting)
		}
	}
}

// coordinateOnce proposes one round of assignments and failovers. It reports
// whether the coordinator epoch turned out to be stale.
func (s *Server) coordinateOnce(ctx context.Context, epoch uint64, live *metalog.LiveCache, failover bool) bool {
	var nodes []catalog.NodeID
	for id := range live.Nodes() {
		nodes = append(nodes, id)
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i] < nodes[j] })
	var plan []catalog.LeadBucket
	s.cat.Read(func(v *catalog.View) {
		plan = planAssign(v, nodes, uint64(time.Now().UnixNano()/int64(time.Millisecond)), epoch)
		if failover {
			plan = append(plan, planFailover(v, nodes, epoch)...)
		}
	})
	for _, lb := range plan {
		_, err := s.cat.Propose(ctx, lb)
		if errors.Is(err, catalog.ErrStaleEpoch) {
			var current uint64
			s.cat.Read(func(v *catalog.View) { current = v.Coordinator.Epoch })
			if current != epoch {
				return true
			}
		}
		if err != nil && ctx.Err() == nil {
			s.logger.Warn("coordinator: LeadBucket rejected", "bucket", lb.Bucket, "node", lb.Node, "err", err)
		}
	}
	return false
}
