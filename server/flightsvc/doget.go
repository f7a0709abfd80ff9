package flightsvc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/minkdb/mink/buckets"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/flightwire"
	"github.com/minkdb/mink/internal/sqltypes"
)

const (
	// maxRowsPerMessage bounds the rows of one DoGet message, so that
	// generic Flight clients with gRPC's default 4 MiB receive limit can
	// read ordinary rows (up to about 64 bytes a row).
	maxRowsPerMessage = 64 << 10
	// readChunkRows is how many rows DoGet reads from the bucket at a time;
	// one DoGet holds at most two chunks (sendChunks reads one ahead).
	readChunkRows = 1 << 20
)

// readFunc reads the batches of one bucket overlapping [from, to).
type readFunc func(ctx context.Context, from, to uint64) ([]buckets.Batch, error)

// DoGet streams the rows a ticket names, projected. Every message's
// app_metadata is a flightwire.BatchMeta with the offset of its first row.
// It needs SELECT on the bucket's table (readNeed).
func (s *Service) DoGet(tkt *flight.Ticket, stream flight.FlightService_DoGetServer) error {
	ctx := stream.Context()
	t, err := flightwire.ParseTicket(tkt.GetTicket())
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	id := catalog.BucketID(t.Bucket)
	r, err := s.resolve(flightwire.Command{Bucket: t.Bucket})
	if err != nil {
		return err
	}
	if err := s.authorize(ctx, r.table.id, readNeed(ctx)); err != nil {
		return err
	}
	if r.table.primaryKey() {
		return s.doGetKV(t, r.table, stream)
	}
	if t.Changelog {
		return status.Errorf(codes.InvalidArgument, "bucket %d belongs to a log table: it has no changelog", id)
	}
	cols, schema, err := r.table.projection(t.Columns)
	if err != nil {
		return err
	}
	stored := r.table.stored
	if t.Stored {
		if stored, cols, err = storedForm(t, stored); err != nil {
			return err
		}
		schema = sqltypes.Schema(stored)
	}
	// The rows below the stream's start are only in the lake: any node
	// serves them, before the rest, which comes from the stream.
	var w *recordWriter
	writer := func() *recordWriter {
		if w == nil {
			w = newRecordWriter(stream, schema, s.alloc)
		}
		return w
	}
	defer func() {
		if w != nil {
			w.Close()
		}
	}()
	if snapshot, lakeEnd := s.lakeSplit(r.table.id, id); t.From < lakeEnd {
		to := lakeEnd
		if t.To != nil {
			to = min(to, *t.To)
		}
		if err := s.sendLake(ctx, writer(), r.table, id, snapshot, t.From, to, schema); err != nil {
			return toStatus(err)
		}
		t.From = to
		if t.To != nil && t.From == *t.To {
			return writer().Close()
		}
	}
	read, end, err := s.bucketReader(id, t)
	if err != nil {
		return err
	}
	ww := writer()
	send := func(b buckets.Batch, from uint64) error {
		return s.sendBatch(ww, stored, b, from, end, cols, schema)
	}
	if err := sendChunks(ctx, id, read, t.From, end, send); err != nil {
		return err
	}
	return ww.Close()
}

// sendChunks reads [from, end) with read, readChunkRows rows at a time,
// and calls send with every batch and the offset its chunk starts at, in
// offset order. While one chunk is sent the next is read, so that the
// stream does not wait between chunks for the object store or for
// decoding; the read ahead is cancelled and waited for when sendChunks
// returns. Its errors are gRPC statuses.
func sendChunks(ctx context.Context, id catalog.BucketID, read readFunc, from, end uint64, send func(b buckets.Batch, from uint64) error) error {
	type chunk struct {
		batches []buckets.Batch
		err     error
	}
	ctx, cancel := context.WithCancel(ctx)
	var ahead chan chunk // the read in flight, if any
	readAhead := func(from uint64) {
		ch := make(chan chunk, 1)
		ahead = ch
		go func() {
			batches, err := read(ctx, from, min(from+readChunkRows, end))
			ch <- chunk{batches, err}
		}()
	}
	defer func() {
		cancel()
		if ahead != nil {
			buckets.ReleaseBatches((<-ahead).batches)
		}
	}()
	if from < end {
		readAhead(from)
	}
	for from < end {
		c := <-ahead
		ahead = nil
		if c.err != nil {
			return bucketStatus(id, c.err)
		}
		next := from
		for _, b := range c.batches {
			next = max(next, b.Offset+uint64(b.Record.NumRows()))
		}
		if next == from {
			buckets.ReleaseBatches(c.batches)
			return status.Errorf(codes.Internal, "bucket %d: no data at offset %d, below its end %d", id, from, end)
		}
		if next < end {
			readAhead(next)
		}
		var err error
		for _, b := range c.batches {
			if err == nil {
				err = send(b, from)
			}
		}
		buckets.ReleaseBatches(c.batches)
		if err != nil {
			return toStatus(err)
		}
		from = next
	}
	return nil
}

