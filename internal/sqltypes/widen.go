package sqltypes

import (
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/scalar"
)

// A table's stored columns can grow (ALTER TABLE … ADD COLUMN) but never
// shrink or reorder, so every batch or row stored for a table holds a
// prefix of them. A column added later has a missing value (catalog
// Column.Missing) that rows stored without it read as. A dropped column
// (ALTER TABLE … DROP COLUMN) keeps its place among the stored columns,
// marked Dropped: readers leave it out (Widen) and writers fill it with
// NULL (Pad).

// MissingText returns the text form in which the catalog stores the value
// a[i] as a column's missing value: Arrow's ValueStr, which FillArray reads
// back exactly for every type of this package. The text is a copy: a
// string array's ValueStr shares the array's buffer, which the caller may
// release (a DuckDB result's is freed and reused at once).
func MissingText(a arrow.Array, i int) string { return strings.Clone(a.ValueStr(i)) }

// FillArray returns an array of t's Arrow type holding n copies of the
// value whose MissingText is text, or n nulls when text is nil.
func FillArray(t Type, text *string, n int, mem memory.Allocator) (arrow.Array, error) {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	dt := t.ArrowType()
	if text == nil {
		return array.MakeArrayOfNull(mem, dt, n), nil
	}
	one, err := parseOne(dt, *text, mem)
	if err != nil {
		return nil, fmt.Errorf("missing value %q of type %s: %w", *text, t.Name(), err)
	}
	defer one.Release()
	if n == 1 {
		one.Retain()
		return one, nil
	}
	if ext, ok := dt.(arrow.ExtensionType); ok {
		storage, err := repeat(one.(array.ExtensionArray).Storage(), n, mem)
		if err != nil {
			return nil, err
		}
		defer storage.Release()
		return array.NewExtensionArrayWithStorage(ext, storage), nil
	}
	return repeat(one, n, mem)
}

func parseOne(dt arrow.DataType, text string, mem memory.Allocator) (arrow.Array, error) {
	b := array.NewBuilder(mem, dt)
	defer b.Release()
	if err := b.AppendValueFromString(text); err != nil {
		return nil, err
	}
	return b.NewArray(), nil
}

// repeat returns n copies of one's single value.
func repeat(one arrow.Array, n int, mem memory.Allocator) (arrow.Array, error) {
	sc, err := scalar.GetScalar(one, 0)
	if err != nil {
		return nil, err
	}
	if r, ok := sc.(scalar.Releasable); ok {
		defer r.Release()
	}
	return scalar.MakeArrayFromScalar(sc, n, mem)
}

// Widen returns a batch of exactly Schema(Visible(cols)) from rec, a batch
// stored for the table when it had the first rec.NumCols() of its stored
// columns cols: the columns after those are filled with their missing
// values, the dropped ones are left out, and the fields take cols' names
// and types. A batch with more columns than cols is an error (it was
// written by a newer schema than the caller knows). The result is a new
// reference; release it and rec independently.
func Widen(rec arrow.RecordBatch, cols []Column, mem memory.Allocator) (arrow.RecordBatch, error) {
	k := int(rec.NumCols())
	if k > len(cols) {
		return nil, fmt.Errorf("a stored batch has %d columns but the table has %d", k, len(cols))
	}
	visible := Visible(cols)
	schema := Schema(visible)
	if k == len(cols) && len(visible) == len(cols) && rec.Schema().Equal(schema) {
		rec.Retain()
		return rec, nil
	}
	out := make([]arrow.Array, 0, len(visible))
	defer func() {
		for _, a := range out {
			a.Release()
		}
	}()
	n := int(rec.NumRows())
	for i, c := range cols {
		if c.Dropped {
			continue
		}
		if i < k {
			a := rec.Column(i)
			if !arrow.TypeEqual(a.DataType(), c.Type.ArrowType()) {
				return nil, fmt.Errorf("stored column %d (%q) is of Arrow type %s, the table's column %q of %s", i, rec.ColumnName(i), a.DataType(), c.Name, c.Type.ArrowType())
			}
			a.Retain()
			out = append(out, a)
			continue
		}
		a, err := FillArray(c.Type, c.Missing, n, mem)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", c.Name, err)
		}
		out = append(out, a)
	}
	return array.NewRecordBatch(schema, out, int64(n)), nil
}

// Pad returns rec, a batch of the first rec.NumCols() visible columns of
// a table whose stored columns are cols, as the batch to store: NULL at
// the places of the dropped columns among them, under cols' names. Without
// dropped columns it is rec itself. The result is a new reference; release
// it and rec independently.
func Pad(rec arrow.RecordBatch, cols []Column, mem memory.Allocator) arrow.RecordBatch {
	if len(Visible(cols)) == len(cols) {
		rec.Retain()
		return rec
	}
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	n, k := int(rec.NumRows()), int(rec.NumCols())
	var out []arrow.Array
	fields := make([]arrow.Field, 0, len(cols))
	for vi, i := 0, 0; vi < k && i < len(cols); i++ {
		c := cols[i]
		if c.Dropped {
			out = append(out, array.MakeArrayOfNull(mem, c.Type.ArrowType(), n))
			fields = append(fields, Field(c))
			continue
		}
		a := rec.Column(vi)
		a.Retain()
		out = append(out, a)
		fields = append(fields, rec.Schema().Field(vi))
		vi++
	}
	defer func() {
		for _, a := range out {
			a.Release()
		}
	}()
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), out, int64(n))
}
