package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/minkdb/mink/internal/flightwire"
)

// ScanOptions select what Scan reads.
type ScanOptions struct {
	// Columns projects, in this order; nil means every column.
	Columns []string
	// Partitions restricts a partitioned table to these partition values
	// (canonical text, as in docs/flight.md); nil means all.
	Partitions []string
	// Changelog reads the changelog of a primary-key table instead of its
	// current state: _change_type (+I, -U, +U, -D) and the table's
	// columns, one offset per record, each bucket up to its acknowledged
	// end when its read starts. Columns then name changelog columns.
	Changelog bool
}

// Scan reads a table: every bucket's rows up to the end it had when Scan
// was called, read from all buckets in parallel (Options.ScanParallelism
// at a time). Batches of different buckets interleave in no particular
// order; within a bucket they come in offset order. A bucket whose leader
// moves during the scan is resumed at the new leader after the rows already
// returned.
//
// For a primary-key table Scan reads the current state: every bucket's
// rows in key order, each bucket from one consistent state at its leader.
// A state read cannot resume part way: if a bucket's leader moves after
// some of its rows were returned, the scan fails (Err); before that, it is
// retried at the new leader. With ScanOptions.Changelog it reads the
// changelog, which resumes like a log table's rows.
//
// The reader must be released; releasing it early cancels the reads.
// Cancelling ctx also ends them (Err reports it).
func (c *Client) Scan(ctx context.Context, table string, opts ScanOptions) (array.RecordReader, error) {
	var endpoints []*flight.FlightEndpoint
	var schema *arrow.Schema
	resumable := true
	if opts.Changelog {
		var err error
		if endpoints, schema, err = c.changelogEndpoints(ctx, table, opts); err != nil {
			return nil, err
		}
	} else {
		desc := flightwire.Command{Table: table, Columns: opts.Columns, Partitions: opts.Partitions}.Descriptor()
		var info *flight.FlightInfo
		err := c.anyNode(ctx, func(fc flight.FlightServiceClient) error {
			var err error
			info, err = fc.GetFlightInfo(ctx, desc)
			return err
		})
		if err != nil {
			return nil, tableErr(table, err)
		}
		if schema, err = flight.DeserializeSchema(info.Schema, memory.DefaultAllocator); err != nil {
			return nil, fmt.Errorf("table %q: schema: %w", table, err)
		}
		m, err := c.table(ctx, table, false)
		if err != nil {
			return nil, err
		}
		resumable = len(m.info.PrimaryKey) == 0
		endpoints = info.Endpoint
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &scanReader{schema: schema, ch: make(chan arrow.RecordBatch, c.opts.ScanParallelism), cancel: cancel}
	r.refs.Store(1)
	sem := make(chan struct{}, c.opts.ScanParallelism)
	var wg sync.WaitGroup
	for _, ep := range endpoints {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				r.setErr(ctx.Err())
				return
			}
			defer func() { <-sem }()
			if err := c.readEndpoint(ctx, table, ep, resumable, r.ch); err != nil {
				r.setErr(err)
				cancel()
			}
		}()
	}
	go func() {
		wg.Wait()
		close(r.ch)
	}()
	return r, nil
}

// readEndpoint streams one endpoint's rows into ch, following redirects
// and resuming after the rows sent when the bucket moves; a ticket that is
// not resumable (a primary-key bucket's state) is retried only while no
// row of it was sent.
func (c *Client) readEndpoint(ctx context.Context, table string, ep *flight.FlightEndpoint, resumable bool, ch chan<- arrow.RecordBatch) error {
	t, err := flightwire.ParseTicket(ep.GetTicket().GetTicket())
	if err != nil {
		return err
	}
	addr := ""
	if locs := ep.GetLocation(); len(locs) > 0 {
		addr, _ = flightwire.ParseLocation(locs[0].GetUri())
	}
	sent := false
	route := bucketRoute{table: table, bucket: t.Bucket, addr: addr, sticky: true, noLeader: "has no leader"}
	return c.atLeader(ctx, route, func(ctx context.Context, fc flight.FlightServiceClient, addr string) (bool, error) {
		err := flightwire.GetStream(ctx, fc, t.Encode(), nil, func(rec arrow.RecordBatch, meta flightwire.BatchMeta) error {
			rec.Retain()
			select {
			case ch <- rec:
			case <-ctx.Done():
				rec.Release()
				return ctx.Err()
			}
			t.From = meta.Offset + uint64(rec.NumRows())
			sent = true
			return nil
		})
		if err == nil {
			return true, nil
		}
		if sent && !resumable {
			return true, fmt.Errorf("read the state of bucket %d of table %q at %s: failed after some of its rows were returned (a state read cannot resume): %w",
				t.Bucket, table, addr, err)
		}
		return false, err
	}, func(addr string, err error) (failStep, error) {
		retry := fmt.Errorf("read bucket %d of table %q: %w", t.Bucket, table, err)
		if _, ok := flightwire.RedirectOf(err); ok {
			return retryLeader, retry
		}
		if flightwire.IsUnavailable(err) {
			if !flightwire.IsBucketUnavailable(err) {
				return retryLeader, retry
			}
			return retryHere, retry
		}
		return giveUp, fmt.Errorf("read bucket %d of table %q at %s: %w", t.Bucket, table, addr, err)
	})
}

// scanReader is the array.RecordReader Scan returns.
type scanReader struct {
	refs   atomic.Int64
	schema *arrow.Schema
	ch     chan arrow.RecordBatch // closed when every bucket is read
	cancel context.CancelFunc
	cur    arrow.RecordBatch

	mu  sync.Mutex // guards err
	err error
}

var _ array.RecordReader = (*scanReader)(nil)

func (r *scanReader) setErr(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil || errors.Is(r.err, context.Canceled) {
		r.err = err
	}
}

func (r *scanReader) Retain() { r.refs.Add(1) }

// Release cancels the reads, once the last reference is released, and
// waits for them to stop.
func (r *scanReader) Release() {
	if r.refs.Add(-1) != 0 {
		return
	}
	r.cancel()
	for rec := range r.ch {
		rec.Release()
	}
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
}

func (r *scanReader) Schema() *arrow.Schema { return r.schema }

func (r *scanReader) Next() bool {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	rec, ok := <-r.ch
	if !ok {
		return false
	}
	r.cur = rec
	return true
}

func (r *scanReader) RecordBatch() arrow.RecordBatch { return r.cur }

// Record is RecordBatch.
//
// Deprecated: use RecordBatch.
func (r *scanReader) Record() arrow.RecordBatch { return r.cur }

// Err is the first error of the scan, once Next has returned false.
func (r *scanReader) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}
