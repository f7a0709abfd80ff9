package translate

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	pg "github.com/minkdb/mink/sqlfront/pgtree"

	"github.com/minkdb/mink/internal/sqltypes"
	"github.com/minkdb/mink/sqlfront/engine"
	"github.com/minkdb/mink/sqlfront/pgcatalog"
	"github.com/minkdb/mink/sqlfront/pgwire"
)

// StripPublic removes "public." (and "mink.public.") qualifiers from the
// table references in sql: mink's tables are the engine's temporary views,
// which live outside any schema named public. Edits are made on the text at
// the parser's locations, so the rest of the statement is sent as written.
func StripPublic(sql string, node *pg.Node) string {
	type cut struct{ from, to int }
	var cuts []cut
	for _, rv := range pg.RangeVars(node) {
		if rv.Schemaname != "public" || rv.Location < 0 || int(rv.Location) >= len(sql) {
			continue
		}
		at := int(rv.Location)
		rest := sql[at:]
		n := 0
		for _, prefix := range []string{"mink.", `"mink".`} {
			if rv.Catalogname != "" && hasPrefixFold(rest[n:], prefix) {
				n += len(prefix)
			}
		}
		for _, prefix := range []string{"public.", `"public".`} {
			if hasPrefixFold(rest[n:], prefix) {
				n += len(prefix)
				cuts = append(cuts, cut{at, at + n})
				break
			}
		}
	}
	if len(cuts) == 0 {
		return sql
	}
	sort.Slice(cuts, func(i, j int) bool { return cuts[i].from > cuts[j].from })
	for _, c := range cuts {
		sql = sql[:c.from] + sql[c.to:]
	}
	return sql
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// engineRewriter rewrites a parsed SELECT where DuckDB's semantics differ
// from PostgreSQL's and a rewrite restores PostgreSQL's (docs/sql.md):
//
//   - x / y and x % y raise 22012 when y is zero (DuckDB returns NULL):
//     the divisor goes through the macro mink_divisor, unless it is a
//     nonzero constant;
//   - x ~ re (and !~, ~*, !~*) search, as PostgreSQL's do, through
//     regexp_matches (DuckDB's ~ matches the whole string);
//   - sum of a smallint or integer column is bigint (DuckDB: HUGEINT,
//     described as numeric); length, char_length, octet_length, position
//     and strpos are integer (DuckDB: BIGINT); date - date is integer;
//   - to_char(timestamp or date, 'constant format') becomes strftime with
//     the format translated (the common fields; others stay an error);
//   - x::varchar(n) and x::char(n) truncate to n characters (DuckDB
//     ignores the length);
//   - '\x…'::bytea is hex (DuckDB reads \x as an escape of one byte);
//   - a timestamptz literal of a time without seconds and an offset
//     ('10:00+01') gets its seconds (DuckDB requires them);
//   - a date literal with the year last ('01/02/2024') is put in ISO
//     order as DateStyle reads it (DuckDB reads only ISO);
//   - date_trunc of a date truncates it as a timestamptz; initcap and
//     justify_* call the engine's macros (engineMacros); format's %I
//     quotes keywords as quote_ident does.
//
// WHERE and HAVING conditions that are not boolean are rejected before,
// by CheckConditions.
//
// It works on the tree in place; changed says whether the statement must
// be deparsed.
type engineRewriter struct {
	t       translator
	changed bool
	// wrapped are the calls already rewritten: a rewrite that wraps a
	// node is visited again through its children.
	wrapped     map[*pg.FuncCall]bool
	wrappedExpr map[*pg.A_Expr]bool
	wrappedFrom map[*pg.RangeFunction]bool
	// root is the top-level SELECT when its numeric quotients are to be
	// computed exactly (numeric.go); quotients are the positions of the
	// result columns rewritten so.
	root      *pg.SelectStmt
	quotients map[int]bool
	// statementRows is the SELECT whose rows an INSERT, UPDATE or DELETE
	// writes (Select).
	statementRows *pg.SelectStmt
	statementArms []*pg.SelectStmt
	// tree is the statement; paramUses counts its uses of each parameter
	// (castable).
	tree      *pg.Node
	paramUses map[int32]int
}

// Query returns the SQL to send to the engine for a SELECT:
// sql itself, unless a rewrite applied; the rewritten tree; and the result
// columns computed as quotient text (numeric.go).
//
// original is the statement as the client sent it (the positions in node
// are in it); sql is what the engine would run as written.
func Query(env Env, original, sql string, node *pg.Node) (string, *pg.Node, map[int]bool) {
	tree := proto.Clone(node).(*pg.Node)
	if node.GetSelectStmt() == nil && node.GetExplainStmt() == nil {
		return sql, tree, nil
	}
	changed, quotients := Tree(env, tree, true)
	if unqualifyTypes(original, tree) {
		changed = true // DuckDB does not read pg_catalog.int4
	}
	if len(engineKeywordUses(sql)) > 0 {
		changed = true // deparse quotes them
	}
	UnqualifyPublic(tree)
	if !changed {
		return sql, tree, nil
	}
	out, err := Deparse(tree)
	if err != nil {
		return sql, tree, nil
	}
	return out, tree, quotients
}

// Tree applies engineRewriter to a statement's tree in
// place and reports whether it changed anything, and which result columns
// it computes as quotient text when quotients is set. The catalog path
// (planCatalogQuery) calls it on its own rewritten tree, without.
func Tree(env Env, tree *pg.Node, quotients bool) (bool, map[int]bool) {
	rw := &engineRewriter{t: translator{env}, wrapped: map[*pg.FuncCall]bool{}, wrappedExpr: map[*pg.A_Expr]bool{}, wrappedFrom: map[*pg.RangeFunction]bool{}, quotients: map[int]bool{}}
	if quotients {
		rw.root = tree.GetSelectStmt()
	}
	rw.tree = tree
	rw.node(tree, &fromScope{})
	return rw.changed, rw.quotients
}

// Select applies engineRewriter to a SELECT that a
// statement other than a query runs (an INSERT's source, the rows of an
// UPDATE or DELETE), in place.
func Select(env Env, sel *pg.SelectStmt) {
	if sel.Op == pg.SetOperation_SET_OPERATION_UNDEFINED {
		sel.Op = pg.SetOperation_SETOP_NONE // built by mink, not parsed
	}
	rw := &engineRewriter{t: translator{env}, wrapped: map[*pg.FuncCall]bool{}, wrappedExpr: map[*pg.A_Expr]bool{}, wrappedFrom: map[*pg.RangeFunction]bool{},
		quotients: map[int]bool{}, statementRows: sel}
	rw.tree = &pg.Node{Node: &pg.Node_SelectStmt{SelectStmt: sel}}
	rw.node(rw.tree, &fromScope{})
	UnqualifyPublic(rw.tree)
}

// UnqualifyPublic drops the schema (and database) of tables in public:
// the engine knows them by their names alone.
func UnqualifyPublic(tree *pg.Node) {
	for _, rv := range pg.RangeVars(tree) {
		if rv.Schemaname == "public" {
			rv.Schemaname, rv.Catalogname = "", ""
		}
	}
}

// Expr applies engineRewriter to an expression outside a
// SELECT (ON CONFLICT … DO UPDATE SET and WHERE) and returns it rewritten.
func Expr(env Env, n *pg.Node) *pg.Node {
	sel := &pg.SelectStmt{TargetList: []*pg.Node{pg.Target("x", n)}}
	Select(env, sel)
	return sel.TargetList[0].GetResTarget().Val
}

func (rw *engineRewriter) node(n *pg.Node, sc *fromScope) {
	pg.Visit(n, func(m *pg.Node) bool { return rw.visit(m, sc) })
}

func (rw *engineRewriter) visit(n *pg.Node, sc *fromScope) bool {
	var repl *pg.Node
	switch x := n.Node.(type) {
	case *pg.Node_SelectStmt:
		rw.selectStmt(x.SelectStmt, sc)
		return false
	case *pg.Node_AExpr:
		if !rw.wrappedExpr[x.AExpr] {
			repl = rw.aExpr(x.AExpr, sc)
		}
	case *pg.Node_FuncCall:
		if !rw.wrapped[x.FuncCall] {
			repl = rw.funcCall(x.FuncCall, sc)
		}
	case *pg.Node_TypeCast:
		repl = rw.typeCast(x.TypeCast)
	case *pg.Node_AIndirection:
		var changed bool
		repl, changed = rewriteSubscripts(x.AIndirection)
		rw.changed = rw.changed || changed
	case *pg.Node_RangeFunction:
		if !rw.wrappedFrom[x.RangeFunction] {
			repl = rw.rangeFunction(x.RangeFunction)
		}
	case *pg.Node_SqlvalueFunction:
		switch x.SqlvalueFunction.Op {
		case pg.SQLValueFunctionOp_SVFOP_CURRENT_USER, pg.SQLValueFunctionOp_SVFOP_SESSION_USER,
			pg.SQLValueFunctionOp_SVFOP_CURRENT_ROLE, pg.SQLValueFunctionOp_SVFOP_USER:
			// The engine's own answer would be "duckdb".
			repl = pg.StringConst(rw.t.User())
		}
	}
	if repl != nil {
		n.Node = repl.Node
		rw.changed = true
	}
	return true
}

func (rw *engineRewriter) selectStmt(sel *pg.SelectStmt, outer *fromScope) {
	if sel.Op != pg.SetOperation_SETOP_NONE {
		if sel == rw.statementRows || slices.Contains(rw.statementArms, sel) {
			// The arms of a UNION in an INSERT give its rows too.
			rw.statementArms = append(rw.statementArms, sel.Larg, sel.Rarg)
		}
		if sel.Larg != nil {
			rw.selectStmt(sel.Larg, outer)
		}
		if sel.Rarg != nil {
			rw.selectStmt(sel.Rarg, outer)
		}
		for _, n := range sel.SortClause {
			rw.node(n, outer)
		}
		return
	}
	ctes := map[string]bool{}
	if wc := sel.WithClause; wc != nil {
		for _, c := range wc.Ctes {
			rw.node(c.GetCommonTableExpr().GetCtequery(), outer)
			ctes[c.GetCommonTableExpr().GetCtename()] = true
		}
	}
	scope := &fromScope{}
	for _, item := range sel.FromClause {
		rw.node(item, outer)
		rw.t.addFromItem(scope, item, ctes)
	}
	if sel == rw.root {
		for i, ops := range quotientTargets(sel, scope) {
			rt := sel.TargetList[i].GetResTarget()
			for _, ref := range refsTo(sel, i, rt) {
				ref.Node = proto.Clone(rt.Val).(*pg.Node).Node
			}
			divisor := ops[1]
			if rt.Val.GetAExpr() != nil {
				divisor = pg.Call("mink_divisor", divisor)
				rw.wrapped[divisor.GetFuncCall()] = true
			}
			rt.Val = concatText(pg.Cast(ops[0], "text"), pg.StringConst("/"), pg.Cast(divisor, "text"))
			rw.quotients[i] = true
			rw.changed = true
		}
	}
	for _, t := range sel.TargetList {
		// An untyped parameter that is a result column is text, as in
		// PostgreSQL (DuckDB cannot type it); not in the SELECT of an
		// INSERT, UPDATE or DELETE, where it takes its column's type.
		if sel == rw.statementRows || slices.Contains(rw.statementArms, sel) {
			break
		}
		if rt := t.GetResTarget(); rt != nil && rt.Val.GetParamRef() != nil {
			rt.Val = pg.Cast(rt.Val, "text")
			rw.changed = true
		}
	}
	rw.groupByResultColumns(sel, scope)
	rw.groupByPrimaryKeys(sel, scope)
	for _, list := range [][]*pg.Node{sel.TargetList, sel.GroupClause, sel.SortClause, sel.WindowClause, sel.DistinctClause} {
		for _, n := range list {
			rw.node(n, scope)
		}
	}
	for _, n := range []*pg.Node{sel.WhereClause, sel.HavingClause, sel.LimitCount, sel.LimitOffset} {
		rw.node(n, scope)
	}
	for _, vl := range sel.ValuesLists {
		rw.node(vl, scope)
	}
}

// groupByResultColumns replaces a GROUP BY item that is a bare name of a
// result column and also the alias of a FROM relation by the result
// column's expression. PostgreSQL reads a bare name in GROUP BY as an input
// column, else as a result column, never as a whole row; DuckDB reads the
// name of a relation as its whole row (dbt's relation query groups by
// result columns named like its FROM aliases). A relation known to have
// a column of that name keeps the name.
func (rw *engineRewriter) groupByResultColumns(sel *pg.SelectStmt, sc *fromScope) {
	for _, g := range sel.GroupClause {
		cr := g.GetColumnRef()
		if cr == nil || len(cr.Fields) != 1 {
			continue
		}
		name := cr.Fields[0].GetString_().GetSval()
		if name == "" || !sc.hasRelation(name) || sc.hasColumn(name) {
			continue
		}
		var target *pg.Node
		matches := 0
		for _, t := range sel.TargetList {
			if rt := t.GetResTarget(); rt != nil && rt.Name == name {
				target, matches = rt.Val, matches+1
			}
		}
		if matches == 1 {
			g.Node = proto.Clone(target).(*pg.Node).Node
			rw.changed = true
		}
	}
}

// groupByPrimaryKeys adds to a GROUP BY that lists every primary-key
// column of a table of the FROM clause the table's other columns.
// PostgreSQL lets such a query select them (they depend on the key: SQL's
// functional dependency), and ORMs rely on it (Django groups
// annotate(Count(…)) by the model's id alone); DuckDB wants them grouped
// or aggregated. Grouping by columns the key determines makes the same
// groups. A GROUP BY of grouping sets is left alone.
func (rw *engineRewriter) groupByPrimaryKeys(sel *pg.SelectStmt, sc *fromScope) {
	if len(sel.GroupClause) == 0 || slices.ContainsFunc(sel.GroupClause, func(g *pg.Node) bool { return g.GetGroupingSet() != nil }) {
		return
	}
	// grouped reports whether the GROUP BY names column col of rel, by
	// rel's alias or, when no other relation has such a column, alone.
	grouped := func(rel relScope, col string) bool {
		for _, g := range sel.GroupClause {
			cr := g.GetColumnRef()
			if cr == nil {
				continue
			}
			switch f := cr.Fields; {
			case len(f) == 2 && f[0].GetString_().GetSval() == rel.alias && f[1].GetString_().GetSval() == col:
				return true
			case len(f) == 1 && f[0].GetString_().GetSval() == col:
				n := 0
				for _, r := range sc.rels {
					if slices.Contains(r.names, col) {
						n++
					}
				}
				if n == 1 {
					return true
				}
			}
		}
		return false
	}
	for _, rel := range sc.rels {
		if len(rel.key) == 0 || rel.alias == "" || slices.ContainsFunc(rel.key, func(k string) bool { return !grouped(rel, k) }) {
			continue
		}
		for _, col := range rel.names {
			if !grouped(rel, col) {
				sel.GroupClause = append(sel.GroupClause, &pg.Node{Node: &pg.Node_ColumnRef{ColumnRef: &pg.ColumnRef{Fields: pg.Names(rel.alias, col)}}})
				rw.changed = true
			}
		}
	}
}

// anyArrayCompare turns x = ANY(array) into anyEqual's CASE, and x <>
// ALL(array) into its negation, with PostgreSQL's NULLs. The engine reads
// ANY(array) as a subquery, which it cannot join on outside an inner join
// (SQLAlchemy's index reflection joins pg_attribute ON attnum =
// ANY(indkey)); other operators stay as they are.
func anyArrayCompare(e *pg.A_Expr) *pg.Node {
	if len(e.Name) != 1 || e.Lexpr == nil || e.Rexpr == nil {
		return nil
	}
	if hasParam(e.Lexpr) || hasParam(e.Rexpr) {
		// id = ANY($1): the engine's own reading types $1 when it prepares
		// the statement; the CASE form leaves the statement's result
		// columns untyped (text).
		return nil
	}
	op := e.Name[0].GetString_().GetSval()
	switch {
	case e.Kind == pg.A_Expr_Kind_AEXPR_OP_ANY && op == "=":
		return anyEqual(e.Lexpr, e.Rexpr)
	case e.Kind == pg.A_Expr_Kind_AEXPR_OP_ALL && op == "<>":
		return &pg.Node{Node: &pg.Node_BoolExpr{BoolExpr: &pg.BoolExpr{Boolop: pg.BoolExprType_NOT_EXPR,
			Args: []*pg.Node{anyEqual(e.Lexpr, e.Rexpr)}}}}
	}
	return nil
}

// hasParam reports whether a parameter ($n) is under n.
func hasParam(n *pg.Node) bool {
	found := false
	pg.Visit(n, func(m *pg.Node) bool {
		found = found || m.GetParamRef() != nil
		return !found
	})
	return found
}

// anyEqualTemplate is x = ANY(a) for the engine: true when a holds x;
// NULL when a is NULL, or nothing matches and x or an element is NULL;
// false otherwise (an empty a too). It is written out, not a macro: the
// engine cannot type a parameter passed to a macro when it prepares the
// statement.
var anyEqualTemplate = func() *pg.Node {
	n, err := pg.ParseExpr(`CASE WHEN mink_a IS NULL THEN NULL WHEN list_contains(mink_a, mink_x) THEN true
		WHEN (mink_x IS NULL AND len(mink_a) > 0) OR list_count(mink_a) < len(mink_a) THEN NULL ELSE false END`)
	if err != nil {
		panic(fmt.Sprintf("translate: anyEqualTemplate: %v", err))
	}
	return n
}()

// anyEqual is anyEqualTemplate for x and a.
func anyEqual(x, a *pg.Node) *pg.Node {
	n := proto.Clone(anyEqualTemplate).(*pg.Node)
	pg.Visit(n, func(m *pg.Node) bool {
		cr := m.GetColumnRef()
		if cr == nil || len(cr.Fields) != 1 {
			return true
		}
		switch cr.Fields[0].GetString_().GetSval() {
		case "mink_x":
			m.Node = proto.Clone(x).(*pg.Node).Node
			return false
		case "mink_a":
			m.Node = proto.Clone(a).(*pg.Node).Node
			return false
		}
		return true
	})
	return n
}

func (rw *engineRewriter) aExpr(e *pg.A_Expr, sc *fromScope) *pg.Node {
	if e.Kind == pg.A_Expr_Kind_AEXPR_OP_ANY || e.Kind == pg.A_Expr_Kind_AEXPR_OP_ALL {
		rw.changed = anyArrayOperand(e, sc) || rw.changed
		return anyArrayCompare(e)
	}
	if e.Kind != pg.A_Expr_Kind_AEXPR_OP || len(e.Name) != 1 || e.Lexpr == nil || e.Rexpr == nil {
		return nil
	}
	op := e.Name[0].GetString_().GetSval()
	if op == "||" {
		if n, changed := arrayConcat(e, sc); changed {
			rw.changed = true
			return n
		}
	}
	switch op {
	case "=", "<>", "!=", "<", "<=", ">", ">=", "@>", "<@", "&&":
		// A quoted literal compared with an array is read as that array
		// type, as PostgreSQL reads '{1,2}' in a @> '{1,2}'.
		if rw.arrayLiteralOperand(&e.Rexpr, e.Lexpr, sc) || rw.arrayLiteralOperand(&e.Lexpr, e.Rexpr, sc) {
			rw.changed = true
		}
	}
	switch op {
	case "+", "-", "*", "/", "%":
		// A parameter or a quoted literal in arithmetic with an operand of
		// known type takes that type, as PostgreSQL resolves `$1 + 1` and
		// `'5' + 1` (integer; clients' simple protocols send parameters
		// as quoted literals); DuckDB would leave it untyped.
		if rw.castable(e.Lexpr) {
			if typ := paramTypeFrom(e.Rexpr, sc); typ != "" {
				e.Lexpr = pg.Cast(e.Lexpr, typ)
				rw.changed = true
			}
		}
		if rw.castable(e.Rexpr) {
			if typ := paramTypeFrom(e.Lexpr, sc); typ != "" {
				e.Rexpr = pg.Cast(e.Rexpr, typ)
				rw.changed = true
			}
		}
	}
	switch op {
	case "/", "%":
		if nonzeroConstant(e.Rexpr) {
			return nil
		}
		if fc := e.Rexpr.GetFuncCall(); fc != nil && rw.wrapped[fc] {
			return nil
		}
		call := pg.Call("mink_divisor", e.Rexpr)
		rw.wrapped[call.GetFuncCall()] = true
		e.Rexpr = call
		rw.changed = true
		return nil
	case "?", "?|", "?&":
		// jsonb's key-exists operators (Django's has_key, has_any_keys,
		// has_keys); the engine would read ? as a parameter.
		return pg.Call(jsonbExists[op], e.Lexpr, e.Rexpr)
	case "~", "!~", "~*", "!~*":
		args := []*pg.Node{e.Lexpr, e.Rexpr}
		if strings.HasSuffix(op, "*") {
			args = append(args, pg.StringConst("i"))
		}
		call := pg.Call("regexp_matches", args...)
		if strings.HasPrefix(op, "!") {
			return &pg.Node{Node: &pg.Node_BoolExpr{BoolExpr: &pg.BoolExpr{Boolop: pg.BoolExprType_NOT_EXPR, Args: []*pg.Node{call}}}}
		}
		return call
	case "-":
		if sc.exprOrigin(e.Lexpr).typ.Kind() == sqltypes.Date && sc.exprOrigin(e.Rexpr).typ.Kind() == sqltypes.Date {
			rw.wrappedExpr[e] = true
			return pg.Cast(&pg.Node{Node: &pg.Node_AExpr{AExpr: e}}, "int4")
		}
	}
	return nil
}

// jsonbExists are the engine's macros (engine/db.go) of jsonb's
// key-exists operators.
var jsonbExists = map[string]string{"?": "mink_jsonb_exists", "?|": "mink_jsonb_exists_any", "?&": "mink_jsonb_exists_all"}

// arrayLiteralOperand replaces *lit, an untyped quoted literal, with the
// array of other's type when other is an array; it reports whether it did.
func (rw *engineRewriter) arrayLiteralOperand(lit **pg.Node, other *pg.Node, sc *fromScope) bool {
	if !untypedString(*lit) {
		return false
	}
	t := sc.exprOrigin(other).typ
	if !t.Valid() || t.Kind() != sqltypes.Array {
		return false
	}
	n, err := arrayLiteral((*lit).GetAConst().GetSval().Sval, t)
	if err != nil {
		return false // the engine reports it
	}
	*lit = n
	return true
}

// castable reports whether n, an operand of arithmetic, is a quoted literal
// or a parameter that the statement uses only there: a parameter used
// elsewhere too (id >= $1 AND id < $1 + 3) is typed by the engine from its
// other uses, which a cast here would contradict.
func (rw *engineRewriter) castable(n *pg.Node) bool {
	if untypedString(n) {
		return true
	}
	pr := n.GetParamRef()
	if pr == nil {
		return false
	}
	if rw.paramUses == nil {
		rw.paramUses = map[int32]int{}
		pg.Walk(rw.tree, func(m protoreflect.Message) {
			if p, ok := m.Interface().(*pg.ParamRef); ok {
				rw.paramUses[p.Number]++
			}
		})
	}
	return rw.paramUses[pr.Number] <= 1
}

// untypedString reports whether n is a quoted literal without a cast.
func untypedString(n *pg.Node) bool {
	c := n.GetAConst()
	return c != nil && c.GetSval() != nil
}

// paramTypeFrom returns the name of the type a parameter in arithmetic
// with n takes: n's, when n is a number constant or a column of a numeric
// type; "" when unknown.
func paramTypeFrom(n *pg.Node, sc *fromScope) string {
	if c := n.GetAConst(); c != nil && !c.Isnull {
		switch {
		case c.GetIval() != nil:
			return "int4"
		case c.GetFval() != nil:
			return "numeric"
		}
		return ""
	}
	switch sc.exprOrigin(n).typ.Kind() {
	case sqltypes.Int2:
		return "int2"
	case sqltypes.Int4:
		return "int4"
	case sqltypes.Int8:
		return "int8"
	case sqltypes.Float4:
		return "float4"
	case sqltypes.Float8:
		return "float8"
	}
	return ""
}

// unqualifyTypes drops pg_catalog from the type names of casts, which the
// parser adds to SQL's own type names (integer is pg_catalog.int4) and
// DuckDB does not read; it reports whether sql itself wrote one so, which
// the engine must then get deparsed.
func unqualifyTypes(sql string, tree *pg.Node) bool {
	written := false
	pg.Walk(tree, func(m protoreflect.Message) {
		tn, ok := m.Interface().(*pg.TypeName)
		if !ok || len(tn.Names) < 2 || !strings.EqualFold(tn.Names[0].GetString_().GetSval(), "pg_catalog") {
			return
		}
		if at := int(tn.Location); at >= 0 && at < len(sql) {
			rest := strings.TrimLeft(sql[at:], `"`)
			if hasPrefixFold(rest, "pg_catalog") {
				written = true
			}
		}
		tn.Names = tn.Names[1:]
	})
	return written
}

// scalarSetFuncs are the set-returning functions of one result column
// that the engine has under the same name. In PostgreSQL, `FROM f(…) AS g`
// names that column g as well; in DuckDB g alone is the whole row (a
// struct), so the rewrite names the column explicitly: f(…) AS g(g).
var scalarSetFuncs = map[string]bool{
	"generate_series": true, "unnest": true,
}

// rangeFunction names the column of a one-column set-returning function in
// FROM after its alias, as PostgreSQL does (scalarSetFuncs). It also
// rewrites generate_series of integer constants, which PostgreSQL types
// integer (DuckDB: BIGINT), into a subquery that casts its values.
func (rw *engineRewriter) rangeFunction(rf *pg.RangeFunction) *pg.Node {
	if rf.IsRowsfrom || len(rf.Functions) != 1 || len(rf.Coldeflist) > 0 {
		return nil
	}
	items := rf.Functions[0].GetList().GetItems()
	if len(items) == 0 {
		return nil
	}
	fc := items[0].GetFuncCall()
	if fc == nil {
		return nil
	}
	schema, name := pg.FuncName(fc)
	if !scalarSetFuncs[name] || (schema != "" && schema != "pg_catalog") {
		return nil
	}
	if name == "unnest" && len(fc.Args) > 1 {
		return rw.unnestArrays(rf, fc)
	}
	integers := name == "generate_series" && len(fc.Args) >= 2 && len(fc.Args) <= 3 && !rf.Lateral && !rf.Ordinality
	for _, a := range fc.Args {
		if c := a.GetAConst(); c == nil || c.GetIval() == nil {
			integers = false
		}
	}
	if !integers {
		if rf.Alias == nil || len(rf.Alias.Colnames) > 0 {
			return nil
		}
		rf.Alias.Colnames = pg.Names(rf.Alias.Aliasname)
		if rf.Ordinality {
			// WITH ORDINALITY's second column keeps the engine's name.
			rf.Alias.Colnames = append(rf.Alias.Colnames, pg.Names("ordinality")...)
		}
		rw.changed = true
		return nil
	}
	alias := &pg.Alias{Aliasname: "generate_series"}
	if rf.Alias != nil {
		alias = proto.Clone(rf.Alias).(*pg.Alias)
	}
	if len(alias.Colnames) == 0 {
		alias.Colnames = pg.Names(alias.Aliasname)
	}
	inner := &pg.RangeFunction{Functions: rf.Functions}
	rw.wrappedFrom[inner] = true
	value := &pg.ResTarget{Name: "generate_series", Val: pg.Cast(&pg.Node{Node: &pg.Node_ColumnRef{ColumnRef: &pg.ColumnRef{Fields: pg.Names("generate_series")}}}, "int4")}
	sub := &pg.SelectStmt{
		Op:          pg.SetOperation_SETOP_NONE,
		LimitOption: pg.LimitOption_LIMIT_OPTION_DEFAULT,
		TargetList:  []*pg.Node{{Node: &pg.Node_ResTarget{ResTarget: value}}},
		FromClause:  []*pg.Node{{Node: &pg.Node_RangeFunction{RangeFunction: inner}}},
	}
	return &pg.Node{Node: &pg.Node_RangeSubselect{RangeSubselect: &pg.RangeSubselect{
		Subquery: &pg.Node{Node: &pg.Node_SelectStmt{SelectStmt: sub}},
		Alias:    alias,
	}}}
}

// unnestArrays rewrites unnest(a, b, …) in FROM, a column per array,
// which the engine does not have, into a subquery of one unnest per array:
// the engine unnests the arrays of one SELECT side by side and pads the
// shorter ones with NULLs, as PostgreSQL does (Django's bulk_create
// inserts SELECT * FROM unnest(%s::varchar[], %s::integer[], …)). Each
// column is named unnest, as in PostgreSQL, unless the alias names them.
func (rw *engineRewriter) unnestArrays(rf *pg.RangeFunction, fc *pg.FuncCall) *pg.Node {
	if rf.Ordinality {
		return nil
	}
	sub := &pg.SelectStmt{Op: pg.SetOperation_SETOP_NONE, LimitOption: pg.LimitOption_LIMIT_OPTION_DEFAULT}
	for _, a := range fc.Args {
		sub.TargetList = append(sub.TargetList, pg.Target("unnest", pg.Call("unnest", a)))
	}
	alias := &pg.Alias{Aliasname: "unnest"}
	if rf.Alias != nil {
		alias = proto.Clone(rf.Alias).(*pg.Alias)
	}
	rw.changed = true
	return &pg.Node{Node: &pg.Node_RangeSubselect{RangeSubselect: &pg.RangeSubselect{
		Lateral:  rf.Lateral,
		Subquery: &pg.Node{Node: &pg.Node_SelectStmt{SelectStmt: sub}},
		Alias:    alias,
	}}}
}

// concatText is a || b || ….
func concatText(parts ...*pg.Node) *pg.Node {
	out := parts[0]
	for _, p := range parts[1:] {
		out = &pg.Node{Node: &pg.Node_AExpr{AExpr: &pg.A_Expr{Kind: pg.A_Expr_Kind_AEXPR_OP, Name: pg.Names("||"), Lexpr: out, Rexpr: p}}}
	}
	return out
}

// nonzeroConstant reports whether n is a numeric constant other than zero.
func nonzeroConstant(n *pg.Node) bool {
	c := n.GetAConst()
	if c == nil || c.Isnull {
		return false
	}
	if iv := c.GetIval(); iv != nil {
		return iv.Ival != 0
	}
	if fv := c.GetFval(); fv != nil {
		f, err := strconv.ParseFloat(fv.Fval, 64)
		return err == nil && f != 0
	}
	return false
}

// integerFuncs are functions whose PostgreSQL result is integer where
// DuckDB's is BIGINT.
var integerFuncs = map[string]bool{
	"length": true, "char_length": true, "character_length": true, "octet_length": true,
	"bit_length": true, "position": true, "strpos": true, "ascii": true,
}

// engineMacros are PostgreSQL functions the engine lacks, by the name of
// the macro that stands in for each (engine/db.go).
var engineMacros = map[string]string{
	"initcap":          "mink_initcap",
	"justify_days":     "mink_justify_days",
	"justify_hours":    "mink_justify_hours",
	"justify_interval": "mink_justify_interval",
}

// jsonFuncs maps PostgreSQL's json and jsonb constructors and aggregates
// to the engine's functions of the same meaning.
var jsonFuncs = map[string]string{
	"json_build_object": "json_object", "jsonb_build_object": "json_object",
	"json_build_array": "json_array", "jsonb_build_array": "json_array",
	"json_agg": "to_json", "jsonb_agg": "to_json", // see funcCall
	"json_object_agg": "json_group_object", "jsonb_object_agg": "json_group_object",
	"to_jsonb": "to_json",
}

func (rw *engineRewriter) funcCall(fc *pg.FuncCall, sc *fromScope) *pg.Node {
	schema, name := pg.FuncName(fc)
	if schema != "" && schema != "pg_catalog" {
		return nil
	}
	wrap := func(typ string) *pg.Node {
		rw.wrapped[fc] = true
		return pg.Cast(&pg.Node{Node: &pg.Node_FuncCall{FuncCall: fc}}, typ)
	}
	switch {
	case arrayFuncs[name] && fc.Over == nil:
		return rewriteArrayFunc(name, fc)
	case name == "sum" && len(fc.Args) == 1 && !fc.AggStar:
		switch sc.exprOrigin(fc.Args[0]).typ.Kind() {
		case sqltypes.Int2, sqltypes.Int4:
			return wrap("int8")
		}
	case name == "octet_length" && len(fc.Args) == 1 && fc.Over == nil:
		// The engine has octet_length for blobs only; text's is its
		// UTF-8 length in bytes.
		if k := sc.exprOrigin(fc.Args[0]).typ.Kind(); untypedString(fc.Args[0]) || k == sqltypes.Text || k == sqltypes.Varchar || k == sqltypes.Char {
			rw.wrapped[fc] = true
			return pg.Cast(pg.Call("strlen", fc.Args[0]), "int4")
		}
		return wrap("int4")
	case integerFuncs[name] && fc.Over == nil:
		return wrap("int4")
	case name == "json_agg" || name == "jsonb_agg":
		// The engine's json_group_array is a macro, which takes no ORDER
		// BY, FILTER or DISTINCT; the list aggregate does.
		fc.Funcname = pg.Names("list")
		rw.wrapped[fc] = true
		return pg.Call("to_json", &pg.Node{Node: &pg.Node_FuncCall{FuncCall: fc}})
	case (name == "encode" || name == "decode") && len(fc.Args) == 2:
		c := fc.Args[1].GetAConst()
		if c == nil || c.GetSval() == nil {
			return nil
		}
		format := strings.ToLower(c.GetSval().Sval)
		switch {
		case name == "encode" && format == "hex":
			return pg.Call("lower", pg.Call("hex", fc.Args[0]))
		case name == "encode" && format == "base64":
			return pg.Call("to_base64", fc.Args[0])
		case name == "decode" && format == "hex":
			return pg.Call("unhex", fc.Args[0])
		case name == "decode" && format == "base64":
			return pg.Call("from_base64", fc.Args[0])
		}
	case name == "json_array_length" || name == "jsonb_array_length":
		fc.Funcname = pg.Names("json_array_length")
		return wrap("int4")
	case jsonFuncs[name] != "":
		// The engine's JSON functions under PostgreSQL's names; jsonb
		// results are described as jsonb (restype.go) and printed as
		// PostgreSQL prints jsonb.
		fc.Funcname = pg.Names(jsonFuncs[name])
		rw.wrapped[fc] = true
		rw.changed = true
		return nil
	case name == "to_char" && len(fc.Args) == 2:
		c := fc.Args[1].GetAConst()
		if c == nil || c.GetSval() == nil {
			return nil
		}
		format, ok := strftimeFormat(c.GetSval().Sval)
		if !ok {
			return nil
		}
		return pg.Call("strftime", fc.Args[0], pg.StringConst(format))
	case (name == "to_date" || name == "to_timestamp") && len(fc.Args) == 2:
		// to_date(text, template), to_timestamp(text, template): the
		// engine's strptime with the template translated as for to_char.
		c := fc.Args[1].GetAConst()
		if c == nil || c.GetSval() == nil {
			return nil
		}
		format, ok := strftimeFormat(c.GetSval().Sval)
		if !ok {
			return nil
		}
		parsed := pg.Call("strptime", fc.Args[0], pg.StringConst(format))
		if name == "to_date" {
			return pg.Cast(parsed, "date")
		}
		return pg.Cast(parsed, "timestamptz")
	case engineMacros[name] != "":
		fc.Funcname = pg.Names(engineMacros[name])
		rw.wrapped[fc] = true
		rw.changed = true
		return nil
	case name == "date_trunc" && len(fc.Args) == 2 && (sc.exprOrigin(fc.Args[1]).typ.Kind() == sqltypes.Date ||
		fc.Args[1].GetSqlvalueFunction().GetOp() == pg.SQLValueFunctionOp_SVFOP_CURRENT_DATE):
		// PostgreSQL truncates a date as a timestamptz (in the session's
		// time zone); the engine's date_trunc of a date is a timestamp.
		fc.Args[1] = pg.Cast(fc.Args[1], "timestamptz")
		rw.wrapped[fc] = true
		rw.changed = true
		return nil
	case name == "format" && len(fc.Args) >= 1:
		c := fc.Args[0].GetAConst()
		if c == nil || c.GetSval() == nil {
			return nil
		}
		return formatCall(c.GetSval().Sval, fc.Args[1:])
	}
	return nil
}

// formatCall is format(template, args…) with a constant template as the
// engine's printf: %s is the argument as text (NULL: empty), %I a quoted
// identifier when it needs quoting, %L a quoted literal (NULL: NULL), %%
// a percent sign. Anything else (positions, widths) fails the statement
// with the engine's error().
func formatCall(template string, args []*pg.Node) *pg.Node {
	text := func(a *pg.Node) *pg.Node { return pg.Cast(a, "text") }
	var b strings.Builder
	out := []*pg.Node{nil}
	next := 0
	for i := 0; i < len(template); i++ {
		if template[i] != '%' {
			b.WriteByte(template[i])
			continue
		}
		if i+1 >= len(template) {
			return pg.Call("error", pg.StringConst("unterminated format() type specifier"))
		}
		i++
		spec := template[i]
		if spec == '%' {
			b.WriteString("%%")
			continue
		}
		if spec != 's' && spec != 'I' && spec != 'L' {
			return pg.Call("error", pg.StringConst(fmt.Sprintf("format() specifier %%%c is not supported by mink (%%s, %%I, %%L and %%%% are)", spec)))
		}
		if next >= len(args) {
			return pg.Call("error", pg.StringConst("too few arguments for format()"))
		}
		a := args[next]
		next++
		b.WriteString("%s")
		switch spec {
		case 's':
			out = append(out, &pg.Node{Node: &pg.Node_CoalesceExpr{CoalesceExpr: &pg.CoalesceExpr{
				Args: []*pg.Node{text(a), pg.StringConst("")}}}})
		case 'I':
			// format's %I of NULL fails (quote_ident's is NULL).
			null := pg.Call("error", pg.StringConst(engine.Raised(pgwire.CodeNullValueNotAllowed, "null values cannot be formatted as an SQL identifier")))
			out = append(out, &pg.Node{Node: &pg.Node_CoalesceExpr{CoalesceExpr: &pg.CoalesceExpr{
				Args: []*pg.Node{quoteIdentExpr(a), null}}}})
		case 'L':
			quoted := concatText(pg.StringConst("'"), pg.Call("replace", text(a), pg.StringConst("'"), pg.StringConst("''")), pg.StringConst("'"))
			out = append(out, &pg.Node{Node: &pg.Node_CoalesceExpr{CoalesceExpr: &pg.CoalesceExpr{
				Args: []*pg.Node{quoted, pg.StringConst("NULL")}}}})
		}
	}
	out[0] = pg.StringConst(b.String())
	return pg.Call("printf", out...)
}

// quoteIdentExpr is quote_ident(a) for the engine: a constant is quoted
// here; any other value is quoted unless it is a lower-case word that is
// not a keyword quote_ident quotes (the list is written into the
// statement).
func quoteIdentExpr(a *pg.Node) *pg.Node {
	if c := a.GetAConst(); c != nil && c.GetSval() != nil {
		return pg.StringConst(pgcatalog.QuoteIdentIfNeeded(c.GetSval().Sval))
	}
	x := pg.Cast(a, "text")
	quoted := concatText(pg.StringConst(`"`), pg.Call("replace", x, pg.StringConst(`"`), pg.StringConst(`""`)), pg.StringConst(`"`))
	keywords := pgcatalog.QuotedKeywords()
	list := make([]*pg.Node, len(keywords))
	for i, k := range keywords {
		list[i] = pg.StringConst(k)
	}
	plain := &pg.Node{Node: &pg.Node_BoolExpr{BoolExpr: &pg.BoolExpr{Boolop: pg.BoolExprType_AND_EXPR, Args: []*pg.Node{
		pg.Call("regexp_full_match", x, pg.StringConst("[a-z_][a-z0-9_$]*")),
		{Node: &pg.Node_BoolExpr{BoolExpr: &pg.BoolExpr{Boolop: pg.BoolExprType_NOT_EXPR, Args: []*pg.Node{
			pg.Call("list_contains", &pg.Node{Node: &pg.Node_AArrayExpr{AArrayExpr: &pg.A_ArrayExpr{Elements: list}}}, x)}}}},
	}}}}
	return &pg.Node{Node: &pg.Node_CaseExpr{CaseExpr: &pg.CaseExpr{
		Args:      []*pg.Node{{Node: &pg.Node_CaseWhen{CaseWhen: &pg.CaseWhen{Expr: plain, Result: x}}}},
		Defresult: quoted}}}
}

func (rw *engineRewriter) typeCast(tc *pg.TypeCast) *pg.Node {
	t, err := TypeOf(tc.TypeName)
	if err != nil {
		return nil
	}
	lit := ""
	if c := tc.Arg.GetAConst(); c != nil && c.GetSval() != nil {
		lit = c.GetSval().Sval
	}
	var reordered *pg.Node
	switch t.Kind() {
	case sqltypes.Date, sqltypes.Timestamp, sqltypes.Timestamptz:
		if iso, ok := ISODateLiteral(lit, rw.t.DateStyle()); ok {
			lit = iso
			tc.Arg = pg.StringConst(iso)
			reordered = &pg.Node{Node: &pg.Node_TypeCast{TypeCast: tc}}
		}
	}
	switch t.Kind() {
	case sqltypes.Array:
		if c := tc.Arg.GetAConst(); c != nil && c.GetSval() != nil {
			if n, err := arrayLiteral(lit, t); err == nil {
				return n
			}
		}
		if k := t.Elem().Kind(); k == sqltypes.JSON || k == sqltypes.JSONB {
			return engineJSONCast(tc, true)
		}
	case sqltypes.JSON, sqltypes.JSONB:
		return engineJSONCast(tc, false)
	case sqltypes.Varchar, sqltypes.Char:
		if t.Length() == 0 {
			return nil
		}
		out := pg.Call("left", pg.Cast(tc.Arg, "text"), pg.IntConst(int64(t.Length())))
		if t.Kind() == sqltypes.Char {
			out = pg.Call("rtrim", out)
		}
		return out
	case sqltypes.Bytea:
		if hex, ok := strings.CutPrefix(lit, `\x`); ok {
			return pg.Call("from_hex", pg.StringConst(hex))
		}
	case sqltypes.Timestamptz:
		if m := offsetNoSecondsRE.FindStringSubmatchIndex(lit); m != nil {
			tc.Arg = pg.StringConst(lit[:m[3]] + ":00" + lit[m[3]:])
			return &pg.Node{Node: &pg.Node_TypeCast{TypeCast: tc}}
		}
	}
	return reordered
}

// numericDateRE is a date written with numbers in DateStyle's order and a
// four-digit year last ('01/02/2024', '1.2.2024 10:00'); the engine reads
// only ISO order.
var numericDateRE = regexp.MustCompile(`^\s*(\d{1,2})[/.-](\d{1,2})[/.-](\d{4})(\s.*)?$`)

// ISODateLiteral rewrites a date or timestamp literal of numericDateRE
// into ISO order as PostgreSQL reads it under datestyle (the DateStyle
// setting, "ISO, MDY" or "ISO, DMY"); false when lit is not such a date.
// Under YMD, PostgreSQL rejects such a date, and so does the engine.
func ISODateLiteral(lit, datestyle string) (string, bool) {
	m := numericDateRE.FindStringSubmatch(lit)
	if m == nil {
		return "", false
	}
	month, day := m[1], m[2]
	switch {
	case strings.HasSuffix(datestyle, "DMY"):
		month, day = day, month
	case strings.HasSuffix(datestyle, "YMD"):
		return "", false
	}
	pad := func(s string) string {
		if len(s) == 1 {
			return "0" + s
		}
		return s
	}
	return m[3] + "-" + pad(month) + "-" + pad(day) + m[4], true
}

// offsetNoSecondsRE finds a time of day without seconds followed by a UTC
// offset ("10:00+01"), which DuckDB does not read; submatch 1 ends where
// the seconds go.
var offsetNoSecondsRE = regexp.MustCompile(`(?:^|[^:\d])(\d{1,2}:\d\d)\s*[+-]\d{1,2}(?::?\d\d)?$`)

// strftimeFields are to_char's template patterns that strftime has, longest
// first where one is a prefix of another.
var strftimeFields = []struct{ pattern, strftime string }{
	{"YYYY", "%Y"}, {"YY", "%y"}, {"HH24", "%H"}, {"HH12", "%I"}, {"HH", "%I"},
	{"MI", "%M"}, {"MS", "%g"}, {"MM", "%m"}, {"DDD", "%j"}, {"DD", "%d"},
	{"SS", "%S"}, {"US", "%f"}, {"AM", "%p"}, {"PM", "%p"}, {"Mon", "%b"}, {"Dy", "%a"},
}

// strftimeFormat translates a to_char template, false when it uses a
// pattern strftime has no equivalent for.
func strftimeFormat(template string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(template); {
		rest := template[i:]
		if rest[0] == '"' {
			end := strings.IndexByte(rest[1:], '"')
			if end < 0 {
				return "", false
			}
			b.WriteString(strings.ReplaceAll(rest[1:1+end], "%", "%%"))
			i += end + 2
			continue
		}
		matched := false
		for _, f := range strftimeFields {
			if strings.HasPrefix(rest, f.pattern) {
				b.WriteString(f.strftime)
				i += len(f.pattern)
				matched = true
				break
			}
		}
		if matched {
			continue
		}
		c := rest[0]
		if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' {
			return "", false // a pattern not translated, or a letter PostgreSQL may read as one
		}
		if c == '%' {
			b.WriteString("%%")
		} else {
			b.WriteByte(c)
		}
		i++
	}
	return b.String(), true
}

