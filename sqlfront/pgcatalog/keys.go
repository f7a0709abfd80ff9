package pgcatalog

import (
	"strings"

	"github.com/minkdb/mink/catalog"
)

// Primary keys in the emulated catalogs. A primary-key table's key is
// shown as PostgreSQL shows a PRIMARY KEY constraint: a constraint t_pkey
// (pg_constraint, contype 'p') and the unique btree index t_pkey that
// backs it (pg_class relkind 'i', pg_index indisprimary, pg_attribute
// rows for its columns), so that psql's \d and \di and drivers' metadata
// calls (pgjdbc's getPrimaryKeys) see it. The index is the KV tablets'
// key order; it has no other existence.

const (
	// pkIndexOIDBase: the OID of a table's primary-key index is
	// pkIndexOIDBase + its table id.
	pkIndexOIDBase uint32 = 1 << 28
	// pkConstraintOIDBase: the OID of its constraint.
	pkConstraintOIDBase uint32 = 3 << 28
)

func pkIndexOID(id catalog.TableID) uint32      { return pkIndexOIDBase + uint32(id) }
func pkConstraintOID(id catalog.TableID) uint32 { return pkConstraintOIDBase + uint32(id) }

// hasPK reports whether the table has a primary key.
func (t *Table) hasPK() bool { return len(t.spec.PrimaryKey) > 0 }

// pkName is the key's constraint and index name, as PostgreSQL names it.
func (t *Table) pkName() string { return t.spec.Name + "_pkey" }

// pkAttnums are the key columns' attribute numbers, in key order.
func (t *Table) pkAttnums() []int16 {
	out := make([]int16, len(t.spec.PrimaryKey))
	for i, name := range t.spec.PrimaryKey {
		out[i] = t.attnum(name)
	}
	return out
}

// pkColumnList is "(a, b)" with identifiers quoted as needed.
func (t *Table) pkColumnList() string {
	cols := make([]string, len(t.spec.PrimaryKey))
	for i, c := range t.spec.PrimaryKey {
		cols[i] = QuoteIdentIfNeeded(c)
	}
	return "(" + strings.Join(cols, ", ") + ")"
}

// pkIndexDef is pg_get_indexdef of the key's index.
func (t *Table) pkIndexDef() string {
	return "CREATE UNIQUE INDEX " + QuoteIdentIfNeeded(t.pkName()) + " ON public." + QuoteIdentIfNeeded(t.spec.Name) +
		" USING btree " + t.pkColumnList()
}

// pkConstraintDef is pg_get_constraintdef of the key's constraint.
func (t *Table) pkConstraintDef() string { return "PRIMARY KEY " + t.pkColumnList() }

// addPKIndexClass adds the pg_class row of a table's primary-key index,
// which has the table's owner.
func (t *Table) addPKIndexClass(b *relBuilder, owner uint32) {
	b.add("oid", pkIndexOID(t.id), "relname", t.pkName(), "relnamespace", t.nspOID, "reltype", uint32(0),
		"reloftype", uint32(0), "relowner", owner, "relam", oidBtree, "relfilenode", pkIndexOID(t.id),
		"reltablespace", uint32(0), "relpages", int32(1), "reltuples", float32(max(t.rows, 0)), "relallvisible", int32(0),
		"reltoastrelid", uint32(0), "relhasindex", false, "relisshared", false, "relpersistence", "p",
		"relkind", "i", "relnatts", int16(len(t.spec.PrimaryKey)), "relchecks", int16(0), "relhasrules", false,
		"relhastriggers", false, "relhassubclass", false, "relrowsecurity", false, "relforcerowsecurity", false,
		"relispopulated", true, "relreplident", "n", "relispartition", false, "relrewrite", uint32(0),
		"relfrozenxid", uint32(0), "relminmxid", uint32(0))
}

