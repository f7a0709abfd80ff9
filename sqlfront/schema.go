package sqlfront

import (
	"context"
	"fmt"
	"strings"

	pg "github.com/minkdb/mink/sqlfront/pgtree"
	"github.com/minkdb/mink/sqlfront/pgwire"
)

// mink has one schema, public (and the catalogs' pg_catalog and
// information_schema), and no views yet. The statements tools send to make
// sure a schema exists, or that a view does not, get PostgreSQL's answers
// for those objects.

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

// planDropView plans DROP VIEW: no view exists, so a name is missing
// (42P01; IF EXISTS: a notice) or names a table (42809).
func (s *session) planDropView(d *pg.DropStmt) (*stmt, error) {
	var names []string
	for _, obj := range d.Objects {
		rv := rangeVarOfName(obj)
		name, err := relName(rv)
		if err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	return s.tagWithNotices("DROP VIEW", func(context.Context) ([]*pgwire.Error, error) {
		var notices []*pgwire.Error
		for _, name := range names {
			if _, err := s.f.lookupTableByName(name); err == nil {
				return nil, &pgwire.Error{Code: pgwire.CodeWrongObjectType, Message: fmt.Sprintf("%q is not a view", name),
					Hint: "Use DROP TABLE to remove a table."}
			}
			if !d.MissingOk {
				return nil, errorf(pgwire.CodeUndefinedTable, "view %q does not exist", name)
			}
			notices = append(notices, notice(pgwire.CodeSuccessfulCompletion, "view %q does not exist, skipping", name))
		}
		return notices, nil
	}), nil
}
