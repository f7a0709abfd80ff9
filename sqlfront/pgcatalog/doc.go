// Package pgcatalog is mink's emulation of PostgreSQL 15's system
// catalogs: the relations of pg_catalog and information_schema that psql's
// \d commands, drivers' metadata calls and tools read (their OIDs and
// columns, generated from a real PostgreSQL in defs.go), the rows mink
// gives them, computed from the metadata view (data.go, rels.go, keys.go,
// roles.go), and the engine macros that stand in for PostgreSQL's catalog
// functions (macros.go, roles.go).
//
// The package turns a catalog.View and a session's facts (Input: its
// role, settings and activity) into Arrow record batches, one per relation
// key ("pg_catalog.pg_class", or a private relation such as KeywordsKey),
// with Build. It parses no SQL and runs no queries: sqlfront rewrites a
// catalog query's parse tree to read the relations under ViewName's names,
// registers what Build returns on the session's engine connection, and
// renders column defaults for it (NewTables' renderDefault). OIDs are
// stable across sessions and nodes (TableOID and friends derive them from
// table ids), so clients may cache them.
//
// Everything here is pure and safe for concurrent use: the package-level
// tables are built once and never written; an Input and the Tables and
// Roles in it are read-only once made.
package pgcatalog