func buildIndexes(in *Input, b *relBuilder) {
	for _, t := range in.Tables {
		if !t.hasPK() {
			continue
		}
		n := int16(len(t.spec.PrimaryKey))
		collations := make([]uint32, n)
		classes := make([]uint32, n)
		options := make([]int16, n)
		for i, name := range t.spec.PrimaryKey {
			j := t.attnum(name) - 1
			if j >= 0 && int(j) < len(t.types) && collatable(t.types[j]) {
				collations[i] = oidDefaultCollation
			}
		}
		b.add("indexrelid", pkIndexOID(t.id), "indrelid", t.oid, "indnatts", n, "indnkeyatts", n,
			"indisunique", true, "indnullsnotdistinct", false, "indisprimary", true, "indisexclusion", false,
			"indimmediate", true, "indisclustered", false, "indisvalid", true, "indcheckxmin", false,
			"indisready", true, "indislive", true, "indisreplident", false, "indkey", t.pkAttnums(),
			"indcollation", collations, "indclass", classes, "indoption", options)
	}
}

func buildConstraints(in *Input, b *relBuilder) {
	for _, t := range in.Tables {
		if !t.hasPK() {
			continue
		}
		b.add("oid", pkConstraintOID(t.id), "conname", t.pkName(), "connamespace", t.nspOID, "contype", "p",
			"condeferrable", false, "condeferred", false, "convalidated", true, "conrelid", t.oid,
			"contypid", uint32(0), "conindid", pkIndexOID(t.id), "conparentid", uint32(0), "confrelid", uint32(0),
			"confupdtype", " ", "confdeltype", " ", "confmatchtype", " ", "conislocal", true,
			"coninhcount", int32(0), "connoinherit", true, "conkey", t.pkAttnums())
	}
}

func buildPgIndexes(in *Input, b *relBuilder) {
	for _, t := range in.Tables {
		if t.hasPK() {
			b.add("schemaname", t.nsp, "tablename", t.spec.Name, "indexname", t.pkName(), "indexdef", t.pkIndexDef())
		}
	}
}

// The information_schema views of keys show a table's keys to the roles
// PostgreSQL 15's do: members of the owner, and (but for
// constraint_column_usage) roles with a privilege on the table.

func buildISTableConstraints(in *Input, b *relBuilder) {
	for _, t := range in.Tables {
		if t.hasPK() && in.visible(&catalogRelation{table: t}, constraintPrivileges) {
			b.add("constraint_catalog", in.Database, "constraint_schema", t.nsp, "constraint_name", t.pkName(),
				"table_catalog", in.Database, "table_schema", t.nsp, "table_name", t.spec.Name,
				"constraint_type", "PRIMARY KEY", "is_deferrable", "NO", "initially_deferred", "NO", "enforced", "YES")
		}
	}
}

func buildISKeyColumnUsage(in *Input, b *relBuilder) {
	for _, t := range in.Tables {
		if !in.visible(&catalogRelation{table: t}, anyColumnPrivilege) {
			continue
		}
		for i, c := range t.spec.PrimaryKey {
			b.add("constraint_catalog", in.Database, "constraint_schema", t.nsp, "constraint_name", t.pkName(),
				"table_catalog", in.Database, "table_schema", t.nsp, "table_name", t.spec.Name,
				"column_name", c, "ordinal_position", int32(i+1))
		}
	}
}

func buildISConstraintColumnUsage(in *Input, b *relBuilder) {
	for _, t := range in.Tables {
		if !in.Roles.hasRole(in.Session.Role, (&catalogRelation{table: t}).owner()) {
			continue
		}
		for _, c := range t.spec.PrimaryKey {
			b.add("table_catalog", in.Database, "table_schema", t.nsp, "table_name", t.spec.Name, "column_name", c,
				"constraint_catalog", in.Database, "constraint_schema", t.nsp, "constraint_name", t.pkName())
		}
	}
}

// buildKeyDefs fills mink.keydefs, what pg_get_indexdef and
// pg_get_constraintdef return: by object OID and column (0 for the whole
// definition, n for the index's n-th column).
func buildKeyDefs(in *Input, b *relBuilder) {
	for _, t := range in.Tables {
		if !t.hasPK() {
			continue
		}
		b.add("oid", pkIndexOID(t.id), "col", int32(0), "def", t.pkIndexDef())
		for i, c := range t.spec.PrimaryKey {
			b.add("oid", pkIndexOID(t.id), "col", int32(i+1), "def", QuoteIdentIfNeeded(c))
		}
		b.add("oid", pkConstraintOID(t.id), "col", int32(0), "def", t.pkConstraintDef())
	}
}
