package sqlfront

import (
	"context"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/protobuf/proto"

	pg "github.com/minkdb/mink/sqlfront/pgtree"
	"github.com/minkdb/mink/sqlfront/translate"

	"github.com/minkdb/mink/access"
	"github.com/minkdb/mink/sqlfront/engine"
	"github.com/minkdb/mink/sqlfront/pgwire"
	"github.com/minkdb/mink/sqlfront/temptable"
)

// txState is a session's transaction block state.
type txState struct {
	status pgwire.TxStatus
	// pending are the writes of the open transaction block, applied at
	// COMMIT and discarded at ROLLBACK.
	pending []*pendingWrite
	// kv is the block's view of the primary-key buckets it touched, with
	// its writes, applied at COMMIT (pk_tx.go).
	kv txKV
	// savepoints are the block's savepoints, oldest first (savepoint.go).
	savepoints []savepoint
	// undo undoes the block's DDL that took effect at once (CREATE TABLE,
	// RENAME), newest last; dropped are the tables it dropped, which COMMIT
	// drops (ddl_tx.go).
	undo    []undoDDL
	dropped []droppedTable
}

// session is the SQL side of one connection. pgwire calls it from one
// goroutine at a time.
type session struct {
	f    *Frontend
	conn *engine.Conn
	info pgwire.SessionInfo
	// identity is the role the session acts as (session_user; mink has
	// no SET ROLE, so current_user too). Its privileges are read from the
	// view at every statement, so a GRANT or REVOKE holds from the next.
	identity access.Identity

	settings *settings
	tx       txState
	tables   *tableRegistry
	// catalog is the session's emulated pg_catalog (pgcatalog.go).
	catalog catalogState
	// temps are the session's temporary tables (temp.go).
	temps *temptable.Set
	// cursors are the session's open cursors by name (query.go).
	cursors map[string]*cursor
	// currvals are the values nextval last returned in the session, by
	// sequence name (currval); lastSeq is the sequence nextval last took
	// a value of (lastval).
	currvals map[string]int64
	lastSeq  string
}

var (
	_ pgwire.Session       = (*session)(nil)
	_ pgwire.ParamReporter = (*session)(nil)
)

func newSession(f *Frontend, conn *engine.Conn, info pgwire.SessionInfo) *session {
	s := &session{f: f, conn: conn, info: info, settings: newSettings(info), tx: txState{status: pgwire.TxIdle}}
	s.tables = newTableRegistry(s)
	s.temps = temptable.NewSet(conn)
	return s
}

// Split implements pgwire.Session: it parses the whole string once, so a
// syntax error anywhere fails it before any statement runs.
func (s *session) Split(ctx context.Context, query string) ([]pgwire.Statement, error) {
	tree, err := pg.Parse(query)
	if err != nil {
		return nil, toWire(err)
	}
	var out []pgwire.Statement
	for _, raw := range tree.Stmts {
		start := int(raw.StmtLocation)
		end := len(query)
		if raw.StmtLen > 0 {
			end = start + int(raw.StmtLen)
		}
		text := query[start:end]
		// Leading whitespace and comments are part of the statement's span;
		// keep positions exact by not trimming.
		out = append(out, pgwire.Statement{SQL: text, Offset: start})
	}
	return out, nil
}

// Prepare implements pgwire.Session.
func (s *session) Prepare(ctx context.Context, sql string, paramOIDs []uint32) (pgwire.PreparedStatement, error) {
	tree, err := pg.Parse(sql)
	if err != nil {
		return nil, toWire(err)
	}
	switch len(tree.Stmts) {
	case 0:
		return nil, pgwire.ErrEmptyQuery
	case 1:
	default:
		return nil, errorf(pgwire.CodeSyntaxError, "cannot insert multiple commands into a prepared statement")
	}
	st, err := s.plan(ctx, sql, tree.Stmts[0].Stmt, paramOIDs)
	if err != nil {
		return nil, toWire(err)
	}
	st = s.replanOnViewChange(st, sql, tree.Stmts[0].Stmt, paramOIDs)
	st = s.guarded(st, tree.Stmts[0].Stmt)
	st.s = s
	return st, nil
}

