package metalog

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/minkdb/mink/catalog"
)

func registerNode(t *testing.T, c *Catalog, node catalog.NodeID) uint64 {
	t.Helper()
	out, err := c.Propose(testContext(t, 10*time.Second), catalog.RegisterNode{Node: node})
	if err != nil {
		t.Fatal(err)
	}
	return out.Epoch
}

func coordinatorOf(c *Catalog) (co catalog.Coordinator) {
	c.Read(func(v *catalog.View) { co = v.Coordinator })
	return co
}

// MemElection's guard with MemLog: an expired lease refuses the guarded
// registration, and the next holder's goes through.
func TestMemElectionGuard(t *testing.T) {
	ctx := testContext(t, 10*time.Second)
	log := NewMemLog()
	defer log.Close()
	c := openCatalog(t, log, testOptions(1000))
	epoch1, epoch2 := registerNode(t, c, 1), registerNode(t, c, 2)
	e := NewMemElection()
	l1, err := e.Campaign(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	second := make(chan *Leadership, 1)
	go func() {
		l, err := e.Campaign(ctx, 2)
		if err != nil {
			t.Error(err)
		}
		second <- l
	}()
	waitFor(t, "node 2 queued", func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return len(e.mu.queue) == 1
	})
	e.Expire()
	_, err = c.ProposeGuarded(ctx, l1.Guard(), catalog.RegisterCoordinator{Node: 1, NodeEpoch: epoch1})
	if !errors.Is(err, ErrGuardFailed) || !errors.Is(err, ErrNotAppended) {
		t.Fatalf("guarded RegisterCoordinator after Expire: err = %v", err)
	}
	if co := coordinatorOf(c); co != (catalog.Coordinator{}) {
		t.Fatalf("coordinator = %+v, want none", co)
	}
	l2 := <-second
	if out, err := c.ProposeGuarded(ctx, l2.Guard(), catalog.RegisterCoordinator{Node: 2, NodeEpoch: epoch2}); err != nil || out.Epoch != 1 {
		t.Fatalf("node 2's guarded RegisterCoordinator = %+v, %v", out, err)
	}
	if _, err := log.AppendGuarded(ctx, NewGuard("etcd only", "a condition for another kind of log"), []byte("x")); !errors.Is(err, ErrNotAppended) {
		t.Fatalf("MemLog append with an etcd guard: err = %v, want ErrNotAppended", err)
	}
	if err := l2.Resign(context.Background()); err != nil {
		t.Fatal(err)
	}
}
