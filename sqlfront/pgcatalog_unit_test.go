package sqlfront

import (
	"strings"
	"testing"

	pg "github.com/minkdb/mink/sqlfront/pgtree"
	"github.com/minkdb/mink/sqlfront/translate"

	"github.com/minkdb/mink/internal/sqltypes"
	"github.com/minkdb/mink/sqlfront/engine"
	"github.com/minkdb/mink/sqlfront/pgcatalog"
)

// The expected texts are what PostgreSQL 15's pg_get_expr prints for the
// same column definitions.
func TestCatalogArrayLiteral(t *testing.T) {
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
		elems, ok := pg.ArrayConsts(tc.lit)
		if tc.want == nil {
			if ok {
				t.Errorf("pg.ArrayConsts(%q) parsed", tc.lit)
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
			t.Errorf("pg.ArrayConsts(%q) = %q, %v; want %q", tc.lit, got, ok, tc.want)
		}
	}
}

// TestCatalogRewrite checks which statements are catalog queries and what
// they become.
func TestCatalogRewrite(t *testing.T) {
	for _, tc := range []struct {
		sql     string
		catalog bool
		want    string // substrings of the rewritten SQL
		rels    string // the relations read, comma separated
	}{
		{sql: "SELECT * FROM orders WHERE id = 1"},
		{sql: "SELECT name ~ 'x' FROM orders"},
		{sql: "SELECT relname FROM pg_class", catalog: true, want: "FROM mink_pg_catalog__pg_class pg_class", rels: "pg_catalog.pg_class"},
		{sql: "SELECT * FROM information_schema.tables t", catalog: true, want: "FROM mink_information_schema__tables t", rels: "information_schema.tables"},
		{sql: "SELECT * FROM tables", rels: ""},
		{sql: "SELECT version(), current_user", catalog: true, want: "'PostgreSQL 15.0 (mink)"},
		{sql: "SELECT c.oid::pg_catalog.regclass FROM pg_catalog.pg_class c WHERE c.relname OPERATOR(pg_catalog.~) '^(t)$' COLLATE pg_catalog.default",
			catalog: true, want: "mink_regclass_out(c.oid::uinteger)|WHERE regexp_matches(c.relname, '^(t)$')"},
		{sql: "SELECT 1 FROM pg_class c WHERE c.oid = 'pg_class'::regclass AND c.relname NOT LIKE 'pg\\_%'",
			catalog: true, want: `c.oid = mink_regclass('', 'pg_class')|NOT like_escape(c.relname, E'pg\\_%', E'\\')`},
		{sql: "SELECT 'int4'::regtype::oid, '{1,2}'::oid[]", catalog: true, want: "23::uinteger|ARRAY['1', '2']::uinteger[]"},
		{sql: "SELECT x FROM pg_catalog.generate_series(1, 3) AS x", catalog: true, want: "generate_series(1, 3) x(x)"},
		{sql: "SELECT s FROM string_to_array(current_setting('search_path'), ',') s", catalog: true,
			want: "FROM (SELECT string_split(mink_current_setting('search_path'), ',') AS s) s", rels: pgcatalog.SettingsVarKey},
		{sql: "SELECT * FROM pg_catalog.pg_get_keywords()", catalog: true, want: "FROM mink_keywords pg_get_keywords", rels: pgcatalog.KeywordsKey},
		{sql: "SELECT l.tableoid FROM pg_language l", catalog: true, want: "SELECT 2612::uinteger FROM"},
		{sql: "SELECT pg_catalog.pg_get_expr(d.adbin, d.adrelid, true), pg_catalog.obj_description(1, 'pg_class') FROM pg_attrdef d",
			catalog: true, want: `SELECT d.adbin, NULL::"varchar"`},
	} {
		tree, err := pg.Parse(tc.sql)
		if err != nil {
			t.Fatal(err)
		}
		node := tree.Stmts[0].Stmt
		rw := newCatalogRewriter(catalogConsts{user: "mink", database: "mink", version: "PostgreSQL 15.0 (mink)", pid: 1})
		rw.rewrite(node)
		if rw.err != nil {
			t.Errorf("%s: %v", tc.sql, rw.err)
			continue
		}
		if rw.catalog != tc.catalog {
			t.Errorf("%s: catalog query %v, want %v", tc.sql, rw.catalog, tc.catalog)
			continue
		}
		if !tc.catalog {
			continue
		}
		text, err := translate.Deparse(node)
		if err != nil {
			t.Fatalf("%s: %v", tc.sql, err)
		}
		for _, want := range strings.Split(tc.want, "|") {
			if !strings.Contains(text, want) {
				t.Errorf("%s:\n%s\nwant it to contain %s", tc.sql, text, want)
			}
		}
		if tc.rels != "" {
			for _, rel := range strings.Split(tc.rels, ",") {
				if !rw.rels[rel] {
					t.Errorf("%s: reads %v, want %s among them", tc.sql, rw.rels, rel)
				}
			}
		}
	}
}

// Every relation a builder fills, and every macro dependency, has columns;
// every builder's rows fit its relation.

// TestCatalogRaisedAgrees: the errors the catalogs' macros raise carry
// their SQLSTATE the way the engine reads it back.
func TestCatalogRaisedAgrees(t *testing.T) {
	if got, want := pgcatalog.Raised("42704", "x"), engine.Raised("42704", "x"); got != want {
		t.Fatalf("pgcatalog.Raised = %q, engine.Raised = %q", got, want)
	}
}

func TestCatalogDefaultExpr(t *testing.T) {
	for _, tc := range []struct {
		typ, def, want string
	}{
		{"integer", "7", "7"},
		{"integer", "-1", "'-1'::integer"},
		{"integer", "'3'", "3"},
		{"bigint", "5", "5"},
		{"bigint", "10000000000", "'10000000000'::bigint"},
		{"double precision", "7", "7"},
		{"numeric(12,2)", "9.5", "9.5"},
		{"numeric", "-2.5", "'-2.5'::numeric"},
		{"text", "'x'", "'x'::text"},
		{"text", "'it''s'", "'it''s'::text"},
		{"varchar(20)", "'x'", "'x'::character varying"},
		{"char(3)", "'ab'", "'ab'::bpchar"},
		{"date", "'2024-01-01'", "'2024-01-01'::date"},
		{"timestamptz", "'2024-01-01 00:00:00+00'", "'2024-01-01 00:00:00+00'::timestamp with time zone"},
		{"interval", "'1 day'::interval", "'1 day'::interval"},
		{"boolean", "true", "true"},
		{"boolean", "'off'", "false"},
		{"text", "NULL", ""},
		{"text", "", ""},
	} {
		typ, err := sqltypes.Parse(tc.typ)
		if err != nil {
			t.Fatal(err)
		}
		if got := defaultExpr(tc.def, typ); got != tc.want {
			t.Errorf("%s DEFAULT %s: %q, want %q", tc.typ, tc.def, got, tc.want)
		}
	}
}
