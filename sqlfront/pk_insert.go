package sqlfront

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	pg "github.com/minkdb/mink/sqlfront/pgtree"
	"github.com/minkdb/mink/sqlfront/translate"

	"github.com/minkdb/mink/internal/sqltypes"
	"github.com/minkdb/mink/kv"
	"github.com/minkdb/mink/kv/kvcodec"
	"github.com/minkdb/mink/sqlfront/pgwire"
)

const (
	existingView = "__mink_existing"
	excludedView = "__mink_excluded"
	rowColumn    = "__mink_row"
)

// conflictPlan is how an INSERT into a primary-key table treats keys that
// exist: fail (23505), skip (DO NOTHING) or update (DO UPDATE).
type conflictPlan struct {
	action pg.OnConflictAction
	// replace: DO UPDATE sets every non-key column to excluded's and has
	// no WHERE, so it is a plain upsert of the proposed row.
	replace bool
	// update is the query computing the new rows of conflicting keys from
	// existingView and excludedView; its parameter $j is the statement's
	// $updateParams[j-1].
	update       string
	updateParams []int
	// paramCol: a parameter standing alone for a column (SET col = $n)
	// takes the column's type, as in PostgreSQL.
	paramCol map[int]sqltypes.Type
}

// planConflict checks an ON CONFLICT clause against the table.
func (s *session) planConflict(table *tableInfo, ins *pg.InsertStmt) (*conflictPlan, error) {
	oc := ins.OnConflictClause
	if oc == nil {
		return &conflictPlan{action: pg.OnConflictAction_ONCONFLICT_NONE}, nil
	}
	plan := &conflictPlan{action: oc.Action}
	noMatch := errorf("42P10", "there is no unique or exclusion constraint matching the ON CONFLICT specification")
	if inf := oc.Infer; inf != nil {
		if inf.Conname != "" {
			if !table.isPK() || inf.Conname != table.pkeyName() {
				return nil, errorf(pgwire.CodeUndefinedObject, "constraint %q for table %q does not exist", inf.Conname, table.name)
			}
		} else {
			if inf.WhereClause != nil {
				return nil, noMatch
			}
			cols := map[string]bool{}
			for _, e := range inf.IndexElems {
				ie := e.GetIndexElem()
				if ie == nil || ie.Name == "" {
					return nil, noMatch
				}
				if _, ok := table.colIdx[ie.Name]; !ok {
					return nil, errorf(pgwire.CodeUndefinedColumn, "column %q does not exist", ie.Name)
				}
				cols[ie.Name] = true
			}
			if !table.isPK() || len(cols) != len(table.spec.PrimaryKey) {
				return nil, noMatch
			}
			for _, k := range table.spec.PrimaryKey {
				if !cols[k] {
					return nil, noMatch
				}
			}
		}
	} else if oc.Action == pg.OnConflictAction_ONCONFLICT_UPDATE {
		return nil, errorf(pgwire.CodeSyntaxError, "ON CONFLICT DO UPDATE requires inference specification or constraint name")
	}
	if oc.Action != pg.OnConflictAction_ONCONFLICT_UPDATE {
		return plan, nil
	}
	alias := table.name
	if ins.Relation.Alias != nil {
		alias = ins.Relation.Alias.Aliasname
	}
	exprs := map[int]*pg.Node{}
	for _, t := range oc.TargetList {
		rt := t.GetResTarget()
		if len(rt.Indirection) > 0 {
			return nil, unsupported("assigning to a field or element of column %q is not supported", rt.Name)
		}
		if rt.Val.GetMultiAssignRef() != nil {
			return nil, unsupported("SET (a, b) = … is not supported; assign each column")
		}
		i, ok := table.colIdx[rt.Name]
		if !ok {
			return nil, &pgwire.Error{Code: pgwire.CodeUndefinedColumn, Message: fmt.Sprintf("column %q of relation %q does not exist", rt.Name, table.name), Position: rt.Location + 1}
		}
		if _, dup := exprs[i]; dup {
			return nil, errorf(pgwire.CodeSyntaxError, "multiple assignments to same column %q", rt.Name)
		}
		if containsInt(table.pkCols(), i) {
			if isExcludedRef(rt.Val, rt.Name) {
				continue // the key is the key: a no-op
			}
			return nil, unsupported("ON CONFLICT DO UPDATE cannot change primary-key column %q in mink; DELETE the row and INSERT the new one", rt.Name)
		}
		exprs[i] = rt.Val
		if pr := rt.Val.GetParamRef(); pr != nil {
			if plan.paramCol == nil {
				plan.paramCol = map[int]sqltypes.Type{}
			}
			plan.paramCol[int(pr.Number)] = table.cols[i].Type // SET col = $n
		}
	}
	if oc.WhereClause == nil {
		plan.replace = true
		for i := range table.cols {
			if containsInt(table.pkCols(), i) {
				continue
			}
			if e, ok := exprs[i]; !ok || !isExcludedRef(e, table.cols[i].Name) {
				plan.replace = false
			}
		}
		if plan.replace {
			return plan, nil
		}
	}
	// The update query is prepared on its own: its parameters are
	// renumbered $1… in order of first use, and planUpdateParams passes the
	// statement's values for them.
	renumber := map[int32]int32{}
	renum := func(n *pg.Node) *pg.Node {
		cp := proto.Clone(n).(*pg.Node)
		pg.Walk(cp, func(m protoreflect.Message) {
			if pr, ok := m.Interface().(*pg.ParamRef); ok {
				k, ok := renumber[pr.Number]
				if !ok {
					k = int32(len(renumber) + 1)
					renumber[pr.Number] = k
					plan.updateParams = append(plan.updateParams, int(pr.Number))
				}
				pr.Number = k
			}
		})
		return cp
	}
	var sel []string
	sel = append(sel, "excluded."+rowColumn)
	for i, c := range table.cols {
		expr := quoteIdent(alias) + "." + quoteIdent(c.Name)
		if e, ok := exprs[i]; ok {
			q, err := qualifyColumns(renum(e), table)
			if err != nil {
				return nil, err
			}
			text, err := deparseExpr(translate.Expr(s.env(), q))
			if err != nil {
				return nil, err
			}
			if e.GetSetToDefault() != nil {
				text = "NULL"
				if def := table.spec.Columns[i].Default; def != "" {
					text = def
				}
			}
			expr = "(" + text + ")"
		}
		sel = append(sel, fmt.Sprintf("CAST(%s AS %s) AS %s", expr, c.Type.DuckDBType(), quoteIdent(c.Name)))
	}
	q := "SELECT " + strings.Join(sel, ", ") + " FROM " + existingView + " AS " + quoteIdent(alias) +
		" JOIN " + excludedView + " AS excluded ON " + quoteIdent(alias) + "." + rowColumn + " = excluded." + rowColumn
	if oc.WhereClause != nil {
		w, err := qualifyColumns(renum(oc.WhereClause), table)
		if err != nil {
			return nil, err
		}
		text, err := deparseExpr(translate.Expr(s.env(), w))
		if err != nil {
			return nil, err
		}
		q += " WHERE " + text
	}
	plan.update = q + " ORDER BY 1"
	return plan, nil
}

