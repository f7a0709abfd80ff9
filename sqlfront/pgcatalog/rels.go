package pgcatalog

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/sqltypes"
)

// The rows of each emulated relation. A relation without a builder here is
// always empty (pg_inherits, pg_proc, …): mink has no indexes or
// constraints other than primary keys and NOT NULL, no inheritance or
// comments, and AlwaysEmpty (sqlfront's staticallyEmpty) relies on that.

// relationBuilders fill the relations that have rows, by "schema.name".
var relationBuilders = map[string]func(in *Input, b *relBuilder){
	"pg_catalog.pg_namespace":         buildNamespaces,
	"pg_catalog.pg_class":             buildClasses,
	"pg_catalog.pg_attribute":         buildAttributes,
	"pg_catalog.pg_attrdef":           buildAttrdefs,
	"pg_catalog.pg_type":              buildTypes,
	"pg_catalog.pg_database":          buildDatabases,
	"pg_catalog.pg_am":                buildAccessMethods,
	"pg_catalog.pg_collation":         buildCollations,
	"pg_catalog.pg_tablespace":        buildTablespaces,
	"pg_catalog.pg_language":          buildLanguages,
	"pg_catalog.pg_description":       buildDescriptions,
	"pg_catalog.pg_conversion":        buildConversions,
	"pg_catalog.pg_authid":            buildAuthid,
	"pg_catalog.pg_roles":             buildRoles,
	"pg_catalog.pg_user":              buildUsers,
	"pg_catalog.pg_shadow":            buildShadow,
	"pg_catalog.pg_group":             buildGroups,
	"pg_catalog.pg_auth_members":      buildAuthMembers,
	"pg_catalog.pg_tables":            buildPgTables,
	"pg_catalog.pg_views":             buildPgViews,
	"pg_catalog.pg_rewrite":           buildRewrites,
	"pg_catalog.pg_depend":            buildDepends,
	"pg_catalog.pg_sequence":          buildPgSequence,
	"pg_catalog.pg_sequences":         buildPgSequences,
	"information_schema.sequences":    buildInfoSequences,
	"pg_catalog.pg_partitioned_table": buildPartitionedTables,
	"pg_catalog.pg_settings":          buildSettings,
	"pg_catalog.pg_index":             buildIndexes,
	"pg_catalog.pg_constraint":        buildConstraints,
	"pg_catalog.pg_indexes":           buildPgIndexes,
	"pg_catalog.pg_stat_activity":     buildActivity,
	"pg_catalog.pg_stat_user_tables":  buildStatUserTables,
	"pg_catalog.pg_statio_user_tables": func(in *Input, b *relBuilder) {
		for _, t := range in.Tables {
			if t.isView() {
				continue
			}
			b.add("relid", t.oid, "schemaname", t.nsp, "relname", t.spec.Name)
		}
	},
	"information_schema.information_schema_catalog_name": func(in *Input, b *relBuilder) {
		b.add("catalog_name", in.Database)
	},
	"information_schema.enabled_roles":     buildEnabledRoles,
	"information_schema.applicable_roles":  buildApplicableRoles,
	"information_schema.table_privileges":  buildTablePrivileges,
	"information_schema.role_table_grants": buildRoleTableGrants,
	"information_schema.column_privileges": buildColumnPrivileges,
	"information_schema.character_sets": func(in *Input, b *relBuilder) {
		b.add("character_set_name", "UTF8", "character_repertoire", "UCS", "form_of_use", "UTF8",
			"default_collate_catalog", in.Database, "default_collate_schema", "pg_catalog", "default_collate_name", "C")
	},
	"information_schema.schemata":                buildSchemata,
	"information_schema.tables":                  buildISTables,
	"information_schema.views":                   buildISViews,
	"information_schema.columns":                 buildISColumns,
	"information_schema.table_constraints":       buildISTableConstraints,
	"information_schema.key_column_usage":        buildISKeyColumnUsage,
	"information_schema.constraint_column_usage": buildISConstraintColumnUsage,
	// Private relations the macros read (macros.go).
	"mink.keywords":     buildKeywords,
	"mink.types":        buildTypeNames,
	"mink.type_aliases": buildTypeAliases,
	"mink.relinfo":      buildRelinfo,
	"mink.keydefs":      buildKeyDefs,
	"mink.sequences":    buildSequences,
	privilegesKey:       buildPrivileges,
	membersKey:          buildMembers,
}

// sessionRelations depend on the session's state rather than on the
// metadata view only, so they are rebuilt for every statement.
var sessionRelations = map[string]bool{
	"pg_catalog.pg_settings":      true,
	"pg_catalog.pg_stat_activity": true,
}

