package groups

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/metalog"
)

// Config configures a Coordinator.
type Config struct {
	Node catalog.NodeID
	// Meta is the node's metadata log: committed offsets are read from its
	// view and proposed to it.
	Meta *metalog.Catalog
	// Coordinator names the node that coordinates every group now, and that
	// node's advertised Kafka address (host:port); ok is false while there
	// is none. The listener passes the metadata view's coordinator lease
	// holder (View.Coordinator.Node, its Addrs.Kafka from View.Nodes).
	Coordinator func() (node catalog.NodeID, kafkaAddr string, ok bool)
	Logger      *slog.Logger
	// Now is the clock (tests); nil: time.Now.
	Now func() time.Time
}

// Session and rebalance timeouts a JoinGroup may ask for, as Kafka's
// group.min.session.timeout.ms and group.max.session.timeout.ms default to.
const (
	minSessionTimeout = 6 * time.Second
	maxSessionTimeout = 30 * time.Minute
	// maxWake bounds the timer loop's sleep: the loop also notices that
	// this node lost the coordinator lease, and a test clock may jump.
	maxWake = time.Second
)

// Coordinator answers the group requests of a node's Kafka listener.
type Coordinator struct {
	cfg    Config
	logger *slog.Logger
	now    func() time.Time

	// kick wakes the timer loop after a deadline was set (capacity 1).
	kick    chan struct{}
	closing chan struct{}
	wg      sync.WaitGroup
	once    sync.Once

	// mu guards every group and the epoch they belong to. It is never held
	// across a proposal; it is held while reading the metadata view (lock
	// order: mu, then the view's read lock).
	mu struct {
		sync.Mutex
		// epoch is the coordinator epoch under which groups were built;
		// 0 while this node does not coordinate. When the epoch changes,
		// the groups are dropped (their members rejoin).
		epoch  uint64
		groups map[string]*group
		closed bool
		// newMemberID makes member ids: newMemberID, or a deterministic
		// one in tests.
		newMemberID func(clientID string) string
	}
}

