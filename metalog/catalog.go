package metalog

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	mathrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minkdb/mink/metalog/internal/backoff"

	"github.com/minkdb/mink/catalog"
)

// DefaultSnapshotEvery is the default number of entries between view
// snapshots.
const DefaultSnapshotEvery = 1000

// Options configure a Catalog.
type Options struct {
	// SnapshotEvery is the number of log entries between view snapshots: when
	// the applied index reaches a multiple of it, the node saves the view (the
	// first node to get there wins; the others find it stored). Default 1000.
	SnapshotEvery uint64
	// Logger receives the driver's log lines. Default slog.Default().
	Logger *slog.Logger

	// TestingKnobs are hooks for tests (of this package and of other Logs,
	// such as etcdlog's); production code leaves them zero.
	TestingKnobs TestingKnobs
}

// TestingKnobs are the test hooks of a Catalog (Options.TestingKnobs).
type TestingKnobs struct {
	// SnapshotJitter bounds the random delay before a node saves a
	// snapshot, so that the nodes, which all reach the index together, do
	// not all encode and upload it. 0: defaultSnapshotJitter; negative: none.
	SnapshotJitter time.Duration
	// OnApply, if set, is called after each entry is applied, under the view
	// lock.
	OnApply func(index uint64, entry []byte, out catalog.Outcome)
	// OnReload, if set, is called after the view is replaced by a snapshot
	// because the entries after it were truncated.
	OnReload func(index uint64)
}

const (
	defaultSnapshotJitter = 500 * time.Millisecond
	// snapshotSaveTimeout bounds one SaveSnapshot call.
	snapshotSaveTimeout = time.Minute
	// maxAppendAttempts bounds how often Propose appends one entry after
	// failures that left it out of the log.
	maxAppendAttempts = 8
)

// Catalog is a node's copy of the metadata log: it tails the Log, applies
// every entry to its live View with Apply, and lets callers propose records
// and wait for their outcome.
//
// A record is applied exactly once, in log order, on every node, across
// restarts: the view is only ever loaded from a snapshot of the view at some
// index n and then tailed from n+1.
//
// All methods are safe to call concurrently.
type Catalog struct {
	log    Log
	opts   Options
	logger *slog.Logger

	// applied is mu.view.Index, readable without the lock.
	applied atomic.Uint64

	// snapshots carries views to save from the tail goroutine to the
	// snapshot goroutine. Capacity 1; the tail goroutine replaces an unsaved
	// view with a newer one.
	snapshots chan *catalog.View
	// appends carries entries from Propose to the append goroutine, which
	// groups those that arrive while an append is in flight into one
	// AppendBatch (group commit).
	appends chan *appendRequest
	// closing is closed when Close begins.
	closing chan struct{}

	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once

	mu struct {
		sync.RWMutex
		// view is the live view. Only the tail goroutine mutates it (or
		// replaces it), and only with mu held for writing.
		view *catalog.View
		// changed is closed and replaced after every apply, reload and
		// failure.
		changed chan struct{}
		// waiters are the proposals of this node that have not seen their
		// outcome yet, by proposal id.
		waiters map[proposalID]*waiter
		// reloadedThrough is the highest snapshot index loaded to skip
		// truncated entries after Open. A proposal whose entry may lie at or
		// below it cannot learn its outcome.
		reloadedThrough uint64
		// err is set when the tail goroutine has stopped for good (Close, or
		// an entry that cannot be decoded); nothing is applied after it.
		err error
	}
}

// waiter is a pending Propose. REQUIRES: Catalog.mu held to read or write.
type waiter struct {
	done bool
	out  catalog.Outcome
}

