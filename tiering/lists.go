package tiering

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/parquet-go/parquet-go"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/sqltypes"
)

// Array columns in the lake. An array column is an Iceberg list with
// optional elements, written as Parquet's three-level LIST
// (<col>.list.element). Its values take a variable number of Parquet
// values per row, one per element and leaf, so a row is built by
// appendRow, values in column order, and a primary-key round finds a key
// column's value with leafValue. Levels of one leaf, for a nullable column (a NOT NULL one has
// one level less everywhere): NULL array: definition 0; empty array: 1;
// NULL element: 2; element: 3 (maxDef); the first element of a row has
// repetition level 0, the others 1.

// leafValue is the value of leaf column l in row r, a column with one value
// a row (a primary-key column, never inside a list): at index l when the
// row has one value per leaf up to l, else found by its column index.
func leafValue(r parquet.Row, l int) parquet.Value {
	if l < len(r) && r[l].Column() == l {
		return r[l]
	}
	for _, v := range r {
		if v.Column() == l {
			return v
		}
	}
	return parquet.Value{}
}

// appendRow appends to dst the Parquet values of row i of rec (whose
// column shift+c holds the table's column c), the row at offset off of
// bucket, in column order, and returns the row.
func appendRow(writers []columnWriter, dst parquet.Row, rec arrow.RecordBatch, shift, i int, bucket catalog.BucketID, off uint64) (parquet.Row, error) {
	dst = dst[:0]
	for _, w := range writers {
		switch w.extra {
		case "bucket":
			dst = append(dst, parquet.Int64Value(int64(bucket)).Level(0, w.maxDef, w.leaves[0]))
		case "offset":
			dst = append(dst, parquet.Int64Value(int64(off)).Level(0, w.maxDef, w.leaves[0]))
		default:
			var err error
			if dst, err = w.appendValues(dst, rec.Column(w.arrowIx+shift), i); err != nil {
				return dst, err
			}
		}
	}
	// parquet-go takes a row's values grouped by column, in column order;
	// a stable sort keeps an array's elements in order.
	slices.SortStableFunc(dst, func(a, b parquet.Value) int { return cmp.Compare(a.Column(), b.Column()) })
	return dst, nil
}

// appendValues appends the column's values of row i of a.
func (w columnWriter) appendValues(dst parquet.Row, a arrow.Array, i int) (parquet.Row, error) {
	a = storage(a)
	if w.kind != sqltypes.Array {
		vals, err := w.elementValues(w.kind, a, i)
		if err != nil {
			return dst, err
		}
		if vals == nil && w.maxDef == 0 {
			return dst, fmt.Errorf("NULL in NOT NULL column %q", w.name)
		}
		for j, l := range w.leaves {
			if vals == nil {
				dst = append(dst, parquet.NullValue().Level(0, 0, l))
			} else {
				dst = append(dst, vals[j].Level(0, w.maxDef, l))
			}
		}
		return dst, nil
	}
	list, ok := a.(*array.List)
	if !ok {
		return dst, fmt.Errorf("%w: Arrow type %s in array column %q", ErrUnsupportedType, a.DataType(), w.name)
	}
	// listDef is the definition level of a present, empty array.
	listDef := w.maxDef - 2
	if list.IsNull(i) {
		if listDef == 0 {
			return dst, fmt.Errorf("NULL in NOT NULL column %q", w.name)
		}
		for _, l := range w.leaves {
			dst = append(dst, parquet.NullValue().Level(0, 0, l))
		}
		return dst, nil
	}
	start, end := list.ValueOffsets(i)
	if start == end {
		for _, l := range w.leaves {
			dst = append(dst, parquet.NullValue().Level(0, listDef, l))
		}
		return dst, nil
	}
	elems := storage(list.ListValues())
	for j := start; j < end; j++ {
		rep := 1
		if j == start {
			rep = 0
		}
		vals, err := w.elementValues(w.elem, elems, int(j))
		if err != nil {
			return dst, err
		}
		for k, l := range w.leaves {
			if vals == nil {
				dst = append(dst, parquet.NullValue().Level(rep, w.maxDef-1, l))
			} else {
				dst = append(dst, vals[k].Level(rep, w.maxDef, l))
			}
		}
	}
	return dst, nil
}

// elementValues are the values (without levels) of row i of a, a column of
// kind k: one per leaf; nil for NULL.
func (w columnWriter) elementValues(k sqltypes.Kind, a arrow.Array, i int) ([]parquet.Value, error) {
	a = storage(a)
	if a.IsNull(i) {
		return nil, nil
	}
	if k == sqltypes.Interval {
		col, ok := a.(*array.MonthDayNanoInterval)
		if !ok {
			return nil, fmt.Errorf("%w: Arrow type %s in interval column %q", ErrUnsupportedType, a.DataType(), w.name)
		}
		v := col.Value(i)
		return []parquet.Value{parquet.Int32Value(v.Months), parquet.Int32Value(v.Days), parquet.Int64Value(v.Nanoseconds)}, nil
	}
	v, err := scalarValue(a, i)
	if err != nil {
		return nil, fmt.Errorf("column %q: %w", w.name, err)
	}
	return []parquet.Value{v}, nil
}
