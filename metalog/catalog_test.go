package metalog_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/metalog"
	"github.com/minkdb/mink/metalog/metalogtest"
)

func TestProposeOutcome(t *testing.T) {
	ctx := metalogtest.Context(t, 10*time.Second)
	l := metalog.NewMemLog()
	defer l.Close()
	c := metalogtest.OpenCatalog(t, l, metalogtest.Options(0))

	out, err := c.Propose(ctx, catalog.RegisterNode{Node: 1, Addrs: catalog.Addrs{PG: "127.0.0.1:5433"}})
	if err != nil || out.Index != 1 || out.Epoch != 1 {
		t.Fatalf("RegisterNode = %+v, %v; want index 1, epoch 1", out, err)
	}
	out, err = c.Propose(ctx, metalogtest.CreateTable("orders"))
	if err != nil || out.Index != 2 || out.Table == 0 || len(out.Buckets) != 2 {
		t.Fatalf("CreateTable = %+v, %v", out, err)
	}
	if c.AppliedIndex() != 2 {
		t.Fatalf("AppliedIndex = %d, want 2", c.AppliedIndex())
	}
	// Propose returns after the record is applied locally.
	c.Read(func(v *catalog.View) {
		if v.Nodes[1] == nil || v.Nodes[1].Epoch != 1 || v.Nodes[1].Addrs.PG != "127.0.0.1:5433" {
			t.Errorf("node 1 in the view: %+v", v.Nodes[1])
		}
		if tbl := v.Tables[out.Table]; tbl == nil || tbl.Spec.Name != "orders" {
			t.Errorf("table %d in the view: %+v", out.Table, tbl)
		}
	})
	// View is a copy the caller may keep and change.
	kept := c.View()
	kept.Nodes[1].Epoch = 99
	c.Read(func(v *catalog.View) {
		if v.Nodes[1].Epoch != 1 {
			t.Errorf("changing View()'s result changed the live view")
		}
	})
}

func TestProposeRejection(t *testing.T) {
	ctx := metalogtest.Context(t, 10*time.Second)
	l := metalog.NewMemLog()
	defer l.Close()
	c := metalogtest.OpenCatalog(t, l, metalogtest.Options(0))

	if _, err := c.Propose(ctx, metalogtest.CreateTable("t")); err != nil {
		t.Fatal(err)
	}
	out, err := c.Propose(ctx, metalogtest.CreateTable("t"))
	if !errors.Is(err, catalog.ErrExists) {
		t.Fatalf("second CreateTable = %+v, %v; want ErrExists", out, err)
	}
	if out.Err != err || out.Index != 2 || out.Table != 0 {
		t.Fatalf("outcome %+v: want Err == returned error, Index 2, no table", out)
	}
	out, err = c.Propose(ctx, catalog.RegisterNode{Node: 1, ExpectEpoch: 5})
	if !errors.Is(err, catalog.ErrStaleEpoch) || out.Index != 3 {
		t.Fatalf("RegisterNode with a wrong epoch = %+v, %v; want ErrStaleEpoch at 3", out, err)
	}
	// An unencodable record is not appended.
	if _, err := c.Propose(ctx, metalogtest.CreateTable("bad\xff")); err == nil {
		t.Fatal("proposing a record that cannot be encoded succeeded")
	}
	if h, _ := l.Head(ctx); h != 3 {
		t.Fatalf("head = %d, want 3", h)
	}
}

func TestChangedAndWaitIndex(t *testing.T) {
	ctx := metalogtest.Context(t, 10*time.Second)
	l := metalog.NewMemLog()
	defer l.Close()
	a := metalogtest.OpenCatalog(t, l, metalogtest.Options(0))
	b := metalogtest.OpenCatalog(t, l, metalogtest.Options(0))

	changed := b.Changed()
	select {
	case <-changed:
		t.Fatal("Changed closed before anything was applied")
	default:
	}
	out, err := a.Propose(ctx, catalog.RegisterNode{Node: 7})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.WaitIndex(ctx, out.Index); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	default:
		t.Fatal("Changed not closed after an apply")
	}
	if b.Changed() == changed {
		t.Fatal("Changed not replaced after an apply")
	}
	b.Read(func(v *catalog.View) {
		if v.Nodes[7] == nil {
			t.Error("node 7 missing on the other catalog")
		}
	})
	// Waiting for an index nobody appends ends with ctx.
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := b.WaitIndex(wctx, 100); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitIndex(100) = %v, want deadline exceeded", err)
	}
}

