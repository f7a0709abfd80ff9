package pgcatalog

import (
	"testing"

	"github.com/minkdb/mink/access"
	"github.com/minkdb/mink/catalog"
)

func TestCatalogFormatType(t *testing.T) {
	for _, tc := range []struct {
		oid    uint32
		typmod int32
		want   string
	}{
		{23, -1, "integer"},
		{1043, 24, "character varying(20)"},
		{1043, -1, "character varying"},
		{1015, 24, "character varying(20)[]"},
		{1042, 7, "character(3)"},
		{1042, -1, "bpchar"},
		{1700, 12<<16 | 2 + 4, "numeric(12,2)"},
		{1700, -1, "numeric"},
		{1184, -1, "timestamp with time zone"},
		{1184, 3, "timestamp(3) with time zone"},
		{1186, -1, "interval"},
		{18, -1, `"char"`},
		{3802, -1, "jsonb"},
		{99999, -1, "???"},
	} {
		if got := formatType(tc.oid, tc.typmod); got != tc.want {
			t.Errorf("formatType(%d, %d) = %q, want %q", tc.oid, tc.typmod, got, tc.want)
		}
	}
}

func TestCatalogQuoteIdent(t *testing.T) {
	for in, want := range map[string]string{
		"orders": "orders", "Mixed Case": `"Mixed Case"`, "select": `"select"`, "numeric": `"numeric"`,
		"name": "name", "a$b": "a$b", "1a": `"1a"`, `q"t`: `"q""t"`, "": `""`,
	} {
		if got := QuoteIdentIfNeeded(in); got != want {
			t.Errorf("quoteIdentIfNeeded(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestCatalogRelationsBuild(t *testing.T) {
	in := &Input{Database: "mink", Roles: NewRoles(&catalog.View{}, access.Identity{Role: catalog.BootstrapRole, Name: "mink"})}
	for key := range relationBuilders {
		if relationCols(key) == nil {
			t.Errorf("%s has a builder and no columns", key)
			continue
		}
		schema, rec := Build(key, in)
		if int(rec.NumCols()) != len(schema.Fields()) {
			t.Errorf("%s: %d columns, schema has %d", key, rec.NumCols(), len(schema.Fields()))
		}
		rec.Release()
	}
	for _, dep := range AllMacroDeps() {
		if dep != SettingsVarKey && dep != SearchPathVarKey && relationCols(dep) == nil {
			t.Errorf("a macro reads %s, which has no columns", dep)
		}
	}
}
