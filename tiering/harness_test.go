package tiering

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/sqltypes"
	"github.com/minkdb/mink/metalog"
	"github.com/minkdb/mink/objstore"
)

const storeURL = "mem://lakehouse"

// env is a metadata log with one registered node and coordinator, an object
// store with fault injection, and a fake stream source whose committed ends
// are recorded in the log with CommitStreamObjects, as s3stream does.
type env struct {
	t     *testing.T
	ctx   context.Context
	log   *metalog.MemLog
	cat   *metalog.Catalog
	store *objstore.Faulty
	src   *fakeSource
	meta  *faultyMeta
	epoch uint64 // coordinator epoch
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	e := &env{t: t, ctx: ctx, log: metalog.NewMemLog(), store: objstore.NewFaulty(objstore.NewMem()),
		src: &fakeSource{rows: map[catalog.BucketID][]Batch{}}}
	var err error
	if e.cat, err = metalog.Open(ctx, e.log, metalog.Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.cat.Close()
		e.src.release()
	})
	e.meta = &faultyMeta{Metadata: e.cat}
	e.propose(catalog.RegisterNode{Node: 1})
	e.epoch = e.propose(catalog.RegisterCoordinator{Node: 1, NodeEpoch: 1}).Epoch
	return e
}

func (e *env) propose(rec catalog.Record) catalog.Outcome {
	e.t.Helper()
	o, err := e.cat.Propose(e.ctx, rec)
	if err != nil {
		e.t.Fatalf("%T: %v", rec, err)
	}
	if o.Err != nil {
		e.t.Fatalf("%T: %v", rec, o.Err)
	}
	return o
}

func (e *env) tierer() *Tierer {
	return New(Config{Store: e.store, StoreURL: storeURL, Meta: e.meta, Source: e.src})
}

// createTable creates a table and leads and opens its buckets; it returns the
// table id.
func (e *env) createTable(spec catalog.TableSpec) catalog.TableID {
	o := e.propose(catalog.CreateTable{Spec: spec})
	e.openBuckets(o.Buckets)
	return o.Table
}

func (e *env) createPartition(id catalog.TableID, value string) []catalog.BucketID {
	o := e.propose(catalog.CreatePartition{Table: id, Value: value})
	e.openBuckets(o.Buckets)
	return o.Buckets
}

func (e *env) openBuckets(ids []catalog.BucketID) {
	for _, b := range ids {
		le := e.propose(catalog.LeadBucket{Bucket: b, Node: 1, CoordinatorEpoch: e.epoch}).Epoch
		e.propose(catalog.OpenStream{Stream: catalog.StreamID(b), Epoch: le, Node: 1, NodeEpoch: 1})
	}
}

// newCoordinator registers a new coordinator epoch (as a new lease holder
// does), fencing the old one.
func (e *env) newCoordinator() {
	e.epoch = e.propose(catalog.RegisterCoordinator{Node: 1, NodeEpoch: 1, ExpectEpoch: e.epoch}).Epoch
}

// testSpec is a log table with one column of most lake types.
func testSpec(name string, buckets int, partitionBy string) catalog.TableSpec {
	cols := []catalog.Column{
		{Name: "id", Type: "bigint", NotNull: true},
		{Name: "s", Type: "text"},
		{Name: "amount", Type: "numeric(12,2)"},
		{Name: "ts", Type: "timestamp with time zone"},
		{Name: "small", Type: "smallint"},
		{Name: "ok", Type: "boolean"},
	}
	if partitionBy != "" {
		cols = append(cols, catalog.Column{Name: partitionBy, Type: "text", NotNull: true})
	}
	return catalog.TableSpec{Name: name, Columns: cols, Buckets: buckets, PartitionBy: partitionBy}
}

// row is the model of one test row.
type row struct {
	id     int64
	s      *string
	amount int64 // cents
	ts     int64
	small  int16
	ok     bool
	part   string
}

// appendRows appends n rows with ids starting at firstID to bucket and
// commits them (advancing the stream's committed end). It returns the rows.
func (e *env) appendRows(id catalog.TableID, bucket catalog.BucketID, firstID int64, n int) []row {
	e.t.Helper()
	var (
		spec catalog.TableSpec
		end  uint64
		le   uint64
		part string
	)
	e.cat.Read(func(v *catalog.View) {
		spec = v.Tables[id].Spec
		end = v.Streams[catalog.StreamID(bucket)].End
		le = v.Streams[catalog.StreamID(bucket)].Epoch
		if p := v.Tables[id].Partitions[v.Buckets[bucket].Partition]; p != nil {
			part = p.Value
		}
	})
	var rows []row
	for i := range n {
		r := row{id: firstID + int64(i), amount: (firstID + int64(i)) * 7, ts: 1_700_000_000_000_000 + int64(i), small: int16(i % 300), ok: i%2 == 0, part: part}
		if i%5 != 0 {
			s := fmt.Sprintf("row-%d", r.id)
			r.s = &s
		}
		rows = append(rows, r)
	}
	rec := buildRecord(e.t, spec, rows)
	e.src.add(bucket, Batch{Offset: end, Record: rec})
	e.propose(catalog.CommitStreamObjects{Stream: catalog.StreamID(bucket), Epoch: le,
		Objects: []catalog.StreamObject{{Key: fmt.Sprintf("fake/%d/%d", bucket, end), Start: end, End: end + uint64(n), Size: 1}}})
	return rows
}

