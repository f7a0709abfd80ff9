package flightsql

import (
	"context"
	"slices"
	"sort"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql/schema_ref"
	pb "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/sqltypes"
)

// Metadata commands answer from the metadata view: one catalog (the
// database, "mink"), its schemas (public and those CREATE SCHEMA made),
// and the tables and views the caller holds a privilege on, as Flight
// SQL's reference schemas lay them out.

const (
	tableType = "TABLE"
	viewType  = "VIEW"
)

// metadataInfo is the FlightInfo of a metadata command: its reference
// schema and one endpoint whose ticket is the command itself.
func (s *Server) metadataInfo(desc *flight.FlightDescriptor, schema *arrow.Schema) *flight.FlightInfo {
	return s.flightInfo(desc, schema, desc.Cmd)
}

// table is a table or view as the metadata commands show it.
type table struct {
	dbSchema   string // its schema's name
	name       string
	kind       string // tableType or viewType
	schema     *arrow.Schema
	primaryKey []string
}

// schemaOf is the Arrow schema of columns of these SQL types; false if a
// type does not parse (a newer node's).
func schemaOf(names, types []string, notNull []bool) (*arrow.Schema, bool) {
	cols := make([]sqltypes.Column, len(names))
	for i := range names {
		typ, err := sqltypes.Parse(types[i])
		if err != nil {
			return nil, false
		}
		cols[i] = sqltypes.Column{Name: names[i], Type: typ, NotNull: notNull[i]}
	}
	return sqltypes.Schema(cols), true
}

// tables returns the tables and views the caller may see whose names
// match namePattern (a LIKE pattern; nil: all), of the kinds in kinds,
// sorted by name.
func (s *Server) tables(ctx context.Context, schemaPattern, namePattern *string, kinds map[string]bool) []table {
	id := s.identity(ctx)
	var out []table
	s.cfg.Meta.Read(func(v *catalog.View) {
		schemaOK := func(id catalog.SchemaID) (string, bool) {
			name, _ := v.SchemaName(id)
			return name, schemaPattern == nil || like(name, *schemaPattern)
		}
		for _, sv := range v.Views {
			if !kinds[viewType] || (namePattern != nil && !like(sv.Spec.Name, *namePattern)) {
				continue
			}
			dbSchema, ok := schemaOK(sv.Spec.Schema)
			if !ok {
				continue
			}
			if s.cfg.Access != nil && v.ViewPrivileges(id.Role, sv) == 0 {
				continue
			}
			var names, types []string
			for _, c := range sv.Spec.Columns {
				names, types = append(names, c.Name), append(types, c.Type)
			}
			if schema, ok := schemaOf(names, types, make([]bool, len(names))); ok {
				out = append(out, table{dbSchema: dbSchema, name: sv.Spec.Name, kind: viewType, schema: schema})
			}
		}
		for _, t := range v.Tables {
			if !kinds[tableType] {
				continue
			}
			if namePattern != nil && !like(t.Spec.Name, *namePattern) {
				continue
			}
			dbSchema, ok := schemaOK(t.Spec.Schema)
			if !ok {
				continue
			}
			if s.cfg.Access != nil && v.TablePrivileges(id.Role, t) == 0 {
				continue
			}
			var names, types []string
			var notNull []bool
			for _, c := range t.Spec.Columns {
				names, types, notNull = append(names, c.Name), append(types, c.Type), append(notNull, c.NotNull)
			}
			if schema, ok := schemaOf(names, types, notNull); ok {
				out = append(out, table{dbSchema: dbSchema, name: t.Spec.Name, kind: tableType, schema: schema, primaryKey: t.Spec.PrimaryKey})
			}
		}
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].dbSchema != out[j].dbSchema {
			return out[i].dbSchema < out[j].dbSchema
		}
		return out[i].name < out[j].name
	})
	return out
}

// catalogMatches reports whether a command's catalog filter admits the
// database ("" means objects without a catalog, which mink has none of).
func (s *Server) catalogMatches(catalogName *string) bool {
	return catalogName == nil || *catalogName == s.cfg.Front.Database()
}

// dbSchemas returns the schemas whose names match pattern (nil: all),
// sorted.
func (s *Server) dbSchemas(pattern *string) []string {
	var out []string
	s.cfg.Meta.Read(func(v *catalog.View) {
		out = append(out, catalog.PublicSchemaName)
		for _, sc := range v.Schemas {
			out = append(out, sc.Name)
		}
	})
	out = slices.DeleteFunc(out, func(name string) bool { return pattern != nil && !like(name, *pattern) })
	slices.Sort(out)
	return out
}

