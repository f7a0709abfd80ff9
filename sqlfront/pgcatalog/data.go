package pgcatalog

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/sqltypes"
)

// This file builds the rows of the emulated catalogs from the metadata
// view. OIDs are stable across sessions and nodes: they are derived from
// table ids (every node computes the same view), so a client may cache them.

// catalogDef is one emulated relation, with PostgreSQL's OID and columns
// (defs.go).
type catalogDef struct {
	oid    uint32
	schema string
	name   string
	kind   byte // 'r' table, 'v' view
	cols   []catalogCol
}

// catalogCol is a column of an emulated relation: PostgreSQL's type (the
// base type for information_schema's domains) and typmod.
type catalogCol struct {
	name    string
	typ     uint32
	typmod  int32
	notNull bool
}

// builtinType is a row of PostgreSQL's pg_type (defs.go).
type builtinType struct {
	oid                                         uint32
	name                                        string
	len                                         int16
	byVal                                       bool
	typtype, category                           byte
	preferred                                   bool
	delim                                       byte
	elem, array                                 uint32
	input, output, receive, send, modin, modout string
	align, storage                              byte
	collation                                   uint32
}

type builtinDescription struct {
	objoid, classoid uint32
	objsubid         int32
	description      string
}

// schemaType is a pg_type row of a type outside pg_catalog.
type schemaType struct {
	oid                          uint32
	name                         string
	len                          int16
	byVal                        bool
	typtype, category            byte
	elem, array                  uint32
	input, output, receive, send string
	align, storage               byte
	baseType                     uint32
	typmod                       int32
	collation                    uint32
	subscript                    string
}

type pgConversion struct {
	oid                     uint32
	name                    string
	forEncoding, toEncoding int32
	proc                    string
	isDefault               bool
}

// Fixed OIDs, PostgreSQL's where it has them.
const (
	OIDPgCatalog         uint32 = 11
	OIDPublic            uint32 = 2200
	OIDInformationSchema uint32 = 13207
	// oidBootstrapSuperuser is the bootstrap superuser's OID
	// (catalog.BootstrapRole), owner of the catalogs and schemas.
	oidBootstrapSuperuser uint32 = 10
	oidDatabaseOwner      uint32 = 6171 // pg_database_owner, owner of public
	oidDatabase           uint32 = 5
	oidHeap               uint32 = 2
	oidBtree              uint32 = 403
	oidDefaultCollation   uint32 = 100
	oidDefaultTablespace  uint32 = 1663
	EncodingUTF8                 = 6

	// firstUserOID is PostgreSQL's FirstNormalObjectId: a table's OID is
	// firstUserOID + its table id.
	firstUserOID uint32 = 16384
	// rowTypeOIDBase: the OID of a table's row type (pg_type, typtype
	// 'c') is rowTypeOIDBase + its table id.
	rowTypeOIDBase uint32 = 1 << 29
	// attrdefOIDBase: a column default's OID is attrdefOIDBase + table id
	// << 11 + attnum (a table has at most 1600 columns).
	attrdefOIDBase uint32 = 1 << 30
	// ruleOIDBase: the OID of a view's _RETURN rule (pg_rewrite) is
	// ruleOIDBase + the view's id.
	ruleOIDBase uint32 = 14 << 28
	// The OIDs of pg_class and pg_rewrite, pg_depend's classid and
	// refclassid.
	oidPgClass   uint32 = 1259
	oidPgRewrite uint32 = 2618
)

func TableOID(id catalog.TableID) uint32 { return firstUserOID + uint32(id) }

func rowTypeOID(id catalog.TableID) uint32 { return rowTypeOIDBase + uint32(id) }

// catalogByName indexes catalogDefs by "schema.name".
var catalogByName = func() map[string]*catalogDef {
	m := make(map[string]*catalogDef, len(catalogDefs))
	for i := range catalogDefs {
		d := &catalogDefs[i]
		m[d.schema+"."+d.name] = d
	}
	return m
}()

// builtinByOID indexes builtinTypes.
var builtinByOID = func() map[uint32]*builtinType {
	m := make(map[uint32]*builtinType, len(builtinTypes))
	for i := range builtinTypes {
		m[builtinTypes[i].oid] = &builtinTypes[i]
	}
	return m
}()

