package translate

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	pg "github.com/minkdb/mink/sqlfront/pgtree"

	"github.com/minkdb/mink/internal/sqltypes"
	"github.com/minkdb/mink/sqlfront/engine"
	"github.com/minkdb/mink/sqlfront/pgcatalog"
	"github.com/minkdb/mink/sqlfront/pgwire"
)

// catalogRewriter rewrites a parsed SELECT that reads PostgreSQL's
// catalogs into SQL DuckDB runs over mink's emulated catalogs:
//
//   - pg_catalog.x, bare pg_catalog names and information_schema.x become
//     the session's views of the emulated relations (named "schema.x");
//   - PostgreSQL functions become constants, DuckDB expressions or the
//     session's mink_* macros (pgcatalog/macros.go);
//   - casts to reg* types, oid, name, "char", int2vector, … become lookups
//     or DuckDB types; OPERATOR(pg_catalog.~) and friends become regexp
//     matches (PostgreSQL's ~ searches, DuckDB's matches the whole string);
//     COLLATE pg_catalog.default goes.
//
// It works on the parse tree, in place.
type catalogRewriter struct {
	consts CatalogConsts
	// rels are the emulated relations the statement reads, by key.
	rels map[string]bool
	// macros: the statement calls the session's macros.
	macros bool
	// catalog: the statement refers to the catalogs (relations or
	// functions), so it is planned here.
	catalog bool
	err     error
	// outputCasts are reg* casts whose value is printed, as a name.
	outputCasts map[*pg.TypeCast]bool
	// aliasOIDs are the OIDs of the catalogs in FROM clauses, by alias.
	aliasOIDs map[string]uint32
}

// CatalogConsts are the values of the session functions: User is the
// name of the role the session acts as (current_user, session_user), Role
// its oid; Version is what version() returns, PID pg_backend_pid().
type CatalogConsts struct {
	User, Database, Version string
	Role                    uint32
	PID                     int32
	// Schemas are the schemas of the session's search_path that exist, in
	// order: current_schema() is the first (NULL without one),
	// current_schemas(false) all of them.
	Schemas []string
}

// CatalogQuery is what a catalog query reads.
type CatalogQuery struct {
	// Relations are the keys (pgcatalog.Key) of the emulated relations it
	// reads, sorted.
	Relations []string
	// Macros: it calls the session's macros.
	Macros bool
}

// Catalog rewrites a SELECT that reads PostgreSQL's catalogs, in place,
// into SQL over mink's emulated catalogs (see catalogRewriter). ok is
// false when the statement refers to no catalog relation or function;
// the tree may have changed all the same, so callers rewrite a copy.
func Catalog(tree *pg.Node, c CatalogConsts) (q CatalogQuery, ok bool, err error) {
	rw := &catalogRewriter{consts: c, rels: map[string]bool{}, outputCasts: map[*pg.TypeCast]bool{}, aliasOIDs: map[string]uint32{}}
	pg.Visit(tree, rw.visit)
	if !rw.catalog {
		return CatalogQuery{}, false, nil
	}
	if rw.err != nil {
		return CatalogQuery{}, true, rw.err
	}
	for k := range rw.rels {
		q.Relations = append(q.Relations, k)
	}
	slices.Sort(q.Relations)
	q.Macros = rw.macros
	return q, true, nil
}

// useMacro notes a call of a session macro, and the relations it reads.
func (rw *catalogRewriter) useMacro(name string) {
	rw.macros = true
	for _, dep := range pgcatalog.MacroDeps(name) {
		rw.rels[dep] = true
	}
}

func (rw *catalogRewriter) macroCall(name string, args ...*pg.Node) *pg.Node {
	rw.useMacro(name)
	return pg.Call(name, args...)
}

func (rw *catalogRewriter) fail(err error) {
	if rw.err == nil {
		rw.err = err
	}
	rw.catalog = true
}

