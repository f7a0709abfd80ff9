package s3stream

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/minkdb/mink/catalog"
)

// ackedEntry is an acknowledged entry not yet committed to a stream object.
type ackedEntry struct {
	Entry
	seq  uint64 // the WAL object holding it
	size int64  // bytes reserved for it in the node's memory budget
}

// Stream is a stream open on this node at one epoch.
type Stream struct {
	n     *Node
	id    catalog.StreamID
	epoch uint64

	// flushMu makes flushes of this stream one at a time.
	flushMu chanMutex

	mu struct {
		sync.Mutex
		// next is the offset the next Append gets. Offsets are dense and
		// never reused: an entry whose WAL upload failed keeps its offsets
		// and is retried until it is durable or the node is fenced.
		next uint64
		// ackEnd: offsets below it are durable and acknowledged.
		ackEnd uint64
		// committedEnd: offsets below it are in committed stream objects.
		committedEnd uint64
		// acked holds the entries in [committedEnd, ackEnd), in order.
		acked      []ackedEntry
		ackedBytes int64
		// err is set once the stream is fenced or closed.
		err     error
		closing bool
		// changed is closed and replaced on every acknowledgement and state
		// change, for Close to wait on.
		changed chan struct{}
	}
}

func newStream(n *Node, id catalog.StreamID, epoch, end uint64) *Stream {
	s := &Stream{n: n, id: id, epoch: epoch, flushMu: newChanMutex()}
	s.mu.next, s.mu.ackEnd, s.mu.committedEnd = end, end, end
	s.mu.changed = make(chan struct{})
	return s
}

// ID is the stream's id.
func (s *Stream) ID() catalog.StreamID { return s.id }

// Epoch is the epoch the stream is open at.
func (s *Stream) Epoch() uint64 { return s.epoch }

// End is the acknowledged end offset: every offset below it is durable.
func (s *Stream) End() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.ackEnd
}

// CommittedEnd is the end of the offsets committed to stream objects.
func (s *Stream) CommittedEnd() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.committedEnd
}

// Changed is closed at the next acknowledgement or state change of the
// stream; a reader waiting for new entries waits on it and looks again.
func (s *Stream) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.changed
}

// Err is the reason the stream stopped accepting appends, or nil.
func (s *Stream) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.err
}

// Append appends an entry of count records and returns its first offset once
// it is durable. The stream keeps payload; the caller must not modify it.
//
// An error means the entry was not acknowledged. With ErrUnknownOutcome or a
// context error it may still become durable (exactly once): the WAL upload
// holding it may be retried successfully, or, when the node is fenced, the
// object may be below the seal that the node taking over replays up to.
// With ErrFenced alone (or ErrClosed alone) it will not.
func (s *Stream) Append(ctx context.Context, payload []byte, count uint32) (uint64, error) {
	p, err := s.AppendAsync(ctx, payload, count)
	if err != nil {
		return 0, err
	}
	return p.Wait(ctx)
}

// PendingAppend is an append queued by AppendAsync.
type PendingAppend struct {
	s    *Stream
	base uint64
	done chan error
}

// Offset is the offset the entry got. It is the entry's offset for good
// only once Wait returns nil.
func (p *PendingAppend) Offset() uint64 { return p.base }

// Wait waits until the entry is durable (nil) or will not be acknowledged;
// the errors are those of Append.
func (p *PendingAppend) Wait(ctx context.Context) (uint64, error) {
	select {
	case err := <-p.done:
		if err != nil {
			return 0, fmt.Errorf("append to stream %d: %w", p.s.id, err)
		}
		return p.base, nil
	case <-ctx.Done():
		return 0, fmt.Errorf("append to stream %d: %w (%w)", p.s.id, ErrUnknownOutcome, ctx.Err())
	}
}