// conflictParams adds the types of the parameters that only DO UPDATE
// uses to params (the types of the statement's parameters so far), from
// the engine's reading of the update query; text where it cannot tell.
func (s *session) conflictParams(ctx context.Context, table *tableInfo, plan *conflictPlan, params, client []uint32) ([]uint32, error) {
	if len(plan.updateParams) == 0 {
		return params, nil
	}
	schema := withRowNumberSchema(table.schema)
	rel1, err := s.conn.RegisterRecords(ctx, existingView, schema, nil)
	if err != nil {
		return nil, err
	}
	defer rel1()
	rel2, err := s.conn.RegisterRecords(ctx, excludedView, schema, nil)
	if err != nil {
		return nil, err
	}
	defer rel2()
	desc, err := s.conn.Describe(ctx, plan.update)
	if err != nil {
		return nil, withoutPosition(err)
	}
	for j, orig := range plan.updateParams {
		for len(params) < orig {
			params = append(params, 0)
		}
		if params[orig-1] != 0 {
			continue // typed by the rows' source or the client
		}
		params[orig-1] = 25
		if orig-1 < len(client) && client[orig-1] != 0 {
			params[orig-1] = client[orig-1]
		} else if t, ok := plan.paramCol[orig]; ok {
			params[orig-1] = t.OID()
		} else if j < len(desc.Params) && desc.Params[j].Valid() {
			params[orig-1] = desc.Params[j].OID()
		}
	}
	for i, p := range params {
		if p == 0 {
			params[i] = 25 // a parameter no part of the statement uses
		}
	}
	return params, nil
}

