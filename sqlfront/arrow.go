package sqlfront

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/minkdb/mink/access"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/sqltypes"
	"github.com/minkdb/mink/sqlfront/engine"
	pg "github.com/minkdb/mink/sqlfront/pgtree"
	"github.com/minkdb/mink/sqlfront/pgwire"
)

// Arrow sessions (server/flightsql): the same statements, planning,
// privileges and errors as a Postgres session, with results as Arrow
// record batches.
//
// A plain query (SELECT, VALUES, EXPLAIN that the engine runs as written
// or rewritten) hands over the engine's own batches: DuckDB's Arrow
// layout, with the column names a Postgres client would see. Every other
// statement that returns rows (primary-key lookups, catalog queries,
// INSERT … RETURNING, SHOW) is materialised from its rows into batches of
// the Arrow types of its columns' PostgreSQL types (arrowRows).

// ArrowSession is a SQL session whose results are Arrow batches. It acts
// as one role for its whole life. Like a Postgres session it is used by one
// goroutine at a time, and a result must be read to its end or released
// before the next statement.
type ArrowSession struct {
	s *session
}

// NewArrowSession opens a session acting as id (whose privileges are
// checked at every statement, as for a Postgres session of that role).
func (f *Frontend) NewArrowSession(ctx context.Context, id access.Identity) (*ArrowSession, error) {
	conn, err := f.cfg.Engine.Conn(ctx, engine.ConnOptions{TimeZone: "UTC"})
	if err != nil {
		return nil, toWire(err)
	}
	info := pgwire.SessionInfo{User: id.Name, Database: f.cfg.Database, ApplicationName: "flight-sql"}
	s := newSession(f, conn, info)
	s.identity = id
	if err := s.applyStartupParams(ctx); err != nil {
		conn.Close()
		return nil, toWire(err)
	}
	return &ArrowSession{s: s}, nil
}

// BootstrapIdentity is who a session acts as when no one authenticated
// (no access.Guard, or trust mode without credentials): the bootstrap
// superuser.
func (f *Frontend) BootstrapIdentity() access.Identity {
	id := access.Identity{Role: catalog.BootstrapRole, Name: "mink"}
	f.cfg.Meta.Read(func(v *catalog.View) {
		if r, ok := v.Roles[catalog.BootstrapRole]; ok {
			id.Name = r.Name
		}
	})
	return id
}

// Database is the name of the one database (Flight SQL's catalog).
func (f *Frontend) Database() string { return f.cfg.Database }

// Close ends the session; an open transaction block is rolled back.
func (a *ArrowSession) Close() { a.s.Close() }

// ArrowStatement is a prepared statement of an ArrowSession.
type ArrowStatement struct {
	a      *ArrowSession
	st     *stmt
	schema *arrow.Schema
	params *arrow.Schema
}

// Prepare prepares one statement and checks the role's privileges for
// it. paramTypes, when not nil, are the types
// of $1, $2, … as the client will send them (like the parameter types of
// a Postgres Parse message); nil lets the statement infer them.
func (a *ArrowSession) Prepare(ctx context.Context, sql string, paramTypes []sqltypes.Type) (*ArrowStatement, error) {
	var oids []uint32
	for _, t := range paramTypes {
		oid := uint32(0)
		if t.Valid() && t.Kind() != sqltypes.Unknown {
			oid = t.OID()
		}
		oids = append(oids, oid)
	}
	ctx = access.NewContext(ctx, a.s.identity)
	ps, err := a.s.Prepare(ctx, sql, oids)
	if err != nil {
		return nil, err
	}
	st := ps.(*stmt)
	// Arrow clients learn of a missing privilege when they plan, before
	// they fetch (execution checks again).
	if tree, err := pg.Parse(sql); err == nil && len(tree.Stmts) == 1 {
		if err := a.s.checkPrivileges(ctx, statementNeeds(tree.Stmts[0].Stmt)); err != nil {
			st.Close()
			return nil, toWire(err)
		}
	}
	p := &ArrowStatement{a: a, st: st}
	if cols := st.Columns(); cols != nil {
		p.schema = columnsSchema(cols, st.arrow)
	}
	var fields []arrow.Field
	for i, oid := range st.ParamOIDs() {
		t := sqltypes.Of(sqltypes.Text)
		if pt, ok := sqltypes.FromOID(oid, -1); ok && oid != 0 {
			t = pt
		}
		fields = append(fields, arrow.Field{Name: "$" + strconv.Itoa(i+1), Type: arrowTypeOf(t), Nullable: true})
	}
	p.params = arrow.NewSchema(fields, nil)
	return p, nil
}

// Schema is the schema of the statement's result batches; nil for a
// statement that returns no rows (DML without RETURNING, DDL).
func (p *ArrowStatement) Schema() *arrow.Schema { return p.schema }

