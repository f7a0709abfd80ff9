package objstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/minkdb/mink/objstore"
)

func TestFaultyErrorsThenSuccess(t *testing.T) {
	ctx := t.Context()
	f := objstore.NewFaulty(objstore.NewMem())
	f.Inject(objstore.Rule{Ops: objstore.OpPut, Times: 2, Err: objstore.ErrInjected})
	for i := range 2 {
		err := f.PutIfAbsent(ctx, "k", []byte("v"))
		if !errors.Is(err, objstore.ErrInjected) {
			t.Fatalf("put %d: got %v, want ErrInjected", i, err)
		}
		// A failed-before-reaching-the-store put has no effect.
		if _, err := f.Inner().Get(ctx, "k"); !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("after injected put %d: inner Get: %v, want ErrNotFound", i, err)
		}
	}
	if err := f.PutIfAbsent(ctx, "k", []byte("v")); err != nil {
		t.Fatalf("third put: %v", err)
	}
	// Other operations were never affected.
	if _, err := f.Get(ctx, "k"); err != nil {
		t.Fatalf("Get: %v", err)
	}
}

func TestFaultyCustomError(t *testing.T) {
	ctx := t.Context()
	f := objstore.NewFaulty(objstore.NewMem())
	f.Inject(objstore.Rule{Ops: objstore.OpGet, Err: objstore.ErrNotFound, Times: 1})
	if err := f.PutIfAbsent(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	_, err := f.Get(ctx, "k")
	if !errors.Is(err, objstore.ErrNotFound) || !errors.Is(err, objstore.ErrInjected) {
		t.Fatalf("Get: got %v, want an error wrapping ErrNotFound and ErrInjected", err)
	}
}

func TestFaultyMatching(t *testing.T) {
	ctx := t.Context()
	f := objstore.NewFaulty(objstore.NewMem())
	f.Inject(objstore.Rule{Ops: objstore.OpPut | objstore.OpDelete, Match: "wal/*/3/*", Err: objstore.ErrInjected})
	f.Inject(objstore.Rule{Ops: objstore.OpList, Prefix: "stream/", Err: objstore.ErrInjected})
	tests := []struct {
		name string
		call func() error
		fail bool
	}{
		{"put matching glob", func() error { return f.PutIfAbsent(ctx, "wal/1/3/0001", nil) }, true},
		{"delete matching glob", func() error { return f.Delete(ctx, "wal/1/3/0001") }, true},
		{"put other epoch", func() error { return f.PutIfAbsent(ctx, "wal/1/4/0001", nil) }, false},
		{"put deeper key (glob * stops at /)", func() error { return f.PutIfAbsent(ctx, "wal/1/3/0001/x", nil) }, false},
		{"get matching glob (op not in rule)", func() error { _, err := f.Get(ctx, "wal/1/3/0001"); return ignoreNotFound(err) }, false},
		{"list matching prefix", func() error { _, err := f.List(ctx, "stream/1"); return err }, true},
		{"list other prefix", func() error { _, err := f.List(ctx, "wal/"); return err }, false},
	}
	for _, tc := range tests {
		err := tc.call()
		if got := errors.Is(err, objstore.ErrInjected); got != tc.fail {
			t.Errorf("%s: got %v, want injected=%v", tc.name, err, tc.fail)
		}
	}
}

func ignoreNotFound(err error) error {
	if errors.Is(err, objstore.ErrNotFound) {
		return nil
	}
	return err
}

// TestFaultyProbabilityDeterministic checks that probabilistic faults fire
// at roughly the configured rate and identically for the same seed.
func TestFaultyProbabilityDeterministic(t *testing.T) {
	ctx := t.Context()
	run := func(seed uint64) []bool {
		f := objstore.NewFaulty(objstore.NewMem())
		f.Seed(seed)
		f.Inject(objstore.Rule{Ops: objstore.OpGet, Prob: 0.3, Err: objstore.ErrInjected})
		out := make([]bool, 1000)
		for i := range out {
			_, err := f.Get(ctx, "k")
			out[i] = errors.Is(err, objstore.ErrInjected)
		}
		return out
	}
	a, b, c := run(42), run(42), run(43)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatal("same seed gave different fault sequences")
	}
	if fmt.Sprint(a) == fmt.Sprint(c) {
		t.Fatal("different seeds gave the same fault sequence")
	}
	fired := 0
	for _, x := range a {
		if x {
			fired++
		}
	}
	if fired < 230 || fired > 370 {
		t.Fatalf("Prob 0.3 fired %d of 1000 times", fired)
	}
}

