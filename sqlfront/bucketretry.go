package sqlfront

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/minkdb/mink/buckets"
)

// A statement reaches a bucket here when this node leads it, or at its
// leader through Remote (which follows Flight redirects itself); while
// the bucket is opening, or the view here has not caught up with a move,
// it tries again for a while. These are the pieces every such caller
// (reads, appends, primary-key writes and lookups) shares.

// errRegistering is the error of a node that has no bucket manager: it
// lost its registration and is registering again.
var errRegistering = fmt.Errorf("this node is registering again: %w", buckets.ErrUnavailable)

// bucketRetryPause is the pause between two tries at a bucket.
const bucketRetryPause = 20 * time.Millisecond

// retryBucket calls try until it is done, or until its error is not
// retryable or wait has passed since the first call, pausing
// bucketRetryPause between calls. try returns done with an error to
// return as it is (nil, or a failure a retry cannot mend even though
// retryable says it might).
func retryBucket(ctx context.Context, wait time.Duration, try func() (done bool, err error)) error {
	deadline := time.Now().Add(wait)
	for {
		done, err := try()
		if done || err == nil || !retryable(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(bucketRetryPause):
		}
	}
}

// retryable reports whether a bucket error may clear up by itself: the
// bucket is opening, or the view here has not caught up with a move. A
// primary-key bucket whose state is lost (buckets.ErrStateLost) stays
// unavailable until an operator repairs its snapshots, so the statement
// fails at once instead of waiting out BucketWait.
func retryable(err error) bool {
	if errors.Is(err, buckets.ErrStateLost) {
		return false
	}
	return errors.Is(err, buckets.ErrUnavailable) || errors.Is(err, buckets.ErrNotLeader)
}

// ledElsewhere returns the Flight address of a bucket's leader when err
// says another node leads it and this front end can reach that node (it
// has a Remote, and the view names the leader's address).
func (f *Frontend) ledElsewhere(err error) (string, bool) {
	var nle *buckets.NotLeaderError
	if errors.As(err, &nle) && f.cfg.Remote != nil && nle.To != "" {
		return nle.To, true
	}
	return "", false
}