// withRowNumberSchema is schema plus rowColumn.
func withRowNumberSchema(schema *arrow.Schema) *arrow.Schema {
	fields := append(append([]arrow.Field{}, schema.Fields()...), arrow.Field{Name: rowColumn, Type: arrow.PrimitiveTypes.Int64})
	return arrow.NewSchema(fields, nil)
}

// isExcludedRef reports whether n is excluded.<col>.
func isExcludedRef(n *pg.Node, col string) bool {
	cr := n.GetColumnRef()
	if cr == nil || len(cr.Fields) != 2 {
		return false
	}
	return cr.Fields[0].GetString_().GetSval() == "excluded" && cr.Fields[1].GetString_().GetSval() == col
}

// qualifyColumns checks that n names columns of the row and excluded
// with their relation, as PostgreSQL requires in ON CONFLICT DO UPDATE
// (an unqualified column of the table is ambiguous there: 42702).
func qualifyColumns(n *pg.Node, table *tableInfo) (*pg.Node, error) {
	var err error
	pg.Walk(n, func(m protoreflect.Message) {
		cr, ok := m.Interface().(*pg.ColumnRef)
		if !ok || len(cr.Fields) != 1 || cr.Fields[0].GetString_() == nil || err != nil {
			return
		}
		name := cr.Fields[0].GetString_().Sval
		if _, ok := table.colIdx[name]; ok {
			err = &pgwire.Error{Code: pgwire.CodeAmbiguousColumn, Message: fmt.Sprintf("column reference %q is ambiguous", name), Position: cr.Location + 1}
		}
	})
	return n, err
}

// insertPK writes an INSERT's rows into a primary-key table. It returns
// the rows inserted or updated (for RETURNING; release it) and their count.
func (s *session) insertPK(ctx context.Context, table *tableInfo, batches []arrow.RecordBatch, plan *conflictPlan, args []any) (arrow.RecordBatch, int64, error) {
	parts, err := s.routeParts(ctx, table, batches)
	if err != nil {
		return nil, 0, err
	}
	defer releaseParts(parts)
	var applied []arrow.RecordBatch
	defer func() { releaseAll(applied) }()
	var n int64
	bucketsOf := map[*bucketPart]kvBucket{}
	for i := range parts {
		b, err := s.kvBucket(ctx, parts[i].id, table)
		if err != nil {
			return nil, 0, err
		}
		bucketsOf[&parts[i]] = b
	}
	noDuplicates := func() error {
		for i := range parts {
			if err := checkNoDuplicates(table, bucketsOf[&parts[i]].Codec(), parts[i].rec, s.sessionLocation()); err != nil {
				return err
			}
		}
		return nil
	}
	chunked := false
	for _, p := range parts {
		if p.rec.NumRows() > pkWriteRows {
			chunked = true
		}
	}
	switch plan.action {
	case pg.OnConflictAction_ONCONFLICT_NONE:
		if len(parts) > 1 || chunked {
			if err := noDuplicates(); err != nil {
				return nil, 0, err
			}
			if err := s.checkAbsent(ctx, table, parts); err != nil {
				return nil, 0, err
			}
		}
	case pg.OnConflictAction_ONCONFLICT_UPDATE:
		if err := noDuplicates(); err != nil {
			var pe *pgwire.Error
			if errors.As(err, &pe) && pe.Code == pgwire.CodeUniqueViolation {
				return nil, 0, &pgwire.Error{Code: "21000", Message: "ON CONFLICT DO UPDATE command cannot affect row a second time",
					Hint: "Ensure that no rows proposed for insertion within the same command have duplicate constrained values."}
			}
			return nil, 0, err
		}
	}
	// Each bucket's writes, in order; the buckets' writes run at the same
	// time (their appends share the stream's commits) unless DO UPDATE
	// needs the session's engine connection, which is not shared.
	type result struct {
		n    int64
		rows []arrow.RecordBatch
		err  error
	}
	results := make([]result, len(parts))
	one := func(i int) {
		b := bucketsOf[&parts[i]]
		codec := b.Codec()
		r := &results[i]
		for start := int64(0); start < parts[i].rec.NumRows(); start += pkWriteRows {
			end := min(start+pkWriteRows, parts[i].rec.NumRows())
			chunk := parts[i].rec.NewSlice(start, end)
			records, err := s.insertChunk(ctx, table, b, chunk, plan, args)
			chunk.Release()
			if err != nil {
				r.err = err
				return
			}
			r.n += int64(countType(records, kvcodec.Insert) + countType(records, kvcodec.UpdateAfter))
			rows, err := changedRows(codec, records, kvcodec.Insert, kvcodec.UpdateAfter)
			if err != nil {
				r.err = err
				return
			}
			r.rows = append(r.rows, rows)
		}
	}
	if len(parts) > 1 && (plan.action != pg.OnConflictAction_ONCONFLICT_UPDATE || plan.replace) {
		var wg sync.WaitGroup
		for i := range parts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				one(i)
			}()
		}
		wg.Wait()
	} else {
		for i := range parts {
			if one(i); results[i].err != nil {
				break
			}
		}
	}
	var firstErr error
	for _, r := range results {
		applied = append(applied, r.rows...)
		n += r.n
		if r.err != nil && firstErr == nil {
			firstErr = r.err
		}
	}
	if firstErr != nil {
		return nil, 0, firstErr
	}
	out, err := concatBatches(table.schema, applied)
	return out, n, err
}

