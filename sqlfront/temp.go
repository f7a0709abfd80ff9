package sqlfront

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/array"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/minkdb/mink/internal/sqltypes"
	pg "github.com/minkdb/mink/sqlfront/pgtree"
	"github.com/minkdb/mink/sqlfront/pgwire"
	"github.com/minkdb/mink/sqlfront/temptable"
	"github.com/minkdb/mink/sqlfront/translate"
)

// Temporary tables (CREATE TEMP TABLE) are tables of the session's own
// engine connection (package temptable): never in the metadata log, seen
// by no other session, gone when the session ends. Statements that write
// one run in the engine as the client sent them (translated like a
// query); queries read them with the session's other tables. A
// temporary table's name hides a table of the same name from the
// session, as pg_temp comes first in PostgreSQL's search_path.

// tempRel returns the temporary table rv names: an unqualified name or
// one in pg_temp.
func (s *session) tempRel(rv *pg.RangeVar) (*temptable.Table, bool) {
	if rv == nil || s.temps == nil || s.temps.Len() == 0 || rv.Catalogname != "" || (rv.Schemaname != "" && rv.Schemaname != "pg_temp") {
		return nil, false
	}
	return s.temps.Lookup(rv.Relname)
}

// planTempStatement plans a statement that writes, drops or alters a
// temporary table; ok is false for any other statement.
func (s *session) planTempStatement(ctx context.Context, sql string, node *pg.Node, paramOIDs []uint32) (st *stmt, ok bool, err error) {
	if stripped := s.unqualifyTemp(node); stripped != nil {
		// pg_temp.t: the engine knows the table as t.
		text, err := translate.Deparse(stripped)
		if err != nil {
			return nil, true, err
		}
		st, err := s.planStatement(ctx, text, stripped, paramOIDs)
		return st, true, err
	}
	var rel *pg.RangeVar
	var tag string
	var returning bool
	switch n := node.Node.(type) {
	case *pg.Node_InsertStmt:
		rel, tag, returning = n.InsertStmt.Relation, "INSERT 0", len(n.InsertStmt.ReturningList) > 0
	case *pg.Node_UpdateStmt:
		rel, tag, returning = n.UpdateStmt.Relation, "UPDATE", len(n.UpdateStmt.ReturningList) > 0
	case *pg.Node_DeleteStmt:
		rel, tag, returning = n.DeleteStmt.Relation, "DELETE", len(n.DeleteStmt.ReturningList) > 0
	case *pg.Node_TruncateStmt:
		return s.planTempTruncate(n.TruncateStmt)
	case *pg.Node_DropStmt:
		return s.planTempDrop(n.DropStmt)
	case *pg.Node_CopyStmt:
		if t, ok := s.tempRel(n.CopyStmt.Relation); ok {
			if n.CopyStmt.IsFrom {
				st, err := s.planTempCopyFrom(n.CopyStmt, t)
				return st, true, err
			}
			cols := "*"
			if len(n.CopyStmt.Attlist) > 0 {
				var names []string
				for _, a := range n.CopyStmt.Attlist {
					names = append(names, quoteIdent(a.GetString_().GetSval()))
				}
				cols = strings.Join(names, ", ")
			}
			opts, err := copyOptions(n.CopyStmt)
			if err != nil {
				return nil, true, err
			}
			st, err := s.planCopyOut(ctx, "SELECT "+cols+" FROM "+quoteIdent(t.Name), opts)
			return st, true, err
		}
		return nil, false, nil
	case *pg.Node_AlterTableStmt:
		if _, ok := s.tempRel(n.AlterTableStmt.Relation); ok {
			return nil, true, unsupported("ALTER TABLE of a temporary table is not supported by mink")
		}
		return nil, false, nil
	case *pg.Node_RenameStmt:
		if _, ok := s.tempRel(n.RenameStmt.Relation); ok {
			return nil, true, unsupported("ALTER TABLE … RENAME of a temporary table is not supported by mink")
		}
		return nil, false, nil
	default:
		return nil, false, nil
	}
	t, ok := s.tempRel(rel)
	if !ok {
		return nil, false, nil
	}
	if returning {
		return nil, true, unsupported("RETURNING of a write to a temporary table is not supported by mink")
	}
	if node.GetInsertStmt() != nil {
		node = withInsertColumns(node, t)
	}
	text, err := s.engineText(node)
	if err != nil {
		return nil, true, err
	}
	desc, err := s.conn.Describe(ctx, text)
	if err != nil {
		return nil, true, err
	}
	st = &stmt{params: resolveParams(paramOIDs, desc.Params)}
	st.run = func(ctx context.Context, args []any) (pgwire.Result, error) {
		if err := s.checkTx(); err != nil {
			return pgwire.Result{}, err
		}
		if err := s.tables.sync(ctx); err != nil {
			return pgwire.Result{}, err
		}
		if err := s.temps.BeforeWrite(ctx, t.Name); err != nil {
			return pgwire.Result{}, err
		}
		n, err := s.engineCount(ctx, text, args...)
		if err != nil {
			return pgwire.Result{}, err
		}
		if err := s.endTempStatement(ctx); err != nil {
			return pgwire.Result{}, err
		}
		return pgwire.Result{Tag: tag + " " + strconv.FormatInt(n, 10)}, nil
	}
	return st, true, nil
}

