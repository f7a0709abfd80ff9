package translate

import (
	pg "github.com/minkdb/mink/sqlfront/pgtree"

	"github.com/minkdb/mink/internal/sqltypes"
)

// arrayLiteral reads a string constant assigned or cast to an array type
// ('{a,"b c",NULL}'::text[]) as PostgreSQL's array_in does, which the
// engine cannot (it reads only its own '[a, b]' form), and returns the
// engine expression ARRAY[elements]::elem[]. Each element is read as a
// literal of the element type (TypedLiteral), so '{on,off}'::bool[] and
// '{"\\x01"}'::bytea[] mean what they mean in PostgreSQL. varchar(n) and
// char(n) elements are given as text: the length rule is applied when the
// value is stored (sqltypes.Conform). Errors are 22P02 for malformed text
// and multi-dimensional values, and the element type's input errors.
func arrayLiteral(text string, typ sqltypes.Type) (*pg.Node, error) {
	elems, err := sqltypes.ParseArrayText(text)
	if err != nil {
		return nil, err
	}
	elemType := typ.Elem()
	castName := elemType.Name()
	switch elemType.Kind() {
	case sqltypes.Varchar, sqltypes.Char:
		castName = "text"
		elemType = sqltypes.Of(sqltypes.Text)
	case sqltypes.JSONB:
		castName = "json"
		elemType = sqltypes.Of(sqltypes.JSON)
	}
	if elemType.Kind() == sqltypes.JSON {
		// Quoted: the parser takes a bare json for its JSON keyword and
		// deparses it as pg_catalog.json, which the engine cannot read.
		castName = `"json"`
	}
	nodes := make([]*pg.Node, len(elems))
	for i, e := range elems {
		if e == nil {
			nodes[i] = pg.NullConst()
			continue
		}
		n, err := TypedLiteral(*e, elemType)
		if err != nil {
			return nil, err
		}
		if n == nil {
			if n, err = pg.ParseExpr("CAST(NULL AS " + castName + ")"); err != nil {
				return nil, err
			}
			n.GetTypeCast().Arg = pg.StringConst(*e)
		}
		nodes[i] = n
	}
	cast, err := pg.ParseExpr("CAST(NULL AS " + castName + "[])")
	if err != nil {
		return nil, err
	}
	cast.GetTypeCast().Arg = &pg.Node{Node: &pg.Node_AArrayExpr{AArrayExpr: &pg.A_ArrayExpr{Elements: nodes, Location: -1}}}
	return cast, nil
}

// arrayFuncs are PostgreSQL's array functions whose engine counterparts
// differ (rewriteArrayFunc).
var arrayFuncs = map[string]bool{"array_length": true, "array_upper": true, "array_lower": true, "cardinality": true, "array_ndims": true,
	"array_dims": true, "array_remove": true, "array_to_string": true}

// rewriteArrayFunc gives PostgreSQL's results for one-dimensional arrays:
// array_length(a, 1) and array_upper(a, 1) are the number of elements, NULL
// for an empty array (the engine says 0), and NULL for any other dimension
// (the engine refuses); array_lower(a, 1) is 1, NULL when empty;
// cardinality(a) counts the elements (the engine's works on maps only);
// array_ndims(a) is 1, NULL when empty. All are integer, as in PostgreSQL.
// array_dims(a) is '[1:n]'; array_remove and the three-argument
// array_to_string, which the engine lacks, call session macros
// (sqlfront/engine).
// nil leaves the call as it is (wrong number of arguments: the engine
// reports it).
func rewriteArrayFunc(name string, fc *pg.FuncCall) *pg.Node {
	length := func(a *pg.Node) *pg.Node { return pg.Call("len", a) }
	positive := func(a *pg.Node, then *pg.Node) *pg.Node {
		return caseWhen(&pg.Node{Node: &pg.Node_AExpr{AExpr: &pg.A_Expr{Kind: pg.A_Expr_Kind_AEXPR_OP, Name: pg.Names(">"), Lexpr: length(a), Rexpr: pg.IntConst(0)}}}, then)
	}
	switch {
	case name == "array_dims" && len(fc.Args) == 1:
		// '[1:n]', NULL when empty.
		a := fc.Args[0]
		return positive(a, concatText(pg.StringConst("[1:"), pg.Cast(length(a), "text"), pg.StringConst("]")))
	case name == "array_remove" && len(fc.Args) == 2:
		// The engine has no array_remove; the session macro filters with
		// IS DISTINCT FROM (array_remove(a, NULL) removes the NULLs).
		return pg.Call("mink_array_remove", fc.Args[0], fc.Args[1])
	case name == "array_to_string" && len(fc.Args) == 3:
		// The engine's takes no text for NULL elements.
		return pg.Call("mink_array_to_string", fc.Args...)
	case name == "array_remove" || name == "array_to_string" || name == "array_dims":
		return nil
	case name == "cardinality" && len(fc.Args) == 1:
		return pg.Cast(length(fc.Args[0]), "int4")
	case name == "array_ndims" && len(fc.Args) == 1:
		return pg.Cast(positive(fc.Args[0], pg.IntConst(1)), "int4")
	case len(fc.Args) == 2 && name != "cardinality" && name != "array_ndims":
		a, dim := fc.Args[0], fc.Args[1]
		var value *pg.Node
		if name == "array_lower" {
			value = positive(a, pg.IntConst(1))
		} else {
			value = pg.Call("nullif", length(a), pg.IntConst(0))
		}
		isOne := &pg.Node{Node: &pg.Node_AExpr{AExpr: &pg.A_Expr{Kind: pg.A_Expr_Kind_AEXPR_OP, Name: pg.Names("="), Lexpr: dim, Rexpr: pg.IntConst(1)}}}
		return pg.Cast(caseWhen(isOne, value), "int4")
	}
	return nil
}

