package s3stream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/minkdb/mink/objstore"
)

// pendingEntry is one append on its way through the WAL.
type pendingEntry struct {
	s    *Stream
	e    walEntry
	size int64
	seq  uint64 // the WAL object it was batched into; set by the batcher
	done chan error
	once sync.Once
}

// finish reports the outcome to the appender. Only the first call counts: an
// appender told ErrUnknownOutcome is not told again when a retry succeeds.
func (p *pendingEntry) finish(err error) {
	p.once.Do(func() { p.done <- err })
}

// walUpload is one WAL object: its entries and encoded bytes.
type walUpload struct {
	seq     uint64
	entries []*pendingEntry
	data    []byte
	durable bool
	batched time.Time // when its entries were taken for it
}

// wal is a node epoch's write-ahead log on the object store.
//
// Lock order: Stream.mu → wal.mu. wal.ackMu is taken with neither held and
// serialises acknowledgement so that entries are acked in WAL order.
type wal struct {
	n    *Node
	kick chan struct{}
	sem  chan struct{} // one slot per upload in flight
	// ended is signalled when an upload ends, with group commit only: the
	// batcher waits for it to start the next group.
	ended chan struct{}

	// segs writes the WAL into segments when the store holds them (see
	// segment.go); nil: one object per WAL object.
	segs *segmentWriter

	ackMu sync.Mutex

	mu struct {
		sync.Mutex
		pending      []*pendingEntry
		pendingBytes int
		nextSeq      uint64
		uploads      map[uint64]*walUpload // batched, not yet acknowledged
		// durable: every WAL object with seq < durable is durable.
		durable uint64
		// acked: every WAL object with seq < acked is durable and its entries
		// have been handed to their streams. It trails durable while complete
		// runs; the WAL trim point is computed from it, never from durable,
		// or it could pass entries that no stream holds yet.
		acked uint64
		// failed is sticky: the WAL is fenced or the node closed.
		failed   error
		buffered int64
		space    chan struct{} // closed and replaced when buffered shrinks
		lastTrim uint64
	}
}

func newWAL(ctx context.Context, n *Node) *wal {
	w := &wal{n: n, kick: make(chan struct{}, 1)}
	inflight, group := n.cfg.MaxInflight, n.cfg.GroupCommitBytes > 0
	if segs, ok := n.cfg.Store.(objstore.SegmentStore); ok && n.cfg.WALSegmentBytes > 0 {
		// One record is written at a time: a group commit is what
		// arrived during the write before it.
		w.segs = newSegmentWriter(ctx, &n.wg, segs, n.cfg.Node, n.cfg.NodeEpoch, n.cfg.WALSegmentBytes)
		inflight, group = 1, true
	}
	w.sem = make(chan struct{}, inflight)
	if group {
		w.ended = make(chan struct{}, 1)
	}
	w.mu.uploads = make(map[uint64]*walUpload)
	w.mu.space = make(chan struct{})
	return w
}

// reserve waits until size more bytes fit under MaxBuffered. The caller must
// hold no lock: space is freed by the flusher.
func (w *wal) reserve(ctx context.Context, size int64) error {
	for {
		w.mu.Lock()
		if w.mu.failed != nil {
			err := w.mu.failed
			w.mu.Unlock()
			return err
		}
		if w.mu.buffered == 0 || w.mu.buffered+size <= w.n.cfg.MaxBuffered {
			w.mu.buffered += size
			w.mu.Unlock()
			return nil
		}
		space := w.mu.space
		w.mu.Unlock()
		w.n.kickFlush()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-space:
		}
	}
}

// release returns reserved bytes.
func (w *wal) release(size int64) {
	w.mu.Lock()
	w.mu.buffered -= size
	if w.mu.buffered < 0 {
		panic(fmt.Sprintf("s3stream: buffered bytes went negative (%d) after releasing %d", w.mu.buffered, size))
	}
	close(w.mu.space)
	w.mu.space = make(chan struct{})
	w.mu.Unlock()
}

// add queues an entry for the next WAL object.
// REQUIRES: p.s.mu held, so that a stream's entries queue in offset order.
func (w *wal) add(p *pendingEntry) error {
	w.mu.Lock()
	if w.mu.failed != nil {
		err := w.mu.failed
		w.mu.Unlock()
		return err
	}
	w.mu.pending = append(w.mu.pending, p)
	w.mu.pendingBytes += int(p.size)
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
	return nil
}