// plan turns one parsed statement into a prepared statement.
func (s *session) plan(ctx context.Context, sql string, node *pg.Node, paramOIDs []uint32) (*stmt, error) {
	if s.qualifyNames(node) {
		// It names relations outside public (schema.go).
		text, tree, err := requalify(node)
		if err != nil {
			return nil, err
		}
		sql, node = text, tree
	}
	if err := s.refuseViewTarget(node); err != nil {
		return nil, err
	}
	if readsRelations(node) {
		expanded, text, views, err := s.expandViews(node, sql)
		if err != nil {
			return nil, err
		}
		if views != "" {
			st, err := s.planStatement(ctx, text, expanded, paramOIDs)
			if st != nil {
				st.views = views
			}
			return st, err
		}
	}
	return s.planStatement(ctx, sql, node, paramOIDs)
}

// planStatement is plan once the views node reads are expanded.
func (s *session) planStatement(ctx context.Context, sql string, node *pg.Node, paramOIDs []uint32) (*stmt, error) {
	if st, ok, err := s.planTempStatement(ctx, sql, node, paramOIDs); ok {
		return st, err
	}
	if node.GetSelectStmt() == nil && callsSequence(sql, node) {
		return nil, unsupported("nextval, currval, setval and lastval are supported only as whole output columns of a SELECT")
	}
	switch n := node.Node.(type) {
	case *pg.Node_TransactionStmt:
		return s.planTransaction(n.TransactionStmt)
	case *pg.Node_VariableSetStmt:
		return s.planSet(n.VariableSetStmt)
	case *pg.Node_VariableShowStmt:
		return s.planShow(n.VariableShowStmt)
	case *pg.Node_DiscardStmt:
		return s.planDiscard(n.DiscardStmt)
	case *pg.Node_CreateStmt:
		return s.planCreateTable(ctx, n.CreateStmt)
	case *pg.Node_DropStmt:
		return s.planDrop(n.DropStmt)
	case *pg.Node_InsertStmt:
		return s.planInsert(ctx, sql, n.InsertStmt, paramOIDs)
	case *pg.Node_CreateTableAsStmt:
		if n.CreateTableAsStmt.Objtype != pg.ObjectType_OBJECT_TABLE {
			return nil, unsupported("CREATE MATERIALIZED VIEW is not supported by mink")
		}
		return s.planCreateTableAs(ctx, n.CreateTableAsStmt.Into, n.CreateTableAsStmt.Query, n.CreateTableAsStmt.IfNotExists)
	case *pg.Node_SelectStmt, *pg.Node_ExplainStmt:
		if sel := node.GetSelectStmt(); sel != nil && sel.IntoClause != nil {
			query := proto.Clone(sel).(*pg.SelectStmt)
			query.IntoClause = nil
			return s.planCreateTableAs(ctx, sel.IntoClause, &pg.Node{Node: &pg.Node_SelectStmt{SelectStmt: query}}, false)
		}
		if sel := node.GetSelectStmt(); sel != nil && len(sel.LockingClause) > 0 {
			return nil, unsupported("SELECT … FOR UPDATE/SHARE is not supported: mink has no row locks (in a transaction block, COMMIT fails with 40001 if a row the block updated or deleted changed meanwhile)")
		}
		if st, ok, err := s.planSequenceCalls(ctx, sql, node, paramOIDs); ok {
			return st, err
		}
		if st, ok := s.planLookup(ctx, node.GetSelectStmt(), paramOIDs); ok {
			return st, nil
		}
		if st, ok, err := s.planCatalogQuery(ctx, sql, node, paramOIDs); ok {
			return st, err
		}
		st, err := s.planQuery(ctx, sql, node, paramOIDs)
		if err == nil {
			translate.ColumnNames(node, st.columns)
		}
		return st, err
	case *pg.Node_CopyStmt:
		return s.planCopy(ctx, n.CopyStmt)
	case *pg.Node_UpdateStmt:
		if err := translate.CheckConditions(s.env(), node); err != nil {
			return nil, err
		}
		return s.planUpdate(ctx, n.UpdateStmt, paramOIDs)
	case *pg.Node_DeleteStmt:
		if err := translate.CheckConditions(s.env(), node); err != nil {
			return nil, err
		}
		return s.planDelete(ctx, n.DeleteStmt, paramOIDs)
	case *pg.Node_AlterTableStmt:
		if isOwnerChange(n.AlterTableStmt) && (n.AlterTableStmt.Objtype == pg.ObjectType_OBJECT_TABLE || n.AlterTableStmt.Objtype == pg.ObjectType_OBJECT_VIEW) {
			return s.planChangeOwner(n.AlterTableStmt)
		}
		return s.planAlterTable(ctx, n.AlterTableStmt)
	case *pg.Node_CreateRoleStmt:
		return s.planCreateRole(n.CreateRoleStmt)
	case *pg.Node_AlterRoleStmt:
		return s.planAlterRole(n.AlterRoleStmt)
	case *pg.Node_DropRoleStmt:
		return s.planDropRole(n.DropRoleStmt)
	case *pg.Node_GrantRoleStmt:
		return s.planGrantRole(n.GrantRoleStmt)
	case *pg.Node_GrantStmt:
		return s.planGrant(n.GrantStmt)
	case *pg.Node_TruncateStmt:
		return s.planTruncate(n.TruncateStmt)
	case *pg.Node_RenameStmt:
		if n.RenameStmt.RenameType == pg.ObjectType_OBJECT_ROLE {
			return s.planRenameRole(n.RenameStmt)
		}
		if n.RenameStmt.RenameType == pg.ObjectType_OBJECT_SCHEMA {
			return s.planRenameSchema(n.RenameStmt)
		}
		if n.RenameStmt.RenameType == pg.ObjectType_OBJECT_VIEW {
			return s.planRenameView(n.RenameStmt, "ALTER VIEW")
		}
		if n.RenameStmt.RenameType == pg.ObjectType_OBJECT_TABLE {
			if s.isView(n.RenameStmt.Relation) {
				return s.planRenameView(n.RenameStmt, "ALTER TABLE")
			}
			return s.planRenameTable(ctx, n.RenameStmt)
		}
		if n.RenameStmt.RenameType == pg.ObjectType_OBJECT_COLUMN && n.RenameStmt.RelationType == pg.ObjectType_OBJECT_TABLE {
			if s.isView(n.RenameStmt.Relation) {
				return nil, unsupported("ALTER TABLE … RENAME COLUMN of a view is not supported by mink")
			}
			return s.planRenameColumn(n.RenameStmt)
		}
	case *pg.Node_CreateSchemaStmt:
		return s.planCreateSchema(n.CreateSchemaStmt)
	case *pg.Node_AlterObjectSchemaStmt:
		switch n.AlterObjectSchemaStmt.ObjectType {
		case pg.ObjectType_OBJECT_TABLE, pg.ObjectType_OBJECT_VIEW:
			return s.planSetSchema(n.AlterObjectSchemaStmt)
		}
	case *pg.Node_ViewStmt:
		return s.planCreateView(ctx, n.ViewStmt)
	case *pg.Node_IndexStmt:
		return s.planCreateIndex(n.IndexStmt)
	case *pg.Node_ConstraintsSetStmt:
		return s.planSetConstraints(n.ConstraintsSetStmt)
	case *pg.Node_DeclareCursorStmt:
		return s.planDeclareCursor(ctx, n.DeclareCursorStmt)
	case *pg.Node_FetchStmt:
		return s.planFetch(n.FetchStmt)
	case *pg.Node_ClosePortalStmt:
		return s.planClose(n.ClosePortalStmt)
	case *pg.Node_CreateSeqStmt, *pg.Node_CreatedbStmt, *pg.Node_CreateFunctionStmt:
		return nil, unsupported("%s is not supported by mink", statementName(node))
	}
	return nil, unsupported("%s is not supported by mink", statementName(node))
}