// Open loads the latest view snapshot from log, replays the log after it
// until it has caught up with the head the log had when Open was called, and
// starts the tail goroutine (which keeps applying new entries) and the
// snapshot goroutine. Close stops both. The Catalog does not close log.
func Open(ctx context.Context, log Log, opts Options) (*Catalog, error) {
	if opts.SnapshotEvery == 0 {
		opts.SnapshotEvery = DefaultSnapshotEvery
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.TestingKnobs.SnapshotJitter == 0 {
		opts.TestingKnobs.SnapshotJitter = defaultSnapshotJitter
	}
	start := time.Now()
	view, err := loadSnapshot(ctx, log)
	if err != nil {
		return nil, err
	}
	head, err := log.Head(ctx)
	if err != nil {
		return nil, fmt.Errorf("read metadata log head: %w", err)
	}
	c := &Catalog{
		log:       log,
		opts:      opts,
		logger:    opts.Logger,
		snapshots: make(chan *catalog.View, 1),
		appends:   make(chan *appendRequest),
		closing:   make(chan struct{}),
	}
	c.mu.view = view
	c.mu.changed = make(chan struct{})
	c.mu.waiters = make(map[proposalID]*waiter)
	c.applied.Store(view.Index)
	// Read before the tail loop starts applying records to view.
	snapshotIndex := view.Index

	// The goroutines outlive Open's ctx; Close cancels them.
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c.cancel = cancel
	c.wg.Add(3)
	go func() { defer c.wg.Done(); c.tailLoop(runCtx) }()
	go func() { defer c.wg.Done(); c.snapshotLoop(runCtx) }()
	go func() { defer c.wg.Done(); c.appendLoop(runCtx) }()

	if err := c.WaitIndex(ctx, head); err != nil {
		c.Close()
		return nil, fmt.Errorf("catch up with metadata log head %d: %w", head, err)
	}
	c.logger.Info("metadata log open", "snapshot_index", snapshotIndex, "head", head,
		"replayed", head-min(head, snapshotIndex), "elapsed", time.Since(start).Round(time.Millisecond))
	return c, nil
}

// loadSnapshot returns the view stored in log's snapshot, or an empty view.
func loadSnapshot(ctx context.Context, log Log) (*catalog.View, error) {
	index, data, err := log.LoadSnapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("load metadata snapshot: %w", err)
	}
	if index == 0 {
		return catalog.NewView(), nil
	}
	view, err := catalog.DecodeView(data)
	if err != nil {
		return nil, fmt.Errorf("decode metadata snapshot at index %d: %w", index, err)
	}
	if view.Index != index {
		return nil, fmt.Errorf("metadata snapshot stored at index %d holds a view at index %d", index, view.Index)
	}
	return view, nil
}

// Propose appends rec to the log, waits until this node has applied it, and
// returns its outcome. If the state machine rejected rec, the returned error
// is Outcome.Err (errors.Is against ErrStaleEpoch, ErrExists, ...).
//
// Each proposal travels in an envelope with a random 128-bit proposal id. When
// an append fails ambiguously (the entry may have been written: a timeout, a
// lost response), Propose does not append again blindly: it reads the log
// head, waits until the tail has applied up to it, and looks for its proposal
// id among the entries applied since the proposal began (the head before the
// first attempt). Found: the outcome is returned as usual. Not found: the
// entry is not in the log (Log.Append guarantees no attempt is left in flight
// while ctx is live), and it is appended again. When the outcome cannot be
// learnt (ctx ended, or the entry was skipped by a snapshot load), the error
// wraps ErrUnknownOutcome and Outcome.Index is set if the index is known.
func (c *Catalog) Propose(ctx context.Context, rec catalog.Record) (catalog.Outcome, error) {
	return c.propose(ctx, nil, rec)
}

// ProposeGuarded is Propose, except that rec is appended only if guard holds
// at the append, checked atomically with it (the node registers as
// coordinator with its Leadership's Guard). The Log must be a GuardedLog.
// The entry is appended on its own, not grouped with concurrent proposals.
// When the guard does not hold, the error wraps ErrGuardFailed and
// ErrNotAppended and the record is not in the log.
func (c *Catalog) ProposeGuarded(ctx context.Context, guard Guard, rec catalog.Record) (catalog.Outcome, error) {
	if _, ok := c.log.(GuardedLog); !ok {
		return catalog.Outcome{}, fmt.Errorf("propose %v: the metadata log cannot check a guard: %w", rec.Kind(), ErrNotAppended)
	}
	return c.propose(ctx, &guard, rec)
}

