package metalog

import (
	"context"
	"fmt"
	"slices"
	"sync"
)

// MemLog is an in-memory Log for tests. It is safe for concurrent use, and it
// can inject faults into Append (SetAppendFault), including the one that
// matters most: the entry is appended but the caller is told it failed.
//
// Like etcdlog.Log, SaveSnapshot truncates the log up to the previous snapshot's
// index, so a node lagging by less than one snapshot interval keeps tailing.
type MemLog struct {
	mu struct {
		sync.Mutex
		// entries[i] holds index truncated+1+i.
		entries   [][]byte
		truncated uint64
		snapIndex uint64
		snapData  []byte
		// changed is closed and replaced on every append and on Close.
		changed chan struct{}
		closed  bool
		fault   AppendFault
		// saves counts snapshots actually stored (not skipped).
		saves int
	}
}

// AppendFault decides the fate of one Append or AppendBatch whose first
// entry would get index first: commit says whether the entries are appended,
// err is what the call returns. (true, err) is the ambiguous "committed but
// the response was lost" case; wrap ErrNotAppended in err to make a failure
// definite.
type AppendFault func(first uint64, entries [][]byte) (commit bool, err error)

// NewMemLog returns an empty log.
func NewMemLog() *MemLog {
	l := &MemLog{}
	l.mu.changed = make(chan struct{})
	return l
}

// SetAppendFault installs f (nil removes it). f runs under the log's lock and
// must not call the log.
func (l *MemLog) SetAppendFault(f AppendFault) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.fault = f
}

// Append implements Log.
func (l *MemLog) Append(ctx context.Context, data []byte) (uint64, error) {
	return l.AppendBatch(ctx, [][]byte{data})
}

// AppendBatch implements Log.
func (l *MemLog) AppendBatch(ctx context.Context, entries [][]byte) (uint64, error) {
	return l.appendBatch(ctx, nil, entries)
}

// AppendGuarded implements GuardedLog. The guard is a MemGuard, evaluated
// under the log's lock before the fault hook.
func (l *MemLog) AppendGuarded(ctx context.Context, guard Guard, data []byte) (uint64, error) {
	if holds, ok := guard.cond.(memCondition); !ok || holds == nil {
		return 0, fmt.Errorf("memlog append: %v is not a MemGuard: %w", guard, ErrNotAppended)
	}
	return l.appendBatch(ctx, &guard, [][]byte{data})
}

func (l *MemLog) appendBatch(ctx context.Context, guard *Guard, entries [][]byte) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("memlog append: %w: %w", ErrNotAppended, err)
	}
	if len(entries) == 0 {
		return 0, fmt.Errorf("memlog append: no entries: %w", ErrNotAppended)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.closed {
		return 0, fmt.Errorf("memlog append: %w: %w", ErrNotAppended, ErrClosed)
	}
	first := l.headLocked() + 1
	if guard != nil && !guard.cond.(memCondition)() {
		return 0, fmt.Errorf("memlog append at %d: %v: %w: %w", first, guard, ErrGuardFailed, ErrNotAppended)
	}
	commit, err := true, error(nil)
	if l.mu.fault != nil {
		commit, err = l.mu.fault(first, entries)
	}
	if commit {
		for _, e := range entries {
			l.mu.entries = append(l.mu.entries, slices.Clone(e))
		}
		close(l.mu.changed)
		l.mu.changed = make(chan struct{})
	}
	if err != nil {
		return 0, fmt.Errorf("memlog append at %d: %w", first, err)
	}
	return first, nil
}

// REQUIRES: l.mu held.
func (l *MemLog) headLocked() uint64 {
	return l.mu.truncated + uint64(len(l.mu.entries))
}

// Head implements Log.
func (l *MemLog) Head(ctx context.Context) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.closed {
		return 0, ErrClosed
	}
	return l.headLocked(), nil
}

// Tail implements Log. fn must not modify data.
func (l *MemLog) Tail(ctx context.Context, from uint64, fn func(index uint64, data []byte) error) error {
	if from == 0 {
		from = 1
	}
	for {
		l.mu.Lock()
		if l.mu.closed {
			l.mu.Unlock()
			return ErrClosed
		}
		if from <= l.mu.truncated {
			truncated := l.mu.truncated
			l.mu.Unlock()
			return fmt.Errorf("memlog tail from %d (truncated through %d): %w", from, truncated, ErrTruncated)
		}
		if from <= l.headLocked() {
			data := l.mu.entries[from-l.mu.truncated-1]
			l.mu.Unlock()
			if err := fn(from, data); err != nil {
				return err
			}
			from++
			continue
		}
		changed := l.mu.changed
		l.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// LoadSnapshot implements Log.
func (l *MemLog) LoadSnapshot(ctx context.Context) (uint64, []byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.closed {
		return 0, nil, ErrClosed
	}
	return l.mu.snapIndex, slices.Clone(l.mu.snapData), nil
}

// SaveSnapshot implements Log. It truncates the entries at or below the
// previous snapshot's index.
func (l *MemLog) SaveSnapshot(ctx context.Context, index uint64, data []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.closed {
		return ErrClosed
	}
	if index <= l.mu.snapIndex {
		return nil
	}
	if head := l.headLocked(); index > head {
		return fmt.Errorf("memlog save snapshot at %d: beyond the head %d", index, head)
	}
	if prev := l.mu.snapIndex; prev > l.mu.truncated {
		l.mu.entries = slices.Clone(l.mu.entries[prev-l.mu.truncated:])
		l.mu.truncated = prev
	}
	l.mu.snapIndex, l.mu.snapData = index, slices.Clone(data)
	l.mu.saves++
	return nil
}

// Truncated returns the index through which entries have been removed.
func (l *MemLog) Truncated() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.truncated
}

// SnapshotSaves returns how many snapshots were stored (skipped ones are not
// counted).
func (l *MemLog) SnapshotSaves() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.saves
}

// Close implements Log. Blocked Tails return ErrClosed.
func (l *MemLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.mu.closed {
		l.mu.closed = true
		close(l.mu.changed)
	}
	return nil
}
