package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// Source is a table-valued input of a query: a table's rows, for example,
// read from its buckets' streams and lake files.
//
// Open may be called several times for one statement (once per reference
// to the source, e.g. both sides of a self-join), concurrently, and from
// DuckDB's worker threads. The readers it returns are used by one scan
// each, under a lock, and released when the scan ends.
type Source interface {
	// Schema is the schema of the source's rows. It must not change while
	// the source is registered.
	Schema() *arrow.Schema
	// Open returns a reader of the source's rows with only the given
	// columns (indexes into Schema, distinct, in the order DuckDB asks for
	// them, which need not be ascending; possibly none, when only the
	// number of rows matters), so that a source can skip decoding columns
	// a query does not use. Batches must have exactly those columns, with
	// Schema's types, in that order; their size is up to the source. ctx is
	// the statement's context: it is cancelled when the statement is.
	Open(ctx context.Context, columns []int) (array.RecordReader, error)
}

// SizedSource is a Source that knows about how many rows it has. DuckDB
// uses the estimate to order joins, and sources of up to 64 Ki rows are
// scanned by one thread, which returns their rows in order to queries that
// do not sort.
type SizedSource interface {
	Source
	// EstimatedRows returns the number of rows, exact or estimated, or
	// -1 if unknown.
	EstimatedRows() (rows int64, exact bool)
}

// RecordsSource returns a Source over batches held in memory. Each Open
// reads all of them again. The batches are retained until the source is
// released (by the release function of Conn.Register, or by Release).
func RecordsSource(schema *arrow.Schema, batches []arrow.RecordBatch) *Records {
	r := &Records{schema: schema, batches: append([]arrow.RecordBatch(nil), batches...)}
	for _, b := range r.batches {
		b.Retain()
		r.rows += b.NumRows()
	}
	return r
}

// Records is the Source returned by RecordsSource.
type Records struct {
	schema  *arrow.Schema
	batches []arrow.RecordBatch
	rows    int64
	once    sync.Once
}

// Schema implements Source.
func (r *Records) Schema() *arrow.Schema { return r.schema }

// EstimatedRows implements SizedSource.
func (r *Records) EstimatedRows() (int64, bool) { return r.rows, true }

// Open implements Source.
func (r *Records) Open(_ context.Context, columns []int) (array.RecordReader, error) {
	projected := make([]arrow.RecordBatch, len(r.batches))
	for i, b := range r.batches {
		projected[i] = project(b, columns)
	}
	rdr, err := array.NewRecordReader(projectSchema(r.schema, columns), projected)
	for _, b := range projected {
		b.Release()
	}
	return rdr, err
}

// Release releases the batches.
func (r *Records) Release() {
	r.once.Do(func() {
		for _, b := range r.batches {
			b.Release()
		}
		r.batches = nil
	})
}

// ReaderSource returns a Source that reads rdr once: a second Open (a
// statement that references the source twice, or a second statement) fails
// with ErrSourceConsumed. Use it for streams that cannot be re-read;
// anything that can be re-read should implement Source. rdr is released
// when the source is.
func ReaderSource(rdr array.RecordReader) Source {
	return &readerSource{rdr: rdr}
}

// ErrSourceConsumed is returned when a ReaderSource is opened twice.
var ErrSourceConsumed = errors.New("a one-shot source cannot be read twice")

type readerSource struct {
	mu   sync.Mutex
	rdr  array.RecordReader
	used bool
}

func (s *readerSource) Schema() *arrow.Schema { return s.rdr.Schema() }

func (s *readerSource) Open(_ context.Context, columns []int) (array.RecordReader, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.used {
		return nil, ErrSourceConsumed
	}
	s.used = true
	s.rdr.Retain()
	return &projectingReader{rdr: s.rdr, columns: columns, schema: projectSchema(s.rdr.Schema(), columns), refs: 1}, nil
}

func (s *readerSource) Release() { s.rdr.Release() }

// projectSchema returns the schema of the given columns of s.
func projectSchema(s *arrow.Schema, columns []int) *arrow.Schema {
	fields := make([]arrow.Field, len(columns))
	for i, c := range columns {
		fields[i] = s.Field(c)
	}
	return arrow.NewSchema(fields, nil)
}

// project returns a new batch of the given columns of b.
func project(b arrow.RecordBatch, columns []int) arrow.RecordBatch {
	cols := make([]arrow.Array, len(columns))
	for i, c := range columns {
		cols[i] = b.Column(c)
	}
	return array.NewRecordBatch(projectSchema(b.Schema(), columns), cols, b.NumRows())
}

// projectingReader returns the given columns of another reader's batches.
// It is used by one goroutine at a time (a scan holds its lock).
type projectingReader struct {
	rdr     array.RecordReader
	columns []int
	schema  *arrow.Schema
	cur     arrow.RecordBatch
	refs    int64
}

func (p *projectingReader) Retain() { p.refs++ }

func (p *projectingReader) Release() {
	p.refs--
	if p.refs == 0 {
		if p.cur != nil {
			p.cur.Release()
			p.cur = nil
		}
		p.rdr.Release()
	}
}

func (p *projectingReader) Schema() *arrow.Schema { return p.schema }

func (p *projectingReader) Next() bool {
	if p.cur != nil {
		p.cur.Release()
		p.cur = nil
	}
	if !p.rdr.Next() {
		return false
	}
	p.cur = project(p.rdr.RecordBatch(), p.columns)
	return true
}

func (p *projectingReader) RecordBatch() arrow.RecordBatch { return p.cur }

// Record is the deprecated name of RecordBatch.
func (p *projectingReader) Record() arrow.RecordBatch { return p.cur }

func (p *projectingReader) Err() error { return p.rdr.Err() }

// registration is a Source registered on a Conn under a view name. The
// mink_scan key is random, so that a session cannot read another session's
// sources by calling mink_scan itself.
type registration struct {
	key    string
	name   string
	src    Source
	schema *arrow.Schema
	conn   *Conn
}

func newKey() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	return hex.EncodeToString(b[:])
}

// source returns the registration under key, nil if none. Safe to call
// from DuckDB's threads.
func (db *DB) source(key string) *registration {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.mu.sources[key]
}