func (c *Catalog) propose(ctx context.Context, guard *Guard, rec catalog.Record) (catalog.Outcome, error) {
	body, err := catalog.EncodeRecord(rec)
	if err != nil {
		return catalog.Outcome{}, fmt.Errorf("propose %v: %w", rec.Kind(), err)
	}
	id := newProposalID()
	entry := encodeEntry(id, body)
	if len(entry) > MaxAppendBytes {
		return catalog.Outcome{}, fmt.Errorf("propose %v: record of %d bytes exceeds the metadata log's %d: %w",
			rec.Kind(), len(body), MaxAppendBytes-entryHeaderSize, ErrNotAppended)
	}

	w := &waiter{}
	c.mu.Lock()
	if err := c.mu.err; err != nil {
		c.mu.Unlock()
		return catalog.Outcome{}, fmt.Errorf("propose %v: %w", rec.Kind(), err)
	}
	c.mu.waiters[id] = w
	// Every copy of the entry that could be in the log is above this index.
	searchFrom := c.mu.view.Index
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.mu.waiters, id)
		c.mu.Unlock()
	}()

	var appendErr error
	for attempt := 1; attempt <= maxAppendAttempts; attempt++ {
		index, err := c.append(ctx, guard, entry)
		if err == nil {
			return c.await(ctx, rec, w, index)
		}
		if errors.Is(err, ErrNotAppended) {
			return catalog.Outcome{}, fmt.Errorf("propose %v: %w", rec.Kind(), err)
		}
		appendErr = err
		if ctx.Err() != nil {
			// The append may still be in flight; the outcome is unknowable.
			if out, ok := c.outcome(w); ok {
				return out, out.Err
			}
			return catalog.Outcome{}, fmt.Errorf("propose %v: %w: %w", rec.Kind(), ErrUnknownOutcome, err)
		}
		found, out, err := c.search(ctx, w, searchFrom)
		if found {
			c.logger.Info("metadata append reported an error but the entry is in the log",
				"record", rec.Kind(), "index", out.Index, "append_err", appendErr)
			return out, out.Err
		}
		if err != nil {
			return catalog.Outcome{}, fmt.Errorf("propose %v: append failed (%v), searching the log for the entry: %w",
				rec.Kind(), appendErr, err)
		}
		c.logger.Warn("metadata append failed and the entry is not in the log; retrying",
			"record", rec.Kind(), "attempt", attempt, "err", appendErr)
		if err := backoff.Sleep(ctx, backoff.Delay(attempt)); err != nil {
			return catalog.Outcome{}, fmt.Errorf("propose %v: %w (last append error: %v)", rec.Kind(), err, appendErr)
		}
	}
	return catalog.Outcome{}, fmt.Errorf("propose %v: %d appends failed: %w: %w", rec.Kind(), maxAppendAttempts, ErrNotAppended, appendErr)
}

// await waits until the entry appended at index is applied and returns the
// outcome recorded in w.
func (c *Catalog) await(ctx context.Context, rec catalog.Record, w *waiter, index uint64) (catalog.Outcome, error) {
	for {
		c.mu.RLock()
		done, out, stopped, changed, applied := w.done, w.out, c.mu.err, c.mu.changed, c.mu.view.Index
		c.mu.RUnlock()
		switch {
		case done:
			return out, out.Err
		case stopped != nil:
			return catalog.Outcome{Index: index}, fmt.Errorf("propose %v: appended at %d: %w: %w", rec.Kind(), index, ErrUnknownOutcome, stopped)
		case applied >= index:
			// Applied without our waiter seeing it: the entry was inside a
			// snapshot this node loaded instead of tailing.
			return catalog.Outcome{Index: index}, fmt.Errorf("propose %v: appended at %d, skipped by a snapshot load: %w", rec.Kind(), index, ErrUnknownOutcome)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return catalog.Outcome{Index: index}, fmt.Errorf("propose %v: appended at %d, not yet applied: %w: %w", rec.Kind(), index, ErrUnknownOutcome, ctx.Err())
		}
	}
}

