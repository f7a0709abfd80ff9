package catalog

import (
	"context"
	"sync"
)

// Election is the coordinator lease: at most one node at a time holds it and
// runs the coordinator, the tiering worker and the lifecycle loops (DESIGN.md
// §8). Holding the lease is not what fences a stale coordinator: the
// coordinator epoch it registers in the log is (RegisterCoordinator).
// Implementations: EtcdElection, MemElection.
type Election interface {
	// Campaign blocks until node holds the lease, or ctx ends.
	Campaign(ctx context.Context, node NodeID) (*Leadership, error)
	// Leader returns the current holder, if any (for forwarding coordinator
	// actions and for status).
	Leader(ctx context.Context) (NodeID, bool, error)
}

// Leadership is a held coordinator lease. Safe for concurrent use.
type Leadership struct {
	node NodeID
	// done is closed when the lease is lost or resigned.
	done   <-chan struct{}
	resign func(ctx context.Context) error

	resignOnce sync.Once
	resignErr  error
}

// Node is the node holding the lease.
func (l *Leadership) Node() NodeID { return l.node }

// Done is closed when the lease is lost (its session expired: the process
// was paused or cut off from etcd past the TTL; or its key was deleted) or
// resigned. Another node may hold the lease from then on.
func (l *Leadership) Done() <-chan struct{} { return l.done }

// Resign gives the lease up now, so that another campaigner takes it at once
// instead of after the TTL. It waits for the leadership's goroutine.
func (l *Leadership) Resign(ctx context.Context) error {
	l.resignOnce.Do(func() { l.resignErr = l.resign(ctx) })
	return l.resignErr
}
