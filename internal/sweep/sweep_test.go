package sweep

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/minkdb/mink/objstore"
)

const delay = time.Minute

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fixture is a store holding some objects and a sweeper over it.
type fixture struct {
	t     *testing.T
	store *objstore.Faulty
	s     *Sweeper
}

func newFixture(t *testing.T, keys ...string) *fixture {
	t.Helper()
	store := objstore.NewFaulty(objstore.NewMem())
	for _, k := range keys {
		if err := store.PutIfAbsent(context.Background(), k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	return &fixture{t: t, store: store, s: New(store, delay)}
}

// pass is a collector's pass at now that finds garbage (in this order)
// and nothing else: it forgets the other pending keys, then sweeps.
func (f *fixture) pass(ctx context.Context, now time.Time, garbage ...string) (Stats, string, error) {
	f.s.Forget(func(k string) bool { return !slices.Contains(garbage, k) })
	var st Stats
	failed, err := f.s.Sweep(ctx, now, slices.Values(garbage), &st)
	return st, failed, err
}

// mustPass is pass, failing the test on an error, and checking the stats.
func (f *fixture) mustPass(now time.Time, want Stats, garbage ...string) {
	f.t.Helper()
	st, failed, err := f.pass(context.Background(), now, garbage...)
	if err != nil {
		f.t.Fatalf("pass at +%v: %s: %v", now.Sub(t0), failed, err)
	}
	if st != want {
		f.t.Fatalf("pass at +%v: %+v, want %+v", now.Sub(t0), st, want)
	}
}

// objects lists what the store holds.
func (f *fixture) objects() []string {
	f.t.Helper()
	infos, err := f.store.Inner().List(context.Background(), "")
	if err != nil {
		f.t.Fatal(err)
	}
	var keys []string
	for _, o := range infos {
		keys = append(keys, o.Key)
	}
	slices.Sort(keys)
	return keys
}

func (f *fixture) wantObjects(want ...string) {
	f.t.Helper()
	if got := f.objects(); !slices.Equal(got, want) {
		f.t.Fatalf("objects %v, want %v", got, want)
	}
}

func TestGraceDelay(t *testing.T) {
	f := newFixture(t, "a", "b", "keep")
	f.mustPass(t0, Stats{Waiting: 1}, "a")
	// b is first found garbage later than a: each waits its own delay.
	f.mustPass(t0.Add(delay/2), Stats{Waiting: 2}, "a", "b")
	f.mustPass(t0.Add(delay-time.Second), Stats{Waiting: 2}, "a", "b")
	f.wantObjects("a", "b", "keep")
	f.mustPass(t0.Add(delay), Stats{Deleted: 1, Waiting: 1}, "a", "b")
	f.wantObjects("b", "keep")
	f.mustPass(t0.Add(delay/2+delay), Stats{Deleted: 1}, "b")
	f.wantObjects("keep")
}

func TestReferencedAgainIsKept(t *testing.T) {
	f := newFixture(t, "a", "b")
	f.mustPass(t0, Stats{Waiting: 2}, "a", "b")
	// A commit references a again (or a reader's view did): the pass
	// does not find it garbage, and its delay is forgotten.
	f.mustPass(t0.Add(delay/2), Stats{Waiting: 1}, "b")
	f.mustPass(t0.Add(delay), Stats{Deleted: 1, Waiting: 1}, "a", "b")
	f.wantObjects("a")
	// Garbage again from +delay on: deleted only a whole delay later.
	f.mustPass(t0.Add(2*delay-time.Second), Stats{Waiting: 1}, "a")
	f.wantObjects("a")
	f.mustPass(t0.Add(2*delay), Stats{Deleted: 1}, "a")
	f.wantObjects()
}

func TestDeleteErrorIsRetriedNextPass(t *testing.T) {
	f := newFixture(t, "a", "b", "c")
	f.mustPass(t0, Stats{Waiting: 3}, "a", "b", "c")
	remove := f.store.Inject(objstore.Rule{Ops: objstore.OpDelete, Match: "b", Times: 1, Err: errors.New("throttled")})
	defer remove()
	st, failed, err := f.pass(context.Background(), t0.Add(delay), "a", "b", "c")
	if !errors.Is(err, objstore.ErrInjected) || failed != "b" {
		t.Fatalf("pass with a failing delete of b: %s, %v; want b, the injected error", failed, err)
	}
	// The pass stops at the failure: a is gone, b and c wait.
	if st != (Stats{Deleted: 1}) {
		t.Fatalf("pass with a failing delete: %+v, want one deleted", st)
	}
	f.wantObjects("b", "c")
	// b stays overdue: the next pass deletes it at once.
	f.mustPass(t0.Add(delay+time.Second), Stats{Deleted: 2}, "b", "c")
	f.wantObjects()
}

func TestCancelledPassStops(t *testing.T) {
	f := newFixture(t, "a", "b")
	f.mustPass(t0, Stats{Waiting: 2}, "a", "b")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	st, failed, err := f.pass(ctx, t0.Add(delay), "a", "b")
	if !errors.Is(err, context.Canceled) || failed != "a" || st != (Stats{}) {
		t.Fatalf("cancelled pass: %+v, %s, %v; want nothing done, stopped at a with context.Canceled", st, failed, err)
	}
	f.wantObjects("a", "b")
	f.mustPass(t0.Add(delay), Stats{Deleted: 2}, "a", "b")
	f.wantObjects()
}
