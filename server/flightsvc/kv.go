package flightsvc

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/minkdb/mink/buckets"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/flightwire"
	"github.com/minkdb/mink/internal/sqltypes"
	"github.com/minkdb/mink/kv"
	"github.com/minkdb/mink/kv/kvcodec"
)

// Primary-key buckets over Flight: kv-write and lookup actions run on the
// bucket's leader; DoGet reads the leader's current state, or the
// changelog like a log bucket's rows.

// kvBucket returns the primary-key bucket id if this node serves it, or
// the status that says where it is served.
func (s *Service) kvBucket(id catalog.BucketID) (*buckets.KVBucket, error) {
	m := s.cfg.Buckets()
	if m == nil {
		return nil, flightwire.UnavailableStatus("this node is registering again", uint64(id))
	}
	b, err := m.KVBucket(id)
	if err != nil {
		return nil, bucketStatus(id, err)
	}
	return b, nil
}

// kvWrite runs a kv-write on this node's bucket.
func (s *Service) kvWrite(ctx context.Context, req flightwire.KVWriteRequest) (*flightwire.KVWriteResult, error) {
	id := catalog.BucketID(req.Bucket)
	b, err := s.kvBucket(id)
	if err != nil {
		return nil, err
	}
	writes := make([]kvcodec.Write, len(req.Writes))
	for i, w := range req.Writes {
		if w.Op > uint8(kvcodec.OpDelete) {
			return nil, status.Errorf(codes.InvalidArgument, "kv-write: write %d: unknown op %d", i, w.Op)
		}
		if len(w.Key) == 0 || (kvcodec.WriteOp(w.Op) != kvcodec.OpDelete && len(w.Row) == 0) {
			return nil, status.Errorf(codes.InvalidArgument, "kv-write: write %d: a key (and a row, unless a delete) is required", i)
		}
		writes[i] = kvcodec.Write{Op: kvcodec.WriteOp(w.Op), Key: w.Key, Row: w.Row, CheckRow: w.CheckRow, IfRow: w.IfRow}
	}
	records, first, err := b.Write(ctx, writes)
	if err != nil {
		return nil, kvWriteStatus(id, err)
	}
	out := &flightwire.KVWriteResult{First: first, Records: make([]flightwire.KVChange, len(records))}
	for i, r := range records {
		out.Records[i] = flightwire.KVChange{Type: int8(r.Type), Key: r.Key, Row: r.Row, Write: r.Write}
	}
	return out, nil
}

// kvWriteStatus maps a KVBucket.Write error: a duplicate key or a
// conflict (nothing appended) keep their write index and key.
func kvWriteStatus(id catalog.BucketID, err error) error {
	var dup *kv.DuplicateKeyError
	var conflict *kv.ConflictError
	var reason string
	var write int
	var key []byte
	switch {
	case errors.As(err, &dup):
		reason, write, key = flightwire.ReasonDuplicateKey, dup.Write, dup.Key
	case errors.As(err, &conflict):
		reason, write, key = flightwire.ReasonConflict, conflict.Write, conflict.Key
	default:
		if errors.Is(err, buckets.ErrUnknownOutcome) {
			return flightwire.OutcomeUnknownStatus(err.Error(), uint64(id))
		}
		return bucketStatus(id, err)
	}
	md := map[string]string{"bucket": strconv.FormatUint(uint64(id), 10), "write": strconv.Itoa(write), "key": base64.StdEncoding.EncodeToString(key)}
	if reason == flightwire.ReasonDuplicateKey {
		md["sqlstate"] = "23505"
	}
	code := codes.AlreadyExists
	if reason == flightwire.ReasonConflict {
		code = codes.Aborted
	}
	st, serr := status.New(code, err.Error()).WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: flightwire.Domain, Metadata: md})
	if serr != nil {
		return status.Error(code, err.Error())
	}
	return st.Err()
}

// kvLookup answers a lookup from this node's bucket.
func (s *Service) kvLookup(req flightwire.KVLookupRequest) (*flightwire.KVLookupResult, error) {
	id := catalog.BucketID(req.Bucket)
	b, err := s.kvBucket(id)
	if err != nil {
		return nil, err
	}
	r, err := b.NewReader()
	if err != nil {
		return nil, bucketStatus(id, err)
	}
	defer r.Close()
	out := &flightwire.KVLookupResult{Rows: make([][]byte, len(req.Keys)), Offset: r.Offset()}
	for i, k := range req.Keys {
		row, ok, err := r.Get(k)
		if err != nil {
			return nil, toStatus(err)
		}
		if ok {
			out.Rows[i] = row
		}
	}
	// After the rows: the client decodes them with a schema at least as
	// new as the one they were read under.
	out.SchemaTag = s.schemaTagOf(id)
	return out, nil
}

