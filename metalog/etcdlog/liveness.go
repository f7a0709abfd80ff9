package etcdlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minkdb/mink/metalog/internal/backoff"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/metalog"
)

// Liveness keeps liveness in etcd: node n holds /<cluster>/live/<n>,
// attached to a lease with the liveness TTL that the session renews
// (leaseKeeper). The value is the node's LiveInfo as JSON.
// When the node stops renewing (crash, pause, partition), etcd deletes the
// key after the TTL.
//
// It starts no goroutines of its own; sessions and caches it returns own
// theirs. Safe for concurrent use.
type Liveness struct {
	client *clientv3.Client
	prefix string
	// Logger receives the cache's log lines. Default slog.Default().
	Logger *slog.Logger
}

// NewLiveness returns the liveness of cluster ("" means DefaultCluster).
func NewLiveness(client *clientv3.Client, cluster string) *Liveness {
	return &Liveness{client: client, prefix: keysFor(cluster).livePrefix, Logger: slog.Default()}
}

func (l *Liveness) key(node catalog.NodeID) string {
	return l.prefix + strconv.FormatUint(uint64(node), 10)
}

// KeepAlive implements Liveness. A key left by an earlier incarnation of the
// node (restart within the TTL) is taken over.
func (l *Liveness) KeepAlive(ctx context.Context, node catalog.NodeID, info metalog.LiveInfo, ttl time.Duration) (*metalog.LivenessSession, error) {
	if node == 0 {
		return nil, errors.New("liveness: node ids start at 1")
	}
	info.Node = node
	value, err := json.Marshal(info)
	if err != nil {
		return nil, err
	}
	seconds := leaseSeconds(ttl)
	granted := time.Now()
	grant, err := l.client.Grant(ctx, seconds)
	if err != nil {
		return nil, fmt.Errorf("liveness of node %d: grant lease: %w", node, err)
	}
	// The keepalive outlives ctx; it stops with the session or the client.
	k := newLeaseKeeper(l.client, grant.ID, time.Duration(grant.TTL)*time.Second, granted)
	key := l.key(node)
	if _, err := l.client.Put(ctx, key, string(value), clientv3.WithLease(grant.ID)); err != nil {
		k.stop()
		l.client.Revoke(ctx, grant.ID)
		return nil, fmt.Errorf("liveness of node %d: put %s: %w", node, key, err)
	}
	var revokeOnce sync.Once
	var revokeErr error
	return metalog.NewLivenessSession(node, metalog.LivenessLease{
		Lost: k.lost,
		Held: k.held,
		Update: func(ctx context.Context, info metalog.LiveInfo) error {
			value, err := json.Marshal(info)
			if err != nil {
				return err
			}
			// Only while our lease holds the key: never resurrect a lost node.
			resp, err := l.client.Txn(ctx).
				If(clientv3.Compare(clientv3.LeaseValue(key), "=", grant.ID)).
				Then(clientv3.OpPut(key, string(value), clientv3.WithLease(grant.ID))).
				Commit()
			if err != nil {
				return fmt.Errorf("liveness of node %d: update: %w", node, err)
			}
			if !resp.Succeeded {
				return fmt.Errorf("liveness of node %d: update: the lease no longer holds %s", node, key)
			}
			return nil
		},
		Revoke: func(ctx context.Context) error {
			revokeOnce.Do(func() {
				k.stop() // Lost closes
				_, err := l.client.Revoke(ctx, grant.ID)
				if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
					revokeErr = fmt.Errorf("liveness of node %d: revoke: %w", node, err)
				}
			})
			return revokeErr
		},
		CloseTimeout: time.Duration(seconds) * time.Second,
		CloseContext: l.client.Ctx(),
	}), nil
}

