package sqlfront

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/protobuf/proto"

	pg "github.com/minkdb/mink/sqlfront/pgtree"
	"github.com/minkdb/mink/sqlfront/translate"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/sqltypes"
	"github.com/minkdb/mink/sqlfront/engine"
	"github.com/minkdb/mink/sqlfront/pgcatalog"
	"github.com/minkdb/mink/sqlfront/pgwire"
)

// catalogState is a session's emulated catalogs: the relations registered
// on its DuckDB connection (as views named by catalogViewName) and whether
// its macros exist. Used by the session's goroutine only.
type catalogState struct {
	macros bool
	// index is the metadata index tables was read at.
	index   uint64
	tables  []*pgcatalog.Table
	schemas []*pgcatalog.Schema
	roles   *pgcatalog.Roles
	views   map[string]*catalogView
	// started is when the session first read a catalog (pg_stat_activity).
	started time.Time
}

// catalogView is one registered relation.
type catalogView struct {
	index   uint64 // metadata index of its rows
	release func()
}

func (c *catalogState) close() {
	for key, v := range c.views {
		v.release()
		delete(c.views, key)
	}
}

// planCatalogQuery plans queries of PostgreSQL's system catalogs
// (pg_catalog, information_schema) that psql's \d commands and drivers'
// metadata calls send, and the session functions they call (version(),
// current_database(), …). ok is false for any other query.
//
// The statement is rewritten (catalogRewriter) to read the session's
// emulated catalogs, built from the metadata view, and runs in DuckDB, so
// it may join them, filter, sort and aggregate freely, and even read user
// tables.
func (s *session) planCatalogQuery(ctx context.Context, sql string, node *pg.Node, paramOIDs []uint32) (st *stmt, ok bool, err error) {
	if node.GetSelectStmt() == nil {
		return nil, false, nil
	}
	// Every SELECT comes here before planQuery: a condition that is not
	// boolean fails it whether or not it reads the catalogs.
	if err := translate.CheckConditions(s.env(), node); err != nil {
		return nil, true, err
	}
	if st, ok := s.planSetConfig(node); ok {
		return st, true, nil
	}
	rewritten := proto.Clone(node).(*pg.Node)
	q, ok, err := translate.Catalog(rewritten, s.catalogConsts())
	if !ok || err != nil {
		return nil, ok, err
	}
	translate.Tree(s.env(), rewritten, false)
	text, err := translate.Deparse(rewritten)
	if err != nil {
		return nil, true, fmt.Errorf("deparse catalog query: %w", err)
	}
	st, err = s.planCatalogStatement(ctx, sql, text, node, q.Relations, q.Macros, paramOIDs)
	if err == nil {
		translate.ResultTypes(s.env(), node, st.columns)
	}
	if err != nil {
		// DuckDB cannot bind some of the queries psql's \d sends for
		// objects mink never has (policies, publications, statistics);
		// answer them without it.
		if cols, empty := staticallyEmpty(rewritten.GetSelectStmt()); empty {
			translate.ColumnNames(node, cols)
			return emptyStmt(s, cols, resolveParams(paramOIDs, make([]sqltypes.Type, maxParam(node)))), true, nil
		}
	}
	return st, true, err
}

func (s *session) catalogConsts() translate.CatalogConsts {
	version := s.settings.values["server_version"]
	return translate.CatalogConsts{
		User:     s.identity.Name,
		Role:     uint32(s.identity.Role),
		Database: s.f.cfg.Database,
		Version:  "PostgreSQL " + version + " on x86_64-pc-linux-gnu, compiled by Go, 64-bit",
		PID:      int32(s.info.ProcessID),
		Schemas:  s.searchPathNames(),
	}
}

