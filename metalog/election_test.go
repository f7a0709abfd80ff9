package metalog_test

import (
	"context"
	"testing"
	"time"

	"github.com/minkdb/mink/metalog"
	"github.com/minkdb/mink/metalog/metalogtest"
)

func TestMemElection(t *testing.T) {
	ctx := metalogtest.Context(t, 10*time.Second)
	e := metalog.NewMemElection()
	l1, err := e.Campaign(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	metalogtest.CheckLeader(t, e, 1)
	got := make(chan *metalog.Leadership, 2)
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
	metalogtest.WaitFor(t, "campaign 2 queued", func() bool { return e.Queued() == 1 })
	if !e.Expire() {
		t.Fatal("Expire found no holder")
	}
	<-l1.Done()
	l2 := <-got
	metalogtest.CheckLeader(t, e, 2)
	l2.Resign(ctx)
	<-l2.Done()
	if _, ok, _ := e.Leader(ctx); ok {
		t.Fatal("a leader after the last holder resigned")
	}
}
