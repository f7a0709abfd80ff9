package sqlfront

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	pg "github.com/minkdb/mink/sqlfront/pgtree"
	"github.com/minkdb/mink/sqlfront/translate"

	"github.com/minkdb/mink/internal/sqltypes"
	"github.com/minkdb/mink/sqlfront/engine"
	"github.com/minkdb/mink/sqlfront/pgwire"
)

// insertedView is the engine view RETURNING reads the inserted rows from.
const insertedView = "__mink_inserted"

// planInsert plans INSERT … VALUES / SELECT / DEFAULT VALUES [RETURNING].
// The engine evaluates the source and casts it to the table's column types,
// producing Arrow batches with exactly the table's schema; mink appends them
// to the table's buckets.
func (s *session) planInsert(ctx context.Context, sql string, ins *pg.InsertStmt, paramOIDs []uint32) (*stmt, error) {
	table, err := s.lookupWritten(ins.Relation)
	if err != nil {
		return nil, err
	}
	conflict, err := s.planConflict(table, ins)
	if err != nil {
		return nil, err
	}
	if ins.Override == pg.OverridingKind_OVERRIDING_USER_VALUE {
		return nil, unsupported("OVERRIDING USER VALUE is not supported")
	}
	// Target columns, in the order the source provides them. Without a
	// column list, a source with fewer columns fills the first ones, as in
	// PostgreSQL.
	targets := make([]int, 0, len(table.cols))
	if len(ins.Cols) == 0 {
		n, err := s.sourceWidth(ctx, ins)
		if err != nil {
			return nil, err
		}
		if n > len(table.cols) {
			return nil, errorf(pgwire.CodeSyntaxError, "INSERT has more expressions than target columns")
		}
		for i := 0; i < n; i++ {
			targets = append(targets, i)
		}
	} else {
		seen := map[int]bool{}
		for _, c := range ins.Cols {
			rt := c.GetResTarget()
			if len(rt.Indirection) > 0 {
				return nil, unsupported("assigning to a field or element of column %q is not supported", rt.Name)
			}
			i, ok := table.colIdx[rt.Name]
			if !ok {
				return nil, &pgwire.Error{Code: pgwire.CodeUndefinedColumn, Message: fmt.Sprintf("column %q of relation %q does not exist", rt.Name, table.name), Position: rt.Location + 1}
			}
			if seen[i] {
				return nil, errorf(pgwire.CodeDuplicateColumn, "column %q specified more than once", rt.Name)
			}
			seen[i] = true
			targets = append(targets, i)
		}
	}

	if err := checkIdentityAlways(table, targets, ins.SelectStmt.GetSelectStmt(), ins.Override == pg.OverridingKind_OVERRIDING_SYSTEM_VALUE); err != nil {
		return nil, err
	}
	fast := s.planValuesInsert(ctx, ins, table, targets)
	source, err := s.insertSource(ins, table, targets)
	if err != nil {
		return nil, err
	}
	// The evaluation query: every table column, cast to its type, from the
	// source's columns, a default, or NULL.
	pos := map[int]int{}
	for j, i := range targets {
		pos[i] = j
	}
	var sel []string
	for i, c := range table.cols {
		var expr string
		if j, ok := pos[i]; ok && source != "" {
			expr = fmt.Sprintf("src.%s", quoteIdent(fmt.Sprintf("c%d", j+1)))
		} else if def := table.spec.Columns[i].Default; def != "" {
			expr = def
		} else {
			expr = "NULL"
		}
		sel = append(sel, fmt.Sprintf("CAST(%s AS %s) AS %s", expr, c.Type.DuckDBType(), quoteIdent(c.Name)))
	}
	eval := "SELECT " + strings.Join(sel, ", ")
	if source != "" {
		aliases := make([]string, len(targets))
		for j := range targets {
			aliases[j] = quoteIdent(fmt.Sprintf("c%d", j+1))
		}
		eval += " FROM (" + source + ") AS src(" + strings.Join(aliases, ", ") + ")"
	}

	if err := s.tables.sync(ctx); err != nil {
		return nil, err
	}
	desc, err := s.conn.Describe(ctx, eval)
	if err != nil {
		return nil, withoutPosition(err)
	}
	params := resolveParams(paramOIDs, desc.Params)
	evalParams := maxParamRef(ins.SelectStmt, ins.WithClause)
	// A parameter standing alone for a column, in VALUES or in the target
	// list of INSERT … SELECT, takes the column's type, as in PostgreSQL
	// (the engine cannot see through the source).
	columnParam := func(j int, item *pg.Node) {
		pr := item.GetParamRef()
		if pr == nil || j >= len(targets) {
			return
		}
		k := int(pr.Number) - 1
		for len(params) <= k {
			params = append(params, 25)
		}
		if k >= len(paramOIDs) || paramOIDs[k] == 0 {
			params[k] = table.cols[targets[j]].Type.OID()
		}
	}
	var selects func(sel *pg.SelectStmt)
	selects = func(sel *pg.SelectStmt) {
		if sel == nil {
			return
		}
		if sel.Op != pg.SetOperation_SETOP_NONE {
			selects(sel.Larg)
			selects(sel.Rarg)
			return
		}
		for _, row := range sel.ValuesLists {
			for j, item := range row.GetList().GetItems() {
				columnParam(j, item)
			}
		}
		for j, t := range sel.TargetList {
			columnParam(j, t.GetResTarget().GetVal())
		}
	}
	selects(ins.SelectStmt.GetSelectStmt())
	if params, err = s.conflictParams(ctx, table, conflict, params, paramOIDs); err != nil {
		return nil, err
	}

	if fast != nil && !fast.fastParams(table, params) {
		fast = nil
	}

	st := &stmt{params: params}
	var returning string
	if len(ins.ReturningList) > 0 {
		if hasParamRef(ins.ReturningList) {
			return nil, unsupported("parameters in RETURNING are not supported")
		}
		alias := table.name
		if ins.Relation.Alias != nil {
			alias = ins.Relation.Alias.Aliasname
		}
		returning, err = deparseSelect(&pg.SelectStmt{
			TargetList: ins.ReturningList,
			FromClause: []*pg.Node{{Node: &pg.Node_RangeVar{RangeVar: &pg.RangeVar{Relname: insertedView, Inh: true, Relpersistence: "p",
				Alias: &pg.Alias{Aliasname: alias}}}}},
		})
		if err != nil {
			return nil, err
		}
		release, err := s.conn.RegisterRecords(ctx, insertedView, table.schema, nil)
		if err != nil {
			return nil, err
		}
		rdesc, err := s.conn.Describe(ctx, returning)
		release()
		if err != nil {
			return nil, withoutPosition(err)
		}
		st.columns = wireColumns(rdesc.Columns)
		translate.ColumnNames(&pg.Node{Node: &pg.Node_SelectStmt{SelectStmt: &pg.SelectStmt{TargetList: ins.ReturningList}}}, st.columns)
	}
	st.run = func(ctx context.Context, args []any) (pgwire.Result, error) {
		if err := s.checkTx(); err != nil {
			return pgwire.Result{}, err
		}
		if err := s.tables.sync(ctx); err != nil {
			return pgwire.Result{}, err
		}
		evalArgs := args
		if len(evalArgs) > evalParams {
			evalArgs = evalArgs[:evalParams] // the rest are ON CONFLICT's
		}
		batches, rows, err := s.evaluate(ctx, table, eval, evalArgs)
		if err != nil {
			return pgwire.Result{}, err
		}
		defer releaseAll(batches)
		if table.isPK() {
			applied, n, err := s.writePK(ctx, table, batches, conflict, args)
			if err != nil {
				return pgwire.Result{}, err
			}
			if returning != "" {
				if applied, err = inInputOrder(table, batches, applied); err != nil {
					return pgwire.Result{}, err
				}
			}
			defer applied.Release()
			batches, rows = []arrow.RecordBatch{applied}, n
		} else if err := s.write(ctx, table, batches); err != nil {
			return pgwire.Result{}, err
		}
		if returning == "" {
			return pgwire.Result{Tag: fmt.Sprintf("INSERT 0 %d", rows)}, nil
		}
		release, err := s.conn.RegisterRecords(ctx, insertedView, table.schema, batches)
		if err != nil {
			return pgwire.Result{}, err
		}
		r, err := s.conn.Query(ctx, returning)
		if err != nil {
			release()
			return pgwire.Result{}, err
		}
		return pgwire.Result{Tag: "INSERT 0", Rows: &engineRows{rows: r, columns: st.columns, release: release}}, nil
	}
	if fast != nil {
		general := st.run
		st.run = func(ctx context.Context, args []any) (pgwire.Result, error) {
			if err := s.checkTx(); err != nil {
				return pgwire.Result{}, err
			}
			if err := s.tables.sync(ctx); err != nil {
				return pgwire.Result{}, err
			}
			rec, ok, err := fast.record(ctx, s, table, args)
			if err != nil {
				return pgwire.Result{}, err
			}
			if !ok {
				return general(ctx, args)
			}
			defer rec.Release()
			rows := rec.NumRows()
			if table.isPK() {
				applied, n, err := s.writePK(ctx, table, []arrow.RecordBatch{rec}, conflict, args)
				if err != nil {
					return pgwire.Result{}, err
				}
				applied.Release()
				rows = n
			} else if err := s.write(ctx, table, []arrow.RecordBatch{rec}); err != nil {
				return pgwire.Result{}, err
			}
			fastInserts.Add(1)
			return pgwire.Result{Tag: fmt.Sprintf("INSERT 0 %d", rows)}, nil
		}
	}
	return st, nil
}