// planCatalogStatement prepares the rewritten statement text, which reads
// the relations keys.
func (s *session) planCatalogStatement(ctx context.Context, sql, text string, node *pg.Node, keys []string, macros bool, paramOIDs []uint32) (*stmt, error) {
	prepare := func(ctx context.Context) error {
		if err := s.checkCatalogAccess(keys); err != nil {
			return err
		}
		if err := s.tables.sync(ctx); err != nil {
			return err
		}
		return s.registerCatalogs(ctx, sql, keys, macros)
	}
	if err := prepare(ctx); err != nil {
		return nil, err
	}
	desc, err := s.conn.Describe(ctx, text)
	if err != nil {
		return nil, catalogError(err)
	}
	cols := wireColumns(desc.Columns)
	// Catalog OIDs are DuckDB UINTEGERs; describe them as oid.
	var oidCols []int
	for i, c := range desc.Columns {
		if c.DuckDBType == "UINTEGER" {
			cols[i].TypeOID, cols[i].TypeSize, cols[i].TypeMod = 26, 4, -1
			oidCols = append(oidCols, i)
		}
	}
	translate.ColumnNames(node, cols)
	st := &stmt{params: resolveParams(paramOIDs, desc.Params), columns: cols}
	st.run = func(ctx context.Context, args []any) (pgwire.Result, error) {
		if err := s.checkTx(); err != nil {
			return pgwire.Result{}, err
		}
		if err := prepare(ctx); err != nil {
			return pgwire.Result{}, err
		}
		rows, err := s.conn.Query(ctx, text, args...)
		if err != nil {
			return pgwire.Result{}, catalogError(err)
		}
		return pgwire.Result{Rows: &catalogRows{engineRows: engineRows{rows: rows, columns: st.columns}, oidCols: oidCols}}, nil
	}
	return st, nil
}

// catalogError drops the position of an engine error: it points into the
// rewritten text, not the client's.
func catalogError(err error) error {
	var ee *engine.Error
	if errors.As(err, &ee) {
		e := *ee
		e.Position = 0
		return &e
	}
	return err
}

// catalogRows converts oid columns to uint32.
type catalogRows struct {
	engineRows
	oidCols []int
}

func (r *catalogRows) Next(ctx context.Context) ([]any, error) {
	row, err := r.engineRows.Next(ctx)
	if err != nil {
		return nil, err
	}
	for _, i := range r.oidCols {
		if v, ok := row[i].(int64); ok {
			row[i] = uint32(v)
		}
	}
	return row, nil
}

// registerCatalogs makes the relations keys current on the session's
// DuckDB connection, and creates the macros when the statement needs them.
func (s *session) registerCatalogs(ctx context.Context, sql string, keys []string, macros bool) error {
	c := &s.catalog
	if c.views == nil {
		c.views = map[string]*catalogView{}
		c.started = time.Now()
	}
	if index := s.f.cfg.Meta.AppliedIndex(); index != c.index || c.tables == nil {
		var tables []*pgcatalog.Table
		var schemas []*pgcatalog.Schema
		var roles *pgcatalog.Roles
		s.f.cfg.Meta.Read(func(v *catalog.View) {
			tables = pgcatalog.NewTables(v, s.bucketRows, defaultExpr, func(sv *catalog.SQLView) string { return viewDefinition(v, sv) })
			schemas = pgcatalog.NewSchemas(v)
			roles = pgcatalog.NewRoles(v, s.identity)
		})
		c.tables, c.schemas, c.roles, c.index = tables, schemas, roles, index
	}
	createMacros := macros && !c.macros
	if createMacros {
		// DuckDB binds a macro's relations when it creates it.
		keys = append(keys, pgcatalog.AllMacroDeps()...)
	}
	var in *pgcatalog.Input
	for _, key := range keys {
		if key == pgcatalog.SettingsVarKey {
			if err := s.conn.Exec(ctx, s.settingsVariable()); err != nil {
				return fmt.Errorf("set mink_settings: %w", err)
			}
			continue
		}
		if key == pgcatalog.SearchPathVarKey {
			if err := s.conn.Exec(ctx, s.searchPathVariable()); err != nil {
				return fmt.Errorf("set mink_search_path: %w", err)
			}
			continue
		}
		old := c.views[key]
		if old != nil && old.index == c.index && !pgcatalog.SessionRelation(key) {
			continue
		}
		if in == nil {
			in = s.catalogInput(sql)
		}
		schema, batch := pgcatalog.Build(key, in)
		release, err := s.conn.RegisterRecords(ctx, pgcatalog.ViewName(key), schema, []arrow.RecordBatch{batch})
		if err != nil {
			return fmt.Errorf("register %s: %w", key, err)
		}
		if old != nil {
			old.release()
		}
		c.views[key] = &catalogView{index: c.index, release: release}
	}
	if createMacros {
		if err := s.conn.Exec(ctx, pgcatalog.MacroSQL()); err != nil {
			return fmt.Errorf("create catalog macros: %w", err)
		}
		c.macros = true
	}
	return nil
}