// like matches s against a SQL LIKE pattern: % any run, _ any one
// character, \ escapes.
func like(s, pattern string) bool {
	p := []rune(pattern)
	r := []rune(s)
	var match func(i, j int) bool
	match = func(i, j int) bool {
		for j < len(p) {
			switch p[j] {
			case '%':
				for k := i; k <= len(r); k++ {
					if match(k, j+1) {
						return true
					}
				}
				return false
			case '_':
				if i >= len(r) {
					return false
				}
			case '\\':
				if j+1 < len(p) {
					j++
				}
				fallthrough
			default:
				if i >= len(r) || r[i] != p[j] {
					return false
				}
			}
			i++
			j++
		}
		return i == len(r)
	}
	return match(0, 0)
}

// recordStream streams one batch built by build with schema.
func (s *Server) recordStream(ctx context.Context, schema *arrow.Schema, build func(b *array.RecordBuilder)) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	b := array.NewRecordBuilder(s.alloc, schema)
	defer b.Release()
	build(b)
	rec := b.NewRecordBatch()
	defer rec.Release()
	rdr, err := array.NewRecordReader(schema, []arrow.RecordBatch{rec})
	if err != nil {
		return nil, nil, toStatus(err)
	}
	return schema, s.stream(ctx, rdr, func() {}), nil
}

func (s *Server) GetFlightInfoCatalogs(_ context.Context, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return s.metadataInfo(desc, schema_ref.Catalogs), nil
}

func (s *Server) DoGetCatalogs(ctx context.Context) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	return s.recordStream(ctx, schema_ref.Catalogs, func(b *array.RecordBuilder) {
		b.Field(0).(*array.StringBuilder).Append(s.cfg.Front.Database())
	})
}

func (s *Server) GetFlightInfoSchemas(_ context.Context, _ flightsql.GetDBSchemas, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return s.metadataInfo(desc, schema_ref.DBSchemas), nil
}

func (s *Server) DoGetDBSchemas(ctx context.Context, cmd flightsql.GetDBSchemas) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	return s.recordStream(ctx, schema_ref.DBSchemas, func(b *array.RecordBuilder) {
		if !s.catalogMatches(cmd.GetCatalog()) {
			return
		}
		for _, name := range s.dbSchemas(cmd.GetDBSchemaFilterPattern()) {
			b.Field(0).(*array.StringBuilder).Append(s.cfg.Front.Database())
			b.Field(1).(*array.StringBuilder).Append(name)
		}
	})
}

func (s *Server) GetFlightInfoTableTypes(_ context.Context, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return s.metadataInfo(desc, schema_ref.TableTypes), nil
}

func (s *Server) DoGetTableTypes(ctx context.Context) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	return s.recordStream(ctx, schema_ref.TableTypes, func(b *array.RecordBuilder) {
		b.Field(0).(*array.StringBuilder).Append(tableType)
		b.Field(0).(*array.StringBuilder).Append(viewType)
	})
}

func (s *Server) GetFlightInfoTables(_ context.Context, cmd flightsql.GetTables, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	if cmd.GetIncludeSchema() {
		return s.metadataInfo(desc, schema_ref.TablesWithIncludedSchema), nil
	}
	return s.metadataInfo(desc, schema_ref.Tables), nil
}

// DoGetTables lists the tables; with include_schema, each one's Arrow
// schema (IPC-serialised) as mink stores it, the schema DoGet of the
// table's descriptor returns.
func (s *Server) DoGetTables(ctx context.Context, cmd flightsql.GetTables) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	schema := schema_ref.Tables
	if cmd.GetIncludeSchema() {
		schema = schema_ref.TablesWithIncludedSchema
	}
	kinds := map[string]bool{tableType: true, viewType: true}
	if len(cmd.GetTableTypes()) > 0 {
		kinds = map[string]bool{}
		for _, t := range cmd.GetTableTypes() {
			kinds[strings.ToUpper(t)] = true
		}
	}
	var tables []table
	if s.catalogMatches(cmd.GetCatalog()) {
		tables = s.tables(ctx, cmd.GetDBSchemaFilterPattern(), cmd.GetTableNameFilterPattern(), kinds)
	}
	return s.recordStream(ctx, schema, func(b *array.RecordBuilder) {
		for _, t := range tables {
			b.Field(0).(*array.StringBuilder).Append(s.cfg.Front.Database())
			b.Field(1).(*array.StringBuilder).Append(t.dbSchema)
			b.Field(2).(*array.StringBuilder).Append(t.name)
			b.Field(3).(*array.StringBuilder).Append(t.kind)
			if cmd.GetIncludeSchema() {
				b.Field(4).(*array.BinaryBuilder).Append(flight.SerializeSchema(t.schema, s.alloc))
			}
		}
	})
}

