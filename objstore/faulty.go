package objstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path"
	"strings"
	"sync"
	"time"
)

// Op names a Store operation, for fault rules and hooks. Ops are bits, so a
// rule can match several: OpPut|OpDelete.
type Op uint8

const (
	OpGet Op = 1 << iota
	OpGetRange
	OpPut
	OpList
	OpDelete
	// OpWrite is a write into a segment (Segment.WriteAt), keyed by the
	// segment's name ("" before it is published). Publishing a segment is
	// an OpPut of its key, and making one (NewSegment) an OpPut of "".
	OpWrite

	// OpAll matches every operation.
	OpAll = OpGet | OpGetRange | OpPut | OpList | OpDelete | OpWrite
)

func (op Op) String() string {
	names := []string{"get", "getrange", "put", "list", "delete", "write"}
	var parts []string
	for i, name := range names {
		if op&(1<<i) != 0 {
			parts = append(parts, name)
		}
	}
	if len(parts) == 0 {
		return fmt.Sprintf("Op(%d)", uint8(op))
	}
	return strings.Join(parts, "|")
}

var (
	// ErrInjected is a generic injected failure, for rules that need an
	// error and do not care which.
	ErrInjected = errors.New("injected fault")
	// ErrResponseLost is returned by a LoseResponse rule: the operation
	// reached the inner store and took effect, but the caller is told it
	// failed, as after a timeout or a reset connection.
	ErrResponseLost = errors.New("response lost after the operation took effect")
)

// Rule describes one fault. A call matches a rule if its operation is in
// Ops and its key (the prefix, for List) matches Match and Prefix; a
// matching call then fires the rule with probability Prob, at most Times
// times.
type Rule struct {
	// Ops is the set of operations the rule applies to; 0 means OpAll.
	Ops Op
	// Match is a path.Match glob the key must match ("wal/*/3/*"); empty
	// matches any key.
	Match string
	// Prefix is a string the key must start with; empty matches any key.
	Prefix string

	// Times limits the rule to its next Times firings; 0 means unlimited.
	Times int
	// Prob is the probability in (0, 1] that a matching call fires the
	// rule; 0 means 1. Draws come from the Faulty's seeded generator, so a
	// run with the same seed and the same call order fires the same faults.
	Prob float64

	// Latency is added before the call reaches the inner store (or fails).
	Latency time.Duration
	// Err, if set, fails the call without reaching the inner store. The
	// returned error wraps both Err and ErrInjected.
	Err error
	// LoseResponse passes the call to the inner store and then, if it
	// succeeded, discards the result and returns an error wrapping
	// ErrResponseLost. For a put, the object is in place but the caller
	// does not know it.
	LoseResponse bool
}

// Hooks are test callbacks around every operation of a Faulty. They run in
// the caller's goroutine, without any Faulty lock held, so they may block:
// a Before hook that waits on a channel pauses the operation at that point,
// which lets a test interleave operations or "crash" at a chosen step.
type Hooks struct {
	// Before runs after fault latency and before the inner call. A non-nil
	// error fails the operation without touching the inner store.
	Before func(ctx context.Context, op Op, key string) error
	// After runs after the inner call (and after a LoseResponse rule) with
	// the error about to be returned; its result replaces that error. The
	// inner call's effect stands either way.
	After func(ctx context.Context, op Op, key string, err error) error
}

// Faulty wraps a Store and injects faults into it. With no rules and no
// hooks it behaves exactly like the inner store. It is safe for concurrent
// use; rules and hooks may be changed while operations run.
type Faulty struct {
	inner Store

	mu struct {
		sync.Mutex
		rules []*faultRule // in insertion order; guarded by mu
		rng   *rand.Rand   // guarded by mu
		hooks Hooks        // guarded by mu
	}
}

type faultRule struct {
	Rule
	fired int // times fired; guarded by Faulty.mu
}

var _ Store = (*Faulty)(nil)

// NewFaulty returns a fault-injecting wrapper around inner, with no faults
// and random seed 1.
func NewFaulty(inner Store) *Faulty {
	f := &Faulty{inner: inner}
	f.mu.rng = rand.New(rand.NewPCG(1, 1))
	return f
}

// Inner returns the wrapped store, for checking what really happened.
func (f *Faulty) Inner() Store { return f.inner }

// Seed resets the random generator used by probabilistic rules.
func (f *Faulty) Seed(seed uint64) {
	f.mu.Lock()
	f.mu.rng = rand.New(rand.NewPCG(seed, seed))
	f.mu.Unlock()
}

// Inject adds a rule. Rules are consulted in the order they were added:
// every firing rule adds its latency, and the first firing rule with Err or
// LoseResponse decides the outcome. The returned function removes the rule.
func (f *Faulty) Inject(r Rule) (remove func()) {
	if r.Ops == 0 {
		r.Ops = OpAll
	}
	if r.Match != "" {
		if _, err := path.Match(r.Match, ""); err != nil {
			panic(fmt.Sprintf("objstore: faulty rule: bad glob %q: %v", r.Match, err))
		}
	}
	fr := &faultRule{Rule: r}
	f.mu.Lock()
	f.mu.rules = append(f.mu.rules, fr)
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		for i, x := range f.mu.rules {
			if x == fr {
				f.mu.rules = append(f.mu.rules[:i:i], f.mu.rules[i+1:]...)
				return
			}
		}
	}
}

// Reset removes every rule and hook.
func (f *Faulty) Reset() {
	f.mu.Lock()
	f.mu.rules = nil
	f.mu.hooks = Hooks{}
	f.mu.Unlock()
}

