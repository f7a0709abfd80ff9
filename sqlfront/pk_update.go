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

	pg "github.com/minkdb/mink/sqlfront/pgtree"
	"github.com/minkdb/mink/sqlfront/translate"

	"github.com/minkdb/mink/buckets/routing"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/sqltypes"
	"github.com/minkdb/mink/kv"
	"github.com/minkdb/mink/kv/kvcodec"
	"github.com/minkdb/mink/sqlfront/pgwire"
)

// changeStmt is an UPDATE or DELETE of a primary-key table, planned: the
// engine query that finds the rows (and, for UPDATE, computes their new
// values) against the current state, and how to turn its rows into writes.
type changeStmt struct {
	table *tableInfo
	// query returns the old row's columns (o0…), then for UPDATE the new
	// value of each assigned column (in set order).
	query string
	set   []int // UPDATE: the assigned columns
	del   bool
	// key is set when the WHERE fixes the whole primary key by equality
	// and the statement reads the table nowhere else: the query then reads
	// that key's row instead of the table (keyScan).
	key *lookupPlan
}

// planUpdate plans UPDATE of a primary-key table; log tables are
// append-only (0A000).
func (s *session) planUpdate(ctx context.Context, u *pg.UpdateStmt, paramOIDs []uint32) (*stmt, error) {
	table, err := s.lookupWritten(u.Relation)
	if err != nil {
		return nil, err
	}
	if !table.isPK() {
		return nil, s.appendOnly(u.Relation, "UPDATE")
	}
	alias := table.name
	if u.Relation.Alias != nil {
		alias = u.Relation.Alias.Aliasname
	}
	cs := &changeStmt{table: table}
	targets := oldColumns(table, alias)
	paramCol := map[int32]int{} // $n standing alone for a column
	for _, t := range u.TargetList {
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
		if containsInt(cs.set, i) {
			return nil, errorf(pgwire.CodeSyntaxError, "multiple assignments to same column %q", rt.Name)
		}
		if containsInt(table.pkCols(), i) {
			return nil, unsupported("UPDATE of primary-key column %q is not supported by mink; DELETE the row and INSERT it with the new key", rt.Name)
		}
		val := rt.Val
		if val.GetSetToDefault() != nil {
			def := table.spec.Columns[i].Default
			if def == "" {
				def = "NULL"
			}
			if val, err = pg.ParseExpr(def); err != nil {
				return nil, err
			}
		}
		if pr := val.GetParamRef(); pr != nil {
			paramCol[pr.Number] = i
		}
		cs.set = append(cs.set, i)
		targets = append(targets, pg.Target(fmt.Sprintf("n%d", len(cs.set)-1), val))
	}
	inner := &pg.SelectStmt{TargetList: targets, FromClause: append([]*pg.Node{targetRelation(table, u.Relation)}, u.FromClause...),
		WhereClause: u.WhereClause, WithClause: u.WithClause}
	translate.Select(s.env(), inner)
	text, err := deparseSelect(inner)
	if err != nil {
		return nil, err
	}
	var outer []string
	for i := range table.cols {
		outer = append(outer, fmt.Sprintf("__q.o%d", i))
	}
	for j, i := range cs.set {
		outer = append(outer, fmt.Sprintf("CAST(__q.n%d AS %s)", j, table.cols[i].Type.DuckDBType()))
	}
	cs.query = "SELECT " + strings.Join(outer, ", ") + " FROM (" + text + ") AS __q"
	if len(u.FromClause) == 0 && u.WithClause == nil {
		cs.key = s.planKeyScan(ctx, table, alias, u.WhereClause, paramOIDs, &pg.Node{Node: &pg.Node_UpdateStmt{UpdateStmt: u}})
	}
	return s.planChange(ctx, cs, alias, u.ReturningList, paramOIDs, paramCol, "UPDATE")
}

// planDelete plans DELETE of a primary-key table.
func (s *session) planDelete(ctx context.Context, d *pg.DeleteStmt, paramOIDs []uint32) (*stmt, error) {
	table, err := s.lookupWritten(d.Relation)
	if err != nil {
		return nil, err
	}
	if !table.isPK() {
		return nil, s.appendOnly(d.Relation, "DELETE")
	}
	alias := table.name
	if d.Relation.Alias != nil {
		alias = d.Relation.Alias.Aliasname
	}
	inner := &pg.SelectStmt{TargetList: oldColumns(table, alias), FromClause: append([]*pg.Node{targetRelation(table, d.Relation)}, d.UsingClause...),
		WhereClause: d.WhereClause, WithClause: d.WithClause}
	translate.Select(s.env(), inner)
	text, err := deparseSelect(inner)
	if err != nil {
		return nil, err
	}
	cs := &changeStmt{table: table, query: text, del: true}
	if len(d.UsingClause) == 0 && d.WithClause == nil {
		cs.key = s.planKeyScan(ctx, table, alias, d.WhereClause, paramOIDs, &pg.Node{Node: &pg.Node_DeleteStmt{DeleteStmt: d}})
	}
	return s.planChange(ctx, cs, alias, d.ReturningList, paramOIDs, nil, "DELETE")
}

