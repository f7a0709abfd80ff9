package sqlfront

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

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

// takeValues returns n values of the sequence of table's column col for
// the session, which currval then returns the last of.
func (s *session) takeValues(ctx context.Context, table *tableInfo, col string, n int) ([]int64, error) {
	vals, err := s.f.nextValues(ctx, table, col, n)
	if err == nil && len(vals) > 0 {
		s.lastSeq = sequenceName(table, col)
		s.setCurrval(s.lastSeq, vals[len(vals)-1])
	}
	return vals, err
}

func (s *session) setCurrval(seq string, v int64) {
	if s.currvals == nil {
		s.currvals = map[string]int64{}
	}
	s.currvals[seq] = v
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
		vals, err := s.takeValues(ctx, table, c.Name, cols[i].NullN())
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

// Sequence functions. A serial or identity column's sequence is named as
// PostgreSQL names it (sequenceName); nextval, currval and setval take that
// name (optionally schema-qualified, quoted, or cast to regclass) in the
// output columns of a SELECT: `SELECT setval(pg_get_serial_sequence('t',
// 'id'), max(id)) FROM t`, what Django's sequence reset and pg_dump send.
// The engine evaluates the SELECT with each call's arguments in its place;
// the calls then run here, row by row, left to right, as PostgreSQL runs
// them.

// seqFuncs are the sequence functions and the number of arguments each
// takes (setval: 2 or 3, lastval none).
var seqFuncs = map[string][2]int{"nextval": {1, 1}, "currval": {1, 1}, "setval": {2, 3}, "lastval": {0, 0}}

// seqCall is one sequence function call standing for output column col of
// a SELECT; its arguments are the engine's columns first..first+nargs-1.
type seqCall struct {
	name         string
	col          int
	first, nargs int
}

// seqFuncName returns the name of the sequence function fc calls, or "".
func seqFuncName(fc *pg.FuncCall) string {
	if fc == nil {
		return ""
	}
	names := fc.Funcname
	if len(names) == 2 && names[0].GetString_().GetSval() != "pg_catalog" || len(names) == 0 || len(names) > 2 {
		return ""
	}
	name := names[len(names)-1].GetString_().GetSval()
	if _, ok := seqFuncs[name]; ok {
		return name
	}
	return ""
}

// callsSequence reports whether node, parsed from sql, calls a sequence
// function anywhere. The text is looked at first, so that a statement
// that names none (every INSERT of the write path) is not walked.
func callsSequence(sql string, node *pg.Node) bool {
	lower := strings.ToLower(sql)
	named := false
	for name := range seqFuncs {
		named = named || strings.Contains(lower, name)
	}
	if !named {
		return false
	}
	found := false
	pg.Walk(node, func(m protoreflect.Message) {
		if fc, ok := m.Interface().(*pg.FuncCall); ok && seqFuncName(fc) != "" {
			found = true
		}
	})
	return found
}

// planSequenceCalls plans a SELECT whose output columns call sequence
// functions; ok is false for any other statement. A sequence function
// anywhere else in the statement is 0A000.
func (s *session) planSequenceCalls(ctx context.Context, sql string, node *pg.Node, paramOIDs []uint32) (st *stmt, ok bool, err error) {
	sel := node.GetSelectStmt()
	if sel == nil || !callsSequence(sql, node) {
		return nil, false, nil
	}
	found := false
	for _, t := range sel.TargetList {
		if seqFuncName(t.GetResTarget().GetVal().GetFuncCall()) != "" {
			found = true
		}
	}
	if !found {
		return nil, true, unsupported("nextval, currval, setval and lastval are supported only as whole output columns of a SELECT")
	}
	inner := proto.Clone(sel).(*pg.SelectStmt)
	var calls []seqCall
	var targets []*pg.Node
	kept := map[int]int{} // output column → engine column
	for i, t := range sel.TargetList {
		rt := t.GetResTarget()
		fc := rt.GetVal().GetFuncCall()
		name := seqFuncName(fc)
		if name == "" {
			kept[i] = len(targets)
			targets = append(targets, inner.TargetList[i])
			continue
		}
		if n := seqFuncs[name]; len(fc.Args) < n[0] || len(fc.Args) > n[1] || fc.AggStar || fc.AggDistinct || fc.Over != nil {
			return nil, true, errorf(pgwire.CodeUndefinedFunction, "function %s with %d arguments does not exist", name, len(fc.Args))
		}
		call := seqCall{name: name, col: i, first: len(targets), nargs: len(fc.Args)}
		for j, a := range proto.Clone(fc).(*pg.FuncCall).Args {
			if tc := a.GetTypeCast(); j == 0 && tc != nil && len(tc.TypeName.GetNames()) > 0 &&
				tc.TypeName.Names[len(tc.TypeName.Names)-1].GetString_().GetSval() == "regclass" {
				a = tc.Arg // 'seq'::regclass: the name
			}
			targets = append(targets, &pg.Node{Node: &pg.Node_ResTarget{ResTarget: &pg.ResTarget{
				Name: fmt.Sprintf("mink_seq_%d_%d", i, j), Val: a}}})
		}
		calls = append(calls, call)
	}
	if len(targets) == 0 {
		// SELECT lastval(): the engine still returns the rows.
		targets = append(targets, &pg.Node{Node: &pg.Node_ResTarget{ResTarget: &pg.ResTarget{
			Name: "mink_seq_rows", Val: pg.IntConst(1)}}})
	}
	inner.TargetList = targets
	innerNode := &pg.Node{Node: &pg.Node_SelectStmt{SelectStmt: inner}}
	text, err := deparseSelect(inner)
	if err != nil {
		return nil, true, err
	}
	in, err := s.plan(ctx, text, innerNode, paramOIDs)
	if err != nil {
		return nil, true, err
	}
	cols := make([]pgwire.Column, len(sel.TargetList))
	for i, j := range kept {
		cols[i] = in.columns[j]
	}
	for _, c := range calls {
		name := c.name
		if alias := sel.TargetList[c.col].GetResTarget().GetName(); alias != "" {
			name = alias
		}
		cols[c.col] = pgwire.NewColumn(name, 20) // bigint
	}
	st = &stmt{params: in.params, columns: cols}
	st.run = func(ctx context.Context, args []any) (pgwire.Result, error) {
		res, err := in.run(ctx, args)
		if err != nil || res.Rows == nil {
			return res, err
		}
		return pgwire.Result{Rows: &seqRows{s: s, ctx: ctx, rows: res.Rows, columns: cols, kept: kept, calls: calls}}, nil
	}
	return st, true, nil
}

// seqRows runs a SELECT's sequence calls on each row the engine returns.
type seqRows struct {
	s       *session
	ctx     context.Context
	rows    pgwire.Rows
	columns []pgwire.Column
	kept    map[int]int
	calls   []seqCall
	out     []any
}

func (r *seqRows) Columns() []pgwire.Column { return r.columns }
func (r *seqRows) Close() error             { return r.rows.Close() }

func (r *seqRows) Next(ctx context.Context) ([]any, error) {
	row, err := r.rows.Next(ctx)
	if err != nil {
		return nil, err
	}
	r.out = r.out[:0]
	r.out = append(r.out, make([]any, len(r.columns))...)
	for i, j := range r.kept {
		r.out[i] = row[j]
	}
	for _, c := range r.calls {
		v, err := r.s.callSequence(ctx, c.name, row[c.first:c.first+c.nargs])
		if err != nil {
			return nil, err
		}
		r.out[c.col] = v
	}
	return r.out, nil
}

// callSequence runs one call of a sequence function; NULL arguments give
// NULL, as the functions are strict in PostgreSQL.
func (s *session) callSequence(ctx context.Context, name string, args []any) (any, error) {
	for _, a := range args {
		if a == nil {
			return nil, nil
		}
	}
	if name == "lastval" {
		v, ok := s.currvals[s.lastSeq]
		if !ok {
			return nil, errorf(codeObjectNotInPrerequisiteState, "lastval is not yet defined in this session")
		}
		return v, nil
	}
	table, col, seq, err := s.sequenceNamed(textOf(args[0]))
	if err != nil {
		return nil, err
	}
	switch name {
	case "nextval":
		if err := s.checkPrivileges(ctx, []tableNeed{{table: table.name, priv: catalog.PrivInsert}}); err != nil {
			return nil, err
		}
		vals, err := s.takeValues(ctx, table, col, 1)
		if err != nil {
			return nil, err
		}
		return vals[0], nil
	case "currval":
		v, ok := s.currvals[seq]
		if !ok {
			return nil, errorf(codeObjectNotInPrerequisiteState, "currval of sequence %q is not yet defined in this session", seq)
		}
		return v, nil
	}
	n, err := int64Of(args[1])
	if err != nil {
		return nil, err
	}
	called := true
	if len(args) == 3 {
		b, ok := args[2].(bool)
		if !ok {
			return nil, errorf(pgwire.CodeInvalidTextRepresentation, "invalid input syntax for type boolean: %q", fmt.Sprint(args[2]))
		}
		called = b
	}
	max := catalog.SequenceMax(table.spec.Columns[table.colIdx[col]].Type)
	if n < 1 || n > max {
		return nil, errorf(pgwire.CodeNumericValueOutOfRange, "setval: value %d is out of bounds for sequence %q (1..%d)", n, seq, max)
	}
	if err := s.checkPrivileges(ctx, []tableNeed{{table: table.name, priv: catalog.PrivUpdate}}); err != nil {
		return nil, err
	}
	last := n
	if !called {
		last = n - 1
	}
	if _, err := s.f.cfg.Meta.Propose(ctx, catalog.SetSequence{Table: table.id, Column: col, Last: last}); err != nil {
		if errors.Is(err, catalog.ErrNotFound) {
			return nil, undefinedTable(table.name)
		}
		return nil, err
	}
	if called {
		// As in PostgreSQL, the session's currval follows a setval that
		// marks its value used.
		s.setCurrval(seq, n)
	}
	return n, nil
}

// codeObjectNotInPrerequisiteState is object_not_in_prerequisite_state.
const codeObjectNotInPrerequisiteState = "55000"

// sequenceNamed finds the serial or identity column whose sequence is
// called name ("t_id_seq", "public.t_id_seq", quoted parts); 42P01 when
// none is, as PostgreSQL reports an unknown sequence.
func (s *session) sequenceNamed(name string) (*tableInfo, string, string, error) {
	seq := name
	if rest, ok := strings.CutPrefix(seq, "public."); ok {
		seq = rest
	} else if rest, ok := strings.CutPrefix(seq, `"public".`); ok {
		seq = rest
	}
	if len(seq) >= 2 && seq[0] == '"' && seq[len(seq)-1] == '"' {
		seq = strings.ReplaceAll(seq[1:len(seq)-1], `""`, `"`)
	} else {
		seq = strings.ToLower(seq)
	}
	var tables []*catalog.Table
	var names []string
	s.f.cfg.Meta.Read(func(v *catalog.View) {
		for _, t := range v.Tables {
			tables, names = append(tables, t), append(names, v.TopicName(t))
		}
	})
	for i, t := range tables {
		for _, c := range t.Spec.Columns {
			if c.Sequence != "" && names[i]+"_"+c.Name+"_seq" == seq {
				info, err := newTableInfo(t, names[i])
				if err != nil {
					return nil, "", "", err
				}
				return info, c.Name, seq, nil
			}
		}
	}
	return nil, "", "", undefinedTable(seq)
}

// int64Of is an integer argument the engine returned.
func int64Of(v any) (int64, error) {
	if t, ok := v.(pgwire.Text); ok {
		v = string(t)
	}
	switch n := v.(type) {
	case int64:
		return n, nil
	case int32:
		return int64(n), nil
	case int16:
		return int64(n), nil
	case int8:
		return int64(n), nil
	case float64:
		if n == float64(int64(n)) {
			return int64(n), nil
		}
	case string:
		if i, err := strconv.ParseInt(strings.TrimSpace(n), 10, 64); err == nil {
			return i, nil
		}
	}
	return 0, errorf(pgwire.CodeInvalidTextRepresentation, "invalid input syntax for type bigint: %q", textOf(v))
}
