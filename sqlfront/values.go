package sqlfront

import (
	"fmt"
	"math"
	"math/big"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/minkdb/mink/internal/sqltypes"
	"github.com/minkdb/mink/sqlfront/pgwire"
)

// rowError is a value that cannot be stored, with the row it came from.
type rowError struct {
	row int
	col string
	err *pgwire.Error
}

func (e *rowError) Error() string { return e.err.Message }

// rowsToRecord builds a batch with a table's schema from rows of Go values
// as pgwire decodes them (see pgwire's package documentation): row[j] is
// the value of column targets[j], and a column that is not a target takes
// fill[i] (nil fill: NULL), or the value of fill[i]() for each row when it
// is a func() any. uuid and json columns are built as
// FixedSizeBinary(16) and String and then conformed.
func rowsToRecord(table *tableInfo, targets []int, fill []any, rows [][]any) (arrow.RecordBatch, error) {
	rec, err := buildRecord(table, targets, fill, rows)
	if err != nil {
		return nil, err
	}
	defer rec.Release()
	conformed, err := sqltypes.ConformTo(table.name, table.cols, table.schema, rec, memory.DefaultAllocator)
	if err != nil {
		return nil, err
	}
	if err := checkNotNull(table, conformed); err != nil {
		conformed.Release()
		return nil, err
	}
	return conformed, nil
}

// buildRecord is rowsToRecord before Conform: a batch of the columns'
// build types (buildType), with the rows' values as given.
func buildRecord(table *tableInfo, targets []int, fill []any, rows [][]any) (arrow.RecordBatch, error) {
	mem := memory.DefaultAllocator
	schema := table.buildSchema
	if schema == nil {
		schema = buildSchema(table.cols)
	}
	builders := make([]array.Builder, len(table.cols))
	for i := range table.cols {
		builders[i] = array.NewBuilder(mem, schema.Field(i).Type)
		builders[i].Reserve(len(rows))
	}
	defer func() {
		for _, b := range builders {
			b.Release()
		}
	}()
	pos := make([]int, len(table.cols))
	for i := range pos {
		pos[i] = -1
	}
	for j, i := range targets {
		pos[i] = j
	}
	for r, row := range rows {
		for i, c := range table.cols {
			var v any
			if pos[i] >= 0 {
				v = row[pos[i]]
			} else if fill != nil {
				v = fill[i]
				if gen, ok := v.(func() any); ok {
					v = gen()
				}
			}
			if appendInfinity(builders[i], v) {
				continue
			}
			if err := appendValue(builders[i], c.Type, v); err != nil {
				return nil, &rowError{row: r, col: c.Name, err: err}
			}
		}
	}
	cols := make([]arrow.Array, len(builders))
	for i, b := range builders {
		cols[i] = b.NewArray()
	}
	rec := array.NewRecordBatch(schema, cols, int64(len(rows)))
	for _, c := range cols {
		c.Release()
	}
	return rec, nil
}

// buildSchema is the schema of the batches buildRecord builds for a table
// of cols: each column nullable, of its buildType.
func buildSchema(cols []sqltypes.Column) *arrow.Schema {
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		fields[i] = arrow.Field{Name: c.Name, Type: buildType(c.Type), Nullable: true}
	}
	return arrow.NewSchema(fields, nil)
}

// buildType is the Arrow type rowsToRecord builds a column of type t in,
// before Conform: uuid as FixedSizeBinary(16), json and jsonb as String,
// arrays as lists of their element's build type.
func buildType(t sqltypes.Type) arrow.DataType {
	switch t.Kind() {
	case sqltypes.UUID:
		return &arrow.FixedSizeBinaryType{ByteWidth: 16}
	case sqltypes.JSON, sqltypes.JSONB:
		return arrow.BinaryTypes.String
	case sqltypes.Array:
		return arrow.ListOf(buildType(t.Elem()))
	}
	return t.ArrowType()
}