// planKeyScan returns the key plan of an UPDATE or DELETE whose WHERE fixes
// every primary-key column by equality, when stmt names the table only as
// its target (a subquery over the table must read all of it); nil
// otherwise.
func (s *session) planKeyScan(ctx context.Context, table *tableInfo, alias string, where *pg.Node, paramOIDs []uint32, stmt *pg.Node) *lookupPlan {
	if where == nil {
		return nil
	}
	uses := 0
	for _, rv := range pg.RangeVars(stmt) {
		if rv.Relname == table.name {
			uses++
		}
	}
	if uses != 1 {
		return nil
	}
	p := &lookupPlan{table: table, partPos: -1}
	if _, _, ok := s.matchKeyWhere(ctx, p, where, alias, paramOIDs); !ok {
		return nil
	}
	return p
}

func oldColumns(table *tableInfo, alias string) []*pg.Node {
	var out []*pg.Node
	for i, c := range table.cols {
		ref := &pg.Node{Node: &pg.Node_ColumnRef{ColumnRef: &pg.ColumnRef{Fields: []*pg.Node{pg.MakeStrNode(alias), pg.MakeStrNode(c.Name)}}}}
		out = append(out, pg.Target(fmt.Sprintf("o%d", i), ref))
	}
	return out
}

// targetRelation is the statement's table as a FROM item, without the
// schema (mink's tables are views of the engine session).
func targetRelation(table *tableInfo, rv *pg.RangeVar) *pg.Node {
	out := &pg.RangeVar{Relname: table.name, Inh: true, Relpersistence: "p", Alias: rv.Alias, Location: -1}
	return &pg.Node{Node: &pg.Node_RangeVar{RangeVar: out}}
}

// planChange finishes planning an UPDATE or DELETE: parameter types,
// RETURNING, and the statement's run.
func (s *session) planChange(ctx context.Context, cs *changeStmt, alias string, returningList []*pg.Node, paramOIDs []uint32, paramCol map[int32]int, verb string) (*stmt, error) {
	table := cs.table
	if err := s.tables.sync(ctx); err != nil {
		return nil, err
	}
	desc, err := s.conn.Describe(ctx, cs.query)
	if err != nil {
		return nil, withoutPosition(err)
	}
	params := resolveParams(paramOIDs, desc.Params)
	for n, i := range paramCol {
		k := int(n) - 1
		for len(params) <= k {
			params = append(params, 25)
		}
		if k >= len(paramOIDs) || paramOIDs[k] == 0 {
			params[k] = table.cols[i].Type.OID()
		}
	}
	st := &stmt{params: params}
	returning, cols, err := s.planReturning(ctx, table, alias, returningList)
	if err != nil {
		return nil, err
	}
	st.columns = cols
	st.run = func(ctx context.Context, args []any) (pgwire.Result, error) {
		if err := s.checkTx(); err != nil {
			return pgwire.Result{}, err
		}
		if err := s.tables.sync(ctx); err != nil {
			return pgwire.Result{}, err
		}
		changed, err := s.runChange(ctx, cs, args)
		if err != nil {
			return pgwire.Result{}, err
		}
		defer changed.Release()
		tag := fmt.Sprintf("%s %d", verb, changed.NumRows())
		if returning == "" {
			return pgwire.Result{Tag: tag}, nil
		}
		return s.runReturning(ctx, table, returning, changed, st.columns, tag)
	}
	return st, nil
}

// planReturning plans a RETURNING list over the rows a statement wrote,
// which the run registers as insertedView under alias.
func (s *session) planReturning(ctx context.Context, table *tableInfo, alias string, list []*pg.Node) (string, []pgwire.Column, error) {
	if len(list) == 0 {
		return "", nil, nil
	}
	if hasParamRef(list) {
		return "", nil, unsupported("parameters in RETURNING are not supported")
	}
	q, err := deparseSelect(&pg.SelectStmt{
		TargetList: list,
		FromClause: []*pg.Node{{Node: &pg.Node_RangeVar{RangeVar: &pg.RangeVar{Relname: insertedView, Inh: true, Relpersistence: "p",
			Alias: &pg.Alias{Aliasname: alias}}}}},
	})
	if err != nil {
		return "", nil, err
	}
	release, err := s.conn.RegisterRecords(ctx, insertedView, table.schema, nil)
	if err != nil {
		return "", nil, err
	}
	desc, err := s.conn.Describe(ctx, q)
	release()
	if err != nil {
		return "", nil, withoutPosition(err)
	}
	cols := wireColumns(desc.Columns)
	translate.ColumnNames(&pg.Node{Node: &pg.Node_SelectStmt{SelectStmt: &pg.SelectStmt{TargetList: list}}}, cols)
	return q, cols, nil
}