// AppendAsync queues an entry and returns without waiting for it to become
// durable, so that a writer can have many entries in flight (they are
// grouped into the same WAL objects). Entries queued by one goroutine get
// increasing offsets in the order of the calls. It waits only while the
// node's memory budget is full.
func (s *Stream) AppendAsync(ctx context.Context, payload []byte, count uint32) (*PendingAppend, error) {
	if count == 0 {
		return nil, fmt.Errorf("s3stream: append to stream %d: count must be at least 1", s.id)
	}
	size := int64(len(payload) + walEntryHdr)
	if err := s.n.wal.reserve(ctx, size); err != nil {
		return nil, fmt.Errorf("append to stream %d: %w", s.id, err)
	}
	s.mu.Lock()
	if err := s.usableLocked(); err != nil {
		s.mu.Unlock()
		s.n.wal.release(size)
		return nil, err
	}
	base := s.mu.next
	p := &pendingEntry{
		s:    s,
		e:    walEntry{Stream: s.id, StreamEpoch: s.epoch, Entry: Entry{Offset: base, Count: count, Payload: payload}},
		size: size,
		done: make(chan error, 1),
	}
	if err := s.n.wal.add(p); err != nil {
		s.mu.Unlock()
		s.n.wal.release(size)
		return nil, fmt.Errorf("append to stream %d: %w", s.id, err)
	}
	s.mu.next += uint64(count)
	s.mu.Unlock()
	return &PendingAppend{s: s, base: base, done: p.done}, nil
}

func (s *Stream) usableLocked() error {
	if s.mu.err != nil {
		return s.mu.err
	}
	if s.mu.closing {
		return fmt.Errorf("stream %d: %w", s.id, ErrClosed)
	}
	return nil
}

// ack records a durable entry. Entries arrive in offset order because the
// WAL acknowledges objects in seq order and a stream's entries are queued in
// offset order.
func (s *Stream) ack(p *pendingEntry) {
	s.mu.Lock()
	if p.e.Offset != s.mu.ackEnd {
		panic(fmt.Sprintf("s3stream: stream %d acknowledged offset %d, want %d: acknowledgements out of order", s.id, p.e.Offset, s.mu.ackEnd))
	}
	s.mu.acked = append(s.mu.acked, ackedEntry{Entry: p.e.Entry, seq: p.seq, size: p.size})
	s.mu.ackEnd = p.e.End()
	s.mu.ackedBytes += p.size
	big := s.mu.ackedBytes >= s.n.cfg.FlushBytes
	s.broadcastLocked()
	s.mu.Unlock()
	if big {
		s.n.kickFlush()
	}
}

func (s *Stream) broadcastLocked() {
	close(s.mu.changed)
	s.mu.changed = make(chan struct{})
}

func (s *Stream) setFenced(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.err == nil {
		s.mu.err = err
	}
	s.broadcastLocked()
}

// firstUncommittedSeq is the WAL seq of the oldest acknowledged entry not yet
// committed to a stream object.
func (s *Stream) firstUncommittedSeq() (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.mu.acked) == 0 {
		return 0, false
	}
	return s.mu.acked[0].seq, true
}

// Flush writes the acknowledged entries not yet committed as stream objects
// and commits them (CommitStreamObjects at the stream's epoch). If the commit
// is rejected because another node now owns the stream, the stream is
// fenced.
func (s *Stream) Flush(ctx context.Context) error {
	if err := s.flushMu.LockCtx(ctx); err != nil {
		return err
	}
	defer s.flushMu.Unlock()

	s.mu.Lock()
	if s.mu.err != nil {
		err := s.mu.err
		s.mu.Unlock()
		return err
	}
	entries := make([]Entry, len(s.mu.acked))
	for i, a := range s.mu.acked {
		entries[i] = a.Entry
	}
	start := s.mu.committedEnd
	s.mu.Unlock()
	if len(entries) == 0 {
		return nil
	}

	objects, err := writeStreamObjects(ctx, s.n.cfg.Store, s.id, s.epoch, start, entries, s.n.cfg.MaxObjectBytes)
	if err != nil {
		return fmt.Errorf("flush stream %d: %w", s.id, err)
	}
	_, err = s.n.cfg.Meta.Propose(ctx, catalog.CommitStreamObjects{Stream: s.id, Epoch: s.epoch, Objects: objects})
	if err != nil {
		if isOwnershipLoss(err) {
			s.setFenced(fmt.Errorf("%w: stream %d: commit at epoch %d rejected: %v", ErrFenced, s.id, s.epoch, err))
		}
		return fmt.Errorf("flush stream %d: %w", s.id, err)
	}
	end := objects[len(objects)-1].End

	s.mu.Lock()
	var freed int64
	n := 0
	for n < len(s.mu.acked) && s.mu.acked[n].End() <= end {
		freed += s.mu.acked[n].size
		n++
	}
	s.mu.acked = append([]ackedEntry(nil), s.mu.acked[n:]...)
	s.mu.ackedBytes -= freed
	s.mu.committedEnd = end
	s.broadcastLocked()
	s.mu.Unlock()
	s.n.wal.release(freed)
	return nil
}