// statementNames are the names of statements whose parse node is not
// named after them.
var statementNames = map[string]string{
	"CreateSeq": "CREATE SEQUENCE", "AlterSeq": "ALTER SEQUENCE", "Createdb": "CREATE DATABASE",
	"Dropdb": "DROP DATABASE", "AlterDatabaseSet": "ALTER DATABASE", "CreateTrig": "CREATE TRIGGER",
	"CreatePLang": "CREATE LANGUAGE", "CreateTableSpace": "CREATE TABLESPACE", "DropTableSpace": "DROP TABLESPACE",
	"AlterTableSpaceOptions": "ALTER TABLESPACE", "CreateEventTrig": "CREATE EVENT TRIGGER",
	"AlterEventTrig": "ALTER EVENT TRIGGER", "CreateFdw": "CREATE FOREIGN DATA WRAPPER",
	"AlterFdw": "ALTER FOREIGN DATA WRAPPER", "CreateForeignServer": "CREATE SERVER",
	"AlterForeignServer": "ALTER SERVER", "CreateForeignTable": "CREATE FOREIGN TABLE",
	"CreateStats": "CREATE STATISTICS", "AlterStats": "ALTER STATISTICS", "CreateAm": "CREATE ACCESS METHOD",
	"CreateOpClass": "CREATE OPERATOR CLASS", "CreateOpFamily": "CREATE OPERATOR FAMILY",
	"AlterOpFamily": "ALTER OPERATOR FAMILY", "CreateEnum": "CREATE TYPE", "CreateRange": "CREATE TYPE",
	"CompositeType": "CREATE TYPE", "AlterEnum": "ALTER TYPE", "Define": "CREATE AGGREGATE, OPERATOR or TYPE",
	"Rule": "CREATE RULE", "Index": "CREATE INDEX", "View": "CREATE VIEW", "Createas": "CREATE TABLE AS",
	"VariableSet": "SET", "VariableShow": "SHOW", "Lock": "LOCK TABLE", "Constraints": "SET CONSTRAINTS",
	"CheckPoint": "CHECKPOINT", "SecLabel": "SECURITY LABEL", "AlterTSDictionary": "ALTER TEXT SEARCH DICTIONARY",
	"AlterTSConfiguration": "ALTER TEXT SEARCH CONFIGURATION", "Call": "CALL", "Do": "DO",
	"ClosePortal": "CLOSE", "Rename": "ALTER … RENAME", "AlterObjectSchema": "ALTER … SET SCHEMA",
	"AlterOwner": "ALTER … OWNER TO", "ImportForeignSchema": "IMPORT FOREIGN SCHEMA",
	"Transaction": "a transaction statement", "Grant": "GRANT or REVOKE", "GrantRole": "GRANT or REVOKE of a role",
	"Drop": "DROP", "AlterFunction": "ALTER FUNCTION",
}

