package server

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/minkdb/mink/buckets"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/plan"
	"github.com/minkdb/mink/tiering"
)

// tieringWorker runs tiering rounds (package tiering) on the coordinator
// lease holder: run is started by coordinate with the lease's epoch and
// returns when the lease is lost or the epoch turns out stale. Rounds of one
// table never overlap (tableTiering.roundMu); the admin API's "run" uses the
// same lock. The in-memory status (last round, last error) lives as long as
// the node: a new lease holder starts with none and rebuilds everything else
// from the view and the lake.
type tieringWorker struct {
	s      *Server
	tierer *tiering.Tierer
	gc     *tiering.LakeCollector

	// wake is signalled by a "run" request without --wait.
	wake chan struct{}

	counters tieringCounters

	mu struct {
		sync.Mutex
		// epoch is the coordinator epoch the worker runs under; 0 when
		// this node does not hold the lease.
		epoch  uint64
		tables map[catalog.TableID]*tableTiering
	}
}

// tableTiering is the worker's state of one table.
type tableTiering struct {
	// roundMu is held for the whole of a round of the table.
	roundMu sync.Mutex

	// The rest is guarded by tieringWorker.mu.
	requested   bool // a run was requested: round as soon as possible
	running     bool
	lastAttempt time.Time
	lastRound   *RoundSummary
	lastErr     string
	lastErrAt   time.Time
	// behindSince is when the worker first saw the table behind its
	// streams since it was last caught up.
	behindSince time.Time
}

// RoundSummary is the last round of a table in GET /api/v1/tiering/status.
type RoundSummary struct {
	At         time.Time `json:"at"`
	DurationMS int64     `json:"duration_ms"`
	Rows       int64     `json:"rows"`
	Files      int       `json:"files"`
	Bytes      int64     `json:"bytes"`
	SnapshotID int64     `json:"snapshot_id,omitempty"`
	Repaired   bool      `json:"repaired,omitempty"`
	// RetiredBuckets are the buckets the table no longer has (TRUNCATE,
	// dropped partitions) whose rows the round deleted from the lake, in
	// RetiredFiles data files.
	RetiredBuckets []catalog.BucketID `json:"retired_buckets,omitempty"`
	RetiredFiles   int                `json:"retired_files,omitempty"`
}

func roundSummary(res tiering.RoundResult, took time.Duration) *RoundSummary {
	return &RoundSummary{At: time.Now().UTC(), DurationMS: took.Milliseconds(), Rows: res.Rows, Files: res.Files,
		Bytes: res.Bytes, SnapshotID: res.SnapshotID, Repaired: res.Repaired, RetiredBuckets: res.Retired, RetiredFiles: res.FilesDeleted}
}

func newTieringWorker(s *Server, storeURL string) *tieringWorker {
	w := &tieringWorker{s: s, wake: make(chan struct{}, 1)}
	w.tierer = tiering.New(tiering.Config{
		Store: s.store, StoreURL: storeURL, Meta: s.cat, Source: committedSource{s}, Logger: s.logger,
	})
	w.gc = tiering.NewLakeCollector(w.tierer.Lake(), s.cfg.GCDelay)
	w.mu.tables = map[catalog.TableID]*tableTiering{}
	return w
}

// committedSource reads committed stream data through this node's bucket
// manager (stream objects; any node can serve them).
type committedSource struct{ s *Server }

func (c committedSource) ReadCommitted(ctx context.Context, bucket catalog.BucketID, from, to uint64) ([]tiering.Batch, error) {
	m := c.s.Buckets()
	if m == nil {
		return nil, fmt.Errorf("read bucket %d: %w", bucket, buckets.ErrUnavailable)
	}
	bs, err := m.ReadCommitted(ctx, bucket, from, to)
	if err != nil {
		return nil, err
	}
	out := make([]tiering.Batch, len(bs))
	for i, b := range bs {
		out[i] = tiering.Batch{Offset: b.Offset, Record: b.Record}
	}
	return out, nil
}

func (w *tieringWorker) table(id catalog.TableID) *tableTiering {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.tableLocked(id)
}

func (w *tieringWorker) tableLocked(id catalog.TableID) *tableTiering {
	t := w.mu.tables[id]
	if t == nil {
		t = &tableTiering{}
		w.mu.tables[id] = t
	}
	return t
}

// tablePolicy is how a table is tiered, from its options and the server's
// defaults.
type tablePolicy struct {
	enabled   bool
	reason    string // why not, when !enabled
	freshness time.Duration
}

func (w *tieringWorker) policy(spec catalog.TableSpec) tablePolicy {
	p := tablePolicy{enabled: true, freshness: w.s.cfg.TieringFreshness}
	if d, err := time.ParseDuration(spec.Options["tiering_freshness"]); err == nil && d > 0 {
		p.freshness = d
	}
	switch {
	case !w.s.cfg.Tiering:
		p.enabled, p.reason = false, "tiering is off on this server (--tiering=false)"
	case spec.Options["tiering"] == "off":
		p.enabled, p.reason = false, "tiering = off"
	}
	return p
}