func (rw *catalogRewriter) visit(n *pg.Node) bool {
	switch e := n.Node.(type) {
	case *pg.Node_SelectStmt:
		rw.selectStmt(e.SelectStmt)
	case *pg.Node_RangeVar:
		rw.rangeVar(e.RangeVar)
	case *pg.Node_RangeFunction:
		if repl := rw.rangeFunction(e.RangeFunction); repl != nil {
			n.Node = repl.Node
			if repl.GetRangeVar() != nil {
				return false // an emulated relation, rewritten already
			}
			return rw.visit(n)
		}
	case *pg.Node_FuncCall:
		if repl := rw.funcCall(e.FuncCall); repl != nil {
			n.Node = repl.Node
			return rw.visit(n)
		}
	case *pg.Node_SqlvalueFunction:
		if repl := rw.sqlValueFunction(e.SqlvalueFunction); repl != nil {
			n.Node = repl.Node
		}
	case *pg.Node_TypeCast:
		if repl := rw.typeCast(e.TypeCast); repl != nil {
			n.Node = repl.Node
			return rw.visit(n)
		}
	case *pg.Node_AExpr:
		if repl := rw.aExpr(e.AExpr); repl != nil {
			n.Node = repl.Node
			return rw.visit(n)
		}
	case *pg.Node_CollateClause:
		if isDefaultCollation(e.CollateClause.Collname) {
			rw.catalog = true
			n.Node = e.CollateClause.Arg.Node
			return rw.visit(n)
		}
	case *pg.Node_ColumnRef:
		f := e.ColumnRef.Fields
		if len(f) == 3 {
			if s := strings.ToLower(f[0].GetString_().GetSval()); s == "pg_catalog" || s == "information_schema" || s == "public" {
				e.ColumnRef.Fields = f[1:]
				f = f[1:]
			}
		}
		// The system column tableoid: the OID of the catalog the alias
		// names.
		if len(f) == 2 && f[1].GetString_().GetSval() == "tableoid" {
			if oid, ok := rw.aliasOIDs[f[0].GetString_().GetSval()]; ok {
				n.Node = pg.Cast(pg.IntConst(int64(oid)), "uinteger").Node
				return false
			}
		}
	}
	return true
}

// selectStmt marks reg* casts whose values are printed and gives NULLs in
// the target list PostgreSQL's type for them, text. It notes the aliases
// of catalogs in FROM, for tableoid.
func (rw *catalogRewriter) selectStmt(sel *pg.SelectStmt) {
	for _, from := range sel.FromClause {
		pg.Visit(from, func(n *pg.Node) bool {
			if rv := n.GetRangeVar(); rv != nil {
				if key, ok := pgcatalog.Key(rv.Schemaname, rv.Relname); ok {
					alias := rv.Relname
					if rv.Alias != nil {
						alias = rv.Alias.Aliasname
					}
					rw.aliasOIDs[alias], _ = pgcatalog.RelationOID(key)
				}
			}
			return n.GetRangeSubselect() == nil
		})
	}
	for _, t := range sel.TargetList {
		rt := t.GetResTarget()
		if rt == nil || rt.Val == nil {
			continue
		}
		if tc := rt.Val.GetTypeCast(); tc != nil {
			rw.outputCasts[tc] = true
		}
		if c := rt.Val.GetAConst(); c != nil && c.Isnull {
			rt.Val = pg.Cast(rt.Val, "varchar")
		}
	}
}

func isDefaultCollation(names []*pg.Node) bool {
	last := strings.ToLower(names[len(names)-1].GetString_().GetSval())
	return last == "default" && (len(names) == 1 || strings.ToLower(names[0].GetString_().GetSval()) == "pg_catalog")
}

func (rw *catalogRewriter) rangeVar(rv *pg.RangeVar) {
	key, ok := pgcatalog.Key(rv.Schemaname, rv.Relname)
	if !ok {
		switch strings.ToLower(rv.Schemaname) {
		case "pg_catalog", "information_schema":
			rw.fail(pgwire.Errorf(pgwire.CodeUndefinedTable, "relation \"%s.%s\" does not exist (mink emulates part of the catalog)", rv.Schemaname, rv.Relname))
		default:
			// A user table: mink's tables are the engine's views, outside
			// any schema called public (see stripPublic).

			if strings.EqualFold(rv.Schemaname, "public") {
				rv.Schemaname, rv.Catalogname = "", ""
			}
		}
		return
	}
	rw.catalog = true
	rw.rels[key] = true
	if rv.Alias == nil {
		rv.Alias = &pg.Alias{Aliasname: rv.Relname}
	}
	rv.Schemaname, rv.Catalogname, rv.Relname = "", "", pgcatalog.ViewName(key)
}

