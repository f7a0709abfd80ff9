package pgcatalog

import (
	"strconv"

	"github.com/minkdb/mink/catalog"
)

// Sequences in the emulated catalogs. Each serial or identity column has a
// sequence named as PostgreSQL names it (<table>_<column>_seq), and the
// catalogs show it as PostgreSQL does, so that psql's \ds and \d, and the
// sequence lists of drivers and schema browsers, find it: a pg_class row
// of relkind 'S' with its three columns, a pg_sequence row, pg_depend rows
// tying it to its schema and to its column ('a' for serial, 'i' for
// identity), a pg_sequences row and, for a serial column's sequence, an
// information_schema.sequences row (which PostgreSQL keeps for sequences
// that are not an identity's).
//
// mink hands a sequence's values to each node in blocks (Input.SequenceCache),
// so cache_size says that, and last_value is the last value handed to a
// node: as PostgreSQL's is for a sequence with CACHE, it can be ahead of
// the last value used.

// seqOIDBase: a sequence's OID is seqOIDBase + its table id << 11 + its
// column's attnum, as attrdefOIDBase's.
const seqOIDBase uint32 = 8 << 28

// Type and catalog OIDs the sequences' rows use.
const (
	oidBool        uint32 = 16
	oidInt8        uint32 = 20
	oidInt2        uint32 = 21
	oidInt4        uint32 = 23
	oidPgNamespace uint32 = 2615
)

// sequenceName is the name of column col's sequence in table.
func sequenceName(table, col string) string { return table + "_" + col + "_seq" }

// tableSequence is one sequence as the catalogs show it.
type tableSequence struct {
	table    *Table
	oid      uint32
	name     string
	attnum   int16
	typ      uint32 // the column's type: int2, int4 or int8
	max      int64
	last     int64 // 0: no value handed out yet
	identity bool
}

// sequences lists the table's sequences in column order.
func (t *Table) sequences() []tableSequence {
	var out []tableSequence
	for i, c := range t.spec.Columns {
		if c.Sequence == "" {
			continue
		}
		out = append(out, tableSequence{
			table: t, oid: seqOIDBase + uint32(t.id)<<11 + uint32(i+1), name: sequenceName(t.spec.Name, c.Name),
			attnum: int16(i + 1), typ: t.types[i].OID(), max: catalog.SequenceMax(c.Type), last: t.seqLast[c.Name],
			identity: c.Sequence != catalog.SequenceSerial,
		})
	}
	return out
}

// allSequences lists every table's sequences.
func (in *Input) allSequences() []tableSequence {
	var out []tableSequence
	for _, t := range in.Tables {
		out = append(out, t.sequences()...)
	}
	return out
}

// sequenceColumns are a sequence relation's columns, as PostgreSQL's.
var sequenceColumns = []attribute{
	{name: "last_value", typ: oidInt8, typmod: -1, notNull: true},
	{name: "log_cnt", typ: oidInt8, typmod: -1, notNull: true},
	{name: "is_called", typ: oidBool, typmod: -1, notNull: true},
}

func (in *Input) addSequenceClasses(b *relBuilder) {
	for _, s := range in.allSequences() {
		b.add("oid", s.oid, "relname", s.name, "relnamespace", s.table.nspOID, "reltype", uint32(0), "reloftype", uint32(0),
			"relowner", s.owner(), "relam", uint32(0), "relfilenode", s.oid, "reltablespace", uint32(0),
			"relpages", int32(1), "reltuples", float32(1), "relallvisible", int32(0), "reltoastrelid", uint32(0),
			"relhasindex", false, "relisshared", false, "relpersistence", "p", "relkind", "S",
			"relnatts", int16(len(sequenceColumns)), "relchecks", int16(0), "relhasrules", false, "relhastriggers", false,
			"relhassubclass", false, "relrowsecurity", false, "relforcerowsecurity", false, "relispopulated", true,
			"relreplident", "n", "relispartition", false, "relrewrite", uint32(0), "relfrozenxid", uint32(0),
			"relminmxid", uint32(0), "reloptions", nil, "relacl", nil)
	}
}

func (s tableSequence) owner() uint32 {
	if s.table.owner != 0 {
		return uint32(s.table.owner)
	}
	return uint32(catalog.BootstrapRole)
}

func (in *Input) addSequenceDepends(b *relBuilder) {
	for _, s := range in.allSequences() {
		b.add("classid", oidPgClass, "objid", s.oid, "objsubid", int32(0), "refclassid", oidPgNamespace,
			"refobjid", s.table.nspOID, "refobjsubid", int32(0), "deptype", "n")
		kind := "a"
		if s.identity {
			kind = "i"
		}
		b.add("classid", oidPgClass, "objid", s.oid, "objsubid", int32(0), "refclassid", oidPgClass,
			"refobjid", s.table.oid, "refobjsubid", int32(s.attnum), "deptype", kind)
	}
}

func buildPgSequence(in *Input, b *relBuilder) {
	for _, s := range in.allSequences() {
		b.add("seqrelid", s.oid, "seqtypid", s.typ, "seqstart", int64(1), "seqincrement", int64(1),
			"seqmax", s.max, "seqmin", int64(1), "seqcache", in.sequenceCache(), "seqcycle", false)
	}
}

func buildPgSequences(in *Input, b *relBuilder) {
	for _, s := range in.allSequences() {
		var last any
		if s.last > 0 {
			last = s.last
		}
		b.add("schemaname", s.table.nsp, "sequencename", s.name, "sequenceowner", in.Roles.name(s.owner()),
			"data_type", s.typ, "start_value", int64(1), "min_value", int64(1), "max_value", s.max,
			"increment_by", int64(1), "cycle", false, "cache_size", in.sequenceCache(), "last_value", last)
	}
}

func buildInfoSequences(in *Input, b *relBuilder) {
	for _, s := range in.allSequences() {
		if s.identity {
			continue
		}
		precision := map[uint32]int32{oidInt2: 16, oidInt4: 32, oidInt8: 64}[s.typ]
		b.add("sequence_catalog", in.Database, "sequence_schema", s.table.nsp, "sequence_name", s.name,
			"data_type", typeDisplayName(s.typ), "numeric_precision", precision, "numeric_precision_radix", int32(2),
			"numeric_scale", int32(0), "start_value", "1", "minimum_value", "1", "maximum_value", strconv.FormatInt(s.max, 10),
			"increment", "1", "cycle_option", "NO")
	}
}

// sequenceCache is pg_sequence.seqcache: Input.SequenceCache, or 1.
func (in *Input) sequenceCache() int64 {
	if in.SequenceCache > 0 {
		return in.SequenceCache
	}
	return 1
}