// typeDisplayNames are format_type's names of the types it does not print
// as their typname (without typmod).
var typeDisplayNames = map[uint32]string{
	16: "boolean", 1042: "character", 1043: "character varying", 700: "real", 701: "double precision",
	21: "smallint", 23: "integer", 20: "bigint", 1083: "time without time zone", 1266: "time with time zone",
	1114: "timestamp without time zone", 1184: "timestamp with time zone", 1560: "bit", 1562: "bit varying",
	18: `"char"`, 1700: "numeric", 1186: "interval",
}

// formatType is PostgreSQL's format_type(oid, typmod) for built-in types;
// typmod < 0 means none.
func formatType(oid uint32, typmod int32) string {
	t := builtinByOID[oid]
	if t == nil {
		return "???"
	}
	if t.elem != 0 && t.len == -1 && t.category == 'A' {
		return formatType(t.elem, typmod) + "[]"
	}
	name := t.name
	if n, ok := typeDisplayNames[oid]; ok {
		name = n
	}
	if typmod < 0 {
		if oid == 1042 {
			return "bpchar"
		}
		return name
	}
	switch oid {
	case 1042, 1043, 1560, 1562:
		return fmt.Sprintf("%s(%d)", name, typmod-4)
	case 1700:
		m := typmod - 4
		return fmt.Sprintf("numeric(%d,%d)", m>>16, m&0xffff)
	case 1083, 1114:
		return fmt.Sprintf("%s(%d) without time zone", strings.Fields(name)[0], typmod)
	case 1266, 1184:
		return fmt.Sprintf("%s(%d) with time zone", strings.Fields(name)[0], typmod)
	}
	return name
}

// storageOf is a type's attstorage: plain, main or extended.
func storageOf(t sqltypes.Type) string {
	switch t.Kind() {
	case sqltypes.Numeric:
		return "m"
	case sqltypes.Text, sqltypes.Varchar, sqltypes.Char, sqltypes.Bytea, sqltypes.JSON, sqltypes.JSONB:
		return "x"
	}
	return "p"
}

// collatable reports whether columns of t have a collation.
func collatable(t sqltypes.Type) bool {
	switch t.Kind() {
	case sqltypes.Text, sqltypes.Varchar, sqltypes.Char:
		return true
	}
	return false
}

// relBuilder collects the rows of one relation.
type relBuilder struct {
	cols []catalogCol
	idx  map[string]int
	rows [][]any
}

func newRelBuilder(cols []catalogCol) *relBuilder {
	b := &relBuilder{cols: cols, idx: make(map[string]int, len(cols))}
	for i, c := range cols {
		b.idx[c.name] = i
	}
	return b
}

// add appends a row given as column name, value pairs. Columns not named
// are NULL, or the zero value of their type when NOT NULL. Values are Go
// values of the column's type (see arrowTypeOf): uint32 for oid columns,
// string, bool, int16, int32, int64, float32, []string, []uint32, []int16,
// time.Time.
func (b *relBuilder) add(pairs ...any) {
	row := make([]any, len(b.cols))
	for i := 0; i+1 < len(pairs); i += 2 {
		name := pairs[i].(string)
		j, ok := b.idx[name]
		if !ok {
			panic(fmt.Sprintf("sqlfront: catalog relation has no column %q", name))
		}
		row[j] = pairs[i+1]
	}
	b.rows = append(b.rows, row)
}

// arrowTypeOf is the Arrow (and so DuckDB) type a catalog column of
// PostgreSQL type oid is stored as. oid-like types are UINTEGER, which
// result descriptions turn back into oid; regproc is its name; int2vector
// and oidvector are lists, so their subscripts start at 1, not 0.
func arrowTypeOf(oid uint32) arrow.DataType {
	switch oid {
	case 16:
		return arrow.FixedWidthTypes.Boolean
	case 17:
		return arrow.BinaryTypes.Binary
	case 20:
		return arrow.PrimitiveTypes.Int64
	case 21:
		return arrow.PrimitiveTypes.Int16
	case 23:
		return arrow.PrimitiveTypes.Int32
	case 700:
		return arrow.PrimitiveTypes.Float32
	case 701:
		return arrow.PrimitiveTypes.Float64
	case 26, 28, 2205, 2206, 4089, 4096:
		return arrow.PrimitiveTypes.Uint32
	case 22, 1005:
		return arrow.ListOf(arrow.PrimitiveTypes.Int16)
	case 30, 1028, 2211:
		return arrow.ListOf(arrow.PrimitiveTypes.Uint32)
	case 1002, 1003, 1009, 1034, 1263:
		return arrow.ListOf(arrow.BinaryTypes.String)
	case 1021:
		return arrow.ListOf(arrow.PrimitiveTypes.Float32)
	case 1184:
		return &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	}
	return arrow.BinaryTypes.String
}