// caseWhen is CASE WHEN cond THEN then END.
func caseWhen(cond, then *pg.Node) *pg.Node {
	return &pg.Node{Node: &pg.Node_CaseExpr{CaseExpr: &pg.CaseExpr{
		Args:     []*pg.Node{{Node: &pg.Node_CaseWhen{CaseWhen: &pg.CaseWhen{Expr: cond, Result: then}}}},
		Location: -1,
	}}}
}

// rewriteSubscripts makes a[i] NULL for i < 1 as in PostgreSQL (the engine
// counts a negative index from the end). An index expression i becomes
// CASE WHEN i > 0 THEN i END; with a constant index below 1 the whole
// expression becomes CASE WHEN false THEN a[1] END, NULL of the element
// type (the engine types a[NULL] as integer). Slices (a[1:2]) are left as
// they are. changed reports whether ind was changed in place; repl, when
// not nil, replaces the whole expression.
func rewriteSubscripts(ind *pg.A_Indirection) (repl *pg.Node, changed bool) {
	constBelowOne := false
	for _, n := range ind.Indirection {
		idx := n.GetAIndices()
		if idx == nil || idx.IsSlice || idx.Uidx == nil {
			continue
		}
		if v, ok := constInt(idx.Uidx); ok {
			if v < 1 {
				idx.Uidx = pg.IntConst(1)
				constBelowOne, changed = true, true
			}
			continue
		}
		if idx.Uidx.GetAConst() != nil {
			continue
		}
		i := idx.Uidx
		idx.Uidx = caseWhen(&pg.Node{Node: &pg.Node_AExpr{AExpr: &pg.A_Expr{Kind: pg.A_Expr_Kind_AEXPR_OP, Name: pg.Names(">"), Lexpr: i, Rexpr: pg.IntConst(0)}}}, i)
		changed = true
	}
	if constBelowOne {
		return caseWhen(pg.BoolConst(false), &pg.Node{Node: &pg.Node_AIndirection{AIndirection: ind}}), true
	}
	return nil, changed
}

// constInt reads an integer constant, also a negated one (-1 parses as
// unary minus on 1 in some contexts).
func constInt(n *pg.Node) (int64, bool) {
	if c := n.GetAConst(); c != nil {
		if iv := c.GetIval(); iv != nil {
			return int64(iv.Ival), true
		}
		if c.Val == nil && !c.Isnull {
			return 0, true // pg_query leaves Val empty for 0
		}
		return 0, false
	}
	if e := n.GetAExpr(); e != nil && e.Kind == pg.A_Expr_Kind_AEXPR_OP && e.Lexpr == nil && len(e.Name) == 1 && e.Name[0].GetString_().GetSval() == "-" {
		if v, ok := constInt(e.Rexpr); ok {
			return -v, true
		}
	}
	return 0, false
}

// engineJSONCast is a cast to json or jsonb (array: json[], jsonb[]) as the
// engine reads it: to "JSON", quoted so that the deparser does not turn it
// into pg_catalog.json (the parser's JSON keyword), which the engine
// cannot read; the engine has no jsonb. nil when tc already is.
func engineJSONCast(tc *pg.TypeCast, array bool) *pg.Node {
	if names := tc.TypeName.GetNames(); len(names) == 1 && names[0].GetString_().GetSval() == "JSON" {
		return nil
	}
	tn := &pg.TypeName{Names: pg.Names("JSON"), Typemod: -1, Location: tc.TypeName.GetLocation()}
	if array {
		tn.ArrayBounds = []*pg.Node{{Node: &pg.Node_Integer{Integer: &pg.Integer{Ival: -1}}}}
	}
	return &pg.Node{Node: &pg.Node_TypeCast{TypeCast: &pg.TypeCast{Arg: tc.Arg, TypeName: tn, Location: tc.Location}}}
}

