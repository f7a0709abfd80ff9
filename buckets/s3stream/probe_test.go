package s3stream

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/minkdb/mink/objstore"
)

// A node that cannot reach etcd proves each read with Unsealed: nil while
// no takeover has begun, ErrFenced (and the node fenced) once a taker has
// sealed its WAL, even after the taker's garbage collection removed the
// WAL objects below the seal. A look from before a read arrived is never
// reused for it, and a store that does not answer proves nothing.
func TestUnsealedProvesNoTakeover(t *testing.T) {
	h := newHarness(t)
	a := h.start(1)
	s := mustOpen(t, a, sid, 1)
	for id := range uint64(5) {
		mustAppend(t, s, id)
	}
	ctx := context.Background()
	if err := a.Unsealed(ctx, time.Now()); err != nil {
		t.Fatalf("Unsealed before any takeover: %v", err)
	}

	// A store that does not answer proves nothing.
	remove := h.store.Inject(objstore.Rule{Ops: objstore.OpGet, Prefix: "wal/", Err: errors.New("store unreachable")})
	if err := a.Unsealed(ctx, time.Now()); err == nil || errors.Is(err, ErrFenced) {
		t.Fatalf("Unsealed with the store refusing reads: %v, want the store's error", err)
	}
	remove()
	before := time.Now()
	if err := a.Unsealed(ctx, before); err != nil {
		t.Fatalf("Unsealed once the store answers again: %v", err)
	}

	// B takes over: fences A's node epoch, seals its WAL, collects it.
	b := h.start(2)
	h.register(b.meta, 1)
	h.waitCatchUp(b.meta)
	if _, err := Failover(ctx, h.store, b.meta, 1, a.cfg.NodeEpoch, failoverBy(b.meta, 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := NewCollector(h.store, b.meta, 0).Collect(ctx); err != nil {
		t.Fatal(err)
	}
	if a.Fenced() != nil {
		t.Fatal("A fenced before it looked")
	}
	// The look from before the takeover must not answer a read from after.
	err := a.Unsealed(ctx, time.Now())
	if !errors.Is(err, ErrFenced) {
		t.Fatalf("Unsealed after the takeover: %v, want ErrFenced", err)
	}
	if a.Fenced() == nil {
		t.Fatal("the seal was seen but the node is not fenced")
	}
	if _, err := s.Append(ctx, payload(99), 1); !errors.Is(err, ErrFenced) {
		t.Fatalf("append after the probe saw the seal: %v, want ErrFenced", err)
	}
	if err := a.Unsealed(ctx, before); !errors.Is(err, ErrFenced) {
		t.Fatalf("Unsealed on a fenced node: %v, want ErrFenced", err)
	}
}
