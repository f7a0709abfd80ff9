package pgcatalog

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
	// sql is the CREATE statement's body; {{keywords}} is the list of
	// keywords quote_ident quotes, {{encodings}} the list of encoding
	// names and {{nencodings}} its length.
	sql  string
	deps []string
}

const (
	relClass       = "pg_catalog.pg_class"
	relNamespace   = "pg_catalog.pg_namespace"
	relRoles       = "pg_catalog.pg_roles"
	relDescription = "pg_catalog.pg_description"
	// SettingsVarKey is the DuckDB variable mink_settings, a MAP of the
	// session's settings by lower-case name, set before each statement
	// that reads it.
	SettingsVarKey = "mink.settings_var"
	// SearchPathVarKey is the DuckDB variable mink_search_path, the list
	// of the namespace oids an unqualified relation name is looked up in,
	// in order: pg_catalog, then the schemas of the session's search_path
	// that exist. Set before each statement that reads it.
	SearchPathVarKey = "mink.search_path_var"
)

// catalogMacros are in dependency order. Their parameters are p_… and
// their relations' aliases m_…: a macro's arguments are expressions of the
// caller's query, substituted into the body, and the body's names must not
// capture the caller's columns or be captured by them.
var catalogMacros = append([]catalogMacro{
	{name: "mink_get_userbyid", sql: `(p_r) AS coalesce((SELECT m_r.rolname FROM mink_pg_catalog__pg_roles m_r WHERE m_r.oid = p_r),
		'unknown (OID=' || p_r || ')')`, deps: []string{relRoles}},
	{name: "mink_quote_ident", sql: `(p_s) AS CASE WHEN regexp_full_match(p_s, '[a-z_][a-z0-9_$]*') AND NOT list_contains({{keywords}}, p_s) THEN p_s ELSE '"' || replace(p_s, '"', '""') || '"' END`},
	// Visible: in a schema of the search path, and no relation of its name
	// in a schema before it.
	{name: "mink_table_is_visible", sql: `(p_r) AS coalesce((SELECT list_contains(getvariable('mink_search_path'), m_c.relnamespace)
		AND NOT EXISTS (SELECT 1 FROM mink_pg_catalog__pg_class m_o WHERE m_o.relname = m_c.relname
			AND list_position(getvariable('mink_search_path'), m_o.relnamespace) < list_position(getvariable('mink_search_path'), m_c.relnamespace))
		FROM mink_pg_catalog__pg_class m_c WHERE m_c.oid = p_r), false)`, deps: []string{relClass, SearchPathVarKey}},
	{name: "mink_nspname", sql: `(p_r) AS (SELECT m_n.nspname FROM mink_pg_catalog__pg_namespace m_n WHERE m_n.oid = p_r)`, deps: []string{relNamespace}},
	// format_type's typmod rules, for the built-in types that have them.
	{name: "mink_format_base", sql: `(p_t, p_name, p_m) AS CASE
		WHEN p_t = 1042 THEN CASE WHEN p_m IS NULL THEN 'character' WHEN p_m >= 4 THEN 'character(' || (p_m - 4) || ')' ELSE 'bpchar' END
		WHEN p_t = 1043 AND p_m >= 4 THEN 'character varying(' || (p_m - 4) || ')'
		WHEN p_t = 1700 AND p_m >= 4 THEN 'numeric(' || ((p_m - 4) >> 16) || ',' || ((p_m - 4) & 65535) || ')'
		WHEN p_t IN (1083, 1114) AND p_m >= 0 THEN split_part(p_name, ' ', 1) || '(' || p_m || ') without time zone'
		WHEN p_t IN (1266, 1184) AND p_m >= 0 THEN split_part(p_name, ' ', 1) || '(' || p_m || ') with time zone'
		ELSE p_name END`},
	{name: "mink_format_type", sql: `(p_t, p_m) AS CASE WHEN p_t IS NULL THEN NULL ELSE coalesce((
		SELECT CASE WHEN m_y.elem <> 0 THEN mink_format_base(m_y.elem, m_y.elemname, p_m) || '[]' ELSE mink_format_base(m_y.oid, m_y.name, p_m) END
		FROM mink_types m_y WHERE m_y.oid = p_t), '???') END`, deps: []string{"mink.types"}},
	{name: "mink_regtype", sql: `(p_s) AS (SELECT m_a.oid FROM mink_type_aliases m_a WHERE m_a.alias = lower(trim(p_s)))`, deps: []string{"mink.type_aliases"}},
	{name: "mink_regclass", sql: `(p_nsp, p_rel) AS (SELECT m_c.oid FROM mink_pg_catalog__pg_class m_c
		WHERE m_c.relname = p_rel AND (p_nsp = '' AND list_contains(getvariable('mink_search_path'), m_c.relnamespace)
			OR m_c.relnamespace = (SELECT m_n.oid FROM mink_pg_catalog__pg_namespace m_n WHERE m_n.nspname = p_nsp))
		ORDER BY list_position(getvariable('mink_search_path'), m_c.relnamespace) LIMIT 1)`, deps: []string{relClass, relNamespace, SearchPathVarKey}},
	{name: "mink_ident", sql: `(p_s) AS CASE WHEN starts_with(p_s, '"') THEN replace(p_s[2:-2], '""', '"') ELSE lower(p_s) END`},
	{name: "mink_to_regclass", sql: `(p_s) AS CASE
		WHEN regexp_full_match(trim(p_s), '[0-9]+') THEN trim(p_s)::UINTEGER
		WHEN regexp_full_match(p_s, '("[^"]*"|[^".]+)[.]("[^"]*"|[^".]+)') THEN mink_regclass(
			mink_ident(regexp_extract(p_s, '^("[^"]*"|[^".]+)[.]', 1)), mink_ident(regexp_extract(p_s, '[.]("[^"]*"|[^".]+)$', 1)))
		ELSE mink_regclass('', mink_ident(trim(p_s))) END`, deps: []string{relClass, relNamespace, SearchPathVarKey}},
	{name: "mink_regclass_out", sql: `(p_r) AS coalesce((
		SELECT CASE WHEN mink_table_is_visible(p_r) THEN mink_quote_ident(m_c.relname) ELSE mink_quote_ident(m_n.nspname) || '.' || mink_quote_ident(m_c.relname) END
		FROM mink_pg_catalog__pg_class m_c JOIN mink_pg_catalog__pg_namespace m_n ON m_n.oid = m_c.relnamespace WHERE m_c.oid = p_r), p_r::VARCHAR)`,
		deps: []string{relClass, relNamespace, SearchPathVarKey}},
	{name: "mink_encoding_to_char", sql: `(p_e) AS CASE WHEN p_e IS NULL THEN NULL
		WHEN p_e >= 0 AND p_e < {{nencodings}} THEN {{encodings}}[p_e + 1] ELSE '' END`},
	// Comments: PostgreSQL's on its built-in objects (buildDescriptions).
	{name: "mink_obj_description", sql: `(p_o, p_c) AS (SELECT m_d.description FROM mink_pg_catalog__pg_description m_d
		WHERE m_d.objoid = p_o AND m_d.classoid = mink_to_regclass(p_c) AND m_d.objsubid = 0 LIMIT 1)`,
		deps: []string{relDescription}},
	{name: "mink_obj_description_any", sql: `(p_o) AS (SELECT m_d.description FROM mink_pg_catalog__pg_description m_d
		WHERE m_d.objoid = p_o AND m_d.objsubid = 0 ORDER BY m_d.classoid LIMIT 1)`, deps: []string{relDescription}},
	{name: "mink_col_description", sql: `(p_r, p_n) AS (SELECT m_d.description FROM mink_pg_catalog__pg_description m_d
		WHERE m_d.objoid = p_r AND m_d.classoid = 1259 AND m_d.objsubid = p_n LIMIT 1)`, deps: []string{relDescription}},
	// PostgreSQL's arrays here are one-dimensional lists.
	{name: "mink_array_upper", sql: `(p_a, p_d) AS CASE WHEN p_d = 1 AND len(p_a) > 0 THEN len(p_a)::INTEGER END`},
	{name: "mink_array_lower", sql: `(p_a, p_d) AS CASE WHEN p_d = 1 AND len(p_a) > 0 THEN 1 END`},
	{name: "mink_expandarray", sql: `(p_a) AS unnest(list_transform(range(len(p_a)), m_i -> {'x': p_a[m_i + 1], 'n': (m_i + 1)::INTEGER}))`},
	{name: "mink_viewdef", sql: `(p_r) AS (SELECT m_i.viewdef FROM mink_relinfo m_i WHERE m_i.oid = p_r)`, deps: []string{"mink.relinfo"}},
	{name: "mink_partkeydef", sql: `(p_r) AS (SELECT m_i.partkeydef FROM mink_relinfo m_i WHERE m_i.oid = p_r)`, deps: []string{"mink.relinfo"}},
	// pg_get_serial_sequence: the column name is taken as written.
	{name: "mink_serial_sequence", sql: `(p_t, p_c) AS (SELECT mink_quote_ident(m_n.nspname) || '.' || mink_quote_ident(m_s.seqname) FROM mink_sequences m_s
		JOIN mink_pg_catalog__pg_class m_c ON m_c.oid = m_s.relid JOIN mink_pg_catalog__pg_namespace m_n ON m_n.oid = m_c.relnamespace
		WHERE m_s.relid = mink_to_regclass(p_t) AND m_s.col = p_c)`, deps: []string{"mink.sequences", relClass, relNamespace, SearchPathVarKey}},
	{name: "mink_indexdef", sql: `(p_r, p_c) AS (SELECT m_k.def FROM mink_keydefs m_k WHERE m_k.oid = p_r AND m_k.col = p_c)`, deps: []string{"mink.keydefs"}},
	{name: "mink_table_size", sql: `(p_r) AS coalesce((SELECT m_i.size FROM mink_relinfo m_i WHERE m_i.oid = p_r), 0)`, deps: []string{"mink.relinfo"}},
	{name: "mink_database_size", sql: `(p_d) AS (SELECT coalesce(sum(m_i.size), 0)::BIGINT FROM mink_relinfo m_i)`, deps: []string{"mink.relinfo"}},
	// pg_size_pretty: bytes below 10 kB, then kB, MB, … rounded half up.
	{name: "mink_half_rounded", sql: `(p_x) AS (p_x + CASE WHEN p_x < 0 THEN -1 ELSE 1 END) // 2`},
	{name: "mink_size_pretty", sql: `(p_b) AS CASE
		WHEN p_b IS NULL THEN NULL
		WHEN abs(p_b::BIGINT) < 10240 THEN p_b::BIGINT || ' bytes'
		WHEN abs(p_b::BIGINT >> 9) < 20480 THEN mink_half_rounded(p_b::BIGINT >> 9) || ' kB'
		WHEN abs(p_b::BIGINT >> 19) < 20480 THEN mink_half_rounded(p_b::BIGINT >> 19) || ' MB'
		WHEN abs(p_b::BIGINT >> 29) < 20480 THEN mink_half_rounded(p_b::BIGINT >> 29) || ' GB'
		WHEN abs(p_b::BIGINT >> 39) < 20480 THEN mink_half_rounded(p_b::BIGINT >> 39) || ' TB'
		ELSE mink_half_rounded(p_b::BIGINT >> 49) || ' PB' END`},
	// current_schemas(implicit), with the session's lists as arguments
	// (translate.CatalogConsts.Schemas).
	{name: "mink_current_schemas", sql: `(p_implicit, p_with, p_without) AS CASE WHEN p_implicit THEN p_with ELSE p_without END`},
	// A variable rather than a subquery of pg_settings: DuckDB does not
	// take subqueries in table functions' arguments (generate_series(…,
	// array_upper(string_to_array(current_setting('search_path'), …)))).
	{name: "mink_current_setting", sql: `(p_s) AS getvariable('mink_settings')[lower(p_s)]`, deps: []string{SettingsVarKey}},
	// A relation is its own only ancestor: mink's partitions are not
	// relations.
	{name: "mink_partition_root", sql: `(p_r) AS p_r::UINTEGER`},
	{name: "mink_partition_ancestors", sql: `(p_r) AS TABLE SELECT p_r::UINTEGER AS relid`},
}, privilegeMacros...) // roles.go's, which call mink_to_regclass

