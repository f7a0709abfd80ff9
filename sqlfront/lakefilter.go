package sqlfront

import (
	"context"
	"slices"
	"strconv"
	"strings"

	pg "github.com/minkdb/mink/sqlfront/pgtree"
	"github.com/minkdb/mink/sqlfront/translate"

	"github.com/minkdb/mink/internal/sqltypes"
	"github.com/minkdb/mink/tiering"
)

// Statistics pruning of the lake read. A SELECT over one log table whose
// WHERE clause has top-level AND conjuncts `col op value` (op one of =, <,
// <=, >, >=, IN, BETWEEN, IS [NOT] NULL; value a constant or a parameter)
// passes them to the lake read (tiering.ScanRequest.Filter), which skips
// the data files and row groups whose column statistics exclude them. The
// engine applies the WHERE clause again to what the scan returns, so a
// filter may only ever be wider than the condition, never narrower:
//
//   - the statement references exactly one table, once (no subquery, CTE
//     or join could scan it under another condition);
//   - the column is smallint, integer, bigint, boolean, text, varchar,
//     date, timestamp or timestamptz (floats are left out for NaN, char(n)
//     for its blank padding, numeric, uuid and json for their orderings);
//   - a value is a parameter (whose type is the column's, as PostgreSQL
//     infers it, unless the client declared another), a string literal
//     (which PostgreSQL and the engine read as the column's type), an
//     integer literal for an integer column, true/false for a boolean
//     one, or a literal cast to the column's own type; the engine
//     evaluates it as the column's type, exactly as in the comparison;
//   - a value that fails to convert, or is NULL, drops the conjunct (the
//     filter gets wider).
//
// The stream part of the union read is not filtered.

// lakeFilterPlan is what planning found: the table and its conjuncts.
type lakeFilterPlan struct {
	table *tableInfo
	conds []lakeCond
}

type lakeCond struct {
	col   int
	op    tiering.PredOp
	exprs []*pg.Node // constants or parameters
}

// lakeFilterKinds are the column types a filter may use.
var lakeFilterKinds = map[sqltypes.Kind]bool{
	sqltypes.Int2: true, sqltypes.Int4: true, sqltypes.Int8: true, sqltypes.Bool: true,
	sqltypes.Text: true, sqltypes.Varchar: true, sqltypes.Date: true,
	sqltypes.Timestamp: true, sqltypes.Timestamptz: true,
}

// lakePredOps are the lake's predicates of comparisons.
var lakePredOps = map[condOp]tiering.PredOp{
	condEq: tiering.PredEq, condLt: tiering.PredLt, condLe: tiering.PredLe, condGt: tiering.PredGt, condGe: tiering.PredGe,
}

// lakeFiltersOff turns statistics pruning off (tests compare with it).
var lakeFiltersOff bool

// maxFilterValues bounds the values of one IN list a filter evaluates.
const maxFilterValues = 64