// rangeFunction handles set-returning functions in FROM; it returns a
// replacement for functions that are relations of the emulated catalog.
func (rw *catalogRewriter) rangeFunction(rf *pg.RangeFunction) *pg.Node {
	if len(rf.Functions) == 1 && !rf.Ordinality {
		if l := rf.Functions[0].GetList(); l != nil && len(l.Items) > 0 {
			if fc := l.Items[0].GetFuncCall(); fc != nil {
				if schema, name := pg.FuncName(fc); (schema == "" || schema == "pg_catalog") && name == "pg_get_keywords" {
					rw.catalog = true
					rw.rels[pgcatalog.KeywordsKey] = true
					alias := rf.Alias
					if alias == nil {
						alias = &pg.Alias{Aliasname: name}
					}
					return &pg.Node{Node: &pg.Node_RangeVar{RangeVar: &pg.RangeVar{Relname: pgcatalog.ViewName(pgcatalog.KeywordsKey), Inh: true, Relpersistence: "p", Alias: alias}}}
				}
			}
		}
	}
	for _, item := range rf.Functions {
		l := item.GetList()
		if l == nil || len(l.Items) == 0 {
			continue
		}
		fc := l.Items[0].GetFuncCall()
		if fc == nil {
			continue
		}
		schema, name := pg.FuncName(fc)
		if schema != "" && schema != "pg_catalog" && schema != "information_schema" {
			continue
		}
		if len(rf.Functions) == 1 && !rf.Ordinality && rf.Alias != nil && len(rf.Alias.Colnames) == 0 {
			if !setReturning[name] {
				// A scalar function in FROM is a one-row relation whose
				// column has the alias's name; DuckDB wants a subquery.
				alias := rf.Alias.Aliasname
				sub := &pg.SelectStmt{TargetList: []*pg.Node{{Node: &pg.Node_ResTarget{ResTarget: &pg.ResTarget{Name: alias, Val: l.Items[0]}}}}}
				return &pg.Node{Node: &pg.Node_RangeSubselect{RangeSubselect: &pg.RangeSubselect{
					Subquery: &pg.Node{Node: &pg.Node_SelectStmt{SelectStmt: sub}}, Alias: &pg.Alias{Aliasname: alias}}}}
			}
			if name == "generate_series" || name == "unnest" && len(fc.Args) == 1 {
				// generate_series(…) AS i: i is also the column's name.
				rf.Alias.Colnames = pg.Names(rf.Alias.Aliasname)
			}
		}
		switch name {
		case "pg_partition_ancestors":
			// A relation is its own only ancestor: mink's partitions are
			// not relations.
			rw.catalog = true
			rw.useMacro("mink_partition_ancestors")
			fc.Funcname = pg.Names("mink_partition_ancestors")
		case "generate_series", "unnest":
			if schema != "" {
				rw.catalog = true
				fc.Funcname = pg.Names(name)
			}
		}
	}
	return nil
}

// setReturning are the set-returning functions catalog queries call in
// FROM that DuckDB has as table functions (or that are rewritten here).
var setReturning = map[string]bool{
	"generate_series": true, "unnest": true, "generate_subscripts": true, "range": true,
	"pg_partition_ancestors": true, "pg_get_keywords": true, "json_each": true, "json_each_text": true,
	"jsonb_each": true, "jsonb_each_text": true, "regexp_split_to_table": true,
}

// macroFuncs are PostgreSQL functions that become a session macro of the
// same arguments.
var macroFuncs = map[string]string{
	"pg_get_userbyid":        "mink_get_userbyid",
	"pg_table_is_visible":    "mink_table_is_visible",
	"format_type":            "mink_format_type",
	"pg_encoding_to_char":    "mink_encoding_to_char",
	"array_upper":            "mink_array_upper",
	"array_lower":            "mink_array_lower",
	"pg_get_partkeydef":      "mink_partkeydef",
	"pg_get_viewdef":         "mink_viewdef",
	"pg_table_size":          "mink_table_size",
	"pg_relation_size":       "mink_table_size",
	"pg_total_relation_size": "mink_table_size",
	"pg_size_pretty":         "mink_size_pretty",
	"quote_ident":            "mink_quote_ident",
	"current_setting":        "mink_current_setting",
	"to_regclass":            "mink_to_regclass",
	"to_regtype":             "mink_regtype",
	"_pg_expandarray":        "mink_expandarray",
	"pg_partition_ancestors": "mink_partition_root",
	"pg_database_size":       "mink_database_size",
	"obj_description":        "mink_obj_description",
	"col_description":        "mink_col_description",
	"pg_get_serial_sequence": "mink_serial_sequence",
}