func schemaOf(cols []catalogCol) *arrow.Schema {
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		fields[i] = arrow.Field{Name: c.name, Type: arrowTypeOf(c.typ), Nullable: true}
	}
	return arrow.NewSchema(fields, nil)
}

// record converts the rows to one Arrow batch.
func (b *relBuilder) record() (*arrow.Schema, arrow.RecordBatch) {
	schema := schemaOf(b.cols)
	rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer rb.Release()
	for _, row := range b.rows {
		for j, v := range row {
			if v == nil && b.cols[j].notNull {
				v = zeroOf(b.cols[j].typ)
			}
			appendCatalogValue(rb.Field(j), v)
		}
	}
	return schema, rb.NewRecordBatch()
}

// zeroOf is the value of a NOT NULL column a row does not set.
func zeroOf(oid uint32) any {
	switch arrowTypeOf(oid).ID() {
	case arrow.BOOL:
		return false
	case arrow.INT16:
		return int16(0)
	case arrow.INT32:
		return int32(0)
	case arrow.INT64:
		return int64(0)
	case arrow.UINT32:
		return uint32(0)
	case arrow.FLOAT32:
		return float32(0)
	case arrow.FLOAT64:
		return float64(0)
	case arrow.LIST:
		return nil // an empty list is as good as NULL to every client seen
	case arrow.STRING:
		return ""
	}
	return nil
}

func appendCatalogValue(fb array.Builder, v any) {
	if v == nil {
		fb.AppendNull()
		return
	}
	switch fb := fb.(type) {
	case *array.BooleanBuilder:
		fb.Append(v.(bool))
	case *array.Int16Builder:
		fb.Append(int16(catalogInt(v)))
	case *array.Int32Builder:
		fb.Append(int32(catalogInt(v)))
	case *array.Int64Builder:
		fb.Append(catalogInt(v))
	case *array.Uint32Builder:
		fb.Append(uint32(catalogInt(v)))
	case *array.Float32Builder:
		fb.Append(float32(catalogFloat(v)))
	case *array.Float64Builder:
		fb.Append(catalogFloat(v))
	case *array.StringBuilder:
		fb.Append(v.(string))
	case *array.BinaryBuilder:
		fb.Append(v.([]byte))
	case *array.TimestampBuilder:
		fb.Append(arrow.Timestamp(v.(time.Time).UnixMicro()))
	case *array.ListBuilder:
		fb.Append(true)
		switch vs := v.(type) {
		case []string:
			for _, x := range vs {
				appendCatalogValue(fb.ValueBuilder(), x)
			}
		case []uint32:
			for _, x := range vs {
				appendCatalogValue(fb.ValueBuilder(), x)
			}
		case []int16:
			for _, x := range vs {
				appendCatalogValue(fb.ValueBuilder(), x)
			}
		default:
			panic(fmt.Sprintf("sqlfront: catalog list value %T", v))
		}
	default:
		panic(fmt.Sprintf("sqlfront: catalog value %T for %T", v, fb))
	}
}

func catalogInt(v any) int64 {
	switch v := v.(type) {
	case int:
		return int64(v)
	case int16:
		return int64(v)
	case int32:
		return int64(v)
	case int64:
		return v
	case uint32:
		return int64(v)
	}
	panic(fmt.Sprintf("sqlfront: catalog integer value %T", v))
}

func catalogFloat(v any) float64 {
	switch v := v.(type) {
	case float32:
		return float64(v)
	case float64:
		return v
	}
	return float64(catalogInt(v))
}

// Input is what the emulated catalogs are computed from.
type Input struct {
	Database string
	Tables   []*Table
	// Schemas are the schemas other than public (NewSchemas).
	Schemas []*Schema
	Roles   *Roles
	// Session is the role the session acts as.
	Session Session
	// Settings are the session's settings, for pg_settings.
	Settings []Setting
	Activity Activity
	// SequenceCache is how many values of a sequence a node takes at a
	// time (pg_sequence.seqcache); 0 shows 1.
	SequenceCache int64
}