// bucketRows is the acknowledged end of a bucket this node leads: offsets
// count rows.
func (s *session) bucketRows(id catalog.BucketID) (int64, bool) {
	m := s.f.cfg.Buckets()
	if m == nil {
		return 0, false
	}
	// Called inside a Meta.Read callback: Manager.Bucket would read the
	// view again, and a nested read lock deadlocks once a writer waits.
	end, ok := m.LocalEnd(id)
	return int64(end), ok
}

// settingsVariable is the statement that sets the DuckDB variable
// mink_settings to the session's settings.
// searchPathVariable is the statement that sets mink_search_path
// (pgcatalog.SearchPathVarKey).
func (s *session) searchPathVariable() string {
	oids := []string{strconv.FormatUint(uint64(pgcatalog.OIDPgCatalog), 10)}
	s.f.cfg.Meta.Read(func(v *catalog.View) {
		for _, id := range s.searchPath(v) {
			oids = append(oids, strconv.FormatUint(uint64(pgcatalog.SchemaOID(id)), 10))
		}
	})
	return "SET VARIABLE mink_search_path = [" + strings.Join(oids, ", ") + "]::UINTEGER[]"
}

func (s *session) settingsVariable() string {
	var b strings.Builder
	b.WriteString("SET VARIABLE mink_settings = MAP {")
	for i, row := range s.catalogSettings() {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(pgcatalog.QuoteLiteral(strings.ToLower(row.Name)) + ": " + pgcatalog.QuoteLiteral(row.Value))
	}
	b.WriteString("}")
	return b.String()
}

// extraSettings are read-only settings that drivers and tools read from
// pg_settings, beyond the ones SHOW knows.
var extraSettings = []pgcatalog.Setting{
	{Name: "block_size", Value: "8192", Default: "8192", ReadOnly: true, Description: "Shows the size of a disk block."},
	{Name: "lc_collate", Value: "C", Default: "C", ReadOnly: true, Description: "Shows the collation order locale."},
	{Name: "lc_ctype", Value: "C", Default: "C", ReadOnly: true, Description: "Shows the character classification and case conversion locale."},
	{Name: "max_connections", Value: "100", Default: "100", ReadOnly: true, Description: "Sets the maximum number of concurrent connections."},
	{Name: "max_function_args", Value: "100", Default: "100", ReadOnly: true, Description: "Shows the maximum number of function arguments."},
	{Name: "max_index_keys", Value: "32", Default: "32", ReadOnly: true, Description: "Shows the maximum number of index keys."},
}

// catalogSettings are the rows of pg_settings: the session's settings
// (settings.go), custom ones ("app.x") and extraSettings, by name.
func (s *session) catalogSettings() []pgcatalog.Setting {
	s.settings.refreshRole()
	var rows []pgcatalog.Setting
	for name, def := range knownSettings {
		rows = append(rows, pgcatalog.Setting{Name: display(name), Value: s.settings.values[name],
			Default: def.def, Description: def.description, ReadOnly: def.readOnly})
	}
	for name, value := range s.settings.values {
		if _, known := knownSettings[name]; !known {
			rows = append(rows, pgcatalog.Setting{Name: name, Value: value})
		}
	}
	for _, extra := range extraSettings {
		if _, known := knownSettings[extra.Name]; !known {
			rows = append(rows, extra)
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Name < rows[j].Name })
	return rows
}

// catalogInput gathers what the relations are computed from.
func (s *session) catalogInput(sql string) *pgcatalog.Input {
	in := &pgcatalog.Input{Database: s.f.cfg.Database, Tables: s.catalog.tables, Schemas: s.catalog.schemas, Roles: s.catalog.roles, Settings: s.catalogSettings(),
		SequenceCache: sequenceCache}
	// The session's role as the roles read with the tables have it (a
	// role dropped while its session is open is no superuser).
	in.Session = pgcatalog.Session{Role: uint32(s.identity.Role), Name: s.identity.Name, Super: in.Roles.Superuser(s.identity.Role)}
	addr := ""
	if s.info.RemoteAddr != nil {
		addr = s.info.RemoteAddr.String()
		if host, _, err := net.SplitHostPort(addr); err == nil {
			addr = host
		}
	}
	in.Activity = pgcatalog.Activity{PID: int32(s.info.ProcessID), Application: s.settings.values["application_name"],
		ClientAddr: addr, Query: sql, BackendStart: s.catalog.started}
	return in
}

