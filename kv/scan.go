package kv

import (
	"fmt"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cockroachdb/pebble/v2"

	"github.com/minkdb/mink/kv/kvcodec"
)

// DefaultBatchRows is the number of rows per batch of a RecordReader.
const DefaultBatchRows = 8192

// RecordReader reads the rows of a Reader as Arrow record batches of the
// table schema, in key order: what SELECT over the current state of a
// primary-key bucket feeds to the engine. It implements array.RecordReader.
// Not safe for concurrent use.
type RecordReader struct {
	refs  atomic.Int64
	codec *kvcodec.Codec
	it    *pebble.Iterator
	rb    *kvcodec.RowBuilder
	rows  int
	cur   arrow.RecordBatch
	err   error
	done  bool
}

var _ array.RecordReader = (*RecordReader)(nil)

// NewRecordReader returns a reader of every row of r, batchRows rows per
// batch (DefaultBatchRows if 0). It holds r's state; release it before
// closing r.
func NewRecordReader(r *Reader, c *kvcodec.Codec, mem memory.Allocator, batchRows int) (*RecordReader, error) {
	if batchRows <= 0 {
		batchRows = DefaultBatchRows
	}
	it, err := r.snap.NewIter(&pebble.IterOptions{LowerBound: []byte{rowPrefix}, UpperBound: []byte{rowPrefix + 1}})
	if err != nil {
		return nil, fmt.Errorf("kv: record reader: %w", err)
	}
	rr := &RecordReader{codec: c, it: it, rb: c.NewRowBuilder(mem), rows: batchRows}
	rr.refs.Store(1)
	if !it.First() {
		rr.done = true
		if err := it.Error(); err != nil {
			rr.err = fmt.Errorf("kv: record reader: %w", err)
		}
	}
	return rr, nil
}

// Schema is the table schema.
func (rr *RecordReader) Schema() *arrow.Schema { return rr.codec.Schema() }

// Next advances to the next batch; false at the end or on error (see Err).
func (rr *RecordReader) Next() bool {
	if rr.cur != nil {
		rr.cur.Release()
		rr.cur = nil
	}
	if rr.done || rr.err != nil {
		return false
	}
	for n := 0; n < rr.rows; n++ {
		v, err := rr.it.ValueAndErr()
		if err == nil {
			err = rr.rb.Append(v)
		}
		if err != nil {
			rr.err = fmt.Errorf("kv: record reader: key %x: %w", rr.it.Key()[1:], err)
			return false
		}
		if !rr.it.Next() {
			rr.done = true
			break
		}
	}
	if rr.done {
		if err := rr.it.Error(); err != nil {
			rr.err = fmt.Errorf("kv: record reader: %w", err)
			return false
		}
	}
	rr.cur = rr.rb.NewRecordBatch()
	return true
}

// RecordBatch is the current batch, valid until the next call to Next.
func (rr *RecordReader) RecordBatch() arrow.RecordBatch { return rr.cur }

// Record is RecordBatch.
//
// Deprecated: use RecordBatch.
func (rr *RecordReader) Record() arrow.RecordBatch { return rr.cur }

// Err is the error that stopped Next, if any.
func (rr *RecordReader) Err() error { return rr.err }

// Retain adds a reference.
func (rr *RecordReader) Retain() { rr.refs.Add(1) }

// Release drops a reference; the last one closes the iterator.
func (rr *RecordReader) Release() {
	if rr.refs.Add(-1) != 0 {
		return
	}
	if rr.cur != nil {
		rr.cur.Release()
		rr.cur = nil
	}
	rr.rb.Release()
	rr.it.Close()
}