// ParamSchema has one field per parameter ($1, $2, …), of the type the
// statement expects.
func (p *ArrowStatement) ParamSchema() *arrow.Schema { return p.params }

// Close releases the statement.
func (p *ArrowStatement) Close() { p.st.Close() }

// ArrowResult is what one execution produced.
type ArrowResult struct {
	// Rows is the result's batches, nil for a statement without rows.
	// The caller releases it, and reads or releases it before the
	// session's next statement.
	Rows array.RecordReader
	// Tag is the PostgreSQL command tag ("INSERT 0 3", "CREATE TABLE").
	Tag string
}

// RowsAffected is the row count of an INSERT, UPDATE, DELETE, COPY or
// MERGE tag, and 0 for other statements.
func (r ArrowResult) RowsAffected() int64 {
	f := strings.Fields(r.Tag)
	if len(f) < 2 {
		return 0
	}
	switch f[0] {
	case "INSERT", "UPDATE", "DELETE", "COPY", "MERGE", "SELECT", "FETCH", "MOVE":
		n, err := strconv.ParseInt(f[len(f)-1], 10, 64)
		if err == nil {
			return n
		}
	}
	return 0
}

// Execute runs the statement with params (Go values as ArrowParams
// returns them). Errors are *pgwire.Error, also when the result's reader
// fails (Err) part-way.
func (p *ArrowStatement) Execute(ctx context.Context, params []any) (ArrowResult, error) {
	s := p.a.s
	res, err := p.st.Execute(ctx, params)
	if err != nil {
		s.Sync(ctx, true)
		return ArrowResult{}, err
	}
	if res.CopyIn != nil || res.CopyOut != nil {
		s.Sync(ctx, true)
		return ArrowResult{}, unsupported("COPY … FROM STDIN and COPY … TO STDOUT are not supported over Flight SQL: use DoPut and DoGet of the table")
	}
	out := ArrowResult{Tag: res.Tag}
	if res.Rows == nil {
		s.Sync(ctx, false)
		return out, nil
	}
	if er, ok := res.Rows.(*engineRows); ok && p.st.arrow != nil && len(er.quotients) == 0 && er.release == nil {
		out.Rows = newWireErrReader(er.rows.Reader(), p.schema)
		return out, nil
	}
	schema := p.schema
	if schema == nil || schema.NumFields() != len(res.Rows.Columns()) {
		schema = columnsSchema(res.Rows.Columns(), nil)
	}
	out.Rows = newArrowRows(ctx, schema, res.Rows)
	if out.Tag == "" {
		out.Tag = "SELECT"
	}
	return out, nil
}

// Drain reads a result to its end and returns the number of rows it held,
// for statements run for their effect (INSERT … RETURNING as an update).
func Drain(r ArrowResult) (int64, error) {
	if r.Rows == nil {
		return r.RowsAffected(), nil
	}
	defer r.Rows.Release()
	var n int64
	for r.Rows.Next() {
		n += r.Rows.RecordBatch().NumRows()
	}
	if err := r.Rows.Err(); err != nil {
		return n, err
	}
	if ra := r.RowsAffected(); ra > n {
		return ra, nil
	}
	return n, nil
}

// ArrowParams returns row i of a batch of parameter values as the Go
// values Execute takes for parameters of the batch's column types (see
// ArrowParamTypes).
func ArrowParams(rec arrow.RecordBatch, row int) []any {
	out := make([]any, rec.NumCols())
	for c := range out {
		col := rec.Column(c)
		t := sqltypes.FromArrow(col.DataType())
		v := engine.GoValue(col, row, t)
		if t.Kind() == sqltypes.UUID {
			if s, ok := v.(string); ok {
				if u, err := parseUUID(s); err == nil {
					v = u
				}
			}
		}
		out[c] = v
	}
	return out
}

// ArrowParamTypes are the parameter types of a batch of parameter values,
// for Prepare.
func ArrowParamTypes(schema *arrow.Schema) []sqltypes.Type {
	out := make([]sqltypes.Type, schema.NumFields())
	for i, f := range schema.Fields() {
		out[i] = sqltypes.FromArrow(f.Type)
		if f.Type.ID() == arrow.NULL {
			out[i] = sqltypes.Type{}
		}
	}
	return out
}

func parseUUID(s string) ([16]byte, error) {
	var u pgtype.UUID
	if err := u.Scan(s); err != nil {
		return [16]byte{}, err
	}
	return u.Bytes, nil
}

