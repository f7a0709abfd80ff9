package sqlfront

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/minkdb/mink/internal/sqltypes"
	pg "github.com/minkdb/mink/sqlfront/pgtree"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/kv/kvcodec"
	"github.com/minkdb/mink/sqlfront/pgwire"
)

// Sequences of serial and identity columns (catalog.Column.Sequence). A
// node takes values from the metadata log in ranges (AllocateSequence) and
// hands them out from its cache, so values are unique cluster-wide and
// increase on each node, but nodes interleave and a restart leaves a gap,
// as PostgreSQL's sequences with a cache do.

// sequenceCache is the minimum number of values a node takes at once.
const sequenceCache = 128

// seqKey names a sequence in the cache by its column's stored position,
// which a RENAME COLUMN keeps (the catalog moves the sequence to the new
// name), so that a rename does not throw the cached values away, and a
// DROP COLUMN of an earlier column does not move.
type seqKey struct {
	table  catalog.TableID
	column int
}

// seqRange is the cached part of a range: next..last, allocated in the
// table's sequence epoch epoch (TRUNCATE … RESTART IDENTITY starts a new
// one, which makes the range stale).
type seqRange struct {
	next, last int64
	epoch      uint64
}

type sequences struct {
	mu     sync.Mutex
	ranges map[seqKey]*seqRange
}

// nextValues returns n values of the sequence of table's column col.
func (f *Frontend) nextValues(ctx context.Context, table *tableInfo, col string, n int) ([]int64, error) {
	key := seqKey{table.id, slices.IndexFunc(table.stored, func(c sqltypes.Column) bool { return c.Name == col && !c.Dropped })}
	out := make([]int64, 0, n)
	for len(out) < n {
		f.seqs.mu.Lock()
		r := f.seqs.ranges[key]
		if r != nil && r.epoch != table.seqEpoch {
			delete(f.seqs.ranges, key)
			r = nil
		}
		for r != nil && r.next <= r.last && len(out) < n {
			out = append(out, r.next)
			r.next++
		}
		f.seqs.mu.Unlock()
		if len(out) == n {
			break
		}
		want := uint64(max(n-len(out), sequenceCache))
		o, err := f.cfg.Meta.Propose(ctx, catalog.AllocateSequence{Table: table.id, Column: col, Count: want, Epoch: table.seqEpoch})
		if errors.Is(err, catalog.ErrSequenceExhausted) && want > uint64(n-len(out)) {
			// Near the end: take exactly what is needed.
			o, err = f.cfg.Meta.Propose(ctx, catalog.AllocateSequence{Table: table.id, Column: col, Count: uint64(n - len(out)), Epoch: table.seqEpoch})
			want = uint64(n - len(out))
		}
		if errors.Is(err, catalog.ErrStaleEpoch) {
			// The sequences were restarted (TRUNCATE … RESTART IDENTITY)
			// since the statement read the table: take the values of the
			// new epoch.
			fresh, lerr := f.lookupTableByName(table.name)
			if lerr != nil || fresh.id != table.id || fresh.seqEpoch == table.seqEpoch {
				return nil, fmt.Errorf("allocate values of sequence %q: %w", sequenceName(table, col), err)
			}
			table = fresh
			out = out[:0]
			continue
		}
		switch {
		case errors.Is(err, catalog.ErrSequenceExhausted):
			max := catalog.SequenceMax(table.spec.Columns[table.colIdx[col]].Type)
			return nil, errorf(codeSequenceLimit, "nextval: reached maximum value of sequence %q (%d)", sequenceName(table, col), max)
		case errors.Is(err, catalog.ErrNotFound):
			return nil, undefinedTable(table.name)
		case err != nil:
			return nil, fmt.Errorf("allocate values of sequence %q: %w", sequenceName(table, col), err)
		}
		f.seqs.mu.Lock()
		if f.seqs.ranges == nil {
			f.seqs.ranges = map[seqKey]*seqRange{}
		}
		f.seqs.ranges[key] = &seqRange{next: o.SequenceStart, last: o.SequenceStart + int64(want) - 1, epoch: table.seqEpoch}
		f.seqs.mu.Unlock()
	}
	return out, nil
}

// codeSequenceLimit is sequence_generator_limit_exceeded.
const codeSequenceLimit = "2200H"

// sequenceName is the name PostgreSQL gives the sequence of a serial or
// identity column.
func sequenceName(table *tableInfo, col string) string {
	return table.name + "_" + col + "_seq"
}

// hasSequences reports whether table has a serial or identity column.
func (t *tableInfo) hasSequences() bool {
	for _, c := range t.spec.Columns {
		if c.Sequence != "" {
			return true
		}
	}
	return false
}