// sourceWidth is the number of columns the INSERT's source provides.
func (s *session) sourceWidth(ctx context.Context, ins *pg.InsertStmt) (int, error) {
	if ins.SelectStmt == nil {
		return 0, nil
	}
	sel := ins.SelectStmt.GetSelectStmt()
	if sel == nil {
		return 0, unsupported("this INSERT source is not supported")
	}
	if len(sel.ValuesLists) > 0 {
		return len(sel.ValuesLists[0].GetList().GetItems()), nil
	}
	for sel.Op != pg.SetOperation_SETOP_NONE && sel.Larg != nil {
		sel = sel.Larg
	}
	star := false
	for _, t := range sel.TargetList {
		if cr := t.GetResTarget().GetVal().GetColumnRef(); cr != nil && cr.Fields[len(cr.Fields)-1].GetAStar() != nil {
			star = true
		}
	}
	if !star {
		return len(sel.TargetList), nil
	}
	src := proto.Clone(ins.SelectStmt).(*pg.Node)
	translate.UnqualifyPublic(src)
	text, err := translate.Deparse(src)
	if err != nil {
		return 0, err
	}
	if err := s.tables.sync(ctx); err != nil {
		return 0, err
	}
	d, err := s.conn.Describe(ctx, text)
	if err != nil {
		return 0, err
	}
	return len(d.Columns), nil
}