// Schema is a schema other than public as the catalogs show it.
type Schema struct {
	oid   uint32
	name  string
	owner catalog.RoleID
}

// NewSchemas returns the schemas of v other than public, by oid.
func NewSchemas(v *catalog.View) []*Schema {
	out := make([]*Schema, 0, len(v.Schemas))
	for _, s := range v.Schemas {
		out = append(out, &Schema{oid: SchemaOID(s.ID), name: s.Name, owner: s.Owner})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].oid < out[j].oid })
	return out
}

// SchemaOID is a schema's pg_namespace oid: public's, or, as schema ids
// come from the ids of tables and views, the oid a table of its id would
// have.
func SchemaOID(id catalog.SchemaID) uint32 {
	if id == catalog.PublicSchema {
		return OIDPublic
	}
	return TableOID(catalog.TableID(id))
}

// Table is a user table as the catalogs show it.
type Table struct {
	oid  uint32
	id   catalog.TableID
	spec catalog.TableSpec
	// nsp and nspOID are its schema's name and oid.
	nsp    string
	nspOID uint32
	types  []sqltypes.Type
	// defaults are the columns' defaults as pg_get_expr prints them.
	defaults []string
	size     int64 // bytes committed to the object store
	nParts   int
	// rows is the number of rows in the table's buckets when the view was
	// read, -1 if unknown (buckets led by other nodes): reltuples.
	rows int64
	// owner and acl are the table's owner (0: none recorded) and grants
	// (catalog.Table's; roles.go).
	owner catalog.RoleID
	acl   []catalog.ACLItem
	// definition is a view's query as pg_get_viewdef prints it; "" for a
	// table. A view is a Table with only names and types in spec.
	definition string
	// reads are the tables and views a view's query reads (pg_depend).
	reads []catalog.TableID
	// seqLast is the last value of each sequence handed to a node, by
	// column (catalog.Table.Sequences).
	seqLast map[string]int64
}

// Setting is a row of pg_settings.
type Setting struct {
	Name, Value, Default, Description string
	ReadOnly                          bool
}

// Activity is the session's row of pg_stat_activity.
type Activity struct {
	PID          int32
	Application  string
	ClientAddr   string
	Query        string
	BackendStart time.Time
}

// NewTables reads the user tables and views from the view. Tables whose
// column types do not parse (a newer node's types) are left out.
// bucketRows returns the number of rows in a bucket this node leads;
// renderDefault turns a column's stored default (SQL text) into what
// pg_get_expr prints for it, and viewDef a view into what pg_get_viewdef
// prints for it (the caller parses SQL; pgcatalog does not).
func NewTables(v *catalog.View, bucketRows func(catalog.BucketID) (int64, bool), renderDefault func(def string, typ sqltypes.Type) string,
	viewDef func(*catalog.SQLView) string) []*Table {
	var out []*Table
	for _, t := range v.Tables {
		ct := &Table{oid: TableOID(t.ID), id: t.ID, spec: t.Spec, nParts: len(t.Partitions),
			owner: t.Owner, acl: slices.Clone(t.ACL), seqLast: t.Sequences, nspOID: SchemaOID(t.Spec.Schema)}
		ct.nsp, _ = v.SchemaName(t.Spec.Schema)
		ok := true
		for _, c := range t.Spec.Columns {
			typ, err := sqltypes.Parse(c.Type)
			if err != nil {
				ok = false
				break
			}
			ct.types = append(ct.types, typ)
			ct.defaults = append(ct.defaults, renderDefault(c.Default, typ))
		}
		if !ok {
			continue
		}
		for _, b := range v.BucketsOf(t.ID) {
			if st := v.Streams[catalog.StreamID(b)]; st != nil {
				for _, o := range st.Objects {
					ct.size += o.Size
				}
			}
			if n, ok := bucketRows(b); ok && ct.rows >= 0 {
				ct.rows += n
			} else {
				ct.rows = -1
			}
		}
		out = append(out, ct)
	}
	for _, sv := range v.Views {
		ct := &Table{oid: TableOID(sv.ID), id: sv.ID, spec: catalog.TableSpec{Name: sv.Spec.Name, Schema: sv.Spec.Schema}, rows: -1,
			owner: sv.Owner, acl: slices.Clone(sv.ACL), definition: viewDef(sv), nspOID: SchemaOID(sv.Spec.Schema)}
		ct.nsp, _ = v.SchemaName(sv.Spec.Schema)
		for _, r := range sv.Spec.Relations {
			ct.reads = append(ct.reads, r.ID)
		}
		ok := true
		for _, c := range sv.Spec.Columns {
			typ, err := sqltypes.Parse(c.Type)
			if err != nil {
				ok = false
				break
			}
			ct.spec.Columns = append(ct.spec.Columns, catalog.Column{Name: c.Name, Type: c.Type})
			ct.types = append(ct.types, typ)
			ct.defaults = append(ct.defaults, "")
		}
		if ok {
			out = append(out, ct)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].oid < out[j].oid })
	return out
}