// regclassArgFuncs take a regclass, which a quoted name converts to.
var regclassArgFuncs = map[string]bool{
	"pg_table_size":          true,
	"pg_relation_size":       true,
	"pg_total_relation_size": true,
	"pg_get_viewdef":         true,
}

// nullFuncs describe objects mink does not have: indexes and constraints
// other than primary keys, triggers, functions, comments on shared
// objects.
var nullFuncs = map[string]bool{
	"shobj_description":  true,
	"pg_get_triggerdef":  true,
	"pg_get_functiondef": true, "pg_get_function_arguments": true, "pg_get_function_result": true,
	"pg_get_function_identity_arguments": true, "pg_get_statisticsobjdef_columns": true, "pg_get_ruledef": true,
	"inet_server_addr": true, "inet_client_addr": true,
	"pg_get_statisticsobjdef": true,
}

// zeroStatFuncs are statistics counters of relations (DBeaver reads an
// index's scans): mink counts none, and PostgreSQL's are 0 for a relation
// nothing has read since the statistics were reset.
var zeroStatFuncs = map[string]bool{
	"pg_stat_get_numscans": true, "pg_stat_get_tuples_returned": true, "pg_stat_get_tuples_fetched": true,
	"pg_stat_get_blocks_fetched": true, "pg_stat_get_blocks_hit": true,
}

// trueFuncs are privilege and visibility checks of objects every role may
// use (schemas, the database, types, functions; a table's are
// privilegeCall's) and that are in the search path.
var trueFuncs = map[string]bool{
	"has_schema_privilege": true, "has_database_privilege": true, "has_function_privilege": true,
	"has_sequence_privilege": true, "has_type_privilege": true, "has_tablespace_privilege": true,
	"pg_type_is_visible": true, "pg_function_is_visible": true,
	"pg_opclass_is_visible": true, "pg_operator_is_visible": true, "pg_collation_is_visible": true,
	"pg_conversion_is_visible": true,
}

// falseFuncs are checks for states mink is never in.
var falseFuncs = map[string]bool{
	"pg_is_in_recovery": true, "pg_jit_available": true, "pg_relation_is_publishable": true,
	"pg_is_other_temp_schema": true,
}

// stringArray is the text[] constant of elems.
func stringArray(elems []string) *pg.Node {
	arr := &pg.A_ArrayExpr{}
	for _, e := range elems {
		arr.Elements = append(arr.Elements, pg.StringConst(e))
	}
	return pg.CastArray(&pg.Node{Node: &pg.Node_AArrayExpr{AArrayExpr: arr}}, "text")
}

