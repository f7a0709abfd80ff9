package tiering

import (
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"

	"github.com/minkdb/mink/internal/sqltypes"
)

// Lake column names. A table's lake keeps each column under the name the
// column had when the lake got it: ALTER TABLE … RENAME COLUMN changes the
// catalog, not the lake's schema or its files. mink matches the lake's
// columns to the table's by position instead: the lake's data fields
// (every field but __bucket and __offset, in schema order) are the table's
// columns in catalog order, because columns are only ever added, at the
// end, and the lake adds them in that order (Lake.evolve). A round writes
// files under the lake's names, and LakeReader asks for the lake's names
// and hands the batches back under the table's.

// lakeNames returns the name the lake schema cur gives each of cols (a
// table's columns, in catalog order): the name of cur's data field at the
// same position, or, for a column the lake does not have yet, the
// column's own name, made unique among cur's names (a rename can leave a
// column's old name to the lake, and a column added later may take it).
// cur may be nil (no lake yet): the columns' own names.
func lakeNames(cur *iceberg.Schema, cols []sqltypes.Column) []string {
	names := make([]string, len(cols))
	if cur == nil {
		for i, c := range cols {
			names[i] = c.Name
		}
		return names
	}
	taken := map[string]bool{}
	var data []iceberg.NestedField
	for _, f := range cur.Fields() {
		taken[f.Name] = true
		if f.Name != BucketColumn && f.Name != OffsetColumn {
			data = append(data, f)
		}
	}
	for i, c := range cols {
		if i < len(data) {
			names[i] = data[i].Name
			continue
		}
		name := c.Name
		for n := 2; taken[name]; n++ {
			name = c.Name + "_" + strconv.Itoa(n)
		}
		taken[name] = true
		names[i] = name
	}
	return names
}

// adoptLakeNames gives the table's columns of s the names the lake schema
// cur has for them (lakeNames), so that s writes files the lake's other
// files match. A data field of cur of another primitive type than the
// table's column at its position is an error: the lake was not written
// for this table's columns.
func (s *lakeSchema) adoptLakeNames(cur *iceberg.Schema) error {
	names := lakeNames(cur, s.table)
	for i := range s.cols {
		c := &s.cols[i]
		if c.arrowIdx < 0 {
			continue
		}
		name := names[c.arrowIdx]
		if f, ok := cur.FindFieldByName(name); ok {
			lp, lok := f.Type.(iceberg.PrimitiveType)
			tp, tok := c.field.Type.(iceberg.PrimitiveType)
			if lok != tok || (lok && !lp.Equals(tp)) {
				return fmt.Errorf("the lake's column %q is of type %s, the table's column %q at its position of %s", name, f.Type, c.name, c.field.Type)
			}
		}
		c.name, c.field.Name = name, name
	}
	return nil
}

// tableColumn returns the lake column of the table's column i (catalog
// order).
func (s *lakeSchema) tableColumn(i int) (lakeColumn, bool) {
	for _, c := range s.cols {
		if c.arrowIdx == i {
			return c, true
		}
	}
	return lakeColumn{}, false
}

// inLakeNames returns req asking for the names the snapshot's lake schema
// cur gives the table's columns, and the schema the caller asked for (the
// batches read under the lake's names take it back: toAsked); ok is false
// when every name is the lake's already.
func (req ScanRequest) inLakeNames(cur *iceberg.Schema) (lake ScanRequest, asked *arrow.Schema, ok bool) {
	names := lakeNames(cur, req.Columns)
	rename := map[string]string{}
	for i, c := range req.Columns {
		if names[i] != c.Name {
			rename[c.Name] = names[i]
		}
	}
	if len(rename) == 0 {
		return req, nil, false
	}
	lakeName := func(name string) string {
		if n, ok := rename[name]; ok {
			return n
		}
		return name
	}
	lake = req
	fields := make([]arrow.Field, req.Schema.NumFields())
	for i, f := range req.Schema.Fields() {
		f.Name = lakeName(f.Name)
		fields[i] = f
	}
	lake.Schema = arrow.NewSchema(fields, nil)
	lake.Columns = make([]sqltypes.Column, len(req.Columns))
	for i, c := range req.Columns {
		c.Name = lakeName(c.Name)
		lake.Columns[i] = c
	}
	lake.Filter = make([]Predicate, len(req.Filter))
	for i, p := range req.Filter {
		p.Column = lakeName(p.Column)
		lake.Filter[i] = p
	}
	return lake, req.Schema, true
}

// toAsked returns fn for batches under the lake's names: it hands fn each
// batch under the asked schema's names.
func toAsked(asked *arrow.Schema, fn func(arrow.RecordBatch) error) func(arrow.RecordBatch) error {
	return func(rec arrow.RecordBatch) error {
		out := array.NewRecordBatch(asked, rec.Columns(), rec.NumRows())
		defer out.Release()
		return fn(out)
	}
}