// isOwnershipLoss reports whether a rejected commit means that this writer no
// longer owns the stream.
func isOwnershipLoss(err error) bool {
	return errors.Is(err, catalog.ErrFenced) || errors.Is(err, catalog.ErrStaleEpoch) ||
		errors.Is(err, catalog.ErrGap) || errors.Is(err, catalog.ErrHeldBy)
}

// Read returns the entries overlapping offsets [from, to), in order. Offsets
// at or beyond the acknowledged end are not returned: a reader never sees an
// entry that could still be lost.
func (s *Stream) Read(ctx context.Context, from, to uint64) ([]Entry, error) {
	s.mu.Lock()
	if s.mu.err != nil && !errors.Is(s.mu.err, ErrClosed) {
		err := s.mu.err
		s.mu.Unlock()
		return nil, err
	}
	to = min(to, s.mu.ackEnd)
	committed := s.mu.committedEnd
	var mem []Entry
	for _, a := range s.mu.acked {
		if a.End() > from && a.Offset < to {
			mem = append(mem, a.Entry)
		}
	}
	s.mu.Unlock()
	if from >= to {
		return nil, nil
	}
	var out []Entry
	if from < committed {
		var err error
		if out, err = s.n.reader.Read(ctx, s.id, from, min(to, committed)); err != nil {
			return nil, err
		}
	}
	return append(out, mem...), nil
}

// retiredGone reports whether err, the rejection of this stream's
// CloseStream, means the stream is no longer in the view: it was retired
// (its bucket dropped) and a first close, whose response was lost, removed
// it. Closed is what the caller wanted.
func (s *Stream) retiredGone(err error) bool {
	if !errors.Is(err, catalog.ErrNotFound) {
		return false
	}
	gone := false
	s.n.cfg.Meta.Read(func(v *catalog.View) {
		_, inView := v.Streams[s.id]
		gone = !inView
	})
	return gone
}

// Close hands the stream over cleanly: it stops new appends, waits until
// everything appended is acknowledged, commits it to stream objects and
// proposes CloseStream. On error the stream stays open at its epoch and Close
// may be retried.
func (s *Stream) Close(ctx context.Context) error {
	s.mu.Lock()
	s.mu.closing = true
	s.mu.Unlock()
	for {
		s.mu.Lock()
		if s.mu.err != nil {
			err := s.mu.err
			s.mu.Unlock()
			return fmt.Errorf("close stream %d: %w", s.id, err)
		}
		drained := s.mu.ackEnd == s.mu.next
		changed := s.mu.changed
		s.mu.Unlock()
		if drained {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("close stream %d: waiting for appends to become durable: %w", s.id, ctx.Err())
		case <-changed:
		}
	}
	if err := s.Flush(ctx); err != nil {
		return fmt.Errorf("close stream %d: %w", s.id, err)
	}
	if _, err := s.n.cfg.Meta.Propose(ctx, catalog.CloseStream{Stream: s.id, Epoch: s.epoch}); err != nil && !s.retiredGone(err) {
		return fmt.Errorf("close stream %d: %w", s.id, err)
	}
	s.setFenced(fmt.Errorf("stream %d: %w", s.id, ErrClosed))
	s.n.forget(s)
	return nil
}

// chanMutex is a mutex whose Lock can give up when a context is done.
type chanMutex struct{ ch chan struct{} }

func newChanMutex() chanMutex { return chanMutex{ch: make(chan struct{}, 1)} }

func (m chanMutex) Lock()   { m.ch <- struct{}{} }
func (m chanMutex) Unlock() { <-m.ch }

func (m chanMutex) LockCtx(ctx context.Context) error {
	select {
	case m.ch <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
