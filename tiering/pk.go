package tiering

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"
	"github.com/parquet-go/parquet-go"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/sqltypes"
	"github.com/minkdb/mink/plan"
)

// Primary-key tables are tiered copy-on-write, per bucket: a round reads
// each changed bucket's current lake files and its changelog from the tiered
// offset to the frozen end, applies the changelog (+I and +U set the key's
// row, -D removes it, -U is ignored: the +U after it carries the new row),
// and writes the bucket's whole state again as new files sorted by primary
// key. One lake snapshot replaces the old files of every changed bucket with
// the new ones, so the lake holds exactly the table's rows at the recorded
// offsets, readable by any Iceberg engine without delete files. Buckets
// without changes keep their files. A row's __offset is the offset of the
// changelog record that produced its current value.
//
// A bucket's state is held in memory while it is rewritten (up to
// GOMAXPROCS buckets at a time).

// pkPlan is what a primary-key round writes: the new files, and the lake
// locations of the files they replace.
type pkPlan struct {
	files   []writtenFile
	deleted []string
	// read is the Parquet bytes of the old files read back (for write
	// amplification: files written / changelog read).
	read int64
}

// bucketOfFile is the bucket a lake file belongs to, from its name
// ("b<bucket>-…parquet", both for log and primary-key files).
func bucketOfFile(loc string) (catalog.BucketID, bool) {
	base := path.Base(loc)
	rest, ok := strings.CutPrefix(base, "b")
	if !ok {
		return 0, false
	}
	n, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseUint(n, 10, 64)
	return catalog.BucketID(id), err == nil
}

// bucketFiles lists the current data files of tbl per bucket.
func bucketFiles(ctx context.Context, tbl *table.Table) (map[catalog.BucketID][]string, error) {
	out := map[catalog.BucketID][]string{}
	if tbl.CurrentSnapshot() == nil {
		return out, nil
	}
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		return nil, fmt.Errorf("list lake files: %w", err)
	}
	for _, t := range tasks {
		if len(t.DeleteFiles) > 0 {
			return nil, fmt.Errorf("lake file %s has delete files: mink's lake has none", t.File.FilePath())
		}
		b, ok := bucketOfFile(t.File.FilePath())
		if !ok {
			return nil, fmt.Errorf("lake file %s: name does not say its bucket", t.File.FilePath())
		}
		out[b] = append(out[b], t.File.FilePath())
	}
	return out, nil
}

// pkKeyLeaves are the Parquet leaf indexes of the primary-key columns, in key
// order (an interval column: its months, days and nanoseconds), and their
// types (for sorting).
func pkKeyLeaves(ls *lakeSchema, ps *parquet.Schema, spec catalog.TableSpec) ([]int, []parquet.Type, error) {
	var (
		leaves []int
		types  []parquet.Type
	)
	for _, name := range spec.PrimaryKey {
		c, ok := ls.tableColumn(slices.IndexFunc(spec.StoredColumns(), func(c catalog.Column) bool { return c.Name == name }))
		if !ok {
			return nil, nil, fmt.Errorf("primary-key column %q is not in the lake schema", name)
		}
		for _, path := range c.leafPaths() {
			leaf, ok := ps.Lookup(path...)
			if !ok {
				return nil, nil, fmt.Errorf("primary-key column %q is not in the lake schema", path)
			}
			leaves = append(leaves, leaf.ColumnIndex)
			types = append(types, leaf.Node.Type())
		}
	}
	return leaves, types, nil
}

// rowKey is the identity of a row's primary key (not its order).
func rowKey(r parquet.Row, leaves []int, buf []byte) (string, error) {
	buf = buf[:0]
	for _, l := range leaves {
		v := leafValue(r, l)
		if v.IsNull() {
			return "", fmt.Errorf("NULL in primary-key column")
		}
		b := v.Bytes()
		buf = binary.AppendUvarint(buf, uint64(len(b)))
		buf = append(buf, b...)
	}
	return string(buf), nil
}