// statementName is a readable name of a statement's type, for errors.
func statementName(node *pg.Node) string {
	name := strings.TrimPrefix(fmt.Sprintf("%T", node.Node), "*pg_query.Node_")
	name = strings.TrimSuffix(name, "Stmt")
	if n, ok := statementNames[name]; ok {
		return n
	}
	var b strings.Builder
	for i, r := range name {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte(' ')
		}
		b.WriteRune(r)
	}
	return strings.ToUpper(b.String())
}

func (s *session) appendOnly(rel *pg.RangeVar, verb string) error {
	name := rel.GetRelname()
	if _, err := s.lookupTable(rel); err != nil {
		return err
	}
	return unsupported("%s on table %q: log tables are append-only (primary-key tables support UPDATE and DELETE)", verb, name)
}

// Sync implements pgwire.Session. Writes outside a transaction block are
// applied when each statement runs, so the implicit transaction has nothing
// left to commit; a failure inside a block fails the block.
func (s *session) Sync(ctx context.Context, failed bool) error {
	if failed && s.tx.status == pgwire.TxInBlock {
		s.tx.status = pgwire.TxFailed
	}
	return nil
}

// TxStatus implements pgwire.Session.
func (s *session) TxStatus() pgwire.TxStatus { return s.tx.status }

// ChangedParams implements pgwire.ParamReporter.
func (s *session) ChangedParams() map[string]string { return s.settings.reported() }

// Close implements pgwire.Session.
func (s *session) Close() {
	s.closeCursors(func(*cursor) bool { return true })
	s.tables.close()
	s.catalog.close()
	s.rollbackDDLOnClose()
	s.tx.pending = nil
	s.conn.Close()
}

// checkTx rejects statements in a failed transaction block.
func (s *session) checkTx() error {
	if s.tx.status == pgwire.TxFailed {
		return errorf(pgwire.CodeInFailedSQLTransaction, "current transaction is aborted, commands ignored until end of transaction block")
	}
	return nil
}

// stmt is the prepared statement of every kind of statement: its parameter
// types, its result columns, and how to run it.
type stmt struct {
	s       *session
	params  []uint32
	columns []pgwire.Column
	// allowInFailedTx marks ROLLBACK and COMMIT, which end a failed block.
	allowInFailedTx bool
	// arrow is the schema of the engine's batches for a query whose rows
	// Arrow clients may take as the engine makes them (arrow.go); nil for
	// statements whose rows need converting.
	arrow *arrow.Schema
	// views is the fingerprint of the views the statement read when it
	// was planned (viewsFingerprint); "" when it reads none.
	views string
	run   func(ctx context.Context, params []any) (pgwire.Result, error)
	close func()
}

func (st *stmt) ParamOIDs() []uint32      { return st.params }
func (st *stmt) Columns() []pgwire.Column { return st.columns }
func (st *stmt) Close() {
	if st.close != nil {
		st.close()
	}
}

