package metalog_test

import (
	"errors"
	"testing"
	"time"

	"github.com/minkdb/mink/metalog"
	"github.com/minkdb/mink/metalog/metalogtest"
)

func TestMemLogConformance(t *testing.T) {
	metalogtest.LogConformance(t, func(t *testing.T) metalog.Log {
		l := metalog.NewMemLog()
		t.Cleanup(func() { l.Close() })
		return l
	})
}

func TestMemLogFaults(t *testing.T) {
	ctx := metalogtest.Context(t, 10*time.Second)
	l := metalog.NewMemLog()
	defer l.Close()
	lost := errors.New("response lost")
	l.SetAppendFault(func(first uint64, entries [][]byte) (bool, error) { return true, lost })
	if _, err := l.Append(ctx, []byte("a")); !errors.Is(err, lost) {
		t.Fatalf("Append = %v, want the injected error", err)
	}
	l.SetAppendFault(func(first uint64, entries [][]byte) (bool, error) { return false, lost })
	if _, err := l.Append(ctx, []byte("b")); !errors.Is(err, lost) {
		t.Fatalf("Append = %v, want the injected error", err)
	}
	l.SetAppendFault(nil)
	if i, err := l.Append(ctx, []byte("c")); err != nil || i != 2 {
		t.Fatalf("Append = %d, %v; want 2 (the committed-but-failed entry is 1)", i, err)
	}
	l.Close()
	if _, err := l.Append(ctx, []byte("d")); !errors.Is(err, metalog.ErrNotAppended) || !errors.Is(err, metalog.ErrClosed) {
		t.Fatalf("Append after Close = %v", err)
	}
}