// batchLoop groups pending entries into WAL objects and starts their
// uploads, at most MaxInflight at a time.
func (w *wal) batchLoop(ctx context.Context) {
	group := w.ended != nil
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.kick:
		case <-w.ended: // nil without group commit
		}
		// With no upload in flight the appends go at once: a lone writer
		// waits for one object put, not a window plus a put. While
		// uploads are in flight, the window groups what arrives
		// meanwhile into fewer, larger objects. With group commit the
		// upload in flight is the window.
		if !group && len(w.sem) > 0 && !sleepCtx(ctx, w.n.cfg.BatchWindow) {
			return
		}
		for {
			if group && len(w.sem) > 0 && w.pending() < w.n.cfg.GroupCommitBytes {
				break // wait for the upload in flight, or for more bytes
			}
			select {
			case w.sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			u := w.nextBatch()
			if u == nil {
				<-w.sem
				break
			}
			w.n.wg.Add(1)
			go func() {
				defer w.n.wg.Done()
				defer func() {
					<-w.sem
					if group {
						select {
						case w.ended <- struct{}{}:
						default:
						}
					}
				}()
				w.upload(ctx, u)
			}()
		}
	}
}

// pending is the number of bytes queued for the next WAL object.
func (w *wal) pending() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mu.pendingBytes
}

// nextBatch takes up to MaxBatchBytes of pending entries and assigns them the
// next seq, or returns nil when nothing is pending.
func (w *wal) nextBatch() *walUpload {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.mu.pending) == 0 || w.mu.failed != nil {
		return nil
	}
	n, size := 0, 0
	for n < len(w.mu.pending) && (n == 0 || size+int(w.mu.pending[n].size) <= w.n.cfg.MaxBatchBytes) {
		size += int(w.mu.pending[n].size)
		n++
	}
	u := &walUpload{seq: w.mu.nextSeq, entries: w.mu.pending[:n:n], batched: time.Now()}
	w.mu.nextSeq++
	w.mu.pending = w.mu.pending[n:]
	w.mu.pendingBytes -= size
	obj := walObject{Node: w.n.cfg.Node, Epoch: w.n.cfg.NodeEpoch, Seq: u.seq, Entries: make([]walEntry, n)}
	for i, p := range u.entries {
		p.seq = u.seq
		obj.Entries[i] = p.e
	}
	u.data = encodeWAL(obj)
	w.mu.uploads[u.seq] = u
	return u
}

// upload writes one WAL object, retrying until it is durable, the WAL is
// fenced or the node closes. The first failure tells the appenders of this
// object and of everything after it that they are not acknowledged: nothing
// after a failed object can be acknowledged before it.
func (w *wal) upload(ctx context.Context, u *walUpload) {
	key := walKey(w.n.cfg.Node, w.n.cfg.NodeEpoch, u.seq)
	backoff := w.n.cfg.RetryBackoff
	for attempt := 0; ; attempt++ {
		var err error
		start := time.Now()
		if w.segs != nil {
			err = w.segs.append(ctx, u.seq, u.data)
		} else {
			err = putCreateOnly(ctx, w.n.cfg.Store, key, u.data)
		}
		if err == nil {
			w.n.cfg.WALMetrics.durable(len(u.entries), len(u.data), time.Since(start))
			break
		}
		w.n.cfg.WALMetrics.failures.Add(1)
		if errors.Is(err, errSealed) {
			// A node taking over fenced the WAL and will replay what it
			// read: this record and those before it may be in it.
			w.n.fenceAt(err, math.MaxUint64)
			return
		}
		if errors.Is(err, errContentDiffers) {
			// Someone else created our next WAL object: a node taking over
			// sealed this epoch's WAL.
			w.n.fenceAt(fmt.Errorf("WAL object %s was created by another node (sealed)", key), u.seq)
			return
		}
		if ctx.Err() != nil {
			return
		}
		if attempt == 0 {
			w.notifyFrom(u.seq, fmt.Errorf("%w: %v", ErrUnknownOutcome, err))
		}
		w.n.cfg.Logger.Warn("WAL upload failed; retrying", "key", key, "attempt", attempt+1, "err", err)
		if !sleepCtx(ctx, backoff) {
			return
		}
		backoff = min(2*backoff, 2*time.Second)
	}
	w.complete(u)
}