// insertSource returns the SQL of the INSERT's source rows ("" for DEFAULT
// VALUES), with DEFAULT in VALUES replaced by the column's default.
func (s *session) insertSource(ins *pg.InsertStmt, table *tableInfo, targets []int) (string, error) {
	if ins.SelectStmt == nil {
		return "", nil
	}
	sel := ins.SelectStmt.GetSelectStmt()
	if sel == nil {
		return "", unsupported("this INSERT source is not supported")
	}
	if len(sel.ValuesLists) > 0 {
		for _, row := range sel.ValuesLists {
			items := row.GetList().GetItems()
			if len(items) > len(targets) {
				return "", errorf(pgwire.CodeSyntaxError, "INSERT has more expressions than target columns")
			}
			if len(items) < len(targets) {
				return "", errorf(pgwire.CodeSyntaxError, "INSERT has more target columns than expressions")
			}
			for j, item := range items {
				lit, typ, ok := translate.StringLiteral(item)
				uncast := ok && !typ.Valid()
				if uncast {
					typ = table.cols[targets[j]].Type
				}
				if f := item.GetAConst().GetFval(); f != nil {
					// A numeric constant such as 1e309 for a float column.
					if err := translate.CheckFloat(f.Fval, table.cols[targets[j]].Type); err != nil {
						return "", err
					}
				}
				if ok {
					switch k := typ.Kind(); {
					case uncast && (k == sqltypes.Date || k == sqltypes.Timestamp || k == sqltypes.Timestamptz):
						// '01/02/2024' in DateStyle's order (rewrite.go; a
						// typed literal is rewritten there).
						if iso, reordered := translate.ISODateLiteral(lit, s.settings.values["datestyle"]); reordered {
							lit = iso
						}
						// Cast to the column's type, as for numbers below, so
						// that rows with a typed date mix with it.
						var err error
						if items[j], err = translate.CastTo(pg.StringConst(lit), typ); err != nil {
							return "", err
						}
					}
					replaced, err := translate.TypedLiteral(lit, typ)
					if err != nil {
						return "", err
					}
					switch {
					case replaced != nil:
						items[j] = replaced
					case uncast && translate.IsNumber(typ):
						// PostgreSQL assigns an unknown-type literal to the
						// column's type; the engine would type '1' varchar
						// and refuse to mix it with numbers in other rows.
						if items[j], err = translate.CastTo(item, typ); err != nil {
							return "", err
						}
					}
					continue
				}
				if typ := table.cols[targets[j]].Type; item.GetParamRef() != nil && len(sel.ValuesLists) > 1 && bindsAsOther(typ) {
					// PostgreSQL types the parameter as its column; the
					// engine, binding a uuid, an infinite date or an array
					// as another type, would refuse to mix it with the
					// other rows' typed values ("Cannot combine types").
					var err error
					if items[j], err = translate.CastTo(item, typ); err != nil {
						return "", err
					}
					continue
				}
				if item.GetSetToDefault() == nil {
					continue
				}
				c := targets[j]
				def := table.spec.Columns[c].Default
				if def == "" {
					def = "NULL"
				}
				parsed, err := pg.ParseExpr("CAST(" + def + " AS " + table.cols[c].Type.Name() + ")")
				if err != nil {
					return "", err
				}
				items[j] = parsed
			}
		}
	}
	if ins.WithClause != nil {
		sel.WithClause = ins.WithClause
	}
	translate.Select(s.env(), sel)
	return deparseSelect(sel)
}