// privateRelations are the relations only the macros read.
var privateRelations = map[string][]catalogCol{
	"mink.types": {
		{"oid", 26, -1, true}, {"name", 25, -1, true}, {"typname", 25, -1, true},
		{"elem", 26, -1, true}, {"elemname", 25, -1, false},
	},
	"mink.relinfo": {
		{"oid", 26, -1, true}, {"size", 20, -1, true}, {"partkeydef", 25, -1, false}, {"viewdef", 25, -1, false},
	},
	"mink.keydefs": {
		{"oid", 26, -1, true}, {"col", 23, -1, true}, {"def", 25, -1, true},
	},
	"mink.sequences": {
		{"relid", 26, -1, true}, {"col", 25, -1, true}, {"seqname", 25, -1, true},
	},
	"mink.type_aliases": {
		{"alias", 25, -1, true}, {"oid", 26, -1, true},
	},
	privilegesKey: {
		{"roleid", 26, -1, true}, {"relid", 26, -1, true}, {"privs", 25, -1, true},
	},
	membersKey: {
		{"member", 26, -1, true}, {"roleid", 26, -1, true},
	},
	KeywordsKey: {
		{"word", 25, -1, true}, {"catcode", 18, -1, true}, {"barelabel", 16, -1, true},
		{"catdesc", 25, -1, true}, {"baredesc", 25, -1, true},
	},
}

// ViewName is the name of the session's DuckDB view of the relation
// key ("pg_catalog.pg_class" → mink_pg_catalog__pg_class; private
// "mink.types" → mink_types). Macros re-parse their bodies, so the names
// are plain identifiers.
func ViewName(key string) string {
	if rest, ok := strings.CutPrefix(key, "mink."); ok {
		return "mink_" + rest
	}
	return "mink_" + strings.Replace(key, ".", "__", 1)
}

// catalogViewKeys maps view names back to relation keys.
var catalogViewKeys = func() map[string]string {
	m := map[string]string{}
	for key := range catalogByName {
		m[ViewName(key)] = key
	}
	return m
}()

// relationCols returns the columns of a relation by "schema.name".
func relationCols(key string) []catalogCol {
	if d := catalogByName[key]; d != nil {
		return d.cols
	}
	return privateRelations[key]
}

// catalogRelation is an emulated relation as pg_class shows it: the
// catalogs themselves and the user's tables.
type catalogRelation struct {
	oid       uint32
	namespace uint32
	schema    string
	name      string
	kind      string
	cols      []attribute
	table     *Table // nil for a catalog
}

type attribute struct {
	name    string
	typ     uint32
	typmod  int32
	notNull bool
	def     string // pg_get_expr of the default, "" for none
	// identity is pg_attribute.attidentity: "a" (GENERATED ALWAYS), "d"
	// (BY DEFAULT) or "".
	identity string
	sqlType  sqltypes.Type
	hasType  bool // sqlType is set (user tables)
}

func schemaOID(schema string) uint32 {
	switch schema {
	case "pg_catalog":
		return OIDPgCatalog
	case "information_schema":
		return OIDInformationSchema
	}
	return OIDPublic
}

// relations lists the catalogs and the user tables.
func (in *Input) relations() []*catalogRelation {
	out := make([]*catalogRelation, 0, len(catalogDefs)+len(in.Tables))
	for i := range catalogDefs {
		d := &catalogDefs[i]
		r := &catalogRelation{oid: d.oid, namespace: schemaOID(d.schema), schema: d.schema, name: d.name, kind: string(d.kind)}
		for _, c := range d.cols {
			r.cols = append(r.cols, attribute{name: c.name, typ: c.typ, typmod: c.typmod, notNull: c.notNull})
		}
		out = append(out, r)
	}
	for _, t := range in.Tables {
		r := &catalogRelation{oid: t.oid, namespace: t.nspOID, schema: t.nsp, name: t.spec.Name, kind: t.relkind(), table: t}
		for i, c := range t.spec.Columns {
			typ := t.types[i]
			a := attribute{name: c.Name, typ: typ.OID(), typmod: typ.TypMod(), notNull: c.NotNull,
				def: t.defaults[i], sqlType: typ, hasType: true}
			switch c.Sequence {
			case catalog.SequenceSerial:
				// As PostgreSQL shows a serial column's default.
				seq := sequenceName(t.spec.Name, c.Name)
				if t.nspOID != OIDPublic {
					seq = QuoteIdentIfNeeded(t.nsp) + "." + seq
				}
				a.def = "nextval(" + QuoteLiteral(seq) + "::regclass)"
			case catalog.SequenceAlways:
				a.identity = "a"
			case catalog.SequenceByDefault:
				a.identity = "d"
			}
			r.cols = append(r.cols, a)
		}
		out = append(out, r)
	}
	return out
}