// unqualifyTemp returns a copy of node without the pg_temp qualifier of
// the temporary tables it names, or nil when it names none so.
func (s *session) unqualifyTemp(node *pg.Node) *pg.Node {
	if s.temps.Len() == 0 {
		return nil
	}
	qualified := func(rv *pg.RangeVar) bool {
		_, ok := s.tempRel(rv)
		return ok && rv.Schemaname == "pg_temp"
	}
	found := false
	pg.Walk(node, func(m protoreflect.Message) {
		if rv, ok := m.Interface().(*pg.RangeVar); ok && qualified(rv) {
			found = true
		}
	})
	if !found {
		return nil
	}
	tree := proto.Clone(node).(*pg.Node)
	pg.Walk(tree, func(m protoreflect.Message) {
		if rv, ok := m.Interface().(*pg.RangeVar); ok && qualified(rv) {
			rv.Schemaname = ""
		}
	})
	return tree
}

// withInsertColumns returns an INSERT into t without a column list whose
// VALUES rows are shorter than t's columns as one that names the leading
// columns (PostgreSQL gives the others their defaults; the engine wants
// a value for every column).
func withInsertColumns(node *pg.Node, t *temptable.Table) *pg.Node {
	ins := node.GetInsertStmt()
	rows := ins.GetSelectStmt().GetSelectStmt().GetValuesLists()
	if len(ins.Cols) > 0 || len(rows) == 0 {
		return node
	}
	n := len(rows[0].GetList().GetItems())
	if n >= len(t.Columns) {
		return node
	}
	out := proto.Clone(node).(*pg.Node)
	for _, c := range t.Columns[:n] {
		out.GetInsertStmt().Cols = append(out.GetInsertStmt().Cols, &pg.Node{Node: &pg.Node_ResTarget{ResTarget: &pg.ResTarget{Name: c.Name, Location: -1}}})
	}
	return out
}

// engineText is a statement as the engine runs it: translated as a query
// is, with pg_temp and public unqualified.
func (s *session) engineText(node *pg.Node) (string, error) {
	tree := proto.Clone(node).(*pg.Node)
	translate.Tree(s.env(), tree, false)
	pg.Walk(tree, func(m protoreflect.Message) {
		if rv, ok := m.Interface().(*pg.RangeVar); ok && rv.Schemaname == "pg_temp" {
			rv.Schemaname = ""
		}
	})
	translate.UnqualifyPublic(tree)
	return translate.Deparse(tree)
}

// engineCount runs a write in the engine and returns the rows it wrote
// (the engine's one-row Count result).
func (s *session) engineCount(ctx context.Context, text string, args ...any) (int64, error) {
	rdr, err := s.conn.QueryArrow(ctx, text, args...)
	if err != nil {
		return 0, err
	}
	defer rdr.Release()
	var n int64
	for rdr.Next() {
		rec := rdr.RecordBatch()
		if rec.NumCols() == 1 && rec.NumRows() == 1 {
			if c, ok := rec.Column(0).(*array.Int64); ok {
				n = c.Value(0)
			}
		}
	}
	return n, rdr.Err()
}

// endTempStatement ends the implicit transaction of a statement outside a
// block: ON COMMIT DELETE ROWS and ON COMMIT DROP take effect.
func (s *session) endTempStatement(ctx context.Context) error {
	if s.tx.status != pgwire.TxIdle {
		return nil
	}
	return s.temps.Commit(ctx)
}