// New returns a Coordinator and starts its timer loop; Close stops it.
func New(cfg Config) *Coordinator {
	c := &Coordinator{
		cfg:     cfg,
		logger:  cfg.Logger,
		now:     cfg.Now,
		kick:    make(chan struct{}, 1),
		closing: make(chan struct{}),
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	c.logger = c.logger.With("component", "kafka-groups")
	if c.now == nil {
		c.now = time.Now
	}
	c.mu.groups = map[string]*group{}
	c.mu.newMemberID = newMemberID
	c.wg.Add(1)
	go c.timerLoop()
	return c
}

// Close stops the timer loop and answers every blocked JoinGroup and
// SyncGroup with COORDINATOR_NOT_AVAILABLE; later requests get the same.
func (c *Coordinator) Close() {
	c.once.Do(func() {
		c.mu.Lock()
		c.mu.closed = true
		c.unloadLocked(kerr.CoordinatorNotAvailable.Code)
		c.mu.Unlock()
		close(c.closing)
		c.wg.Wait()
	})
}

// Handles reports whether key is a request this package answers.
func Handles(key int16) bool {
	for _, v := range versions {
		if v.ApiKey == key {
			return true
		}
	}
	return false
}

// versions are the version ranges advertised. OffsetCommit v10 and
// OffsetFetch v10 name topics by id and are left out; FindCoordinator v6
// (share groups) and DeleteGroups v3 are too, for lack of a use.
var versions = []kmsg.ApiVersionsResponseApiKey{
	{ApiKey: kmsg.OffsetCommit.Int16(), MinVersion: 0, MaxVersion: 9},
	{ApiKey: kmsg.OffsetFetch.Int16(), MinVersion: 0, MaxVersion: 9},
	{ApiKey: kmsg.FindCoordinator.Int16(), MinVersion: 0, MaxVersion: 5},
	{ApiKey: kmsg.JoinGroup.Int16(), MinVersion: 0, MaxVersion: 9},
	{ApiKey: kmsg.Heartbeat.Int16(), MinVersion: 0, MaxVersion: 4},
	{ApiKey: kmsg.LeaveGroup.Int16(), MinVersion: 0, MaxVersion: 5},
	{ApiKey: kmsg.SyncGroup.Int16(), MinVersion: 0, MaxVersion: 5},
	{ApiKey: kmsg.DescribeGroups.Int16(), MinVersion: 0, MaxVersion: 6},
	{ApiKey: kmsg.ListGroups.Int16(), MinVersion: 0, MaxVersion: 5},
	{ApiKey: kmsg.DeleteGroups.Int16(), MinVersion: 0, MaxVersion: 2},
	{ApiKey: kmsg.OffsetDelete.Int16(), MinVersion: 0, MaxVersion: 0},
}

// Versions lists, per handled key, the version range to advertise in
// ApiVersions. The slice is the caller's.
func Versions() []kmsg.ApiVersionsResponseApiKey {
	out := make([]kmsg.ApiVersionsResponseApiKey, len(versions))
	for i, v := range versions {
		out[i] = kmsg.NewApiVersionsResponseApiKey()
		out[i].ApiKey, out[i].MinVersion, out[i].MaxVersion = v.ApiKey, v.MinVersion, v.MaxVersion
	}
	return out
}

// Handle answers one request of a handled key. JoinGroup blocks until the
// join phase of the rebalance ends, SyncGroup until the leader's assignment
// arrives, and OffsetCommit until its record is applied; ctx ends the wait
// (the error is ctx's). Any other error means the request cannot be
// answered at all and the connection should be closed.
func (c *Coordinator) Handle(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	for _, v := range versions {
		if v.ApiKey == req.Key() && (req.GetVersion() < v.MinVersion || req.GetVersion() > v.MaxVersion) {
			return nil, fmt.Errorf("kafka groups: %s v%d is not supported (v%d-v%d)",
				kmsg.NameForKey(req.Key()), req.GetVersion(), v.MinVersion, v.MaxVersion)
		}
	}
	switch r := req.(type) {
	case *kmsg.FindCoordinatorRequest:
		return c.findCoordinator(r), nil
	case *kmsg.JoinGroupRequest:
		return c.joinGroup(ctx, r)
	case *kmsg.SyncGroupRequest:
		return c.syncGroup(ctx, r)
	case *kmsg.HeartbeatRequest:
		return c.heartbeat(r), nil
	case *kmsg.LeaveGroupRequest:
		return c.leaveGroup(r), nil
	case *kmsg.DescribeGroupsRequest:
		return c.describeGroups(r), nil
	case *kmsg.ListGroupsRequest:
		return c.listGroups(r), nil
	case *kmsg.OffsetCommitRequest:
		return c.offsetCommit(ctx, r), nil
	case *kmsg.OffsetFetchRequest:
		return c.offsetFetch(r), nil
	case *kmsg.OffsetDeleteRequest:
		return c.offsetDelete(ctx, r), nil
	case *kmsg.DeleteGroupsRequest:
		return c.deleteGroups(ctx, r), nil
	}
	return nil, fmt.Errorf("kafka groups: %s (key %d) is not a group request", kmsg.NameForKey(req.Key()), req.Key())
}

// clientKey is the context key of a request's client (ContextWithClient).
type clientKey struct{}

type clientInfo struct{ id, host string }

// ContextWithClient returns ctx carrying the client id of a request's header
// and the client's address, which DescribeGroups shows for the members
// that joined with it. Optional: without it both are empty.
func ContextWithClient(ctx context.Context, clientID, clientHost string) context.Context {
	return context.WithValue(ctx, clientKey{}, clientInfo{id: clientID, host: clientHost})
}

func clientOf(ctx context.Context) clientInfo {
	ci, _ := ctx.Value(clientKey{}).(clientInfo)
	return ci
}

// ownLocked checks that this node coordinates the groups now and returns
// the coordinator epoch, or the error code every group request answers
// otherwise: NOT_COORDINATOR when another node does, COORDINATOR_NOT_AVAILABLE
// when none does, COORDINATOR_LOAD_IN_PROGRESS while this node's metadata
// view has not applied its own coordinator registration yet. When the epoch
// changed since the groups were built, they are dropped first.
//
// REQUIRES: c.mu held.
func (c *Coordinator) ownLocked() (uint64, int16) {
	if c.mu.closed {
		return 0, kerr.CoordinatorNotAvailable.Code
	}
	epoch, code := c.coordinatorEpoch()
	if epoch != c.mu.epoch {
		if c.mu.epoch != 0 {
			c.logger.Info("group coordination moved; dropping group membership", "epoch", c.mu.epoch, "now", epoch, "groups", len(c.mu.groups))
		}
		c.unloadLocked(kerr.NotCoordinator.Code)
		c.mu.epoch = epoch
	}
	return epoch, code
}

// coordinatorEpoch returns the coordinator epoch of this node, or 0 and the
// error code of ownLocked. It takes the metadata view's read lock.
func (c *Coordinator) coordinatorEpoch() (uint64, int16) {
	node, _, ok := c.cfg.Coordinator()
	switch {
	case !ok:
		return 0, kerr.CoordinatorNotAvailable.Code
	case node != c.cfg.Node:
		return 0, kerr.NotCoordinator.Code
	}
	var registered catalog.Coordinator
	c.cfg.Meta.Read(func(v *catalog.View) { registered = v.Coordinator })
	if registered.Node != c.cfg.Node || registered.Epoch == 0 {
		// The lease is ours, but its registration is not applied yet (or
		// the view already names a successor: then the lease is not ours
		// for long).
		return 0, kerr.CoordinatorLoadInProgress.Code
	}
	return registered.Epoch, 0
}

// unloadLocked drops every group, answering blocked requests with code.
// REQUIRES: c.mu held.
func (c *Coordinator) unloadLocked(code int16) {
	for name, g := range c.mu.groups {
		g.unload(code)
		delete(c.mu.groups, name)
	}
}

// timerLoop applies the groups' deadlines as they pass.
func (c *Coordinator) timerLoop() {
	defer c.wg.Done()
	timer := time.NewTimer(maxWake)
	defer timer.Stop()
	for {
		select {
		case <-c.closing:
			return
		case <-c.kick:
		case <-timer.C:
		}
		wait := c.expire()
		timer.Stop()
		timer.Reset(wait)
	}
}

// expire applies every deadline that has passed and returns how long to
// wait for the next one (at most maxWake).
func (c *Coordinator) expire() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, code := c.ownLocked(); code != 0 {
		return maxWake
	}
	now := c.now()
	next := now.Add(maxWake)
	for name, g := range c.mu.groups {
		g.expire(now)
		if g.removable() {
			delete(c.mu.groups, name)
			continue
		}
		if d, ok := g.nextDeadline(); ok && d.Before(next) {
			next = d
		}
	}
	return max(next.Sub(now), time.Millisecond)
}

// wake tells the timer loop that a deadline may have moved earlier.
func (c *Coordinator) wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}
