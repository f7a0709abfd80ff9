package etcdlog

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/minkdb/mink/metalog/internal/backoff"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/metalog"
)

// Election is the coordinator lease as an etcd election
// (go.etcd.io/etcd/client/v3/concurrency) on the prefix /<cluster>/coordinator.
// Each campaign holds a key /<cluster>/coordinator/<lease id> whose value is
// the node id, attached to a lease with TTL; the campaigner whose key has the
// lowest create revision holds the lease.
//
// Safe for concurrent use. Each Leadership owns a goroutine (and the
// session's keepalive) until it is lost or resigned.
type Election struct {
	client *clientv3.Client
	prefix string // without the trailing slash, as concurrency.NewElection wants
	// TTL is the lease TTL of the campaigns started after it is set.
	// Default DefaultLeaseTTL. When the holder stops renewing, another node
	// takes over after at most TTL.
	TTL time.Duration
}

// NewElection returns the coordinator election of cluster ("" means
// DefaultCluster).
func NewElection(client *clientv3.Client, cluster string) *Election {
	prefix := keysFor(cluster).coordinator
	return &Election{client: client, prefix: prefix[:len(prefix)-1], TTL: metalog.DefaultLeaseTTL}
}

// Campaign implements Election. A campaign broken by an etcd hiccup (a
// compacted watch, a lost leader) continues with the same key.
func (e *Election) Campaign(ctx context.Context, node catalog.NodeID) (*metalog.Leadership, error) {
	seconds := leaseSeconds(e.TTL)
	grant, err := e.client.Grant(ctx, seconds)
	if err != nil {
		return nil, fmt.Errorf("coordinator campaign: grant lease: %w", err)
	}
	session, err := concurrency.NewSession(e.client, concurrency.WithLease(grant.ID),
		concurrency.WithTTL(int(seconds)), concurrency.WithContext(e.client.Ctx()))
	if err != nil {
		e.client.Revoke(ctx, grant.ID)
		return nil, fmt.Errorf("coordinator campaign: keepalive: %w", err)
	}
	election := concurrency.NewElection(session, e.prefix)
	value := strconv.FormatUint(uint64(node), 10)
	for attempt := 1; ; attempt++ {
		err := election.Campaign(ctx, value)
		if err == nil {
			// etcd's Campaign returns once the keys ahead of ours are gone,
			// without checking that ours is still there: if our lease ran
			// out while we waited (a paused process), another campaigner
			// holds the lease now, and we must not act as leader.
			err = e.checkFirst(ctx, election.Key(), election.Rev())
			if err == nil {
				break
			}
		}
		select {
		case <-session.Done():
			err = fmt.Errorf("session lease lost: %w", err)
		default:
		}
		if ctx.Err() != nil || session.Ctx().Err() != nil || attempt >= 20 {
			e.abandon(session)
			return nil, fmt.Errorf("coordinator campaign of node %d: %w", node, err)
		}
		if backoff.Sleep(ctx, backoff.Delay(attempt)) != nil {
			e.abandon(session)
			return nil, fmt.Errorf("coordinator campaign of node %d: %w", node, ctx.Err())
		}
	}

	done := make(chan struct{})
	stop := make(chan struct{})
	go func() {
		defer close(done)
		e.holdUntilLost(session, election.Key(), election.Rev(), stop)
	}()
	key, rev := election.Key(), election.Rev()
	guard := NewGuard(fmt.Sprintf("coordinator lease of node %d (key %s created at revision %d)", node, key, rev),
		clientv3.Compare(clientv3.CreateRevision(key), "=", rev))
	return metalog.NewLeadership(node, done, guard, func(ctx context.Context) error {
		err := election.Resign(ctx)
		close(stop)
		<-done
		if err != nil && session.Ctx().Err() != nil {
			err = nil // the lease is gone already, and the key with it
		}
		return errors.Join(err, closeSession(ctx, e.client, session))
	}), nil
}

// checkFirst reports an error unless key, created at revision rev, is the
// first key under the election prefix: the lease holder's.
func (e *Election) checkFirst(ctx context.Context, key string, rev int64) error {
	resp, err := e.client.Get(ctx, e.prefix+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		return fmt.Errorf("check coordinator lease: %w", err)
	}
	if len(resp.Kvs) == 0 || string(resp.Kvs[0].Key) != key || resp.Kvs[0].CreateRevision != rev {
		return errors.New("campaign key gone (its lease expired while waiting); another node holds the lease")
	}
	return nil
}

// closeSession stops the keepalive and revokes the lease (bounded by ctx; if
// the revoke fails, the lease expires after its TTL anyway).
func closeSession(ctx context.Context, client *clientv3.Client, session *concurrency.Session) error {
	session.Orphan()
	_, err := client.Revoke(ctx, session.Lease())
	if err == nil || errors.Is(err, rpctypes.ErrLeaseNotFound) || client.Ctx().Err() != nil {
		return nil
	}
	return fmt.Errorf("revoke coordinator lease: %w", err)
}

// abandon revokes the lease of a campaign that gave up, so that its key does
// not stay queued until the TTL. The caller's ctx may be done: the revoke
// gets a short timeout of its own.
func (e *Election) abandon(session *concurrency.Session) {
	ctx, cancel := context.WithTimeout(e.client.Ctx(), 5*time.Second)
	defer cancel()
	closeSession(ctx, e.client, session)
}

// holdUntilLost returns when the session ends, stop is closed, or the leader
// key (created at revision rev) is deleted.
func (e *Election) holdUntilLost(session *concurrency.Session, key string, rev int64, stop <-chan struct{}) {
	ctx, cancel := context.WithCancel(session.Ctx())
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for attempt := 1; ctx.Err() == nil; attempt++ {
		resp, err := e.client.Get(ctx, key)
		if err == nil && (len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != rev) {
			return // our key is gone: someone else may campaign and win
		}
		if err == nil {
			wctx := clientv3.WithRequireLeader(ctx)
			for wr := range e.client.Watch(wctx, key, clientv3.WithRev(resp.Header.Revision+1)) {
				if wr.Canceled || wr.Err() != nil {
					break
				}
				for _, ev := range wr.Events {
					if ev.Type == mvccpb.DELETE {
						return
					}
				}
			}
		}
		if backoff.Sleep(ctx, backoff.Delay(attempt)) != nil {
			return
		}
	}
}

// Leader implements Election.
func (e *Election) Leader(ctx context.Context) (catalog.NodeID, bool, error) {
	resp, err := e.client.Get(ctx, e.prefix+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		return 0, false, fmt.Errorf("read coordinator lease: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return 0, false, nil
	}
	n, err := strconv.ParseUint(string(resp.Kvs[0].Value), 10, 32)
	if err != nil {
		return 0, false, fmt.Errorf("coordinator lease key %q holds %q: %w", resp.Kvs[0].Key, resp.Kvs[0].Value, err)
	}
	return catalog.NodeID(n), true, nil
}