// columnsSchema is the Arrow schema of rows with these columns: the
// engine's schema renamed to the columns' names when there is one (the
// engine names some columns differently from PostgreSQL), else one field
// per column of its PostgreSQL type's Arrow type.
func columnsSchema(cols []pgwire.Column, engineSchema *arrow.Schema) *arrow.Schema {
	fields := make([]arrow.Field, len(cols))
	if engineSchema != nil && engineSchema.NumFields() == len(cols) {
		for i, f := range engineSchema.Fields() {
			f.Name = cols[i].Name
			fields[i] = f
		}
		return arrow.NewSchema(fields, nil)
	}
	for i, c := range cols {
		t, ok := sqltypes.FromOID(c.TypeOID, c.TypeMod)
		if !ok {
			t = sqltypes.Of(sqltypes.Text)
		}
		fields[i] = arrow.Field{Name: c.Name, Type: arrowTypeOf(t), Nullable: true,
			Metadata: arrow.NewMetadata([]string{sqltypes.MetadataKey}, []string{t.Name()})}
	}
	return arrow.NewSchema(fields, nil)
}

// arrowTypeOf is the Arrow type in which arrowRows returns values of t:
// the storage type for the types whose Go values map onto it directly,
// text for the others (PostgreSQL's text output).
func arrowTypeOf(t sqltypes.Type) arrow.DataType {
	switch t.Kind() {
	case sqltypes.Bool, sqltypes.Int2, sqltypes.Int4, sqltypes.Int8, sqltypes.Float4, sqltypes.Float8,
		sqltypes.Text, sqltypes.Varchar, sqltypes.Char, sqltypes.Bytea, sqltypes.Date,
		sqltypes.Timestamp, sqltypes.Timestamptz:
		return t.ArrowType()
	case sqltypes.Numeric:
		if t.Precision() > 0 {
			return t.ArrowType() // decimal128(p, s), as the engine gives it
		}
	}
	return arrow.BinaryTypes.String
}

// wireErrReader gives the engine's batches the statement's column names
// and reports their errors as *pgwire.Error.
type wireErrReader struct {
	array.RecordReader
	// names are the statement's column names; schema is the engine's
	// schema with those names, made on first use.
	names  *arrow.Schema
	schema *arrow.Schema
	cur    arrow.RecordBatch
}

func newWireErrReader(r array.RecordReader, names *arrow.Schema) *wireErrReader {
	w := &wireErrReader{RecordReader: r, names: names}
	w.schema = r.Schema()
	if names != nil && names.NumFields() == w.schema.NumFields() {
		fields := w.schema.Fields()
		for i := range fields {
			fields[i].Name = names.Field(i).Name
		}
		w.schema = arrow.NewSchema(fields, nil)
	}
	return w
}

func (r *wireErrReader) Schema() *arrow.Schema { return r.schema }

func (r *wireErrReader) Next() bool {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	if !r.RecordReader.Next() {
		return false
	}
	rec := r.RecordReader.RecordBatch()
	r.cur = array.NewRecordBatch(r.schema, rec.Columns(), rec.NumRows())
	return true
}

func (r *wireErrReader) RecordBatch() arrow.RecordBatch { return r.cur }
func (r *wireErrReader) Record() arrow.RecordBatch      { return r.cur }

func (r *wireErrReader) Err() error { return toWireOrNil(r.RecordReader.Err()) }

func (r *wireErrReader) Release() {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	r.RecordReader.Release()
}

func toWireOrNil(err error) error {
	if err == nil {
		return nil
	}
	return toWire(err)
}

// arrowRowsBatch is how many rows arrowRows puts in a batch.
const arrowRowsBatch = 2048

// arrowRows materialises a statement's rows into Arrow batches.
type arrowRows struct {
	ctx    context.Context
	schema *arrow.Schema
	rows   pgwire.Rows
	refs   atomic.Int64
	cur    arrow.RecordBatch
	err    error
	done   bool
}

func newArrowRows(ctx context.Context, schema *arrow.Schema, rows pgwire.Rows) *arrowRows {
	r := &arrowRows{ctx: ctx, schema: schema, rows: rows}
	r.refs.Store(1)
	return r
}

func (r *arrowRows) Schema() *arrow.Schema          { return r.schema }
func (r *arrowRows) RecordBatch() arrow.RecordBatch { return r.cur }
func (r *arrowRows) Record() arrow.RecordBatch      { return r.cur }
func (r *arrowRows) Err() error                     { return r.err }
func (r *arrowRows) Retain()                        { r.refs.Add(1) }

func (r *arrowRows) Release() {
	if r.refs.Add(-1) > 0 {
		return
	}
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	if r.rows != nil {
		r.rows.Close()
		r.rows = nil
	}
}