func buildNamespaces(in *Input, b *relBuilder) {
	b.add("oid", OIDPgCatalog, "nspname", "pg_catalog", "nspowner", oidBootstrapSuperuser,
		"nspacl", in.namespaceACL(oidBootstrapSuperuser))
	b.add("oid", OIDPublic, "nspname", "public", "nspowner", oidDatabaseOwner, "nspacl", in.namespaceACL(oidDatabaseOwner))
	b.add("oid", OIDInformationSchema, "nspname", "information_schema", "nspowner", oidBootstrapSuperuser,
		"nspacl", in.namespaceACL(oidBootstrapSuperuser))
	for _, s := range in.Schemas {
		// Every role may use and create in every schema of mink's.
		owner := aclName(in.Roles.name(s.ownerOID()))
		b.add("oid", s.oid, "nspname", s.name, "nspowner", s.ownerOID(), "nspacl", []string{owner + "=UC/" + owner, "=UC/" + owner})
	}
}

// ownerOID is the oid of the schema's owner (a superuser's when none is
// recorded).
func (s *Schema) ownerOID() uint32 {
	if s.owner != 0 {
		return uint32(s.owner)
	}
	return uint32(catalog.BootstrapRole)
}

func buildClasses(in *Input, b *relBuilder) {
	for _, r := range in.relations() {
		am := uint32(0)
		if r.kind == "r" {
			am = oidHeap
		}
		var opts []string
		reltype, pages, tuples := uint32(0), int32(0), float32(-1)
		hasIndex := false
		if r.table != nil {
			hasIndex = r.table.hasPK()
			opts = r.table.reloptions()
			reltype = rowTypeOID(r.table.id)
			pages = int32((r.table.size + 8191) / 8192)
			if r.kind == "r" {
				tuples = float32(r.table.rows)
			}
		}
		b.add("oid", r.oid, "relname", r.name, "relnamespace", r.namespace, "reltype", reltype, "reloftype", uint32(0),
			"relowner", r.owner(), "relam", am, "relfilenode", r.oid, "reltablespace", uint32(0),
			"relpages", pages, "reltuples", tuples, "relallvisible", int32(0), "reltoastrelid", uint32(0),
			"relhasindex", hasIndex, "relisshared", false, "relpersistence", "p", "relkind", r.kind,
			"relnatts", int16(len(r.cols)), "relchecks", int16(0), "relhasrules", r.table != nil && r.table.isView(), "relhastriggers", false,
			"relhassubclass", false, "relrowsecurity", false, "relforcerowsecurity", false, "relispopulated", true,
			"relreplident", map[bool]string{true: "d", false: "n"}[r.kind == "r" || r.kind == "p"],
			"relispartition", false, "relrewrite", uint32(0), "relfrozenxid", uint32(0), "relminmxid", uint32(0),
			"reloptions", nilIfNoItems(opts), "relacl", nilIfNoItems(in.relacl(r)))
		if r.table != nil && r.table.hasPK() {
			r.table.addPKIndexClass(b, r.owner())
		}
	}
	in.addSequenceClasses(b)
}

// attrInfo is what pg_attribute says about a column's type.
func attrInfo(a attribute) (length int16, byVal bool, align, storage string, collation uint32) {
	if t := builtinByOID[a.typ]; t != nil {
		length, byVal, align, storage, collation = t.len, t.byVal, string(t.align), string(t.storage), t.collation
	}
	if a.hasType {
		storage = storageOf(a.sqlType)
		if collatable(a.sqlType) {
			collation = oidDefaultCollation
		}
	}
	return
}

func buildAttributes(in *Input, b *relBuilder) {
	for _, r := range in.relations() {
		for i, a := range r.cols {
			addAttribute(b, r.oid, int16(i+1), a)
		}
		if r.kind == "r" || r.kind == "p" {
			addSystemAttributes(b, r.oid)
		}
		if r.table == nil || !r.table.hasPK() {
			continue
		}
		// The primary-key index's columns.
		for i, name := range r.table.spec.PrimaryKey {
			a := r.cols[r.table.attnum(name)-1]
			a.notNull, a.def, a.identity = false, "", ""
			addAttribute(b, pkIndexOID(r.table.id), int16(i+1), a)
		}
	}
	for _, seq := range in.allSequences() {
		for i, a := range sequenceColumns {
			addAttribute(b, seq.oid, int16(i+1), a)
		}
		addSystemAttributes(b, seq.oid)
	}
}

// addAttribute adds the pg_attribute row of column num of relation relid.
func addAttribute(b *relBuilder, relid uint32, num int16, a attribute) {
	length, byVal, align, storage, collation := attrInfo(a)
	ndims := int16(0)
	if t := builtinByOID[a.typ]; t != nil && t.category == 'A' {
		ndims = 1
	}
	b.add("attrelid", relid, "attname", a.name, "atttypid", a.typ, "attstattarget", int32(-1),
		"attlen", length, "attnum", num, "attndims", int32(ndims), "attcacheoff", int32(-1),
		"atttypmod", a.typmod, "attbyval", byVal, "attalign", align, "attstorage", storage,
		"attcompression", "", "attnotnull", a.notNull, "atthasdef", a.def != "", "atthasmissing", false,
		"attidentity", a.identity, "attgenerated", "", "attisdropped", false, "attislocal", true,
		"attinhcount", int32(0), "attcollation", collation)
}