// doGetKV serves a ticket of a primary-key bucket: its current state
// (leader only) or its changelog.
func (s *Service) doGetKV(t flightwire.Ticket, tb *table, stream flight.FlightService_DoGetServer) error {
	id := catalog.BucketID(t.Bucket)
	if t.Changelog {
		return s.doGetChangelog(t, tb, stream)
	}
	cols, schema, err := tb.projection(t.Columns)
	if err != nil {
		return err
	}
	b, err := s.kvBucket(id)
	if err != nil {
		return err
	}
	r, err := b.NewReader()
	if err != nil {
		return bucketStatus(id, err)
	}
	defer r.Close()
	rr, err := kv.NewRecordReader(r, b.Codec(), s.alloc, maxRowsPerMessage)
	if err != nil {
		return toStatus(err)
	}
	defer rr.Release()
	w := newRecordWriter(stream, schema, s.alloc)
	defer w.Close()
	meta, _ := json.Marshal(flightwire.BatchMeta{Offset: r.Offset()})
	for rr.Next() {
		rec := rr.RecordBatch()
		arrs := make([]arrow.Array, len(cols))
		for i, c := range cols {
			arrs[i] = rec.Column(c)
		}
		out := array.NewRecordBatch(schema, arrs, rec.NumRows())
		err := w.WriteWithAppMetadata(out, meta)
		out.Release()
		if err != nil {
			return err
		}
	}
	if err := rr.Err(); err != nil {
		return toStatus(err)
	}
	return w.Close()
}

// doGetChangelog streams changelog records of a primary-key bucket like the
// rows of a log bucket: the leader serves any range, another node a range
// committed to stream objects.
func (s *Service) doGetChangelog(t flightwire.Ticket, tb *table, stream flight.FlightService_DoGetServer) error {
	ctx := stream.Context()
	id := catalog.BucketID(t.Bucket)
	codec, err := buckets.NewKVCodec(tb.spec)
	if err != nil {
		return toStatus(err)
	}
	full := codec.ChangelogSchema()
	cols, schema, err := changelogProjection(full, t.Columns)
	if err != nil {
		return err
	}
	stored := changelogColumns(tb)
	if t.Stored {
		if stored, cols, err = storedForm(t, stored); err != nil {
			return err
		}
		schema = codec.StoredChangelogSchema()
	}
	m := s.cfg.Buckets()
	if m == nil {
		return flightwire.UnavailableStatus("this node is registering again", uint64(id))
	}
	var read readFunc
	var start, end uint64 // start: retention trimmed the changelog below it
	if b, err := m.KVBucket(id); err == nil {
		read, start, end = b.ReadChangelog, b.Start(), b.End()
		if t.To != nil {
			end = min(end, *t.To)
		}
	} else {
		var committed uint64
		s.cfg.Meta.Read(func(v *catalog.View) {
			if st, ok := v.Streams[catalog.StreamID(id)]; ok {
				start, committed = st.Start, st.End
			}
		})
		if !errors.Is(err, buckets.ErrNotLeader) || t.To == nil || *t.To > committed {
			return bucketStatus(id, err)
		}
		read = func(ctx context.Context, from, to uint64) ([]buckets.Batch, error) {
			return m.ReadCommitted(ctx, id, from, to)
		}
		end = *t.To
	}
	w := newRecordWriter(stream, schema, s.alloc)
	defer w.Close()
	// The changelog before the trim point is gone: a read from below it
	// starts there (each batch's metadata carries its offset).
	for from := max(t.From, start); from < end; {
		batches, err := read(ctx, from, min(from+readChunkRows, end))
		if err != nil {
			return bucketStatus(id, err)
		}
		next := from
		for _, b := range batches {
			if err == nil {
				err = s.sendBatch(w, stored, b, from, end, cols, schema)
			}
			next = max(next, b.Offset+uint64(b.Record.NumRows()))
		}
		buckets.ReleaseBatches(batches)
		if err != nil {
			return toStatus(err)
		}
		if next == from {
			return status.Errorf(codes.Internal, "bucket %d: no changelog at offset %d, below its end %d", id, from, end)
		}
		from = next
	}
	return w.Close()
}

