package sqlfront

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/minkdb/mink/buckets"
	"github.com/minkdb/mink/buckets/s3stream"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/sqlfront/engine"
	"github.com/minkdb/mink/sqlfront/pgwire"
	"github.com/minkdb/mink/tiering"
)

// The union read of a log table: each bucket's rows [0, tiered) come from
// the lake snapshot the view recorded with the tiered offsets, rows
// [tiered, end) from the bucket's stream. The pair (lake snapshot, offsets)
// is taken from one view per scan, so that a tiering round committing
// meanwhile changes neither side: no row is read twice or missed. The
// stream below the tiered offset is never read, so the read keeps working
// after retention trimmed it.

// lakePin is the lake part of one scan: the snapshot and the tiered offset
// of each bucket it holds.
type lakePin struct {
	snapshot int64
	offsets  map[catalog.BucketID]uint64
}

// pinLake returns the lake part of a scan of tbl's buckets ids, read from
// the view v. Only log-table scans use it: a primary-key table is read
// from its buckets' KV state (openPK), whatever its lake holds.
func pinLake(tbl *catalog.Table, ids []catalog.BucketID) lakePin {
	ts := tbl.Tiering
	if ts.LakeSnapshotID == 0 || len(ts.Offsets) == 0 {
		return lakePin{}
	}
	p := lakePin{snapshot: ts.LakeSnapshotID, offsets: make(map[catalog.BucketID]uint64, len(ts.Offsets))}
	want := make(map[catalog.BucketID]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	for id, off := range ts.Offsets {
		if want[id] {
			p.offsets[id] = off
		}
	}
	return p
}

// from is the offset the stream of bucket id is read from.
func (p lakePin) from(id catalog.BucketID) uint64 { return p.offsets[id] }

// hasLake reports whether table id has tiered rows in the lake.
func (f *Frontend) hasLake(id catalog.TableID) bool {
	has := false
	f.cfg.Meta.Read(func(v *catalog.View) {
		if t, ok := v.Tables[id]; ok {
			has = t.Tiering.LakeSnapshotID != 0
		}
	})
	return has
}

// The pin/trim race. A scan pins a lake snapshot with its tiered offsets
// and then reads each bucket's stream from its pinned offset. Meanwhile a
// newer round may commit and retention trim the stream past the pinned
// offset (up to the newer tiered offset, never beyond it): the stream read
// then fails (s3stream.ErrTrimmed) or, when the trim's objects had left
// the view the read planned with, starts above the pinned offset. Either
// is found before the scan returns its reader, so before any row of it
// reached the engine: the scan drops everything it read and pins again.
// The newer pin's snapshot holds every row below its tiered offsets, and
// its offsets are at or above the trim, so the retried scan reads each row
// exactly once (the same argument as for any scan). Only a trim racing
// every attempt makes the statement fail, with 40001.

// maxTrimRetries bounds the scans of a table one statement pins.
const maxTrimRetries = 5

// trimmedError: retention trimmed a bucket's stream past the offset a
// scan pinned, before the scan read it.
type trimmedError struct {
	bucket catalog.BucketID
	from   uint64
	err    error // the read's error, nil if the read returned a gap
}

func (e *trimmedError) Error() string {
	msg := fmt.Sprintf("bucket %d was trimmed past offset %d while the statement read it (a newer tiering round and retention ran meanwhile)", e.bucket, e.from)
	if e.err != nil {
		msg += ": " + e.err.Error()
	}
	return msg
}

func (e *trimmedError) Unwrap() error { return e.err }

// checkStreamFrom turns the outcome of reading bucket id's stream (got,
// or the read's error) into a trimmedError when retention trimmed the
// stream past from, the first offset the scan needs: the pinned offset, or
// the stream's start in the pinned view if that is above it (a table with
// tiering off, whose expired rows are gone by design). Trimmed means: the
// read failed with ErrTrimmed, its first row is above from, or the stream
// starts above from now (the read may have planned with a view in which
// the trimmed objects were gone).
func (f *Frontend) checkStreamFrom(id catalog.BucketID, from uint64, got []buckets.Batch, err error) error {
	if err != nil {
		// A remote leader's error arrives as text.
		if errors.Is(err, s3stream.ErrTrimmed) || strings.Contains(err.Error(), s3stream.ErrTrimmed.Error()) {
			return &trimmedError{bucket: id, from: from, err: err}
		}
		return err
	}
	if len(got) > 0 && got[0].Offset > from {
		return &trimmedError{bucket: id, from: from}
	}
	var start uint64
	f.cfg.Meta.Read(func(v *catalog.View) {
		if st, ok := v.Streams[catalog.StreamID(id)]; ok {
			start = st.Start
		}
	})
	if start > from {
		return &trimmedError{bucket: id, from: from}
	}
	return nil
}

// pinnedStreamHook, when set (by tests), is called by a scan between
// pinning its lake part and reading the streams.
var pinnedStreamHook func(table string)

// lakeError maps a lake read error: a corrupt or missing data file is
// XX001 (data_corrupted) naming the file.
func lakeError(table string, err error) error {
	var fe *tiering.LakeFileError
	if errors.As(err, &fe) {
		return &pgwire.Error{Code: codeDataCorrupted, Message: fmt.Sprintf("read table %q: %v", table, fe),
			Hint: "The table's lake data is damaged; other tables are not affected.", Err: err}
	}
	return fmt.Errorf("read table %q from the lake: %w", table, err)
}

const codeDataCorrupted = "XX001"

// readBucketFrom returns the acknowledged batches of a bucket from offset
// from on, sliced so that the first row is at from. It waits, up to
// BucketWait, for a bucket that is opening.
func (f *Frontend) readBucketFrom(ctx context.Context, id catalog.BucketID, from uint64) ([]buckets.Batch, error) {
	if from == 0 {
		return f.readBucket(ctx, id)
	}
	var got []buckets.Batch
	err := buckets.Retry(ctx, f.cfg.BucketWait, func() (bool, error) {
		m := f.cfg.Buckets()
		if m == nil {
			return true, buckets.ErrRegistering
		}
		b, err := m.Bucket(id)
		if err == nil {
			end := b.End()
			if from >= end {
				got = nil
				return true, nil
			}
			got, err = b.Read(ctx, from, end)
		} else if to, ok := f.ledElsewhere(err); ok {
			if rr, ok := f.cfg.Remote.(rangedRemote); ok {
				got, err = rr.ReadBucketFrom(ctx, to, id, from)
			} else {
				got, err = f.cfg.Remote.ReadBucket(ctx, to, id)
			}
		}
		return false, err
	})
	if err != nil {
		return nil, err
	}
	return sliceFrom(got, from), nil
}

// rangedRemote is a Remote that reads a bucket from an offset
// (flightsvc.Pool).
type rangedRemote interface {
	ReadBucketFrom(ctx context.Context, addr string, bucket catalog.BucketID, from uint64) ([]buckets.Batch, error)
}

// sliceFrom drops the rows below offset from.
func sliceFrom(bs []buckets.Batch, from uint64) []buckets.Batch {
	out := bs[:0]
	for _, b := range bs {
		n := uint64(b.Record.NumRows())
		switch {
		case b.Offset+n <= from:
			b.Record.Release()
		case b.Offset < from:
			s := b.Record.NewSlice(int64(from-b.Offset), int64(n))
			b.Record.Release()
			out = append(out, buckets.Batch{Offset: from, Record: s})
		default:
			out = append(out, b)
		}
	}
	return out
}

// fillMirrorFromLake appends to the mirror of a log table the lake rows of
// every bucket the mirror holds nothing of yet, up to the bucket's tiered
// offset (one pinned pair, as for a scan), so that a mirror is filled from
// the lake rather than from the streams, which retention may have trimmed
// below the tiered offsets. It returns the mirror's progress after.
func (f *Frontend) fillMirrorFromLake(ctx context.Context, t *tableInfo, nt *engine.NativeTable, progress map[uint64]uint64) (map[uint64]uint64, error) {
	var pin lakePin
	f.cfg.Meta.Read(func(v *catalog.View) {
		if tbl, ok := v.Tables[t.id]; ok {
			pin = pinLake(tbl, v.BucketsOf(t.id))
		}
	})
	var fill []catalog.BucketID
	for id, off := range pin.offsets {
		if off > 0 && progress[uint64(id)] == 0 {
			fill = append(fill, id)
		}
	}
	if len(fill) == 0 {
		return progress, nil
	}
	if f.cfg.Lake == nil {
		return nil, fmt.Errorf("table %q has tiered rows but this node has no lake reader", t.name)
	}
	// Always the buckets: the pinned snapshot may hold rows of buckets the
	// table no longer has (TRUNCATE, dropped partitions) until a round
	// deletes them; nil would read every file.
	req := tiering.ScanRequest{Table: t.id, Snapshot: pin.snapshot, Schema: t.schema, Columns: t.stored, Buckets: fill}
	var batches []arrow.RecordBatch
	defer func() {
		for _, b := range batches {
			b.Release()
		}
	}()
	err := f.cfg.Lake.Scan(ctx, req, func(rec arrow.RecordBatch) error {
		rec.Retain()
		batches = append(batches, rec)
		return nil
	})
	if err != nil {
		return nil, lakeError(t.name, err)
	}
	err = nt.Update(ctx, func(progress map[uint64]uint64, appendRows func([]arrow.RecordBatch) error) error {
		for _, id := range fill {
			if progress[uint64(id)] != 0 {
				// Another statement appended to the mirror meanwhile.
				return nil
			}
		}
		if err := appendRows(batches); err != nil {
			return err
		}
		for _, id := range fill {
			progress[uint64(id)] = pin.offsets[id]
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return nt.Progress(), nil
}

// openLake starts reading the pinned lake rows of buckets ids, projected to
// columns, in the background (so that decoding overlaps the engine's work
// on the rows already returned); nil if the scan has no lake part. The
// reader's Err is the read's error (XX001 for a damaged file).
func (t *tableSource) openLake(ctx context.Context, pin lakePin, ids []catalog.BucketID, columns []int, filter []tiering.Predicate) (*lakeStream, error) {
	if pin.snapshot == 0 {
		return nil, nil
	}
	lr := t.r.s.f.cfg.Lake
	if lr == nil {
		return nil, fmt.Errorf("table %q has tiered rows but this node has no lake reader", t.info.name)
	}
	// Always the buckets, never nil (every file of the snapshot): it may
	// hold rows of buckets the table no longer has (TRUNCATE, dropped
	// partitions) until a round deletes them.
	req := tiering.ScanRequest{Table: t.info.id, Snapshot: pin.snapshot, Schema: projectSchema(t.info.schema, columns), Columns: t.info.stored, Filter: filter,
		Buckets: []catalog.BucketID{}}
	for _, id := range ids {
		if pin.offsets[id] > 0 {
			req.Buckets = append(req.Buckets, id)
		}
	}
	if len(req.Buckets) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &lakeStream{schema: req.Schema, ch: make(chan arrow.RecordBatch, 16), cancel: cancel, done: make(chan struct{}), refs: 1}
	go func() {
		defer close(s.done)
		defer close(s.ch)
		err := lr.Scan(ctx, req, func(rec arrow.RecordBatch) error {
			rec.Retain()
			select {
			case s.ch <- rec:
				return nil
			case <-ctx.Done():
				rec.Release()
				return ctx.Err()
			}
		})
		if err != nil {
			s.err = lakeError(t.info.name, err)
		}
	}()
	return s, nil
}

// lakeStream is the reader openLake returns, followed by tail (the stream
// rows). Used by one goroutine at a time (a scan holds its lock).
type lakeStream struct {
	schema *arrow.Schema
	ch     chan arrow.RecordBatch
	cancel func()
	done   chan struct{}
	err    error // set before ch is closed
	tail   array.RecordReader
	inTail bool
	cur    arrow.RecordBatch
	refs   int64
}

func (s *lakeStream) Retain() { s.refs++ }

func (s *lakeStream) Release() {
	s.refs--
	if s.refs > 0 {
		return
	}
	s.cancel()
	for rec := range s.ch {
		rec.Release()
	}
	<-s.done
	if s.cur != nil && !s.inTail {
		s.cur.Release()
	}
	s.cur = nil
	if s.tail != nil {
		s.tail.Release()
	}
}

func (s *lakeStream) Schema() *arrow.Schema { return s.schema }

func (s *lakeStream) Next() bool {
	if !s.inTail {
		if s.cur != nil {
			s.cur.Release()
			s.cur = nil
		}
		if rec, ok := <-s.ch; ok {
			s.cur = rec
			return true
		}
		if s.err != nil {
			return false
		}
		s.inTail = true
	}
	if s.tail != nil && s.tail.Next() {
		s.cur = s.tail.RecordBatch()
		return true
	}
	s.cur = nil
	return false
}

func (s *lakeStream) RecordBatch() arrow.RecordBatch { return s.cur }

// Record is the deprecated name of RecordBatch.
func (s *lakeStream) Record() arrow.RecordBatch { return s.cur }

func (s *lakeStream) Err() error {
	if !s.inTail {
		return s.err
	}
	if s.tail != nil {
		return s.tail.Err()
	}
	return nil
}

// then returns the reader of the lake rows followed by tail's (tail alone
// if there is no lake part).
func (s *lakeStream) then(tail array.RecordReader) array.RecordReader {
	if s == nil {
		return tail
	}
	s.tail = tail
	return s
}

// close releases a reader that is not returned.
func (s *lakeStream) close() {
	if s != nil {
		s.Release()
	}
}
