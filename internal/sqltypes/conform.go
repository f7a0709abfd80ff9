package sqltypes

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/google/uuid"
)

// CheckText returns the stored form of a value assigned to a column of
// type t, for varchar(n) and char(n) (see the package comment); any other
// type returns s unchanged. A value longer than n is an *Error with
// SQLSTATE 22001 unless the excess is spaces.
func (t Type) CheckText(s string) (string, error) {
	switch t.kind {
	case Char:
		s = strings.TrimRight(s, " ")
		if t.length > 0 && len(s) > int(t.length) && utf8.RuneCountInString(s) > int(t.length) {
			return "", errorf(codeStringDataRightTrunc, "value too long for type %s", t.Name())
		}
		return s, nil
	case Varchar:
		if t.length == 0 || len(s) <= int(t.length) || utf8.RuneCountInString(s) <= int(t.length) {
			return s, nil
		}
		if utf8.RuneCountInString(strings.TrimRight(s, " ")) > int(t.length) {
			return "", errorf(codeStringDataRightTrunc, "value too long for type %s", t.Name())
		}
		return truncateRunes(s, int(t.length)), nil
	}
	return s, nil
}

func truncateRunes(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}

// PadChar pads a stored char(n) value with spaces to n characters, which
// is how PostgreSQL prints char(n) values.
func PadChar(s string, n int) string {
	if c := utf8.RuneCountInString(s); c < n {
		return s + strings.Repeat(" ", n-c)
	}
	return s
}

// Conform turns a batch computed for a table (by DuckDB, from
// SELECT CAST(… AS Type.DuckDBType()) …, or received from a client) into a
// batch of exactly Schema(cols), checking each column on the way:
//
//   - NOT NULL columns must have no nulls (23502, a *NotNullError with
//     the first failing row);
//   - varchar(n) and char(n) values go through CheckText (22001);
//   - uuid accepts arrow.uuid, FixedSizeBinary(16), or String in the
//     textual form DuckDB exports by default (22P02 if malformed);
//   - json and jsonb accept arrow.json or String (the text is not
//     re-validated: DuckDB's CAST to JSON validated it); jsonb text is
//     normalised as PostgreSQL stores jsonb (JSONBText);
//   - timestamptz accepts a microsecond timestamp in any zone (the values
//     are instants; DuckDB labels them with the session zone);
//   - arrays accept a list whose elements conform to the element type
//     by these rules (a varchar(n)[] element longer than n is 22001);
//   - every other column must already have the column's Arrow type (42804).
//
// The batch must have one column per table column, in order; names are
// taken from cols. Arrays are shared with rec where no change is needed, so
// the result must be released independently of rec. table is used only in
// messages. mem allocates converted columns; nil means
// memory.DefaultAllocator. Errors are *Error.
func Conform(table string, cols []Column, rec arrow.RecordBatch, mem memory.Allocator) (arrow.RecordBatch, error) {
	return ConformTo(table, cols, Schema(cols), rec, mem)
}

// ConformTo is Conform given schema, which is Schema(cols) (nil: Conform
// builds it): a caller that keeps it does not build it for every batch.
func ConformTo(table string, cols []Column, schema *arrow.Schema, rec arrow.RecordBatch, mem memory.Allocator) (arrow.RecordBatch, error) {
	if schema == nil {
		schema = Schema(cols)
	}
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	if int(rec.NumCols()) != len(cols) {
		return nil, errorf(codeDatatypeMismatch, "table %q has %d columns but the batch has %d", table, len(cols), rec.NumCols())
	}
	out := make([]arrow.Array, 0, len(cols))
	defer func() {
		for _, a := range out {
			a.Release()
		}
	}()
	nulls := false
	for i, c := range cols {
		a, err := conformColumn(table, c, rec.Column(i), mem)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
		nulls = nulls || c.NotNull && a.NullN() > 0
	}
	conformed := array.NewRecordBatch(schema, out, rec.NumRows())
	if nulls {
		defer conformed.Release()
		return nil, notNullError(table, cols, conformed)
	}
	return conformed, nil
}

