package flightsvc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/minkdb/mink/buckets"
	"github.com/minkdb/mink/buckets/routing"
	"github.com/minkdb/mink/buckets/s3stream"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/flightwire"
	"github.com/minkdb/mink/internal/sqltypes"
	"github.com/minkdb/mink/kv/kvcodec"
)

// DoPut writes batches to a table (routed and forwarded here) or to one
// bucket led by this node. See docs/flight.md for the acknowledgements. It
// needs INSERT on the table (INSERT and UPDATE on a primary-key table);
// parts forwarded to other nodes go with a token for the caller, and their
// leaders check again.
func (s *Service) DoPut(stream flight.FlightService_DoPutServer) error {
	rdr, err := flight.NewRecordReader(stream, ipc.WithAllocator(s.alloc))
	if err != nil {
		if errors.Is(err, io.EOF) {
			return status.Error(codes.InvalidArgument, "DoPut: the stream ended before its schema message")
		}
		return status.Errorf(codes.InvalidArgument, "DoPut: read the schema message: %v", err)
	}
	defer rdr.Release()
	cmd, err := flightwire.ParseDescriptor(rdr.LatestFlightDescriptor())
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	if len(cmd.Columns) > 0 || len(cmd.Partitions) > 0 {
		return status.Error(codes.InvalidArgument, "DoPut takes no columns or partitions: batches carry every column")
	}
	r, err := s.resolve(cmd)
	if err != nil {
		return err
	}
	if err := s.authorize(stream.Context(), r.table.id, writeNeed(r.table)); err != nil {
		return err
	}
	if r.table.primaryKey() && cmd.Bucket != 0 {
		return s.putBucketKV(stream, rdr, r.table, r.buckets[0])
	}
	if cmd.Bucket != 0 {
		return s.putBucket(stream, rdr, r.table, r.buckets[0].id)
	}
	return s.putTable(stream, rdr, r.table)
}

// putBucket appends every batch to bucket id, which this node must lead,
// and acknowledges each once it is durable, in order.
//
// The status it ends with tells the client what became of the batches it
// did not acknowledge: NotLeader, Unavailable (and any other error but
// OutcomeUnknown) mean none of them was appended, so they may be sent
// again elsewhere; OutcomeUnknown means some may have been.
func (s *Service) putBucket(stream flight.FlightService_DoPutServer, rdr *flight.Reader, t *table, id catalog.BucketID) error {
	ctx := stream.Context()
	m := s.cfg.Buckets()
	if m == nil {
		return flightwire.UnavailableStatus("this node is registering again", uint64(id))
	}
	lb, err := m.Bucket(id)
	if err != nil {
		return bucketStatus(id, err)
	}
	// The acknowledger waits for every queued append, in order, and sends
	// one PutResult each; it owns stream.Send. After a failure it keeps
	// waiting, to learn the outcome of every batch it will not acknowledge.
	type pending struct {
		p    *s3stream.PendingAppend
		rows int64
	}
	type outcome struct {
		acked   int
		err     error // the first failure
		unknown bool  // some unacknowledged batch may have been appended
	}
	queue := make(chan pending, 64)
	done := make(chan outcome, 1)
	var failed atomic.Bool
	go func() {
		var out outcome
		for q := range queue {
			offset := lb.End() // an empty batch takes no offsets
			if q.p != nil {
				var err error
				if offset, err = q.p.Wait(ctx); err != nil {
					failed.Store(true)
					out.unknown = out.unknown || errors.Is(err, s3stream.ErrUnknownOutcome)
					if out.err == nil {
						out.err = err
					}
					continue
				}
			}
			if out.err != nil {
				// Durable after a batch that failed: acknowledgements must
				// be a prefix, so this one stays unacknowledged, and the
				// client must not resend it.
				out.unknown = q.p != nil || out.unknown
				continue
			}
			body, _ := json.Marshal(flightwire.PutAck{Bucket: uint64(id), Offset: &offset, Rows: q.rows})
			if err := stream.Send(&flight.PutResult{AppMetadata: body}); err != nil {
				failed.Store(true)
				out.err = err // the client is gone
				continue
			}
			out.acked++
		}
		done <- out
	}()
	var appendErr error
	for !failed.Load() && rdr.Next() {
		rec, err := t.conform(rdr.RecordBatch())
		if err != nil {
			appendErr = toStatus(err)
			break
		}
		stored := sqltypes.Pad(rec, t.stored, nil)
		rec.Release()
		p, err := lb.AppendAsync(ctx, stored)
		rows := stored.NumRows()
		stored.Release()
		if err != nil {
			appendErr = s.appendFailed(m, id, err)
			break
		}
		queue <- pending{p: p, rows: rows}
	}
	close(queue)
	out := <-done
	switch {
	case out.unknown:
		return flightwire.OutcomeUnknownStatus(fmt.Sprintf("bucket %d: %d batches acknowledged; whether the next ones were appended is unknown: %v",
			id, out.acked, out.err), uint64(id))
	case out.err != nil:
		return s.appendFailed(m, id, out.err)
	case appendErr != nil:
		return appendErr
	}
	if err := rdr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return toStatus(fmt.Errorf("DoPut: read batches: %w", err))
	}
	return nil
}