// pkWriteRows is the most rows one bucket write of a statement carries (one
// stream entry); a statement with more rows for a bucket writes it in parts.
const pkWriteRows = 32 << 10

// insertChunk writes rows of an INSERT (or COPY) to one bucket in one write.
func (s *session) insertChunk(ctx context.Context, table *tableInfo, b kvBucket, rec arrow.RecordBatch, plan *conflictPlan, args []any) ([]kvcodec.ChangeRecord, error) {
	var op kvcodec.WriteOp
	switch {
	case plan.action == pg.OnConflictAction_ONCONFLICT_NONE:
		op = kvcodec.OpInsert
	case plan.action == pg.OnConflictAction_ONCONFLICT_NOTHING:
		op = kvcodec.OpInsertIfAbsent
	case plan.replace:
		op = kvcodec.OpUpsert // DO UPDATE SET every column = excluded.column
	default:
		return s.upsertBucket(ctx, table, b, rec, plan, args)
	}
	writes, err := b.Codec().Writes(op, rec)
	if err != nil {
		return nil, err
	}
	return s.pkWrite(ctx, table, b, rec, writes)
}

// upsertBucket runs INSERT … ON CONFLICT DO UPDATE on one bucket: it reads
// the existing row of every proposed key, computes the new rows of those
// that exist with the engine, and writes inserts and updates conditionally
// on the rows read, retrying when another writer got in between.
func (s *session) upsertBucket(ctx context.Context, table *tableInfo, b kvBucket, rec arrow.RecordBatch, plan *conflictPlan, args []any) ([]kvcodec.ChangeRecord, error) {
	codec := b.Codec()
	proposed, err := codec.Writes(kvcodec.OpInsert, rec)
	if err != nil {
		return nil, err
	}
	retry := newConflictRetry()
	for {
		var existing [][]byte // rows of the keys that exist
		var conflicting []int // their row numbers in rec
		writes := make([]kvcodec.Write, len(proposed))
		skip := make([]bool, len(proposed))
		for i, w := range proposed {
			row, ok, err := b.Get(ctx, w.Key)
			if err != nil {
				return nil, err
			}
			if ok {
				existing = append(existing, row)
				conflicting = append(conflicting, i)
				skip[i] = true
				continue
			}
			writes[i] = kvcodec.Write{Op: kvcodec.OpInsert, Key: w.Key, Row: w.Row, CheckRow: true}
		}
		if len(conflicting) > 0 {
			updated, err := s.computeUpdates(ctx, table, codec, existing, proposed, conflicting, plan, args)
			if err != nil {
				return nil, err
			}
			for j, row := range updated {
				i := conflicting[j]
				if row == nil {
					continue // the WHERE of DO UPDATE said no
				}
				writes[i] = kvcodec.Write{Op: kvcodec.OpUpdate, Key: proposed[i].Key, Row: row, CheckRow: true, IfRow: existing[j]}
				skip[i] = false
			}
		}
		var list []kvcodec.Write
		var from []int
		for i, w := range writes {
			if !skip[i] {
				list = append(list, w)
				from = append(from, i)
			}
		}
		records, _, err := b.Write(ctx, list)
		var ce *kv.ConflictError
		var de *kv.DuplicateKeyError
		if errors.As(err, &ce) || errors.As(err, &de) {
			if err := retry.again(ctx); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		for k := range records {
			records[k].Write = from[records[k].Write]
		}
		return records, nil
	}
}

// computeUpdates evaluates DO UPDATE SET … WHERE … for the conflicting
// rows: existing[j] is the current row of proposed[conflicting[j]]. It
// returns the encoded new row of each, nil where the WHERE excludes it.
func (s *session) computeUpdates(ctx context.Context, table *tableInfo, codec *kvcodec.Codec, existing [][]byte, proposed []kvcodec.Write, conflicting []int, plan *conflictPlan, args []any) ([][]byte, error) {
	exRows := make([][]byte, len(conflicting))
	for j, i := range conflicting {
		exRows[j] = proposed[i].Row
	}
	cur, err := withRowNumbers(codec, existing)
	if err != nil {
		return nil, err
	}
	defer cur.Release()
	exc, err := withRowNumbers(codec, exRows)
	if err != nil {
		return nil, err
	}
	defer exc.Release()
	rel1, err := s.conn.RegisterRecords(ctx, existingView, cur.Schema(), []arrow.RecordBatch{cur})
	if err != nil {
		return nil, err
	}
	defer rel1()
	rel2, err := s.conn.RegisterRecords(ctx, excludedView, exc.Schema(), []arrow.RecordBatch{exc})
	if err != nil {
		return nil, err
	}
	defer rel2()
	qargs := make([]any, len(plan.updateParams))
	for j, orig := range plan.updateParams {
		if orig-1 < len(args) {
			qargs[j] = args[orig-1]
		}
	}
	rdr, err := s.conn.QueryArrow(ctx, plan.update, qargs...)
	if err != nil {
		return nil, withoutPosition(err)
	}
	defer rdr.Release()
	out := make([][]byte, len(conflicting))
	for rdr.Next() {
		rec := rdr.RecordBatch()
		idx := rec.Column(0)
		body := array.NewRecordBatch(arrow.NewSchema(rec.Schema().Fields()[1:], nil), rec.Columns()[1:], rec.NumRows())
		conformed, err := sqltypes.ConformTo(table.name, table.cols, table.schema, body, memory.DefaultAllocator)
		body.Release()
		if err != nil {
			return nil, err
		}
		if err := checkNotNull(table, conformed); err != nil {
			conformed.Release()
			return nil, err
		}
		for r := 0; r < int(conformed.NumRows()); r++ {
			j := int(idx.(*array.Int64).Value(r))
			row, err := codec.AppendRow(nil, conformed, r)
			if err != nil {
				conformed.Release()
				return nil, err
			}
			out[j] = row
		}
		conformed.Release()
	}
	if err := rdr.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// withRowNumbers decodes rows into a batch of the table's columns plus
// rowColumn, the row's index.
func withRowNumbers(codec *kvcodec.Codec, rows [][]byte) (arrow.RecordBatch, error) {
	rec, err := codec.DecodeRows(memory.DefaultAllocator, rows)
	if err != nil {
		return nil, err
	}
	defer rec.Release()
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	for i := range rows {
		b.Append(int64(i))
	}
	idx := b.NewArray()
	defer idx.Release()
	fields := append(append([]arrow.Field{}, rec.Schema().Fields()...), arrow.Field{Name: rowColumn, Type: arrow.PrimitiveTypes.Int64})
	cols := append(append([]arrow.Array{}, rec.Columns()...), idx)
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, int64(len(rows))), nil
}

// concatBatches merges batches into one (an empty batch when none).
func concatBatches(schema *arrow.Schema, batches []arrow.RecordBatch) (arrow.RecordBatch, error) {
	var nonEmpty []arrow.RecordBatch
	for _, b := range batches {
		if b.NumRows() > 0 {
			nonEmpty = append(nonEmpty, b)
		}
	}
	if len(nonEmpty) == 0 {
		cols := make([]arrow.Array, schema.NumFields())
		for i, f := range schema.Fields() {
			bld := array.NewBuilder(memory.DefaultAllocator, f.Type)
			cols[i] = bld.NewArray()
			bld.Release()
		}
		rec := array.NewRecordBatch(schema, cols, 0)
		for _, c := range cols {
			c.Release()
		}
		return rec, nil
	}
	merged, err := coalesce(schema, nonEmpty, 1<<62)
	if err != nil {
		return nil, err
	}
	return merged[0], nil
}

// maxParamRef is the highest parameter number ($n) used in the messages;
// the rows of an INSERT are evaluated with that many arguments, the rest
// being ON CONFLICT's.
func maxParamRef(msgs ...proto.Message) int {
	n := 0
	for _, m := range msgs {
		if m == nil || !m.ProtoReflect().IsValid() {
			continue
		}
		pg.Walk(m, func(m protoreflect.Message) {
			if pr, ok := m.Interface().(*pg.ParamRef); ok {
				n = max(n, int(pr.Number))
			}
		})
	}
	return n
}
