package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/minkdb/mink/internal/sqltypes"
)

// Rows is a statement's result read row by row, as Go values that pgwire
// encodes for the columns' types (in text and binary formats):
//
//	boolean                       bool
//	smallint, integer, bigint     int16, int32, int64
//	real, double precision        float32, float64
//	numeric                       pgtype.Numeric (exact, with the column's scale)
//	text, uuid, json              string
//	bytea                         []byte
//	date                          time.Time (UTC midnight), pgtype.Date for ±infinity
//	time                          pgtype.Time
//	timestamp                     time.Time (UTC, no zone meaning), pgtype.Timestamp for ±infinity
//	timestamptz                   time.Time (the instant, in UTC), pgtype.Timestamptz for ±infinity
//	interval                      pgtype.Interval
//	arrays                        []any of the element type's values
//	json from STRUCT, MAP, nested lists  string (JSON text, fields in order)
//	NULL                          nil
//
// Rows is used by one goroutine. Values own their memory (they do not
// alias Arrow buffers).
type Rows struct {
	r      *resultReader
	rec    arrow.RecordBatch
	row    int
	values []any
	err    error
	closed bool
}

func newRows(r *resultReader) *Rows {
	return &Rows{r: r, values: make([]any, len(r.cols))}
}

// Columns describes the result's columns.
func (rs *Rows) Columns() []Column { return rs.r.cols }

// Next advances to the next row; false at the end or on error (see Err).
func (rs *Rows) Next() bool {
	if rs.closed {
		return false
	}
	for {
		if rs.rec != nil && int64(rs.row+1) < rs.rec.NumRows() {
			rs.row++
			for c := range rs.values {
				rs.values[c] = goValue(rs.rec.Column(c), rs.row, rs.r.cols[c].Type)
			}
			return true
		}
		if !rs.r.Next() {
			rs.rec = nil
			rs.err = rs.r.Err()
			return false
		}
		rs.rec, rs.row = rs.r.RecordBatch(), -1
	}
}

// Values returns the current row. The slice is reused by Next; the values
// in it are not.
func (rs *Rows) Values() []any { return rs.values }

// Err returns the error that ended the rows, an *Error (wrapping the
// context's error if the statement was cancelled).
func (rs *Rows) Err() error { return rs.err }

// Reader hands the rest of the result over as Arrow batches (as
// QueryArrow returns them), for a caller that wants batches rather than
// rows. It must be called before the first Next; the Rows is then closed
// and the caller releases the reader.
func (rs *Rows) Reader() array.RecordReader {
	if rs.closed || rs.rec != nil {
		panic(fmt.Sprintf("engine: Rows.Reader after Next or Close (closed %v)", rs.closed))
	}
	rs.closed = true
	return rs.r
}

// Close releases the result. Rows not read are discarded.
func (rs *Rows) Close() error {
	if !rs.closed {
		rs.closed = true
		rs.rec = nil
		rs.r.Release()
	}
	return nil
}