// planLakeFilter inspects a SELECT (the tree the engine runs); nil means
// no filter. paramOIDs are the parameter types the client declared.
func (s *session) planLakeFilter(tree *pg.Node, paramOIDs []uint32) *lakeFilterPlan {
	if tree == nil {
		return nil
	}
	sel := tree.GetSelectStmt()
	if sel == nil || sel.Op != pg.SetOperation_SETOP_NONE || sel.WithClause != nil || len(sel.FromClause) != 1 || sel.WhereClause == nil {
		return nil
	}
	rv := sel.FromClause[0].GetRangeVar()
	if rv == nil || len(pg.RangeVars(tree)) != 1 {
		return nil
	}
	table, err := s.lookupTable(rv)
	if err != nil || table.isPK() {
		return nil
	}
	qualifier := rv.Relname
	if rv.Alias != nil {
		qualifier = rv.Alias.Aliasname
	}
	isValue := func(n *pg.Node, col int) bool {
		typ := table.cols[col].Type
		if pr := n.GetParamRef(); pr != nil {
			i := int(pr.Number) - 1
			return i < 0 || i >= len(paramOIDs) || paramOIDs[i] == 0 || paramOIDs[i] == typ.OID()
		}
		if tc := n.GetTypeCast(); tc != nil {
			if tc.TypeName == nil {
				return false
			}
			t, err := translate.TypeOf(tc.TypeName)
			if err != nil || t.Kind() != typ.Kind() || t.Kind() == sqltypes.Text || t.Kind() == sqltypes.Varchar {
				return false
			}
			c := tc.Arg.GetAConst()
			return c != nil && c.GetSval() != nil
		}
		c := n.GetAConst()
		if c == nil || c.Isnull {
			return false
		}
		switch v := c.Val.(type) {
		case *pg.A_Const_Sval:
			switch typ.Kind() {
			case sqltypes.Int2, sqltypes.Int4, sqltypes.Int8:
				// Only a plain integer: the engine's cast of '1.5' to an
				// integer rounds.
				_, err := strconv.ParseInt(strings.TrimSpace(v.Sval.Sval), 10, 64)
				return err == nil
			}
			return true
		case *pg.A_Const_Ival:
			switch typ.Kind() {
			case sqltypes.Int2, sqltypes.Int4, sqltypes.Int8:
				return true
			}
		case *pg.A_Const_Boolval:
			return typ.Kind() == sqltypes.Bool
		}
		return false
	}
	conds, _ := whereConds(sel.WhereClause, func(cr *pg.ColumnRef) (int, bool) {
		i, ok := tableColumn(cr, qualifier, table)
		return i, ok && lakeFilterKinds[table.cols[i].Type.Kind()]
	})
	plan := &lakeFilterPlan{table: table}
	valid := func(c colCond) bool {
		return !slices.ContainsFunc(c.values, func(n *pg.Node) bool { return !isValue(n, c.col) })
	}
	for _, c := range conds {
		switch c.op {
		case condIsNull:
			plan.conds = append(plan.conds, lakeCond{col: c.col, op: tiering.PredIsNull})
		case condNotNull:
			plan.conds = append(plan.conds, lakeCond{col: c.col, op: tiering.PredNotNull})
		case condEq, condLt, condLe, condGt, condGe:
			if valid(c) {
				plan.conds = append(plan.conds, lakeCond{col: c.col, op: lakePredOps[c.op], exprs: c.values})
			}
		case condIn:
			if len(c.values) <= maxFilterValues && valid(c) {
				plan.conds = append(plan.conds, lakeCond{col: c.col, op: tiering.PredIn, exprs: c.values})
			}
		case condBetween:
			if valid(c) {
				plan.conds = append(plan.conds,
					lakeCond{col: c.col, op: tiering.PredGe, exprs: c.values[:1]},
					lakeCond{col: c.col, op: tiering.PredLe, exprs: c.values[1:]})
			}
		}
	}
	if len(plan.conds) == 0 {
		return nil
	}
	return plan
}

// lakeFilter evaluates the plan's values with the statement's arguments;
// a conjunct whose value does not evaluate is left out.
func (s *session) lakeFilter(ctx context.Context, p *lakeFilterPlan, args []any) []tiering.Predicate {
	if p == nil || lakeFiltersOff {
		return nil
	}
	var out []tiering.Predicate
	for _, c := range p.conds {
		col := p.table.cols[c.col]
		pred := tiering.Predicate{Column: col.Name, Op: c.op}
		if len(c.exprs) > 0 {
			vals, ok := s.filterValues(ctx, c.exprs, col.Type, args)
			if !ok {
				continue
			}
			pred.Values = vals
		}
		out = append(out, pred)
	}
	return out
}

// filterValues evaluates constants or parameters as typ, in the engine
// (one query), and returns them as tiering.Predicate values; false if one
// is NULL or does not evaluate.
func (s *session) filterValues(ctx context.Context, exprs []*pg.Node, typ sqltypes.Type, args []any) ([]any, bool) {
	items := make([]string, len(exprs))
	var qargs []any
	for i, e := range exprs {
		var v string
		if pr := e.GetParamRef(); pr != nil {
			n := int(pr.Number) - 1
			if n < 0 || n >= len(args) || args[n] == nil {
				return nil, false
			}
			qargs = append(qargs, args[n])
			v = "$" + strconv.Itoa(len(qargs))
		} else {
			lit, err := deparseExpr(e)
			if err != nil {
				return nil, false
			}
			v = lit
		}
		items[i] = v
	}
	rec, err := s.evalConstants(ctx, "filter", typ, items, qargs)
	if err != nil {
		return nil, false
	}
	defer rec.Release()
	out := make([]any, len(exprs))
	for i := range exprs {
		v, ok := tiering.PredicateValue(rec.Column(i))
		if !ok {
			return nil, false
		}
		out[i] = v
	}
	return out, true
}