// putBucketKV upserts every batch into primary-key bucket ref, which this
// node must lead: each batch is one atomic write (a later row of a key
// wins), acknowledged once durable like a log bucket's batch, with the
// changelog offset of its first record. Every row must route to this
// bucket (its partition, and the hash of its bucket key), or the batch
// fails with InvalidArgument and nothing of it is written: a key stored in
// the wrong bucket could never be found or replaced.
//
// The status it ends with says what became of the batches it did not
// acknowledge, as for a log bucket: OutcomeUnknown means the failed batch
// may have been applied; any other status, that none of them was.
func (s *Service) putBucketKV(stream flight.FlightService_DoPutServer, rdr *flight.Reader, t *table, ref bucketRef) error {
	ctx := stream.Context()
	id := ref.id
	m := s.cfg.Buckets()
	if m == nil {
		return flightwire.UnavailableStatus("this node is registering again", uint64(id))
	}
	b, err := m.KVBucket(id)
	if err != nil {
		return bucketStatus(id, err)
	}
	index, count := -1, 0
	s.cfg.Meta.Read(func(v *catalog.View) {
		ct, ok := v.Tables[t.id]
		if !ok {
			return
		}
		ids := ct.Buckets
		for _, p := range ct.Partitions {
			if slices.Contains(p.Buckets, id) {
				ids = p.Buckets
			}
		}
		index, count = slices.Index(ids, id), len(ids)
	})
	if index < 0 {
		return flightwire.NotFoundStatus(fmt.Sprintf("bucket %d is no longer a bucket of table %q", id, t.name), flightwire.ReasonNoSuchBucket, uint64(id))
	}
	codec := b.Codec()
	acked := 0
	for rdr.Next() {
		rec, err := t.conform(rdr.RecordBatch())
		if err != nil {
			return toStatus(err)
		}
		err = checkRoute(t, ref.partition, rec, index, count)
		var writes []kvcodec.Write
		if err == nil {
			if writes, err = codec.Writes(kvcodec.OpUpsert, rec); errors.Is(err, kvcodec.ErrNullKey) {
				err = status.Errorf(codes.InvalidArgument, "table %q: %v", t.name, err)
			}
		}
		rows := rec.NumRows()
		rec.Release()
		if err != nil {
			return toStatus(err)
		}
		offset := b.End()
		if len(writes) > 0 {
			if _, offset, err = b.Write(ctx, writes); err != nil {
				if errors.Is(err, buckets.ErrUnknownOutcome) {
					return flightwire.OutcomeUnknownStatus(fmt.Sprintf("bucket %d: %d batches acknowledged; whether the next was applied is unknown: %v",
						id, acked, err), uint64(id))
				}
				return kvWriteStatus(id, err)
			}
		}
		body, _ := json.Marshal(flightwire.PutAck{Bucket: uint64(id), Offset: &offset, Rows: rows})
		if err := stream.Send(&flight.PutResult{AppMetadata: body}); err != nil {
			return err // the client is gone
		}
		acked++
	}
	if err := rdr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return toStatus(fmt.Errorf("DoPut: read batches: %w", err))
	}
	return nil
}