// bucketReader returns how to read bucket id for ticket t, and the offset
// to read up to. The leader serves any ticket. Another node serves a ticket
// whose end is committed to stream objects (it reads them from the object
// store); otherwise the answer is NotLeader.
func (s *Service) bucketReader(id catalog.BucketID, t flightwire.Ticket) (readFunc, uint64, error) {
	m := s.cfg.Buckets()
	if m == nil {
		return nil, 0, flightwire.UnavailableStatus("this node is registering again", uint64(id))
	}
	lb, err := m.Bucket(id)
	if err == nil {
		end := lb.End()
		if t.To != nil {
			end = min(end, *t.To)
		}
		return lb.Read, end, nil
	}
	if errors.Is(err, buckets.ErrNotLeader) && t.To != nil {
		var committed uint64
		s.cfg.Meta.Read(func(v *catalog.View) {
			if st, ok := v.Streams[catalog.StreamID(id)]; ok {
				committed = st.End
			}
		})
		if *t.To <= committed {
			read := func(ctx context.Context, from, to uint64) ([]buckets.Batch, error) {
				return m.ReadCommitted(ctx, id, from, to)
			}
			return read, *t.To, nil
		}
	}
	return nil, 0, bucketStatus(id, err)
}

// storedForm is what a ticket for stored batches (Ticket.Stored) reads of
// a bucket whose stored columns are stored: every one, the dropped ones as
// if they were not, and their indexes.
func storedForm(t flightwire.Ticket, stored []sqltypes.Column) ([]sqltypes.Column, []int, error) {
	if len(t.Columns) > 0 {
		return nil, nil, status.Error(codes.InvalidArgument, "a ticket for stored batches cannot name columns")
	}
	all := slices.Clone(stored)
	cols := make([]int, len(all))
	for i := range all {
		all[i].Dropped, cols[i] = false, i
	}
	return all, cols, nil
}

// sendBatch writes the rows of b within [from, end), projected to cols, in
// messages of at most maxRowsPerMessage rows. stored are the columns of
// the bucket's batches now (the dropped ones included, catalog
// TableSpec.SQLColumns): a batch stored with fewer (before ALTER TABLE …
// ADD COLUMN) is widened to them, and the dropped ones are left out; cols
// index the columns left.
func (s *Service) sendBatch(w batchWriter, stored []sqltypes.Column, b buckets.Batch, from, end uint64, cols []int, schema *arrow.Schema) error {
	rows := uint64(b.Record.NumRows())
	lo, hi := max(from, b.Offset), min(end, b.Offset+rows)
	if lo >= hi {
		return nil
	}
	batch := b.Record
	if int(batch.NumCols()) < len(stored) || len(sqltypes.Visible(stored)) < len(stored) {
		// The added columns read as their missing values.
		wide, err := sqltypes.Widen(batch, stored, s.alloc)
		if err != nil {
			return fmt.Errorf("bucket batch at offset %d: %w", b.Offset, err)
		}
		defer wide.Release()
		batch = wide
	}
	arrs := make([]arrow.Array, len(cols))
	for i, c := range cols {
		if int64(c) >= batch.NumCols() || !arrow.TypeEqual(batch.Column(c).DataType(), schema.Field(i).Type) {
			return fmt.Errorf("bucket batch at offset %d does not match the table's schema (column %d)", b.Offset, c)
		}
		arrs[i] = batch.Column(c)
	}
	rec := array.NewRecordBatch(schema, arrs, int64(rows))
	defer rec.Release()
	for off := lo; off < hi; off += maxRowsPerMessage {
		n := min(hi-off, maxRowsPerMessage)
		part := rec
		if off != b.Offset || n != rows {
			part = rec.NewSlice(int64(off-b.Offset), int64(off-b.Offset+n))
		}
		meta, _ := json.Marshal(flightwire.BatchMeta{Offset: off})
		err := w.WriteWithAppMetadata(part, meta)
		if part != rec {
			part.Release()
		}
		if err != nil {
			return err
		}
	}
	return nil
}
