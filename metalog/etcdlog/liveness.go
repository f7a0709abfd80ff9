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
	"time"

	"github.com/minkdb/mink/metalog/internal/backoff"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/metalog"
)

// Liveness keeps liveness in etcd: node n holds /<cluster>/live/<n>,
// attached to a lease with the liveness TTL that the session renews
// (concurrency.Session keepalive). The value is the node's LiveInfo as JSON.
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
	grant, err := l.client.Grant(ctx, seconds)
	if err != nil {
		return nil, fmt.Errorf("liveness of node %d: grant lease: %w", node, err)
	}
	// The keepalive outlives ctx; it stops with the session or the client.
	session, err := concurrency.NewSession(l.client, concurrency.WithLease(grant.ID),
		concurrency.WithTTL(int(seconds)), concurrency.WithContext(l.client.Ctx()))
	if err != nil {
		l.client.Revoke(ctx, grant.ID)
		return nil, fmt.Errorf("liveness of node %d: keepalive: %w", node, err)
	}
	key := l.key(node)
	if _, err := l.client.Put(ctx, key, string(value), clientv3.WithLease(grant.ID)); err != nil {
		session.Close()
		return nil, fmt.Errorf("liveness of node %d: put %s: %w", node, key, err)
	}
	var revokeOnce sync.Once
	var revokeErr error
	return metalog.NewLivenessSession(node, metalog.LivenessLease{
		Lost: session.Done(),
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
				session.Orphan() // stop the keepalive; Lost closes
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
