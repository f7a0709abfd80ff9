package buckets

import (
	"errors"
	"fmt"
	"time"

	"github.com/minkdb/mink/buckets/s3stream"
	"github.com/minkdb/mink/catalog"
)

// A failover (of this node's earlier epoch, or of a dead node) that finds a
// corrupt WAL object leaves open every stream the object may hold
// acknowledged writes of (s3stream.WALCorruptError). Their buckets must not
// open without those writes: they stay unavailable, and every request says
// why (the object's key) at once instead of waiting for an open that cannot
// happen. The failover is tried again every unrecoverableRetry, so that a
// bucket opens by itself once the object is restored.

// unrecoverableRetry is how long a bucket whose failover found a corrupt
// WAL object waits before the failover is tried again (a variable for
// tests).
var unrecoverableRetry = 5 * time.Second

// recoveryFailure is the last failed failover of one bucket's stream.
type recoveryFailure struct {
	err *s3stream.WALCorruptError
	at  time.Time
}

// unrecoverableError is the error of a request to a bucket whose stream a
// failover left open (lost is the failover's error). It is ErrUnavailable
// and s3stream.ErrCorrupt: Retryable says no.
func unrecoverableError(id catalog.BucketID, lost error) error {
	return fmt.Errorf("bucket %d cannot be recovered: %w: %w", id, ErrUnavailable, lost)
}

// recentlyUnrecoverable reports whether bucket id's failover failed on a
// corrupt WAL object less than unrecoverableRetry ago.
func (m *Manager) recentlyUnrecoverable(id catalog.BucketID) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	f, ok := m.mu.unrecoverable[id]
	return ok && time.Since(f.at) < unrecoverableRetry
}

// noteUnrecoverable records the outcome of a failover run for bucket id of
// node's WAL at epoch (0: every earlier epoch of node, RecoverNode): the
// buckets of the streams that err (a *s3stream.WALCorruptError, possibly
// joined with others) left open become unrecoverable, and those the run
// covered and err does not name are no longer. Such failures are logged
// here, once per run. It returns the rest of err: nil when err held only
// such failures.
func (m *Manager) noteUnrecoverable(id catalog.BucketID, node catalog.NodeID, epoch uint64, err error) error {
	var lost []*s3stream.WALCorruptError
	rest := splitWALCorrupt(err, &lost)
	now := time.Now()
	m.mu.Lock()
	delete(m.mu.unrecoverable, id)
	for b, f := range m.mu.unrecoverable {
		if f.err.Node == node && (epoch == 0 || f.err.Epoch == epoch) {
			delete(m.mu.unrecoverable, b)
		}
	}
	for _, wc := range lost {
		for stream := range wc.Streams {
			m.mu.unrecoverable[catalog.BucketID(stream)] = recoveryFailure{err: wc, at: now}
		}
	}
	m.mu.Unlock()
	for _, wc := range lost {
		m.cfg.Logger.Error("buckets stay unavailable: a WAL object their failover needs is corrupt; restore it from a backup",
			"node", wc.Node, "node_epoch", wc.Epoch, "err", wc)
	}
	return rest
}

// splitWALCorrupt appends every *s3stream.WALCorruptError in err's tree
// (through joins and wraps) to lost and returns the other errors joined.
func splitWALCorrupt(err error, lost *[]*s3stream.WALCorruptError) error {
	var wc *s3stream.WALCorruptError
	switch e := err.(type) {
	case nil:
		return nil
	case interface{ Unwrap() []error }:
		var rest []error
		for _, inner := range e.Unwrap() {
			if r := splitWALCorrupt(inner, lost); r != nil {
				rest = append(rest, r)
			}
		}
		return errors.Join(rest...)
	}
	if errors.As(err, &wc) {
		*lost = append(*lost, wc)
		return nil
	}
	return err
}

// OpenError says why this node, which leads bucket id, does not serve it:
// a failover that found a corrupt WAL object, or the last failed open of a
// primary-key bucket. Nil when it serves it, or is just opening it.
func (m *Manager) OpenError(id catalog.BucketID) error {
	m.mu.Lock()
	lost := m.mu.unrecoverable[id].err
	_, open := m.mu.open[id]
	_, kvOpen := m.mu.kv[id]
	m.mu.Unlock()
	switch {
	case open || kvOpen:
		return nil
	case lost != nil:
		return unrecoverableError(id, lost)
	}
	if last, ok := m.kvOpenErrs.Load(id); ok {
		return last.(error)
	}
	return nil
}