// endTempTx ends the block's part in the temporary tables: COMMIT keeps
// what it did, ROLLBACK undoes it. A failure is logged: the block's other
// writes are committed (or rolled back) regardless.
func (s *session) endTempTx(ctx context.Context, commit bool) {
	end := s.temps.Rollback
	if commit {
		end = s.temps.Commit
	}
	if err := end(ctx); err != nil {
		s.f.cfg.Logger.Warn("temporary tables: end of a transaction block", "commit", commit, "err", err)
	}
}

// planCreateTemp plans CREATE TEMP TABLE t (columns …) [ON COMMIT …].
func (s *session) planCreateTemp(ctx context.Context, cs *pg.CreateStmt) (*stmt, error) {
	name := cs.Relation.Relname
	if cs.Relation.Schemaname != "" && cs.Relation.Schemaname != "pg_temp" {
		return nil, errorf(codeInvalidTableDefinition, "cannot create temporary relation in non-temporary schema")
	}
	if len(cs.InhRelations) > 0 || cs.Partbound != nil || cs.Partspec != nil {
		return nil, unsupported("partitioned temporary tables are not supported by mink")
	}
	if len(cs.Options) > 0 {
		return nil, unsupported("WITH (…) options of a temporary table are not supported by mink")
	}
	onCommit, err := tempOnCommit(cs.Oncommit)
	if err != nil {
		return nil, err
	}
	t := &temptable.Table{Name: name, OnCommit: onCommit}
	var defaults, pk []string
	for _, elt := range cs.TableElts {
		switch e := elt.Node.(type) {
		case *pg.Node_ColumnDef:
			col, def, isPK, decls, err := columnOf(e.ColumnDef, name)
			if err != nil {
				return nil, err
			}
			if len(decls) > 0 {
				return nil, unsupported("%s constraints of temporary tables are not supported by mink", constraintName(decls[0].con.Contype))
			}
			if col.Sequence != "" {
				return nil, unsupported("serial and identity columns of temporary tables are not supported by mink")
			}
			typ, err := sqltypes.Parse(col.Type)
			if err != nil {
				return nil, err
			}
			if def != "" {
				if def, err = s.engineExpr(def); err != nil {
					return nil, wrapf(toWire(err), "default of column %q", col.Name)
				}
			}
			if isPK {
				pk = append(pk, col.Name)
			}
			t.Columns = append(t.Columns, sqltypes.Column{Name: col.Name, Type: typ, NotNull: col.NotNull || isPK})
			defaults = append(defaults, def)
		case *pg.Node_Constraint:
			if e.Constraint.Contype != pg.ConstrType_CONSTR_PRIMARY {
				return nil, unsupported("%s constraints are not supported", constraintName(e.Constraint.Contype))
			}
			for _, k := range e.Constraint.Keys {
				pk = append(pk, k.GetString_().GetSval())
			}
		default:
			return nil, unsupported("this element of CREATE TEMP TABLE is not supported by mink")
		}
	}
	for _, k := range pk {
		i := t.ColumnIndex(k)
		if i < 0 {
			return nil, errorf(pgwire.CodeUndefinedColumn, "column %q named in key does not exist", k)
		}
		t.Columns[i].NotNull = true
	}
	return s.tagWithNotices("CREATE TABLE", func(ctx context.Context) ([]*pgwire.Error, error) {
		if notice, err := s.checkTempName(name, cs.IfNotExists); err != nil {
			return nil, err
		} else if notice != nil {
			return []*pgwire.Error{notice}, nil
		}
		if err := s.temps.Create(ctx, t, defaults, pk); err != nil {
			return nil, err
		}
		return nil, s.endTempStatement(ctx)
	}), nil
}