// staticallyEmpty reports whether a SELECT returns no rows whatever the
// data, because it reads (by inner join) a catalog mink never has rows in,
// and then describes its columns as text.
func staticallyEmpty(sel *pg.SelectStmt) ([]pgwire.Column, bool) {
	if sel == nil || !selectEmpty(sel) {
		return nil, false
	}
	first := sel
	for first.Op != pg.SetOperation_SETOP_NONE && first.Larg != nil {
		first = first.Larg
	}
	cols := make([]pgwire.Column, 0, len(first.TargetList))
	for _, t := range first.TargetList {
		rt := t.GetResTarget()
		if cr := rt.GetVal().GetColumnRef(); cr != nil && cr.Fields[len(cr.Fields)-1].GetAStar() != nil {
			return nil, false // the width of * is DuckDB's to find
		}
		cols = append(cols, pgwire.NewColumn("?column?", 25))
	}
	return cols, true
}

func selectEmpty(sel *pg.SelectStmt) bool {
	switch sel.Op {
	case pg.SetOperation_SETOP_UNION:
		return selectEmpty(sel.Larg) && selectEmpty(sel.Rarg)
	case pg.SetOperation_SETOP_INTERSECT:
		return selectEmpty(sel.Larg) || selectEmpty(sel.Rarg)
	case pg.SetOperation_SETOP_EXCEPT:
		return selectEmpty(sel.Larg)
	}
	if len(sel.ValuesLists) > 0 || hasAggregate(sel) {
		return false
	}
	for _, from := range sel.FromClause {
		if fromEmpty(from) {
			return true
		}
	}
	return false
}

// fromEmpty reports whether a FROM item has no rows.
func fromEmpty(n *pg.Node) bool {
	switch e := n.Node.(type) {
	case *pg.Node_RangeVar:
		return e.RangeVar.Schemaname == "" && pgcatalog.AlwaysEmpty(e.RangeVar.Relname)
	case *pg.Node_JoinExpr:
		j := e.JoinExpr
		switch j.Jointype {
		case pg.JoinType_JOIN_INNER:
			return fromEmpty(j.Larg) || fromEmpty(j.Rarg)
		case pg.JoinType_JOIN_LEFT:
			return fromEmpty(j.Larg)
		case pg.JoinType_JOIN_RIGHT:
			return fromEmpty(j.Rarg)
		case pg.JoinType_JOIN_FULL:
			return fromEmpty(j.Larg) && fromEmpty(j.Rarg)
		}
	case *pg.Node_RangeSubselect:
		if sub := e.RangeSubselect.Subquery.GetSelectStmt(); sub != nil {
			return selectEmpty(sub)
		}
	}
	return false
}

// aggregateNames are the aggregates catalog queries use; over no rows they
// still return one row.
var aggregateNames = map[string]bool{
	"count": true, "sum": true, "min": true, "max": true, "avg": true, "string_agg": true, "array_agg": true,
	"bool_and": true, "bool_or": true, "every": true, "json_agg": true, "jsonb_agg": true, "json_object_agg": true,
}

// hasAggregate reports whether a SELECT without GROUP BY aggregates in its
// target list or HAVING (not in subqueries, which are queries of their
// own).
func hasAggregate(sel *pg.SelectStmt) bool {
	if len(sel.GroupClause) > 0 {
		return false
	}
	found := false
	check := func(n *pg.Node) bool {
		if n.GetSubLink() != nil {
			return false
		}
		if fc := n.GetFuncCall(); fc != nil {
			if _, name := pg.FuncName(fc); aggregateNames[name] || fc.AggStar {
				found = true
			}
		}
		return !found
	}
	for _, t := range sel.TargetList {
		pg.Visit(t, check)
	}
	if sel.HavingClause != nil {
		pg.Visit(sel.HavingClause, check)
	}
	return found
}

// maxParam is the highest $n in the tree.
func maxParam(n *pg.Node) int {
	highest := 0
	pg.Visit(n, func(n *pg.Node) bool {
		if p := n.GetParamRef(); p != nil && int(p.Number) > highest {
			highest = int(p.Number)
		}
		return true
	})
	return highest
}