// bindsAsOther reports whether a parameter for a column of typ may reach the
// engine as a value of another type (a uuid or an infinite date as text, a
// timestamp, an array as a list of another element type). Numbers and text
// bind as themselves, and the conform step checks their ranges and lengths.
func bindsAsOther(typ sqltypes.Type) bool {
	switch typ.Kind() {
	case sqltypes.UUID, sqltypes.Date, sqltypes.Timestamp, sqltypes.Timestamptz, sqltypes.Array:
		return true
	}
	return false
}

// evaluate runs the evaluation query and conforms its batches to the table.
func (s *session) evaluate(ctx context.Context, table *tableInfo, eval string, args []any) ([]arrow.RecordBatch, int64, error) {
	rdr, err := s.conn.QueryArrow(ctx, eval, args...)
	if err != nil {
		return nil, 0, withoutPosition(err)
	}
	defer rdr.Release()
	var out []arrow.RecordBatch
	var rows int64
	cols := insertColumns(table)
	for rdr.Next() {
		conformed, err := s.conformInserted(ctx, table, cols, rdr.RecordBatch())
		if err != nil {
			releaseAll(out)
			return nil, 0, err
		}
		rows += conformed.NumRows()
		out = append(out, conformed)
	}
	if err := rdr.Err(); err != nil {
		releaseAll(out)
		return nil, 0, err
	}
	merged, err := coalesce(table.schema, out, insertBatchRows)
	releaseAll(out)
	if err != nil {
		return nil, 0, err
	}
	return merged, rows, nil
}

// insertColumns are the columns an INSERT's rows are conformed to before
// their sequences are filled: the table's, with a serial or identity
// column nullable (it is NULL until fillSequences gives it its value, and
// checkNotNull checks it after).
func insertColumns(table *tableInfo) []sqltypes.Column {
	if !table.hasSequences() {
		return table.cols
	}
	cols := slices.Clone(table.cols)
	for i, c := range table.spec.Columns {
		if c.Sequence != "" {
			cols[i].NotNull = false
		}
	}
	return cols
}