// checkRoute fails unless every row of rec belongs to the bucket at index
// of count buckets of partition (the partition value; "" unpartitioned).
func checkRoute(t *table, partition string, rec arrow.RecordBatch, index, count int) error {
	if t.partCol >= 0 {
		col := rec.Column(t.partCol)
		for i := 0; i < int(rec.NumRows()); i++ {
			v, err := routing.PartitionValue(col, i)
			if err != nil {
				return status.Error(codes.InvalidArgument, err.Error())
			}
			if v != partition {
				return status.Errorf(codes.InvalidArgument, "row %d has partition value %q; the bucket belongs to partition %q", i, v, partition)
			}
		}
	}
	idx, err := routing.Buckets(rec, t.keyCols, count)
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	for i, b := range idx {
		if b != index {
			return status.Errorf(codes.InvalidArgument, "row %d hashes to bucket index %d of the table, not %d: route rows with buckets/routing", i, b, index)
		}
	}
	return nil
}

// appendFailed explains an append error on bucket id: NotLeader or
// Unavailable if the bucket moved or is closing, else the error itself.
func (s *Service) appendFailed(m *buckets.Manager, id catalog.BucketID, err error) error {
	if _, berr := m.Bucket(id); berr != nil {
		return bucketStatus(id, berr)
	}
	if errors.Is(err, s3stream.ErrClosed) || errors.Is(err, s3stream.ErrFenced) {
		return flightwire.UnavailableStatus(fmt.Sprintf("bucket %d: %v", id, err), uint64(id))
	}
	return toStatus(fmt.Errorf("append to bucket %d: %w", id, err))
}

// putTable routes every batch to partitions and buckets, appends the parts
// this node leads and forwards the others to their leaders, and sends one
// PutResult once every row is durable.
func (s *Service) putTable(stream flight.FlightService_DoPutServer, rdr *flight.Reader, t *table) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	w := s.newTableWriter(t)
	var rows int64
	for rdr.Next() {
		rec, err := t.conform(rdr.RecordBatch())
		if err != nil {
			cancel()
			w.wait(ctx)
			return toStatus(err)
		}
		rows += rec.NumRows()
		err = w.add(ctx, rec)
		rec.Release()
		if err != nil {
			cancel()
			w.wait(ctx)
			return toStatus(err)
		}
	}
	if err := rdr.Err(); err != nil && !errors.Is(err, io.EOF) {
		cancel()
		w.wait(ctx)
		return toStatus(fmt.Errorf("DoPut: read batches: %w", err))
	}
	if err := w.wait(ctx); err != nil {
		return toStatus(err)
	}
	body, _ := json.Marshal(flightwire.PutAck{Rows: rows})
	return stream.Send(&flight.PutResult{AppMetadata: body})
}

// roundRobin spreads batches of log tables without a bucket key over their
// buckets, one batch (per partition) to the next bucket, like sqlfront.
var roundRobin routing.RoundRobin

// tableWriter is one table-addressed write: local appends are queued
// (they share WAL objects), remote parts go to one forwarding goroutine per
// bucket, which keeps their order within the bucket.
type tableWriter struct {
	s     *Service
	t     *table
	local []*s3stream.PendingAppend
	// partitions caches partition value → bucket ids.
	partitions map[string][]catalog.BucketID
	remote     map[catalog.BucketID]chan arrow.RecordBatch
	wg         sync.WaitGroup

	mu struct {
		sync.Mutex
		err error // the first forwarding error
	}
}

func (s *Service) newTableWriter(t *table) *tableWriter {
	return &tableWriter{s: s, t: t, partitions: map[string][]catalog.BucketID{}, remote: map[catalog.BucketID]chan arrow.RecordBatch{}}
}