// TestFaultyLostResponse checks "the write succeeded but the response was
// lost": the caller gets an error, the object is in place, and a retry of
// the put reports ErrExists, which the caller resolves by comparing content.
func TestFaultyLostResponse(t *testing.T) {
	ctx := t.Context()
	f := objstore.NewFaulty(objstore.NewMem())
	f.Inject(objstore.Rule{Ops: objstore.OpPut, Times: 1, LoseResponse: true})
	err := f.PutIfAbsent(ctx, "wal/1/1/0007", []byte("batch"))
	if !errors.Is(err, objstore.ErrResponseLost) {
		t.Fatalf("put: got %v, want ErrResponseLost", err)
	}
	got, err := f.Get(ctx, "wal/1/1/0007")
	if err != nil || string(got) != "batch" {
		t.Fatalf("Get after lost response: %q, %v; want the object in place", got, err)
	}
	if err := f.PutIfAbsent(ctx, "wal/1/1/0007", []byte("batch")); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("retried put: got %v, want ErrExists", err)
	}
	// A lost response on a put that fails reports the real failure.
	f.Inject(objstore.Rule{Ops: objstore.OpPut, Times: 1, LoseResponse: true})
	if err := f.PutIfAbsent(ctx, "wal/1/1/0007", []byte("other")); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("put of existing key with LoseResponse: got %v, want ErrExists", err)
	}
}

func TestFaultyLatency(t *testing.T) {
	ctx := t.Context()
	f := objstore.NewFaulty(objstore.NewMem())
	remove := f.Inject(objstore.Rule{Ops: objstore.OpGet, Latency: 50 * time.Millisecond})
	start := time.Now()
	_, err := f.Get(ctx, "k")
	if !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Get with latency only: got %v, want the inner ErrNotFound", err)
	}
	if elapsed := time.Since(start); elapsed < 50*time.Millisecond {
		t.Fatalf("Get took %v, want at least 50ms", elapsed)
	}
	// Latency respects cancellation.
	cctx, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
	defer cancel()
	if _, err := f.Get(cctx, "k"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get with expiring context: got %v, want DeadlineExceeded", err)
	}
	remove()
	start = time.Now()
	_, _ = f.Get(ctx, "k")
	if elapsed := time.Since(start); elapsed > 40*time.Millisecond {
		t.Fatalf("Get after removing the rule took %v", elapsed)
	}
}

// TestFaultyHooks uses a Before hook to hold a put at the point just before
// it reaches the store, as a crash-at-every-step test would.
func TestFaultyHooks(t *testing.T) {
	ctx := t.Context()
	f := objstore.NewFaulty(objstore.NewMem())
	reached := make(chan string, 1)
	release := make(chan error)
	var afterOps []string
	f.SetHooks(objstore.Hooks{
		Before: func(ctx context.Context, op objstore.Op, key string) error {
			if op != objstore.OpPut {
				return nil
			}
			reached <- key
			return <-release
		},
		After: func(ctx context.Context, op objstore.Op, key string, err error) error {
			afterOps = append(afterOps, fmt.Sprintf("%s %s %v", op, key, err))
			return err
		},
	})
	done := make(chan error)
	go func() { done <- f.PutIfAbsent(ctx, "a", []byte("1")) }()
	if key := <-reached; key != "a" {
		t.Fatalf("hook saw key %q", key)
	}
	// Paused before the store: nothing written yet.
	if _, err := f.Inner().Get(ctx, "a"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("inner Get while paused: %v, want ErrNotFound", err)
	}
	crash := errors.New("simulated crash")
	release <- crash
	if err := <-done; !errors.Is(err, crash) {
		t.Fatalf("put: got %v, want the hook's error", err)
	}
	if _, err := f.Inner().Get(ctx, "a"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("inner Get after hook failed the put: %v, want ErrNotFound", err)
	}
	go func() { done <- f.PutIfAbsent(ctx, "a", []byte("1")) }()
	<-reached
	release <- nil
	if err := <-done; err != nil {
		t.Fatalf("released put: %v", err)
	}
	if len(afterOps) != 1 || afterOps[0] != "put a <nil>" {
		t.Fatalf("After hook calls: %q, want one successful put", afterOps)
	}
	f.Reset()
	if err := f.PutIfAbsent(ctx, "b", nil); err != nil {
		t.Fatalf("put after Reset: %v", err)
	}
}

func TestOpString(t *testing.T) {
	if got := (objstore.OpPut | objstore.OpDelete).String(); got != "put|delete" {
		t.Fatalf("got %q", got)
	}
	if got := objstore.OpAll.String(); got != "get|getrange|put|list|delete|write" {
		t.Fatalf("got %q", got)
	}
}
