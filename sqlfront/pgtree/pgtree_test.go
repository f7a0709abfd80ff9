package pgtree

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func parseOne(t *testing.T, sql string) *Node {
	t.Helper()
	tree, err := Parse(sql)
	if err != nil {
		t.Fatal(err)
	}
	if len(tree.Stmts) != 1 {
		t.Fatalf("%s: %d statements", sql, len(tree.Stmts))
	}
	return tree.Stmts[0].Stmt
}

// A syntax error is a SyntaxError with PostgreSQL's message and cursor.
func TestParseSyntaxError(t *testing.T) {
	_, err := Parse("SELECT 1 FROM WHERE")
	se, ok := err.(*SyntaxError)
	if !ok {
		t.Fatalf("error %v (%T), want a *SyntaxError", err, err)
	}
	if se.Message != `syntax error at or near "WHERE"` || se.Cursorpos != 15 {
		t.Errorf("got %q at %d", se.Message, se.Cursorpos)
	}
}

// RangeVars finds the tables of every clause, subqueries and CTEs too.
func TestRangeVars(t *testing.T) {
	n := parseOne(t, "WITH c AS (SELECT * FROM a) SELECT * FROM c JOIN s.b ON true WHERE x IN (SELECT y FROM d)")
	var got []string
	for _, rv := range RangeVars(n) {
		got = append(got, rv.Schemaname+"."+rv.Relname)
	}
	slices.Sort(got)
	if want := []string{".a", ".c", ".d", "s.b"}; !slices.Equal(got, want) {
		t.Errorf("RangeVars = %v, want %v", got, want)
	}
}

// Visit goes on below a node as fn left it: under a replacement, not
// under what it replaced; and Deparse renders what the walk left.
func TestVisitReplaces(t *testing.T) {
	n := parseOne(t, "SELECT f(1), g(2) FROM t")
	var seen []string
	Visit(n, func(m *Node) bool {
		if fc := m.GetFuncCall(); fc != nil {
			if _, name := FuncName(fc); name == "f" {
				m.Node = Call("h", StringConst("x"), NullConst()).Node
			}
		}
		if c := m.GetAConst(); c != nil {
			switch {
			case c.Isnull:
				seen = append(seen, "NULL")
			case c.GetSval() != nil:
				seen = append(seen, c.GetSval().Sval)
			case c.GetIval() != nil:
				seen = append(seen, fmt.Sprint(c.GetIval().Ival))
			}
		}
		return true
	})
	if want := []string{"x", "NULL", "2"}; !slices.Equal(seen, want) {
		t.Errorf("visited constants %v, want %v", seen, want)
	}
	out, err := Deparse(n)
	if err != nil {
		t.Fatal(err)
	}
	if want := "SELECT h('x', NULL), g(2) FROM t"; out != want {
		t.Errorf("Deparse = %q, want %q", out, want)
	}
}

// The constructors build what the grammar builds for the same SQL.
func TestConstructors(t *testing.T) {
	for _, c := range []struct {
		n    *Node
		want string
	}{
		{Cast(IntConst(7), "int8"), "SELECT 7::int8"},
		{IntConst(1 << 40), "SELECT 1099511627776"},
		{CastArray(StringConst("{a}"), "text"), "SELECT '{a}'::text[]"},
		{BoolConst(true), "SELECT true"},
	} {
		out, err := Deparse(&Node{Node: &Node_SelectStmt{SelectStmt: &SelectStmt{TargetList: []*Node{Target("", c.n)}, Op: SetOperation_SETOP_NONE}}})
		if err != nil {
			t.Fatal(err)
		}
		if out != c.want {
			t.Errorf("got %q, want %q", out, c.want)
		}
	}
}

// ArrayConsts reads array literals as array_in does; the expected texts
// are what PostgreSQL 15's pg_get_expr prints for the same column
// definitions.
func TestArrayConsts(t *testing.T) {
	for _, tc := range []struct {
		lit  string
		want []string // "NULL" for a null element; nil: not parsed
	}{
		{"{23,25}", []string{"23", "25"}},
		{"{}", []string{}},
		{`{"a b", c ,NULL,"NULL"}`, []string{"a b", "c", "NULL", `"NULL"`}},
		{`{"x\"y"}`, []string{`x"y`}},
		{"{{1,2},{3,4}}", nil},
		{"23,25", nil},
	} {
		elems, ok := ArrayConsts(tc.lit)
		if tc.want == nil {
			if ok {
				t.Errorf("ArrayConsts(%q) parsed", tc.lit)
			}
			continue
		}
		var got []string
		for _, e := range elems {
			c := e.GetAConst()
			switch {
			case c.Isnull:
				got = append(got, "NULL")
			case c.GetSval().GetSval() == "NULL":
				got = append(got, `"NULL"`)
			default:
				got = append(got, c.GetSval().GetSval())
			}
		}
		if !ok || strings.Join(got, "|") != strings.Join(tc.want, "|") || len(got) != len(tc.want) {
			t.Errorf("ArrayConsts(%q) = %q, %v; want %q", tc.lit, got, ok, tc.want)
		}
	}
}