// NotNullError is Conform's error for a NULL in a NOT NULL column: the
// 23502 *Error, with the row PostgreSQL shows in its detail ("Failing row
// contains (…)").
type NotNullError struct {
	Err    *Error
	Table  string
	Column string // the NOT NULL column
	// Index is the failing row's position in the batch. Row is that row,
	// conformed (one row, of Schema(Columns); nil if it could not be
	// copied), in Go memory: a holder need not release it.
	Index   int
	Row     arrow.RecordBatch
	Columns []Column
}

func (e *NotNullError) Error() string { return e.Err.Message }
func (e *NotNullError) Unwrap() error { return e.Err }

// notNullError reports the first row of rec, conformed to cols, with a NULL
// in a NOT NULL column, and the first such column of that row, as
// PostgreSQL checks rows one at a time in column order.
func notNullError(table string, cols []Column, rec arrow.RecordBatch) *NotNullError {
	for r := 0; r < int(rec.NumRows()); r++ {
		for i, c := range cols {
			if c.NotNull && rec.Column(i).IsNull(r) {
				return &NotNullError{
					Err:   errorf(codeNotNullViolation, "null value in column %q of relation %q violates not-null constraint", c.Name, table),
					Table: table, Column: c.Name, Index: r, Row: copyRow(rec, r), Columns: cols,
				}
			}
		}
	}
	panic(fmt.Sprintf("sqltypes: notNullError called on a batch of %d rows without a NULL in a NOT NULL column", rec.NumRows()))
}

// copyRow copies row r of rec into a batch of its own in Go memory; nil if
// a column cannot be copied.
func copyRow(rec arrow.RecordBatch, r int) arrow.RecordBatch {
	row := rec.NewSlice(int64(r), int64(r+1))
	defer row.Release()
	cols := make([]arrow.Array, 0, row.NumCols())
	defer func() {
		for _, a := range cols {
			a.Release()
		}
	}()
	for _, a := range row.Columns() {
		c, err := array.Concatenate([]arrow.Array{a}, memory.DefaultAllocator)
		if err != nil {
			return nil
		}
		cols = append(cols, c)
	}
	return array.NewRecordBatch(row.Schema(), cols, 1)
}

// conformColumn returns a new reference to an array of c's Arrow type.
// NOT NULL is checked by Conform, on the conformed batch.
func conformColumn(table string, c Column, a arrow.Array, mem memory.Allocator) (arrow.Array, error) {
	target := c.Type.ArrowType()
	src := a.DataType()
	mismatch := func() error {
		return errorf(codeDatatypeMismatch, "column %q is of type %s but expression is of Arrow type %s", c.Name, c.Type.Name(), src)
	}
	switch c.Type.kind {
	case Varchar, Char:
		s, ok := a.(*array.String)
		if !ok {
			return nil, mismatch()
		}
		return conformText(c.Type, s, mem)
	case UUID:
		switch src.ID() {
		case arrow.EXTENSION:
			if arrow.TypeEqual(src, target) {
				a.Retain()
				return a, nil
			}
		case arrow.FIXED_SIZE_BINARY:
			if src.(*arrow.FixedSizeBinaryType).ByteWidth == 16 {
				return array.NewExtensionArrayWithStorage(uuidType, a), nil
			}
		case arrow.STRING:
			return parseUUIDs(c, a.(*array.String), mem)
		}
		return nil, mismatch()
	case JSON, JSONB:
		var text *array.String
		switch {
		case arrow.TypeEqual(src, target):
			text = a.(array.ExtensionArray).Storage().(*array.String)
		case src.ID() == arrow.STRING:
			text = a.(*array.String)
		default:
			return nil, mismatch()
		}
		if c.Type.Kind() == JSONB {
			return normalizeJSONB(text, mem), nil
		}
		if arrow.TypeEqual(src, target) {
			a.Retain()
			return a, nil
		}
		return array.NewExtensionArrayWithStorage(jsonType.(arrow.ExtensionType), text), nil
	case Timestamptz:
		if ts, ok := src.(*arrow.TimestampType); ok && ts.Unit == arrow.Microsecond && ts.TimeZone != "" {
			return retype(a, target), nil
		}
		return nil, mismatch()
	case Array:
		return conformList(table, c, a, mem, mismatch)
	case Unknown, Invalid:
		return nil, errorf(codeFeatureNotSupported, "column %q has type %s, which a table cannot store", c.Name, c.Type.Name())
	}
	if !arrow.TypeEqual(src, target) {
		return nil, mismatch()
	}
	a.Retain()
	return a, nil
}