// emptyStmt returns no rows with the given columns.
func emptyStmt(s *session, cols []pgwire.Column, params []uint32) *stmt {
	return &stmt{params: params, columns: cols, run: func(ctx context.Context, _ []any) (pgwire.Result, error) {
		if err := s.checkTx(); err != nil {
			return pgwire.Result{}, err
		}
		return pgwire.Result{Rows: pgwire.RowsFromSlice(cols, nil)}, nil
	}}
}

// defaultExpr renders a column's stored default the way PostgreSQL's
// pg_get_expr prints the default expression it would have stored: bare
// non-negative numbers and booleans, other constants quoted and cast to
// the column's type ('x'::text, '-1'::integer).
func defaultExpr(def string, typ sqltypes.Type) string {
	if def == "" {
		return ""
	}
	tree, err := pg.Parse("SELECT " + def)
	if err != nil || len(tree.Stmts) != 1 {
		return def
	}
	targets := tree.Stmts[0].Stmt.GetSelectStmt().GetTargetList()
	if len(targets) != 1 {
		return def
	}
	expr := targets[0].GetResTarget().GetVal()
	if neg := expr.GetAExpr(); neg != nil && neg.Lexpr == nil && len(neg.Name) == 1 && neg.Name[0].GetString_().GetSval() == "-" {
		if c := neg.Rexpr.GetAConst(); c != nil {
			switch v := c.Val.(type) {
			case *pg.A_Const_Ival:
				return pgcatalog.QuoteLiteral(fmt.Sprint(-v.Ival.Ival)) + "::integer"
			case *pg.A_Const_Fval:
				return pgcatalog.QuoteLiteral("-"+v.Fval.Fval) + "::numeric"
			}
		}
	}
	if tc := expr.GetTypeCast(); tc != nil {
		if c := tc.Arg.GetAConst(); c != nil && c.GetSval() != nil {
			names := tc.TypeName.Names
			name := names[len(names)-1].GetString_().GetSval()
			var mods []int32
			for _, m := range tc.TypeName.Typmods {
				mods = append(mods, m.GetAConst().GetIval().GetIval())
			}
			if t, err := sqltypes.Lookup(name, mods); err == nil {
				return pgcatalog.QuoteLiteral(c.GetSval().Sval) + "::" + pgcatalog.TypeNameNoTypmod(t)
			}
		}
		return def
	}
	c := expr.GetAConst()
	if c == nil {
		return def
	}
	switch v := c.Val.(type) {
	case *pg.A_Const_Ival:
		if v.Ival.Ival < 0 {
			return pgcatalog.QuoteLiteral(fmt.Sprint(v.Ival.Ival)) + "::integer"
		}
		return fmt.Sprint(v.Ival.Ival)
	case *pg.A_Const_Fval:
		if strings.HasPrefix(v.Fval.Fval, "-") {
			return pgcatalog.QuoteLiteral(v.Fval.Fval) + "::numeric"
		}
		if strings.ContainsAny(v.Fval.Fval, ".eE") {
			return v.Fval.Fval
		}
		return pgcatalog.QuoteLiteral(v.Fval.Fval) + "::bigint" // an integer beyond int4
	case *pg.A_Const_Boolval:
		return fmt.Sprint(v.Boolval.Boolval)
	case *pg.A_Const_Sval:
		// The literal was coerced to the column's type when the table was
		// created.
		switch typ.Kind() {
		case sqltypes.Int4:
			if n, err := strconv.ParseInt(strings.TrimSpace(v.Sval.Sval), 10, 32); err == nil && n >= 0 {
				return strconv.FormatInt(n, 10)
			}
		case sqltypes.Bool:
			switch strings.ToLower(strings.TrimSpace(v.Sval.Sval)) {
			case "t", "true", "y", "yes", "on", "1":
				return "true"
			case "f", "false", "n", "no", "off", "0":
				return "false"
			}
		}
		return pgcatalog.QuoteLiteral(v.Sval.Sval) + "::" + pgcatalog.TypeNameNoTypmod(typ)
	}
	if c.Isnull {
		return ""
	}
	return def
}

// checkCatalogAccess refuses a statement that reads a restricted catalog
// to a role that is not a superuser, as PostgreSQL does (42501), at every
// execution.
func (s *session) checkCatalogAccess(keys []string) error {
	for _, key := range keys {
		if what, ok := pgcatalog.Restricted(key); ok && !s.isSuperuser() {
			return errorf(pgwire.CodeInsufficientPrivilege, "permission denied for %s", what)
		}
	}
	return nil
}