// add routes rec (in the table's stored form) and queues its parts.
func (w *tableWriter) add(ctx context.Context, rec arrow.RecordBatch) error {
	if err := w.forwardErr(); err != nil {
		return err
	}
	if rec.NumRows() == 0 {
		return nil
	}
	if w.t.partCol < 0 {
		var ids []catalog.BucketID
		w.s.cfg.Meta.Read(func(v *catalog.View) {
			if t, ok := v.Tables[w.t.id]; ok {
				ids = t.Buckets
			}
		})
		if len(ids) == 0 {
			return flightwire.NotFoundStatus(fmt.Sprintf("table %q was dropped", w.t.name), flightwire.ReasonNoSuchTable, 0)
		}
		return w.toBuckets(ctx, ids, rec)
	}
	parts, err := routing.SplitByPartition(ctx, rec, w.t.partCol)
	if err != nil {
		if errors.Is(err, routing.ErrPartitionType) {
			return status.Error(codes.InvalidArgument, err.Error())
		}
		return err
	}
	defer func() {
		for _, p := range parts {
			p.Record.Release()
		}
	}()
	for _, p := range parts {
		ids, err := w.partition(ctx, p.Value)
		if err != nil {
			return err
		}
		if err := w.toBuckets(ctx, ids, p.Record); err != nil {
			return err
		}
	}
	return nil
}

// partition returns the buckets of the partition holding value, creating
// the partition on first write (as sqlfront does).
func (w *tableWriter) partition(ctx context.Context, value string) ([]catalog.BucketID, error) {
	if ids, ok := w.partitions[value]; ok {
		return ids, nil
	}
	find := func() (ids []catalog.BucketID) {
		w.s.cfg.Meta.Read(func(v *catalog.View) {
			if t, ok := v.Tables[w.t.id]; ok {
				for _, p := range t.Partitions {
					if p.Value == value {
						ids = p.Buckets
					}
				}
			}
		})
		return ids
	}
	ids := find()
	if ids == nil {
		out, err := w.s.cfg.Meta.Propose(ctx, catalog.CreatePartition{Table: w.t.id, Value: value})
		switch {
		case err == nil:
			ids = out.Buckets
		case errors.Is(err, catalog.ErrExists):
			ids = find()
		default:
			return nil, fmt.Errorf("create partition %q of %q: %w", value, w.t.name, err)
		}
		if ids == nil {
			return nil, fmt.Errorf("partition %q of %q vanished", value, w.t.name)
		}
	}
	w.partitions[value] = ids
	return ids, nil
}

func (w *tableWriter) toBuckets(ctx context.Context, ids []catalog.BucketID, rec arrow.RecordBatch) error {
	return routing.EachBucket(ctx, rec, w.t.keyCols, len(ids), &roundRobin, func(i int, part arrow.RecordBatch) error {
		return w.toBucket(ctx, ids[i], part)
	})
}

// toBucket queues rec on bucket id: appended here if this node leads it
// (waiting up to BucketWait while it opens), else handed to the bucket's
// forwarder.
func (w *tableWriter) toBucket(ctx context.Context, id catalog.BucketID, rec arrow.RecordBatch) error {
	if w.t.primaryKey() {
		return w.s.upsertKV(ctx, w.t, id, rec)
	}
	if ch, ok := w.remote[id]; ok {
		return w.forward(ctx, ch, rec)
	}
	var m *buckets.Manager
	var lb *buckets.LogBucket
	err := buckets.Retry(ctx, w.s.cfg.BucketWait, func() (bool, error) {
		if m = w.s.cfg.Buckets(); m == nil {
			return false, buckets.ErrRegistering
		}
		var err error
		lb, err = m.Bucket(id)
		// Another node leads it: done here, rec is forwarded below.
		return errors.Is(err, buckets.ErrNotLeader), err
	})
	var nle *buckets.NotLeaderError
	switch {
	case errors.As(err, &nle):
		return w.forward(ctx, w.startForwarder(ctx, id, nle.To), rec)
	case err != nil:
		return bucketStatus(id, err)
	}
	stored := sqltypes.Pad(rec, w.t.stored, nil)
	defer stored.Release()
	p, err := lb.AppendAsync(ctx, stored)
	if err != nil {
		return w.s.appendFailed(m, id, err)
	}
	if p != nil {
		w.local = append(w.local, p)
	}
	return nil
}