// changelogProjection projects the changelog schema; nil columns mean all.
func changelogProjection(full *arrow.Schema, columns []string) ([]int, *arrow.Schema, error) {
	if columns == nil {
		idx := make([]int, full.NumFields())
		for i := range idx {
			idx[i] = i
		}
		return idx, full, nil
	}
	idx := make([]int, len(columns))
	fields := make([]arrow.Field, len(columns))
	for i, name := range columns {
		j := full.FieldIndices(name)
		if len(j) == 0 {
			return nil, nil, status.Errorf(codes.InvalidArgument, "changelog column %q does not exist", name)
		}
		idx[i], fields[i] = j[0], full.Field(j[0])
	}
	return idx, arrow.NewSchema(fields, nil), nil
}

// upsertKV upserts the rows of rec, a part of a table-addressed DoPut
// routed to primary-key bucket id, as one atomic batch: here if this node
// leads the bucket, else at its leader; retrying for up to ForwardWait
// while the bucket opens or moves (a retry happens only when nothing was
// written).
func (s *Service) upsertKV(ctx context.Context, t *table, id catalog.BucketID, rec arrow.RecordBatch) error {
	codec, err := buckets.NewKVCodec(t.spec)
	if err != nil {
		return toStatus(err)
	}
	writes, err := codec.Writes(kvcodec.OpUpsert, rec)
	if err != nil {
		if errors.Is(err, kvcodec.ErrNullKey) {
			return status.Errorf(codes.InvalidArgument, "table %q: %v", t.name, err)
		}
		return toStatus(err)
	}
	err = buckets.Retry(ctx, s.cfg.ForwardWait, func() (bool, error) {
		m := s.cfg.Buckets()
		if m == nil {
			return false, buckets.ErrRegistering
		}
		b, err := m.KVBucket(id)
		if err == nil {
			_, _, err = b.Write(ctx, writes)
		} else if to, ok := notLeaderTo(err); ok && to != "" {
			_, _, err = s.cfg.Pool.WriteKV(ctx, to, id, writes)
		}
		// The writes may have been applied: trying again could apply
		// them twice.
		return errors.Is(err, buckets.ErrUnknownOutcome), err
	})
	if err != nil {
		return kvWriteStatus(id, err)
	}
	return nil
}

// WriteKV runs writes as one atomic batch on the primary-key bucket led at
// addr, following redirects, and returns the change records and the offset
// of the first (KVBucket.Write). A *kv.DuplicateKeyError or
// *kv.ConflictError means nothing was written; buckets.ErrUnknownOutcome
// that the writes may or may not have been applied (the connection broke
// after the request may have been sent, the call's context ended while it
// ran, or the leader could not tell); NotLeader/Unavailable/NoSuchBucket
// as for Transport, and buckets.ErrUnavailable also when the node could
// not be reached at all (the request was never sent, so a retry cannot
// apply the writes twice).
func (p *Pool) WriteKV(ctx context.Context, addr string, bucket catalog.BucketID, writes []kvcodec.Write) ([]kvcodec.ChangeRecord, uint64, error) {
	req := flightwire.KVWriteRequest{Bucket: uint64(bucket), Writes: make([]flightwire.KVWrite, len(writes))}
	for i, w := range writes {
		req.Writes[i] = flightwire.KVWrite{Op: uint8(w.Op), Key: w.Key, Row: w.Row, CheckRow: w.CheckRow, IfRow: w.IfRow}
	}
	var out []kvcodec.ChangeRecord
	var first uint64
	_, err := redirects.Follow(ctx, addr, func(ctx context.Context, addr string) error {
		c, err := p.client(addr)
		if err != nil {
			return err
		}
		var res flightwire.KVWriteResult
		err = flightwire.DoAction(ctx, c, flightwire.ActionKVWrite, req, &res)
		if err == nil {
			out = make([]kvcodec.ChangeRecord, len(res.Records))
			for i, r := range res.Records {
				out[i] = kvcodec.ChangeRecord{Type: kvcodec.ChangeType(r.Type), Key: r.Key, Row: r.Row, Write: r.Write}
			}
			first = res.First
			return nil
		}
		if info, ok := flightwire.Info(err); ok && (info.Reason == flightwire.ReasonDuplicateKey || info.Reason == flightwire.ReasonConflict) {
			write, _ := strconv.Atoi(info.Metadata["write"])
			key, _ := base64.StdEncoding.DecodeString(info.Metadata["key"])
			if info.Reason == flightwire.ReasonDuplicateKey {
				return &kv.DuplicateKeyError{Write: write, Key: key}
			}
			return &kv.ConflictError{Write: write, Key: key}
		}
		if _, redirected := flightwire.RedirectOf(err); !redirected && !flightwire.NotSent(err) && !flightwire.IsBucketUnavailable(err) && !flightwire.IsNotFound(err) &&
			(flightwire.IsUnavailable(err) || flightwire.IsOutcomeUnknown(err) || status.Code(err) == codes.Canceled || status.Code(err) == codes.DeadlineExceeded) {
			// The connection failed during the call, or the leader could
			// not tell: the writes may have been applied. A call that was
			// never sent (NotSent: gRPC could not open the stream) falls
			// through to fromStatus: Unavailable, safe to retry.
			return fmt.Errorf("bucket %d at %s: %w: %s", bucket, addr, buckets.ErrUnknownOutcome, flightwire.StatusMessage(err))
		}
		return fromStatus(addr, bucket, err)
	})
	if err != nil {
		return nil, 0, err
	}
	return out, first, nil
}

