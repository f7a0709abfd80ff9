package buckets

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestRetry(t *testing.T) {
	opening := fmt.Errorf("bucket 7 is opening on this node: %w", ErrUnavailable)
	moved := &NotLeaderError{Bucket: 7, Leader: 2, To: "n2:1"}
	lost := fmt.Errorf("bucket 7: %w: %w", ErrUnavailable, &StateLostError{Bucket: 7})
	disk := errors.New("disk on fire")
	unknown := fmt.Errorf("bucket 7 at n2:1: %w", ErrUnknownOutcome)
	for _, tc := range []struct {
		name string
		wait time.Duration
		// errs are the errors of the tries, in order; after the last, every
		// try fails with it again.
		errs []error
		// done says a try that fails with this error is done.
		done      error
		wantErr   error // compared with errors.Is; nil means success
		wantTries int   // 0: more than one, as many as wait allows
	}{
		{name: "success at once", wait: time.Second, errs: []error{nil}, wantTries: 1},
		{name: "opening, then success", wait: time.Second, errs: []error{opening, opening, nil}, wantTries: 3},
		{name: "moved, then success", wait: time.Second, errs: []error{moved, nil}, wantTries: 2},
		{name: "not retryable", wait: time.Second, errs: []error{opening, disk, nil}, wantErr: disk, wantTries: 2},
		{name: "state lost stops at once", wait: time.Second, errs: []error{lost, nil}, wantErr: ErrStateLost, wantTries: 1},
		{name: "done with a retryable error", wait: time.Second, errs: []error{unknown, nil}, done: unknown, wantErr: ErrUnknownOutcome, wantTries: 1},
		{name: "deadline", wait: 60 * time.Millisecond, errs: []error{opening}, wantErr: ErrUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tries := 0
			start := time.Now()
			err := Retry(context.Background(), tc.wait, func() (bool, error) {
				err := tc.errs[min(tries, len(tc.errs)-1)]
				tries++
				return err != nil && err == tc.done, err
			})
			elapsed := time.Since(start)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Retry = %v, want %v", err, tc.wantErr)
			}
			switch {
			case tc.wantTries == 0 && tries < 2:
				t.Errorf("%d tries before the deadline, want several", tries)
			case tc.wantTries != 0 && tries != tc.wantTries:
				t.Errorf("%d tries, want %d", tries, tc.wantTries)
			}
			if minWait := time.Duration(tries-1) * RetryPause; elapsed < minWait {
				t.Errorf("%d tries took %v, want at least %v (a pause between two)", tries, elapsed, minWait)
			}
			if tc.wantTries == 0 && elapsed < tc.wait {
				t.Errorf("gave up after %v, before the wait of %v", elapsed, tc.wait)
			}
		})
	}
}

func TestRetryContextCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	tries := 0
	err := Retry(ctx, time.Minute, func() (bool, error) {
		tries++
		if tries == 2 {
			cancel()
		}
		return false, ErrUnavailable
	})
	if !errors.Is(err, context.Canceled) || tries != 2 {
		t.Fatalf("Retry = %v after %d tries, want %v after 2", err, tries, context.Canceled)
	}
}

func TestRetryBackoff(t *testing.T) {
	backoff := Backoff{First: 5 * time.Millisecond, Max: 20 * time.Millisecond}
	want := []time.Duration{5, 10, 20, 20} // ms, the pauses before tries 2 to 5
	var at []time.Time
	err := RetryBackoff(context.Background(), time.Minute, backoff, func() (bool, error) {
		at = append(at, time.Now())
		if len(at) <= len(want) {
			return false, ErrUnavailable
		}
		return true, nil
	})
	if err != nil || len(at) != len(want)+1 {
		t.Fatalf("RetryBackoff = %v after %d tries, want success after %d", err, len(at), len(want)+1)
	}
	for i, w := range want {
		// A timer fires no earlier than asked; later is the scheduler's.
		if gap := at[i+1].Sub(at[i]); gap < w*time.Millisecond {
			t.Errorf("pause before try %d: %v, want at least %v", i+2, gap, w*time.Millisecond)
		}
	}
}