var catalogMacroByName = func() map[string]*catalogMacro {
	m := map[string]*catalogMacro{}
	for i := range catalogMacros {
		m[catalogMacros[i].name] = &catalogMacros[i]
	}
	return m
}()

// MacroDeps are the relations a macro reads, directly or through the
// macros it calls.
func MacroDeps(name string) []string {
	m := catalogMacroByName[name]
	if m == nil {
		panic(fmt.Sprintf("sqlfront: no catalog macro %q", name))
	}
	deps := append([]string(nil), m.deps...)
	for _, other := range catalogMacros {
		if other.name != name && strings.Contains(m.sql, other.name+"(") {
			deps = append(deps, MacroDeps(other.name)...)
		}
	}
	return deps
}

// MacroSQL is the script that creates the macros.
func MacroSQL() string {
	keywords := make([]string, 0, len(quotedKeywords))
	for k := range quotedKeywords {
		keywords = append(keywords, QuoteLiteral(k))
	}
	list := "[" + strings.Join(keywords, ", ") + "]"
	encodings := make([]string, len(pgEncodings))
	for i, e := range pgEncodings {
		encodings[i] = QuoteLiteral(e)
	}
	r := strings.NewReplacer("{{keywords}}", list, "{{encodings}}", "["+strings.Join(encodings, ", ")+"]",
		"{{nencodings}}", fmt.Sprint(len(pgEncodings)))
	var b strings.Builder
	for _, m := range catalogMacros {
		b.WriteString("CREATE OR REPLACE TEMPORARY MACRO " + m.name + r.Replace(m.sql) + ";\n")
	}
	return b.String()
}

// AllMacroDeps are the relations the macros read.
func AllMacroDeps() []string {
	var deps []string
	for _, m := range catalogMacros {
		deps = append(deps, m.deps...)
	}
	return deps
}