// search decides whether an entry whose append failed is in the log. It
// reads the head, waits until the tail has applied it, then looks at w.
func (c *Catalog) search(ctx context.Context, w *waiter, searchFrom uint64) (bool, catalog.Outcome, error) {
	var head uint64
	for attempt := 1; ; attempt++ {
		var err error
		if head, err = c.log.Head(ctx); err == nil {
			break
		}
		if ctx.Err() != nil {
			return false, catalog.Outcome{}, fmt.Errorf("%w: read log head: %w", ErrUnknownOutcome, err)
		}
		c.logger.Warn("reading the metadata log head failed; retrying", "err", err)
		if err := backoff.Sleep(ctx, backoff.Delay(attempt)); err != nil {
			return false, catalog.Outcome{}, fmt.Errorf("%w: read log head: %w", ErrUnknownOutcome, err)
		}
	}
	if err := c.WaitIndex(ctx, head); err != nil {
		if out, ok := c.outcome(w); ok {
			return true, out, nil
		}
		return false, catalog.Outcome{}, fmt.Errorf("%w: wait for index %d: %w", ErrUnknownOutcome, head, err)
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if w.done {
		return true, w.out, nil
	}
	if c.mu.reloadedThrough > searchFrom {
		return false, catalog.Outcome{}, fmt.Errorf("%w: entries %d..%d were loaded from a snapshot, not applied one by one",
			ErrUnknownOutcome, searchFrom+1, c.mu.reloadedThrough)
	}
	return false, catalog.Outcome{}, nil
}

func (c *Catalog) outcome(w *waiter) (catalog.Outcome, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return w.out, w.done
}

// Read calls fn with the live view under a read lock. fn must not keep v,
// modify it, or block: the tail goroutine waits for it.
func (c *Catalog) Read(fn func(v *catalog.View)) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	fn(c.mu.view)
}

// View returns a deep copy of the live view, which the caller may keep.
func (c *Catalog) View() *catalog.View {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.mu.view.Clone()
}

// Changed returns a channel that is closed after the next apply (or when the
// Catalog stops). Take a new channel after each wake-up; changes may have
// been coalesced.
func (c *Catalog) Changed() <-chan struct{} {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.mu.changed
}

// AppliedIndex returns the index of the last entry applied to the view.
func (c *Catalog) AppliedIndex() uint64 { return c.applied.Load() }

// WaitIndex returns once the view has applied index, or when ctx is done, or
// when the Catalog has stopped (the error says why).
func (c *Catalog) WaitIndex(ctx context.Context, index uint64) error {
	for {
		c.mu.RLock()
		applied, stopped, changed := c.mu.view.Index, c.mu.err, c.mu.changed
		c.mu.RUnlock()
		if applied >= index {
			return nil
		}
		if stopped != nil {
			return stopped
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("wait for metadata index %d (applied %d): %w", index, applied, ctx.Err())
		}
	}
}

// Sync returns once the view has applied every entry appended before Sync
// was called (a linearizable read of the log's head, then WaitIndex). A
// check that would refuse on a view that may lag, such as a privilege a
// GRANT on another node has just given, syncs and checks again.
func (c *Catalog) Sync(ctx context.Context) error {
	head, err := c.log.Head(ctx)
	if err != nil {
		return fmt.Errorf("metadata log head: %w", err)
	}
	return c.WaitIndex(ctx, head)
}