// conformList conforms an array column: the source must be a list (of any
// child field name, as DuckDB names it "l"); its elements are conformed as
// a column of the element type, and the result has the list's validity
// and offsets with the conformed elements under Arrow's "item" field.
func conformList(table string, c Column, a arrow.Array, mem memory.Allocator, mismatch func() error) (arrow.Array, error) {
	l, ok := a.(*array.List)
	if !ok {
		return nil, mismatch()
	}
	elem := Column{Name: c.Name, Type: c.Type.Elem()}
	values, err := conformColumn(table, elem, l.ListValues(), mem)
	if err != nil {
		return nil, err
	}
	defer values.Release()
	d := l.Data()
	nd := array.NewData(c.Type.ArrowType(), d.Len(), d.Buffers()[:2], []arrow.ArrayData{values.Data()}, d.NullN(), d.Offset())
	defer nd.Release()
	return array.MakeFromData(nd), nil
}

// retype returns a with another, layout-compatible type, sharing buffers.
func retype(a arrow.Array, to arrow.DataType) arrow.Array {
	d := a.Data()
	nd := array.NewData(to, d.Len(), d.Buffers(), d.Children(), d.NullN(), d.Offset())
	defer nd.Release()
	return array.MakeFromData(nd)
}

// conformText applies CheckText to every value, copying only if a value
// changes.
func conformText(t Type, s *array.String, mem memory.Allocator) (arrow.Array, error) {
	var b *array.StringBuilder
	for i := 0; i < s.Len(); i++ {
		if s.IsNull(i) {
			if b != nil {
				b.AppendNull()
			}
			continue
		}
		v := s.Value(i)
		stored, err := t.CheckText(v)
		if err != nil {
			if b != nil {
				b.Release()
			}
			return nil, err
		}
		if b == nil && stored != v {
			b = array.NewStringBuilder(mem)
			b.Reserve(s.Len())
			for j := 0; j < i; j++ {
				if s.IsNull(j) {
					b.AppendNull()
				} else {
					b.Append(s.Value(j))
				}
			}
		}
		if b != nil {
			b.Append(stored)
		}
	}
	if b == nil {
		s.Retain()
		return s, nil
	}
	defer b.Release()
	return b.NewArray(), nil
}

func parseUUIDs(c Column, s *array.String, mem memory.Allocator) (arrow.Array, error) {
	b := extensions.NewUUIDBuilder(mem)
	defer b.Release()
	b.Reserve(s.Len())
	for i := 0; i < s.Len(); i++ {
		if s.IsNull(i) {
			b.AppendNull()
			continue
		}
		u, err := uuid.Parse(s.Value(i))
		if err != nil {
			return nil, errorf(codeInvalidTextRepr, "invalid input syntax for type uuid: %q (column %q)", s.Value(i), c.Name)
		}
		b.Append(u)
	}
	return b.NewArray(), nil
}

// GoString helps test failure messages.
func (t Type) GoString() string { return fmt.Sprintf("sqltypes.Type(%s)", t.Name()) }

// normalizeJSONB returns a jsonb column of the values of text, each in
// JSONBText's form.
func normalizeJSONB(text *array.String, mem memory.Allocator) arrow.Array {
	b := array.NewStringBuilder(mem)
	defer b.Release()
	b.Reserve(text.Len())
	for i := 0; i < text.Len(); i++ {
		if text.IsNull(i) {
			b.AppendNull()
			continue
		}
		b.Append(JSONBText(text.Value(i)))
	}
	storage := b.NewArray()
	defer storage.Release()
	return array.NewExtensionArrayWithStorage(jsonType.(arrow.ExtensionType), storage)
}
