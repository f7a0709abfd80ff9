package catalog

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestEtcdElection(t *testing.T) {
	ctx := testContext(t, 60*time.Second)
	cluster := testCluster(t)
	e1 := NewEtcdElection(testClient(t), cluster)
	e1.TTL = 2 * time.Second
	e2 := NewEtcdElection(testClient(t), cluster)
	e2.TTL = 2 * time.Second

	if _, ok, err := e1.Leader(ctx); err != nil || ok {
		t.Fatalf("Leader before any campaign = %v, %v; want none", ok, err)
	}
	l1, err := e1.Campaign(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	checkLeader(t, e2, 1)

	// The second campaigner waits until the first resigns.
	type result struct {
		l   *Leadership
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
	var l2 *Leadership
	select {
	case r := <-second:
		if r.err != nil {
			t.Fatal(r.err)
		}
		l2 = r.l
	case <-time.After(10 * time.Second):
		t.Fatal("second campaign not elected after the first resigned")
	}
	checkLeader(t, e1, 2)

	// A campaign that gives up (ctx) leaves no key behind.
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	if _, err := e1.Campaign(cctx, 3); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("campaign under a short ctx = %v", err)
	}
	cancel()

	// The holder is frozen past its TTL: its Leadership reports the loss,
	// and a waiting campaigner takes over.
	proxy := newFaultProxy(t, strings.TrimPrefix(sharedEndpoints(t)[0], "http://"))
	client, err := Dial(ctx, []string{proxy.addr()}, quietLogger(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if err := l2.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	e4 := NewEtcdElection(client, cluster)
	e4.TTL = 2 * time.Second
	l4, err := e4.Campaign(ctx, 4)
	if err != nil {
		t.Fatal(err)
	}
	checkLeader(t, e1, 4)
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
	checkLeader(t, e2, 5)
	proxy.thaw()
	resignCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	l4.Resign(resignCtx) // the lease is gone already; must not block
}

func checkLeader(t *testing.T, e Election, want NodeID) {
	t.Helper()
	got, ok, err := e.Leader(testContext(t, 10*time.Second))
	if err != nil || !ok || got != want {
		t.Fatalf("Leader = %d, %v, %v; want %d", got, ok, err, want)
	}
}

func TestMemElection(t *testing.T) {
	ctx := testContext(t, 10*time.Second)
	e := NewMemElection()
	l1, err := e.Campaign(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	checkLeader(t, e, 1)
	got := make(chan *Leadership, 2)
	go func() {
		l, _ := e.Campaign(ctx, 2)
		got <- l
	}()
	// A campaigner that gives up leaves the queue.
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	if _, err := e.Campaign(cctx, 3); err == nil {
		t.Fatal("campaign 3 elected while 1 holds the lease")
	}
	cancel()
	waitFor(t, "campaign 2 queued", func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return len(e.mu.queue) == 1
	})
	if !e.Expire() {
		t.Fatal("Expire found no holder")
	}
	<-l1.Done()
	l2 := <-got
	checkLeader(t, e, 2)
	l2.Resign(ctx)
	<-l2.Done()
	if _, ok, _ := e.Leader(ctx); ok {
		t.Fatal("a leader after the last holder resigned")
	}
}
