package engine

/*
#include <stdlib.h>

void minkScanBind(void *);
void minkScanInit(void *);
void minkScanLocalInit(void *);
void minkScanFunc(void *, void *);
void minkFreeSlot(void *);
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"runtime/cgo"
	"sync"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	duck "github.com/duckdb/duckdb-go-bindings"
)

// This file implements the DuckDB table function mink_scan(key), through
// which queries read registered Sources. DuckDB calls its callbacks on its
// own worker threads:
//
//	bind   once per reference to the source in a statement (also when a
//	       statement is only prepared): declares the columns
//	init   once per scan, before it starts: learns the projected columns and
//	       opens the Source for them
//	local  once per thread taking part in the scan
//	func   repeatedly, from up to DB.threads threads at once: returns the
//	       next ≤ 2048 rows as a DuckDB chunk
//
// A thread takes a whole batch from the source's reader (under the scan's
// lock), converts it into one DuckDB chunk (DuckDB takes over the Arrow
// buffers; strings are copied) and hands it out 2048 rows at a time, as
// slices of that chunk. Converting whole batches matters: the fixed cost of
// one conversion is about that of converting 2048 rows.
//
// Each reference opens the Source anew, so a statement may read one source
// several times (self-joins, subqueries, CTEs referenced twice).

// scanFunctionName is the table function's name in DuckDB.
const scanFunctionName = "mink_scan"

func registerScanFunction(db *DB) error {
	f := duck.CreateTableFunction()
	defer duck.DestroyTableFunction(&f)
	duck.TableFunctionSetName(f, scanFunctionName)
	varchar := duck.CreateLogicalType(duck.TypeVarchar)
	duck.TableFunctionAddParameter(f, varchar)
	duck.DestroyLogicalType(&varchar)
	// The DB outlives the function; DuckDB frees nothing through this slot.
	duck.TableFunctionSetExtraInfo(f, db.self, nil)
	duck.TableFunctionSetBind(f, unsafe.Pointer(C.minkScanBind))
	duck.TableFunctionSetInit(f, unsafe.Pointer(C.minkScanInit))
	duck.TableFunctionSetLocalInit(f, unsafe.Pointer(C.minkScanLocalInit))
	duck.TableFunctionSetFunction(f, unsafe.Pointer(C.minkScanFunc))
	duck.TableFunctionSupportsProjectionPushdown(f, true)
	if duck.RegisterTableFunction(db.conv, f) == duck.StateError {
		return errors.New("sqlfront/engine: register table function " + scanFunctionName)
	}
	return nil
}

// A slot is C memory holding a cgo.Handle, so that DuckDB can carry a Go
// value through C and free it with minkFreeSlot.
func newSlot(v any) unsafe.Pointer {
	p := C.malloc(C.size_t(unsafe.Sizeof(uintptr(0))))
	*(*uintptr)(p) = uintptr(cgo.NewHandle(v))
	return p
}

func slotValue(p unsafe.Pointer) any { return cgo.Handle(*(*uintptr)(p)).Value() }

func freeSlot(p unsafe.Pointer) {
	h := cgo.Handle(*(*uintptr)(p))
	if c, ok := h.Value().(interface{ close() }); ok {
		c.close()
	}
	h.Delete()
	C.free(p)
}

//export minkFreeSlot
func minkFreeSlot(p unsafe.Pointer) { freeSlot(p) }

// catch turns a panic in a callback into a DuckDB error: a panic must not
// unwind through DuckDB's C++ frames.
func catch(report func(string)) {
	if r := recover(); r != nil {
		report(fmt.Sprintf("mink_scan: internal error: %v", r))
	}
}

//export minkScanBind
func minkScanBind(infoPtr unsafe.Pointer) {
	info := duck.BindInfo{Ptr: infoPtr}
	defer catch(func(msg string) { duck.BindSetError(info, msg) })
	db := slotValue(duck.BindGetExtraInfo(info)).(*DB)
	param := duck.BindGetParameter(info, 0)
	key := duck.GetVarchar(param)
	duck.DestroyValue(&param)
	reg := db.source(key)
	if reg == nil {
		duck.BindSetError(info, "mink_scan: no source is registered under this key")
		return
	}
	types, err := logicalTypes(db.conv, reg.schema)
	if err != nil {
		duck.BindSetError(info, fmt.Sprintf("mink_scan: source %q: %v", reg.name, err))
		return
	}
	for i, f := range reg.schema.Fields() {
		duck.BindAddResultColumn(info, f.Name, types[i])
		duck.DestroyLogicalType(&types[i])
	}
	if sized, ok := reg.src.(SizedSource); ok {
		if rows, exact := sized.EstimatedRows(); rows >= 0 {
			duck.BindSetCardinality(info, duck.IdxT(rows), exact)
		}
	}
	duck.BindSetBindData(info, newSlot(reg), unsafe.Pointer(C.minkFreeSlot))
}

// logicalTypes returns the DuckDB types DuckDB gives the columns of
// schema, read off an empty converted chunk. The caller destroys them.
func logicalTypes(conv duck.Connection, schema *arrow.Schema) ([]duck.LogicalType, error) {
	cs, err := schemaFromArrow(conv, schema)
	if err != nil {
		return nil, err
	}
	defer destroyConvertedSchema(&cs)
	cols := emptyColumns(schema)
	empty := array.NewRecordBatch(schema, cols, 0)
	for _, c := range cols {
		c.Release()
	}
	defer empty.Release()
	chunk, err := chunkFromArrow(conv, empty, cs)
	if err != nil {
		return nil, err
	}
	defer duck.DestroyDataChunk(&chunk)
	types := make([]duck.LogicalType, schema.NumFields())
	for i := range types {
		types[i] = duck.VectorGetColumnType(duck.DataChunkGetVector(chunk, duck.IdxT(i)))
	}
	return types, nil
}

func emptyColumns(schema *arrow.Schema) []arrow.Array {
	cols := make([]arrow.Array, schema.NumFields())
	for i, f := range schema.Fields() {
		cols[i] = array.MakeArrayOfNull(memory.DefaultAllocator, f.Type, 0)
	}
	return cols
}

// noColumn marks an output column that is not a source column: DuckDB asks
// for the row id when a query needs rows but no columns (count(*)).
const noColumn = -1

// scan is the state of one scan of a source, shared by DuckDB's threads.
type scan struct {
	reg    *registration
	ctx    context.Context
	schema *arrow.Schema // the projected columns
	conv   convertedSchema
	// outCols maps output vectors to columns of schema, or noColumn.
	outCols []int

	mu struct {
		sync.Mutex
		rdr  array.RecordReader
		done bool
		// held keeps every batch handed to DuckDB until the scan ends.
		// DuckDB's vectors point into the batches' buffers (numbers and
		// strings are not copied), and duckdb_data_chunk_from_arrow ties
		// the Arrow data's lifetime to the chunk's first column only: a
		// vector of another column that outlived it would point into
		// freed memory. Sources hold their batches for the scan anyway
		// (Records, table sources reading buckets), so this costs no
		// memory today; a source that streams more data than fits in
		// memory would need DuckDB to own each column's buffers.
		held []arrow.RecordBatch
	}
}

// scanThread is one DuckDB thread's part of a scan: the converted batch it
// is handing out.
type scanThread struct {
	chunk  duck.DataChunk // nil Ptr if none
	rows   int            // rows in the current batch
	offset int            // rows handed out
}

func (t *scanThread) close() { t.drop() }

func (t *scanThread) drop() {
	if t.chunk.Ptr != nil {
		duck.DestroyDataChunk(&t.chunk)
	}
	t.rows, t.offset = 0, 0
}

//export minkScanInit
func minkScanInit(infoPtr unsafe.Pointer) {
	info := duck.InitInfo{Ptr: infoPtr}
	defer catch(func(msg string) { duck.InitSetError(info, msg) })
	reg := slotValue(duck.InitGetBindData(info)).(*registration)
	s, err := reg.openScan(info)
	if err != nil {
		reg.conn.noteSourceError(reg.name, err)
		duck.InitSetError(info, fmt.Sprintf("mink_scan: source %q: %v", reg.name, err))
		return
	}
	threads := reg.conn.db.threads
	if sized, ok := reg.src.(SizedSource); ok {
		// Small sources are read by one thread, which keeps their rows in
		// order for queries that do not sort.
		if rows, _ := sized.EstimatedRows(); rows >= 0 && rows <= smallSourceRows {
			threads = 1
		}
	}
	duck.InitSetMaxThreads(info, duck.IdxT(threads))
	duck.InitSetInitData(info, newSlot(s), unsafe.Pointer(C.minkFreeSlot))
}

// smallSourceRows is the size up to which a source is scanned by one thread.
const smallSourceRows = 64 * 1024

func (reg *registration) openScan(info duck.InitInfo) (*scan, error) {
	ctx := reg.conn.statementContext()
	if ctx == nil {
		// DuckDB scans only while a statement of the Conn runs.
		return nil, errors.New("no statement is running on the source's connection")
	}
	n := int(duck.InitGetColumnCount(info))
	s := &scan{reg: reg, ctx: ctx, outCols: make([]int, n)}
	var columns []int
	var fields []arrow.Field
	for i := 0; i < n; i++ {
		idx := int(duck.InitGetColumnIndex(info, duck.IdxT(i)))
		if idx < 0 || idx >= reg.schema.NumFields() {
			s.outCols[i] = noColumn
			continue
		}
		s.outCols[i] = len(columns)
		columns = append(columns, idx)
		fields = append(fields, reg.schema.Field(idx))
	}
	s.schema = arrow.NewSchema(fields, nil)
	if len(columns) > 0 {
		cs, err := schemaFromArrow(reg.conn.db.conv, s.schema)
		if err != nil {
			return nil, err
		}
		s.conv = cs
	}
	rdr, err := reg.src.Open(s.ctx, columns)
	if err != nil {
		destroyConvertedSchema(&s.conv)
		return nil, err
	}
	if err := checkSchema(rdr.Schema(), s.schema); err != nil {
		rdr.Release()
		destroyConvertedSchema(&s.conv)
		return nil, err
	}
	s.mu.rdr = rdr
	return s, nil
}

// checkSchema verifies that a source returned the columns asked for: DuckDB
// converts chunks by the types it was promised, so a mismatch must not
// reach it.
func checkSchema(got, want *arrow.Schema) error {
	if got.NumFields() != want.NumFields() {
		return fmt.Errorf("source returned %d columns, %d were asked for", got.NumFields(), want.NumFields())
	}
	for i := range want.Fields() {
		if !arrow.TypeEqual(got.Field(i).Type, want.Field(i).Type) {
			return fmt.Errorf("source returned column %d as %s, want %s", i, got.Field(i).Type, want.Field(i).Type)
		}
	}
	return nil
}

// close is called when DuckDB destroys the scan's state (freeSlot).
func (s *scan) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.rdr != nil {
		s.mu.rdr.Release()
		s.mu.rdr = nil
	}
	for _, rec := range s.mu.held {
		rec.Release()
	}
	s.mu.held = nil
	destroyConvertedSchema(&s.conv)
}

// nextBatch returns the source's next batch, retained; nil at the end.
func (s *scan) nextBatch() (arrow.RecordBatch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.done {
		return nil, nil
	}
	if err := s.ctx.Err(); err != nil {
		return nil, err
	}
	if !s.mu.rdr.Next() {
		s.mu.done = true
		return nil, s.mu.rdr.Err()
	}
	rec := s.mu.rdr.RecordBatch()
	if int(rec.NumCols()) != s.schema.NumFields() {
		s.mu.done = true
		return nil, fmt.Errorf("source returned a batch with %d columns, want %d", rec.NumCols(), s.schema.NumFields())
	}
	for i := range s.schema.Fields() {
		if !arrow.TypeEqual(rec.Column(i).DataType(), s.schema.Field(i).Type) {
			s.mu.done = true
			return nil, fmt.Errorf("source returned column %d as %s, want %s", i, rec.Column(i).DataType(), s.schema.Field(i).Type)
		}
	}
	rec.Retain()
	rec.Retain()
	s.mu.held = append(s.mu.held, rec)
	return rec, nil
}

//export minkScanLocalInit
func minkScanLocalInit(infoPtr unsafe.Pointer) {
	info := duck.InitInfo{Ptr: infoPtr}
	defer catch(func(msg string) { duck.InitSetError(info, msg) })
	duck.InitSetInitData(info, newSlot(&scanThread{}), unsafe.Pointer(C.minkFreeSlot))
}

//export minkScanFunc
func minkScanFunc(infoPtr, outPtr unsafe.Pointer) {
	info := duck.FunctionInfo{Ptr: infoPtr}
	out := duck.DataChunk{Ptr: outPtr}
	defer catch(func(msg string) { duck.FunctionSetError(info, msg) })
	s := slotValue(duck.FunctionGetInitData(info)).(*scan)
	t := slotValue(duck.FunctionGetLocalInitData(info)).(*scanThread)
	if err := s.fill(t, out); err != nil {
		duck.DataChunkSetSize(out, 0)
		s.reg.conn.noteSourceError(s.reg.name, err)
		duck.FunctionSetError(info, fmt.Sprintf("mink_scan: source %q: %v", s.reg.name, err))
	}
}

// fill puts this thread's next rows into out; no rows means the thread is
// done with the scan.
func (s *scan) fill(t *scanThread, out duck.DataChunk) error {
	for t.offset >= t.rows {
		t.drop()
		rec, err := s.nextBatch()
		if err != nil || rec == nil {
			duck.DataChunkSetSize(out, 0)
			return err
		}
		t.rows = int(rec.NumRows())
		if s.schema.NumFields() > 0 && t.rows > 0 {
			t.chunk, err = chunkFromArrow(s.reg.conn.db.conv, rec, s.conv)
		}
		rec.Release()
		if err != nil {
			t.rows = 0
			return err
		}
	}
	n := min(int(duck.VectorSize()), t.rows-t.offset)
	var sel duck.SelectionVector
	if t.chunk.Ptr != nil && t.offset > 0 {
		// Rows [offset, offset+n) of the converted batch, as a slice (a
		// DuckDB dictionary vector) that shares its buffers.
		sel = duck.CreateSelectionVector(duck.IdxT(n))
		defer duck.DestroySelectionVector(&sel)
		idx := unsafe.Slice((*uint32)(unsafe.Pointer(duck.SelectionVectorGetDataPtr(sel))), n)
		for i := range idx {
			idx[i] = uint32(t.offset + i)
		}
	}
	for i, col := range s.outCols {
		vec := duck.DataChunkGetVector(out, duck.IdxT(i))
		if col == noColumn || t.chunk.Ptr == nil {
			fillZero(vec)
			continue
		}
		duck.VectorReferenceVector(vec, duck.DataChunkGetVector(t.chunk, duck.IdxT(col)))
		if sel.Ptr != nil {
			duck.SliceVector(vec, sel, duck.IdxT(n))
		}
	}
	t.offset += n
	duck.DataChunkSetSize(out, duck.IdxT(n))
	return nil
}

// fillZero makes vec (a row id column) the constant 0.
func fillZero(vec duck.Vector) {
	v := duck.CreateInt64(0)
	duck.VectorReferenceValue(vec, v)
	duck.DestroyValue(&v)
}