// laggingLog delays every entry its Tail delivers, as a node whose tail
// runs behind the log does.
type laggingLog struct {
	metalog.Log
	delay time.Duration
}

func (l laggingLog) Tail(ctx context.Context, from uint64, fn func(uint64, []byte) error) error {
	return l.Log.Tail(ctx, from, func(index uint64, data []byte) error {
		select {
		case <-time.After(l.delay):
		case <-ctx.Done():
			return ctx.Err()
		}
		return fn(index, data)
	})
}

// TestSyncCatchesUp: a Catalog whose tail lags has not applied an entry
// another node's Propose has returned for; Sync returns once it has.
func TestSyncCatchesUp(t *testing.T) {
	ctx := metalogtest.Context(t, 10*time.Second)
	l := metalog.NewMemLog()
	defer l.Close()
	a := metalogtest.OpenCatalog(t, l, metalogtest.Options(0))
	b := metalogtest.OpenCatalog(t, laggingLog{Log: l, delay: 300 * time.Millisecond}, metalogtest.Options(0))

	out, err := a.Propose(ctx, catalog.RegisterNode{Node: 7})
	if err != nil {
		t.Fatal(err)
	}
	if got := b.AppliedIndex(); got >= out.Index {
		t.Fatalf("the lagging catalog applied index %d at once; the test cannot tell Sync from its tail", got)
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	b.Read(func(v *catalog.View) {
		if v.Nodes[7] == nil {
			t.Errorf("node 7 missing after Sync (applied %d, proposed at %d)", v.Index, out.Index)
		}
	})
	// Sync ends with ctx when the entry cannot arrive in time.
	if _, err := a.Propose(ctx, catalog.RegisterNode{Node: 8}); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := b.Sync(sctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Sync with a 20ms deadline behind a 300ms tail = %v, want deadline exceeded", err)
	}
}

func TestAmbiguousAppend(t *testing.T) {
	lost := errors.New("injected: response lost")
	for _, tc := range []struct {
		name string
		// fault is installed for the first appends; nil after n of them.
		commit   bool
		failures int
		record   catalog.Record
		wantErr  error
	}{
		{name: "CommittedButFailed", commit: true, failures: 1, record: catalog.RegisterNode{Node: 1}},
		{name: "CommittedButFailedRejected", commit: true, failures: 1, record: catalog.RegisterNode{Node: 1, ExpectEpoch: 3}, wantErr: catalog.ErrStaleEpoch},
		{name: "NotCommitted", commit: false, failures: 2, record: catalog.RegisterNode{Node: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := metalogtest.Context(t, 10*time.Second)
			l := metalog.NewMemLog()
			defer l.Close()
			var applies metalogtest.ApplyLog
			opts := metalogtest.Options(0)
			opts.TestingKnobs.OnApply = applies.Hook
			c := metalogtest.OpenCatalog(t, l, opts)

			var mu sync.Mutex
			left := tc.failures
			l.SetAppendFault(func(first uint64, entries [][]byte) (bool, error) {
				mu.Lock()
				defer mu.Unlock()
				if left == 0 {
					return true, nil
				}
				left--
				return tc.commit, lost
			})
			out, err := c.Propose(ctx, tc.record)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("Propose = %+v, %v; want %v", out, err, tc.wantErr)
			}
			if out.Index != 1 {
				t.Fatalf("outcome index %d, want 1", out.Index)
			}
			if h, _ := l.Head(ctx); h != 1 {
				t.Fatalf("head = %d: the record was appended more than once", h)
			}
			if !slices.Equal(applies.Indexes(), []uint64{1}) {
				t.Fatalf("applied %v, want [1]", applies.Indexes())
			}
		})
	}

	t.Run("ContextEndsUnresolved", func(t *testing.T) {
		l := metalog.NewMemLog()
		defer l.Close()
		c := metalogtest.OpenCatalog(t, l, metalogtest.Options(0))
		ctx, cancel := context.WithCancel(context.Background())
		l.SetAppendFault(func(first uint64, entries [][]byte) (bool, error) {
			cancel() // the caller gives up while the append is in doubt
			return false, lost
		})
		_, err := c.Propose(ctx, catalog.RegisterNode{Node: 1})
		if !errors.Is(err, metalog.ErrUnknownOutcome) {
			t.Fatalf("Propose = %v, want ErrUnknownOutcome", err)
		}
	})

	t.Run("NotAppendedIsDefinite", func(t *testing.T) {
		ctx := metalogtest.Context(t, 10*time.Second)
		l := metalog.NewMemLog()
		defer l.Close()
		c := metalogtest.OpenCatalog(t, l, metalogtest.Options(0))
		calls := 0
		l.SetAppendFault(func(first uint64, entries [][]byte) (bool, error) {
			calls++
			return false, fmt.Errorf("too large: %w", metalog.ErrNotAppended)
		})
		if _, err := c.Propose(ctx, catalog.RegisterNode{Node: 1}); !errors.Is(err, metalog.ErrNotAppended) || calls != 1 {
			t.Fatalf("Propose = %v after %d appends; want ErrNotAppended after 1", err, calls)
		}
	})
}