// conformInserted conforms rec, an INSERT's rows of the table's columns
// (computed by the engine or built by the fast path), to the table (cols:
// insertColumns), fills its sequences and checks NOT NULL.
func (s *session) conformInserted(ctx context.Context, table *tableInfo, cols []sqltypes.Column, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	schema := table.schema
	if len(cols) != len(table.cols) || len(cols) > 0 && &cols[0] != &table.cols[0] {
		schema = sqltypes.Schema(cols)
	}
	conformed, err := sqltypes.ConformTo(table.name, cols, schema, rec, memory.DefaultAllocator)
	if err != nil {
		var ne *sqltypes.NotNullError
		if errors.As(err, &ne) {
			return nil, notNullWire(ne, s.sessionLocation())
		}
		return nil, err
	}
	if table.hasSequences() {
		if conformed, err = s.fillSequences(ctx, table, conformed); err != nil {
			return nil, err
		}
	}
	if err := checkNotNullIn(table, conformed, s.sessionLocation()); err != nil {
		conformed.Release()
		return nil, err
	}
	return conformed, nil
}

// checkNotNull rejects a batch with a NULL in a NOT NULL column (23502),
// with the failing row in the detail (timestamptz values in UTC; see
// checkNotNullIn).
func checkNotNull(table *tableInfo, rec arrow.RecordBatch) error {
	return checkNotNullIn(table, rec, time.UTC)
}

// checkNotNullIn is checkNotNull showing timestamptz values in loc, the
// session's time zone.
func checkNotNullIn(table *tableInfo, rec arrow.RecordBatch, loc *time.Location) error {
	nulls := false
	for i, c := range table.cols {
		nulls = nulls || c.NotNull && rec.Column(i).NullN() > 0
	}
	if !nulls {
		return nil
	}
	// PostgreSQL checks one row at a time, its columns in order.
	for r := 0; r < int(rec.NumRows()); r++ {
		for i, c := range table.cols {
			if c.NotNull && rec.Column(i).IsNull(r) {
				return notNullViolation(table.name, c.Name, table.cols, rec, r, loc)
			}
		}
	}
	panic(fmt.Sprintf("sqlfront: column with nulls but no null row in a batch of %d rows", rec.NumRows()))
}

// notNullViolation is PostgreSQL's 23502 error for row r of rec, a batch
// of the table's columns cols (as stored, or as the engine computed them).
func notNullViolation(table, column string, cols []sqltypes.Column, rec arrow.RecordBatch, r int, loc *time.Location) *pgwire.Error {
	e := &pgwire.Error{Code: pgwire.CodeNotNullViolation,
		Message:   fmt.Sprintf("null value in column %q of relation %q violates not-null constraint", column, table),
		TableName: table, ColumnName: column, SchemaName: "public"}
	if row, ok := failingRow(cols, rec, r, loc); ok {
		e.Detail = "Failing row contains (" + row + ")."
	}
	return e
}

// failingRowValueLen is how many bytes of a value PostgreSQL shows in a
// failing row before it cuts the value short with "...".
const failingRowValueLen = 64

// failingRow renders row r of rec as PostgreSQL's "Failing row contains"
// detail does. False if a value cannot be rendered.
func failingRow(cols []sqltypes.Column, rec arrow.RecordBatch, r int, loc *time.Location) (string, bool) {
	if rec == nil || int(rec.NumCols()) != len(cols) {
		return "", false
	}
	return rowText(cols, rec, r, nil, loc, failingRowValueLen)
}