// run is the worker loop of one lease: every tick it starts the rounds that
// are due, one table at a time, and collects lake garbage every GCInterval.
// It returns when ctx is done or a round finds the epoch stale.
func (w *tieringWorker) run(ctx context.Context, epoch uint64) {
	w.mu.Lock()
	w.mu.epoch = epoch
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.mu.epoch = 0
		w.mu.Unlock()
	}()
	tickEvery := min(time.Second, w.s.cfg.TieringFreshness)
	tick := time.NewTicker(tickEvery)
	defer tick.Stop()
	// Lake maintenance (compaction, snapshot expiry, garbage) runs beside
	// the rounds, so that a long compaction delays only its own table's
	// rounds (it holds the table's round lock).
	var maint sync.WaitGroup
	mctx, stopMaint := context.WithCancel(ctx)
	defer maint.Wait()
	defer stopMaint()
	maint.Go(func() { w.maintainLoop(mctx, epoch) })
	for {
		if fenced := w.runDue(ctx, epoch); fenced {
			w.s.logger.Warn("tiering: coordinator epoch is stale; the worker stops", "coordinator_epoch", epoch)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-w.wake:
		}
	}
}

// runDue runs a round of every table that is due (plan.Due): tiering on, new
// committed rows that have waited its freshness, or a lake that may hold rows
// of retired buckets (after TRUNCATE), and its freshness passed since the
// last attempt (or a run was requested).
func (w *tieringWorker) runDue(ctx context.Context, epoch uint64) (fenced bool) {
	type dueTable struct {
		id   catalog.TableID
		name string
	}
	var todo []dueTable
	now := time.Now()
	w.s.cat.Read(func(v *catalog.View) {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, id := range slices.Sorted(maps.Keys(v.Tables)) {
			t := v.Tables[id]
			p := w.policy(t.Spec)
			st := w.tableLocked(id)
			due, behindSince := plan.Due(v, t, plan.TableWork{Enabled: p.enabled, Freshness: p.freshness,
				Requested: st.requested, Running: st.running, LastAttempt: st.lastAttempt, BehindSince: st.behindSince}, now)
			st.behindSince = behindSince
			if due {
				todo = append(todo, dueTable{id, v.TopicName(t)})
			}
		}
		for id := range w.mu.tables {
			if v.Tables[id] == nil {
				delete(w.mu.tables, id)
			}
		}
	})
	for _, d := range todo {
		if ctx.Err() != nil {
			return false
		}
		_, err := w.round(ctx, d.id, epoch, nil)
		if errors.Is(err, tiering.ErrFenced) {
			return true
		}
		if err != nil && ctx.Err() == nil {
			w.s.logger.Warn("tiering round failed; will retry", "table", d.name, "err", err)
		}
	}
	return false
}

// round runs one round of table id under epoch, holding the table's round
// lock, and records its outcome in the table's status.
func (w *tieringWorker) round(ctx context.Context, id catalog.TableID, epoch uint64, progress func(tiering.Progress)) (tiering.RoundResult, error) {
	st := w.table(id)
	st.roundMu.Lock()
	defer st.roundMu.Unlock()
	start := time.Now()
	w.mu.Lock()
	st.running, st.requested, st.lastAttempt = true, false, start
	w.mu.Unlock()
	res, err := w.tierer.RoundWithProgress(ctx, id, epoch, progress)
	w.mu.Lock()
	defer w.mu.Unlock()
	st.running = false
	if res.Committed {
		w.counters.rows.Add(uint64(max(res.Rows, 0)))
		w.counters.bytes.Add(uint64(max(res.Bytes, 0)))
		w.counters.files.Add(uint64(res.Files))
		w.counters.retiredFiles.Add(uint64(res.FilesDeleted))
	}
	switch {
	case err != nil:
		w.counters.failed.Add(1)
	case res.Committed:
		w.counters.committed.Add(1)
	case res.Repaired:
		w.counters.repaired.Add(1)
	default:
		w.counters.empty.Add(1)
	}
	if err != nil {
		st.lastErr, st.lastErrAt = err.Error(), time.Now()
		return res, err
	}
	st.lastErr = ""
	if res.Committed || res.Repaired {
		st.lastRound = roundSummary(res, time.Since(start))
		if res.Committed {
			w.s.logger.Info("tiering round committed", "table", id, "rows", res.Rows, "files", res.Files,
				"bytes", res.Bytes, "snapshot", res.SnapshotID, "elapsed", time.Since(start))
		}
		if len(res.Retired) > 0 {
			w.s.logger.Info("tiering: deleted the lake rows of buckets the table no longer has", "table", id,
				"buckets", res.Retired, "files", res.FilesDeleted, "snapshot", res.SnapshotID)
		}
	}
	return res, nil
}

// maintainLoop maintains the lakes every GCInterval until ctx is done or
// the epoch turns out stale.
func (w *tieringWorker) maintainLoop(ctx context.Context, epoch uint64) {
	tick := time.NewTicker(w.s.cfg.GCInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if fenced := w.maintain(ctx, epoch); fenced {
			return
		}
	}
}

