package translate

import (
	"errors"
	"testing"

	pg "github.com/minkdb/mink/sqlfront/pgtree"
)

func TestExpandViews(t *testing.T) {
	views := map[string]struct {
		query string
		cols  []string
	}{
		"v":    {"SELECT a, b FROM t", []string{"a", "b"}},
		"w":    {"SELECT a FROM v", []string{"x"}},
		"self": {"SELECT a FROM self", []string{"a"}},
		"ping": {"SELECT a FROM pong", []string{"a"}},
		"pong": {"SELECT a FROM ping", []string{"a"}},
	}
	lookup := func(rv *pg.RangeVar) (View, bool, error) {
		if rv.Schemaname != "" && rv.Schemaname != "public" {
			return View{}, false, nil
		}
		v, ok := views[rv.Relname]
		if !ok {
			return View{}, false, nil
		}
		tree, err := pg.Parse(v.query)
		if err != nil {
			t.Fatal(err)
		}
		return View{Query: tree.Stmts[0].Stmt, Columns: v.cols}, true, nil
	}
	for _, tc := range []struct {
		sql, want, recursion string
	}{
		{sql: "SELECT * FROM t", want: "SELECT * FROM t"},
		{sql: "SELECT * FROM v",
			want: "SELECT * FROM (SELECT v.a, v.b FROM (SELECT a, b FROM t) v(a, b)) v(a, b)"},
		{sql: "SELECT * FROM public.v AS z(k) JOIN t ON true",
			want: "SELECT * FROM (SELECT v.a, v.b FROM (SELECT a, b FROM t) v(a, b)) z(k, b) JOIN t ON true"},
		{sql: "SELECT x FROM w",
			want: "SELECT x FROM (SELECT w.x FROM (SELECT a FROM (SELECT v.a, v.b FROM (SELECT a, b FROM t) v(a, b)) v(a, b)) w(x)) w(x)"},
		// A CTE shadows a view; a view of another schema is not one.
		{sql: "WITH v AS (SELECT 1 AS a) SELECT a FROM v", want: "WITH v AS (SELECT 1 AS a) SELECT a FROM v"},
		{sql: "SELECT * FROM other.v", want: "SELECT * FROM other.v"},
		{sql: "SELECT (SELECT max(a) FROM v)",
			want: "SELECT (SELECT max(a) FROM (SELECT v.a, v.b FROM (SELECT a, b FROM t) v(a, b)) v(a, b))"},
		{sql: "SELECT * FROM self", recursion: "self"},
		{sql: "SELECT * FROM ping", recursion: "ping"},
	} {
		tree, err := pg.Parse(tc.sql)
		if err != nil {
			t.Fatal(err)
		}
		node := tree.Stmts[0].Stmt
		changed, err := ExpandViews(node, lookup)
		if tc.recursion != "" {
			var rec *ErrViewRecursion
			if !errors.As(err, &rec) || rec.View != tc.recursion {
				t.Errorf("%s: got %v, want recursion in %q", tc.sql, err, tc.recursion)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.sql, err)
		}
		got, err := pg.Deparse(node)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want || changed != (tc.sql != tc.want) {
			t.Errorf("%s:\n got %s (changed %v)\nwant %s", tc.sql, got, changed, tc.want)
		}
	}
}
