// Package backoff paces the retries of the metadata driver (metalog) and its
// etcd backends (metalog/etcdlog): the reads, watches and campaigns that
// retry until their context ends. It holds no state and starts no
// goroutines.
package backoff

import (
	"context"
	mathrand "math/rand/v2"
	"time"
)

// Delay is the wait before retry number attempt (1-based): 50 ms doubling up
// to 2 s, each drawn at random from the upper half, so that nodes retrying
// together spread out.
func Delay(attempt int) time.Duration {
	d := 50 * time.Millisecond << min(attempt-1, 6)
	d = min(d, 2*time.Second)
	return d/2 + mathrand.N(d/2+1)
}

// Sleep waits for d, or until ctx ends, in which case it returns ctx.Err().
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