// planCreateTempAs plans CREATE TEMP TABLE t [(names)] AS query [WITH [NO]
// DATA] (and SELECT … INTO TEMP t): a table of the query's column types,
// filled by the engine from the query.
func (s *session) planCreateTempAs(ctx context.Context, into *pg.IntoClause, query *pg.Node, ifNotExists bool) (*stmt, error) {
	name := into.Rel.Relname
	if into.Rel.Schemaname != "" && into.Rel.Schemaname != "pg_temp" {
		return nil, errorf(codeInvalidTableDefinition, "cannot create temporary relation in non-temporary schema")
	}
	onCommit, err := tempOnCommit(into.OnCommit)
	if err != nil {
		return nil, err
	}
	cols, err := s.intoColumns(ctx, into, query)
	if err != nil {
		return nil, err
	}
	t := &temptable.Table{Name: name, OnCommit: onCommit, Columns: cols}
	text, err := s.engineText(query)
	if err != nil {
		return nil, err
	}
	return &stmt{run: func(ctx context.Context, _ []any) (pgwire.Result, error) {
		if err := s.checkTx(); err != nil {
			return pgwire.Result{}, err
		}
		if notice, err := s.checkTempName(name, ifNotExists); notice != nil || err != nil {
			res := pgwire.Result{Tag: "CREATE TABLE AS"}
			if notice != nil {
				res.Notices = []*pgwire.Error{notice}
			}
			return res, err
		}
		if err := s.tables.sync(ctx); err != nil {
			return pgwire.Result{}, err
		}
		if err := s.temps.Create(ctx, t, nil, nil); err != nil {
			return pgwire.Result{}, err
		}
		if into.SkipData {
			return pgwire.Result{Tag: "CREATE TABLE AS"}, s.endTempStatement(ctx)
		}
		n, err := s.engineCount(ctx, "INSERT INTO "+quoteIdent(name)+" "+text)
		if err != nil {
			if s.tx.status == pgwire.TxIdle {
				_ = s.temps.Drop(ctx, name) // the table goes with its failed rows
			}
			return pgwire.Result{}, err
		}
		if err := s.endTempStatement(ctx); err != nil {
			return pgwire.Result{}, err
		}
		return pgwire.Result{Tag: "SELECT " + strconv.FormatInt(n, 10)}, nil
	}}, nil
}

// checkTempName refuses a temporary table's name that a temporary table
// has (or returns IF NOT EXISTS's notice), or that a table or view of the
// database has: mink keeps one namespace per session's engine connection,
// so a temporary table cannot hide a table that exists when it is made.
func (s *session) checkTempName(name string, ifNotExists bool) (*pgwire.Error, error) {
	exists := false
	if _, ok := s.temps.Lookup(name); ok {
		exists = true
	} else if _, err := s.f.lookupTableByName(name); err == nil {
		return nil, &pgwire.Error{Code: pgwire.CodeDuplicateTable, Message: fmt.Sprintf("relation %q already exists", name),
			Hint: "mink does not let a temporary table hide a table of the same name: choose another name."}
	} else if s.isView(&pg.RangeVar{Relname: name}) {
		return nil, &pgwire.Error{Code: pgwire.CodeDuplicateTable, Message: fmt.Sprintf("relation %q already exists", name),
			Hint: "mink does not let a temporary table hide a view of the same name: choose another name."}
	}
	switch {
	case exists && ifNotExists:
		return notice(pgwire.CodeDuplicateTable, "relation %q already exists, skipping", name), nil
	case exists:
		return nil, errorf(pgwire.CodeDuplicateTable, "relation %q already exists", name)
	}
	return nil, nil
}

// engineExpr translates a DEFAULT expression to the engine's SQL.
func (s *session) engineExpr(expr string) (string, error) {
	tree, err := pg.Parse("SELECT " + expr)
	if err != nil {
		return "", err
	}
	text, err := s.engineText(tree.Stmts[0].Stmt)
	if err != nil {
		return "", err
	}
	out, ok := strings.CutPrefix(text, "SELECT ")
	if !ok {
		return "", fmt.Errorf("default %s: deparsed as %s", expr, text)
	}
	return out, nil
}

func tempOnCommit(oc pg.OnCommitAction) (temptable.OnCommit, error) {
	switch oc {
	case pg.OnCommitAction_ONCOMMIT_DELETE_ROWS:
		return temptable.DeleteRows, nil
	case pg.OnCommitAction_ONCOMMIT_DROP:
		return temptable.Drop, nil
	}
	return temptable.PreserveRows, nil
}

// planTempTruncate plans TRUNCATE of temporary tables (all the statement
// names must be).
func (s *session) planTempTruncate(ts *pg.TruncateStmt) (*stmt, bool, error) {
	rels := make([]*pg.RangeVar, len(ts.Relations))
	for i, r := range ts.Relations {
		rels[i] = r.GetRangeVar()
	}
	return s.planOnTemps("TRUNCATE", rels, func(ctx context.Context, name string) error {
		if err := s.temps.BeforeWrite(ctx, name); err != nil {
			return err
		}
		return s.conn.Exec(ctx, "DELETE FROM "+quoteIdent(name))
	})
}

