package sqlfront

import (
	"fmt"

	"github.com/minkdb/mink/buckets"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/sqltypes"
	"github.com/minkdb/mink/kv/kvcodec"
	"github.com/minkdb/mink/sqlfront/pgwire"
)

// codeInvalidTableDefinition is PostgreSQL's invalid_table_definition.
const codeInvalidTableDefinition = "42P16"

// codeInvalidForeignKey is PostgreSQL's invalid_foreign_key.
const codeInvalidForeignKey = "42830"

// codeReservedName is PostgreSQL's reserved_name.
const codeReservedName = "42939"

// checkPrimaryKey checks a primary-key table's definition as PostgreSQL
// would, plus mink's own rules, and marks the key columns NOT NULL.
func checkPrimaryKey(spec *catalog.TableSpec) error {
	if len(spec.PrimaryKey) == 0 {
		return nil
	}
	idx := map[string]int{}
	for i, c := range spec.Columns {
		idx[c.Name] = i
		if c.Name == kvcodec.ChangeTypeColumn {
			return errorf(codeReservedName, "column name %q is reserved in primary-key tables (it is the change type of the table's changelog)", c.Name)
		}
	}
	seen := map[string]bool{}
	for _, k := range spec.PrimaryKey {
		i, ok := idx[k]
		if !ok {
			return errorf(pgwire.CodeUndefinedColumn, "column %q named in key does not exist", k)
		}
		if t, err := sqltypes.Parse(spec.Columns[i].Type); err == nil && t.Kind() == sqltypes.Array {
			return unsupported("an array column (%q) cannot be part of a primary key", k)
		}
		if seen[k] {
			return errorf(pgwire.CodeDuplicateColumn, "column %q appears twice in primary key constraint", k)
		}
		seen[k] = true
		spec.Columns[i].NotNull = true
	}
	if p := spec.PartitionBy; p != "" && !seen[p] {
		return &pgwire.Error{Code: pgwire.CodeFeatureNotSupported,
			Message: "unique constraint on partitioned table must include all partitioning columns",
			Detail:  fmt.Sprintf("PRIMARY KEY constraint on table %q lacks column %q which is part of the partition key.", spec.Name, p)}
	}
	for _, k := range spec.BucketKey {
		if !seen[k] {
			return errorf(codeInvalidTableDefinition, "bucket_key column %q is not in the primary key: rows with one key must go to one bucket", k)
		}
	}
	if _, err := buckets.NewKVCodec(*spec); err != nil {
		return unsupported("this primary key is not supported: %v", err)
	}
	return nil
}
