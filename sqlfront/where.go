package sqlfront

import (
	pg "github.com/minkdb/mink/sqlfront/pgtree"
)

// A WHERE clause taken apart once, for the planners that answer a
// statement, or narrow what it reads, without the engine: partition
// pruning (prune.go), the lake's statistics filters (lakefilter.go) and
// primary-key lookups, updates and deletes (pk_lookup.go, pk_update.go).
// Each planner decides which conditions and values it may use. Pruning
// and lake filters only ever read more than the WHERE clause selects (the
// engine applies all of it again); a key plan is used only when every
// conjunct is a key condition.

// condOp is the comparison of a column condition.
type condOp int

const (
	condEq condOp = iota
	condLt
	condLe
	condGt
	condGe
	condIn      // col IN (values…)
	condBetween // col BETWEEN values[0] AND values[1]
	condIsNull
	condNotNull
)

// colCond is one conjunct `column op values` of a WHERE clause, written
// with the column first: a comparison with the column on the right is
// mirrored (5 < x is x > 5).
type colCond struct {
	col    int // the column's index in the table
	op     condOp
	values []*pg.Node // the operands, unchecked
}

// whereConds returns the top-level AND conjuncts of where (nested ANDs
// flattened), in order, that compare a column with something: `col op x`
// or `x op col` for op one of = < <= > >=, `col IN (…)`, `col BETWEEN a
// AND b`, `col IS [NOT] NULL`. resolve maps a column reference to a column
// index, false for a reference the planner does not take as a column. all
// reports whether every conjunct is such a condition.
func whereConds(where *pg.Node, resolve func(*pg.ColumnRef) (int, bool)) (conds []colCond, all bool) {
	column := func(n *pg.Node) (int, bool) {
		cr := n.GetColumnRef()
		if cr == nil {
			return 0, false
		}
		return resolve(cr)
	}
	all = true
	var visit func(n *pg.Node)
	visit = func(n *pg.Node) {
		if be := n.GetBoolExpr(); be != nil && be.Boolop == pg.BoolExprType_AND_EXPR {
			for _, a := range be.Args {
				visit(a)
			}
			return
		}
		if c, ok := colCondOf(n, column); ok {
			conds = append(conds, c)
		} else {
			all = false
		}
	}
	if where != nil {
		visit(where)
	}
	return conds, all
}

// comparisons are the operators of `col op value` conditions, with their
// mirror images (for `value op col`).
var comparisons = map[string]struct{ op, mirrored condOp }{
	"=": {condEq, condEq}, "<": {condLt, condGt}, "<=": {condLe, condGe}, ">": {condGt, condLt}, ">=": {condGe, condLe},
}

func colCondOf(n *pg.Node, column func(*pg.Node) (int, bool)) (colCond, bool) {
	if nt := n.GetNullTest(); nt != nil {
		col, ok := column(nt.Arg)
		if !ok || nt.Argisrow {
			return colCond{}, false
		}
		op := condIsNull
		if nt.Nulltesttype == pg.NullTestType_IS_NOT_NULL {
			op = condNotNull
		}
		return colCond{col: col, op: op}, true
	}
	e := n.GetAExpr()
	if e == nil || len(e.Name) != 1 || e.Lexpr == nil || e.Rexpr == nil {
		return colCond{}, false
	}
	opName := e.Name[0].GetString_().GetSval()
	switch e.Kind {
	case pg.A_Expr_Kind_AEXPR_OP:
		cmp, ok := comparisons[opName]
		if !ok {
			return colCond{}, false
		}
		if col, ok := column(e.Lexpr); ok {
			return colCond{col: col, op: cmp.op, values: []*pg.Node{e.Rexpr}}, true
		}
		if col, ok := column(e.Rexpr); ok {
			return colCond{col: col, op: cmp.mirrored, values: []*pg.Node{e.Lexpr}}, true
		}
	case pg.A_Expr_Kind_AEXPR_IN:
		items := e.Rexpr.GetList().GetItems()
		if col, ok := column(e.Lexpr); ok && opName == "=" && len(items) > 0 {
			return colCond{col: col, op: condIn, values: items}, true
		}
	case pg.A_Expr_Kind_AEXPR_BETWEEN:
		items := e.Rexpr.GetList().GetItems()
		if col, ok := column(e.Lexpr); ok && len(items) == 2 {
			return colCond{col: col, op: condBetween, values: items}, true
		}
	}
	return colCond{}, false
}

// tableColumn resolves a column reference in a statement over one table:
// a bare column name, or qualifier.column, where qualifier is the table's
// alias or, without one, its name.
func tableColumn(cr *pg.ColumnRef, qualifier string, t *tableInfo) (int, bool) {
	var name string
	switch len(cr.Fields) {
	case 1:
		name = cr.Fields[0].GetString_().GetSval()
	case 2:
		if cr.Fields[0].GetString_().GetSval() != qualifier {
			return 0, false
		}
		name = cr.Fields[1].GetString_().GetSval()
	default:
		return 0, false
	}
	if name == "" {
		return 0, false // *, or not a name
	}
	i, ok := t.colIdx[name]
	return i, ok
}