// rowText renders the values of row r of rec in the columns idx (nil:
// all) as PostgreSQL's error details do: each value's text output in the
// session's time zone loc, char(n) padded, null for NULL, a value longer
// than limit bytes (limit > 0) cut short with "...". False if a value
// cannot be rendered.
func rowText(cols []sqltypes.Column, rec arrow.RecordBatch, r int, idx []int, loc *time.Location, limit int) (string, bool) {
	if idx == nil {
		idx = make([]int, len(cols))
		for i := range idx {
			idx[i] = i
		}
	}
	oids := make([]uint32, len(idx))
	vals := make([]any, len(idx))
	for j, i := range idx {
		oids[j] = cols[i].Type.OID()
		vals[j] = engine.GoValue(rec.Column(i), r, cols[i].Type)
	}
	texts, err := pgwire.TextValues(oids, vals, loc)
	if err != nil {
		return "", false
	}
	for j, t := range texts {
		if vals[j] == nil {
			texts[j] = "null"
			continue
		}
		if typ := cols[idx[j]].Type; typ.Kind() == sqltypes.Char {
			t = sqltypes.PadChar(t, int(typ.Length()))
		}
		if limit > 0 && len(t) > limit {
			cut := limit
			for cut > 0 && !utf8.RuneStart(t[cut]) {
				cut--
			}
			t = t[:cut] + "..."
		}
		texts[j] = t
	}
	return strings.Join(texts, ", "), true
}

// sessionLocation is the session's TimeZone as a location; UTC when Go
// does not know the zone.
func (s *session) sessionLocation() *time.Location {
	if loc, err := time.LoadLocation(s.settings.values["timezone"]); err == nil {
		return loc
	}
	return time.UTC
}

func releaseAll(batches []arrow.RecordBatch) {
	for _, b := range batches {
		b.Release()
	}
}

// resolveParams picks each parameter's type: the client's when given, else
// the engine's inference, else text.
func resolveParams(client []uint32, inferred []sqltypes.Type) []uint32 {
	n := max(len(client), len(inferred))
	out := make([]uint32, n)
	for i := range out {
		switch {
		case i < len(client) && client[i] != 0:
			out[i] = client[i]
		case i < len(inferred) && inferred[i].Valid():
			out[i] = inferred[i].OID()
		default:
			out[i] = 25 // text
		}
	}
	return out
}

