package server

import (
	"context"
	"errors"
	"time"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/metalog"
	"github.com/minkdb/mink/plan"
)

// Retention: the lifecycle loop of the coordinator lease holder that applies
// the table options log_retention and partition_retention (docs/tiering.md,
// "Retention"). Like the assignment plans, its decisions are pure functions
// of the view, the time and the live set (plan.Trims, plan.PartitionDrops,
// plan.RetiredCloses); retain proposes them.

// retain runs the retention loop while this node holds the coordinator lease
// at epoch. It returns when ctx is done or a trim shows the epoch is stale.
func (s *Server) retain(ctx context.Context, epoch uint64, live *metalog.LiveCache) {
	tick := time.NewTicker(min(s.cfg.CoordinatorTick, time.Second))
	defer tick.Stop()
	for {
		if stale := s.retainOnce(ctx, epoch, live.IsLive, time.Now()); stale {
			s.logger.Warn("retention: coordinator epoch is stale; the loop stops", "coordinator_epoch", epoch)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// retainOnce proposes one pass of retention. It reports whether the
// coordinator epoch turned out to be stale.
func (s *Server) retainOnce(ctx context.Context, epoch uint64, live func(catalog.NodeID) bool, now time.Time) bool {
	var (
		trims  []catalog.TrimStream
		drops  []catalog.DropPartition
		closes []catalog.CloseStream
	)
	s.cat.Read(func(v *catalog.View) {
		trims = plan.Trims(v, now, epoch)
		drops = plan.PartitionDrops(v, now)
		closes = plan.RetiredCloses(v, live)
	})
	for _, d := range drops {
		if err := s.expirePartition(ctx, d, epoch); err != nil {
			if ctx.Err() == nil {
				s.logger.Warn("retention: dropping an expired partition failed; will retry", "table", d.Table, "partition", d.Partition, "err", err)
			}
			continue
		}
		s.logger.Info("retention: expired partition dropped", "table", d.Table, "partition", d.Partition)
	}
	for _, tr := range trims {
		_, err := s.cat.Propose(ctx, tr)
		if errors.Is(err, catalog.ErrStaleEpoch) {
			return true
		}
		if err != nil {
			if ctx.Err() == nil {
				s.logger.Warn("retention: trim failed; will retry", "stream", tr.Stream, "start", tr.Start, "err", err)
			}
			continue
		}
		s.logger.Info("retention: stream trimmed", "stream", tr.Stream, "start", tr.Start)
	}
	for _, c := range closes {
		if _, err := s.cat.Propose(ctx, c); err != nil && ctx.Err() == nil && !errors.Is(err, catalog.ErrNotFound) {
			s.logger.Warn("retention: closing a retired stream failed; will retry", "stream", c.Stream, "err", err)
		}
	}
	return false
}