// fillSequences gives the NULLs of rec's sequence columns the next values
// of their sequences, in row order. It consumes rec and returns the
// result, with the table's schema.
func (s *session) fillSequences(ctx context.Context, table *tableInfo, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	cols := rec.Columns()
	var replaced []arrow.Array
	defer func() {
		for _, a := range replaced {
			a.Release()
		}
	}()
	for i, c := range table.spec.Columns {
		if c.Sequence == "" || cols[i].NullN() == 0 {
			continue
		}
		vals, err := s.f.nextValues(ctx, table, c.Name, cols[i].NullN())
		if err != nil {
			rec.Release()
			return nil, err
		}
		filled, err := fillNulls(cols[i], vals)
		if err != nil {
			rec.Release()
			return nil, err
		}
		replaced = append(replaced, filled)
		if len(replaced) == 1 {
			cols = append([]arrow.Array(nil), cols...)
		}
		cols[i] = filled
	}
	// The table's schema: rec's says the sequence columns are nullable.
	out := array.NewRecordBatch(table.schema, cols, rec.NumRows())
	rec.Release()
	return out, nil
}

// fillNulls returns a, an integer array, with its NULLs replaced by vals in
// order.
func fillNulls(a arrow.Array, vals []int64) (arrow.Array, error) {
	mem := memory.DefaultAllocator
	k := 0
	switch x := a.(type) {
	case *array.Int16:
		b := array.NewInt16Builder(mem)
		defer b.Release()
		for r := 0; r < x.Len(); r++ {
			if x.IsNull(r) {
				b.Append(int16(vals[k]))
				k++
			} else {
				b.Append(x.Value(r))
			}
		}
		return b.NewArray(), nil
	case *array.Int32:
		b := array.NewInt32Builder(mem)
		defer b.Release()
		for r := 0; r < x.Len(); r++ {
			if x.IsNull(r) {
				b.Append(int32(vals[k]))
				k++
			} else {
				b.Append(x.Value(r))
			}
		}
		return b.NewArray(), nil
	case *array.Int64:
		b := array.NewInt64Builder(mem)
		defer b.Release()
		for r := 0; r < x.Len(); r++ {
			if x.IsNull(r) {
				b.Append(vals[k])
				k++
			} else {
				b.Append(x.Value(r))
			}
		}
		return b.NewArray(), nil
	}
	return nil, fmt.Errorf("sequence column of Arrow type %s", a.DataType())
}

// checkIdentityAlways rejects an INSERT that gives a GENERATED ALWAYS
// identity column a value (428C9), unless it says OVERRIDING SYSTEM VALUE.
// DEFAULT in VALUES is not a value.
func checkIdentityAlways(table *tableInfo, targets []int, source *pg.SelectStmt, overriding bool) error {
	if overriding {
		return nil
	}
	for j, i := range targets {
		c := table.spec.Columns[i]
		if c.Sequence != catalog.SequenceAlways {
			continue
		}
		given := len(source.GetValuesLists()) == 0 // INSERT … SELECT
		for _, row := range source.GetValuesLists() {
			if items := row.GetList().GetItems(); j < len(items) && items[j].GetSetToDefault() == nil {
				given = true
			}
		}
		if given {
			return &pgwire.Error{Code: codeGeneratedAlways, Message: fmt.Sprintf("cannot insert a non-DEFAULT value into column %q", c.Name),
				Detail: fmt.Sprintf("Column %q is an identity column defined as GENERATED ALWAYS.", c.Name),
				Hint:   "Use OVERRIDING SYSTEM VALUE to override."}
		}
	}
	return nil
}

// codeGeneratedAlways is generated_always.
const codeGeneratedAlways = "428C9"

// inInputOrder returns applied, the rows a primary-key INSERT wrote (in
// bucket order), in the order of the statement's rows, as PostgreSQL's
// RETURNING lists them: clients match returned keys (serial ids) to the
// rows they sent by position. It consumes applied.
func inInputOrder(table *tableInfo, input []arrow.RecordBatch, applied arrow.RecordBatch) (arrow.RecordBatch, error) {
	if applied.NumRows() < 2 {
		return applied, nil
	}
	codec, err := kvcodec.NewCodec(table.schema, table.pkCols())
	if err != nil {
		applied.Release()
		return nil, err
	}
	pos := map[string]int{}
	var key []byte
	for _, b := range input {
		for r := 0; r < int(b.NumRows()); r++ {
			if key, err = codec.AppendKey(key[:0], b, r); err != nil {
				applied.Release()
				return nil, err
			}
			if _, ok := pos[string(key)]; !ok {
				pos[string(key)] = len(pos)
			}
		}
	}
	type row struct {
		pos int
		enc []byte
	}
	rows := make([]row, applied.NumRows())
	for r := range rows {
		if key, err = codec.AppendKey(key[:0], applied, r); err != nil {
			applied.Release()
			return nil, err
		}
		p, ok := pos[string(key)]
		if !ok {
			p = len(pos) + r // not from the input: keep it after, in order
		}
		enc, err := codec.AppendRow(nil, applied, r)
		if err != nil {
			applied.Release()
			return nil, err
		}
		rows[r] = row{pos: p, enc: enc}
	}
	applied.Release()
	slices.SortStableFunc(rows, func(a, b row) int { return cmp.Compare(a.pos, b.pos) })
	encoded := make([][]byte, len(rows))
	for i, r := range rows {
		encoded[i] = r.enc
	}
	return codec.DecodeRows(memory.DefaultAllocator, encoded)
}