func (rw *catalogRewriter) funcCall(fc *pg.FuncCall) *pg.Node {
	schema, name := pg.FuncName(fc)
	if schema != "" && schema != "pg_catalog" && schema != "information_schema" {
		return nil
	}
	if fc.Over != nil || fc.AggStar {
		if schema != "" {
			fc.Funcname = pg.Names(name)
			rw.catalog = true
		}
		return nil
	}
	hit := func() { rw.catalog = true }
	switch {
	case name == "version":
		hit()
		return pg.StringConst(rw.consts.Version)
	case name == "current_database":
		hit()
		return pg.StringConst(rw.consts.Database)
	case name == "current_schema":
		hit()
		if len(rw.consts.Schemas) == 0 {
			return pg.Cast(pg.NullConst(), "text")
		}
		return pg.StringConst(rw.consts.Schemas[0])
	case name == "current_schemas" && len(fc.Args) == 1:
		// mink_current_schemas(implicit, with pg_catalog, without).
		hit()
		with := append([]string{"pg_catalog"}, rw.consts.Schemas...)
		return rw.macroCall("mink_current_schemas", fc.Args[0], stringArray(with), stringArray(rw.consts.Schemas))
	case name == "pg_backend_pid":
		hit()
		return pg.Cast(pg.IntConst(int64(rw.consts.PID)), "int4")
	case name == "pg_postmaster_start_time":
		hit()
		return pg.Call("now")
	case name == "pg_get_expr" && len(fc.Args) > 0:
		// Expressions (defaults) are stored as text already.
		hit()
		return fc.Args[0]
	case name == "set_config" && len(fc.Args) == 3:
		// Reports the value; mink's settings change with SET only.
		hit()
		return pg.Cast(fc.Args[1], "varchar")
	case name == "pg_char_to_encoding":
		hit()
		return pg.Cast(pg.IntConst(pgcatalog.EncodingUTF8), "int4")
	case name == "pg_get_indexdef" && len(fc.Args) > 0:
		// pg_get_indexdef(index [, column, pretty]): the primary keys'
		// indexes only (mink.keydefs).
		col := pg.IntConst(0)
		if len(fc.Args) > 1 {
			col = fc.Args[1]
		}
		hit()
		return rw.macroCall("mink_indexdef", fc.Args[0], col)
	case name == "pg_get_constraintdef" && len(fc.Args) > 0:
		hit()
		return rw.macroCall("mink_indexdef", fc.Args[0], pg.IntConst(0))
	case name == "has_table_privilege" || name == "has_any_column_privilege" || name == "has_column_privilege":
		hit()
		return rw.privilegeCall(name, fc)
	case name == "pg_has_role":
		hit()
		return rw.hasRoleCall(fc)
	case nullFuncs[name]:
		hit()
		return pg.Cast(pg.NullConst(), "varchar")
	case zeroStatFuncs[name] && len(fc.Args) == 1:
		hit()
		return strictConst(fc.Args[0], pg.Cast(pg.IntConst(0), "int8"))
	case name == "pg_tablespace_location" && len(fc.Args) == 1:
		// mink's tablespaces are pg_default and pg_global, whose location
		// PostgreSQL prints as the empty string.
		hit()
		return strictConst(fc.Args[0], pg.Cast(pg.StringConst(""), "varchar"))
	case trueFuncs[name]:
		hit()
		return pg.BoolConst(true)
	case falseFuncs[name]:
		hit()
		return pg.BoolConst(false)
	}
	if name == "string_to_array" && len(fc.Args) == 2 {
		// DuckDB's string_to_array is a macro, which it cannot expand in
		// a table function's arguments.
		fc.Funcname = pg.Names("string_split")
		return nil
	}
	if name == "obj_description" && len(fc.Args) == 1 {
		// The deprecated form without the catalog's name.
		hit()
		rw.useMacro("mink_obj_description_any")
		fc.Funcname = pg.Names("mink_obj_description_any")
		return nil
	}
	if m, ok := macroFuncs[name]; ok {
		hit()
		rw.useMacro(m)
		fc.Funcname = pg.Names(m)
		if (name == "current_setting" || name == "pg_get_viewdef") && len(fc.Args) > 1 {
			// current_setting's missing_ok: an unknown setting is NULL
			// anyway; pg_get_viewdef's pretty or wrap column: mink's
			// definitions are one line.
			fc.Args = fc.Args[:1]
		}
		if regclassArgFuncs[name] && len(fc.Args) == 1 {
			// pg_table_size('t'): PostgreSQL reads the quoted name as
			// regclass, the argument's type.
			if c := fc.Args[0].GetAConst(); c != nil && c.GetSval() != nil {
				if n := rw.regLiteral("regclass", c.GetSval().Sval); n != nil {
					fc.Args[0] = n
				}
			}
		}
		return nil
	}
	if schema != "" && fc.Funcformat != pg.CoercionForm_COERCE_SQL_SYNTAX {
		// pg_catalog.lower(…), pg_catalog.array_to_string(…), …: DuckDB's
		// function of the same name. (The parser's pg_catalog.btrim(x)
		// for TRIM(x) and friends stay: they deparse to SQL syntax,
		// which DuckDB reads.)
		hit()
		fc.Funcname = pg.Names(name)
	}
	return nil
}

// strictConst is value, or NULL when arg is NULL: a strict function of arg
// whose result does not depend on it.
func strictConst(arg, value *pg.Node) *pg.Node {
	return &pg.Node{Node: &pg.Node_CaseExpr{CaseExpr: &pg.CaseExpr{
		Args: []*pg.Node{{Node: &pg.Node_CaseWhen{CaseWhen: &pg.CaseWhen{
			Expr:   &pg.Node{Node: &pg.Node_NullTest{NullTest: &pg.NullTest{Arg: arg, Nulltesttype: pg.NullTestType_IS_NOT_NULL}}},
			Result: value,
		}}}},
	}}}
}

func (rw *catalogRewriter) sqlValueFunction(f *pg.SQLValueFunction) *pg.Node {
	switch f.Op {
	case pg.SQLValueFunctionOp_SVFOP_CURRENT_USER, pg.SQLValueFunctionOp_SVFOP_USER,
		pg.SQLValueFunctionOp_SVFOP_SESSION_USER, pg.SQLValueFunctionOp_SVFOP_CURRENT_ROLE:
		rw.catalog = true
		return pg.StringConst(rw.consts.User)
	case pg.SQLValueFunctionOp_SVFOP_CURRENT_CATALOG:
		rw.catalog = true
		return pg.StringConst(rw.consts.Database)
	case pg.SQLValueFunctionOp_SVFOP_CURRENT_SCHEMA:
		rw.catalog = true
		return pg.StringConst("public")
	}
	return nil
}

