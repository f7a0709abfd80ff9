package metalog

import (
	"context"
	"errors"
)

// Log is the storage of the metadata log: a dense, totally ordered sequence of
// opaque entries, plus one snapshot. It knows nothing about records; the
// Catalog driver encodes records into entries and views into snapshots.
//
// Implementations: etcdlog.Log (production), MemLog (tests, with fault injection).
// All methods are safe to call concurrently.
type Log interface {
	// Append adds data at the end of the log and returns its index. Indexes
	// are 1-based and dense: the n-th entry appended anywhere gets index n.
	//
	// An error means the outcome is unknown (the entry may have been appended
	// anyway: a timeout, a lost response) unless it wraps ErrNotAppended.
	// Append never appends data twice on its own, and when it returns an
	// error while ctx is still live, no attempt of it is left in flight: the
	// entry is in the log already or never will be through this call. Callers
	// that retry after an ambiguous error must search the log for the entry
	// before appending it again (the Catalog does this with proposal ids).
	Append(ctx context.Context, data []byte) (index uint64, err error)

	// AppendBatch appends entries as one atomic, contiguous run and returns
	// the index of the first: all of them are appended or none is. The error
	// contract is Append's, for the batch as a whole. The Catalog uses it to
	// group concurrent proposals into one round trip; it never passes more
	// than MaxAppendEntries entries or MaxAppendBytes bytes.
	AppendBatch(ctx context.Context, entries [][]byte) (first uint64, err error)

	// Head returns the index of the last appended entry (0 for an empty log).
	// It is linearizable: every Append that returned before Head was called is
	// at or below the returned index.
	Head(ctx context.Context) (uint64, error)

	// Tail calls fn for every entry with index >= from, in order, then keeps
	// waiting for new ones until ctx is done or fn returns an error, which Tail
	// returns. If entry from has been truncated it returns ErrTruncated (the
	// caller reloads the snapshot and tails from after it).
	Tail(ctx context.Context, from uint64, fn func(index uint64, data []byte) error) error

	// LoadSnapshot returns the stored snapshot, or (0, nil, nil) when none.
	LoadSnapshot(ctx context.Context) (index uint64, data []byte, err error)

	// SaveSnapshot stores data as the snapshot at index. It does nothing if
	// a snapshot at index or above is stored already, so every node may call
	// it. Afterwards entries at or below index may be truncated (etcdlog.Log and
	// MemLog keep one snapshot interval: they truncate up to the previous
	// snapshot's index).
	SaveSnapshot(ctx context.Context, index uint64, data []byte) error

	// Close releases the log's resources. It does not close a client passed
	// in by the caller.
	Close() error
}

// GuardedLog is a Log that can append an entry on a condition checked in
// the same atomic step (etcdlog.Log: the same transaction; MemLog: under its
// lock). Catalog.ProposeGuarded needs it.
type GuardedLog interface {
	Log
	// AppendGuarded is Append, except that data is appended only if guard
	// holds when it is appended. When guard does not hold the error wraps
	// ErrGuardFailed and ErrNotAppended. A guard that is not for this kind of
	// log (an etcdlog guard given to MemLog, the zero Guard) is refused with
	// ErrNotAppended. A guard must stay false once it is false (a lost lease
	// does not come back), so that an attempt left in flight by an ambiguous
	// failure cannot commit after the guard has been seen false.
	AppendGuarded(ctx context.Context, guard Guard, data []byte) (index uint64, err error)
}

// Limits of one AppendBatch call made by the Catalog. They keep an append
// within one etcd request (etcd's defaults: --max-request-bytes 1.5 MiB,
// --max-txn-ops 128).
const (
	MaxAppendEntries = 64
	MaxAppendBytes   = 1 << 20
)

var (
	// ErrTruncated is returned by Tail when the requested entry has been
	// removed after a snapshot. The caller reloads the snapshot.
	ErrTruncated = errors.New("metalog: log entry truncated")
	// ErrNotAppended marks an Append error after which the entry is known
	// not to be in the log (for example: too large, log closed).
	ErrNotAppended = errors.New("metalog: entry not appended")
	// ErrClosed is returned by a closed Log or Catalog.
	ErrClosed = errors.New("metalog: closed")
	// ErrUnknownOutcome is returned by Propose when the record may or may not
	// have been applied and the outcome cannot be learnt (the context ended
	// while an append was unresolved, or the node skipped the record by
	// loading a newer snapshot). The caller must re-read the view to decide.
	ErrUnknownOutcome = errors.New("metalog: proposal outcome unknown")
)