// addSystemAttributes adds the rows of relation relid's system columns.
func addSystemAttributes(b *relBuilder, relid uint32) {
	for _, sa := range systemAttributes {
		b.add("attrelid", relid, "attname", sa.name, "atttypid", sa.typ, "attstattarget", int32(0),
			"attlen", sa.length, "attnum", sa.num, "attndims", int32(0), "attcacheoff", int32(-1),
			"atttypmod", int32(-1), "attbyval", sa.byVal, "attalign", sa.align, "attstorage", "p",
			"attcompression", "", "attnotnull", true, "atthasdef", false, "atthasmissing", false,
			"attidentity", "", "attgenerated", "", "attisdropped", false, "attislocal", true,
			"attinhcount", int32(0), "attcollation", uint32(0))
	}
}

// systemAttributes are the system columns PostgreSQL lists in pg_attribute
// (with negative attnums) for every table and partitioned table. Tools
// that read a relation's columns without a filter on attnum get them, as
// DBeaver's column reader does (it drops them itself). mink's tables do
// not have these columns: selecting ctid is an unknown column.
var systemAttributes = []struct {
	name   string
	typ    uint32
	num    int16
	length int16
	byVal  bool
	align  string
}{
	{"tableoid", 26, -6, 4, true, "i"},
	{"cmax", 29, -5, 4, true, "i"},
	{"xmax", 28, -4, 4, true, "i"},
	{"cmin", 29, -3, 4, true, "i"},
	{"xmin", 28, -2, 4, true, "i"},
	{"ctid", 27, -1, 6, false, "s"},
}

func buildAttrdefs(in *Input, b *relBuilder) {
	for _, r := range in.relations() {
		for i, a := range r.cols {
			if a.def == "" {
				continue
			}
			oid := attrdefOIDBase + uint32(r.table.id)<<11 + uint32(i+1)
			b.add("oid", oid, "adrelid", r.oid, "adnum", int16(i+1), "adbin", a.def)
		}
	}
}

func regprocName(s string) any {
	if s == "-" {
		return "-"
	}
	return s
}

func buildTypes(in *Input, b *relBuilder) {
	for i := range builtinTypes {
		t := &builtinTypes[i]
		subscript := "-"
		if t.category == 'A' {
			subscript = "array_subscript_handler"
		}
		b.add("oid", t.oid, "typname", t.name, "typnamespace", OIDPgCatalog, "typowner", oidBootstrapSuperuser,
			"typlen", t.len, "typbyval", t.byVal, "typtype", string(t.typtype), "typcategory", string(t.category),
			"typispreferred", t.preferred, "typisdefined", true, "typdelim", string(t.delim), "typrelid", uint32(0),
			"typsubscript", subscript, "typelem", t.elem, "typarray", t.array, "typinput", regprocName(t.input),
			"typoutput", regprocName(t.output), "typreceive", regprocName(t.receive), "typsend", regprocName(t.send),
			"typmodin", regprocName(t.modin), "typmodout", regprocName(t.modout), "typanalyze", "-",
			"typalign", string(t.align), "typstorage", string(t.storage), "typnotnull", false, "typbasetype", uint32(0),
			"typtypmod", int32(-1), "typndims", int32(0), "typcollation", t.collation)
	}
	// information_schema's domains (its columns' types in PostgreSQL;
	// mink describes those columns with the domains' base types).
	for i := range schemaTypes {
		t := &schemaTypes[i]
		b.add("oid", t.oid, "typname", t.name, "typnamespace", OIDInformationSchema, "typowner", oidBootstrapSuperuser,
			"typlen", t.len, "typbyval", t.byVal, "typtype", string(t.typtype), "typcategory", string(t.category),
			"typispreferred", false, "typisdefined", true, "typdelim", ",", "typrelid", uint32(0),
			"typsubscript", t.subscript, "typelem", t.elem, "typarray", t.array, "typinput", t.input,
			"typoutput", t.output, "typreceive", t.receive, "typsend", t.send,
			"typmodin", "-", "typmodout", "-", "typanalyze", "-",
			"typalign", string(t.align), "typstorage", string(t.storage), "typnotnull", false, "typbasetype", t.baseType,
			"typtypmod", t.typmod, "typndims", int32(0), "typcollation", t.collation)
	}
	// Every table has a row type of its name, as in PostgreSQL.
	for _, r := range in.relations() {
		t := r.table
		if t == nil {
			continue
		}
		b.add("oid", rowTypeOID(t.id), "typname", t.spec.Name, "typnamespace", t.nspOID, "typowner", r.owner(),
			"typlen", int16(-1), "typbyval", false, "typtype", "c", "typcategory", "C", "typispreferred", false,
			"typisdefined", true, "typdelim", ",", "typrelid", t.oid, "typsubscript", "-", "typelem", uint32(0),
			"typarray", uint32(0), "typinput", "record_in", "typoutput", "record_out", "typreceive", "record_recv",
			"typsend", "record_send", "typmodin", "-", "typmodout", "-", "typanalyze", "-", "typalign", "d",
			"typstorage", "x", "typnotnull", false, "typbasetype", uint32(0), "typtypmod", int32(-1),
			"typndims", int32(0), "typcollation", uint32(0))
	}
}