// anyArrayOperand types the array of x op ANY/ALL (array) as PostgreSQL
// does when it is a bare parameter or a quoted literal: an array of x's
// type ($1 in id = ANY($1) is integer[] for an integer id, so a client can
// send a slice; '{1,2}' is read as an integer[] literal). It reports
// whether it changed e.
func anyArrayOperand(e *pg.A_Expr, sc *fromScope) bool {
	if e.Lexpr == nil || e.Rexpr == nil {
		return false
	}
	var elem sqltypes.Type
	if c := e.Lexpr.GetAConst(); c != nil && !c.Isnull {
		switch {
		case c.GetIval() != nil:
			elem = sqltypes.Of(sqltypes.Int4)
		case c.GetFval() != nil:
			elem = sqltypes.Of(sqltypes.Numeric)
		}
	} else if t := sc.exprOrigin(e.Lexpr).typ; t.Valid() && t.Kind() != sqltypes.Array && t.Storable() {
		elem = t
	}
	if !elem.Valid() {
		return false
	}
	switch elem.Kind() {
	case sqltypes.Varchar, sqltypes.Char:
		elem = sqltypes.Of(sqltypes.Text)
	case sqltypes.JSON, sqltypes.JSONB:
		return false
	}
	if lit, ok := e.Rexpr.GetAConst().GetSval(), untypedString(e.Rexpr); ok && lit != nil {
		n, err := arrayLiteral(lit.Sval, sqltypes.ArrayOf(elem))
		if err != nil {
			return false // the engine reports it
		}
		e.Rexpr = n
		return true
	}
	if e.Rexpr.GetParamRef() == nil {
		return false
	}
	cast, err := pg.ParseExpr("CAST(NULL AS " + elem.Name() + "[])")
	if err != nil {
		return false
	}
	cast.GetTypeCast().Arg = e.Rexpr
	e.Rexpr = cast
	return true
}

// arrayConcat gives a || b PostgreSQL's meaning where one side is an array
// column (or an expression of one) and the engine would refuse or misread
// the other: array || element is list_append, element || array
// list_prepend, and a quoted literal next to an array is read as an array
// literal of its type ('{b,c}'). repl, when not nil, replaces the whole
// expression; changed reports any change (e's operands may change in
// place).
func arrayConcat(e *pg.A_Expr, sc *fromScope) (repl *pg.Node, changed bool) {
	lt, rt := sc.exprOrigin(e.Lexpr).typ, sc.exprOrigin(e.Rexpr).typ
	isArray := func(t sqltypes.Type) bool { return t.Valid() && t.Kind() == sqltypes.Array }
	scalar := func(n *pg.Node, t sqltypes.Type) bool {
		if c := n.GetAConst(); c != nil {
			return c.GetIval() != nil || c.GetFval() != nil || c.GetBoolval() != nil
		}
		return t.Valid() && t.Kind() != sqltypes.Array && t.Kind() != sqltypes.Unknown
	}
	// ARRAY[…] and x::T[] are arrays whatever the tree knows of their
	// element type.
	constructed := func(n *pg.Node) bool {
		if n.GetAArrayExpr() != nil {
			return true
		}
		tc := n.GetTypeCast()
		return tc != nil && len(tc.GetTypeName().GetArrayBounds()) > 0
	}
	switch {
	case constructed(e.Lexpr) && !isArray(lt) && scalar(e.Rexpr, rt):
		return pg.Call("list_append", e.Lexpr, e.Rexpr), true
	case constructed(e.Rexpr) && !isArray(rt) && scalar(e.Lexpr, lt):
		return pg.Call("list_prepend", e.Lexpr, e.Rexpr), true
	case isArray(lt) && untypedString(e.Rexpr):
		n, err := arrayLiteral(e.Rexpr.GetAConst().GetSval().Sval, lt)
		if err != nil {
			return nil, false // the engine reports it
		}
		e.Rexpr = n
		return nil, true
	case isArray(rt) && untypedString(e.Lexpr):
		n, err := arrayLiteral(e.Lexpr.GetAConst().GetSval().Sval, rt)
		if err != nil {
			return nil, false
		}
		e.Lexpr = n
		return nil, true
	case isArray(lt) && scalar(e.Rexpr, rt):
		return pg.Call("list_append", e.Lexpr, e.Rexpr), true
	case isArray(rt) && scalar(e.Lexpr, lt):
		return pg.Call("list_prepend", e.Lexpr, e.Rexpr), true
	}
	return nil, false
}
