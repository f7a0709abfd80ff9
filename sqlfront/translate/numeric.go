package translate

import (
	"math/big"
	"strings"

	"github.com/jackc/pgx/v5/pgtype"
	"google.golang.org/protobuf/proto"

	pg "github.com/minkdb/mink/sqlfront/pgtree"

	"github.com/minkdb/mink/internal/sqltypes"
)

// Numeric quotients. PostgreSQL computes avg of integers and numerics, and
// numeric / numeric, exactly, as numeric, and shows them with a scale of
// its own choosing (select_div_scale: at least 16 significant digits);
// DuckDB computes a double. A result column of the top-level SELECT that
// is such a quotient is computed by the engine as the text
// "dividend/divisor" of its exact operands (sum and count for avg), and
// divided here (QuotientText), described as numeric. Only result columns
// are rewritten: inside expressions (salary - avg(salary)), the engine's
// double remains; ORDER BY and GROUP BY references to such a column sort
// and group by that double; with DISTINCT nothing is rewritten.

// quotientOperands returns the dividend and divisor of n when it is a
// numeric quotient: avg(x) of an integer or numeric x, or x / y with both
// integer or numeric and one of them numeric.
func quotientOperands(n *pg.Node, sc *fromScope) (dividend, divisor *pg.Node, ok bool) {
	switch e := n.Node.(type) {
	case *pg.Node_FuncCall:
		fc := e.FuncCall
		schema, name := pg.FuncName(fc)
		if name != "avg" || (schema != "" && schema != "pg_catalog") || len(fc.Args) != 1 || fc.AggStar || fc.AggWithinGroup || len(fc.AggOrder) > 0 {
			return nil, nil, false
		}
		switch valueKind(fc.Args[0], sc) {
		case sqltypes.Int2, sqltypes.Int4, sqltypes.Int8, sqltypes.Numeric:
		default:
			return nil, nil, false
		}
		sum, count := proto.Clone(fc).(*pg.FuncCall), proto.Clone(fc).(*pg.FuncCall)
		sum.Funcname, count.Funcname = pg.Names("sum"), pg.Names("count")
		return &pg.Node{Node: &pg.Node_FuncCall{FuncCall: sum}}, &pg.Node{Node: &pg.Node_FuncCall{FuncCall: count}}, true
	case *pg.Node_AExpr:
		a := e.AExpr
		if a.Kind != pg.A_Expr_Kind_AEXPR_OP || len(a.Name) != 1 || a.Name[0].GetString_().GetSval() != "/" || a.Lexpr == nil || a.Rexpr == nil {
			return nil, nil, false
		}
		l, r := valueKind(a.Lexpr, sc), valueKind(a.Rexpr, sc)
		exact := func(k sqltypes.Kind) bool {
			return k == sqltypes.Int2 || k == sqltypes.Int4 || k == sqltypes.Int8 || k == sqltypes.Numeric
		}
		if exact(l) && exact(r) && (l == sqltypes.Numeric || r == sqltypes.Numeric) {
			return a.Lexpr, a.Rexpr, true
		}
	}
	return nil, nil, false
}

// valueKind is the kind of n's value as far as the tree says: constants
// by their form (7 integer, 7.0 numeric), columns and casts by their type.
func valueKind(n *pg.Node, sc *fromScope) sqltypes.Kind {
	if c := n.GetAConst(); c != nil && !c.Isnull {
		switch {
		case c.GetIval() != nil:
			return sqltypes.Int4
		case c.GetFval() != nil:
			return sqltypes.Numeric
		}
		return sqltypes.Invalid
	}
	if fc := n.GetFuncCall(); fc != nil {
		// The aggregates whose result type follows from their argument's.
		schema, name := pg.FuncName(fc)
		if schema != "" && schema != "pg_catalog" {
			return sqltypes.Invalid
		}
		if name == "count" {
			return sqltypes.Int8
		}
		if len(fc.Args) != 1 {
			return sqltypes.Invalid
		}
		arg := valueKind(fc.Args[0], sc)
		switch name {
		case "sum":
			switch {
			case arg == sqltypes.Int2 || arg == sqltypes.Int4:
				return sqltypes.Int8
			case arg == sqltypes.Int8 || arg == sqltypes.Numeric:
				return sqltypes.Numeric
			}
		case "min", "max":
			if isIntegerKind(arg) || arg == sqltypes.Numeric {
				return arg
			}
		case "avg":
			if isIntegerKind(arg) || arg == sqltypes.Numeric {
				return sqltypes.Numeric
			}
		}
		return sqltypes.Invalid
	}
	if a := n.GetAExpr(); a != nil && a.Kind == pg.A_Expr_Kind_AEXPR_OP && len(a.Name) == 1 && a.Lexpr != nil && a.Rexpr != nil {
		// Integer arithmetic stays integer (of some width), and numeric
		// with a numeric operand; division is not followed.
		switch a.Name[0].GetString_().GetSval() {
		case "+", "-", "*", "%":
			l, r := valueKind(a.Lexpr, sc), valueKind(a.Rexpr, sc)
			switch {
			case isIntegerKind(l) && isIntegerKind(r):
				return sqltypes.Int8
			case (isIntegerKind(l) || l == sqltypes.Numeric) && (isIntegerKind(r) || r == sqltypes.Numeric):
				return sqltypes.Numeric
			}
		}
		return sqltypes.Invalid
	}
	return sc.exprOrigin(n).typ.Kind()
}

func isIntegerKind(k sqltypes.Kind) bool {
	return k == sqltypes.Int2 || k == sqltypes.Int4 || k == sqltypes.Int8
}

