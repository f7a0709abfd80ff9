package client

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow/flight"

	"github.com/minkdb/mink/internal/flightwire"
)

// bucketRoute says where a request for one bucket of a table goes.
type bucketRoute struct {
	table  string
	bucket uint64
	// addr, if not "", is where the first call goes (a read's endpoint
	// location); "" means the cached leader.
	addr string
	// sticky keeps later calls at the node the last one reached (where
	// the redirects led) until atLeader forgets it; otherwise every
	// attempt calls the cached leader, read again.
	sticky bool
	// noLeader ends "bucket <id> of table <name> ...", the error retried
	// while the cluster names no leader.
	noLeader string
}

// failStep is what a request does after a call failed with anything but
// a redirect it followed.
type failStep int

const (
	// giveUp returns the error.
	giveUp failStep = iota
	// retryHere pauses, then calls the same node again (the bucket is
	// opening there).
	retryHere
	// retryLeader forgets the node as the bucket's leader, pauses, then
	// calls the leader the cache or the cluster names.
	retryLeader
)

// atLeader runs one request at the leader of a bucket. call makes one
// attempt at addr: done with its error (nil, or one to return as it is),
// or not done with a failure. A NotLeader failure is followed to the
// leader it names, up to Options.MaxRedirects in a row, and the cache
// learns that leader; failed says what to do after any other failure,
// and a redirect that was not followed, with the error to return or, on a
// retry, to give up with when the call's deadline comes first. Retries
// pause with newRetry's backoff, and the count of redirects starts again
// after each pause. A failure to make a client for a node ends the
// request.
func (c *Client) atLeader(ctx context.Context, route bucketRoute,
	call func(ctx context.Context, fc flight.FlightServiceClient, addr string) (done bool, err error),
	failed func(addr string, err error) (failStep, error)) error {
	r := c.newRetry(ctx)
	done := false
	redirects := flightwire.Redirects{
		Max: c.opts.MaxRedirects,
		To: func(err error) (string, bool) {
			if done {
				return "", false
			}
			return flightwire.RedirectTarget(err)
		},
		Followed: func(to string) { c.setLeader(route.bucket, to) },
	}
	addr := route.addr
	for {
		if addr == "" {
			addr = c.leader(route.bucket)
		}
		if addr == "" {
			if _, err := c.table(ctx, route.table, true); err != nil {
				return err
			}
			if addr = c.leader(route.bucket); addr == "" {
				if err := r.wait(fmt.Errorf("bucket %d of table %q %s", route.bucket, route.table, route.noLeader)); err != nil {
					return err
				}
				continue
			}
		}
		at, err := redirects.Follow(ctx, addr, func(ctx context.Context, addr string) error {
			fc, err := c.flightClient(addr)
			if err != nil {
				done = true
				return err
			}
			done, err = call(ctx, fc, addr)
			return err
		})
		if err == nil || done {
			return err
		}
		step, err := failed(at, err)
		switch step {
		case giveUp:
			return err
		case retryHere:
			if !route.sticky {
				at = ""
			}
			addr = at
		case retryLeader:
			c.forgetLeader(route.bucket, at)
			addr = ""
		}
		if err := r.wait(err); err != nil {
			return err
		}
	}
}
