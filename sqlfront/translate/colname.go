package translate

import (
	"strconv"

	pg "github.com/minkdb/mink/sqlfront/pgtree"

	"github.com/minkdb/mink/sqlfront/pgwire"
)

// ColumnNames renames result columns the way PostgreSQL names them
// (FigureColname): count(*) is "count", 1 is "?column?", x::int is "x".
// The engine names expressions after their text; clients and tools expect
// PostgreSQL's names. Only a target list without * is renamed, because a
// star's width is not known from the parse tree.
func ColumnNames(node *pg.Node, cols []pgwire.Column) {
	sel := node.GetSelectStmt()
	if sel == nil {
		return
	}
	for sel.Op != pg.SetOperation_SETOP_NONE && sel.Larg != nil {
		sel = sel.Larg
	}
	if len(sel.ValuesLists) > 0 {
		// VALUES names its columns column1, column2, … (the engine: col0, …).
		if len(sel.ValuesLists[0].GetList().GetItems()) == len(cols) {
			for i := range cols {
				cols[i].Name = "column" + strconv.Itoa(i+1)
			}
		}
		return
	}
	if len(sel.TargetList) != len(cols) {
		return
	}
	for _, t := range sel.TargetList {
		if cr := t.GetResTarget().GetVal().GetColumnRef(); cr != nil && cr.Fields[len(cr.Fields)-1].GetAStar() != nil {
			return
		}
	}
	for i, t := range sel.TargetList {
		rt := t.GetResTarget()
		if c := rt.GetVal().GetAConst(); c != nil && c.Isnull {
			// An untyped NULL is text in PostgreSQL (the engine says integer).
			cols[i] = pgwire.NewColumn(cols[i].Name, 25)
		}
		if rt.Name != "" {
			cols[i].Name = rt.Name
			continue
		}
		if name := figureColname(rt.Val); name != "" {
			cols[i].Name = name
		} else {
			cols[i].Name = "?column?"
		}
	}
}

func figureColname(n *pg.Node) string {
	name, _ := figureColnameStrength(n)
	return name
}

// figureColnameStrength is PostgreSQL's FigureColnameInternal: a name and
// how good it is, 2 for a column's or a function's, 1 for a cast's type
// or "case", which a better name inside wins over (x::int is "x", but
// 'a'::regrole::oid is "oid"), 0 for none.
func figureColnameStrength(n *pg.Node) (string, int) {
	if n == nil {
		return "", 0
	}
	switch e := n.Node.(type) {
	case *pg.Node_ColumnRef:
		f := e.ColumnRef.Fields
		if s := f[len(f)-1].GetString_(); s != nil {
			return s.Sval, 2
		}
	case *pg.Node_AIndirection:
		ind := e.AIndirection.Indirection
		if s := ind[len(ind)-1].GetString_(); s != nil {
			return s.Sval, 2
		}
		return figureColnameStrength(e.AIndirection.Arg)
	case *pg.Node_FuncCall:
		f := e.FuncCall.Funcname
		return f[len(f)-1].GetString_().GetSval(), 2
	case *pg.Node_AExpr:
		if e.AExpr.Kind == pg.A_Expr_Kind_AEXPR_NULLIF {
			return "nullif", 2
		}
	case *pg.Node_TypeCast:
		if name, strength := figureColnameStrength(e.TypeCast.Arg); strength > 1 {
			return name, strength
		}
		names := e.TypeCast.TypeName.Names
		return postgresTypeName(names[len(names)-1].GetString_().GetSval()), 1
	case *pg.Node_CollateClause:
		return figureColnameStrength(e.CollateClause.Arg)
	case *pg.Node_CaseExpr:
		if name, strength := figureColnameStrength(e.CaseExpr.Defresult); strength > 1 {
			return name, strength
		}
		return "case", 1
	case *pg.Node_AArrayExpr:
		return "array", 2
	case *pg.Node_RowExpr:
		return "row", 2
	case *pg.Node_CoalesceExpr:
		return "coalesce", 2
	case *pg.Node_MinMaxExpr:
		if e.MinMaxExpr.Op == pg.MinMaxOp_IS_GREATEST {
			return "greatest", 2
		}
		return "least", 2
	case *pg.Node_SqlvalueFunction:
		if name := sqlValueFunctionNames[e.SqlvalueFunction.Op]; name != "" {
			return name, 2
		}
	case *pg.Node_SubLink:
		switch e.SubLink.SubLinkType {
		case pg.SubLinkType_EXISTS_SUBLINK:
			return "exists", 2
		case pg.SubLinkType_ARRAY_SUBLINK:
			return "array", 2
		case pg.SubLinkType_EXPR_SUBLINK:
			// The name of the subquery's one column, as it names it.
			if sub := e.SubLink.Subselect.GetSelectStmt(); sub != nil && len(sub.TargetList) == 1 {
				rt := sub.TargetList[0].GetResTarget()
				if rt.Name != "" {
					return rt.Name, 2
				}
				if name := figureColname(rt.Val); name != "" {
					return name, 2
				}
				return "?column?", 2
			}
		}
	}
	return "", 0
}

// sqlValueFunctionNames are the column names of CURRENT_DATE, USER and
// the other SQL functions without parentheses.
var sqlValueFunctionNames = map[pg.SQLValueFunctionOp]string{
	pg.SQLValueFunctionOp_SVFOP_CURRENT_DATE:        "current_date",
	pg.SQLValueFunctionOp_SVFOP_CURRENT_TIME:        "current_time",
	pg.SQLValueFunctionOp_SVFOP_CURRENT_TIME_N:      "current_time",
	pg.SQLValueFunctionOp_SVFOP_CURRENT_TIMESTAMP:   "current_timestamp",
	pg.SQLValueFunctionOp_SVFOP_CURRENT_TIMESTAMP_N: "current_timestamp",
	pg.SQLValueFunctionOp_SVFOP_LOCALTIME:           "localtime",
	pg.SQLValueFunctionOp_SVFOP_LOCALTIME_N:         "localtime",
	pg.SQLValueFunctionOp_SVFOP_LOCALTIMESTAMP:      "localtimestamp",
	pg.SQLValueFunctionOp_SVFOP_LOCALTIMESTAMP_N:    "localtimestamp",
	pg.SQLValueFunctionOp_SVFOP_CURRENT_ROLE:        "current_role",
	pg.SQLValueFunctionOp_SVFOP_CURRENT_USER:        "current_user",
	pg.SQLValueFunctionOp_SVFOP_USER:                "user",
	pg.SQLValueFunctionOp_SVFOP_SESSION_USER:        "session_user",
	pg.SQLValueFunctionOp_SVFOP_CURRENT_CATALOG:     "current_catalog",
	pg.SQLValueFunctionOp_SVFOP_CURRENT_SCHEMA:      "current_schema",
}

// postgresTypeName is the name PostgreSQL gives a cast's column.
func postgresTypeName(t string) string {
	switch t {
	case "int", "integer":
		return "int4"
	case "bigint":
		return "int8"
	case "smallint":
		return "int2"
	case "real":
		return "float4"
	case "double", "float":
		return "float8"
	case "boolean":
		return "bool"
	case "varchar":
		return "varchar"
	case "decimal":
		return "numeric"
	}
	return t
}