// Close stops the tail, append and snapshot goroutines and waits for them.
// Later Proposes fail with ErrClosed; pending ones return ErrClosed, or
// ErrUnknownOutcome if their entry may have been appended.
func (c *Catalog) Close() error {
	c.closeOnce.Do(func() {
		close(c.closing)
		c.cancel()
		c.wg.Wait()
		c.stop(ErrClosed)
	})
	return nil
}

// stop records why nothing more will be applied and wakes every waiter.
func (c *Catalog) stop(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.err == nil {
		c.mu.err = err
		close(c.mu.changed)
		c.mu.changed = make(chan struct{})
	}
}

// tailLoop applies the log to the view until ctx is done. It runs in its own
// goroutine, owned by the Catalog.
func (c *Catalog) tailLoop(ctx context.Context) {
	failures := 0
	for {
		before := c.applied.Load()
		err := c.log.Tail(ctx, before+1, c.applyEntry)
		if ctx.Err() != nil {
			return
		}
		if c.applied.Load() > before {
			failures = 0
		}
		var corrupt *corruptEntryError
		switch {
		case errors.As(err, &corrupt):
			c.logger.Error("metadata log entry cannot be applied; this node stops applying the log", "err", err)
			c.stop(err)
			return
		case errors.Is(err, ErrTruncated):
			err = c.reload(ctx)
			if err == nil {
				continue
			}
			c.logger.Warn("reloading the metadata snapshot failed; retrying", "err", err)
		case errors.Is(err, ErrClosed):
			c.stop(fmt.Errorf("metadata log: %w", err))
			return
		default:
			c.logger.Warn("tailing the metadata log failed; retrying", "from", before+1, "err", err)
		}
		failures++
		if backoff.Sleep(ctx, backoff.Delay(failures)) != nil {
			return
		}
	}
}

// corruptEntryError is an entry that no node can apply. Every node stops at
// it (the view must be the same everywhere), so it is surfaced, not skipped.
type corruptEntryError struct {
	index uint64
	err   error
}

func (e *corruptEntryError) Error() string {
	return fmt.Sprintf("metadata log entry %d: %v", e.index, e.err)
}

func (e *corruptEntryError) Unwrap() error { return e.err }

// applyEntry applies one log entry to the live view. It runs on the tail
// goroutine, the view's only writer.
func (c *Catalog) applyEntry(index uint64, entry []byte) error {
	id, body, err := decodeEntry(entry)
	if err != nil {
		return &corruptEntryError{index: index, err: err}
	}
	rec, err := catalog.DecodeRecord(body)
	if err != nil {
		return &corruptEntryError{index: index, err: fmt.Errorf("decode record: %w", err)}
	}

	c.mu.Lock()
	if applied := c.mu.view.Index; index != applied+1 {
		c.mu.Unlock()
		panic(fmt.Sprintf("metalog: log delivered index %d to a view at index %d", index, applied))
	}
	out := catalog.Apply(c.mu.view, index, rec)
	if c.mu.view.Index != index {
		c.mu.Unlock()
		panic(fmt.Sprintf("metalog: Apply of index %d left the view at index %d", index, c.mu.view.Index))
	}
	c.applied.Store(index)
	if w, ok := c.mu.waiters[id]; ok && !w.done {
		w.done, w.out = true, out
	}
	if c.opts.TestingKnobs.OnApply != nil {
		c.opts.TestingKnobs.OnApply(index, entry, out)
	}
	close(c.mu.changed)
	c.mu.changed = make(chan struct{})
	c.mu.Unlock()

	if index%c.opts.SnapshotEvery == 0 {
		// Only this goroutine mutates the view, so it can be cloned without
		// the lock while readers hold read locks.
		c.offerSnapshot(c.mu.view.Clone())
	}
	return nil
}