// rewritePK rewrites every bucket in to (with its range [from, to) of the
// changelog) as described above.
// current are the lake's current data files per bucket (bucketFiles).
func (t *Tierer) rewritePK(ctx context.Context, current map[catalog.BucketID][]string, ls *lakeSchema, p plan.TableRound, from, to map[catalog.BucketID]uint64,
	epoch uint64, token string, progress func(Progress)) (pkPlan, error) {
	var out pkPlan
	ps := ls.parquetSchema()
	leaves, types, err := pkKeyLeaves(ls, ps, p.Spec)
	if err != nil {
		return out, err
	}
	cmp := func(x, y parquet.Row) int {
		for i, l := range leaves {
			if c := types[i].Compare(leafValue(x, l), leafValue(y, l)); c != 0 {
				return c
			}
		}
		return 0
	}
	buckets := slices.Sorted(maps.Keys(to))
	results := make([]pkPlan, len(buckets))
	var progressMu sync.Mutex
	err = forEachBucket(ctx, buckets, func(ctx context.Context, i int, b catalog.BucketID) error {
		res, ev, err := t.rewritePKBucket(ctx, ls, ps, p, b, from[b], to[b], current[b], leaves, cmp, epoch, token)
		if err != nil {
			return fmt.Errorf("table %q bucket %d [%d, %d): %w", p.Spec.Name, b, from[b], to[b], err)
		}
		results[i] = res
		progressMu.Lock()
		progress(ev)
		progressMu.Unlock()
		return nil
	})
	if err != nil {
		return out, err
	}
	for _, r := range results {
		out.files = append(out.files, r.files...)
		out.deleted = append(out.deleted, r.deleted...)
		out.read += r.read
	}
	return out, nil
}

// pkState is one bucket's rows while a round rewrites it: the rows of its
// current lake files (sorted by key; nil once deleted), an index of their
// keys, and the rows of keys that are not in the files.
type pkState struct {
	rows  []parquet.Row
	index map[string]int
	added map[string]parquet.Row
}

func (s *pkState) set(k string, r parquet.Row) {
	if i, ok := s.index[k]; ok {
		s.rows[i] = r
		return
	}
	s.added[k] = r
}

func (s *pkState) del(k string) {
	if i, ok := s.index[k]; ok {
		s.rows[i] = nil
		return
	}
	delete(s.added, k)
}

// sorted returns the bucket's rows sorted by key: the old rows (already
// sorted) merged with the sorted new keys.
func (s *pkState) sorted(cmp func(x, y parquet.Row) int) []parquet.Row {
	added := make([]parquet.Row, 0, len(s.added))
	for _, r := range s.added {
		added = append(added, r)
	}
	slices.SortFunc(added, cmp)
	out := make([]parquet.Row, 0, len(s.rows)+len(added))
	j := 0
	for _, r := range s.rows {
		if r == nil {
			continue
		}
		for j < len(added) && cmp(added[j], r) < 0 {
			out = append(out, added[j])
			j++
		}
		out = append(out, r)
	}
	return append(out, added[j:]...)
}

