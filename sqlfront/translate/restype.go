package translate

import (
	"slices"
	"strings"

	pg "github.com/minkdb/mink/sqlfront/pgtree"

	"github.com/minkdb/mink/internal/sqltypes"
	"github.com/minkdb/mink/sqlfront/pgwire"
)

// This file refines the engine's descriptions of result columns with what
// the parse tree says, where DuckDB's types are coarser than PostgreSQL's:
// DuckDB has one VARCHAR for text, varchar(n) and char(n), and one JSON for
// json and jsonb. A result column that is a plain reference to a table
// column (directly, through *, or through a subquery in FROM) is described
// with the table column's type, and with the table's OID and the column's
// number, as PostgreSQL does (pgjdbc's ResultSetMetaData.isNullable uses
// them). An explicit cast to varchar(n) or char(n) is described as that
// type. Anything else keeps the engine's description.

// resultOrigin is what the parse tree says about one result column.
type resultOrigin struct {
	typ   sqltypes.Type // invalid: unknown
	table uint32        // pg_class OID of the base table, 0 if none
	attr  int16         // attnum of the base column
	// name is the column's name as a result column of a subquery.
	name string
}

// relScope is one relation of a FROM clause.
type relScope struct {
	alias string
	// cols are the relation's columns in order; nil when not known (a CTE,
	// a table function), which also makes the width of * unknown.
	cols  []resultOrigin
	names []string
	// key are the primary-key columns of a table (by names), nil for
	// anything else.
	key []string
}

type fromScope struct {
	rels []relScope
	// starUnsure: * cannot be expanded from the rels alone (USING or
	// NATURAL joins merge columns).
	starUnsure bool
}

// ResultTypes applies the parse tree's knowledge to cols, the
// engine's description of a SELECT's result.
func ResultTypes(env Env, node *pg.Node, cols []pgwire.Column) {
	sel := node.GetSelectStmt()
	if sel == nil {
		return
	}
	origins, ok := translator{env}.selectOrigins(sel, map[string]bool{})
	if !ok || len(origins) != len(cols) {
		return
	}
	for i, o := range origins {
		c := &cols[i]
		if o.table != 0 && o.typ.Valid() && o.typ.OID() == engineBaseOID(o.typ, c.TypeOID) {
			c.TableOID, c.ColumnAttr = o.table, o.attr
		}
		if !o.typ.Valid() || o.typ.OID() == c.TypeOID {
			continue
		}
		if engineBaseOID(o.typ, c.TypeOID) != o.typ.OID() {
			continue
		}
		c.TypeOID, c.TypeSize, c.TypeMod = o.typ.OID(), o.typ.Len(), o.typ.TypMod()
	}
}

// engineBaseOID returns t's OID when engineOID is how the engine describes
// values of type t (text for varchar(n) and char(n), json for jsonb, t
// itself otherwise), and 0 when it is not: then the column is not what
// the parse tree suggests and keeps the engine's description.
func engineBaseOID(t sqltypes.Type, engineOID uint32) uint32 {
	base := t.OID()
	switch t.Kind() {
	case sqltypes.Varchar, sqltypes.Char:
		base = sqltypes.Of(sqltypes.Text).OID()
	case sqltypes.JSONB:
		base = sqltypes.Of(sqltypes.JSON).OID()
	case sqltypes.Array:
		// varchar(n)[] is text[] to the engine, jsonb[] json[].
		switch t.Elem().Kind() {
		case sqltypes.Varchar, sqltypes.Char:
			base = sqltypes.ArrayOf(sqltypes.Of(sqltypes.Text)).OID()
		case sqltypes.JSONB:
			base = sqltypes.ArrayOf(sqltypes.Of(sqltypes.JSON)).OID()
		}
	}
	if engineOID == base || engineOID == t.OID() {
		return t.OID()
	}
	return 0
}

// selectOrigins returns the origins of a SELECT's result columns, and
// false when their number is not known from the tree.
func (t translator) selectOrigins(sel *pg.SelectStmt, outerCTEs map[string]bool) ([]resultOrigin, bool) {
	if sel.Op != pg.SetOperation_SETOP_NONE || len(sel.ValuesLists) > 0 {
		return nil, false
	}
	ctes := outerCTEs
	if wc := sel.WithClause; wc != nil && len(wc.Ctes) > 0 {
		ctes = map[string]bool{}
		for k := range outerCTEs {
			ctes[k] = true
		}
		for _, c := range wc.Ctes {
			ctes[c.GetCommonTableExpr().GetCtename()] = true
		}
	}
	scope := &fromScope{}
	for _, item := range sel.FromClause {
		t.addFromItem(scope, item, ctes)
	}
	var out []resultOrigin
	for _, t := range sel.TargetList {
		rt := t.GetResTarget()
		if rt == nil {
			return nil, false
		}
		if cr := rt.Val.GetColumnRef(); cr != nil && cr.Fields[len(cr.Fields)-1].GetAStar() != nil {
			expanded, ok := scope.star(cr)
			if !ok {
				return nil, false
			}
			out = append(out, expanded...)
			continue
		}
		o := scope.exprOrigin(rt.Val)
		o.name = rt.Name
		if o.name == "" {
			o.name = figureColname(rt.Val)
		}
		out = append(out, o)
	}
	return out, true
}