// SetHooks replaces the hooks.
func (f *Faulty) SetHooks(h Hooks) {
	f.mu.Lock()
	f.mu.hooks = h
	f.mu.Unlock()
}

// outcome is what the rules decided for one call.
type outcome struct {
	latency      time.Duration
	err          error // fail without calling inner
	loseResponse bool
	hooks        Hooks
}

func (f *Faulty) decide(op Op, key string) outcome {
	f.mu.Lock()
	defer f.mu.Unlock()
	o := outcome{hooks: f.mu.hooks}
	decided := false
	for _, r := range f.mu.rules {
		if r.Ops&op == 0 || (r.Times > 0 && r.fired >= r.Times) {
			continue
		}
		if r.Prefix != "" && !strings.HasPrefix(key, r.Prefix) {
			continue
		}
		if r.Match != "" {
			if ok, _ := path.Match(r.Match, key); !ok {
				continue
			}
		}
		if r.Prob > 0 && r.Prob < 1 && f.mu.rng.Float64() >= r.Prob {
			continue
		}
		r.fired++
		o.latency += r.Latency
		if decided {
			continue
		}
		switch {
		case r.Err != nil:
			o.err, decided = r.Err, true
		case r.LoseResponse:
			o.loseResponse, decided = true, true
		}
	}
	return o
}

// do runs one operation through the rules and hooks. call performs it on
// the inner store.
func (f *Faulty) do(ctx context.Context, op Op, key string, call func() error) error {
	o := f.decide(op, key)
	if o.latency > 0 {
		t := time.NewTimer(o.latency)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("objstore: faulty %s %s: %w", op, key, ctx.Err())
		}
	}
	if o.hooks.Before != nil {
		if err := o.hooks.Before(ctx, op, key); err != nil {
			return fmt.Errorf("objstore: faulty %s %s: before hook: %w", op, key, err)
		}
	}
	var err error
	if o.err != nil {
		err = fmt.Errorf("objstore: faulty %s %s: %w: %w", op, key, ErrInjected, o.err)
	} else {
		err = call()
		if err == nil && o.loseResponse {
			err = fmt.Errorf("objstore: faulty %s %s: %w", op, key, ErrResponseLost)
		}
	}
	if o.hooks.After != nil {
		err = o.hooks.After(ctx, op, key, err)
	}
	return err
}

// Get implements Store.
func (f *Faulty) Get(ctx context.Context, key string) (data []byte, err error) {
	err = f.do(ctx, OpGet, key, func() (err error) {
		data, err = f.inner.Get(ctx, key)
		return err
	})
	if err != nil {
		return nil, err
	}
	return data, nil
}

// GetRange implements Store.
func (f *Faulty) GetRange(ctx context.Context, key string, off, n int64) (data []byte, err error) {
	err = f.do(ctx, OpGetRange, key, func() (err error) {
		data, err = f.inner.GetRange(ctx, key, off, n)
		return err
	})
	if err != nil {
		return nil, err
	}
	return data, nil
}

// PutIfAbsent implements Store.
func (f *Faulty) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	return f.do(ctx, OpPut, key, func() error {
		return f.inner.PutIfAbsent(ctx, key, data)
	})
}

// List implements Store. Rules and hooks see the prefix as the key.
func (f *Faulty) List(ctx context.Context, prefix string) (infos []ObjectInfo, err error) {
	err = f.do(ctx, OpList, prefix, func() (err error) {
		infos, err = f.inner.List(ctx, prefix)
		return err
	})
	if err != nil {
		return nil, err
	}
	return infos, nil
}

// Delete implements Store.
func (f *Faulty) Delete(ctx context.Context, key string) error {
	return f.do(ctx, OpDelete, key, func() error {
		return f.inner.Delete(ctx, key)
	})
}

// Close closes the inner store.
func (f *Faulty) Close() error { return f.inner.Close() }

// FaultySegments is a Faulty around a SegmentStore whose segments take
// faults too (see OpWrite). A LoseResponse rule on a write makes the bytes
// durable and reports failure.
type FaultySegments struct {
	*Faulty
	segs SegmentStore
}

var _ SegmentStore = (*FaultySegments)(nil)

// NewFaultySegments returns a fault-injecting wrapper around inner that
// keeps its segments.
func NewFaultySegments(inner SegmentStore) *FaultySegments {
	return &FaultySegments{Faulty: NewFaulty(inner), segs: inner}
}

// NewSegment implements SegmentStore.
func (f *FaultySegments) NewSegment(ctx context.Context, size int64) (Segment, error) {
	var seg Segment
	err := f.do(ctx, OpPut, "", func() (err error) {
		seg, err = f.segs.NewSegment(ctx, size)
		return err
	})
	if err != nil {
		if seg != nil {
			seg.Close()
		}
		return nil, err
	}
	return &faultySegment{f: f.Faulty, inner: seg}, nil
}

type faultySegment struct {
	f     *Faulty
	inner Segment
	key   string
}

func (s *faultySegment) Size() int64  { return s.inner.Size() }
func (s *faultySegment) Close() error { return s.inner.Close() }

func (s *faultySegment) Publish(ctx context.Context, key string) error {
	err := s.f.do(ctx, OpPut, key, func() error { return s.inner.Publish(ctx, key) })
	if err == nil || errors.Is(err, ErrResponseLost) {
		s.key = key
	}
	return err
}

func (s *faultySegment) WriteAt(p []byte, off int64) error {
	return s.f.do(context.Background(), OpWrite, s.key, func() error { return s.inner.WriteAt(p, off) })
}