func (s *Server) GetFlightInfoPrimaryKeys(_ context.Context, _ flightsql.TableRef, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return s.metadataInfo(desc, schema_ref.PrimaryKeys), nil
}

// DoGetPrimaryKeys lists the primary-key columns of a table, in key
// order; a log table has none.
func (s *Server) DoGetPrimaryKeys(ctx context.Context, ref flightsql.TableRef) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	var pk []string
	dbSchema := catalog.PublicSchemaName
	if ref.DBSchema != nil {
		dbSchema = *ref.DBSchema
	}
	if s.catalogMatches(ref.Catalog) {
		for _, t := range s.tables(ctx, nil, nil, map[string]bool{tableType: true}) {
			if t.name == ref.Table && t.dbSchema == dbSchema {
				pk = t.primaryKey
			}
		}
	}
	return s.recordStream(ctx, schema_ref.PrimaryKeys, func(b *array.RecordBuilder) {
		for i, c := range pk {
			b.Field(0).(*array.StringBuilder).Append(s.cfg.Front.Database())
			b.Field(1).(*array.StringBuilder).Append(dbSchema)
			b.Field(2).(*array.StringBuilder).Append(ref.Table)
			b.Field(3).(*array.StringBuilder).Append(c)
			b.Field(4).(*array.Int32Builder).Append(int32(i + 1))
			b.Field(5).AppendNull()
		}
	})
}

// registerSQLInfo registers GetSqlInfo's answers.
func (s *Server) registerSQLInfo() {
	for id, v := range map[flightsql.SqlInfo]any{
		flightsql.SqlInfoFlightSqlServerName:          "mink",
		flightsql.SqlInfoFlightSqlServerVersion:       s.cfg.Version,
		flightsql.SqlInfoFlightSqlServerArrowVersion:  "18",
		flightsql.SqlInfoFlightSqlServerReadOnly:      false,
		flightsql.SqlInfoFlightSqlServerSql:           true,
		flightsql.SqlInfoFlightSqlServerSubstrait:     false,
		flightsql.SqlInfoFlightSqlServerTransaction:   int32(flightsql.SqlTransactionNone),
		flightsql.SqlInfoFlightSqlServerCancel:        false,
		flightsql.SqlInfoFlightSqlServerBulkIngestion: false,
		flightsql.SqlInfoDDLCatalog:                   false,
		flightsql.SqlInfoDDLSchema:                    false,
		flightsql.SqlInfoDDLTable:                     true,
		flightsql.SqlInfoIdentifierCase:               int64(flightsql.SqlCaseSensitivityLowerCase),
		flightsql.SqlInfoIdentifierQuoteChar:          `"`,
		flightsql.SqlInfoQuotedIdentifierCase:         int64(flightsql.SqlCaseSensitivityUnknown),
		flightsql.SqlInfoTransactionsSupported:        false,
		flightsql.SqlInfoSupportedGrammar:             int32(1<<pb.SupportedSqlGrammar_SQL_MINIMUM_GRAMMAR | 1<<pb.SupportedSqlGrammar_SQL_CORE_GRAMMAR),
		flightsql.SqlInfoANSI92SupportedLevel:         int32(1 << pb.SupportedAnsi92SqlGrammarLevel_ANSI92_ENTRY_SQL),
		flightsql.SqlInfoSchemaTerm:                   "schema",
		flightsql.SqlInfoCatalogTerm:                  "database",
		flightsql.SqlInfoSelectForUpdateSupported:     false,
		flightsql.SqlInfoStoredProceduresSupported:    false,
	} {
		if err := s.RegisterSqlInfo(id, v); err != nil {
			panic(err) // the values above are of the types it takes
		}
	}
}