func (t translator) addFromItem(scope *fromScope, item *pg.Node, ctes map[string]bool) {
	switch n := item.Node.(type) {
	case *pg.Node_RangeVar:
		rv := n.RangeVar
		rel := relScope{alias: rv.Relname}
		if rv.Alias != nil {
			rel.alias = rv.Alias.Aliasname
		}
		if rv.Schemaname == "" && ctes[rv.Relname] {
			scope.rels = append(scope.rels, rel)
			return
		}
		cols, oid, ok := t.Table(rv)
		if !ok {
			scope.rels = append(scope.rels, rel)
			return
		}
		for i, c := range cols {
			rel.cols = append(rel.cols, resultOrigin{typ: c.Type, table: oid, attr: int16(i + 1)})
			rel.names = append(rel.names, c.Name)
		}
		if rv.Alias != nil && len(rv.Alias.Colnames) > 0 {
			renameColumns(&rel, rv.Alias.Colnames)
		} else {
			rel.key = t.PrimaryKey(rv)
		}
		scope.rels = append(scope.rels, rel)
	case *pg.Node_JoinExpr:
		j := n.JoinExpr
		if j.IsNatural || len(j.UsingClause) > 0 || j.Alias != nil {
			scope.starUnsure = true
		}
		t.addFromItem(scope, j.Larg, ctes)
		t.addFromItem(scope, j.Rarg, ctes)
	case *pg.Node_RangeSubselect:
		rs := n.RangeSubselect
		rel := relScope{}
		if rs.Alias != nil {
			rel.alias = rs.Alias.Aliasname
		}
		if sub := rs.Subquery.GetSelectStmt(); sub != nil {
			if origins, ok := t.selectOrigins(sub, ctes); ok {
				rel.cols = origins
				for _, o := range origins {
					rel.names = append(rel.names, o.name)
				}
				if rs.Alias != nil {
					renameColumns(&rel, rs.Alias.Colnames)
				}
			}
		}
		scope.rels = append(scope.rels, rel)
	default:
		scope.rels = append(scope.rels, relScope{})
	}
}

func renameColumns(rel *relScope, colnames []*pg.Node) {
	for i, c := range colnames {
		if i < len(rel.names) {
			rel.names[i] = c.GetString_().GetSval()
		}
	}
}

// hasRelation reports whether a relation of the scope is called name.
func (sc *fromScope) hasRelation(name string) bool {
	return slices.ContainsFunc(sc.rels, func(r relScope) bool { return r.alias == name })
}

// hasColumn reports whether a relation of the scope is known to have a
// column called name.
func (sc *fromScope) hasColumn(name string) bool {
	return slices.ContainsFunc(sc.rels, func(r relScope) bool { return slices.Contains(r.names, name) })
}

// star expands * or alias.*.
func (sc *fromScope) star(cr *pg.ColumnRef) ([]resultOrigin, bool) {
	if sc.starUnsure || len(sc.rels) == 0 {
		return nil, false
	}
	var qual string
	if len(cr.Fields) == 2 {
		qual = cr.Fields[0].GetString_().GetSval()
	} else if len(cr.Fields) != 1 {
		return nil, false
	}
	var out []resultOrigin
	found := false
	for _, rel := range sc.rels {
		if qual != "" && rel.alias != qual {
			continue
		}
		if rel.cols == nil {
			return nil, false
		}
		found = true
		for i, c := range rel.cols {
			c.name = rel.names[i]
			out = append(out, c)
		}
	}
	return out, found
}

// exprOrigin returns what the tree says about an expression's value.
func (sc *fromScope) exprOrigin(n *pg.Node) resultOrigin {
	switch e := n.Node.(type) {
	case *pg.Node_ColumnRef:
		return sc.columnOrigin(e.ColumnRef)
	case *pg.Node_TypeCast:
		if t, err := TypeOf(e.TypeCast.TypeName); err == nil {
			return resultOrigin{typ: t}
		}
	case *pg.Node_FuncCall:
		// jsonb_build_object and its kin (rewrite.go jsonFuncs) return jsonb.
		if _, name := pg.FuncName(e.FuncCall); strings.HasPrefix(name, "jsonb_") || name == "to_jsonb" {
			if jsonFuncs[name] != "" {
				return resultOrigin{typ: sqltypes.Of(sqltypes.JSONB)}
			}
		}
	case *pg.Node_AExpr:
		// An element of a jsonb value is jsonb.
		if a := e.AExpr; a.Kind == pg.A_Expr_Kind_AEXPR_OP && len(a.Name) == 1 && a.Lexpr != nil {
			switch a.Name[0].GetString_().GetSval() {
			case "->", "#>":
				if l := sc.exprOrigin(a.Lexpr); l.typ.Kind() == sqltypes.JSONB {
					return resultOrigin{typ: l.typ}
				}
			}
		}
	}
	return resultOrigin{}
}

// columnOrigin resolves col or alias.col; it gives up when a relation
// whose columns are unknown could hold the name.
func (sc *fromScope) columnOrigin(cr *pg.ColumnRef) resultOrigin {
	var qual, name string
	switch len(cr.Fields) {
	case 1:
		name = cr.Fields[0].GetString_().GetSval()
	case 2:
		qual = cr.Fields[0].GetString_().GetSval()
		name = cr.Fields[1].GetString_().GetSval()
	default:
		return resultOrigin{}
	}
	var match resultOrigin
	matches := 0
	for _, rel := range sc.rels {
		if qual != "" && rel.alias != qual {
			continue
		}
		if rel.cols == nil {
			return resultOrigin{}
		}
		for i, n := range rel.names {
			if n == name {
				match = rel.cols[i]
				matches++
			}
		}
	}
	if matches != 1 {
		return resultOrigin{}
	}
	return match
}