// complete marks u durable and acknowledges, in seq order, every upload that
// is now preceded only by durable ones.
func (w *wal) complete(u *walUpload) {
	w.ackMu.Lock()
	defer w.ackMu.Unlock()
	w.mu.Lock()
	u.durable = true
	var ready []*walUpload
	for {
		next, ok := w.mu.uploads[w.mu.durable]
		if !ok || !next.durable {
			break
		}
		ready = append(ready, next)
		delete(w.mu.uploads, w.mu.durable)
		w.mu.durable++
	}
	failed := w.mu.failed
	durable := w.mu.durable
	w.mu.Unlock()
	if failed != nil {
		return
	}
	for _, r := range ready {
		for _, p := range r.entries {
			p.s.ack(p)
			p.finish(nil)
		}
	}
	w.mu.Lock()
	w.mu.acked = durable
	w.mu.Unlock()
}

// stalled is how long the oldest WAL object not yet durable has waited
// for the store; 0 when every batched object is durable.
func (w *wal) stalled() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.failed != nil {
		return 0
	}
	u, ok := w.mu.uploads[w.mu.durable]
	if !ok || u.durable {
		return 0
	}
	return time.Since(u.batched)
}

// notifyFrom fails the appenders of upload seq and of everything after it.
func (w *wal) notifyFrom(seq uint64, err error) {
	w.mu.Lock()
	var victims []*pendingEntry
	for s, u := range w.mu.uploads {
		if s >= seq {
			victims = append(victims, u.entries...)
		}
	}
	victims = append(victims, w.mu.pending...)
	w.mu.Unlock()
	for _, p := range victims {
		p.finish(err)
	}
}

// fail makes the WAL refuse everything from now on and fails every waiter.
//
// Entries not yet in an upload were never written: they get err. Entries of
// an upload below sealSeq may be durable although they were not
// acknowledged: the object may have been written (or be written by an
// upload still under way), and a node taking over replays every WAL object
// below its seal. They get ErrUnknownOutcome (with err), so that no caller
// writes them again elsewhere. Objects from sealSeq on are past the seal and
// never replayed. sealSeq is math.MaxUint64 when no seal is known.
func (w *wal) fail(err error, sealSeq uint64) {
	w.mu.Lock()
	if w.mu.failed == nil {
		w.mu.failed = err
	}
	var lost, unknown []*pendingEntry
	for seq, u := range w.mu.uploads {
		if seq < sealSeq {
			unknown = append(unknown, u.entries...)
		} else {
			lost = append(lost, u.entries...)
		}
	}
	lost = append(lost, w.mu.pending...)
	w.mu.pending = nil
	close(w.mu.space)
	w.mu.space = make(chan struct{})
	w.mu.Unlock()
	unknownErr := fmt.Errorf("%w: %w", ErrUnknownOutcome, err)
	for _, p := range unknown {
		p.finish(unknownErr)
	}
	for _, p := range lost {
		p.finish(err)
	}
}

// ackedSeq is the first WAL seq whose entries are not all held by their
// streams yet.
func (w *wal) ackedSeq() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mu.acked
}

func (w *wal) shouldTrim(trim uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return trim > w.mu.lastTrim
}

func (w *wal) trimmed(trim uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if trim > w.mu.lastTrim {
		w.mu.lastTrim = trim
	}
}

// errContentDiffers: a create-only put found the key holding other bytes.
var errContentDiffers = errors.New("object exists with different content")

// putCreateOnly creates key with data. If the key exists with the same bytes
// (an earlier attempt whose response was lost), that is success.
func putCreateOnly(ctx context.Context, store objstore.Store, key string, data []byte) error {
	err := store.PutIfAbsent(ctx, key, data)
	if err == nil || !errors.Is(err, objstore.ErrExists) {
		return err
	}
	existing, gerr := store.Get(ctx, key)
	if gerr != nil {
		return fmt.Errorf("put %s: exists, and reading it back failed: %w", key, gerr)
	}
	if bytes.Equal(existing, data) {
		return nil
	}
	return fmt.Errorf("put %s: %w", key, errContentDiffers)
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