// goValue converts row i of a to the Go value for a column of type t.
func goValue(a arrow.Array, i int, t sqltypes.Type) any {
	if a.IsNull(i) {
		return nil
	}
	switch a := a.(type) {
	case *array.Boolean:
		return a.Value(i)
	case *array.Int8:
		return int16(a.Value(i))
	case *array.Int16:
		return a.Value(i)
	case *array.Int32:
		return a.Value(i)
	case *array.Int64:
		return a.Value(i)
	case *array.Uint8:
		return int16(a.Value(i))
	case *array.Uint16:
		return int32(a.Value(i))
	case *array.Uint32:
		return int64(a.Value(i))
	case *array.Uint64:
		return pgtype.Numeric{Int: new(big.Int).SetUint64(a.Value(i)), Valid: true}
	case *array.Float32:
		return a.Value(i)
	case *array.Float64:
		return a.Value(i)
	case *array.Decimal128:
		scale := a.DataType().(*arrow.Decimal128Type).Scale
		return pgtype.Numeric{Int: a.Value(i).BigInt(), Exp: -scale, Valid: true}
	case *array.Decimal256:
		scale := a.DataType().(*arrow.Decimal256Type).Scale
		return pgtype.Numeric{Int: a.Value(i).BigInt(), Exp: -scale, Valid: true}
	case *array.String:
		return strings.Clone(a.Value(i))
	case *array.LargeString:
		return strings.Clone(a.Value(i))
	case *array.StringView:
		return strings.Clone(a.Value(i))
	case *array.Binary:
		return bytes.Clone(a.Value(i))
	case *array.LargeBinary:
		return bytes.Clone(a.Value(i))
	case *array.FixedSizeBinary:
		if t.Kind() == sqltypes.UUID && len(a.Value(i)) == 16 {
			return [16]byte(a.Value(i))
		}
		return bytes.Clone(a.Value(i))
	case *array.Date32:
		switch days := int32(a.Value(i)); days {
		case math.MaxInt32:
			return pgtype.Date{InfinityModifier: pgtype.Infinity, Valid: true}
		case -math.MaxInt32:
			return pgtype.Date{InfinityModifier: pgtype.NegativeInfinity, Valid: true}
		default:
			return time.Unix(int64(days)*86400, 0).UTC()
		}
	case *array.Time64:
		us := int64(a.Value(i))
		if a.DataType().(*arrow.Time64Type).Unit == arrow.Nanosecond {
			us /= 1000
		}
		return pgtype.Time{Microseconds: us, Valid: true}
	case *array.Time32:
		v := int64(a.Value(i))
		if a.DataType().(*arrow.Time32Type).Unit == arrow.Second {
			return pgtype.Time{Microseconds: v * 1_000_000, Valid: true}
		}
		return pgtype.Time{Microseconds: v * 1000, Valid: true}
	case *array.Timestamp:
		return timestampValue(a, i)
	case *array.MonthDayNanoInterval:
		v := a.Value(i)
		return pgtype.Interval{Months: v.Months, Days: v.Days, Microseconds: v.Nanoseconds / 1000, Valid: true}
	case *array.Dictionary:
		return goValue(a.Dictionary(), a.GetValueIndex(i), t)
	case array.ExtensionArray:
		return goValue(a.Storage(), i, t)
	case *array.Null:
		return nil
	case array.ListLike:
		if _, isMap := a.(*array.Map); !isMap && t.Kind() == sqltypes.Array {
			start, end := a.ValueOffsets(i)
			elems := a.ListValues()
			out := make([]any, 0, end-start)
			for j := start; j < end; j++ {
				out = append(out, goValue(elems, int(j), t.Elem()))
			}
			return out
		}
		return string(appendJSON(nil, a, i))
	case *array.Struct, array.Union:
		return string(appendJSON(nil, a, i))
	}
	return a.ValueStr(i)
}

func timestampValue(a *array.Timestamp, i int) any {
	tt := a.DataType().(*arrow.TimestampType)
	v := int64(a.Value(i))
	zoned := tt.TimeZone != ""
	if v == math.MaxInt64 || v == -math.MaxInt64 {
		inf := pgtype.Infinity
		if v < 0 {
			inf = pgtype.NegativeInfinity
		}
		if zoned {
			return pgtype.Timestamptz{InfinityModifier: inf, Valid: true}
		}
		return pgtype.Timestamp{InfinityModifier: inf, Valid: true}
	}
	switch tt.Unit {
	case arrow.Second:
		return time.Unix(v, 0).UTC()
	case arrow.Millisecond:
		return time.UnixMilli(v).UTC()
	case arrow.Nanosecond:
		return time.Unix(0, v).UTC()
	}
	return time.UnixMicro(v).UTC()
}

// appendJSON appends row i of a as JSON. Structs keep their field order;
// map keys become object keys as text.
func appendJSON(buf []byte, a arrow.Array, i int) []byte {
	if a.IsNull(i) {
		return append(buf, "null"...)
	}
	switch a := a.(type) {
	case *array.Struct:
		st := a.DataType().(*arrow.StructType)
		buf = append(buf, '{')
		for f := 0; f < a.NumField(); f++ {
			if f > 0 {
				buf = append(buf, ',')
			}
			buf = strconv.AppendQuote(buf, st.Field(f).Name)
			buf = append(buf, ':')
			buf = appendJSON(buf, a.Field(f), i)
		}
		return append(buf, '}')
	case *array.Map:
		start, end := a.ValueOffsets(i)
		keys, items := a.Keys(), a.Items()
		buf = append(buf, '{')
		for j := start; j < end; j++ {
			if j > start {
				buf = append(buf, ',')
			}
			key := keys.ValueStr(int(j))
			if s, ok := keys.(*array.String); ok {
				key = s.Value(int(j))
			}
			buf = appendJSONString(buf, key)
			buf = append(buf, ':')
			buf = appendJSON(buf, items, int(j))
		}
		return append(buf, '}')
	case array.ListLike:
		start, end := a.ValueOffsets(i)
		elems := a.ListValues()
		buf = append(buf, '[')
		for j := start; j < end; j++ {
			if j > start {
				buf = append(buf, ',')
			}
			buf = appendJSON(buf, elems, int(j))
		}
		return append(buf, ']')
	case *array.Dictionary:
		return appendJSON(buf, a.Dictionary(), a.GetValueIndex(i))
	case *array.String:
		return appendJSONString(buf, a.Value(i))
	}
	b, err := json.Marshal(a.GetOneForMarshal(i))
	if err != nil {
		return appendJSONString(buf, a.ValueStr(i))
	}
	return append(buf, b...)
}

func appendJSONString(buf []byte, s string) []byte {
	b, _ := json.Marshal(s)
	return append(buf, b...)
}
