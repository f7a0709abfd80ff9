package metalog

import (
	"context"
	"testing"
	"time"

	"github.com/minkdb/mink/catalog"
)

func checkLeader(t *testing.T, e Election, want catalog.NodeID) {
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
