package catalog

import (
	"context"
	"maps"
	"sync"
	"time"
)

// DefaultLeaseTTL is the default liveness lease TTL (lease_ttl): a node that
// stops renewing its lease is no longer live after this long.
const DefaultLeaseTTL = 30 * time.Second

// Liveness is node liveness. It is not in the metadata log: each node holds
// a lease on a key of its own, and the live nodes are the nodes whose keys
// exist. Implementations: EtcdLiveness, MemLiveness.
type Liveness interface {
	// KeepAlive makes node live, publishing info, until the session is
	// revoked or its lease is lost. ttl <= 0 means DefaultLeaseTTL.
	KeepAlive(ctx context.Context, node NodeID, info LiveInfo, ttl time.Duration) (*LivenessSession, error)
	// LiveNodes reads the live nodes.
	LiveNodes(ctx context.Context) (map[NodeID]LiveInfo, error)
	// Watch returns a cache of the live nodes kept current by a watch, for
	// callers that look often (the coordinator, every tick). Close it.
	Watch(ctx context.Context) (*LiveCache, error)
}

// LiveInfo is what a live node publishes: its node epoch (from RegisterNode)
// and its advertised addresses.
type LiveInfo struct {
	Node  NodeID `json:"node"`
	Epoch uint64 `json:"epoch"`
	Addrs Addrs  `json:"addrs"`
}

// LivenessSession is one node's hold on its liveness key. It is safe for
// concurrent use.
type LivenessSession struct {
	node NodeID
	// lost is closed when the node stops being live through this session.
	lost   <-chan struct{}
	update func(ctx context.Context, info LiveInfo) error
	revoke func(ctx context.Context) error
	// closeTimeout bounds Close's revoke.
	closeTimeout time.Duration
	// ctx is the context Close revokes under (the client's).
	ctx context.Context
}

// Node is the node this session keeps live.
func (s *LivenessSession) Node() NodeID { return s.node }

// Lost is closed when the node is no longer live through this session: the
// lease expired (the process was paused or cut off from etcd for longer
// than the TTL, and other nodes may have declared it dead), was revoked, or
// the session was closed. A lost session is never live again; the owner
// registers the node again (new node epoch) and starts a new session.
func (s *LivenessSession) Lost() <-chan struct{} { return s.lost }

// Update publishes new info (for example a new node epoch) under the same
// lease.
func (s *LivenessSession) Update(ctx context.Context, info LiveInfo) error {
	info.Node = s.node
	return s.update(ctx, info)
}

// Revoke ends the session now: the key disappears at once instead of after
// the TTL, and Lost is closed.
func (s *LivenessSession) Revoke(ctx context.Context) error { return s.revoke(ctx) }

// Close is Revoke with a short timeout of its own.
func (s *LivenessSession) Close() error {
	ctx, cancel := context.WithTimeout(s.ctx, s.closeTimeout)
	defer cancel()
	return s.revoke(ctx)
}

// LiveCache is a copy of the live nodes, kept current by the goroutine of a
// watch that Close stops. It is safe for concurrent use.
type LiveCache struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu struct {
		sync.RWMutex
		nodes map[NodeID]LiveInfo
		// changed is closed and replaced whenever nodes changes.
		changed chan struct{}
	}
}

func newLiveCache(nodes map[NodeID]LiveInfo) *LiveCache {
	c := &LiveCache{}
	c.mu.nodes = nodes
	c.mu.changed = make(chan struct{})
	return c
}

// Nodes returns a copy of the live nodes.
func (c *LiveCache) Nodes() map[NodeID]LiveInfo {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return maps.Clone(c.mu.nodes)
}

// IsLive reports whether node is live.
func (c *LiveCache) IsLive(node NodeID) bool {
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
	if c.cancel != nil {
		c.cancel()
	}
	c.wg.Wait()
	return nil
}

// replace sets the whole live set.
func (c *LiveCache) replace(nodes map[NodeID]LiveInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if maps.Equal(c.mu.nodes, nodes) {
		return
	}
	c.mu.nodes = nodes
	c.changedLocked()
}

func (c *LiveCache) put(info LiveInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.mu.nodes[info.Node]; ok && old == info {
		return
	}
	c.mu.nodes[info.Node] = info
	c.changedLocked()
}

func (c *LiveCache) remove(node NodeID) {
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

func leaseSeconds(ttl time.Duration) int64 {
	if ttl <= 0 {
		ttl = DefaultLeaseTTL
	}
	return max(1, int64((ttl+time.Second-1)/time.Second))
}
