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
	"github.com/minkdb/mink/plan"
)

// The coordinator's decisions are pure functions of the view and the live
// set (package plan; spec: "Assignment"); coordinate is the thin loop that
// proposes them.

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
	var leads []catalog.LeadBucket
	s.cat.Read(func(v *catalog.View) {
		leads = plan.Assign(v, nodes, uint64(time.Now().UnixNano()/int64(time.Millisecond)), epoch)
		if failover {
			leads = append(leads, plan.Failover(v, nodes, epoch)...)
		}
	})
	for _, lb := range leads {
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
