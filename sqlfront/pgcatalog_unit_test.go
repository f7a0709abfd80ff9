package sqlfront

import (
	"testing"

	"github.com/minkdb/mink/internal/sqltypes"
	"github.com/minkdb/mink/sqlfront/engine"
	"github.com/minkdb/mink/sqlfront/pgcatalog"
)

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
