package translate

import (
	"slices"
	"strings"
	"testing"

	"github.com/minkdb/mink/sqlfront/pgcatalog"
	pg "github.com/minkdb/mink/sqlfront/pgtree"
)

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
		{sql: "SELECT pg_catalog.pg_get_expr(d.adbin, d.adrelid, true), pg_catalog.shobj_description(1, 'pg_database') FROM pg_attrdef d",
			catalog: true, want: `SELECT d.adbin, NULL::"varchar"`},
		{sql: "SELECT obj_description(n.oid, 'pg_namespace'), obj_description(n.oid) FROM pg_namespace n", catalog: true,
			want: "mink_obj_description(n.oid, 'pg_namespace')|mink_obj_description_any(n.oid)", rels: "pg_catalog.pg_description"},
		{sql: "SELECT pg_stat_get_numscans(i.indexrelid), pg_tablespace_location(1663) FROM pg_index i", catalog: true,
			want: "CASE WHEN i.indexrelid IS NOT NULL THEN 0::int8 END|CASE WHEN 1663 IS NOT NULL THEN ''::\"varchar\" END"},
	} {
		tree, err := pg.Parse(tc.sql)
		if err != nil {
			t.Fatal(err)
		}
		node := tree.Stmts[0].Stmt
		q, catalog, err := Catalog(node, CatalogConsts{User: "mink", Database: "mink", Version: "PostgreSQL 15.0 (mink)", PID: 1})
		if err != nil {
			t.Errorf("%s: %v", tc.sql, err)
			continue
		}
		if catalog != tc.catalog {
			t.Errorf("%s: catalog query %v, want %v", tc.sql, catalog, tc.catalog)
			continue
		}
		if !tc.catalog {
			continue
		}
		text, err := Deparse(node)
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
				if !slices.Contains(q.Relations, rel) {
					t.Errorf("%s: reads %v, want %s among them", tc.sql, q.Relations, rel)
				}
			}
		}
	}
}