// TestConcurrentProposeWithFaults runs proposers on three catalogs sharing a
// log whose appends fail a third of the time (half of those after
// committing), and checks that every acknowledged record is in the log
// exactly once and every catalog ends with the same view.
func TestConcurrentProposeWithFaults(t *testing.T) {
	ctx := metalogtest.Context(t, 60*time.Second)
	l := metalog.NewMemLog()
	defer l.Close()
	var mu sync.Mutex
	n := 0
	lost := errors.New("injected")
	l.SetAppendFault(func(first uint64, entries [][]byte) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		n++
		switch n % 6 {
		case 1:
			return true, lost
		case 4:
			return false, lost
		}
		return true, nil
	})
	var catalogs []*metalog.Catalog
	for range 3 {
		catalogs = append(catalogs, metalogtest.OpenCatalog(t, l, metalogtest.Options(30)))
	}
	var wg sync.WaitGroup
	acked := make([][]uint64, len(catalogs))
	for i, c := range catalogs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 30 {
				out, err := c.Propose(ctx, metalogtest.CreateTable(fmt.Sprintf("t-%d-%d", i, j)))
				if err != nil {
					t.Errorf("catalog %d: %v", i, err)
					return
				}
				acked[i] = append(acked[i], out.Index)
			}
		}()
	}
	wg.Wait()
	head, _ := l.Head(ctx)
	if head != 90 {
		t.Fatalf("head = %d, want 90 (one entry per proposal)", head)
	}
	var want []byte
	for i, c := range catalogs {
		if err := c.WaitIndex(ctx, head); err != nil {
			t.Fatal(err)
		}
		got := metalogtest.EncodeView(t, c.View())
		if i == 0 {
			want = got
			c.Read(func(v *catalog.View) {
				if len(v.Tables) != 90 {
					t.Fatalf("%d tables, want 90", len(v.Tables))
				}
			})
		} else if !bytes.Equal(got, want) {
			t.Fatalf("catalog %d's view differs from catalog 0's", i)
		}
	}
}

