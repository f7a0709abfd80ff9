package metalog_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/metalog"
	"github.com/minkdb/mink/metalog/metalogtest"
)

// MemElection's guard with MemLog: an expired lease refuses the guarded
// registration, and the next holder's goes through.
func TestMemElectionGuard(t *testing.T) {
	ctx := metalogtest.Context(t, 10*time.Second)
	log := metalog.NewMemLog()
	defer log.Close()
	c := metalogtest.OpenCatalog(t, log, metalogtest.Options(1000))
	epoch1, epoch2 := metalogtest.RegisterNode(t, c, 1), metalogtest.RegisterNode(t, c, 2)
	e := metalog.NewMemElection()
	l1, err := e.Campaign(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	second := make(chan *metalog.Leadership, 1)
	go func() {
		l, err := e.Campaign(ctx, 2)
		if err != nil {
			t.Error(err)
		}
		second <- l
	}()
	metalogtest.WaitFor(t, "node 2 queued", func() bool { return e.Queued() == 1 })
	e.Expire()
	_, err = c.ProposeGuarded(ctx, l1.Guard(), catalog.RegisterCoordinator{Node: 1, NodeEpoch: epoch1})
	if !errors.Is(err, metalog.ErrGuardFailed) || !errors.Is(err, metalog.ErrNotAppended) {
		t.Fatalf("guarded RegisterCoordinator after Expire: err = %v", err)
	}
	if co := metalogtest.Coordinator(c); co != (catalog.Coordinator{}) {
		t.Fatalf("coordinator = %+v, want none", co)
	}
	l2 := <-second
	if out, err := c.ProposeGuarded(ctx, l2.Guard(), catalog.RegisterCoordinator{Node: 2, NodeEpoch: epoch2}); err != nil || out.Epoch != 1 {
		t.Fatalf("node 2's guarded RegisterCoordinator = %+v, %v", out, err)
	}
	if _, err := log.AppendGuarded(ctx, metalog.NewGuard("etcd only", "a condition for another kind of log"), []byte("x")); !errors.Is(err, metalog.ErrNotAppended) {
		t.Fatalf("MemLog append with an etcd guard: err = %v, want ErrNotAppended", err)
	}
	if err := l2.Resign(context.Background()); err != nil {
		t.Fatal(err)
	}
}
