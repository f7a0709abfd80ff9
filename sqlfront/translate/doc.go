// Package translate turns PostgreSQL statements into statements the engine
// (DuckDB) runs with PostgreSQL's meaning, and describes their results as
// PostgreSQL would.
//
// It works on parse trees (sqlfront/pgtree): Query, Tree, Select and Expr
// rewrite a statement's functions, operators, casts and literals where the
// engine's differ (rewrite.go lists them); CheckConditions refuses what
// PostgreSQL refuses before the engine would accept it; ResultTypes and
// ColumnNames give result columns PostgreSQL's types and names; Catalog
// points a query of PostgreSQL's catalogs at mink's emulation of them
// (sqlfront/pgcatalog); the literal functions read constants as
// PostgreSQL's input functions do.
// Nothing here runs a statement, so every rule is tested without a node
// or an engine.
package translate

import (
	"github.com/minkdb/mink/internal/sqltypes"
	pg "github.com/minkdb/mink/sqlfront/pgtree"
)

// Env is what translating a statement reads of the session it runs in.
type Env interface {
	// Table returns the columns of the table rv names and the table's
	// pg_class OID; ok is false when rv names no table of the database (a
	// catalog relation, a missing table: the engine reports those).
	Table(rv *pg.RangeVar) (cols []sqltypes.Column, oid uint32, ok bool)
	// PrimaryKey returns the primary-key columns of the table rv names;
	// nil for a log table or no table.
	PrimaryKey(rv *pg.RangeVar) []string
	// User is the role current_user names.
	User() string
	// DateStyle is the session's DateStyle setting, such as "ISO, MDY".
	DateStyle() string
}

// translator reads the session through its Env.
type translator struct{ Env }

// Deparse renders one statement node back to SQL for the engine:
// identifiers the engine reads as keywords are quoted (enginekw.go).
func Deparse(stmt *pg.Node) (string, error) {
	out, err := pg.Deparse(stmt)
	if err != nil {
		return "", err
	}
	return quoteEngineKeywords(out), nil
}
