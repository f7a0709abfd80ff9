package sqlfront

import (
	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/minkdb/mink/sqlfront/pgwire"
)

// postgresColumnNames renames result columns the way PostgreSQL names them
// (FigureColname): count(*) is "count", 1 is "?column?", x::int is "x".
// The engine names expressions after their text; clients and tools expect
// PostgreSQL's names. Only a target list without * is renamed, because a
// star's width is not known from the parse tree.
func postgresColumnNames(node *pg.Node, cols []pgwire.Column) {
	sel := node.GetSelectStmt()
	if sel == nil {
		return
	}
	for sel.Op != pg.SetOperation_SETOP_NONE && sel.Larg != nil {
		sel = sel.Larg
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
	if n == nil {
		return ""
	}
	switch e := n.Node.(type) {
	case *pg.Node_ColumnRef:
		f := e.ColumnRef.Fields
		if s := f[len(f)-1].GetString_(); s != nil {
			return s.Sval
		}
	case *pg.Node_AIndirection:
		ind := e.AIndirection.Indirection
		if s := ind[len(ind)-1].GetString_(); s != nil {
			return s.Sval
		}
		return figureColname(e.AIndirection.Arg)
	case *pg.Node_FuncCall:
		f := e.FuncCall.Funcname
		return f[len(f)-1].GetString_().GetSval()
	case *pg.Node_AExpr:
		if e.AExpr.Kind == pg.A_Expr_Kind_AEXPR_NULLIF {
			return "nullif"
		}
	case *pg.Node_TypeCast:
		if name := figureColname(e.TypeCast.Arg); name != "" {
			return name
		}
		names := e.TypeCast.TypeName.Names
		return postgresTypeName(names[len(names)-1].GetString_().GetSval())
	case *pg.Node_CaseExpr:
		if name := figureColname(e.CaseExpr.Defresult); name != "" {
			return name
		}
		return "case"
	case *pg.Node_AArrayExpr:
		return "array"
	case *pg.Node_CoalesceExpr:
		return "coalesce"
	case *pg.Node_MinMaxExpr:
		if e.MinMaxExpr.Op == pg.MinMaxOp_IS_GREATEST {
			return "greatest"
		}
		return "least"
	case *pg.Node_SqlvalueFunction:
		switch e.SqlvalueFunction.Op {
		case pg.SQLValueFunctionOp_SVFOP_CURRENT_DATE:
			return "current_date"
		case pg.SQLValueFunctionOp_SVFOP_CURRENT_TIME, pg.SQLValueFunctionOp_SVFOP_CURRENT_TIME_N:
			return "current_time"
		case pg.SQLValueFunctionOp_SVFOP_CURRENT_TIMESTAMP, pg.SQLValueFunctionOp_SVFOP_CURRENT_TIMESTAMP_N:
			return "current_timestamp"
		case pg.SQLValueFunctionOp_SVFOP_LOCALTIME, pg.SQLValueFunctionOp_SVFOP_LOCALTIME_N:
			return "localtime"
		case pg.SQLValueFunctionOp_SVFOP_LOCALTIMESTAMP, pg.SQLValueFunctionOp_SVFOP_LOCALTIMESTAMP_N:
			return "localtimestamp"
		case pg.SQLValueFunctionOp_SVFOP_CURRENT_USER, pg.SQLValueFunctionOp_SVFOP_USER:
			return "current_user"
		case pg.SQLValueFunctionOp_SVFOP_SESSION_USER:
			return "session_user"
		case pg.SQLValueFunctionOp_SVFOP_CURRENT_CATALOG:
			return "current_catalog"
		case pg.SQLValueFunctionOp_SVFOP_CURRENT_SCHEMA:
			return "current_schema"
		}
	case *pg.Node_SubLink:
		switch e.SubLink.SubLinkType {
		case pg.SubLinkType_EXISTS_SUBLINK:
			return "exists"
		case pg.SubLinkType_ARRAY_SUBLINK:
			return "array"
		case pg.SubLinkType_EXPR_SUBLINK:
			if sub := e.SubLink.Subselect.GetSelectStmt(); sub != nil && len(sub.TargetList) == 1 {
				rt := sub.TargetList[0].GetResTarget()
				if rt.Name != "" {
					return rt.Name
				}
				return figureColname(rt.Val)
			}
		}
	case *pg.Node_BoolExpr, *pg.Node_NullTest, *pg.Node_BooleanTest:
		return ""
	}
	return ""
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