// reload replaces the view with the stored snapshot after the entries this
// node needed next were truncated.
func (c *Catalog) reload(ctx context.Context) error {
	view, err := loadSnapshot(ctx, c.log)
	if err != nil {
		return err
	}
	applied := c.applied.Load()
	if view.Index <= applied {
		return fmt.Errorf("entry %d is truncated but the snapshot is at index %d", applied+1, view.Index)
	}
	c.mu.Lock()
	c.mu.view = view
	c.applied.Store(view.Index)
	c.mu.reloadedThrough = view.Index
	if c.opts.TestingKnobs.OnReload != nil {
		c.opts.TestingKnobs.OnReload(view.Index)
	}
	close(c.mu.changed)
	c.mu.changed = make(chan struct{})
	c.mu.Unlock()
	c.logger.Info("metadata log truncated past this node; loaded the snapshot", "from", applied, "to", view.Index)
	return nil
}

// offerSnapshot hands v to the snapshot goroutine, replacing a view it has
// not picked up yet. Called only from the tail goroutine.
func (c *Catalog) offerSnapshot(v *catalog.View) {
	select {
	case c.snapshots <- v:
		return
	default:
	}
	select {
	case <-c.snapshots:
	default:
	}
	c.snapshots <- v
}

// snapshotLoop saves the views offered by the tail goroutine. It runs in its
// own goroutine, owned by the Catalog.
func (c *Catalog) snapshotLoop(ctx context.Context) {
	for {
		var v *catalog.View
		select {
		case <-ctx.Done():
			return
		case v = <-c.snapshots:
		}
		if c.opts.TestingKnobs.SnapshotJitter > 0 {
			if backoff.Sleep(ctx, mathrand.N(c.opts.TestingKnobs.SnapshotJitter)) != nil {
				return
			}
			select {
			case newer := <-c.snapshots:
				v = newer
			default:
			}
		}
		c.saveSnapshot(ctx, v)
	}
}

func (c *Catalog) saveSnapshot(ctx context.Context, v *catalog.View) {
	start := time.Now()
	data, err := catalog.EncodeView(v)
	if err != nil {
		c.logger.Error("encode metadata snapshot", "index", v.Index, "err", err)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, snapshotSaveTimeout)
	defer cancel()
	if err := c.log.SaveSnapshot(ctx, v.Index, data); err != nil {
		if ctx.Err() == nil {
			c.logger.Warn("save metadata snapshot", "index", v.Index, "bytes", len(data), "err", err)
		}
		return
	}
	c.logger.Debug("metadata snapshot saved", "index", v.Index, "bytes", len(data),
		"elapsed", time.Since(start).Round(time.Millisecond))
}

// appendRequest is one entry handed to the append goroutine.
type appendRequest struct {
	// ctx is the proposer's: the batch holding the entry is abandoned only
	// when every proposer in it has given up.
	ctx context.Context
	// guard, if set, is checked with the append (GuardedLog.AppendGuarded);
	// such an entry is appended in a batch of its own.
	guard *Guard
	entry []byte
	// done receives the result; capacity 1.
	done chan appendResult
}

type appendResult struct {
	index uint64
	err   error
}

// append appends entry through the append goroutine. The error contract is
// Log.Append's.
func (c *Catalog) append(ctx context.Context, guard *Guard, entry []byte) (uint64, error) {
	req := &appendRequest{ctx: ctx, guard: guard, entry: entry, done: make(chan appendResult, 1)}
	select {
	case c.appends <- req:
	case <-ctx.Done():
		return 0, fmt.Errorf("%w: %w", ErrNotAppended, ctx.Err())
	case <-c.closing:
		return 0, fmt.Errorf("%w: %w", ErrNotAppended, ErrClosed)
	}
	select {
	case res := <-req.done:
		return res.index, res.err
	case <-ctx.Done():
		// The batch may still commit the entry.
		return 0, ctx.Err()
	}
}