// CheckConditions fails a statement whose WHERE or HAVING is a constant or
// a column that is not boolean (42804), as PostgreSQL does; DuckDB would
// cast it to boolean. Conditions of other types are left to the engine.
func CheckConditions(env Env, node *pg.Node) error {
	t := translator{env}
	var err error
	pg.Walk(node, func(m protoreflect.Message) {
		if err != nil {
			return
		}
		// UPDATE and DELETE: the target table and FROM/USING are in scope.
		var where *pg.Node
		var from []*pg.Node
		var target *pg.RangeVar
		switch st := m.Interface().(type) {
		case *pg.UpdateStmt:
			where, from, target = st.WhereClause, st.FromClause, st.Relation
		case *pg.DeleteStmt:
			where, from, target = st.WhereClause, st.UsingClause, st.Relation
		}
		if where != nil {
			scope := &fromScope{}
			t.addFromItem(scope, &pg.Node{Node: &pg.Node_RangeVar{RangeVar: target}}, nil)
			for _, item := range from {
				t.addFromItem(scope, item, nil)
			}
			if typ := conditionType(where, scope); typ != "" {
				err = pgwire.Errorf(pgwire.CodeDatatypeMismatch, "argument of WHERE must be type boolean, not type %s", typ)
			}
			return
		}
		sel, ok := m.Interface().(*pg.SelectStmt)
		if !ok || (sel.WhereClause == nil && sel.HavingClause == nil) {
			return
		}
		ctes := map[string]bool{}
		if wc := sel.WithClause; wc != nil {
			for _, c := range wc.Ctes {
				ctes[c.GetCommonTableExpr().GetCtename()] = true
			}
		}
		scope := &fromScope{}
		for _, item := range sel.FromClause {
			t.addFromItem(scope, item, ctes)
		}
		for _, c := range []struct {
			clause string
			cond   *pg.Node
		}{{"WHERE", sel.WhereClause}, {"HAVING", sel.HavingClause}} {
			if typ := conditionType(c.cond, scope); typ != "" && err == nil {
				err = pgwire.Errorf(pgwire.CodeDatatypeMismatch, "argument of %s must be type boolean, not type %s", c.clause, typ)
			}
		}
	})
	return err
}

