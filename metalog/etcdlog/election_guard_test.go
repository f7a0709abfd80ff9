package etcdlog

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/metalog"
	"github.com/minkdb/mink/metalog/metalogtest"
)

// campaignLease returns the lease of node's campaign key under e's prefix.
func campaignLease(t *testing.T, cli *clientv3.Client, e *Election, node catalog.NodeID) clientv3.LeaseID {
	t.Helper()
	resp, err := cli.Get(metalogtest.Context(t, 10*time.Second), e.prefix+"/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		if string(kv.Value) == fmt.Sprint(node) {
			return clientv3.LeaseID(kv.Lease)
		}
	}
	t.Fatalf("no campaign key of node %d", node)
	return 0
}

// The race of issue #7: node 1 wins the coordinator lease, then its session
// lease goes (the process was paused past the TTL) before it proposes
// RegisterCoordinator. Its guarded proposal must be refused, before and
// after node 2 takes the lease and registers, and the view's coordinator
// must stay what it was. The same record unguarded is accepted by the state
// machine (its epochs are right), which is the race the guard closes.
func TestEtcdElectionGuardRefusesRegisterAfterLeaseLost(t *testing.T) {
	ctx := metalogtest.Context(t, 60*time.Second)
	cluster := testCluster(t)
	cli := testClient(t)
	c := metalogtest.OpenCatalog(t, New(testClient(t), cluster), metalogtest.Options(1000))
	epoch1, epoch2 := metalogtest.RegisterNode(t, c, 1), metalogtest.RegisterNode(t, c, 2)
	elect := func() *Election {
		e := NewElection(testClient(t), cluster)
		e.TTL = 2 * time.Second
		return e
	}
	e1, e2 := elect(), elect()

	l1, err := e1.Campaign(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer l1.Resign(ctx)
	if _, err := cli.Revoke(ctx, campaignLease(t, cli, e1, 1)); err != nil {
		t.Fatal(err)
	}
	head := c.AppliedIndex()
	_, err = c.ProposeGuarded(ctx, l1.Guard(), catalog.RegisterCoordinator{Node: 1, NodeEpoch: epoch1, ExpectEpoch: 0})
	if !errors.Is(err, metalog.ErrGuardFailed) || !errors.Is(err, metalog.ErrNotAppended) {
		t.Fatalf("guarded RegisterCoordinator after the lease was revoked: err = %v, want ErrGuardFailed and ErrNotAppended", err)
	}
	if !strings.Contains(err.Error(), "coordinator lease of node 1") {
		t.Errorf("error %q does not name the lost lease", err)
	}
	if co := metalogtest.Coordinator(c); co != (catalog.Coordinator{}) {
		t.Fatalf("coordinator = %+v after a refused registration, want none", co)
	}

	// Node 2 takes the lease and registers.
	l2, err := e2.Campaign(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Resign(ctx)
	out, err := c.ProposeGuarded(ctx, l2.Guard(), catalog.RegisterCoordinator{Node: 2, NodeEpoch: epoch2, ExpectEpoch: 0})
	if err != nil || out.Epoch != 1 {
		t.Fatalf("node 2's guarded RegisterCoordinator = %+v, %v; want epoch 1", out, err)
	}
	// Node 1, resuming, reads the view and tries again with the right
	// coordinator epoch: still refused, node 2 stays coordinator.
	_, err = c.ProposeGuarded(ctx, l1.Guard(), catalog.RegisterCoordinator{Node: 1, NodeEpoch: epoch1, ExpectEpoch: 1})
	if !errors.Is(err, metalog.ErrGuardFailed) {
		t.Fatalf("node 1's guarded RegisterCoordinator while node 2 holds the lease: err = %v, want ErrGuardFailed", err)
	}
	if co := metalogtest.Coordinator(c); co != (catalog.Coordinator{Node: 2, Epoch: 1}) {
		t.Fatalf("coordinator = %+v, want node 2 at epoch 1", co)
	}
	if got := c.AppliedIndex(); got != head+1 {
		t.Fatalf("applied index %d, want %d: only node 2's registration appended", got, head+1)
	}
	// Control: unguarded, the state machine takes node 1's record and fences
	// the real holder. This is what the guard prevents.
	if out, err := c.Propose(ctx, catalog.RegisterCoordinator{Node: 1, NodeEpoch: epoch1, ExpectEpoch: 1}); err != nil || out.Epoch != 2 {
		t.Fatalf("unguarded control = %+v, %v; want accepted at epoch 2", out, err)
	}
}

// A guarded proposal is appended on its own: when its guard fails, the
// proposals grouped around it are appended all the same, and a guarded
// proposal whose guard holds is appended once.
func TestEtcdGuardedProposalAmongConcurrentProposals(t *testing.T) {
	ctx := metalogtest.Context(t, 60*time.Second)
	cluster := testCluster(t)
	cli := testClient(t)
	c := metalogtest.OpenCatalog(t, New(testClient(t), cluster), metalogtest.Options(1000))
	if _, err := cli.Put(ctx, cluster+"-flag", "x"); err != nil {
		t.Fatal(err)
	}
	holds := NewGuard("flag exists", clientv3.Compare(clientv3.CreateRevision(cluster+"-flag"), ">", 0))
	fails := NewGuard("missing exists", clientv3.Compare(clientv3.CreateRevision(cluster+"-missing"), ">", 0))

	var wg sync.WaitGroup
	errs := make([]error, 24)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := metalogtest.CreateTable(fmt.Sprintf("t%d", i))
			switch i % 3 {
			case 0:
				_, errs[i] = c.ProposeGuarded(ctx, fails, rec)
			case 1:
				_, errs[i] = c.ProposeGuarded(ctx, holds, rec)
			default:
				_, errs[i] = c.Propose(ctx, rec)
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		_, exists := c.View().TableNamed(fmt.Sprintf("t%d", i))
		if i%3 == 0 {
			if !errors.Is(err, metalog.ErrGuardFailed) || exists {
				t.Errorf("proposal %d with a failing guard: err = %v, table exists = %v", i, err, exists)
			}
		} else if err != nil || !exists {
			t.Errorf("proposal %d: err = %v, table exists = %v", i, err, exists)
		}
	}
	if got, want := c.AppliedIndex(), uint64(16); got != want {
		t.Errorf("applied index %d, want %d (one entry per accepted proposal)", got, want)
	}
	if _, err := New(cli, cluster).AppendGuarded(ctx, metalog.Guard{}, []byte("x")); !errors.Is(err, metalog.ErrNotAppended) {
		t.Errorf("append with the zero guard: err = %v, want ErrNotAppended", err)
	}
}

// Guarded appends whose requests or responses are lost are appended exactly
// once, as unguarded ones are (TestEtcdAppendLostResponse); once the guard
// fails, nothing more is appended.
func TestEtcdGuardedAppendLostResponse(t *testing.T) {
	ctx := metalogtest.Context(t, 60*time.Second)
	cluster := testCluster(t)
	cli := testClient(t)
	proxy := newFaultProxy(t, strings.TrimPrefix(sharedEndpoints(t)[0], "http://"))
	client, err := Dial(ctx, []string{proxy.addr()}, metalogtest.Logger(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	flag := cluster + "-flag"
	put, err := cli.Put(ctx, flag, "x")
	if err != nil {
		t.Fatal(err)
	}
	guard := NewGuard("flag", clientv3.Compare(clientv3.CreateRevision(flag), "=", put.Header.Revision))
	l := New(client, cluster)
	for i := range 6 {
		proxy.armCut(i%2 == 0)
		index, err := l.AppendGuarded(ctx, guard, []byte(fmt.Sprintf("entry-%d", i)))
		if err != nil || index != uint64(i+1) {
			t.Fatalf("guarded append %d = %d, %v; want index %d", i, index, err, i+1)
		}
	}
	if _, err := cli.Delete(ctx, flag); err != nil {
		t.Fatal(err)
	}
	proxy.armCut(true)
	if _, err := l.AppendGuarded(ctx, guard, []byte("late")); !errors.Is(err, metalog.ErrGuardFailed) {
		t.Fatalf("guarded append after the guard failed: err = %v, want ErrGuardFailed", err)
	}
	if head, err := New(cli, cluster).Head(ctx); err != nil || head != 6 {
		t.Fatalf("head = %d, %v; want 6 (one entry per successful append)", head, err)
	}
}
