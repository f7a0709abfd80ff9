package engine

import (
	"context"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	duck "github.com/duckdb/duckdb-go-bindings"
)

// resultReader reads a statement's result as Arrow batches. While it is
// the Conn's active result it fetches from DuckDB; when the Conn needs the
// connection for another statement, buffer reads the rest into memory and
// lets go of DuckDB.
//
// It is used by the goroutine that uses the Conn (Retain and Release may
// be called from anywhere).
type resultReader struct {
	c     *Conn
	ctx   context.Context
	query string
	cols  []Column

	schema *arrow.Schema
	refs   atomic.Int64

	// DuckDB state, valid until finish.
	live bool
	stmt duck.PreparedStatement
	res  duck.Result
	opts duck.ArrowOptions
	intr *interrupter

	cur      arrow.RecordBatch
	buffered []arrow.RecordBatch // after buffer: the rest of the result
	err      error               // reported after buffered batches
}

var _ array.RecordReader = (*resultReader)(nil)

func newResultReader(c *Conn, ctx context.Context, query string, stmt duck.PreparedStatement, res duck.Result, intr *interrupter) (*resultReader, error) {
	r := &resultReader{c: c, ctx: ctx, query: query, live: true, stmt: stmt, res: res, intr: intr}
	r.refs.Store(1)
	r.opts = duck.ResultGetArrowOptions(&r.res)
	n := duck.ColumnCount(&r.res)
	types := make([]duck.LogicalType, n)
	names := make([]string, n)
	for i := duck.IdxT(0); i < n; i++ {
		names[i] = duck.ColumnName(&r.res, i)
		types[i] = duck.ColumnLogicalType(&r.res, i)
		r.cols = append(r.cols, describeColumn(names[i], types[i]))
	}
	schema, err := arrowSchema(r.opts, types, names)
	for i := range types {
		duck.DestroyLogicalType(&types[i])
	}
	if err != nil {
		r.finish()
		return nil, err
	}
	r.schema = schema
	return r, nil
}

// Columns describes the result's columns.
func (r *resultReader) Columns() []Column { return r.cols }

func (r *resultReader) Schema() *arrow.Schema { return r.schema }

func (r *resultReader) Retain() { r.refs.Add(1) }

func (r *resultReader) Release() {
	if r.refs.Add(-1) == 0 {
		if r.cur != nil {
			r.cur.Release()
			r.cur = nil
		}
		for _, b := range r.buffered {
			b.Release()
		}
		r.buffered = nil
		if r.live {
			r.finish()
		}
	}
}

func (r *resultReader) Next() bool {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	if !r.live {
		if len(r.buffered) == 0 {
			return false
		}
		r.cur = r.buffered[0]
		r.buffered = r.buffered[1:]
		return true
	}
	rec, err := r.fetch()
	if err != nil || rec == nil {
		r.err = err
		r.finish()
		return false
	}
	r.cur = rec
	return true
}

// fetch reads the next chunk from DuckDB; nil at the end.
func (r *resultReader) fetch() (arrow.RecordBatch, error) {
	if r.ctx.Err() != nil {
		return nil, canceled(r.ctx)
	}
	chunk := duck.FetchChunk(r.res)
	if chunk.Ptr == nil {
		if msg := duck.ResultError(&r.res); msg != "" {
			return nil, r.c.failure(r.ctx, r.query, msg)
		}
		return nil, nil
	}
	defer duck.DestroyDataChunk(&chunk)
	return chunkToArrow(r.opts, r.schema, chunk)
}

func (r *resultReader) RecordBatch() arrow.RecordBatch { return r.cur }

// Record is the deprecated name of RecordBatch.
func (r *resultReader) Record() arrow.RecordBatch { return r.cur }

func (r *resultReader) Err() error {
	if r.live || len(r.buffered) > 0 {
		return nil
	}
	return r.err
}

// buffer reads the rest of the result into memory and releases DuckDB.
func (r *resultReader) buffer() {
	for r.live {
		rec, err := r.fetch()
		if err != nil || rec == nil {
			r.err = err
			r.finish()
			return
		}
		r.buffered = append(r.buffered, rec)
	}
}

// abort ends the result with err, dropping what DuckDB has not delivered.
func (r *resultReader) abort(err error) {
	if r.live {
		r.err = err
		r.finish()
	}
}

// finish releases the DuckDB side of the result and the connection.
func (r *resultReader) finish() {
	r.live = false
	r.intr.stop()
	duck.DestroyResult(&r.res)
	duck.DestroyPrepare(&r.stmt)
	duck.DestroyArrowOptions(&r.opts)
	r.c.clearStatementContext()
	if r.c.active == r {
		r.c.active = nil
	}
}