// conditionType returns the type name of cond, a WHERE or HAVING
// condition, when it is known not to be boolean; "" otherwise.
func conditionType(cond *pg.Node, sc *fromScope) string {
	if cond == nil {
		return ""
	}
	if c := cond.GetAConst(); c != nil {
		switch {
		case c.GetIval() != nil:
			return "integer"
		case c.GetFval() != nil:
			return "numeric"
		}
		return ""
	}
	if fc := cond.GetFuncCall(); fc != nil {
		if schema, name := pg.FuncName(fc); name == "count" && (schema == "" || schema == "pg_catalog") && fc.Over == nil {
			return "bigint"
		}
		return ""
	}
	if cond.GetColumnRef() == nil && cond.GetTypeCast() == nil {
		return ""
	}
	t := sc.exprOrigin(cond).typ
	if !t.Valid() || t.Kind() == sqltypes.Bool {
		return ""
	}
	switch t.Kind() {
	case sqltypes.Char:
		return "character"
	case sqltypes.Array:
		return ""
	}
	name := t.Name()
	if i := strings.IndexByte(name, '('); i >= 0 {
		// format_type_be leaves out the type modifier.
		end := strings.IndexByte(name[i:], ')')
		name = strings.TrimSpace(name[:i] + name[i+end+1:])
	}
	return name
}
