package buckets

import (
	"context"
	"errors"
	"time"

	"github.com/minkdb/mink/buckets/s3stream"
)

// A caller reaches a bucket through this node's Manager when this node
// leads it, or at its leader over Flight. While the bucket is opening, or
// the view here has not caught up with a move, it tries again for a
// while: Retry is that loop, for every such caller (sqlfront's reads,
// appends and primary-key writes; flightsvc's routed writes and forwards).
// What a try does (here, at the leader, following a redirect) is the
// caller's; when to try again is Retry's.

// RetryPause is the pause between two tries at a bucket.
const RetryPause = 20 * time.Millisecond

// Backoff paces the tries of RetryBackoff: it pauses First after the first
// try and doubles the pause after each further one, up to Max (at least
// First).
type Backoff struct {
	First, Max time.Duration
}

// Retry calls try until it is done, or until its error is not Retryable
// or wait has passed since the first call, pausing RetryPause between
// calls. try returns done with an error to return as it is (nil, or a
// failure a retry cannot mend even though Retryable says it might, such as
// ErrUnknownOutcome, or a redirect the caller follows itself).
//
// Retry returns nil, the error of the last call, or ctx.Err() if ctx ends
// during a pause. A Retryable error that try did not return as done means
// wait has passed.
func Retry(ctx context.Context, wait time.Duration, try func() (done bool, err error)) error {
	return RetryBackoff(ctx, wait, Backoff{First: RetryPause, Max: RetryPause}, try)
}

// RetryBackoff is Retry pausing as backoff says.
func RetryBackoff(ctx context.Context, wait time.Duration, backoff Backoff, try func() (done bool, err error)) error {
	deadline := time.Now().Add(wait)
	pause := backoff.First
	for {
		done, err := try()
		if done || err == nil || !Retryable(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
		pause = min(2*pause, backoff.Max)
	}
}

// Retryable reports whether a bucket error may clear up by itself: the
// bucket is opening (ErrUnavailable), or the view here has not caught up
// with a move (ErrNotLeader). A primary-key bucket whose state is lost
// (ErrStateLost) stays unavailable until an operator repairs its
// snapshots, so a caller fails at once instead of waiting out its wait;
// so does a bucket whose recovery found a corrupt object
// (s3stream.ErrCorrupt) until it is restored.
func Retryable(err error) bool {
	if errors.Is(err, ErrStateLost) || errors.Is(err, s3stream.ErrCorrupt) {
		return false
	}
	return errors.Is(err, ErrUnavailable) || errors.Is(err, ErrNotLeader)
}