// buildDescriptions lists PostgreSQL's comments on the built-in objects
// mink lists; mink's own objects have none (COMMENT ON is not supported).
func buildDescriptions(in *Input, b *relBuilder) {
	for _, d := range builtinDescriptions {
		b.add("objoid", d.objoid, "classoid", d.classoid, "objsubid", d.objsubid, "description", d.description)
	}
}

// buildConversions lists PostgreSQL's encoding conversions, which tools
// read for the list of encodings (mink stores and sends UTF8 only).
func buildConversions(in *Input, b *relBuilder) {
	for _, c := range pgConversions {
		b.add("oid", c.oid, "conname", c.name, "connamespace", OIDPgCatalog, "conowner", oidBootstrapSuperuser,
			"conforencoding", c.forEncoding, "contoencoding", c.toEncoding, "conproc", c.proc, "condefault", c.isDefault)
	}
}

func buildDatabases(in *Input, b *relBuilder) {
	b.add("oid", oidDatabase, "datname", in.Database, "datdba", oidBootstrapSuperuser, "encoding", int32(EncodingUTF8),
		"datlocprovider", "c", "datistemplate", false, "datallowconn", true, "datconnlimit", int32(-1),
		"datfrozenxid", uint32(0), "datminmxid", uint32(1), "dattablespace", oidDefaultTablespace,
		"datcollate", "C", "datctype", "C")
}

func buildAccessMethods(in *Input, b *relBuilder) {
	b.add("oid", oidHeap, "amname", "heap", "amhandler", "heap_tableam_handler", "amtype", "t")
	b.add("oid", oidBtree, "amname", "btree", "amhandler", "bthandler", "amtype", "i")
	b.add("oid", uint32(405), "amname", "hash", "amhandler", "hashhandler", "amtype", "i")
	// PostgreSQL's other built-in index methods, listed as PostgreSQL
	// lists them (mink's tables have no indexes of these kinds).
	b.add("oid", uint32(783), "amname", "gist", "amhandler", "gisthandler", "amtype", "i")
	b.add("oid", uint32(2742), "amname", "gin", "amhandler", "ginhandler", "amtype", "i")
	b.add("oid", uint32(3580), "amname", "brin", "amhandler", "brinhandler", "amtype", "i")
	b.add("oid", uint32(4000), "amname", "spgist", "amhandler", "spghandler", "amtype", "i")
}

func buildCollations(in *Input, b *relBuilder) {
	b.add("oid", oidDefaultCollation, "collname", "default", "collnamespace", OIDPgCatalog, "collowner", oidBootstrapSuperuser,
		"collprovider", "d", "collisdeterministic", true, "collencoding", int32(-1))
	b.add("oid", uint32(950), "collname", "C", "collnamespace", OIDPgCatalog, "collowner", oidBootstrapSuperuser,
		"collprovider", "c", "collisdeterministic", true, "collencoding", int32(-1), "collcollate", "C", "collctype", "C")
	b.add("oid", uint32(951), "collname", "POSIX", "collnamespace", OIDPgCatalog, "collowner", oidBootstrapSuperuser,
		"collprovider", "c", "collisdeterministic", true, "collencoding", int32(-1), "collcollate", "POSIX", "collctype", "POSIX")
}

func buildTablespaces(in *Input, b *relBuilder) {
	b.add("oid", oidDefaultTablespace, "spcname", "pg_default", "spcowner", oidBootstrapSuperuser)
	b.add("oid", uint32(1664), "spcname", "pg_global", "spcowner", oidBootstrapSuperuser)
}

func buildLanguages(in *Input, b *relBuilder) {
	// lanvalidator: fmgr_internal_validator, fmgr_c_validator and
	// fmgr_sql_validator, by their PostgreSQL OIDs.
	for _, l := range []struct {
		oid       uint32
		name      string
		validator uint32
	}{{12, "internal", 2246}, {13, "c", 2247}, {14, "sql", 2248}} {
		b.add("oid", l.oid, "lanname", l.name, "lanowner", oidBootstrapSuperuser, "lanpltrusted", l.name == "sql",
			"lanplcallfoid", uint32(0), "laninline", uint32(0), "lanvalidator", l.validator)
	}
}

func buildPgTables(in *Input, b *relBuilder) {
	for _, r := range in.relations() {
		if r.kind == "r" || r.kind == "p" {
			b.add("schemaname", r.schema, "tablename", r.name, "tableowner", in.Roles.name(r.owner()),
				"hasindexes", r.table != nil && r.table.hasPK(), "hasrules", false, "hastriggers", false, "rowsecurity", false)
		}
	}
}