// leaseKeeper renews a liveness lease every third of its TTL and knows
// until when the lease surely holds: the send time of the last renewal
// etcd granted, plus the TTL it granted, less a margin. etcd counts a
// lease's TTL from when it receives the renewal, which is after it was
// sent, so no other node can see the lease expire before that time.
//
// clientv3's own keepalive (concurrency.Session) gives up only once a
// TTL has passed since the last renewal's *response*, checked once a
// second: a node cut off from etcd, or paused, went on serving for up to a
// second after etcd had expired its lease and the coordinator could have
// moved its buckets, which let it answer stale reads.
//
// Past that sure end the lease is in doubt, not lost: held is false, but
// lost closes only when etcd answers that the lease is gone (or on stop).
// Renewals go on meanwhile. A node that cannot reach etcd cannot know
// whether etcd expired its lease (a partition) or merely cannot answer
// (quorum loss, after which etcd's new leader extends every lease): it
// acknowledges no write, proves each read (buckets, "in doubt"), and
// re-registers only once etcd says the lease is gone.
type leaseKeeper struct {
	client *clientv3.Client
	id     clientv3.LeaseID
	ttl    time.Duration
	base   time.Time    // the monotonic origin of until
	until  atomic.Int64 // nanoseconds after base
	lost   chan struct{}

	lostOnce sync.Once
	quit     chan struct{}
	quitOnce sync.Once
	wg       sync.WaitGroup
}

// leaseMargin is how much earlier than the renewal's arithmetic a keeper
// stops counting on its lease: a twentieth of the TTL.
func leaseMargin(ttl time.Duration) time.Duration { return ttl / 20 }

func newLeaseKeeper(client *clientv3.Client, id clientv3.LeaseID, ttl time.Duration, granted time.Time) *leaseKeeper {
	k := &leaseKeeper{client: client, id: id, ttl: ttl, base: granted, lost: make(chan struct{}), quit: make(chan struct{})}
	k.until.Store(int64(ttl - leaseMargin(ttl)))
	k.wg.Add(1)
	go func() { defer k.wg.Done(); k.renew() }()
	return k
}

func (k *leaseKeeper) now() time.Duration { return time.Since(k.base) }

func (k *leaseKeeper) held() bool {
	select {
	case <-k.lost:
		return false
	default:
	}
	return k.now() < time.Duration(k.until.Load())
}

func (k *leaseKeeper) lose() { k.lostOnce.Do(func() { close(k.lost) }) }

// stop ends the renewals and closes lost.
func (k *leaseKeeper) stop() {
	k.quitOnce.Do(func() { close(k.quit) })
	k.wg.Wait()
	k.lose()
}

// renew sends a renewal every ttl/3 (sooner after a failed one) until the
// lease is gone or stop. A renewal is not waited for before the next is
// sent: a slow etcd still renews the lease as long as some renewal's
// answer comes back while it holds, and a renewal stuck on a dead
// connection does not hold up the next, which may reach another member.
// Each waits at most as long as the lease can still hold (at least the
// interval); at most maxRenewals are out at once.
func (k *leaseKeeper) renew() {
	const maxRenewals = 3
	interval := k.ttl / 3
	slots := make(chan struct{}, maxRenewals)
	failed := make(chan struct{}, maxRenewals)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		next := interval
		select {
		case slots <- struct{}{}:
			sent := k.now()
			wait := max(interval, time.Duration(k.until.Load())-sent)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-slots }()
				if !k.renewOnce(sent, wait) {
					select {
					case failed <- struct{}{}:
					default:
					}
				}
			}()
		default:
			// maxRenewals are out: wait for one to end.
		}
		select {
		case <-k.quit:
			return
		case <-k.lost:
			return
		case <-failed:
			next = interval / 4
			select {
			case <-k.quit:
				return
			case <-k.lost:
				return
			case <-time.After(next):
			}
		case <-time.After(next):
		}
	}
}

