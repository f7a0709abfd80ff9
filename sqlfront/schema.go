package sqlfront

import (
	"context"
	"fmt"
	"strings"

	pg "github.com/minkdb/mink/sqlfront/pgtree"
	"github.com/minkdb/mink/sqlfront/pgwire"
)

// mink has one schema, public (and the catalogs' pg_catalog and
// information_schema). The statements tools send to make sure a schema
// exists get PostgreSQL's answers for those objects.

// builtinSchemas are the schemas that exist.
var builtinSchemas = map[string]bool{"public": true, "information_schema": true}

// planCreateSchema plans CREATE SCHEMA of a schema that exists (42P06; IF
// NOT EXISTS: a notice). Any other schema is 0A000.
func (s *session) planCreateSchema(cs *pg.CreateSchemaStmt) (*stmt, error) {
	if strings.HasPrefix(cs.Schemaname, "pg_") {
		return nil, &pgwire.Error{Code: codeReservedName, Message: fmt.Sprintf("unacceptable schema name %q", cs.Schemaname),
			Detail: `The prefix "pg_" is reserved for system schemas.`}
	}
	if !builtinSchemas[cs.Schemaname] {
		return nil, unsupported("CREATE SCHEMA is not supported by mink: its one schema is public")
	}
	if len(cs.SchemaElts) > 0 {
		return nil, unsupported("CREATE SCHEMA with schema elements is not supported by mink")
	}
	if !cs.IfNotExists {
		return nil, errorf(pgwire.CodeDuplicateSchema, "schema %q already exists", cs.Schemaname)
	}
	return s.tagWithNotices("CREATE SCHEMA", func(context.Context) ([]*pgwire.Error, error) {
		return []*pgwire.Error{notice(pgwire.CodeDuplicateSchema, "schema %q already exists, skipping", cs.Schemaname)}, nil
	}), nil
}