func buildPgViews(in *Input, b *relBuilder) {
	for _, r := range in.relations() {
		if r.kind == "v" {
			var def any
			if r.table != nil {
				def = r.table.definition
			}
			b.add("schemaname", r.schema, "viewname", r.name, "viewowner", in.Roles.name(r.owner()), "definition", def)
		}
	}
}

// buildRewrites lists each view's _RETURN rule, as PostgreSQL keeps a
// view's query: tools (dbt's relation cache) join it with pg_depend to
// learn which views read which relations.
func buildRewrites(in *Input, b *relBuilder) {
	for _, t := range in.Tables {
		if t.isView() {
			b.add("oid", ruleOIDBase+uint32(t.id), "rulename", "_RETURN", "ev_class", t.oid, "ev_type", "1",
				"ev_enabled", "O", "is_instead", true)
		}
	}
}

// buildDepends lists, for each view, its rule's dependencies as
// PostgreSQL records them: on the view itself (internal) and on every
// relation the view reads (normal; PostgreSQL adds one row per column
// read, mink one per relation, with refobjsubid 0).
func buildDepends(in *Input, b *relBuilder) {
	in.addSequenceDepends(b)
	for _, t := range in.Tables {
		if !t.isView() {
			continue
		}
		rule := ruleOIDBase + uint32(t.id)
		b.add("classid", oidPgRewrite, "objid", rule, "objsubid", int32(0), "refclassid", oidPgClass,
			"refobjid", t.oid, "refobjsubid", int32(0), "deptype", "i")
		for _, id := range t.reads {
			b.add("classid", oidPgRewrite, "objid", rule, "objsubid", int32(0), "refclassid", oidPgClass,
				"refobjid", TableOID(id), "refobjsubid", int32(0), "deptype", "n")
		}
	}
}

func buildPartitionedTables(in *Input, b *relBuilder) {
	for _, t := range in.Tables {
		if t.spec.PartitionBy == "" {
			continue
		}
		b.add("partrelid", t.oid, "partstrat", "l", "partnatts", int16(1), "partdefid", uint32(0),
			"partattrs", []int16{t.attnum(t.spec.PartitionBy)}, "partclass", []uint32{0}, "partcollation", []uint32{0})
	}
}

func buildSettings(in *Input, b *relBuilder) {
	for _, s := range in.Settings {
		context, source := "user", "default"
		if s.ReadOnly {
			context = "internal"
		}
		if s.Value != s.Default {
			source = "session"
		}
		b.add("name", s.Name, "setting", s.Value, "category", "", "short_desc", s.Description, "context", context,
			"vartype", "string", "source", source, "boot_val", s.Default, "reset_val", s.Default, "pending_restart", false)
	}
}

func buildActivity(in *Input, b *relBuilder) {
	a := in.Activity
	b.add("datid", oidDatabase, "datname", in.Database, "pid", a.PID, "usesysid", in.Session.Role, "usename", in.Session.Name,
		"application_name", a.Application, "client_addr", nilIfEmpty(a.ClientAddr), "backend_start", a.BackendStart,
		"query_start", a.BackendStart, "state", "active", "query", a.Query, "backend_type", "client backend")
}

