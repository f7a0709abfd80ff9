package metalog

import (
	"context"
	"maps"
	"sync"
	"time"

	"github.com/minkdb/mink/catalog"
)

// DefaultLeaseTTL is the default liveness lease TTL (lease_ttl): a node that
// stops renewing its lease is no longer live after this long.
const DefaultLeaseTTL = 30 * time.Second

// Liveness is node liveness. It is not in the metadata log: each node holds
// a lease on a key of its own, and the live nodes are the nodes whose keys
// exist. Implementations: etcdlog.Liveness, MemLiveness.
type Liveness interface {
	// KeepAlive makes node live, publishing info, until the session is
	// revoked or its lease is lost. ttl <= 0 means DefaultLeaseTTL.
	KeepAlive(ctx context.Context, node catalog.NodeID, info LiveInfo, ttl time.Duration) (*LivenessSession, error)
	// LiveNodes reads the live nodes.
	LiveNodes(ctx context.Context) (map[catalog.NodeID]LiveInfo, error)
	// Watch returns a cache of the live nodes kept current by a watch, for
	// callers that look often (the coordinator, every tick). Close it.
	Watch(ctx context.Context) (*LiveCache, error)
}

// LiveInfo is what a live node publishes: its node epoch (from RegisterNode)
// and its advertised addresses.
type LiveInfo struct {
	Node  catalog.NodeID `json:"node"`
	Epoch uint64         `json:"epoch"`
	Addrs catalog.Addrs  `json:"addrs"`
}

// LivenessSession is one node's hold on its liveness key. It is safe for
// concurrent use.
type LivenessSession struct {
	node  catalog.NodeID
	lease LivenessLease
}

// LivenessLease is what a Liveness implementation gives a LivenessSession:
// the lease behind it.
type LivenessLease struct {
	// Lost is closed when the node stops being live through this lease.
	Lost <-chan struct{}
	// Held reports whether the lease surely still holds: other nodes
	// cannot have seen it expire. Nil: until Lost is closed.
	Held func() bool
	// Update publishes info under the lease.
	Update func(ctx context.Context, info LiveInfo) error
	// Revoke ends the lease now; it is safe to call more than once.
	Revoke func(ctx context.Context) error
	// CloseContext is the context Close revokes under (the client's), and
	// CloseTimeout bounds Close's revoke.
	CloseContext context.Context
	CloseTimeout time.Duration
}

// NewLivenessSession returns the session of node on lease, for Liveness
// implementations.
func NewLivenessSession(node catalog.NodeID, lease LivenessLease) *LivenessSession {
	return &LivenessSession{node: node, lease: lease}
}

// Node is the node this session keeps live.
func (s *LivenessSession) Node() catalog.NodeID { return s.node }

// Lost is closed when the node is no longer live through this session:
// etcd answered that the lease expired (the process was paused or cut off
// from etcd for longer than the TTL, and other nodes may have declared it
// dead), it was revoked, or the session was closed. While etcd does not
// answer at all (a partition, quorum loss) the lease is in doubt: Held is
// false but Lost stays open, because the lease may well survive (etcd's
// next leader extends every lease). A lost session is never live again;
// the owner registers the node again (new node epoch) and starts a new
// session.
func (s *LivenessSession) Lost() <-chan struct{} { return s.lease.Lost }

// Held reports whether the lease surely still holds, so that no other node
// can have declared this one dead and taken its buckets over. It turns
// false the moment the lease's renewals stop being sure, which is no later
// than the lease could expire at etcd, and true again when a renewal is
// granted. A bucket leader acknowledges a write only while it holds, and
// serves a read while it does not only with a proof that no takeover has
// started (buckets.Manager, "in doubt").
func (s *LivenessSession) Held() bool {
	if s.lease.Held != nil {
		return s.lease.Held()
	}
	select {
	case <-s.lease.Lost:
		return false
	default:
		return true
	}
}

// Update publishes new info (for example a new node epoch) under the same
// lease.
func (s *LivenessSession) Update(ctx context.Context, info LiveInfo) error {
	info.Node = s.node
	return s.lease.Update(ctx, info)
}

// Revoke ends the session now: the key disappears at once instead of after
// the TTL, and Lost is closed.
func (s *LivenessSession) Revoke(ctx context.Context) error { return s.lease.Revoke(ctx) }

// Close is Revoke with a short timeout of its own.
func (s *LivenessSession) Close() error {
	ctx, cancel := context.WithTimeout(s.lease.CloseContext, s.lease.CloseTimeout)
	defer cancel()
	return s.lease.Revoke(ctx)
}

// LiveCache is a copy of the live nodes, kept current by the goroutine of a
// watch that Close stops. It is safe for concurrent use.
type LiveCache struct {
	// stop stops what keeps the cache current and waits for it.
	stop func()

	mu struct {
		sync.RWMutex
		nodes map[catalog.NodeID]LiveInfo
		// changed is closed and replaced whenever nodes changes.
		changed chan struct{}
	}
}

// NewLiveCache returns a cache holding nodes, for Liveness implementations,
// which keep it current with Replace, Put and Remove. The cache takes nodes
// over: the caller must not use the map afterwards. Close calls stop (if not
// nil, and possibly more than once), which must stop what updates the cache
// and wait for it.
func NewLiveCache(nodes map[catalog.NodeID]LiveInfo, stop func()) *LiveCache {
	c := &LiveCache{stop: stop}
	c.mu.nodes = nodes
	c.mu.changed = make(chan struct{})
	return c
}

// Nodes returns a copy of the live nodes.
func (c *LiveCache) Nodes() map[catalog.NodeID]LiveInfo {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return maps.Clone(c.mu.nodes)
}

// IsLive reports whether node is live.
func (c *LiveCache) IsLive(node catalog.NodeID) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	_, ok := c.mu.nodes[node]
	return ok
}

// Changed returns a channel closed at the next change of the live set.
func (c *LiveCache) Changed() <-chan struct{} {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.mu.changed
}

// Close stops the watch and waits for its goroutine.
func (c *LiveCache) Close() error {
	if c.stop != nil {
		c.stop()
	}
	return nil
}

// Replace sets the whole live set.
func (c *LiveCache) Replace(nodes map[catalog.NodeID]LiveInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if maps.Equal(c.mu.nodes, nodes) {
		return
	}
	c.mu.nodes = nodes
	c.changedLocked()
}

// Put adds or updates the live node info.Node.
func (c *LiveCache) Put(info LiveInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.mu.nodes[info.Node]; ok && old == info {
		return
	}
	c.mu.nodes[info.Node] = info
	c.changedLocked()
}

// Remove drops node from the live set.
func (c *LiveCache) Remove(node catalog.NodeID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.mu.nodes[node]; !ok {
		return
	}
	delete(c.mu.nodes, node)
	c.changedLocked()
}

// REQUIRES: c.mu held for writing.
func (c *LiveCache) changedLocked() {
	close(c.mu.changed)
	c.mu.changed = make(chan struct{})
}