// rewritePKBucket reads bucket b's current files, applies its changelog
// [from, to) and writes its rows as new files.
func (t *Tierer) rewritePKBucket(ctx context.Context, ls *lakeSchema, ps *parquet.Schema, p plan.TableRound, b catalog.BucketID, from, to uint64,
	files []string, leaves []int, cmp func(x, y parquet.Row) int, epoch uint64, token string) (pkPlan, Progress, error) {
	var out pkPlan
	ev := Progress{Stage: "bucket", Bucket: b, From: from, To: to, Rows: int64(to - from)}
	// Heartbeat before each bucket: a fenced round stops early.
	if err := t.checkEpoch(epoch); err != nil {
		return out, ev, err
	}
	state := &pkState{index: map[string]int{}, added: map[string]parquet.Row{}}
	for _, loc := range files {
		n, err := t.readPKFile(ctx, ls, ps, loc, leaves, state)
		if err != nil {
			return out, ev, err
		}
		out.read += n
		out.deleted = append(out.deleted, loc)
	}
	if !slices.IsSortedFunc(state.rows, cmp) {
		// Several files, read in another order than written.
		slices.SortFunc(state.rows, cmp)
		for i, r := range state.rows {
			k, _ := rowKey(r, leaves, nil)
			state.index[k] = i
		}
	}
	if err := t.applyChanges(ctx, ls, ps, b, from, to, leaves, state); err != nil {
		return out, ev, err
	}
	rows := state.sorted(cmp)
	dir := LakePrefix(p.Table) + "data/"
	if p.Spec.PartitionBy != "" {
		dir += url.PathEscape(p.Spec.PartitionBy) + "=" + url.PathEscape(p.Partition[b]) + "/"
	}
	// No rows: the bucket's old files go and none come.
	for i := 0; i*fileRows < len(rows); i++ {
		data, err := encodeParquetRows(ps, rows[i*fileRows:min(len(rows), (i+1)*fileRows)])
		if err != nil {
			return out, ev, err
		}
		key := fmt.Sprintf("%sb%d-pk-%d-e%d-%s.parquet", dir, b, to, epoch, token)
		if i > 0 {
			key = fmt.Sprintf("%sb%d-pk-%d-e%d-%s-%d.parquet", dir, b, to, epoch, token, i)
		}
		if err := t.cfg.Store.PutIfAbsent(ctx, key, data); err != nil {
			return out, ev, fmt.Errorf("write lake file %s: %w", key, err)
		}
		out.files = append(out.files, writtenFile{key: key, size: int64(len(data))})
		ev.Files++
		ev.Bytes += int64(len(data))
	}
	return out, ev, nil
}

// readPKFile adds the rows of one lake file to state and returns its size.
// A file written before columns were added to the table is widened to the
// current schema ps with their missing values.
func (t *Tierer) readPKFile(ctx context.Context, ls *lakeSchema, ps *parquet.Schema, loc string, leaves []int, state *pkState) (int64, error) {
	key, ok := strings.CutPrefix(loc, t.lake.base+"/")
	if !ok {
		return 0, fmt.Errorf("lake file %s is outside the object store %s", loc, t.lake.base)
	}
	data, err := t.cfg.Store.Get(ctx, key)
	if err != nil {
		return 0, fmt.Errorf("read lake file %s: %w", key, err)
	}
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return 0, fmt.Errorf("lake file %s: %w", key, err)
	}
	widener, err := newRowWidener(ls, ps, f.Schema())
	if err != nil {
		return 0, fmt.Errorf("lake file %s: %w", key, err)
	}
	r := parquet.NewReader(f, f.Schema())
	defer r.Close()
	buf := make([]parquet.Row, 256)
	var kb []byte
	for {
		n, err := r.ReadRows(buf)
		for _, row := range buf[:n] {
			row = row.Clone()
			if widener != nil {
				row = widener.widen(row)
			}
			k, kerr := rowKey(row, leaves, kb)
			if kerr != nil {
				return 0, fmt.Errorf("lake file %s: %w", key, kerr)
			}
			if _, dup := state.index[k]; dup {
				return 0, fmt.Errorf("lake file %s: a primary key is in the bucket's files twice", key)
			}
			state.index[k] = len(state.rows)
			state.rows = append(state.rows, row)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return 0, fmt.Errorf("lake file %s: %w", key, err)
		}
		if n == 0 {
			break
		}
	}
	return int64(len(data)), nil
}