// GetKV returns the row of an encoded key in the acknowledged state of the
// primary-key bucket led at addr, following redirects.
func (p *Pool) GetKV(ctx context.Context, addr string, bucket catalog.BucketID, key []byte) ([]byte, bool, error) {
	rows, err := p.LookupKV(ctx, addr, bucket, [][]byte{key})
	if err != nil {
		return nil, false, err
	}
	return rows[0], rows[0] != nil, nil
}

// LookupKV returns the rows of encoded keys (nil where there is none) in
// one consistent state of the primary-key bucket led at addr.
func (p *Pool) LookupKV(ctx context.Context, addr string, bucket catalog.BucketID, keys [][]byte) ([][]byte, error) {
	var rows [][]byte
	_, err := redirects.Follow(ctx, addr, func(ctx context.Context, addr string) error {
		c, err := p.client(addr)
		if err != nil {
			return err
		}
		var res flightwire.KVLookupResult
		err = flightwire.DoAction(ctx, c, flightwire.ActionLookup, flightwire.KVLookupRequest{Bucket: uint64(bucket), Keys: keys}, &res)
		if err == nil {
			if len(res.Rows) != len(keys) {
				return fmt.Errorf("bucket %d at %s: %d keys looked up, %d answers", bucket, addr, len(keys), len(res.Rows))
			}
			rows = res.Rows
			return nil
		}
		return fromStatus(addr, bucket, err)
	})
	if err != nil {
		return nil, err
	}
	return rows, nil
}

// ScanKV returns the current state of the primary-key bucket led at addr,
// as record batches of the table's schema in key order, following
// redirects. The caller releases them.
func (p *Pool) ScanKV(ctx context.Context, addr string, bucket catalog.BucketID) ([]arrow.RecordBatch, error) {
	t := flightwire.Ticket{Bucket: uint64(bucket)}
	var out []arrow.RecordBatch
	_, err := redirects.Follow(ctx, addr, func(ctx context.Context, addr string) error {
		// A state read cannot resume: a retry reads it all again.
		out = nil
		c, err := p.client(addr)
		if err != nil {
			return err
		}
		err = flightwire.GetStream(ctx, c, t.Encode(), nil, func(rec arrow.RecordBatch, _ flightwire.BatchMeta) error {
			rec.Retain()
			out = append(out, rec)
			return nil
		})
		if err == nil {
			return nil
		}
		for _, r := range out {
			r.Release()
		}
		return fromStatus(addr, bucket, err)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ReadChangelog returns every acknowledged changelog batch of the
// primary-key bucket led at addr (schema kvcodec.Codec.StoredChangelogSchema,
// dropped columns included, as a leader's KVBucket.ReadChangelog), with
// the offset of each batch's first record, following redirects. The caller
// releases them.
func (p *Pool) ReadChangelog(ctx context.Context, addr string, bucket catalog.BucketID) ([]buckets.Batch, error) {
	return p.readBatches(ctx, addr, bucket, flightwire.Ticket{Bucket: uint64(bucket), Changelog: true, Stored: true})
}

// changelogColumns are the columns of a primary-key table's changelog
// batches as stored: the change type, then the table's stored columns.
func changelogColumns(tb *table) []sqltypes.Column {
	return append([]sqltypes.Column{{Name: kvcodec.ChangeTypeColumn, Type: sqltypes.Of(sqltypes.Text), NotNull: true}}, tb.stored...)
}
