package metalog

import (
	"context"
	"errors"
	"sync"

	"github.com/minkdb/mink/catalog"
)

// Election is the coordinator lease: at most one node at a time holds it and
// runs the coordinator, the tiering worker and the lifecycle loops (DESIGN.md
// §8). Holding the lease is not what fences a stale coordinator: the
// coordinator epoch it registers in the log is (RegisterCoordinator).
// Implementations: etcdlog.Election, MemElection.
type Election interface {
	// Campaign blocks until node holds the lease, or ctx ends.
	Campaign(ctx context.Context, node catalog.NodeID) (*Leadership, error)
	// Leader returns the current holder, if any (for forwarding coordinator
	// actions and for status).
	Leader(ctx context.Context) (catalog.NodeID, bool, error)
}

// Leadership is a held coordinator lease. Safe for concurrent use.
type Leadership struct {
	node catalog.NodeID
	// done is closed when the lease is lost or resigned.
	done   <-chan struct{}
	resign func(ctx context.Context) error
	guard  Guard

	resignOnce sync.Once
	resignErr  error
}

// NewLeadership returns the leadership of node, for Election
// implementations: done is closed when the lease is lost or resigned, guard
// holds while the lease does, and resign gives the lease up and waits for the
// goroutine that closes done. Resign calls resign once.
func NewLeadership(node catalog.NodeID, done <-chan struct{}, guard Guard, resign func(ctx context.Context) error) *Leadership {
	return &Leadership{node: node, done: done, guard: guard, resign: resign}
}

// Node is the node holding the lease.
func (l *Leadership) Node() catalog.NodeID { return l.node }

// Done is closed when the lease is lost (its session expired: the process
// was paused or cut off from etcd past the TTL; or its key was deleted) or
// resigned. Another node may hold the lease from then on.
func (l *Leadership) Done() <-chan struct{} { return l.done }

// Guard is the condition "this leadership still holds the lease", for a
// proposal that must not be applied after the lease is lost
// (Catalog.ProposeGuarded): the node registers as coordinator with it, so a
// node paused between Campaign and its RegisterCoordinator cannot register
// over the node that holds the lease by then. For an etcdlog.Election it is the
// campaign key still existing with the create revision it won with (the key
// goes with the session's lease, and a new key never gets an old revision),
// checked by etcd in the transaction that appends the record.
func (l *Leadership) Guard() Guard { return l.guard }

// Resign gives the lease up now, so that another campaigner takes it at once
// instead of after the TTL. It waits for the leadership's goroutine.
func (l *Leadership) Resign(ctx context.Context) error {
	l.resignOnce.Do(func() { l.resignErr = l.resign(ctx) })
	return l.resignErr
}

// Guard is a condition that a guarded append (GuardedLog.AppendGuarded,
// Catalog.ProposeGuarded) checks atomically with the append: the entry is
// appended only if the condition holds at the moment it is appended. Make one
// with Leadership.Guard, MemGuard or etcdlog.NewGuard. The zero Guard holds
// nothing: an append guarded by it is refused.
type Guard struct {
	// desc says what the guard checks, for errors.
	desc string
	// cond is the condition in the form one kind of log evaluates (MemLog:
	// memCondition; etcdlog.Log: its comparisons). A log refuses a guard
	// whose condition is not of its kind.
	cond any
}

// NewGuard returns a guard with a condition for one kind of GuardedLog, for
// implementations of GuardedLog outside this package (etcdlog.NewGuard). desc
// names the condition in errors.
func NewGuard(desc string, cond any) Guard {
	return Guard{desc: desc, cond: cond}
}

// Condition returns the condition NewGuard was given, for the GuardedLog that
// evaluates it; nil for the zero Guard.
func (g Guard) Condition() any { return g.cond }

// memCondition is the condition of a MemGuard.
type memCondition func() bool

// MemGuard returns a guard for MemLog: holds is called under the log's lock
// at the append and must not call the log.
func MemGuard(desc string, holds func() bool) Guard {
	return Guard{desc: desc, cond: memCondition(holds)}
}

// String implements fmt.Stringer.
func (g Guard) String() string {
	if g.desc == "" {
		return "empty guard"
	}
	return g.desc
}

// ErrGuardFailed marks a guarded append (and so a guarded proposal) refused
// because its Guard did not hold: for Leadership.Guard, the coordinator lease
// was lost. Such errors also wrap ErrNotAppended: the entry is not in the log.
var ErrGuardFailed = errors.New("metalog: guard no longer holds")
