package sqlfront

import (
	"fmt"
	"strings"
	"testing"

	pg "github.com/minkdb/mink/sqlfront/pgtree"
)

// TestWhereConds: the one place WHERE clauses are taken apart for
// pruning, lake filters and key lookups. Columns are a, b and c of table t;
// each condition prints as col op [values], mirrored to put the column
// first; all says whether every conjunct was a column condition.
func TestWhereConds(t *testing.T) {
	table := &tableInfo{name: "t", colIdx: map[string]int{"a": 0, "b": 1, "c": 2}}
	names := []string{"a", "b", "c"}
	ops := map[condOp]string{condEq: "=", condLt: "<", condLe: "<=", condGt: ">", condGe: ">=", condIn: "IN",
		condBetween: "BETWEEN", condIsNull: "IS NULL", condNotNull: "IS NOT NULL"}
	for _, tc := range []struct {
		where string
		want  string
	}{
		{"a = 1", "a = [1]; all"},
		{"1 = a", "a = [1]; all"},
		{"5 < a AND a <= $1", "a > [5], a <= [$1]; all"},
		{"a >= 'x' AND (b > 2 AND c < 3)", "a >= ['x'], b > [2], c < [3]; all"},
		{"t.a = 1 AND u.b = 2", "a = [1]; not all"},
		{"a IN (1, 2, $3)", "a IN [1 2 $3]; all"},
		{"a NOT IN (1, 2)", "; not all"},
		{"a BETWEEN 1 AND 9 AND b IS NULL AND c IS NOT NULL", "a BETWEEN [1 9], b IS NULL, c IS NOT NULL; all"},
		{"a NOT BETWEEN 1 AND 9", "; not all"},
		{"a <> 1", "; not all"},
		{"a = 1 OR b = 2", "; not all"},
		{"NOT a = 1", "; not all"},
		{"a = b", "a = [b]; all"},
		{"d = 1 AND 2 = 3", "; not all"},
		{"a OPERATOR(pg_catalog.=) 1", "; not all"},
		{"(a, b) IS NULL", "; not all"},
		{"a + 1 = 2", "; not all"},
	} {
		tree, err := pg.Parse("SELECT * FROM t WHERE " + tc.where)
		if err != nil {
			t.Fatal(err)
		}
		where := tree.Stmts[0].Stmt.GetSelectStmt().WhereClause
		conds, all := whereConds(where, func(cr *pg.ColumnRef) (int, bool) { return tableColumn(cr, "t", table) })
		var parts []string
		for _, c := range conds {
			var vals []string
			for _, v := range c.values {
				text, err := deparseExpr(v)
				if err != nil {
					t.Fatal(err)
				}
				vals = append(vals, text)
			}
			s := names[c.col] + " " + ops[c.op]
			if c.op != condIsNull && c.op != condNotNull {
				s += fmt.Sprintf(" [%s]", strings.Join(vals, " "))
			}
			parts = append(parts, s)
		}
		got := strings.Join(parts, ", ") + "; "
		if all {
			got += "all"
		} else {
			got += "not all"
		}
		if got != tc.want {
			t.Errorf("WHERE %s:\n got %s\nwant %s", tc.where, got, tc.want)
		}
	}
}