// lakePolicies are the lake maintenance policies of a table.
func (w *tieringWorker) lakePolicies(spec catalog.TableSpec) (tiering.CompactPolicy, tiering.ExpirePolicy) {
	cp := tiering.CompactPolicy{TargetFileSize: w.s.cfg.LakeTargetFileSize, MinFiles: w.s.cfg.LakeCompactFiles}
	ep := tiering.ExpirePolicy{Retention: tiering.DefaultSnapshotRetention, KeepLast: tiering.DefaultKeepSnapshots}
	if d, err := time.ParseDuration(spec.Options["lake_snapshot_retention"]); err == nil && d >= 0 {
		ep.Retention = d
	}
	return cp, ep
}

// maintain runs one lake maintenance pass: for every table, while none of
// this node's rounds of it runs (its round lock; a busy table waits for the
// next pass), compaction (log tables with tiering on), snapshot expiry and
// garbage collection; then the lakes of dropped tables are collected. It
// reports whether the coordinator epoch is stale.
func (w *tieringWorker) maintain(ctx context.Context, epoch uint64) (fenced bool) {
	type item struct {
		id   catalog.TableID
		spec catalog.TableSpec
	}
	var items []item
	w.s.cat.Read(func(v *catalog.View) {
		for _, id := range slices.Sorted(maps.Keys(v.Tables)) {
			items = append(items, item{id, v.Tables[id].Spec})
		}
	})
	var total tiering.LakeGCStats
	for _, it := range items {
		if ctx.Err() != nil {
			return false
		}
		st := w.table(it.id)
		if !st.roundMu.TryLock() {
			continue
		}
		err := w.maintainTable(ctx, epoch, it.id, it.spec, &total)
		st.roundMu.Unlock()
		if errors.Is(err, tiering.ErrFenced) {
			return true
		}
		if err != nil && ctx.Err() == nil {
			w.s.logger.Warn("lake maintenance failed; will retry", "table", it.spec.Name, "err", err)
		}
	}
	got, err := w.gc.CollectDropped(ctx, func([]catalog.TableID) (map[catalog.TableID]bool, uint64) {
		live := map[catalog.TableID]bool{}
		var next uint64
		w.s.cat.Read(func(v *catalog.View) {
			for id := range v.Tables {
				live[id] = true
			}
			next = v.NextID
		})
		return live, next
	})
	if err != nil && ctx.Err() == nil {
		w.s.logger.Warn("collecting the lakes of dropped tables failed; will retry", "err", err)
	}
	total.Deleted += got.Deleted
	total.Waiting += got.Waiting
	w.counters.lakeDeleted.Add(uint64(total.Deleted))
	if total.Deleted > 0 {
		w.s.logger.Info("lake garbage collected", "deleted", total.Deleted, "waiting", total.Waiting)
	}
	return false
}

// maintainTable compacts, expires and collects the lake of one table; the
// caller holds its round lock.
func (w *tieringWorker) maintainTable(ctx context.Context, epoch uint64, id catalog.TableID, spec catalog.TableSpec, total *tiering.LakeGCStats) error {
	cp, ep := w.lakePolicies(spec)
	var errs []error
	if w.policy(spec).enabled && len(spec.PrimaryKey) == 0 {
		start := time.Now()
		res, err := w.tierer.Compact(ctx, id, epoch, cp)
		if res.Committed {
			w.counters.compactions.Add(1)
			w.counters.compactedFiles.Add(uint64(res.Rewritten))
			w.s.logger.Info("lake compacted", "table", spec.Name, "files_before", res.FilesBefore, "files_after", res.FilesAfter,
				"rewritten", res.Rewritten, "written", res.Written, "bytes_read", res.BytesRead, "bytes_written", res.BytesWritten,
				"snapshot", res.SnapshotID, "elapsed", time.Since(start))
		}
		if err != nil {
			if errors.Is(err, tiering.ErrFenced) {
				return err
			}
			errs = append(errs, err)
		}
	}
	res, err := w.tierer.Expire(ctx, id, epoch, ep)
	if err != nil {
		if errors.Is(err, tiering.ErrFenced) {
			return err
		}
		errs = append(errs, err)
	}
	if res.Expired > 0 {
		w.counters.expired.Add(uint64(res.Expired))
		w.s.logger.Info("lake snapshots expired", "table", spec.Name, "expired", res.Expired, "kept", res.Kept)
	}
	got, err := w.gc.Collect(ctx, []catalog.TableID{id})
	if err != nil {
		errs = append(errs, err)
	}
	total.Deleted += got.Deleted
	total.Waiting += got.Waiting
	return errors.Join(errs...)
}

// request asks the worker for a round of id as soon as possible.
func (w *tieringWorker) request(id catalog.TableID) {
	w.mu.Lock()
	w.tableLocked(id).requested = true
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// epoch is the coordinator epoch the worker runs under, 0 if none.
func (w *tieringWorker) epoch() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mu.epoch
}
