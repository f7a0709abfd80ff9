package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/minkdb/mink/buckets/routing"
	"github.com/minkdb/mink/internal/flightwire"
)

// AppendTable appends the rows of rec to a log table and returns once
// every row is durable.
//
// rec has the table's columns, matched by name in any order, with the
// Arrow types of docs/sql-types.md (the server checks them as COPY does).
// Rows are routed exactly as the server routes them: by partition value
// (creating new partitions), then by the hash of the bucket key, or, for a
// table without one, the whole part to the next bucket in turn. Each
// bucket's part goes to the bucket's leader; the parts are sent in
// parallel.
//
// Buckets are written independently: on error, some parts may be durable.
// AppendTable retries a part only when nothing of it can have been written
// (the leader answered NotLeader or Unavailable, or could not be reached),
// so every row of a successful call is stored exactly once. When a
// connection breaks during a call, or the server cannot tell, it returns
// an error wrapping ErrUnknownOutcome instead: the part may or may not be
// stored, and retrying blindly may store it twice.
func (c *Client) AppendTable(ctx context.Context, table string, rec arrow.RecordBatch) error {
	if rec.NumRows() == 0 {
		return nil
	}
	m, err := c.table(ctx, table, false)
	if err != nil {
		return err
	}
	if len(m.info.PrimaryKey) > 0 {
		return fmt.Errorf("table %q has a primary key (use PutTable): %w", table, ErrWrongKind)
	}
	return c.writeParts(ctx, m, rec)
}

// writeParts routes rec and sends each bucket's part to its leader, in
// parallel.
func (c *Client) writeParts(ctx context.Context, m *tableMeta, rec arrow.RecordBatch) error {
	table := m.info.Name
	parts, err := c.route(ctx, m, rec)
	if err != nil {
		return fmt.Errorf("write to table %q: %w", table, err)
	}
	defer func() {
		for _, p := range parts {
			p.rec.Release()
		}
	}()
	if len(parts) == 1 {
		return c.sendBucket(ctx, table, parts[0].bucket, []arrow.RecordBatch{parts[0].rec})
	}
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.sendBucket(ctx, table, p.bucket, []arrow.RecordBatch{p.rec})
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// part is the rows of a batch that go to one bucket.
type part struct {
	bucket uint64
	rec    arrow.RecordBatch
}

// roundRobin picks the bucket of a batch of a table without a bucket key.
var roundRobin atomic.Uint64

// route splits rec by partition and bucket, as the server does
// (server/flightsvc, sqlfront). The caller releases the parts.
func (c *Client) route(ctx context.Context, m *tableMeta, rec arrow.RecordBatch) (parts []part, err error) {
	defer func() {
		if err != nil {
			for _, p := range parts {
				p.rec.Release()
			}
			parts = nil
		}
	}()
	keyCols := make([]int, len(m.info.BucketKey))
	for i, k := range m.info.BucketKey {
		if keyCols[i], err = columnIndex(rec.Schema(), k); err != nil {
			return nil, err
		}
	}
	toBuckets := func(ids []uint64, r arrow.RecordBatch) error {
		if len(ids) == 0 {
			return fmt.Errorf("no buckets")
		}
		if len(keyCols) == 0 {
			r.Retain()
			parts = append(parts, part{bucket: ids[roundRobin.Add(1)%uint64(len(ids))], rec: r})
			return nil
		}
		split, err := routing.Split(ctx, r, keyCols, len(ids))
		if err != nil {
			return err
		}
		for i, s := range split {
			if s != nil {
				parts = append(parts, part{bucket: ids[i], rec: s})
			}
		}
		return nil
	}
	if m.info.PartitionBy == "" {
		return parts, toBuckets(m.buckets, rec)
	}
	col, err := columnIndex(rec.Schema(), m.info.PartitionBy)
	if err != nil {
		return nil, err
	}
	byValue, err := routing.SplitByPartition(ctx, rec, col)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, p := range byValue {
			p.Record.Release()
		}
	}()
	for _, p := range byValue {
		ids, ok := m.partitions[p.Value]
		if !ok {
			if m, err = c.createPartition(ctx, m.info.Name, p.Value); err != nil {
				return parts, err
			}
			if ids, ok = m.partitions[p.Value]; !ok {
				return parts, fmt.Errorf("partition %q was not created", p.Value)
			}
		}
		if err := toBuckets(ids, p.Record); err != nil {
			return parts, err
		}
	}
	return parts, nil
}

func columnIndex(s *arrow.Schema, name string) (int, error) {
	idx := s.FieldIndices(name)
	if len(idx) != 1 {
		return 0, fmt.Errorf("the batch has no column %q (or more than one)", name)
	}
	return idx[0], nil
}

// sendBucket writes recs to one bucket at its leader: the cached one, or
// the one a redirect names, or the one the cluster's view names after the
// cached one could not be reached. Unavailable answers are retried with
// backoff until the call's deadline.
func (c *Client) sendBucket(ctx context.Context, table string, bucket uint64, recs []arrow.RecordBatch) error {
	reauthenticated := false
	route := bucketRoute{table: table, bucket: bucket, noLeader: "has no leader yet"}
	return c.atLeader(ctx, route, func(ctx context.Context, fc flight.FlightServiceClient, addr string) (bool, error) {
		for {
			acks, err := flightwire.PutBatches(ctx, fc, flightwire.Command{Bucket: bucket}.Descriptor(), recs)
			recs = recs[min(len(acks), len(recs)):]
			if err == nil {
				if len(recs) > 0 {
					return true, fmt.Errorf("bucket %d at %s: %d batches not acknowledged", bucket, addr, len(recs))
				}
				return true, nil
			}
			if status.Code(err) == codes.Unauthenticated && !reauthenticated && c.opts.User != "" && !flightwire.NotSent(err) {
				// The token expired: the node refused the call before
				// reading a batch, and the connection handshakes again
				// (auth.go).
				reauthenticated = true
				continue
			}
			return false, err
		}
	}, func(addr string, err error) (failStep, error) {
		// Only answers that say the unacknowledged batches were not
		// appended are retried; anything else could store them twice.
		retry := fmt.Errorf("bucket %d at %s: %w", bucket, addr, err)
		switch _, redirected := flightwire.RedirectOf(err); {
		case redirected:
			// Not followed: too many in a row, or to a bad location.
			return retryLeader, retry
		case flightwire.IsBucketUnavailable(err):
			// Opening on this node: retry here.
			return retryHere, retry
		case flightwire.NotSent(err) && flightwire.IsUnavailable(err):
			// The node could not be reached: ask the cluster who leads the
			// bucket now.
			return retryLeader, retry
		case flightwire.IsOutcomeUnknown(err), !flightwire.NotSent(err) && (flightwire.IsUnavailable(err) || ctx.Err() != nil):
			return giveUp, fmt.Errorf("bucket %d at %s: %w: %w", bucket, addr, ErrUnknownOutcome, err)
		default:
			if flightwire.IsNotFound(err) {
				c.forgetTable(table)
			}
			return giveUp, retry
		}
	})
}