func TestRestartFromSnapshot(t *testing.T) {
	ctx := metalogtest.Context(t, 30*time.Second)
	l := metalog.NewMemLog()
	defer l.Close()
	var first metalogtest.ApplyLog
	opts := metalogtest.Options(10)
	opts.TestingKnobs.OnApply = first.Hook
	c, err := metalog.Open(ctx, l, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 35 {
		if _, err := c.Propose(ctx, catalog.RegisterNode{Node: catalog.NodeID(i%3 + 1), ExpectEpoch: uint64(i / 3)}); err != nil {
			t.Fatal(err)
		}
	}
	metalogtest.WaitFor(t, "snapshot at 30", func() bool { i, _, _ := l.LoadSnapshot(ctx); return i == 30 })
	want := metalogtest.EncodeView(t, c.View())
	c.Close()
	// Truncated through the snapshot before 30 (10 or 20: the snapshot
	// goroutine skips a view when a newer one is waiting).
	if tr := l.Truncated(); tr != 10 && tr != 20 {
		t.Fatalf("truncated through %d, want 10 or 20", tr)
	}

	// Restart: the snapshot at 30, then entries 31..35 and nothing else.
	var second metalogtest.ApplyLog
	opts.TestingKnobs.OnApply = second.Hook
	c2 := metalogtest.OpenCatalog(t, l, opts)
	if got := metalogtest.EncodeView(t, c2.View()); !bytes.Equal(got, want) {
		t.Fatalf("view after restart differs:\n%s\nwant\n%s", got, want)
	}
	if !slices.Equal(second.Indexes(), []uint64{31, 32, 33, 34, 35}) {
		t.Fatalf("after restart applied %v, want 31..35", second.Indexes())
	}
	// And it carries on.
	out, err := c2.Propose(ctx, metalogtest.CreateTable("after-restart"))
	if err != nil || out.Index != 36 {
		t.Fatalf("Propose after restart = %+v, %v", out, err)
	}
}

// TestLaggingCatalogReloadsSnapshot holds one catalog's tail back while
// another appends past two snapshots; the entries it needs are truncated, so
// it loads the snapshot and carries on from there.
func TestLaggingCatalogReloadsSnapshot(t *testing.T) {
	ctx := metalogtest.Context(t, 60*time.Second)
	l := metalog.NewMemLog()
	defer l.Close()
	a := metalogtest.OpenCatalog(t, l, metalogtest.Options(5))
	if _, err := a.Propose(ctx, catalog.RegisterNode{Node: 1}); err != nil {
		t.Fatal(err)
	}

	release := make(chan struct{})
	stalled := make(chan struct{})
	var once sync.Once
	var reloaded []uint64
	var mu sync.Mutex
	opts := metalogtest.Options(5)
	opts.TestingKnobs.OnApply = func(index uint64, entry []byte, out catalog.Outcome) {
		if index == 2 {
			once.Do(func() { close(stalled); <-release }) // the tail goroutine stalls at 2
		}
	}
	opts.TestingKnobs.OnReload = func(index uint64) {
		mu.Lock()
		reloaded = append(reloaded, index)
		mu.Unlock()
	}
	b := metalogtest.OpenCatalog(t, l, opts)

	if _, err := a.Propose(ctx, metalogtest.CreateTable("t0")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-stalled:
	case <-ctx.Done():
		t.Fatal("b never applied entry 2")
	}
	// a saves snapshots while b is stuck. Saves coalesce (a busy saver skips
	// to the newest view), and a save truncates only through the previous
	// snapshot, so propose until the entries b needs next are gone.
	for i := 1; l.Truncated() < 3; i++ {
		if _, err := a.Propose(ctx, metalogtest.CreateTable(fmt.Sprintf("t%d", i))); err != nil {
			t.Fatal(err)
		}
		if i > 1000 {
			t.Fatalf("the log was not truncated past entry 3 after %d entries", i)
		}
	}
	close(release)
	head, _ := l.Head(ctx)
	if err := b.WaitIndex(ctx, head); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reloaded) == 0 {
		t.Fatal("the lagging catalog did not reload the snapshot")
	}
	if !bytes.Equal(metalogtest.EncodeView(t, a.View()), metalogtest.EncodeView(t, b.View())) {
		t.Fatal("views differ after the reload")
	}
}

func TestCorruptEntryStopsCatalog(t *testing.T) {
	ctx := metalogtest.Context(t, 10*time.Second)
	l := metalog.NewMemLog()
	defer l.Close()
	c := metalogtest.OpenCatalog(t, l, metalogtest.Options(0))
	if _, err := c.Propose(ctx, catalog.RegisterNode{Node: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, []byte{9, 9, 9}); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitIndex(ctx, 2); err == nil || !bytes.Contains([]byte(err.Error()), []byte("entry 2")) {
		t.Fatalf("WaitIndex past a corrupt entry = %v, want an error naming entry 2", err)
	}
	if _, err := c.Propose(ctx, catalog.RegisterNode{Node: 2}); err == nil {
		t.Fatal("Propose on a stopped catalog succeeded")
	}
	if c.AppliedIndex() != 1 {
		t.Fatalf("applied %d, want 1", c.AppliedIndex())
	}
}

func TestProposeAfterClose(t *testing.T) {
	ctx := metalogtest.Context(t, 10*time.Second)
	l := metalog.NewMemLog()
	defer l.Close()
	c, err := metalog.Open(ctx, l, metalogtest.Options(0))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	c.Close()
	if _, err := c.Propose(ctx, catalog.RegisterNode{Node: 1}); !errors.Is(err, metalog.ErrClosed) {
		t.Fatalf("Propose after Close = %v, want ErrClosed", err)
	}
	if err := c.WaitIndex(ctx, 1); !errors.Is(err, metalog.ErrClosed) {
		t.Fatalf("WaitIndex after Close = %v, want ErrClosed", err)
	}
}
