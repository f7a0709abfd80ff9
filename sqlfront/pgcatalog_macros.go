package sqlfront

import (
	"fmt"
	"strings"
)

// catalogMacro is a DuckDB macro that stands in for a PostgreSQL catalog
// function. The macros are temporary, created on a session's DuckDB
// connection with its first catalog query; they read the emulated relations
// in deps, which the statement registers before it runs.
type catalogMacro struct {
	name string
	// sql is the CREATE statement's body; {{user}} is the session user as a
	// string literal.
	sql  string
	deps []string
}

const (
	relClass     = "pg_catalog.pg_class"
	relNamespace = "pg_catalog.pg_namespace"
	relSettings  = "pg_catalog.pg_settings"
)

// catalogMacros are in dependency order. Their relations have m_ aliases:
// a macro's arguments are expressions of the caller's query, substituted
// into the body, and must not be captured by the body's aliases.
var catalogMacros = []catalogMacro{
	{name: "mink_get_userbyid", sql: `(r) AS CASE r WHEN 10 THEN {{user}} WHEN 6171 THEN 'pg_database_owner' ELSE 'unknown (OID=' || r || ')' END`},
	{name: "mink_quote_ident", sql: `(s) AS CASE WHEN regexp_full_match(s, '[a-z_][a-z0-9_$]*') AND NOT list_contains({{keywords}}, s) THEN s ELSE '"' || replace(s, '"', '""') || '"' END`},
	{name: "mink_table_is_visible", sql: `(r) AS coalesce((SELECT m_c.relnamespace IN (11, 2200) FROM mink_pg_catalog__pg_class m_c WHERE m_c.oid = r), false)`, deps: []string{relClass}},
	{name: "mink_nspname", sql: `(r) AS (SELECT m_n.nspname FROM mink_pg_catalog__pg_namespace m_n WHERE m_n.oid = r)`, deps: []string{relNamespace}},
	// format_type's typmod rules, for the built-in types that have them.
	{name: "mink_format_base", sql: `(t, name, m) AS CASE
		WHEN t = 1042 THEN CASE WHEN m IS NULL THEN 'character' WHEN m >= 4 THEN 'character(' || (m - 4) || ')' ELSE 'bpchar' END
		WHEN t = 1043 AND m >= 4 THEN 'character varying(' || (m - 4) || ')'
		WHEN t = 1700 AND m >= 4 THEN 'numeric(' || ((m - 4) >> 16) || ',' || ((m - 4) & 65535) || ')'
		WHEN t IN (1083, 1114) AND m >= 0 THEN split_part(name, ' ', 1) || '(' || m || ') without time zone'
		WHEN t IN (1266, 1184) AND m >= 0 THEN split_part(name, ' ', 1) || '(' || m || ') with time zone'
		ELSE name END`},
	{name: "mink_format_type", sql: `(t, m) AS CASE WHEN t IS NULL THEN NULL ELSE coalesce((
		SELECT CASE WHEN m_y.elem <> 0 THEN mink_format_base(m_y.elem, m_y.elemname, m) || '[]' ELSE mink_format_base(m_y.oid, m_y.name, m) END
		FROM mink_types m_y WHERE m_y.oid = t), '???') END`, deps: []string{"mink.types"}},
	{name: "mink_regtype", sql: `(s) AS (SELECT m_a.oid FROM mink_type_aliases m_a WHERE m_a.alias = lower(trim(s)))`, deps: []string{"mink.type_aliases"}},
	{name: "mink_regclass", sql: `(nsp, rel) AS (SELECT m_c.oid FROM mink_pg_catalog__pg_class m_c
		WHERE m_c.relname = rel AND (nsp = '' AND m_c.relnamespace IN (11, 2200)
			OR m_c.relnamespace = (SELECT m_n.oid FROM mink_pg_catalog__pg_namespace m_n WHERE m_n.nspname = nsp))
		ORDER BY m_c.relnamespace LIMIT 1)`, deps: []string{relClass, relNamespace}},
	{name: "mink_ident", sql: `(s) AS CASE WHEN starts_with(s, '"') THEN replace(s[2:-2], '""', '"') ELSE lower(s) END`},
	{name: "mink_to_regclass", sql: `(s) AS CASE
		WHEN regexp_full_match(trim(s), '[0-9]+') THEN trim(s)::UINTEGER
		WHEN regexp_full_match(s, '("[^"]*"|[^".]+)[.]("[^"]*"|[^".]+)') THEN mink_regclass(
			mink_ident(regexp_extract(s, '^("[^"]*"|[^".]+)[.]', 1)), mink_ident(regexp_extract(s, '[.]("[^"]*"|[^".]+)$', 1)))
		ELSE mink_regclass('', mink_ident(trim(s))) END`, deps: []string{relClass, relNamespace}},
	{name: "mink_regclass_out", sql: `(r) AS coalesce((
		SELECT CASE WHEN m_c.relnamespace IN (11, 2200) THEN mink_quote_ident(m_c.relname) ELSE m_n.nspname || '.' || mink_quote_ident(m_c.relname) END
		FROM mink_pg_catalog__pg_class m_c JOIN mink_pg_catalog__pg_namespace m_n ON m_n.oid = m_c.relnamespace WHERE m_c.oid = r), r::VARCHAR)`,
		deps: []string{relClass, relNamespace}},
	{name: "mink_encoding_to_char", sql: `(e) AS CASE e WHEN 6 THEN 'UTF8' WHEN 0 THEN 'SQL_ASCII' ELSE '' END`},
	// PostgreSQL's arrays here are one-dimensional lists.
	{name: "mink_array_upper", sql: `(a, d) AS CASE WHEN d = 1 AND len(a) > 0 THEN len(a)::INTEGER END`},
	{name: "mink_array_lower", sql: `(a, d) AS CASE WHEN d = 1 AND len(a) > 0 THEN 1 END`},
	{name: "mink_expandarray", sql: `(a) AS unnest(list_transform(range(len(a)), i -> {'x': a[i + 1], 'n': (i + 1)::INTEGER}))`},
	{name: "mink_partkeydef", sql: `(r) AS (SELECT m_i.partkeydef FROM mink_relinfo m_i WHERE m_i.oid = r)`, deps: []string{"mink.relinfo"}},
	{name: "mink_table_size", sql: `(r) AS coalesce((SELECT m_i.size FROM mink_relinfo m_i WHERE m_i.oid = r), 0)`, deps: []string{"mink.relinfo"}},
	{name: "mink_database_size", sql: `(d) AS (SELECT coalesce(sum(m_i.size), 0)::BIGINT FROM mink_relinfo m_i)`, deps: []string{"mink.relinfo"}},
	// pg_size_pretty: bytes below 10 kB, then kB, MB, … rounded half up.
	{name: "mink_half_rounded", sql: `(x) AS (x + CASE WHEN x < 0 THEN -1 ELSE 1 END) // 2`},
	{name: "mink_size_pretty", sql: `(b) AS CASE
		WHEN b IS NULL THEN NULL
		WHEN abs(b::BIGINT) < 10240 THEN b::BIGINT || ' bytes'
		WHEN abs(b::BIGINT >> 9) < 20480 THEN mink_half_rounded(b::BIGINT >> 9) || ' kB'
		WHEN abs(b::BIGINT >> 19) < 20480 THEN mink_half_rounded(b::BIGINT >> 19) || ' MB'
		WHEN abs(b::BIGINT >> 29) < 20480 THEN mink_half_rounded(b::BIGINT >> 29) || ' GB'
		WHEN abs(b::BIGINT >> 39) < 20480 THEN mink_half_rounded(b::BIGINT >> 39) || ' TB'
		ELSE mink_half_rounded(b::BIGINT >> 49) || ' PB' END`},
	{name: "mink_current_schemas", sql: `(implicit) AS CASE WHEN implicit THEN ['pg_catalog', 'public'] ELSE ['public'] END`},
	{name: "mink_current_setting", sql: `(s) AS (SELECT m_x.setting FROM mink_pg_catalog__pg_settings m_x WHERE lower(m_x.name) = lower(s))`, deps: []string{relSettings}},
	// A relation is its own only ancestor: mink's partitions are not
	// relations.
	{name: "mink_partition_root", sql: `(r) AS r::UINTEGER`},
	{name: "mink_partition_ancestors", sql: `(r) AS TABLE SELECT r::UINTEGER AS relid`},
}

