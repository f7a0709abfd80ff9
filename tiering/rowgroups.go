package tiering

import (
	"bytes"
	"context"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// Row-group pruning. iceberg-go prunes a file's row groups by their Parquet
// statistics only through Parquet field ids, which mink's files do not
// carry (columns are matched by name through the table's name mapping), so
// the reader does it itself: it evaluates the scan's Filter on each row
// group's column-chunk statistics (min, max, null count, by column name)
// and reads a file as one task per run of row groups that may match. A
// task's byte range selects the row groups whose offset falls in it (the
// Iceberg split rule, which iceberg-go applies with the data file's split
// offsets when they are valid, else with the offset of the row group's
// first column chunk); the ranges here are made from the same offsets, so
// exactly the kept row groups are read. Any doubt (no footer, statistics
// missing or of an unexpected type, offsets not increasing) keeps the row
// group, or the whole file.

// maxFooters bounds the Parquet footers a LakeReader keeps.
const maxFooters = 4096

// footer returns the Parquet metadata and physical size of a data file.
func (r *LakeReader) footer(ctx context.Context, location string) (*metadata.FileMetaData, int64, error) {
	r.mu.Lock()
	f, ok := r.footers[location]
	r.mu.Unlock()
	if ok {
		return f.meta, f.size, nil
	}
	fsys, err := r.fsys()(ctx)
	if err != nil {
		return nil, 0, err
	}
	in, err := fsys.Open(location)
	if err != nil {
		return nil, 0, err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return nil, 0, err
	}
	pr, err := file.NewParquetReader(in)
	if err != nil {
		return nil, 0, err
	}
	meta := pr.MetaData()
	r.mu.Lock()
	if len(r.footers) >= maxFooters {
		clear(r.footers)
	}
	r.footers[location] = footerEntry{meta: meta, size: st.Size()}
	r.mu.Unlock()
	return meta, st.Size(), nil
}

type footerEntry struct {
	meta *metadata.FileMetaData
	size int64
}

// splitRowGroups returns the parts of task (a whole data file) holding the
// row groups preds may match, and the row groups of the file and of the
// parts. The task itself when it cannot tell.
func (r *LakeReader) splitRowGroups(ctx context.Context, schema *iceberg.Schema, task table.FileScanTask, preds []Predicate) ([]table.FileScanTask, int, int) {
	whole := []table.FileScanTask{task}
	if task.Start != 0 || (task.Length != 0 && task.Length != task.File.FileSizeBytes()) ||
		len(task.DeleteFiles)+len(task.EqualityDeleteFiles)+len(task.DeletionVectorFiles) != 0 ||
		task.File.FileFormat() != iceberg.ParquetFile {
		return whole, 0, 0
	}
	meta, size, err := r.footer(ctx, task.File.FilePath())
	if err != nil {
		// The read reports the file's problem.
		return whole, 0, 0
	}
	n := meta.NumRowGroups()
	offsets := task.File.SplitOffsets()
	if !increasingOffsets(offsets, n, size) {
		offsets = make([]int64, n)
		for i := range n {
			offsets[i] = rowGroupOffset(meta.RowGroup(i))
		}
		if !increasingOffsets(offsets, n, size) {
			return whole, n, n
		}
	}
	keep := make([]bool, n)
	kept := 0
	for i := range n {
		keep[i] = rowGroupMayMatch(schema, meta, meta.RowGroup(i), preds)
		if keep[i] {
			kept++
		}
	}
	if kept == n {
		return whole, n, n
	}
	var out []table.FileScanTask
	for i := 0; i < n; {
		if !keep[i] {
			i++
			continue
		}
		j := i
		for j+1 < n && keep[j+1] {
			j++
		}
		end := size
		if j+1 < n {
			end = offsets[j+1]
		}
		part := task
		part.Start, part.Length = offsets[i], end-offsets[i]
		out = append(out, part)
		i = j + 1
	}
	return out, n, kept
}

// increasingOffsets: one offset per row group, strictly increasing, inside
// the file.
func increasingOffsets(offsets []int64, n int, size int64) bool {
	if len(offsets) != n || n == 0 {
		return false
	}
	for i, o := range offsets {
		if o < 0 || o >= size || (i > 0 && o <= offsets[i-1]) {
			return false
		}
	}
	return true
}

// rowGroupOffset is where a row group starts: its first column chunk's
// dictionary or first data page, else the row group's file offset.
func rowGroupOffset(rg *metadata.RowGroupMetaData) int64 {
	if rg.NumColumns() > 0 {
		if c, err := rg.ColumnChunk(0); err == nil {
			data := c.DataPageOffset()
			if c.HasDictionaryPage() {
				if dict := c.DictionaryPageOffset(); dict >= 0 && (data < 0 || dict < data) {
					return dict
				}
			}
			if data >= 0 {
				return data
			}
		}
	}
	return rg.FileOffset()
}

// rowGroupMayMatch reports whether every predicate may hold for a row of
// the row group, by its columns' statistics.
func rowGroupMayMatch(schema *iceberg.Schema, meta *metadata.FileMetaData, rg *metadata.RowGroupMetaData, preds []Predicate) bool {
	rows := rg.NumRows()
	if rows == 0 {
		return false
	}
	for _, p := range preds {
		if !predicateMayMatch(schema, meta, rg, rows, p) {
			return false
		}
	}
	return true
}

func predicateMayMatch(schema *iceberg.Schema, meta *metadata.FileMetaData, rg *metadata.RowGroupMetaData, rows int64, p Predicate) bool {
	field, ok := schema.FindFieldByName(p.Column)
	if !ok || p.Column == BucketColumn || p.Column == OffsetColumn {
		return true
	}
	if _, ok := field.Type.(iceberg.PrimitiveType); !ok {
		return true
	}
	ci := meta.Schema.ColumnIndexByName(p.Column)
	if ci < 0 {
		return true
	}
	cc, err := rg.ColumnChunk(ci)
	if err != nil {
		return true
	}
	if set, err := cc.StatsSet(); !set || err != nil {
		return true
	}
	st, err := cc.Statistics()
	if err != nil || st == nil {
		return true
	}
	allNull := st.HasNullCount() && st.NullCount() >= rows
	switch p.Op {
	case PredIsNull:
		return !st.HasNullCount() || st.NullCount() > 0
	case PredNotNull:
		return !allNull
	}
	if allNull {
		// A comparison or IN holds for no NULL.
		return false
	}
	if !st.HasMinMax() {
		return true
	}
	lo, hi, ok := statBounds(field.Type, st)
	if !ok {
		return true
	}
	vals := make([]any, 0, len(p.Values))
	for _, v := range p.Values {
		w, ok := statValue(field.Type, v)
		if !ok {
			return true
		}
		vals = append(vals, w)
	}
	if _, isBool := field.Type.(iceberg.BooleanType); isBool && p.Op != PredEq && p.Op != PredIn {
		return true
	}
	within := func(v any) bool { return compareStat(lo, v) <= 0 && compareStat(v, hi) <= 0 }
	switch p.Op {
	case PredIn:
		for _, v := range vals {
			if within(v) {
				return true
			}
		}
		return false
	}
	if len(vals) != 1 {
		return true
	}
	v := vals[0]
	switch p.Op {
	case PredEq:
		return within(v)
	case PredLt:
		return compareStat(lo, v) < 0
	case PredLe:
		return compareStat(lo, v) <= 0
	case PredGt:
		return compareStat(hi, v) > 0
	case PredGe:
		return compareStat(hi, v) >= 0
	}
	return true
}

// statBounds are a column chunk's min and max as int64 (integers, dates,
// timestamps), []byte (strings) or bool, for a field of type t.
func statBounds(t iceberg.Type, st metadata.TypedStatistics) (lo, hi any, ok bool) {
	switch t.(type) {
	case iceberg.Int32Type, iceberg.DateType:
		s, ok := st.(*metadata.Int32Statistics)
		if !ok {
			return nil, nil, false
		}
		return int64(s.Min()), int64(s.Max()), true
	case iceberg.Int64Type, iceberg.TimestampType, iceberg.TimestampTzType:
		s, ok := st.(*metadata.Int64Statistics)
		if !ok {
			return nil, nil, false
		}
		return s.Min(), s.Max(), true
	case iceberg.StringType:
		s, ok := st.(*metadata.ByteArrayStatistics)
		if !ok {
			return nil, nil, false
		}
		return []byte(s.Min()), []byte(s.Max()), true
	case iceberg.BooleanType:
		s, ok := st.(*metadata.BooleanStatistics)
		if !ok {
			return nil, nil, false
		}
		return s.Min(), s.Max(), true
	}
	return nil, nil, false
}

// statValue is a Predicate value in statBounds' representation for a field
// of type t (the values literalFor takes).
func statValue(t iceberg.Type, v any) (any, bool) {
	switch t.(type) {
	case iceberg.Int32Type:
		n, ok := v.(int64)
		return n, ok && n >= math.MinInt32 && n <= math.MaxInt32
	case iceberg.Int64Type:
		n, ok := v.(int64)
		return n, ok
	case iceberg.DateType:
		d, ok := v.(arrow.Date32)
		return int64(d), ok
	case iceberg.TimestampType, iceberg.TimestampTzType:
		ts, ok := v.(arrow.Timestamp)
		return int64(ts), ok
	case iceberg.StringType:
		s, ok := v.(string)
		return []byte(s), ok
	case iceberg.BooleanType:
		b, ok := v.(bool)
		return b, ok
	}
	return nil, false
}

// compareStat compares two values of one statBounds representation.
func compareStat(a, b any) int {
	switch x := a.(type) {
	case int64:
		y := b.(int64)
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	case []byte:
		return bytes.Compare(x, b.([]byte))
	case bool:
		y := b.(bool)
		switch {
		case x == y:
			return 0
		case !x:
			return -1
		}
		return 1
	}
	panic(fmt.Sprintf("tiering: compareStat of %T", a))
}
