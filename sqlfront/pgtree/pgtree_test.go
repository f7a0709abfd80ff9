package pgtree

import (
	"fmt"
	"slices"
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

// ArrayConsts reads an array literal as array_in does.
func TestArrayConsts(t *testing.T) {
	elems, ok := ArrayConsts(`{a,"b c",NULL,"NULL"}`)
	if !ok || len(elems) != 4 {
		t.Fatalf("ArrayConsts = %v, %v", elems, ok)
	}
	if elems[2].GetAConst().GetIsnull() != true || elems[3].GetAConst().GetSval().GetSval() != "NULL" || elems[1].GetAConst().GetSval().GetSval() != "b c" {
		t.Errorf("elements %v", elems)
	}
	if _, ok := ArrayConsts("{a"); ok {
		t.Error("a malformed literal was read")
	}
}