// Execute runs the statement; errors come back as *pgwire.Error.
func (st *stmt) Execute(ctx context.Context, params []any) (pgwire.Result, error) {
	if st.s != nil {
		st.s.tables.partitions = nil // a statement prunes only for itself
		// Reads and writes of buckets on other nodes act for the role.
		ctx = access.NewContext(ctx, st.s.identity)
	}
	res, err := st.run(ctx, params)
	if err != nil {
		return pgwire.Result{}, toWire(err)
	}
	return res, nil
}

// tagOnly is a statement that returns a command tag and nothing else.
func (s *session) tagOnly(tag string, fn func(ctx context.Context) error) *stmt {
	return &stmt{run: func(ctx context.Context, _ []any) (pgwire.Result, error) {
		if err := s.checkTx(); err != nil {
			return pgwire.Result{}, err
		}
		if err := fn(ctx); err != nil {
			return pgwire.Result{}, err
		}
		return pgwire.Result{Tag: tag}, nil
	}}
}

func (s *session) planTransaction(t *pg.TransactionStmt) (*stmt, error) {
	switch t.Kind {
	case pg.TransactionStmtKind_TRANS_STMT_BEGIN, pg.TransactionStmtKind_TRANS_STMT_START:
		tag := "BEGIN"
		if t.Kind == pg.TransactionStmtKind_TRANS_STMT_START {
			tag = "START TRANSACTION"
		}
		return &stmt{run: func(ctx context.Context, _ []any) (pgwire.Result, error) {
			res := pgwire.Result{Tag: tag}
			switch s.tx.status {
			case pgwire.TxFailed:
				return res, s.checkTx()
			case pgwire.TxInBlock:
				res.Notices = append(res.Notices, &pgwire.Error{Severity: "WARNING", Code: "25001", Message: "there is already a transaction in progress"})
			default:
				s.tx.status = pgwire.TxInBlock
				s.temps.Begin()
			}
			return res, nil
		}}, nil
	case pg.TransactionStmtKind_TRANS_STMT_COMMIT:
		return &stmt{allowInFailedTx: true, run: func(ctx context.Context, _ []any) (pgwire.Result, error) {
			switch s.tx.status {
			case pgwire.TxIdle:
				return pgwire.Result{Tag: "COMMIT", Notices: []*pgwire.Error{{Severity: "WARNING", Code: "25P01", Message: "there is no transaction in progress"}}}, nil
			case pgwire.TxFailed:
				s.endSettingsTx(ctx, false)
				s.rollbackDDL(ctx, 0)
				s.endTempTx(ctx, false)
				s.endCursorsTx(false)
				s.endTx()
				return pgwire.Result{Tag: "ROLLBACK"}, nil
			}
			pending := s.tx.pending
			kvs, kvTables := s.tx.kv.buckets, s.tx.kv.tables
			dropped := s.tx.dropped
			before, after, kvs := splitTruncated(pending, kvs, kvTables, dropped)
			s.endSettingsTx(ctx, true)
			s.endTempTx(ctx, true)
			s.endCursorsTx(true)
			s.endTx()
			if err := s.applyWrites(ctx, before); err != nil {
				releaseWrites(after)
				return pgwire.Result{}, err
			}
			if err := s.commitPK(ctx, kvs, kvTables); err != nil {
				releaseWrites(after)
				return pgwire.Result{}, err
			}
			if err := s.commitDDL(ctx, dropped); err != nil {
				releaseWrites(after)
				return pgwire.Result{}, err
			}
			if err := s.applyWrites(ctx, after); err != nil {
				return pgwire.Result{}, err
			}
			return pgwire.Result{Tag: "COMMIT"}, nil
		}}, nil
	case pg.TransactionStmtKind_TRANS_STMT_ROLLBACK:
		return &stmt{allowInFailedTx: true, run: func(ctx context.Context, _ []any) (pgwire.Result, error) {
			if s.tx.status == pgwire.TxIdle {
				return pgwire.Result{Tag: "ROLLBACK", Notices: []*pgwire.Error{{Severity: "WARNING", Code: "25P01", Message: "there is no transaction in progress"}}}, nil
			}
			s.endSettingsTx(ctx, false)
			s.rollbackDDL(ctx, 0)
			s.endTempTx(ctx, false)
			s.endCursorsTx(false)
			s.endTx()
			return pgwire.Result{Tag: "ROLLBACK"}, nil
		}}, nil
	}
	return s.planSavepoint(t)
}

func (s *session) endTx() {
	s.tx.status = pgwire.TxIdle
	s.tx.pending = nil
	s.tx.kv = txKV{}
	s.tx.savepoints = nil
	s.tx.undo, s.tx.dropped = nil, nil
}
