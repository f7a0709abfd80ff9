package metalog

import (
	"context"
	"errors"
	"maps"
	"sync"
	"time"

	"github.com/minkdb/mink/catalog"
)

// MemLiveness is an in-memory Liveness for tests. Leases never expire by
// themselves: the test expires a node with Expire, which does what an
// expired etcd lease does (the node leaves the live set, its session's Lost
// closes). It starts no goroutines; safe for concurrent use.
type MemLiveness struct {
	mu struct {
		sync.Mutex
		live   map[catalog.NodeID]*memLease
		caches map[*LiveCache]struct{}
	}
}

// memLease is one session's hold on a node's key.
type memLease struct {
	info LiveInfo
	lost chan struct{}
	// ended is set once lost is closed. REQUIRES: MemLiveness.mu held.
	ended bool
}

// NewMemLiveness returns an empty live set.
func NewMemLiveness() *MemLiveness {
	l := &MemLiveness{}
	l.mu.live = make(map[catalog.NodeID]*memLease)
	l.mu.caches = make(map[*LiveCache]struct{})
	return l
}

// KeepAlive implements Liveness. ttl is ignored (see Expire).
func (l *MemLiveness) KeepAlive(ctx context.Context, node catalog.NodeID, info LiveInfo, ttl time.Duration) (*LivenessSession, error) {
	if node == 0 {
		return nil, errors.New("liveness: node ids start at 1")
	}
	info.Node = node
	lease := &memLease{info: info, lost: make(chan struct{})}
	l.mu.Lock()
	// As in etcd, a new lease takes the key over; the old session stays
	// alive but no longer holds the key.
	l.mu.live[node] = lease
	l.notifyLocked()
	l.mu.Unlock()
	return NewLivenessSession(node, LivenessLease{
		Lost: lease.lost,
		Update: func(ctx context.Context, info LiveInfo) error {
			l.mu.Lock()
			defer l.mu.Unlock()
			if lease.ended || l.mu.live[node] != lease {
				return errors.New("liveness: update: the lease no longer holds the key")
			}
			lease.info = info
			l.notifyLocked()
			return nil
		},
		Revoke: func(ctx context.Context) error {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.endLocked(node, lease)
			return nil
		},
		CloseTimeout: time.Second,
		CloseContext: context.WithoutCancel(ctx),
	}), nil
}

// Expire ends node's current lease as if its TTL had passed without renewal:
// the node leaves the live set and its session's Lost is closed. It reports
// whether the node was live.
func (l *MemLiveness) Expire(node catalog.NodeID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	lease, ok := l.mu.live[node]
	if ok {
		l.endLocked(node, lease)
	}
	return ok
}

// REQUIRES: l.mu held.
func (l *MemLiveness) endLocked(node catalog.NodeID, lease *memLease) {
	if lease.ended {
		return
	}
	lease.ended = true
	close(lease.lost)
	if l.mu.live[node] == lease {
		delete(l.mu.live, node)
		l.notifyLocked()
	}
}

// REQUIRES: l.mu held.
func (l *MemLiveness) nodesLocked() map[catalog.NodeID]LiveInfo {
	nodes := make(map[catalog.NodeID]LiveInfo, len(l.mu.live))
	for node, lease := range l.mu.live {
		nodes[node] = lease.info
	}
	return nodes
}

// REQUIRES: l.mu held.
func (l *MemLiveness) notifyLocked() {
	nodes := l.nodesLocked()
	for c := range l.mu.caches {
		c.Replace(maps.Clone(nodes))
	}
}

// LiveNodes implements Liveness.
func (l *MemLiveness) LiveNodes(ctx context.Context) (map[catalog.NodeID]LiveInfo, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.nodesLocked(), nil
}

// Watch implements Liveness. The cache is updated synchronously by every
// change.
func (l *MemLiveness) Watch(ctx context.Context) (*LiveCache, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var c *LiveCache
	c = NewLiveCache(l.nodesLocked(), func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(l.mu.caches, c)
	})
	l.mu.caches[c] = struct{}{}
	return c, nil
}