// runReturning answers RETURNING from the rows written.
func (s *session) runReturning(ctx context.Context, table *tableInfo, returning string, rows arrow.RecordBatch, cols []pgwire.Column, tag string) (pgwire.Result, error) {
	release, err := s.conn.RegisterRecords(ctx, insertedView, table.schema, []arrow.RecordBatch{rows})
	if err != nil {
		return pgwire.Result{}, err
	}
	r, err := s.conn.Query(ctx, returning)
	if err != nil {
		release()
		return pgwire.Result{}, err
	}
	verb, _, _ := strings.Cut(tag, " ")
	if verb == "INSERT" {
		verb = "INSERT 0"
	}
	return pgwire.Result{Tag: verb, Rows: &engineRows{rows: r, columns: cols, release: release}}, nil
}

// runChange runs an UPDATE or DELETE: it evaluates the query against the
// current state, then writes each bucket's rows conditionally on the rows
// read; a bucket whose rows changed meanwhile is evaluated again. It
// returns the rows updated (new) or deleted (old).
//
// Inside a transaction block nothing is written: the writes are added to
// deferred, for COMMIT.
func (s *session) runChange(ctx context.Context, cs *changeStmt, args []any) (arrow.RecordBatch, error) {
	table := cs.table
	done := map[catalog.BucketID]bool{}
	var out []arrow.RecordBatch
	defer func() { releaseAll(out) }()
	retry := newConflictRetry()
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if err := retry.again(ctx); err != nil {
				return nil, err
			}
		}
		oldRec, newRec, err := s.evaluateChange(ctx, cs, args)
		if err != nil {
			return nil, err
		}
		groups, order, err := s.groupByBucket(ctx, table, newRec)
		if err != nil {
			oldRec.Release()
			newRec.Release()
			return nil, err
		}
		var jobs []*writeJob
		for _, id := range order {
			if done[id] {
				continue
			}
			b, err := s.kvBucket(ctx, id, table)
			if err != nil {
				oldRec.Release()
				newRec.Release()
				return nil, err
			}
			codec := b.Codec()
			seen := map[string]bool{}
			var writes []kvcodec.Write
			for _, r := range groups[id] {
				key, err := codec.AppendKey(nil, newRec, r)
				if err != nil {
					oldRec.Release()
					newRec.Release()
					return nil, err
				}
				if seen[string(key)] {
					continue // a join matched the row twice: changed once
				}
				seen[string(key)] = true
				old, err := codec.AppendRow(nil, oldRec, r)
				if err != nil {
					oldRec.Release()
					newRec.Release()
					return nil, err
				}
				w := kvcodec.Write{Op: kvcodec.OpDelete, Key: key, CheckRow: true, IfRow: old}
				if !cs.del {
					row, err := codec.AppendRow(nil, newRec, r)
					if err != nil {
						oldRec.Release()
						newRec.Release()
						return nil, err
					}
					w.Op, w.Row = kvcodec.OpUpdate, row
				}
				writes = append(writes, w)
			}
			jobs = append(jobs, &writeJob{id: id, b: b, writes: writes})
		}
		oldRec.Release()
		newRec.Release()
		// The buckets' writes run at the same time: each waits for its
		// append to be acknowledged, and appends share the stream's commits.
		var wg sync.WaitGroup
		for _, j := range jobs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				j.records, _, j.err = j.b.Write(ctx, j.writes)
			}()
		}
		wg.Wait()
		conflict := false
		var firstErr error
		for _, j := range jobs {
			var ce *kv.ConflictError
			if errors.As(j.err, &ce) {
				conflict = true
				continue
			}
			if j.err != nil {
				if firstErr == nil {
					firstErr = j.err
				}
				continue
			}
			done[j.id] = true
			typ := kvcodec.UpdateAfter
			if cs.del {
				typ = kvcodec.Delete
			}
			rows, err := changedRows(j.b.Codec(), j.records, typ)
			if err != nil && firstErr == nil {
				firstErr = err
			}
			if err == nil {
				out = append(out, rows)
			}
		}
		if firstErr != nil {
			return nil, firstErr
		}
		if !conflict {
			break
		}
	}
	return concatBatches(table.schema, out)
}

