package etcdlog

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/minkdb/mink/metalog"
	"github.com/minkdb/mink/metalog/metalogtest"
)

func TestEtcdElection(t *testing.T) {
	ctx := metalogtest.Context(t, 60*time.Second)
	cluster := testCluster(t)
	e1 := NewElection(testClient(t), cluster)
	e1.TTL = 2 * time.Second
	e2 := NewElection(testClient(t), cluster)
	e2.TTL = 2 * time.Second

	if _, ok, err := e1.Leader(ctx); err != nil || ok {
		t.Fatalf("Leader before any campaign = %v, %v; want none", ok, err)
	}
	l1, err := e1.Campaign(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	metalogtest.CheckLeader(t, e2, 1)

	// The second campaigner waits until the first resigns.
	type result struct {
		l   *metalog.Leadership
		err error
	}
	second := make(chan result, 1)
	go func() {
		l, err := e2.Campaign(ctx, 2)
		second <- result{l, err}
	}()
	select {
	case r := <-second:
		t.Fatalf("second campaign returned while the first holds the lease: %+v", r)
	case <-time.After(500 * time.Millisecond):
	}
	if err := l1.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l1.Done():
	default:
		t.Fatal("Done not closed after Resign")
	}
	var l2 *metalog.Leadership
	select {
	case r := <-second:
		if r.err != nil {
			t.Fatal(r.err)
		}
		l2 = r.l
	case <-time.After(10 * time.Second):
		t.Fatal("second campaign not elected after the first resigned")
	}
	metalogtest.CheckLeader(t, e1, 2)

	// A campaign that gives up (ctx) leaves no key behind.
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	if _, err := e1.Campaign(cctx, 3); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("campaign under a short ctx = %v", err)
	}
	cancel()

	// The holder is frozen past its TTL: its Leadership reports the loss,
	// and a waiting campaigner takes over.
	proxy := newFaultProxy(t, strings.TrimPrefix(sharedEndpoints(t)[0], "http://"))
	client, err := Dial(ctx, []string{proxy.addr()}, metalogtest.Logger(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if err := l2.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	e4 := NewElection(client, cluster)
	e4.TTL = 2 * time.Second
	l4, err := e4.Campaign(ctx, 4)
	if err != nil {
		t.Fatal(err)
	}
	metalogtest.CheckLeader(t, e1, 4)
	go func() {
		l, err := e1.Campaign(ctx, 5)
		second <- result{l, err}
	}()
	proxy.freeze()
	select {
	case <-l4.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("frozen holder's Done not closed after the TTL")
	}
	select {
	case r := <-second:
		if r.err != nil {
			t.Fatal(r.err)
		}
		defer r.l.Resign(ctx)
	case <-time.After(10 * time.Second):
		t.Fatal("waiting campaigner not elected after the holder's lease expired")
	}
	metalogtest.CheckLeader(t, e2, 5)
	proxy.thaw()
	resignCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	l4.Resign(resignCtx) // the lease is gone already; must not block
}

// A campaigner whose lease expires while it waits (the process was paused)
// must not come out of Campaign as leader when the key ahead of it goes:
// its own key went with its lease, and a later campaigner holds the
// lease. Before, etcd's Election.Campaign returned success (it only waits
// for the earlier keys to go), and the paused node registered as
// coordinator over the real lease holder.
func TestEtcdElectionCampaignerLosesLeaseWhileWaiting(t *testing.T) {
	ctx := metalogtest.Context(t, 60*time.Second)
	cluster := testCluster(t)
	cli := testClient(t)
	elect := func() *Election {
		e := NewElection(testClient(t), cluster)
		e.TTL = 2 * time.Second
		return e
	}
	e1, e2, e3 := elect(), elect(), elect()
	l1, err := e1.Campaign(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		l   *metalog.Leadership
		err error
	}
	second := make(chan result, 1)
	go func() {
		l, err := e2.Campaign(ctx, 2)
		second <- result{l, err}
	}()
	// Wait for node 2's key, then take its lease away as an expiry would.
	var lease2 clientv3.LeaseID
	deadline := time.Now().Add(10 * time.Second)
	for lease2 == 0 && time.Now().Before(deadline) {
		resp, err := cli.Get(ctx, e2.prefix+"/", clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range resp.Kvs {
			if string(kv.Value) == "2" {
				lease2 = clientv3.LeaseID(kv.Lease)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if lease2 == 0 {
		t.Fatal("node 2's campaign key did not appear")
	}
	if _, err := cli.Revoke(ctx, lease2); err != nil {
		t.Fatal(err)
	}
	third := make(chan result, 1)
	go func() {
		l, err := e3.Campaign(ctx, 3)
		third <- result{l, err}
	}()
	time.Sleep(300 * time.Millisecond)
	if err := l1.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-third:
		if r.err != nil {
			t.Fatal(r.err)
		}
		defer r.l.Resign(ctx)
	case <-time.After(10 * time.Second):
		t.Fatal("node 3 not elected after node 1 resigned")
	}
	select {
	case r := <-second:
		if r.err == nil {
			r.l.Resign(ctx)
			t.Fatal("node 2 came out of Campaign as leader after its lease was gone, while node 3 holds the lease")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("node 2's campaign did not end after its lease was gone")
	}
	metalogtest.CheckLeader(t, e1, 3)
}