var catalogMacroByName = func() map[string]*catalogMacro {
	m := map[string]*catalogMacro{}
	for i := range catalogMacros {
		m[catalogMacros[i].name] = &catalogMacros[i]
	}
	return m
}()

// macroDeps are the relations a macro reads, directly or through the
// macros it calls.
func macroDeps(name string) []string {
	m := catalogMacroByName[name]
	if m == nil {
		panic(fmt.Sprintf("sqlfront: no catalog macro %q", name))
	}
	deps := append([]string(nil), m.deps...)
	for _, other := range catalogMacros {
		if other.name != name && strings.Contains(m.sql, other.name+"(") {
			deps = append(deps, macroDeps(other.name)...)
		}
	}
	return deps
}

// catalogMacroSQL is the script that creates the macros for a session of
// user.
func catalogMacroSQL(user string) string {
	keywords := make([]string, 0, len(quotedKeywords))
	for k := range quotedKeywords {
		keywords = append(keywords, catQuoteLiteral(k))
	}
	list := "[" + strings.Join(keywords, ", ") + "]"
	r := strings.NewReplacer("{{user}}", catQuoteLiteral(user), "{{keywords}}", list)
	var b strings.Builder
	for _, m := range catalogMacros {
		b.WriteString("CREATE OR REPLACE TEMPORARY MACRO " + m.name + r.Replace(m.sql) + ";\n")
	}
	return b.String()
}

// allMacroDeps are the relations the macros read.
func allMacroDeps() []string {
	var deps []string
	for _, m := range catalogMacros {
		deps = append(deps, m.deps...)
	}
	return deps
}