func buildRecord(t *testing.T, spec catalog.TableSpec, rows []row) arrow.RecordBatch {
	t.Helper()
	cols := make([]sqltypes.Column, len(spec.Columns))
	for i, c := range spec.Columns {
		typ, err := sqltypes.Parse(c.Type)
		if err != nil {
			t.Fatal(err)
		}
		cols[i] = sqltypes.Column{Name: c.Name, Type: typ, NotNull: c.NotNull}
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, sqltypes.Schema(cols))
	defer b.Release()
	for _, r := range rows {
		b.Field(0).(*array.Int64Builder).Append(r.id)
		if r.s == nil {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append(*r.s)
		}
		b.Field(2).(*array.Decimal128Builder).Append(decimal128.FromI64(r.amount))
		b.Field(3).(*array.TimestampBuilder).Append(arrow.Timestamp(r.ts))
		b.Field(4).(*array.Int16Builder).Append(r.small)
		b.Field(5).(*array.BooleanBuilder).Append(r.ok)
		if len(spec.Columns) > 6 {
			b.Field(6).(*array.StringBuilder).Append(r.part)
		}
	}
	return b.NewRecordBatch()
}

// fakeSource serves appended batches, like buckets.Manager.ReadCommitted.
type fakeSource struct {
	mu   sync.Mutex
	rows map[catalog.BucketID][]Batch // guarded by mu
	// fail, if set, fails reads of that bucket.
	fail map[catalog.BucketID]error // guarded by mu
	// widest is the widest range read so far.
	widest uint64 // guarded by mu
}

func (s *fakeSource) add(b catalog.BucketID, batch Batch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rows[b] = append(s.rows[b], batch)
}

func (s *fakeSource) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, bs := range s.rows {
		for _, b := range bs {
			b.Record.Release()
		}
	}
}

func (s *fakeSource) ReadCommitted(ctx context.Context, bucket catalog.BucketID, from, to uint64) ([]Batch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fail[bucket]; err != nil {
		return nil, err
	}
	s.widest = max(s.widest, to-from)
	var out []Batch
	for _, b := range s.rows[bucket] {
		if b.Offset < to && b.Offset+uint64(b.Record.NumRows()) > from {
			b.Record.Retain()
			out = append(out, b)
		}
	}
	return out, nil
}

// faultyMeta wraps the catalog and can fail CommitTieringRound proposals:
// before they reach the log, or after (the record is applied, the caller is
// told it failed).
type faultyMeta struct {
	Metadata
	mu        sync.Mutex
	failNext  int  // guarded by mu: fail this many CommitTieringRound proposals
	afterward bool // guarded by mu: fail after applying
}

var errLostProposal = errors.New("injected: proposal outcome lost")

func (m *faultyMeta) failTiering(n int, afterApply bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failNext, m.afterward = n, afterApply
}

func (m *faultyMeta) Propose(ctx context.Context, rec catalog.Record) (catalog.Outcome, error) {
	if _, ok := rec.(catalog.CommitTieringRound); ok {
		m.mu.Lock()
		fail, after := m.failNext > 0, m.afterward
		if fail {
			m.failNext--
		}
		m.mu.Unlock()
		if fail && !after {
			return catalog.Outcome{}, errLostProposal
		}
		if fail && after {
			m.Metadata.Propose(ctx, rec)
			return catalog.Outcome{}, errLostProposal
		}
	}
	return m.Metadata.Propose(ctx, rec)
}

// tieredOffsets is the view's tiering state of a table.
func (e *env) tiered(id catalog.TableID) catalog.TieringState {
	var ts catalog.TieringState
	e.cat.Read(func(v *catalog.View) { ts = v.Tables[id].Tiering })
	return ts
}

func (e *env) ends(id catalog.TableID) map[catalog.BucketID]uint64 {
	out := map[catalog.BucketID]uint64{}
	e.cat.Read(func(v *catalog.View) {
		for _, b := range v.BucketsOf(id) {
			out[b] = v.Streams[catalog.StreamID(b)].End
		}
	})
	return out
}

func sortedKeys[M ~map[K]V, K interface{ ~uint64 }, V any](m M) []K {
	return slices.Sorted(maps.Keys(m))
}

var _ = time.Second

// failPut makes the store's put number i (from 0) fail: before it is
// written (ErrInjected), or, lost, after it was written (ErrResponseLost:
// the writer cannot tell it was). e.store.SetHooks(objstore.Hooks{}) ends
// it.
func (e *env) failPut(i int, lost bool) {
	var n atomic.Int32
	if lost {
		e.store.SetHooks(objstore.Hooks{After: func(_ context.Context, op objstore.Op, _ string, err error) error {
			if err == nil && op == objstore.OpPut && int(n.Add(1)) == i+1 {
				return objstore.ErrResponseLost
			}
			return err
		}})
		return
	}
	e.store.SetHooks(objstore.Hooks{Before: func(_ context.Context, op objstore.Op, _ string) error {
		if op == objstore.OpPut && int(n.Add(1)) == i+1 {
			return objstore.ErrInjected
		}
		return nil
	}})
}