// typeCast rewrites casts to PostgreSQL types DuckDB does not have.
func (rw *catalogRewriter) typeCast(tc *pg.TypeCast) *pg.Node {
	tn := tc.TypeName
	if tn == nil || len(tn.Names) == 0 {
		return nil
	}
	last := strings.ToLower(tn.Names[len(tn.Names)-1].GetString_().GetSval())
	qualified := len(tn.Names) > 1 && strings.ToLower(tn.Names[0].GetString_().GetSval()) == "pg_catalog"
	isArray := len(tn.ArrayBounds) > 0
	if isArray {
		// '{1,2}'::int[]: PostgreSQL's array literal is not DuckDB's.
		if lit := tc.Arg.GetAConst().GetSval(); lit != nil {
			if elems, ok := pg.ArrayConsts(lit.Sval); ok {
				rw.catalog = true
				tc.Arg = &pg.Node{Node: &pg.Node_AArrayExpr{AArrayExpr: &pg.A_ArrayExpr{Elements: elems}}}
			}
		}
	}
	if !isArray {
		switch last {
		case "regclass", "regtype", "regnamespace", "regrole", "regproc", "regprocedure", "regoper", "regoperator", "regconfig", "regdictionary":
			rw.catalog = true
			return rw.regCast(tc, last)
		case "oid", "xid", "cid", "xid8":
			rw.catalog = true
			return pg.Cast(tc.Arg, "uinteger")
		case "name", "char", "pg_node_tree", "aclitem", "pg_lsn", "inet", "cstring", "anyarray", "unknown":
			if last == "char" && qualified {
				break // char(n) is pg_catalog.bpchar; "char" is unqualified
			}
			rw.catalog = true
			return pg.Cast(tc.Arg, "varchar")
		case "int2vector":
			rw.catalog = true
			return pg.CastArray(tc.Arg, "smallint")
		case "oidvector":
			rw.catalog = true
			return pg.CastArray(tc.Arg, "uinteger")
		case "text", "varchar":
			// x::regclass::text prints the name.
			if inner := tc.Arg.GetTypeCast(); inner != nil && last == "text" {
				rw.outputCasts[inner] = true
			}
			// indkey::varchar is "1 2", as SQLAlchemy's index reflection
			// reads it.
			if cr := tc.Arg.GetColumnRef(); cr != nil && pgcatalog.VectorColumn(cr.Fields[len(cr.Fields)-1].GetString_().GetSval()) {
				rw.catalog = true
				return pg.Call("array_to_string", tc.Arg, pg.StringConst(" "))
			}
		}
	} else {
		switch last {
		case "oid", "regtype", "regclass", "xid":
			rw.catalog = true
			return pg.CastArray(tc.Arg, "uinteger")
		case "name", "char", "aclitem":
			if !(last == "char" && qualified) {
				rw.catalog = true
				return pg.CastArray(tc.Arg, "varchar")
			}
		}
	}
	if qualified {
		// The parser qualifies SQL's own type names (integer is
		// pg_catalog.int4); a cast alone does not make a catalog query
		// (sqlfront's engine rewrite drops the qualifier where DuckDB
		// needs it).
		tn.Names = tn.Names[1:]
	}
	return nil
}

// regCast rewrites x::regclass and the other reg* casts: a name literal
// becomes a lookup, a number its value; a printed value becomes a name.
func (rw *catalogRewriter) regCast(tc *pg.TypeCast, typ string) *pg.Node {
	output := rw.outputCasts[tc]
	arg := tc.Arg
	var value *pg.Node
	if s := arg.GetAConst().GetSval(); s != nil {
		if n, err := strconv.ParseUint(strings.TrimSpace(s.Sval), 10, 32); err == nil {
			value = pg.Cast(pg.IntConst(int64(n)), "uinteger")
		} else {
			value = rw.regLiteral(typ, s.Sval)
		}
	} else if isTextual(arg) {
		value = rw.regLookup(typ, arg)
	} else if typ == "regproc" || typ == "regprocedure" {
		value = pg.Cast(arg, "varchar")
	} else {
		value = pg.Cast(arg, "uinteger")
	}
	if !output || value == nil {
		return value
	}
	switch typ {
	case "regclass":
		return rw.macroCall("mink_regclass_out", value)
	case "regtype":
		return rw.macroCall("mink_format_type", value, pg.Cast(pg.NullConst(), "int4"))
	case "regnamespace":
		return rw.macroCall("mink_nspname", value)
	case "regrole":
		return rw.macroCall("mink_get_userbyid", value)
	}
	return value
}

