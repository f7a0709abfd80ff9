package etcdlog

import (
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/metalog"
	"github.com/minkdb/mink/metalog/metalogtest"
)

func TestEtcdLiveness(t *testing.T) {
	ctx := metalogtest.Context(t, 60*time.Second)
	cluster := testCluster(t)
	observer := NewLiveness(testClient(t), cluster)
	cache, err := observer.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()

	// Node 1 heartbeats through a proxy that the test can freeze, as if the
	// process were stopped (SIGSTOP) past the TTL.
	proxy := newFaultProxy(t, strings.TrimPrefix(sharedEndpoints(t)[0], "http://"))
	client, err := Dial(ctx, []string{proxy.addr()}, metalogtest.Logger(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	one, err := NewLiveness(client, cluster).KeepAlive(ctx, 1, metalog.LiveInfo{Epoch: 3, Addrs: catalog.Addrs{PG: "127.0.0.1:5433"}}, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	two, err := observer.KeepAlive(ctx, 2, metalog.LiveInfo{Epoch: 1}, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}

	live, err := observer.LiveNodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(live) != 2 || live[1] != (metalog.LiveInfo{Node: 1, Epoch: 3, Addrs: catalog.Addrs{PG: "127.0.0.1:5433"}}) || live[2].Epoch != 1 {
		t.Fatalf("LiveNodes = %+v", live)
	}
	metalogtest.WaitFor(t, "cache sees both nodes", func() bool { return cache.IsLive(1) && cache.IsLive(2) })

	// Keepalives renew the lease: still live after more than one TTL.
	time.Sleep(2500 * time.Millisecond)
	if live, _ := observer.LiveNodes(ctx); len(live) != 2 {
		t.Fatalf("after 2.5s with keepalives, live = %+v", live)
	}

	// Update publishes a new epoch under the same lease.
	if err := two.Update(ctx, metalog.LiveInfo{Epoch: 2}); err != nil {
		t.Fatal(err)
	}
	metalogtest.WaitFor(t, "cache sees epoch 2", func() bool { return cache.Nodes()[2].Epoch == 2 })

	// Revoke: gone at once.
	changed := cache.Changed()
	if err := two.Revoke(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-two.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("Lost not closed after Revoke")
	}
	if live, _ := observer.LiveNodes(ctx); len(live) != 1 {
		t.Fatalf("after revoking node 2, live = %+v", live)
	}
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("cache did not report node 2 leaving")
	}

	// Freeze node 1: within the TTL its lease is in doubt (not held), and
	// etcd expires it; the key disappears for everyone. Node 1 cannot
	// tell an expiry from an etcd that does not answer, so its session is
	// not lost until etcd says so.
	proxy.freeze()
	frozen := time.Now()
	metalogtest.WaitFor(t, "node 1's lease in doubt", func() bool { return !one.Held() })
	if d := time.Since(frozen); d > 2*time.Second {
		t.Fatalf("node 1 held its lease %v after it was cut off, past its 2s TTL", d)
	}
	metalogtest.WaitFor(t, "node 1 gone from etcd", func() bool {
		live, err := observer.LiveNodes(ctx)
		return err == nil && len(live) == 0
	})
	metalogtest.WaitFor(t, "node 1 gone from the cache", func() bool { return !cache.IsLive(1) })
	// The lease was last renewed up to a keepalive interval (TTL/3) before
	// the freeze, so it may expire as early as 2/3 of the TTL after it.
	if d := time.Since(frozen); d < 1200*time.Millisecond {
		t.Fatalf("node 1 dead %v after it stopped, well before its 2s TTL", d)
	}
	select {
	case <-one.Lost():
		t.Fatal("Lost closed while etcd could not be reached")
	default:
	}
	// Once etcd answers again it says the lease is gone: Lost closes.
	proxy.thaw()
	select {
	case <-one.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("Lost not closed after etcd answered that the lease expired")
	}
	if one.Held() {
		t.Fatal("a lost session reports its lease held")
	}
	// The lost session stays lost, and cannot resurrect the key.
	if err := one.Update(ctx, metalog.LiveInfo{Epoch: 4}); err == nil {
		t.Fatal("Update on a lost session succeeded")
	}
	if live, _ := observer.LiveNodes(ctx); len(live) != 0 {
		t.Fatalf("live = %+v after a lost session's update", live)
	}
}

// A node cut off from etcd stops holding its lease (Held turns false)
// before etcd expires the lease and other nodes see it dead:
// the time it could still count on is measured from when it sent its last
// granted renewal, which etcd received later. Three nodes, cut at
// different phases of their renewal cycle.
func TestLivenessHeldEndsBeforeEtcdExpiresLease(t *testing.T) {
	ctx := metalogtest.Context(t, 60*time.Second)
	cluster := testCluster(t)
	observer := testClient(t)
	const ttl = 2 * time.Second
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		node := catalog.NodeID(11 + i)
		proxy := newFaultProxy(t, strings.TrimPrefix(sharedEndpoints(t)[0], "http://"))
		client, err := Dial(ctx, []string{proxy.addr()}, metalogtest.Logger(), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		liveness := NewLiveness(client, cluster)
		session, err := liveness.KeepAlive(ctx, node, metalog.LiveInfo{Epoch: 1}, ttl)
		if err != nil {
			t.Fatal(err)
		}
		defer session.Close()
		gone := observer.Watch(ctx, liveness.key(node))
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Renewals go on for a while, then the cut comes at a
			// different point of each node's renewal interval.
			time.Sleep(ttl + time.Duration(i)*ttl/7)
			if !session.Held() {
				t.Errorf("node %d: lease not held %v after it started, renewals flowing", node, ttl)
				return
			}
			proxy.freeze()
			cut := time.Now()
			var heldEnded time.Time
			for heldEnded.IsZero() {
				if !session.Held() {
					heldEnded = time.Now()
				}
				time.Sleep(2 * time.Millisecond)
			}
			var expired time.Time
			for expired.IsZero() {
				select {
				case resp := <-gone:
					for _, ev := range resp.Events {
						if ev.Type == mvccpb.DELETE {
							expired = time.Now()
						}
					}
				case <-ctx.Done():
					t.Errorf("node %d: etcd never expired the lease", node)
					return
				}
			}
			t.Logf("node %d: held until %v after the cut; etcd expired the lease %v after it",
				node, heldEnded.Sub(cut).Round(time.Millisecond), expired.Sub(cut).Round(time.Millisecond))
			if !heldEnded.Before(expired) {
				t.Errorf("node %d: held its lease until %v after the cut, but etcd expired it %v after the cut",
					node, heldEnded.Sub(cut), expired.Sub(cut))
			}
			if heldEnded.Sub(cut) > ttl {
				t.Errorf("node %d: held its lease %v after the cut, longer than the TTL %v", node, heldEnded.Sub(cut), ttl)
			}
		}()
	}
	wg.Wait()
}