// writeJob is one bucket's conditional writes of an UPDATE or DELETE.
type writeJob struct {
	id      catalog.BucketID
	b       kvBucket
	writes  []kvcodec.Write
	records []kvcodec.ChangeRecord
	err     error
}

// evaluateChange runs the statement's query and returns the old rows and
// the new rows (the old ones for DELETE), with the table's schema.
func (s *session) evaluateChange(ctx context.Context, cs *changeStmt, args []any) (arrow.RecordBatch, arrow.RecordBatch, error) {
	table := cs.table
	if cs.key != nil {
		b, key, ok, err := s.lookupTarget(ctx, cs.key, args)
		if err != nil {
			return nil, nil, err
		}
		scan := &keyScan{}
		if ok {
			scan.b, scan.key = b, append([]byte(nil), key...)
		}
		if s.tables.keys == nil {
			s.tables.keys = map[catalog.TableID]*keyScan{}
		}
		s.tables.keys[table.id] = scan
		defer delete(s.tables.keys, table.id)
	}
	rdr, err := s.conn.QueryArrow(ctx, cs.query, args...)
	if err != nil {
		return nil, nil, withoutPosition(err)
	}
	defer rdr.Release()
	var olds, news []arrow.RecordBatch
	defer func() { releaseAll(olds); releaseAll(news) }()
	n := len(table.cols)
	for rdr.Next() {
		rec := rdr.RecordBatch()
		oldCols := rec.Columns()[:n]
		tmp := array.NewRecordBatch(arrow.NewSchema(rec.Schema().Fields()[:n], nil), oldCols, rec.NumRows())
		old, err := sqltypes.ConformTo(table.name, table.cols, table.schema, tmp, memory.DefaultAllocator)
		tmp.Release()
		if err != nil {
			return nil, nil, err
		}
		olds = append(olds, old)
		newCols := append([]arrow.Array{}, old.Columns()...)
		fields := append([]arrow.Field{}, old.Schema().Fields()...)
		for j, i := range cs.set {
			newCols[i] = rec.Column(n + j)
			fields[i] = rec.Schema().Field(n + j)
		}
		tmp = array.NewRecordBatch(arrow.NewSchema(fields, nil), newCols, rec.NumRows())
		nw, err := sqltypes.ConformTo(table.name, table.cols, table.schema, tmp, memory.DefaultAllocator)
		tmp.Release()
		if err != nil {
			return nil, nil, err
		}
		news = append(news, nw)
		if err := checkNotNull(table, nw); err != nil {
			return nil, nil, err
		}
	}
	if err := rdr.Err(); err != nil {
		return nil, nil, err
	}
	oldRec, err := concatBatches(table.schema, olds)
	if err != nil {
		return nil, nil, err
	}
	newRec, err := concatBatches(table.schema, news)
	if err != nil {
		oldRec.Release()
		return nil, nil, err
	}
	return oldRec, newRec, nil
}

// groupByBucket returns the row numbers of rec by bucket, and the buckets
// in order of first appearance.
func (s *session) groupByBucket(ctx context.Context, table *tableInfo, rec arrow.RecordBatch) (map[catalog.BucketID][]int, []catalog.BucketID, error) {
	groups := map[catalog.BucketID][]int{}
	var order []catalog.BucketID
	n := int(rec.NumRows())
	if n == 0 {
		return groups, nil, nil
	}
	idsOf := map[string][]catalog.BucketID{}
	bucketsFor := map[int][]int{} // bucket count → bucket of every row
	for r := 0; r < n; r++ {
		value := ""
		if table.partCol >= 0 {
			v, err := routing.PartitionValue(rec.Column(table.partCol), r)
			if err != nil {
				return nil, nil, err
			}
			value = v
		}
		ids, ok := idsOf[value]
		if !ok {
			var err error
			if table.partCol >= 0 {
				ids, err = s.f.ensurePartition(ctx, table, value)
			} else {
				s.f.cfg.Meta.Read(func(v *catalog.View) {
					if t, ok := v.Tables[table.id]; ok {
						ids = t.Buckets
					}
				})
				if len(ids) == 0 {
					err = undefinedTable(table.name)
				}
			}
			if err != nil {
				return nil, nil, err
			}
			idsOf[value] = ids
		}
		bs, ok := bucketsFor[len(ids)]
		if !ok {
			var err error
			bs, err = routing.Buckets(rec, table.keyCols, len(ids))
			if err != nil {
				return nil, nil, err
			}
			bucketsFor[len(ids)] = bs
		}
		id := ids[bs[r]]
		if _, ok := groups[id]; !ok {
			order = append(order, id)
		}
		groups[id] = append(groups[id], r)
	}
	return groups, order, nil
}