func (w *tableWriter) forward(ctx context.Context, ch chan arrow.RecordBatch, rec arrow.RecordBatch) error {
	rec.Retain()
	select {
	case ch <- rec:
		return nil
	case <-ctx.Done():
		rec.Release()
		return ctx.Err()
	}
}

// startForwarder starts the goroutine that forwards bucket id's parts to
// its leader, first tried at addr.
func (w *tableWriter) startForwarder(ctx context.Context, id catalog.BucketID, addr string) chan arrow.RecordBatch {
	ch := make(chan arrow.RecordBatch, 16)
	w.remote[id] = ch
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		var batch []arrow.RecordBatch
		failed := false
		for rec := range ch {
			batch = append(batch[:0], rec)
			// Send whatever queued up meanwhile in the same call.
		more:
			for len(batch) < 64 {
				select {
				case r, ok := <-ch:
					if !ok {
						break more
					}
					batch = append(batch, r)
				default:
					break more
				}
			}
			if !failed {
				var err error
				if addr, err = w.s.forwardBatches(ctx, addr, id, batch); err != nil {
					failed = true
					w.setErr(err)
				}
			}
			for _, r := range batch {
				r.Release()
			}
		}
	}()
	return ch
}

func (w *tableWriter) setErr(err error) {
	w.mu.Lock()
	if w.mu.err == nil {
		w.mu.err = err
	}
	w.mu.Unlock()
}

func (w *tableWriter) forwardErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mu.err
}

// wait returns once every queued part is durable, or with the first error.
func (w *tableWriter) wait(ctx context.Context) error {
	for _, ch := range w.remote {
		close(ch)
	}
	w.wg.Wait()
	var first error
	for _, p := range w.local {
		if _, err := p.Wait(ctx); err != nil && first == nil {
			first = err
		}
	}
	if err := w.forwardErr(); err != nil && first == nil {
		first = err
	}
	return first
}

// forwardBatches writes recs to bucket id at its leader, following
// redirects and retrying while the bucket is unavailable, for up to
// ForwardWait. It returns the address that finally took them.
func (s *Service) forwardBatches(ctx context.Context, addr string, id catalog.BucketID, recs []arrow.RecordBatch) (string, error) {
	// A node that names itself as the leader is not called again at once:
	// wait for the view to move on.
	var at string
	follow := flightwire.Redirects{Max: maxRedirects, To: func(err error) (string, bool) {
		to, ok := notLeaderTo(err)
		return to, ok && to != at
	}}
	var last error // the error of the previous try
	err := buckets.RetryBackoff(ctx, s.cfg.ForwardWait, forwardBackoff, func() (bool, error) {
		if last != nil {
			// After a pause: ask the view who leads the bucket now.
			s.cfg.Meta.Read(func(v *catalog.View) {
				if b, ok := v.Buckets[id]; ok {
					if n, ok := v.Nodes[b.Leader]; ok && n.Addrs.Flight != "" {
						addr = n.Addrs.Flight
					}
				}
			})
			if addr == "" {
				return true, bucketStatus(id, last)
			}
		}
		addr, last = follow.Follow(ctx, addr, func(ctx context.Context, addr string) error {
			at = addr
			n, err := s.cfg.Pool.putBucket(ctx, addr, id, recs)
			recs = recs[n:]
			return err
		})
		return false, last
	})
	if buckets.Retryable(err) {
		// Only a try that is not done leaves Retry with a retryable error,
		// once ForwardWait has passed.
		return addr, fmt.Errorf("forward to bucket %d: gave up after %v: %w", id, s.cfg.ForwardWait, err)
	}
	return addr, err
}

// forwardBackoff paces the tries of forwardBatches: each is a call to
// another node, so the pause grows from 10 ms to 500 ms.
var forwardBackoff = buckets.Backoff{First: 10 * time.Millisecond, Max: 500 * time.Millisecond}