// applyChanges applies changelog records [from, to) of bucket b to state.
func (t *Tierer) applyChanges(ctx context.Context, ls *lakeSchema, ps *parquet.Schema, b catalog.BucketID, from, to uint64,
	leaves []int, state *pkState) error {
	batches, err := t.cfg.Source.ReadCommitted(ctx, b, from, to)
	if err != nil {
		return fmt.Errorf("read stream: %w", err)
	}
	defer func() {
		for _, bt := range batches {
			bt.Record.Release()
		}
	}()
	writers, err := ls.columnWriters(ps)
	if err != nil {
		return err
	}
	// A changelog batch is the change type and a prefix of the table's
	// columns: the ones added after it was written get their missing
	// values.
	changelog := append([]sqltypes.Column{{Name: "_change_type", Type: sqltypes.Of(sqltypes.Text), NotNull: true}}, ls.table...)
	for i, bt := range batches {
		wide, err := sqltypes.Widen(bt.Record, changelog, nil)
		if err != nil {
			return fmt.Errorf("changelog batch at offset %d: %w", bt.Offset, err)
		}
		bt.Record.Release()
		batches[i].Record = wide
	}
	nleaves := len(ps.Columns())
	next := from
	var kb []byte
	for _, bt := range batches {
		n := uint64(bt.Record.NumRows())
		if bt.Offset+n <= next || bt.Offset >= to {
			continue
		}
		if bt.Offset > next {
			return fmt.Errorf("offsets %d..%d missing from the changelog read", next, bt.Offset)
		}
		if int(bt.Record.NumCols()) != len(ls.cols)-2+1 {
			return fmt.Errorf("changelog batch at offset %d has %d columns, want _change_type and the table's %d",
				bt.Offset, bt.Record.NumCols(), len(ls.cols)-2)
		}
		types, ok := bt.Record.Column(0).(*array.String)
		if !ok {
			return fmt.Errorf("changelog batch at offset %d: first column is %s, not the change type", bt.Offset, bt.Record.Column(0).DataType())
		}
		for i := next - bt.Offset; i < n && bt.Offset+i < to; i++ {
			off := bt.Offset + i
			next = off + 1
			ct := types.Value(int(i))
			if ct == "-U" {
				continue
			}
			if ct != "+I" && ct != "+U" && ct != "-D" {
				return fmt.Errorf("offset %d: unknown change type %q", off, ct)
			}
			row, err := appendRow(writers, make(parquet.Row, 0, nleaves), bt.Record, 1, int(i), b, off)
			if err != nil {
				return fmt.Errorf("offset %d: %w", off, err)
			}
			k, err := rowKey(row, leaves, kb)
			if err != nil {
				return fmt.Errorf("offset %d: %w", off, err)
			}
			if ct == "-D" {
				state.del(k)
			} else {
				state.set(k, row)
			}
		}
	}
	if next < to {
		return fmt.Errorf("the changelog read ended at offset %d, the round needs up to %d", next, to)
	}
	return nil
}

// encodeParquetRows writes rows (of schema ps) as one Parquet file.
func encodeParquetRows(ps *parquet.Schema, rows []parquet.Row) ([]byte, error) {
	var buf bytes.Buffer
	w := newLakeWriter(&buf, ps)
	for len(rows) > 0 {
		n := min(len(rows), 1024)
		if _, err := w.WriteRows(rows[:n]); err != nil {
			return nil, fmt.Errorf("write Parquet rows: %w", err)
		}
		rows = rows[n:]
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("close Parquet writer: %w", err)
	}
	return buf.Bytes(), nil
}

// replaceFiles stages one snapshot that removes deleted and adds added.
func replaceFiles(ctx context.Context, tx *table.Transaction, tbl *table.Table, deleted, added []string, props map[string]string) error {
	if len(deleted) == 0 && len(added) == 0 && tbl.CurrentSnapshot() == nil {
		// Every row of the first round was deleted again: an empty
		// snapshot still records the offsets.
		return tx.AddFiles(ctx, nil, props, true)
	}
	return tx.ReplaceDataFiles(ctx, deleted, added, props)
}