// renewOnce sends one renewal, sent on the keeper's clock, waiting up to
// wait for its answer. It moves until forward on success and loses the
// lease if etcd says it is gone; false if the renewal failed otherwise.
func (k *leaseKeeper) renewOnce(sent, wait time.Duration) bool {
	ctx, cancel := context.WithTimeout(k.client.Ctx(), wait)
	defer cancel()
	go func() {
		select {
		case <-k.quit:
		case <-k.lost:
		case <-ctx.Done():
		}
		cancel()
	}()
	resp, err := k.client.KeepAliveOnce(ctx, k.id)
	switch {
	case err == nil && resp.TTL > 0:
		until := int64(sent + time.Duration(resp.TTL)*time.Second - leaseMargin(k.ttl))
		for {
			old := k.until.Load()
			if until <= old || k.until.CompareAndSwap(old, until) {
				return true
			}
		}
	case errors.Is(err, rpctypes.ErrLeaseNotFound) || err == nil:
		k.lose() // etcd says the lease is gone
		return true
	}
	return false
}

// LiveNodes implements Liveness.
func (l *Liveness) LiveNodes(ctx context.Context) (map[catalog.NodeID]metalog.LiveInfo, error) {
	nodes, _, err := l.read(ctx)
	return nodes, err
}

func (l *Liveness) read(ctx context.Context) (map[catalog.NodeID]metalog.LiveInfo, int64, error) {
	resp, err := l.client.Get(ctx, l.prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, 0, fmt.Errorf("read live nodes: %w", err)
	}
	nodes := make(map[catalog.NodeID]metalog.LiveInfo, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		info, err := l.parse(kv)
		if err != nil {
			return nil, 0, err
		}
		nodes[info.Node] = info
	}
	return nodes, resp.Header.Revision, nil
}

func (l *Liveness) nodeOf(key []byte) (catalog.NodeID, error) {
	n, err := strconv.ParseUint(strings.TrimPrefix(string(key), l.prefix), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("liveness key %q: %w", key, err)
	}
	return catalog.NodeID(n), nil
}

func (l *Liveness) parse(kv *mvccpb.KeyValue) (metalog.LiveInfo, error) {
	node, err := l.nodeOf(kv.Key)
	if err != nil {
		return metalog.LiveInfo{}, err
	}
	var info metalog.LiveInfo
	if err := json.Unmarshal(kv.Value, &info); err != nil {
		return metalog.LiveInfo{}, fmt.Errorf("liveness key %q: %w", kv.Key, err)
	}
	info.Node = node
	return info, nil
}

// Watch implements Liveness: a read of the live keys, then a watch from the
// read's revision. When the watch breaks (compaction, lost leader), the cache
// reads again and watches again.
func (l *Liveness) Watch(ctx context.Context) (*metalog.LiveCache, error) {
	nodes, rev, err := l.read(ctx)
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	c := metalog.NewLiveCache(nodes, func() {
		cancel()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		l.follow(runCtx, c, rev)
	}()
	return c, nil
}

// follow keeps c current from revision rev on, until ctx is done.
func (l *Liveness) follow(ctx context.Context, c *metalog.LiveCache, rev int64) {
	logger := l.Logger
	if logger == nil {
		logger = slog.Default()
	}
	for attempt := 0; ; {
		if rev == 0 {
			nodes, r, err := l.read(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				attempt++
				logger.Warn("live nodes cache: read failed; retrying", "err", err)
				if backoff.Sleep(ctx, backoff.Delay(attempt)) != nil {
					return
				}
				continue
			}
			attempt = 0
			c.Replace(nodes)
			rev = r
		}
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for resp := range l.client.Watch(wctx, l.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
			if resp.Canceled || resp.Err() != nil {
				break
			}
			for _, ev := range resp.Events {
				node, err := l.nodeOf(ev.Kv.Key)
				if err != nil {
					continue
				}
				if ev.Type == mvccpb.DELETE {
					c.Remove(node)
					continue
				}
				if info, err := l.parse(ev.Kv); err == nil {
					c.Put(info)
				}
			}
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		rev = 0 // read again
	}
}

// leaseSeconds is ttl in whole seconds, at least 1; ttl <= 0 means
// metalog.DefaultLeaseTTL.
func leaseSeconds(ttl time.Duration) int64 {
	if ttl <= 0 {
		ttl = metalog.DefaultLeaseTTL
	}
	return max(1, int64((ttl+time.Second-1)/time.Second))
}