func deparseSelect(sel *pg.SelectStmt) (string, error) {
	return translate.Deparse(&pg.Node{Node: &pg.Node_SelectStmt{SelectStmt: sel}})
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// insertBatchRows is the size batches are merged to before routing: the
// engine produces batches of 2048 rows, and every bucket entry costs a
// little, so merging makes fewer, larger entries.
const insertBatchRows = 64 << 10

// coalesce merges consecutive batches into batches of about target rows.
// The result is independent of the input (release both).
func coalesce(schema *arrow.Schema, batches []arrow.RecordBatch, target int64) ([]arrow.RecordBatch, error) {
	var out []arrow.RecordBatch
	for start := 0; start < len(batches); {
		end, rows := start, int64(0)
		for end < len(batches) && (end == start || rows+batches[end].NumRows() <= target) {
			rows += batches[end].NumRows()
			end++
		}
		if end-start == 1 {
			batches[start].Retain()
			out = append(out, batches[start])
			start = end
			continue
		}
		cols := make([]arrow.Array, schema.NumFields())
		for c := range cols {
			parts := make([]arrow.Array, 0, end-start)
			for _, b := range batches[start:end] {
				parts = append(parts, b.Column(c))
			}
			merged, err := array.Concatenate(parts, memory.DefaultAllocator)
			if err != nil {
				for _, m := range cols[:c] {
					m.Release()
				}
				releaseAll(out)
				return nil, err
			}
			cols[c] = merged
		}
		out = append(out, array.NewRecordBatch(batches[start].Schema(), cols, rows))
		for _, c := range cols {
			c.Release()
		}
		start = end
	}
	return out, nil
}

// hasParamRef reports whether any of the expressions uses a parameter ($1).
func hasParamRef(exprs []*pg.Node) bool {
	found := false
	for _, e := range exprs {
		pg.Walk(e, func(m protoreflect.Message) {
			if _, ok := m.Interface().(*pg.ParamRef); ok {
				found = true
			}
		})
	}
	return found
}

// withoutPosition drops the error position of an engine error about a
// statement mink wrote (an INSERT's evaluation query): it would point into
// text the client never sent.
func withoutPosition(err error) error {
	var ee *engine.Error
	if errors.As(err, &ee) && ee.Position != 0 {
		cp := *ee
		cp.Position = 0
		return &cp
	}
	return err
}

// The fast path of INSERT … VALUES (issue 15). When every item of the
// VALUES rows is a parameter of the column's type, a plain literal, NULL
// or DEFAULT, and every default the statement needs is a constant (or
// gen_random_uuid(), or a sequence), the rows are built in Go at execute
// time (buildRecord, as COPY builds them) and conformed like the engine's
// output (conformInserted): no evaluation query. What does not change
// between executions is planned once: the targets, each item's kind, the
// defaults' values. Anything else takes the general path, and so does
// every execution that fails while building its rows: the general path
// then returns the error a client sees, so both paths fail alike.

// fastInsertOff, when set, sends every INSERT through the general path
// (tests compare the two).
var fastInsertOff atomic.Bool

// fastInserts counts the executions the fast path stored (tests check
// that it ran).
var fastInserts atomic.Int64

// valuesItem is one item of a VALUES row in the fast path: args[param]
// when param >= 0, else gen() when gen is set, else value.
type valuesItem struct {
	param int
	gen   func() any
	value any
}

// valuesInsert is the fast path's plan of one INSERT … VALUES.
type valuesInsert struct {
	targets []int
	// fill holds, by table column, the value of a column not in targets:
	// its constant default, a generator (func() any), or nil (NULL, or a
	// sequence that conformInserted fills).
	fill []any
	rows [][]valuesItem
	// cols are the table's columns as conformInserted takes them.
	cols []sqltypes.Column
}

// planValuesInsert plans the fast path of ins into table, or returns nil
// when the statement needs the engine. It runs before insertSource, which
// rewrites the VALUES items; params are checked later (fastParams).
func (s *session) planValuesInsert(ctx context.Context, ins *pg.InsertStmt, table *tableInfo, targets []int) *valuesInsert {
	if fastInsertOff.Load() || len(ins.ReturningList) > 0 || ins.WithClause != nil {
		return nil
	}
	var items [][]*pg.Node
	if ins.SelectStmt != nil {
		sel := ins.SelectStmt.GetSelectStmt()
		if sel == nil || len(sel.ValuesLists) == 0 || sel.Op != pg.SetOperation_SETOP_NONE || len(sel.SortClause) > 0 ||
			sel.LimitCount != nil || sel.LimitOffset != nil || sel.WithClause != nil || len(sel.LockingClause) > 0 {
			return nil
		}
		for _, row := range sel.ValuesLists {
			items = append(items, row.GetList().GetItems())
		}
	} else {
		items = [][]*pg.Node{nil} // DEFAULT VALUES: one row of defaults
	}
	vi := &valuesInsert{targets: targets, fill: make([]any, len(table.cols)), cols: insertColumns(table)}
	// needed marks the columns whose DEFAULT the statement uses: those not
	// in targets, and those with a DEFAULT item.
	needed := make([]bool, len(table.cols))
	for i := range needed {
		needed[i] = !slices.Contains(targets, i)
	}
	for _, row := range items {
		if len(row) != len(targets) {
			return nil // insertSource's error
		}
		out := make([]valuesItem, len(row))
		for j, item := range row {
			it, ok := valuesItemOf(item, table.cols[targets[j]].Type)
			if !ok {
				return nil
			}
			needed[targets[j]] = needed[targets[j]] || item.GetSetToDefault() != nil
			out[j] = it
		}
		vi.rows = append(vi.rows, out)
	}
	// defaults holds, by table column, the DEFAULT of a needed column.
	defaults := make([]valuesItem, len(table.cols))
	for i, c := range table.spec.Columns {
		if !needed[i] {
			continue
		}
		d := valuesItem{param: -1}
		switch {
		case c.Sequence != "" && c.Default != "":
			return nil
		case c.Sequence != "" || c.Default == "":
			// NULL: conformInserted fills a sequence.
		default:
			expr, err := pg.ParseExpr(c.Default)
			if err != nil {
				return nil
			}
			if isRowDefault(expr) {
				d.gen = rowDefault(c.Default)
				break
			}
			// A timestamptz constant may be read in the session's time
			// zone, which can change between executions; other defaults
			// (now()) are not constants.
			if !isConstant(expr) || table.cols[i].Type.Kind() == sqltypes.Timestamptz {
				return nil
			}
			v, err := s.constantValue(ctx, table.name, c.Default, table.cols[i].Type)
			if err != nil {
				return nil // the general path fails as it must
			}
			d.value = v
		}
		defaults[i] = d
		if !slices.Contains(targets, i) {
			if d.gen != nil {
				vi.fill[i] = d.gen
			} else {
				vi.fill[i] = d.value
			}
		}
	}
	for r, row := range items {
		for j, item := range row {
			if item.GetSetToDefault() != nil {
				vi.rows[r][j] = defaults[targets[j]]
			}
		}
	}
	return vi
}

// valuesItemOf is the fast path's form of a VALUES item stored in a column
// of typ, or false when the engine must evaluate it: a parameter; NULL; an
// integer literal for an integer or float column, in the column's range; a
// string literal for a text column; true or false for a boolean column.
// DEFAULT is accepted here and resolved by the caller.
func valuesItemOf(item *pg.Node, typ sqltypes.Type) (valuesItem, bool) {
	it := valuesItem{param: -1}
	if pr := item.GetParamRef(); pr != nil {
		it.param = int(pr.Number) - 1
		return it, it.param >= 0
	}
	if item.GetSetToDefault() != nil {
		return it, true
	}
	c := item.GetAConst()
	if c == nil {
		return it, false
	}
	switch k := typ.Kind(); {
	case c.Isnull:
		return it, true
	case c.GetIval() != nil:
		v := int64(c.GetIval().Ival)
		switch k {
		case sqltypes.Int2:
			it.value = int16(v)
			return it, v >= -1<<15 && v < 1<<15
		case sqltypes.Int4:
			it.value = int32(v)
		case sqltypes.Int8:
			it.value = v
		case sqltypes.Float8:
			it.value = float64(v)
		default:
			return it, false
		}
		return it, true
	case c.GetSval() != nil:
		it.value = c.GetSval().Sval
		return it, k == sqltypes.Text || k == sqltypes.Varchar
	case c.GetBoolval() != nil:
		it.value = c.GetBoolval().Boolval
		return it, k == sqltypes.Bool
	}
	return it, false
}

// fastParams reports whether the parameters the fast path reads have the
// types of their columns (params: the statement's parameter types), so
// that pgwire decodes each into the Go value buildRecord stores. An
// integer parameter of another width is range-checked as it is built.
func (vi *valuesInsert) fastParams(table *tableInfo, params []uint32) bool {
	for _, row := range vi.rows {
		for j, it := range row {
			if it.param < 0 {
				continue
			}
			if it.param >= len(params) {
				return false
			}
			col := table.cols[vi.targets[j]].Type
			oid := params[it.param]
			if oid != col.OID() && !(isIntOID(oid) && isIntKind(col.Kind())) {
				return false
			}
		}
	}
	return true
}

func isIntOID(oid uint32) bool { return oid == 20 || oid == 21 || oid == 23 }

func isIntKind(k sqltypes.Kind) bool {
	return k == sqltypes.Int2 || k == sqltypes.Int4 || k == sqltypes.Int8
}

// record builds and conforms the rows of one execution. False (with no
// error) when the rows cannot be built here: the caller runs the general
// path, which says why.
func (vi *valuesInsert) record(ctx context.Context, s *session, table *tableInfo, args []any) (arrow.RecordBatch, bool, error) {
	rows := make([][]any, len(vi.rows))
	for r, items := range vi.rows {
		row := make([]any, len(items))
		for j, it := range items {
			switch {
			case it.param >= 0:
				if it.param >= len(args) {
					return nil, false, nil
				}
				row[j] = args[it.param]
			case it.gen != nil:
				row[j] = it.gen()
			default:
				row[j] = it.value
			}
		}
		rows[r] = row
	}
	built, err := buildRecord(table, vi.targets, vi.fill, rows)
	if err != nil {
		return nil, false, nil
	}
	defer built.Release()
	rec, err := s.conformInserted(ctx, table, vi.cols, built)
	if err != nil {
		return nil, false, err
	}
	return rec, true, nil
}