// planTempDrop plans DROP TABLE of temporary tables (all the statement
// names must be).
func (s *session) planTempDrop(d *pg.DropStmt) (*stmt, bool, error) {
	if d.RemoveType != pg.ObjectType_OBJECT_TABLE {
		return nil, false, nil
	}
	rels := make([]*pg.RangeVar, len(d.Objects))
	for i, o := range d.Objects {
		rels[i] = &pg.RangeVar{}
		if items := o.GetList().GetItems(); len(items) > 0 {
			rels[i].Relname = items[len(items)-1].GetString_().GetSval()
			if len(items) == 2 {
				rels[i].Schemaname = items[0].GetString_().GetSval()
			}
		}
	}
	return s.planOnTemps("DROP TABLE", rels, func(ctx context.Context, name string) error { return s.temps.Drop(ctx, name) })
}

// planOnTemps plans a statement (verb, also its tag) that does fn to each
// of the temporary tables rels names; ok is false when rels names none, and
// a statement naming temporary and other tables is refused.
func (s *session) planOnTemps(verb string, rels []*pg.RangeVar, fn func(ctx context.Context, name string) error) (*stmt, bool, error) {
	var names []string
	for _, rv := range rels {
		if t, ok := s.tempRel(rv); ok {
			names = append(names, t.Name)
		}
	}
	switch {
	case len(names) == 0:
		return nil, false, nil
	case len(names) < len(rels):
		return nil, true, unsupported("%s of temporary and other tables in one statement is not supported by mink", verb)
	}
	tag := verb
	if verb == "TRUNCATE" {
		tag = "TRUNCATE TABLE"
	}
	return s.tagOnly(tag, func(ctx context.Context) error {
		for _, name := range names {
			if err := fn(ctx, name); err != nil {
				return err
			}
		}
		return s.endTempStatement(ctx)
	}), true, nil
}

// planTempCopyFrom plans COPY t [(columns)] FROM STDIN into a temporary
// table: the rows are parsed as for any table, then the engine inserts
// them (the columns left out take their defaults there).
func (s *session) planTempCopyFrom(cs *pg.CopyStmt, t *temptable.Table) (*stmt, error) {
	if cs.WhereClause != nil {
		return nil, unsupported("COPY FROM … WHERE is not supported")
	}
	opts, err := copyOptions(cs)
	if err != nil {
		return nil, err
	}
	targets := t.Columns
	if len(cs.Attlist) > 0 {
		targets = nil
		for _, a := range cs.Attlist {
			name := a.GetString_().GetSval()
			i := t.ColumnIndex(name)
			if i < 0 {
				return nil, errorf(pgwire.CodeUndefinedColumn, "column %q of relation %q does not exist", name, t.Name)
			}
			targets = append(targets, t.Columns[i])
		}
	}
	cols := make([]pgwire.Column, len(targets))
	names := make([]string, len(targets))
	order := make([]int, len(targets))
	for i, c := range targets {
		cols[i] = pgwire.NewColumn(c.Name, c.Type.OID())
		cols[i].TypeSize, cols[i].TypeMod = c.Type.Len(), c.Type.TypMod()
		names[i] = quoteIdent(c.Name)
		order[i] = i
	}
	return &stmt{run: func(ctx context.Context, _ []any) (pgwire.Result, error) {
		if err := s.checkTx(); err != nil {
			return pgwire.Result{}, err
		}
		sink := &tempCopySink{copySink: copySink{s: s, table: &tableInfo{name: t.Name, cols: targets}, targets: order},
			insert: "INSERT INTO " + quoteIdent(t.Name) + " (" + strings.Join(names, ", ") + ") SELECT * FROM "}
		return pgwire.Result{CopyIn: &pgwire.CopyIn{Table: t.Name, Columns: cols, Options: opts, Sink: sink}}, nil
	}}, nil
}

// tempCopySink is a copySink whose rows the engine inserts into a
// temporary table.
type tempCopySink struct {
	copySink
	insert string // the INSERT, less the name of the registered rows
}

func (c *tempCopySink) Commit(ctx context.Context, rows int64) error {
	defer c.release()
	if err := c.stage(ctx); err != nil {
		return err
	}
	s, name := c.s, c.table.name
	if err := s.temps.BeforeWrite(ctx, name); err != nil {
		return toWire(err)
	}
	if len(c.staged) > 0 {
		src := "__mink_copy_rows"
		release, err := s.conn.RegisterRecords(ctx, src, c.staged[0].Schema(), c.staged)
		if err != nil {
			return toWire(err)
		}
		err = s.conn.Exec(ctx, c.insert+src)
		release()
		if err != nil {
			return toWire(err)
		}
	}
	return toWire(s.endTempStatement(ctx))
}
