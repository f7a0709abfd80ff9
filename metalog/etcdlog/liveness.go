package catalog

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

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// EtcdLiveness keeps liveness in etcd: node n holds /<cluster>/live/<n>,
// attached to a lease with the liveness TTL that the session renews
// (concurrency.Session keepalive). The value is the node's LiveInfo as JSON.
// When the node stops renewing (crash, pause, partition), etcd deletes the
// key after the TTL.
//
// It starts no goroutines of its own; sessions and caches it returns own
// theirs. Safe for concurrent use.
type EtcdLiveness struct {
	client *clientv3.Client
	prefix string
	// Logger receives the cache's log lines. Default slog.Default().
	Logger *slog.Logger
}

// NewEtcdLiveness returns the liveness of cluster ("" means DefaultCluster).
func NewEtcdLiveness(client *clientv3.Client, cluster string) *EtcdLiveness {
	return &EtcdLiveness{client: client, prefix: keysFor(cluster).livePrefix, Logger: slog.Default()}
}

func (l *EtcdLiveness) key(node NodeID) string {
	return l.prefix + strconv.FormatUint(uint64(node), 10)
}

// KeepAlive implements Liveness. A key left by an earlier incarnation of the
// node (restart within the TTL) is taken over.
func (l *EtcdLiveness) KeepAlive(ctx context.Context, node NodeID, info LiveInfo, ttl time.Duration) (*LivenessSession, error) {
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
	return &LivenessSession{
		node: node,
		lost: session.Done(),
		update: func(ctx context.Context, info LiveInfo) error {
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
		revoke: func(ctx context.Context) error {
			revokeOnce.Do(func() {
				session.Orphan() // stop the keepalive; Lost closes
				_, err := l.client.Revoke(ctx, grant.ID)
				if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
					revokeErr = fmt.Errorf("liveness of node %d: revoke: %w", node, err)
				}
			})
			return revokeErr
		},
		closeTimeout: time.Duration(seconds) * time.Second,
		ctx:          l.client.Ctx(),
	}, nil
}

// LiveNodes implements Liveness.
func (l *EtcdLiveness) LiveNodes(ctx context.Context) (map[NodeID]LiveInfo, error) {
	nodes, _, err := l.read(ctx)
	return nodes, err
}

func (l *EtcdLiveness) read(ctx context.Context) (map[NodeID]LiveInfo, int64, error) {
	resp, err := l.client.Get(ctx, l.prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, 0, fmt.Errorf("read live nodes: %w", err)
	}
	nodes := make(map[NodeID]LiveInfo, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		info, err := l.parse(kv)
		if err != nil {
			return nil, 0, err
		}
		nodes[info.Node] = info
	}
	return nodes, resp.Header.Revision, nil
}

func (l *EtcdLiveness) nodeOf(key []byte) (NodeID, error) {
	n, err := strconv.ParseUint(strings.TrimPrefix(string(key), l.prefix), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("liveness key %q: %w", key, err)
	}
	return NodeID(n), nil
}

func (l *EtcdLiveness) parse(kv *mvccpb.KeyValue) (LiveInfo, error) {
	node, err := l.nodeOf(kv.Key)
	if err != nil {
		return LiveInfo{}, err
	}
	var info LiveInfo
	if err := json.Unmarshal(kv.Value, &info); err != nil {
		return LiveInfo{}, fmt.Errorf("liveness key %q: %w", kv.Key, err)
	}
	info.Node = node
	return info, nil
}

// Watch implements Liveness: a read of the live keys, then a watch from the
// read's revision. When the watch breaks (compaction, lost leader), the cache
// reads again and watches again.
func (l *EtcdLiveness) Watch(ctx context.Context) (*LiveCache, error) {
	nodes, rev, err := l.read(ctx)
	if err != nil {
		return nil, err
	}
	c := newLiveCache(nodes)
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c.cancel = cancel
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		l.follow(runCtx, c, rev)
	}()
	return c, nil
}

// follow keeps c current from revision rev on, until ctx is done.
func (l *EtcdLiveness) follow(ctx context.Context, c *LiveCache, rev int64) {
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
				if sleepCtx(ctx, backoff(attempt)) != nil {
					return
				}
				continue
			}
			attempt = 0
			c.replace(nodes)
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
					c.remove(node)
					continue
				}
				if info, err := l.parse(ev.Kv); err == nil {
					c.put(info)
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