// isView reports whether t is a view.
func (t *Table) isView() bool { return t.definition != "" }

// relkind of a user table or view.
func (t *Table) relkind() string {
	if t.isView() {
		return "v"
	}
	if t.spec.PartitionBy != "" {
		return "p"
	}
	return "r"
}

// reloptions are the table's WITH options as PostgreSQL lists them.
func (t *Table) reloptions() []string {
	if t.isView() {
		return nil
	}
	opts := []string{fmt.Sprintf("buckets=%d", t.spec.Buckets)}
	if len(t.spec.BucketKey) > 0 {
		opts = append(opts, "bucket_key="+strings.Join(t.spec.BucketKey, ","))
	}
	keys := make([]string, 0, len(t.spec.Options))
	for k := range t.spec.Options {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		opts = append(opts, k+"="+t.spec.Options[k])
	}
	return opts
}

// partKeyDef is pg_get_partkeydef's text.
func (t *Table) partKeyDef() string {
	if t.spec.PartitionBy == "" {
		return ""
	}
	return "LIST (" + QuoteIdentIfNeeded(t.spec.PartitionBy) + ")"
}

func (t *Table) attnum(col string) int16 {
	for i, c := range t.spec.Columns {
		if c.Name == col {
			return int16(i + 1)
		}
	}
	return 0
}

// TypeNameNoTypmod is format_type(oid, NULL): the type's name without its
// modifiers, as casts in default expressions print it.
func TypeNameNoTypmod(t sqltypes.Type) string {
	switch t.Kind() {
	case sqltypes.Numeric:
		return "numeric"
	case sqltypes.Varchar:
		return "character varying"
	case sqltypes.Char:
		return "bpchar"
	}
	return t.Name()
}

func QuoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// QuoteIdentIfNeeded is quote_ident: identifiers that are not lower-case
// words, or that are keywords, get double quotes.
func QuoteIdentIfNeeded(s string) string {
	plain := s != ""
	for i, r := range s {
		if !(r >= 'a' && r <= 'z' || r == '_' || i > 0 && (r >= '0' && r <= '9' || r == '$')) {
			plain = false
			break
		}
	}
	if plain && !isKeyword(s) {
		return s
	}
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// pgKeyword is a row of pg_get_keywords().
type pgKeyword struct {
	word      string
	catcode   byte // U unreserved, C column name, T type or function name, R reserved
	barelabel bool // usable as a column label without AS
}

// quotedKeywords are the keywords quote_ident quotes: all but the
// unreserved ones.
var quotedKeywords = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range pgKeywords {
		if k.catcode != 'U' {
			m[k.word] = true
		}
	}
	return m
}()

// isKeyword reports whether s is a PostgreSQL keyword that quote_ident
// quotes.
func isKeyword(s string) bool { return quotedKeywords[s] }

// QuotedKeywords are the keywords quote_ident quotes, sorted.
func QuotedKeywords() []string { return slices.Sorted(maps.Keys(quotedKeywords)) }

// vectorColumns are the names of the catalog columns of type int2vector
// or oidvector (indkey, indclass, proargtypes, …).
var vectorColumns = func() map[string]bool {
	out := map[string]bool{}
	for _, d := range catalogDefs {
		for _, c := range d.cols {
			if c.typ == 22 || c.typ == 30 {
				out[c.name] = true
			}
		}
	}
	return out
}()

// VectorColumn reports whether name is the name of a catalog column of
// type int2vector or oidvector, whose text form is its elements separated
// by spaces ("1 2"); mink stores them as lists.
func VectorColumn(name string) bool { return vectorColumns[name] }