// isTextual reports whether n is a text value: a parameter or a cast to a
// string type.
func isTextual(n *pg.Node) bool {
	if n.GetParamRef() != nil {
		return true
	}
	if tc := n.GetTypeCast(); tc != nil && len(tc.TypeName.ArrayBounds) == 0 {
		names := tc.TypeName.Names
		switch strings.ToLower(names[len(names)-1].GetString_().GetSval()) {
		case "text", "varchar", "name", "bpchar":
			return true
		}
	}
	return false
}

// regLiteral resolves 'name'::regclass and friends.
func (rw *catalogRewriter) regLiteral(typ, lit string) *pg.Node {
	switch typ {
	case "regclass":
		parts, err := parseQualifiedName(lit)
		if err != nil {
			rw.fail(err)
			return nil
		}
		schema := ""
		if len(parts) == 2 {
			schema = parts[0]
		}
		lookup := rw.macroCall("mink_regclass", pg.StringConst(schema), pg.StringConst(parts[len(parts)-1]))
		key := schema
		if key == "" {
			key = "pg_catalog"
		}
		if _, ok := pgcatalog.RelationOID(key + "." + parts[len(parts)-1]); ok {
			return lookup // an emulated catalog: it exists
		}
		// A relation that does not exist fails the statement (42P01), as
		// PostgreSQL's regclass input does.
		missing := pg.Call("error", pg.StringConst(engine.Raised(pgwire.CodeUndefinedTable,
			fmt.Sprintf("relation %q does not exist", strings.Join(parts, ".")))))
		return &pg.Node{Node: &pg.Node_CoalesceExpr{CoalesceExpr: &pg.CoalesceExpr{Args: []*pg.Node{lookup, missing}}}}
	case "regtype":
		oid, ok := typeOIDByName(lit)
		if !ok {
			rw.fail(pgwire.Errorf(pgwire.CodeUndefinedObject, "type %q does not exist", lit))
			return nil
		}
		return pg.Cast(pg.IntConst(int64(oid)), "uinteger")
	case "regnamespace":
		switch strings.Trim(lit, `"`) {
		case "pg_catalog":
			return pg.Cast(pg.IntConst(int64(pgcatalog.OIDPgCatalog)), "uinteger")
		case "public":
			return pg.Cast(pg.IntConst(int64(pgcatalog.OIDPublic)), "uinteger")
		case "information_schema":
			return pg.Cast(pg.IntConst(int64(pgcatalog.OIDInformationSchema)), "uinteger")
		}
		rw.fail(pgwire.Errorf(pgwire.CodeUndefinedObject, "schema %q does not exist", lit))
		return nil
	case "regrole":
		// A role name is an identifier here: folded to lower case unless
		// quoted.
		parts, err := parseQualifiedName(lit)
		if err != nil || len(parts) != 1 {
			rw.fail(pgwire.Errorf(pgwire.CodeInvalidName, "invalid name syntax"))
			return nil
		}
		return rw.macroCall("mink_role_oid", pg.StringConst(parts[0]), pg.BoolConst(false))
	case "regproc", "regprocedure":
		// Functions are identified by name (pg_type.typinput and friends
		// hold names).
		name := lit
		if i := strings.IndexByte(name, '('); i >= 0 {
			name = name[:i]
		}
		if i := strings.LastIndexByte(name, '.'); i >= 0 {
			name = name[i+1:]
		}
		return pg.StringConst(name)
	}
	rw.fail(pgwire.Errorf(pgwire.CodeFeatureNotSupported, "casts to %s are not supported by mink", typ))
	return nil
}

// regLookup resolves a text value to an OID when the statement runs.
func (rw *catalogRewriter) regLookup(typ string, arg *pg.Node) *pg.Node {
	switch typ {
	case "regclass":
		return rw.macroCall("mink_to_regclass", arg)
	case "regtype":
		return rw.macroCall("mink_regtype", arg)
	case "regrole":
		return rw.macroCall("mink_role_oid", arg, pg.BoolConst(false))
	case "regproc", "regprocedure":
		return pg.Cast(arg, "varchar")
	}
	rw.fail(pgwire.Errorf(pgwire.CodeFeatureNotSupported, "casts of text to %s are not supported by mink", typ))
	return nil
}

