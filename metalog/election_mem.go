package metalog

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/minkdb/mink/catalog"
)

// MemElection is an in-memory Election for tests: campaigners are served in
// arrival order, and Expire takes the lease from its holder as an expired
// session would. It starts no goroutines; safe for concurrent use.
type MemElection struct {
	mu struct {
		sync.Mutex
		leader *memCampaign
		queue  []*memCampaign
	}
}

type memCampaign struct {
	node    catalog.NodeID
	elected chan struct{}
	done    chan struct{}
}

// NewMemElection returns an election with no holder.
func NewMemElection() *MemElection { return &MemElection{} }

// Campaign implements Election.
func (e *MemElection) Campaign(ctx context.Context, node catalog.NodeID) (*Leadership, error) {
	c := &memCampaign{node: node, elected: make(chan struct{}), done: make(chan struct{})}
	e.mu.Lock()
	if e.mu.leader == nil {
		e.mu.leader = c
		close(c.elected)
	} else {
		e.mu.queue = append(e.mu.queue, c)
	}
	e.mu.Unlock()
	select {
	case <-c.elected:
	case <-ctx.Done():
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.mu.leader == c {
			e.endLocked(c)
		} else {
			e.mu.queue = slices.DeleteFunc(e.mu.queue, func(q *memCampaign) bool { return q == c })
		}
		return nil, ctx.Err()
	}
	guard := MemGuard(fmt.Sprintf("coordinator lease of node %d", node), func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.mu.leader == c
	})
	return NewLeadership(node, c.done, guard, func(context.Context) error {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.endLocked(c)
		return nil
	}), nil
}

// Expire ends the current holder's lease (its Done closes) and hands the
// lease to the next campaigner. It reports whether there was a holder.
func (e *MemElection) Expire() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.mu.leader == nil {
		return false
	}
	e.endLocked(e.mu.leader)
	return true
}

// REQUIRES: e.mu held.
func (e *MemElection) endLocked(c *memCampaign) {
	if e.mu.leader != c {
		return
	}
	close(c.done)
	e.mu.leader = nil
	if len(e.mu.queue) > 0 {
		e.mu.leader, e.mu.queue = e.mu.queue[0], e.mu.queue[1:]
		close(e.mu.leader.elected)
	}
}

// Leader implements Election.
func (e *MemElection) Leader(ctx context.Context) (catalog.NodeID, bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.mu.leader == nil {
		return 0, false, nil
	}
	return e.mu.leader.node, true, nil
}