// quotientTargets returns the positions of the result columns of sel (the
// top-level SELECT) computed as quotient text, with their operands.
func quotientTargets(sel *pg.SelectStmt, sc *fromScope) map[int][2]*pg.Node {
	if sel.Op != pg.SetOperation_SETOP_NONE || len(sel.DistinctClause) > 0 {
		return nil
	}
	out := map[int][2]*pg.Node{}
	for i, t := range sel.TargetList {
		rt := t.GetResTarget()
		if rt == nil {
			continue
		}
		num, den, ok := quotientOperands(rt.Val, sc)
		if !ok {
			continue
		}
		if rt.Val.GetAExpr() != nil && len(sel.GroupClause) > 0 && !(groupFree(sel, num) && groupFree(sel, den)) {
			// x / 4 grouped by x / 4: x alone is not grouped, so its text
			// cannot be a result column.
			continue
		}
		out[i] = [2]*pg.Node{num, den}
	}
	return out
}

// groupFree reports whether n can be a result column of the grouped query
// sel: a function call (an aggregate, as far as the tree says), a
// constant, or a column sel groups by.
func groupFree(sel *pg.SelectStmt, n *pg.Node) bool {
	if n.GetFuncCall() != nil || n.GetAConst() != nil {
		return true
	}
	cr := n.GetColumnRef()
	if cr == nil {
		return false
	}
	names := func(c *pg.ColumnRef) string {
		var parts []string
		for _, f := range c.Fields {
			parts = append(parts, f.GetString_().GetSval())
		}
		return strings.Join(parts, ".")
	}
	for _, g := range sel.GroupClause {
		if gc := g.GetColumnRef(); gc != nil && names(gc) == names(cr) {
			return true
		}
	}
	return false
}

// refsTo returns the ORDER BY and GROUP BY items that refer to result
// column i by position or by name. The rewrite points them at the
// column's expression, computed by the engine as the double it is there,
// since the quotient text would not sort or group as the number does.
func refsTo(sel *pg.SelectStmt, i int, rt *pg.ResTarget) []*pg.Node {
	name := rt.Name
	if name == "" {
		name = figureColname(rt.Val)
	}
	refers := func(n *pg.Node) bool {
		if c := n.GetAConst(); c != nil && c.GetIval() != nil && int(c.GetIval().Ival) == i+1 {
			return true
		}
		cr := n.GetColumnRef()
		return cr != nil && len(cr.Fields) == 1 && cr.Fields[0].GetString_().GetSval() == name
	}
	var out []*pg.Node
	for _, s := range sel.SortClause {
		if by := s.GetSortBy().GetNode(); by != nil && refers(by) {
			out = append(out, by)
		}
	}
	for _, g := range sel.GroupClause {
		if refers(g) {
			out = append(out, g)
		}
	}
	return out
}

// QuotientText divides the engine's "dividend/divisor" text as PostgreSQL's
// numeric division does: rounded half away from zero at select_div_scale's
// scale. ok is false for text of another form.
func QuotientText(s string) (pgtype.Numeric, bool) {
	a, b, found := strings.Cut(s, "/")
	if !found {
		return pgtype.Numeric{}, false
	}
	num, ok1 := new(big.Rat).SetString(a)
	den, ok2 := new(big.Rat).SetString(b)
	if !ok1 || !ok2 || den.Sign() == 0 {
		return pgtype.Numeric{}, false
	}
	scale := divScale(a, b)
	q := new(big.Rat).Quo(num, den)
	// Round |q| * 10^scale half away from zero.
	shifted := new(big.Rat).Mul(q, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil)))
	neg := shifted.Sign() < 0
	shifted.Abs(shifted)
	n, rem := new(big.Int).QuoRem(shifted.Num(), shifted.Denom(), new(big.Int))
	if new(big.Int).Mul(rem, big.NewInt(2)).Cmp(shifted.Denom()) >= 0 {
		n.Add(n, big.NewInt(1))
	}
	if neg {
		n.Neg(n)
	}
	return pgtype.Numeric{Int: n, Exp: -int32(scale), Valid: true}, true
}

// divScale is PostgreSQL's select_div_scale for dividend a and divisor b
// (decimal texts): at least 16 significant digits, and at least each
// operand's scale.
func divScale(a, b string) int {
	w1, f1, s1 := numericLayout(a)
	w2, f2, s2 := numericLayout(b)
	qweight := w1 - w2
	if f1 <= f2 {
		qweight--
	}
	return min(max(16-qweight*4, s1, s2, 0), 1000)
}

// numericLayout returns, for decimal text as PostgreSQL stores it in base
// 10000 digits: the weight of the first nonzero digit, its value, and the
// text's display scale (digits after the point). Zero has weight 0 and
// first digit 0.
func numericLayout(s string) (weight, first, dscale int) {
	s = strings.TrimLeft(s, "+-")
	intPart, frac, _ := strings.Cut(s, ".")
	dscale = len(frac)
	intPart = strings.TrimLeft(intPart, "0")
	if intPart != "" {
		// Group the integer digits in fours from the point.
		lead := len(intPart) % 4
		if lead == 0 {
			lead = 4
		}
		weight = (len(intPart) - lead) / 4
		first = atoiDigits(intPart[:lead])
		return weight, first, dscale
	}
	// Pad the fraction to whole groups of four.
	for len(frac)%4 != 0 {
		frac += "0"
	}
	for g := 0; g*4 < len(frac); g++ {
		if d := atoiDigits(frac[g*4 : g*4+4]); d != 0 {
			return -(g + 1), d, dscale
		}
	}
	return 0, 0, dscale
}

func atoiDigits(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}