func badValue(t sqltypes.Type, v any) *pgwire.Error {
	return errorf(pgwire.CodeDatatypeMismatch, "cannot store a %T value in a %s column", v, t.Name())
}

// appendValue appends one Go value to a builder of the column type's
// pre-conform Arrow type.
func appendValue(b array.Builder, t sqltypes.Type, v any) *pgwire.Error {
	if v == nil {
		b.AppendNull()
		return nil
	}
	switch bb := b.(type) {
	case *array.BooleanBuilder:
		x, ok := v.(bool)
		if !ok {
			return badValue(t, v)
		}
		bb.Append(x)
	case *array.Int16Builder:
		x, ok := asInt(v)
		if !ok || x < -1<<15 || x >= 1<<15 {
			return outOfRange(t, v, ok)
		}
		bb.Append(int16(x))
	case *array.Int32Builder:
		x, ok := asInt(v)
		if !ok || x < -1<<31 || x >= 1<<31 {
			return outOfRange(t, v, ok)
		}
		bb.Append(int32(x))
	case *array.Int64Builder:
		x, ok := asInt(v)
		if !ok {
			return badValue(t, v)
		}
		bb.Append(x)
	case *array.Float32Builder:
		switch x := v.(type) {
		case float32:
			bb.Append(x)
		case float64:
			bb.Append(float32(x))
		default:
			return badValue(t, v)
		}
	case *array.Float64Builder:
		switch x := v.(type) {
		case float64:
			bb.Append(x)
		case float32:
			bb.Append(float64(x))
		default:
			return badValue(t, v)
		}
	case *array.Decimal128Builder:
		n, ok := v.(pgtype.Numeric)
		if !ok {
			return badValue(t, v)
		}
		dt := bb.Type().(*arrow.Decimal128Type)
		d, err := numericToDecimal(n, dt.Precision, dt.Scale)
		if err != nil {
			return err
		}
		bb.Append(d)
	case *array.StringBuilder:
		switch x := v.(type) {
		case string:
			bb.Append(x)
		case []byte:
			bb.Append(string(x))
		default:
			return badValue(t, v)
		}
	case *array.BinaryBuilder:
		switch x := v.(type) {
		case []byte:
			bb.Append(x)
		case string:
			bb.Append([]byte(x))
		default:
			return badValue(t, v)
		}
	case *array.FixedSizeBinaryBuilder:
		x, ok := v.([16]byte)
		if !ok {
			return badValue(t, v)
		}
		bb.Append(x[:])
	case *array.Date32Builder:
		x, ok := v.(time.Time)
		if !ok {
			if appendInfinity(bb, v) {
				return nil
			}
			return infiniteOr(t, v)
		}
		bb.Append(arrow.Date32FromTime(x))
	case *array.TimestampBuilder:
		x, ok := v.(time.Time)
		if !ok {
			if appendInfinity(bb, v) {
				return nil
			}
			return infiniteOr(t, v)
		}
		bb.Append(arrow.Timestamp(x.UnixMicro()))
	case *array.Time64Builder:
		x, ok := v.(pgtype.Time)
		if !ok {
			return badValue(t, v)
		}
		bb.Append(arrow.Time64(x.Microseconds))
	case *array.MonthDayNanoIntervalBuilder:
		x, ok := v.(pgtype.Interval)
		if !ok {
			return badValue(t, v)
		}
		bb.Append(arrow.MonthDayNanoInterval{Months: x.Months, Days: x.Days, Nanoseconds: x.Microseconds * 1000})
	case *array.ListBuilder:
		x, ok := v.([]any)
		if !ok {
			return badValue(t, v)
		}
		bb.Append(true)
		for _, e := range x {
			if err := appendValue(bb.ValueBuilder(), t.Elem(), e); err != nil {
				return err
			}
		}
	default:
		return unsupported("storing %s values is not supported", t.Name())
	}
	return nil
}

func asInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case int:
		return int64(x), true
	}
	return 0, false
}

func outOfRange(t sqltypes.Type, v any, isInt bool) *pgwire.Error {
	if !isInt {
		return badValue(t, v)
	}
	return errorf(pgwire.CodeNumericValueOutOfRange, "%s out of range", t.Name())
}

// infinity returns the sign of an infinite date or timestamp value as
// pgwire decodes it (0: not infinite).
func infinity(v any) int {
	var m pgtype.InfinityModifier
	switch x := v.(type) {
	case pgtype.InfinityModifier:
		m = x
	case pgtype.Date:
		m = x.InfinityModifier
	case pgtype.Timestamp:
		m = x.InfinityModifier
	case pgtype.Timestamptz:
		m = x.InfinityModifier
	}
	switch m {
	case pgtype.Infinity:
		return 1
	case pgtype.NegativeInfinity:
		return -1
	}
	return 0
}

// Infinite dates and timestamps are stored as the engine stores them (what
// an INSERT of 'infinity' stores): the largest value of the type and its
// negation.
const (
	date32Infinity    = math.MaxInt32
	timestampInfinity = math.MaxInt64
)

// appendInfinity appends v to a date or timestamp builder if it is
// ±infinity, and reports whether it did. (A point lookup's key values
// convert the same way in storedKeyValues.)
func appendInfinity(b array.Builder, v any) bool {
	sign := infinity(v)
	if sign == 0 {
		return false
	}
	switch bb := b.(type) {
	case *array.Date32Builder:
		bb.Append(arrow.Date32(sign * date32Infinity))
		return true
	case *array.TimestampBuilder:
		bb.Append(arrow.Timestamp(int64(sign) * timestampInfinity))
		return true
	}
	return false
}

func infiniteOr(t sqltypes.Type, v any) *pgwire.Error {
	switch v.(type) {
	case pgtype.InfinityModifier, pgtype.Date, pgtype.Timestamp, pgtype.Timestamptz:
		return errorf(pgwire.CodeDatetimeFieldOverflow, "infinite %s values are not supported by mink", t.Name())
	}
	return badValue(t, v)
}

var bigTen = big.NewInt(10)

// numericToDecimal scales a numeric to a decimal(precision, scale), rounding
// half away from zero, and checks it fits.
func numericToDecimal(n pgtype.Numeric, precision, scale int32) (decimal128.Num, *pgwire.Error) {
	if n.NaN || n.InfinityModifier != pgtype.Finite {
		return decimal128.Num{}, errorf(pgwire.CodeFeatureNotSupported, "NaN and infinite numeric values are not supported by mink")
	}
	v := new(big.Int).Set(n.Int)
	shift := int(n.Exp) + int(scale)
	if shift >= 0 {
		v.Mul(v, new(big.Int).Exp(bigTen, big.NewInt(int64(shift)), nil))
	} else {
		div := new(big.Int).Exp(bigTen, big.NewInt(int64(-shift)), nil)
		q, r := new(big.Int).QuoRem(v, div, new(big.Int))
		if new(big.Int).Mul(new(big.Int).Abs(r), big.NewInt(2)).Cmp(div) >= 0 {
			if v.Sign() < 0 {
				q.Sub(q, big.NewInt(1))
			} else {
				q.Add(q, big.NewInt(1))
			}
		}
		v = q
	}
	limit := new(big.Int).Exp(bigTen, big.NewInt(int64(precision)), nil)
	if new(big.Int).Abs(v).Cmp(limit) >= 0 {
		return decimal128.Num{}, &pgwire.Error{Code: pgwire.CodeNumericValueOutOfRange, Message: "numeric field overflow",
			Detail: fmt.Sprintf("A field with precision %d, scale %d must round to an absolute value less than 10^%d.", precision, scale, precision-scale)}
	}
	return decimal128.FromBigInt(v), nil
}