func (r *arrowRows) Next() bool {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	if r.done || r.rows == nil {
		return false
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, r.schema)
	defer b.Release()
	n := 0
	for n < arrowRowsBatch {
		vals, err := r.rows.Next(r.ctx)
		if errors.Is(err, io.EOF) {
			r.done = true
			break
		}
		if err != nil {
			r.err, r.done = toWire(err), true
			return false
		}
		for c := range r.schema.NumFields() {
			var v any
			if c < len(vals) {
				v = vals[c]
			}
			if err := appendResultValue(b.Field(c), v); err != nil {
				r.err, r.done = errorf(pgwire.CodeInternalError, "column %q: %v", r.schema.Field(c).Name, err), true
				return false
			}
		}
		n++
	}
	if n == 0 {
		return false
	}
	r.cur = b.NewRecordBatch()
	return true
}

// appendResultValue appends one of the Go values Rows yield (pgwire's value
// kinds) to a builder of arrowTypeOf's types.
func appendResultValue(b array.Builder, v any) error {
	if v == nil {
		b.AppendNull()
		return nil
	}
	switch b := b.(type) {
	case *array.StringBuilder:
		b.Append(textOf(v))
		return nil
	case *array.BooleanBuilder:
		if x, ok := v.(bool); ok {
			b.Append(x)
			return nil
		}
	case *array.Int16Builder:
		if x, ok := resultInt(v); ok {
			b.Append(int16(x))
			return nil
		}
	case *array.Int32Builder:
		if x, ok := resultInt(v); ok {
			b.Append(int32(x))
			return nil
		}
	case *array.Int64Builder:
		if x, ok := resultInt(v); ok {
			b.Append(x)
			return nil
		}
	case *array.Float32Builder:
		if x, ok := resultFloat(v); ok {
			b.Append(float32(x))
			return nil
		}
	case *array.Float64Builder:
		if x, ok := resultFloat(v); ok {
			b.Append(x)
			return nil
		}
	case *array.BinaryBuilder:
		switch x := v.(type) {
		case []byte:
			b.Append(x)
			return nil
		case string:
			b.Append([]byte(x))
			return nil
		}
	case *array.Decimal128Builder:
		dt := b.Type().(*arrow.Decimal128Type)
		if d, ok := decimalOf(v, dt.Precision, dt.Scale); ok {
			b.Append(d)
			return nil
		}
	case *array.Date32Builder:
		if x, ok := v.(time.Time); ok {
			b.Append(arrow.Date32FromTime(x))
			return nil
		}
	case *array.TimestampBuilder:
		if x, ok := v.(time.Time); ok {
			b.Append(arrow.Timestamp(x.UnixMicro()))
			return nil
		}
	}
	return fmt.Errorf("cannot store %T as %s", v, b.Type())
}

// decimalOf is a numeric value (pgtype.Numeric, or its text) as a
// decimal of scale.
func decimalOf(v any, precision, scale int32) (decimal128.Num, bool) {
	switch x := v.(type) {
	case pgtype.Numeric:
		if !x.Valid || x.NaN || x.InfinityModifier != pgtype.Finite || x.Int == nil {
			return decimal128.Num{}, false
		}
		n := new(big.Int).Set(x.Int)
		switch e := int64(x.Exp) + int64(scale); {
		case e > 0:
			n.Mul(n, new(big.Int).Exp(big.NewInt(10), big.NewInt(e), nil))
		case e < 0:
			n.Quo(n, new(big.Int).Exp(big.NewInt(10), big.NewInt(-e), nil))
		}
		d := decimal128.FromBigInt(n)
		return d, d.FitsInPrecision(precision)
	case string:
		d, err := decimal128.FromString(x, precision, scale)
		return d, err == nil
	case pgwire.Text:
		d, err := decimal128.FromString(string(x), precision, scale)
		return d, err == nil
	}
	return decimal128.Num{}, false
}

// resultInt is asInt, and the engine's int8 and uint32 results too.
func resultInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int8:
		return int64(x), true
	case uint32:
		return int64(x), true
	}
	return asInt(v)
}

func resultFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float32:
		return float64(x), true
	case float64:
		return x, true
	}
	if i, ok := resultInt(v); ok {
		return float64(i), true
	}
	return 0, false
}

// textOf renders a value as text, as PostgreSQL's text output would for
// the common kinds.
func textOf(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case pgwire.Text:
		return string(x)
	case []byte:
		return string(x)
	case bool:
		if x {
			return "t"
		}
		return "f"
	case [16]byte:
		u := pgtype.UUID{Bytes: x, Valid: true}
		s, _ := u.Value()
		return fmt.Sprint(s)
	case time.Time:
		return x.Format("2006-01-02 15:04:05.999999Z07:00")
	case []any:
		var b strings.Builder
		b.WriteByte('{')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			if e == nil {
				b.WriteString("NULL")
				continue
			}
			b.Write(sqltypes.AppendArrayElement(nil, textOf(e)))
		}
		b.WriteByte('}')
		return b.String()
	case driver.Valuer:
		if dv, err := x.Value(); err == nil && dv != nil {
			return textOf(dv)
		}
	}
	return fmt.Sprint(v)
}