// appendLoop appends the entries Propose hands it, grouping the ones that
// queue up while an append is in flight into one AppendBatch: concurrent
// proposers of a node then share one round trip to the log instead of
// competing for its head. It runs in its own goroutine, owned by the
// Catalog.
func (c *Catalog) appendLoop(ctx context.Context) {
	var carry *appendRequest // did not fit in the previous batch
	for {
		var batch []*appendRequest
		if carry != nil {
			batch, carry = []*appendRequest{carry}, nil
		} else {
			select {
			case <-ctx.Done():
				return
			case req := <-c.appends:
				batch = []*appendRequest{req}
			}
		}
		size := len(batch[0].entry)
	gather:
		for batch[0].guard == nil && len(batch) < MaxAppendEntries {
			select {
			case req := <-c.appends:
				if req.guard != nil || size+len(req.entry) > MaxAppendBytes {
					carry = req
					break gather
				}
				batch = append(batch, req)
				size += len(req.entry)
			default:
				break gather
			}
		}
		c.appendBatch(ctx, batch)
	}
}

// appendBatch appends the entries of batch whose proposers are still waiting
// and answers every request.
func (c *Catalog) appendBatch(ctx context.Context, batch []*appendRequest) {
	live := batch[:0]
	for _, req := range batch {
		if err := req.ctx.Err(); err != nil {
			req.done <- appendResult{err: fmt.Errorf("%w: %w", ErrNotAppended, err)}
			continue
		}
		live = append(live, req)
	}
	if len(live) == 0 {
		return
	}
	batchCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var waiting atomic.Int64
	waiting.Store(int64(len(live)))
	entries := make([][]byte, len(live))
	stops := make([]func() bool, len(live))
	for i, req := range live {
		entries[i] = req.entry
		stops[i] = context.AfterFunc(req.ctx, func() {
			if waiting.Add(-1) == 0 {
				cancel()
			}
		})
	}
	var first uint64
	var err error
	if g := live[0].guard; g != nil {
		// Alone in its batch (appendLoop); ProposeGuarded checked the type.
		first, err = c.log.(GuardedLog).AppendGuarded(batchCtx, *g, entries[0])
	} else {
		first, err = c.log.AppendBatch(batchCtx, entries)
	}
	for i, req := range live {
		stops[i]()
		if err != nil {
			req.done <- appendResult{err: err}
		} else {
			req.done <- appendResult{index: first + uint64(i)}
		}
	}
}

// proposalID identifies one Propose call across nodes and retries.
type proposalID [16]byte

func newProposalID() proposalID {
	var id proposalID
	rand.Read(id[:]) // never fails (crypto/rand.Read panics instead)
	return id
}

// Entry envelope: every log entry is
//
//	+---------+------------------+-------------------------+
//	| version | proposal id      | record (EncodeRecord)   |
//	| 1 byte  | 16 bytes         | rest                    |
//	+---------+------------------+-------------------------+
//
// version is entryVersion. The proposal id lets a proposer find its own entry
// after an ambiguous append; the state machine never sees it.
const (
	entryVersion    = 1
	entryHeaderSize = 1 + len(proposalID{})
)

func encodeEntry(id proposalID, record []byte) []byte {
	entry := make([]byte, 0, entryHeaderSize+len(record))
	entry = append(entry, entryVersion)
	entry = append(entry, id[:]...)
	return append(entry, record...)
}

func decodeEntry(entry []byte) (proposalID, []byte, error) {
	var id proposalID
	if len(entry) < entryHeaderSize {
		return id, nil, fmt.Errorf("entry of %d bytes is shorter than its %d-byte header", len(entry), entryHeaderSize)
	}
	if entry[0] != entryVersion {
		return id, nil, fmt.Errorf("entry version %d, this binary reads version %d", entry[0], entryVersion)
	}
	copy(id[:], entry[1:entryHeaderSize])
	return id, entry[entryHeaderSize:], nil
}

// backoff is the delay before retry number attempt (1-based): 50 ms doubling
// to 2 s, with up to 50% jitter.