// nilIfNoItems is NULL for a nil list (an empty one is '{}').
func nilIfNoItems(items []string) any {
	if items == nil {
		return nil
	}
	return items
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func buildStatUserTables(in *Input, b *relBuilder) {
	for _, t := range in.Tables {
		if !t.isView() {
			b.add("relid", t.oid, "schemaname", t.nsp, "relname", t.spec.Name, "seq_scan", int64(0), "n_live_tup", max(t.rows, 0))
		}
	}
}

func buildSchemata(in *Input, b *relBuilder) {
	for _, s := range []struct{ name, owner string }{
		{"information_schema", in.Roles.name(oidBootstrapSuperuser)}, {"pg_catalog", in.Roles.name(oidBootstrapSuperuser)},
		{"public", "pg_database_owner"},
	} {
		b.add("catalog_name", in.Database, "schema_name", s.name, "schema_owner", s.owner)
	}
	for _, s := range in.Schemas {
		b.add("catalog_name", in.Database, "schema_name", s.name, "schema_owner", in.Roles.name(s.ownerOID()))
	}
}

func buildISTables(in *Input, b *relBuilder) {
	for _, r := range in.relations() {
		if !in.visible(r, anyTablePrivilege) {
			continue
		}
		typ, insertable := "BASE TABLE", "YES"
		if r.kind == "v" {
			typ, insertable = "VIEW", "NO"
		}
		b.add("table_catalog", in.Database, "table_schema", r.schema, "table_name", r.name, "table_type", typ,
			"is_insertable_into", insertable, "is_typed", "NO")
	}
}

func buildISViews(in *Input, b *relBuilder) {
	for _, r := range in.relations() {
		if r.kind == "v" && in.visible(r, anyTablePrivilege) {
			// As PostgreSQL, the definition only for the owner's roles.
			var def any
			if r.table != nil && in.Roles.hasRole(in.Session.Role, r.owner()) {
				def = r.table.definition
			}
			b.add("table_catalog", in.Database, "table_schema", r.schema, "table_name", r.name, "view_definition", def, "check_option", "NONE",
				"is_updatable", "NO", "is_insertable_into", "NO", "is_trigger_updatable", "NO",
				"is_trigger_deletable", "NO", "is_trigger_insertable_into", "NO")
		}
	}
}

func buildISColumns(in *Input, b *relBuilder) {
	for _, r := range in.relations() {
		if !in.visible(r, anyColumnPrivilege) {
			continue
		}
		for i, a := range r.cols {
			t := builtinByOID[a.typ]
			if t == nil {
				continue
			}
			dataType := formatType(a.typ, -1)
			if oid := a.typ; oid == 1042 {
				dataType = "character"
			}
			if t.category == 'A' {
				dataType = "ARRAY"
			}
			nullable := "YES"
			if a.notNull {
				nullable = "NO"
			}
			row := []any{"table_catalog", in.Database, "table_schema", r.schema, "table_name", r.name,
				"column_name", a.name, "ordinal_position", int32(i + 1), "is_nullable", nullable, "data_type", dataType,
				"udt_catalog", in.Database, "udt_schema", "pg_catalog", "udt_name", t.name,
				"dtd_identifier", fmt.Sprint(i + 1), "is_self_referencing", "NO", "is_identity", map[bool]string{true: "YES", false: "NO"}[a.identity != ""],
				"identity_cycle", "NO", "is_generated", "NEVER", "is_updatable", map[bool]string{true: "YES", false: "NO"}[r.table != nil && r.kind != "v"]}
			if a.def != "" {
				row = append(row, "column_default", a.def)
			}
			if a.identity != "" {
				row = append(row, identityColumn(a)...)
			}
			row = append(row, columnPrecision(a)...)
			b.add(row...)
		}
	}
}

// identityColumn is information_schema's description of an identity
// column's sequence: mink's start at 1 and count up by 1, to the largest
// value of the column's type.
func identityColumn(a attribute) []any {
	generation := "BY DEFAULT"
	if a.identity == "a" {
		generation = "ALWAYS"
	}
	maximum := "9223372036854775807"
	switch a.typ {
	case 21:
		maximum = "32767"
	case 23:
		maximum = "2147483647"
	}
	return []any{"identity_generation", generation, "identity_start", "1", "identity_increment", "1",
		"identity_maximum", maximum, "identity_minimum", "1"}
}

// columnPrecision is information_schema's length, precision and scale of
// a column.
func columnPrecision(a attribute) []any {
	switch a.typ {
	case 1042, 1043:
		if a.typmod >= 4 {
			n := a.typmod - 4
			return []any{"character_maximum_length", n, "character_octet_length", n * 4}
		}
		return []any{"character_octet_length", int32(1073741824)}
	case 25:
		return []any{"character_octet_length", int32(1073741824)}
	case 21:
		return []any{"numeric_precision", int32(16), "numeric_precision_radix", int32(2), "numeric_scale", int32(0)}
	case 23:
		return []any{"numeric_precision", int32(32), "numeric_precision_radix", int32(2), "numeric_scale", int32(0)}
	case 20:
		return []any{"numeric_precision", int32(64), "numeric_precision_radix", int32(2), "numeric_scale", int32(0)}
	case 700:
		return []any{"numeric_precision", int32(24), "numeric_precision_radix", int32(2)}
	case 701:
		return []any{"numeric_precision", int32(53), "numeric_precision_radix", int32(2)}
	case 1700:
		if a.typmod >= 4 {
			m := a.typmod - 4
			return []any{"numeric_precision", m >> 16, "numeric_precision_radix", int32(10), "numeric_scale", m & 0xffff}
		}
		return []any{"numeric_precision_radix", int32(10)}
	case 1082:
		return []any{"datetime_precision", int32(0)}
	case 1083, 1114, 1184, 1266, 1186:
		return []any{"datetime_precision", int32(6)}
	}
	return nil
}

// buildTypeNames fills mink.types: each type's format_type name without
// typmod, and an array's element.
func buildTypeNames(in *Input, b *relBuilder) {
	for i := range builtinTypes {
		t := &builtinTypes[i]
		if t.category == 'A' && t.elem != 0 && t.len == -1 {
			b.add("oid", t.oid, "name", formatType(t.oid, -1), "typname", t.name, "elem", t.elem, "elemname", typeDisplayName(t.elem))
			continue
		}
		b.add("oid", t.oid, "name", typeDisplayName(t.oid), "typname", t.name, "elem", uint32(0))
	}
	for _, t := range in.Tables {
		b.add("oid", rowTypeOID(t.id), "name", QuoteIdentIfNeeded(t.spec.Name), "typname", t.spec.Name, "elem", uint32(0))
	}
}

// displayName is a type's name in format_type's output.
func typeDisplayName(oid uint32) string {
	if n, ok := typeDisplayNames[oid]; ok {
		return n
	}
	if t := builtinByOID[oid]; t != nil {
		return QuoteIdentIfNeeded(t.name)
	}
	return "???"
}

func buildRelinfo(in *Input, b *relBuilder) {
	for _, t := range in.Tables {
		b.add("oid", t.oid, "size", t.size, "partkeydef", nilIfEmpty(t.partKeyDef()), "viewdef", nilIfEmpty(t.definition))
	}
}

// buildSequences fills mink.sequences, what pg_get_serial_sequence
// returns: the sequence of each serial or identity column, named as
// PostgreSQL names it.
func buildSequences(in *Input, b *relBuilder) {
	for _, t := range in.Tables {
		for _, c := range t.spec.Columns {
			if c.Sequence != "" {
				b.add("relid", t.oid, "col", c.Name, "seqname", sequenceName(t.spec.Name, c.Name))
			}
		}
	}
}

// Key resolves a relation name as PostgreSQL would for catalog
// queries: pg_catalog relations also without a schema (pg_catalog is
// searched first), information_schema ones only with theirs. ok is false
// for every other name.
func Key(schema, name string) (key string, ok bool) {
	switch strings.ToLower(schema) {
	case "", "pg_catalog":
		key = "pg_catalog." + name
	case "information_schema":
		key = "information_schema." + name
	default:
		return "", false
	}
	if _, found := catalogByName[key]; found {
		return key, true
	}
	return "", false
}

// TypeAliases maps the names regtype input accepts (typname, format_type's
// names, SQL's aliases, and name[] for arrays) to type OIDs.
var TypeAliases = sync.OnceValue(func() map[string]uint32 {
	m := map[string]uint32{}
	add := func(name string, oid uint32) {
		if _, ok := m[name]; !ok {
			m[name] = oid
		}
	}
	extra := map[string]uint32{"int": 23, "float": 701, "decimal": 1700, "char": 1042, "character": 1042,
		"dec": 1700, "timestamp": 1114, "time": 1083}
	for i := range builtinTypes {
		t := &builtinTypes[i]
		add(t.name, t.oid)
		if t.category != 'A' {
			add(strings.Trim(typeDisplayName(t.oid), `"`), t.oid)
		}
	}
	for name, oid := range extra {
		add(name, oid)
	}
	for name, oid := range m {
		if t := builtinByOID[oid]; t != nil && t.array != 0 {
			add(name+"[]", t.array)
		}
	}
	return m
})

func buildTypeAliases(in *Input, b *relBuilder) {
	aliases := TypeAliases()
	keys := make([]string, 0, len(aliases))
	for k := range aliases {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.add("alias", k, "oid", aliases[k])
	}
	for _, t := range in.Tables {
		b.add("alias", t.spec.Name, "oid", rowTypeOID(t.id))
	}
}

// KeywordsKey is pg_get_keywords(), a relation here.
const KeywordsKey = "mink.keywords"

func buildKeywords(in *Input, b *relBuilder) {
	desc := map[byte]string{'U': "unreserved", 'C': "unreserved (cannot be function or type name)",
		'T': "reserved (can be function or type name)", 'R': "reserved"}
	for _, k := range pgKeywords {
		bare := "requires AS"
		if k.barelabel {
			bare = "can be bare label"
		}
		b.add("word", k.word, "catcode", string(k.catcode), "barelabel", k.barelabel, "catdesc", desc[k.catcode], "baredesc", bare)
	}
}

// Build computes the rows of the relation key ("schema.name", or one of
// the private relations such as KeywordsKey) from in. It panics for a key
// that names no emulated relation: the rewriter only asks for keys that
// Key or the macros' dependencies gave it.
func Build(key string, in *Input) (*arrow.Schema, arrow.RecordBatch) {
	cols := relationCols(key)
	if cols == nil {
		panic(fmt.Sprintf("pgcatalog: no emulated relation %q", key))
	}
	b := newRelBuilder(cols)
	if fill := relationBuilders[key]; fill != nil {
		fill(in, b)
	}
	return b.record()
}

// SessionRelation reports whether the rows of relation key depend on the
// session (its settings, its activity) and not only on the metadata view,
// so that they are built again for every statement.
func SessionRelation(key string) bool { return sessionRelations[key] }

// AlwaysEmpty reports whether viewName (a name ViewName gave) is an
// emulated relation that never has rows in mink.
func AlwaysEmpty(viewName string) bool {
	key, ok := catalogViewKeys[viewName]
	return ok && relationBuilders[key] == nil
}

// RelationOID is the OID of the emulated catalog relation key, as
// PostgreSQL 15 has it; ok is false if mink does not emulate key.
func RelationOID(key string) (oid uint32, ok bool) {
	if d := catalogByName[key]; d != nil {
		return d.oid, true
	}
	return 0, false
}
