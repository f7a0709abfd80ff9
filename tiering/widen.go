package tiering

import (
	"fmt"

	"github.com/parquet-go/parquet-go"

	"github.com/minkdb/mink/internal/sqltypes"
)

// rowWidener turns the Parquet rows of a lake file written before columns
// were added to the table (its schema lacks them), or before a column's
// NOT NULL was dropped (its leaf is required), into rows of the table's
// current Parquet schema: a column the file has keeps its values, moved to
// its leaf in the current schema (parquet-go orders a group's columns by
// name, so an added column can come before old ones), and a column it lacks
// gets the column's missing value in every row. A primary-key round and a
// compaction rewrite old files with it.
type rowWidener struct {
	// from[j] is the file's leaf index of leaf j of the current schema,
	// -1 when the file lacks the leaf's column.
	from []int
	// fill[j] are the values (levels set, column j) of leaf j of a column
	// the file lacks.
	fill [][]parquet.Value
	// lift[j] is added to the definition levels of leaf j: 1 when the
	// file's column was required and the current one is optional (ALTER
	// COLUMN … DROP NOT NULL), 0 otherwise.
	lift  []int
	nfile int
}

// newRowWidener maps file (a lake file's Parquet schema) to ps, the
// current one of ls; nil when they are equal. A file with a column the
// table does not have, or whose column has another Parquet shape, is an
// error (it was not written for this table's schema).
func newRowWidener(ls *lakeSchema, ps, file *parquet.Schema) (*rowWidener, error) {
	if parquet.EqualNodes(file, ps) {
		return nil, nil
	}
	w := &rowWidener{from: make([]int, len(ps.Columns())), fill: make([][]parquet.Value, len(ps.Columns())),
		lift: make([]int, len(ps.Columns())), nfile: len(file.Columns())}
	writers, err := ls.columnWriters(ps)
	if err != nil {
		return nil, err
	}
	used := make([]bool, w.nfile)
	for ci, c := range ls.cols {
		var absent, present int
		lift := 0
		if old, ok := file.Lookup(c.name); ok && old.Node.Required() {
			if cur, ok := ps.Lookup(c.name); ok && cur.Node.Optional() {
				lift = 1
			}
		}
		for _, path := range c.leafPaths() {
			cur, ok := ps.Lookup(path...)
			if !ok {
				panic(fmt.Sprintf("tiering: column %q missing from its own Parquet schema", path))
			}
			old, ok := file.Lookup(path...)
			if !ok {
				absent++
				w.from[cur.ColumnIndex] = -1
				continue
			}
			present++
			if old.MaxDefinitionLevel+lift != cur.MaxDefinitionLevel || old.MaxRepetitionLevel != cur.MaxRepetitionLevel ||
				old.Node.Type().Kind() != cur.Node.Type().Kind() {
				return nil, fmt.Errorf("column %q is of another Parquet type in the file (%s) than in the table's lake schema (%s)", path, old.Node.Type(), cur.Node.Type())
			}
			w.from[cur.ColumnIndex] = old.ColumnIndex
			w.lift[cur.ColumnIndex] = lift
			used[old.ColumnIndex] = true
		}
		switch {
		case absent == 0:
			continue
		case present > 0 || !c.added:
			return nil, fmt.Errorf("the file lacks column %q of the table", c.name)
		}
		col := ls.table[c.arrowIdx]
		one, err := sqltypes.FillArray(col.Type, col.Missing, 1, nil)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", c.name, err)
		}
		vals, err := writers[ci].appendValues(nil, one, 0)
		one.Release()
		if err != nil {
			return nil, fmt.Errorf("missing value of column %q: %w", c.name, err)
		}
		for _, v := range vals {
			w.fill[v.Column()] = append(w.fill[v.Column()], v)
		}
	}
	for i, ok := range used {
		if !ok {
			return nil, fmt.Errorf("the file has a column %q that the table does not", file.Columns()[i])
		}
	}
	return w, nil
}

// widen returns row (of the file's schema, its values in column order) as
// a row of the current schema. The values share row's memory.
func (w *rowWidener) widen(row parquet.Row) parquet.Row {
	// starts[c] is where the file's column c begins in row.
	starts := make([]int, w.nfile+1)
	for _, v := range row {
		starts[v.Column()+1]++
	}
	for c := 1; c <= w.nfile; c++ {
		starts[c] += starts[c-1]
	}
	out := make(parquet.Row, 0, len(row)+len(w.fill))
	for j, c := range w.from {
		if c < 0 {
			out = append(out, w.fill[j]...)
			continue
		}
		for _, v := range row[starts[c]:starts[c+1]] {
			out = append(out, v.Level(v.RepetitionLevel(), v.DefinitionLevel()+w.lift[j], j))
		}
	}
	return out
}
