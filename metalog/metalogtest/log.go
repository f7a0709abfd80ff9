package metalogtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/minkdb/mink/metalog"
)

// LogConformance checks the metalog.Log contract; run it in a test of every
// implementation. newLog returns an empty log
// (and is called once per subtest).
func LogConformance(t *testing.T, newLog func(t *testing.T) metalog.Log) {
	entry := func(i uint64) []byte { return fmt.Appendf(nil, "entry-%d", i) }

	t.Run("Empty", func(t *testing.T) {
		ctx := Context(t, 10*time.Second)
		l := newLog(t)
		if h, err := l.Head(ctx); err != nil || h != 0 {
			t.Fatalf("Head = %d, %v; want 0", h, err)
		}
		if i, d, err := l.LoadSnapshot(ctx); err != nil || i != 0 || d != nil {
			t.Fatalf("LoadSnapshot = %d, %q, %v; want 0, nil, nil", i, d, err)
		}
	})

	t.Run("AppendDense", func(t *testing.T) {
		ctx := Context(t, 30*time.Second)
		l := newLog(t)
		// Concurrent appenders get distinct, dense indexes.
		const writers, each = 6, 10
		var mu sync.Mutex
		got := map[uint64][]byte{}
		var wg sync.WaitGroup
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					data := fmt.Appendf(nil, "w%d-%d", w, i)
					index, err := l.Append(ctx, data)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					if _, dup := got[index]; dup {
						t.Errorf("index %d returned twice", index)
					}
					got[index] = data
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if h, err := l.Head(ctx); err != nil || h != writers*each {
			t.Fatalf("Head = %d, %v; want %d", h, err, writers*each)
		}
		var next uint64 = 1
		tctx, cancel := context.WithCancel(ctx)
		err := l.Tail(tctx, 1, func(index uint64, data []byte) error {
			if index != next {
				t.Fatalf("Tail delivered %d, want %d", index, next)
			}
			if !bytes.Equal(data, got[index]) {
				t.Fatalf("entry %d = %q, Append said %q", index, data, got[index])
			}
			next++
			if next > writers*each {
				cancel()
			}
			return nil
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Tail = %v, want context.Canceled", err)
		}
	})

	t.Run("AppendBatch", func(t *testing.T) {
		ctx := Context(t, 30*time.Second)
		l := newLog(t)
		if _, err := l.Append(ctx, entry(1)); err != nil {
			t.Fatal(err)
		}
		first, err := l.AppendBatch(ctx, [][]byte{entry(2), entry(3), entry(4)})
		if err != nil || first != 2 {
			t.Fatalf("AppendBatch = %d, %v; want 2", first, err)
		}
		if _, err := l.AppendBatch(ctx, nil); !errors.Is(err, metalog.ErrNotAppended) {
			t.Fatalf("AppendBatch of nothing = %v, want ErrNotAppended", err)
		}
		if i, err := l.Append(ctx, entry(5)); err != nil || i != 5 {
			t.Fatalf("Append after a batch = %d, %v; want 5", i, err)
		}
		CheckTail(t, l, 1, nil)
		tctx, cancel := context.WithCancel(ctx)
		defer cancel()
		l.Tail(tctx, 1, func(index uint64, data []byte) error {
			if !bytes.Equal(data, entry(index)) {
				t.Errorf("entry %d = %q", index, data)
			}
			if index == 5 {
				cancel()
			}
			return nil
		})
	})

	t.Run("TailWaitsAndStops", func(t *testing.T) {
		ctx := Context(t, 30*time.Second)
		l := newLog(t)
		for i := uint64(1); i <= 3; i++ {
			if _, err := l.Append(ctx, entry(i)); err != nil {
				t.Fatal(err)
			}
		}
		seen := make(chan uint64, 100)
		stop := errors.New("stop")
		done := make(chan error, 1)
		go func() {
			done <- l.Tail(ctx, 2, func(index uint64, data []byte) error {
				if !bytes.Equal(data, entry(index)) {
					return fmt.Errorf("entry %d = %q", index, data)
				}
				seen <- index
				if index == 6 {
					return stop
				}
				return nil
			})
		}()
		for want := uint64(2); want <= 3; want++ {
			if got := <-seen; got != want {
				t.Fatalf("got %d, want %d", got, want)
			}
		}
		// Tail is now waiting for entry 4.
		for i := uint64(4); i <= 7; i++ {
			if _, err := l.Append(ctx, entry(i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := <-done; err != stop {
			t.Fatalf("Tail = %v, want fn's error", err)
		}
		for want := uint64(4); want <= 6; want++ {
			if got := <-seen; got != want {
				t.Fatalf("got %d, want %d", got, want)
			}
		}
		// Tail past the head waits until ctx ends.
		tctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		err := l.Tail(tctx, 8, func(uint64, []byte) error { return errors.New("no entry 8 yet") })
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Tail past the head = %v, want deadline exceeded", err)
		}
	})

	t.Run("SnapshotAndTruncation", func(t *testing.T) {
		ctx := Context(t, 30*time.Second)
		l := newLog(t)
		for i := uint64(1); i <= 12; i++ {
			if _, err := l.Append(ctx, entry(i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.SaveSnapshot(ctx, 5, []byte("view@5")); err != nil {
			t.Fatal(err)
		}
		CheckSnapshot(t, l, 5, "view@5")
		// An older snapshot is not stored over a newer one.
		if err := l.SaveSnapshot(ctx, 3, []byte("view@3")); err != nil {
			t.Fatal(err)
		}
		CheckSnapshot(t, l, 5, "view@5")
		// The first snapshot truncates nothing; the second truncates up to
		// the first.
		CheckTail(t, l, 1, nil)
		if err := l.SaveSnapshot(ctx, 10, []byte("view@10")); err != nil {
			t.Fatal(err)
		}
		CheckSnapshot(t, l, 10, "view@10")
		for _, from := range []uint64{1, 3, 5} {
			CheckTail(t, l, from, metalog.ErrTruncated)
		}
		CheckTail(t, l, 6, nil)
		if h, err := l.Head(ctx); err != nil || h != 12 {
			t.Fatalf("Head after truncation = %d, %v; want 12", h, err)
		}
		// Appends continue at the head.
		if i, err := l.Append(ctx, entry(13)); err != nil || i != 13 {
			t.Fatalf("Append after truncation = %d, %v; want 13", i, err)
		}
	})
}

// CheckSnapshot fails t unless l holds the snapshot data at index.
func CheckSnapshot(t *testing.T, l metalog.Log, index uint64, data string) {
	t.Helper()
	i, d, err := l.LoadSnapshot(Context(t, 10*time.Second))
	if err != nil || i != index || string(d) != data {
		t.Fatalf("LoadSnapshot = %d, %q, %v; want %d, %q", i, d, err, index, data)
	}
}

// CheckTail tails from `from` until the head and checks the error (nil: the
// entries are there and dense).
func CheckTail(t *testing.T, l metalog.Log, from uint64, want error) {
	t.Helper()
	ctx := Context(t, 10*time.Second)
	head, err := l.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := from
	reached := errors.New("reached head")
	err = l.Tail(tctx, from, func(index uint64, data []byte) error {
		if index != next {
			return fmt.Errorf("got %d, want %d", index, next)
		}
		next++
		if index == head {
			return reached
		}
		return nil
	})
	if want == nil {
		if err != reached {
			t.Fatalf("Tail(%d) = %v, want entries up to %d", from, err, head)
		}
		return
	}
	if !errors.Is(err, want) {
		t.Fatalf("Tail(%d) = %v, want %v", from, err, want)
	}
}