// typeOIDByName resolves a type name as regtype input does.
func typeOIDByName(name string) (uint32, bool) {
	n := strings.ToLower(strings.TrimSpace(name))
	n = strings.TrimPrefix(n, "pg_catalog.")
	if oid, ok := pgcatalog.TypeAliases()[n]; ok {
		return oid, true
	}
	if t, err := sqltypes.Parse(n); err == nil {
		return t.OID(), true
	}
	return 0, false
}

// parseQualifiedName splits a possibly schema-qualified, possibly quoted
// relation name as PostgreSQL's regclass input does.
func parseQualifiedName(s string) ([]string, error) {
	tree, err := pg.Parse("SELECT * FROM " + s)
	if err == nil && len(tree.Stmts) == 1 {
		if from := tree.Stmts[0].Stmt.GetSelectStmt().GetFromClause(); len(from) == 1 {
			if rv := from[0].GetRangeVar(); rv != nil && rv.Alias == nil {
				if rv.Schemaname != "" {
					return []string{rv.Schemaname, rv.Relname}, nil
				}
				return []string{rv.Relname}, nil
			}
		}
	}
	return nil, pgwire.Errorf(pgwire.CodeInvalidTextRepresentation, "invalid name syntax: %q", s)
}

// aExpr rewrites PostgreSQL's regular expression operators, which search
// (DuckDB's ~ matches the whole string), and drops pg_catalog from
// OPERATOR(pg_catalog.op).
func (rw *catalogRewriter) aExpr(e *pg.A_Expr) *pg.Node {
	if len(e.Name) == 2 && strings.ToLower(e.Name[0].GetString_().GetSval()) == "pg_catalog" {
		rw.catalog = true
		e.Name = e.Name[1:]
	}
	if (e.Kind == pg.A_Expr_Kind_AEXPR_LIKE || e.Kind == pg.A_Expr_Kind_AEXPR_ILIKE) && len(e.Name) == 1 {
		return likeCall(e)
	}
	if e.Kind != pg.A_Expr_Kind_AEXPR_OP || len(e.Name) != 1 || e.Lexpr == nil {
		return nil
	}
	var call *pg.Node
	negate := false
	switch e.Name[0].GetString_().GetSval() {
	case "~":
		call = pg.Call("regexp_matches", e.Lexpr, e.Rexpr)
	case "!~":
		call, negate = pg.Call("regexp_matches", e.Lexpr, e.Rexpr), true
	case "~*":
		call = pg.Call("regexp_matches", e.Lexpr, e.Rexpr, pg.StringConst("i"))
	case "!~*":
		call, negate = pg.Call("regexp_matches", e.Lexpr, e.Rexpr, pg.StringConst("i")), true
	default:
		return nil
	}
	if !negate {
		return call
	}
	return &pg.Node{Node: &pg.Node_BoolExpr{BoolExpr: &pg.BoolExpr{Boolop: pg.BoolExprType_NOT_EXPR, Args: []*pg.Node{call}}}}
}

// likeCall rewrites LIKE and ILIKE, whose escape character is a
// backslash unless ESCAPE says otherwise (DuckDB's has none): psql's tab
// completion matches 'pg\_cl%'.
func likeCall(e *pg.A_Expr) *pg.Node {
	op := e.Name[0].GetString_().GetSval()
	fn := "like_escape"
	if e.Kind == pg.A_Expr_Kind_AEXPR_ILIKE {
		fn = "ilike_escape"
	}
	pattern, escape := e.Rexpr, pg.StringConst(`\`)
	if fc := e.Rexpr.GetFuncCall(); fc != nil && len(fc.Args) == 2 {
		if _, name := pg.FuncName(fc); name == "like_escape" {
			pattern, escape = fc.Args[0], fc.Args[1]
		}
	}
	call := pg.Call(fn, e.Lexpr, pattern, escape)
	if strings.HasPrefix(op, "!") {
		return &pg.Node{Node: &pg.Node_BoolExpr{BoolExpr: &pg.BoolExpr{Boolop: pg.BoolExprType_NOT_EXPR, Args: []*pg.Node{call}}}}
	}
	return call
}
