// Package engine is mink's embedded analytic engine: one in-memory DuckDB
// per node, which executes SELECT (and evaluates INSERT … VALUES/SELECT into
// Arrow batches) over table data fed to it as Arrow. It is the only package
// that links DuckDB.
//
// # Build
//
// DuckDB's Arrow C interface is compiled into duckdb-go-bindings only with
// the build tag duckdb_arrow, so every build, vet and test of a binary that
// runs queries needs -tags duckdb_arrow (the Makefile sets it through
// GOFLAGS). Without the tag the package compiles, but Open fails.
//
// # Feeding data: sources and views
//
// A Source is a table's rows as Arrow (Schema, and Open(ctx, columns) →
// array.RecordReader). Conn.Register makes it a temporary view of the
// session's DuckDB connection, backed by the table function
// mink_scan('<random key>'), which this package registers:
//
//   - every reference to the view in a statement opens the Source again,
//     so self-joins, subqueries and CTEs that read a table twice work;
//   - projections are pushed down: Open gets the columns the query uses;
//   - DuckDB's threads convert the batches into DuckDB vectors in
//     parallel (up to Options.Threads per scan); filters are applied by
//     DuckDB after conversion (the C API has no filter pushdown), so
//     partition pruning is the caller's job;
//   - views are per connection and keys are unguessable, so sessions never
//     see each other's sources, even under the same view names.
//
// What DuckDB cannot know about a source: column statistics (min/max,
// string lengths), so the plans that need them — perfect hash joins and
// aggregates, compressed keys, zone-map skipping, late materialisation —
// are not available, and a selective filter still converts every row. On
// 10 M rows, group-by aggregates run within ~1.15x of a native DuckDB
// table and joins with a small table ~5x (internal/enginebench measures it).
//
// # Native tables
//
// NativeTable keeps a table in DuckDB's own storage, fed by appends
// (native.go); sqlfront mirrors log tables in them, because DuckDB plans
// queries over its own tables with their statistics, which no Source can
// give it. Appends are transactions: a statement sees the appends that
// committed before it started.
//
// # Results
//
// QueryArrow returns a statement's result as Arrow batches (DuckDB's
// layout: see QueryArrow); Query returns rows of Go values together with
// PostgreSQL descriptions of the columns (sqltypes.Type); Describe returns
// the descriptions without executing. Results stream: DuckDB computes rows
// as they are read.
//
// # Sessions behave like PostgreSQL where DuckDB has a setting for it
//
// Every Conn sets TimeZone (UTC unless ConnOptions or SetTimeZone say
// otherwise; timestamptz values are instants either way),
// integer_division (5/2 = 2), and NULLS LAST for ascending and NULLS FIRST
// for descending ORDER BY. Known differences that remain: x/0 and x%0 are
// NULL in DuckDB where PostgreSQL raises 22012; DECIMAL / DECIMAL is
// DOUBLE; ::text of intervals and some other types is formatted
// differently; DuckDB's own pg_catalog answers catalog queries that reach
// it. SQL cannot touch the file system outside Options.AllowedDirectories,
// nor the network, nor install extensions.
//
// # Errors
//
// Failed statements return *Error with a PostgreSQL SQLSTATE derived from
// DuckDB's exception type and message (DuckDB errors are produced as JSON,
// which also gives the position), e.g. 42P01 for a missing table, 42703
// for a missing column, 42601 for a syntax error, 22P02/22003 for bad or
// out-of-range casts, 23502 for NOT NULL, 0A000 for unimplemented
// features, 53200 for out of memory, XX000 otherwise. A statement whose
// context is cancelled is interrupted inside DuckDB and fails with 57014,
// and errors.Is(err, context.Canceled) holds. An error returned by a Source
// fails the statement and is returned wrapped with the view's name
// ("read orders: …"), not as an *Error, for the caller to map.
//
// # Goroutines and concurrency
//
// DB's methods are safe for concurrent use; a Conn is used by one
// goroutine at a time. While a statement runs with a cancellable context,
// one goroutine watches the context and interrupts DuckDB; it ends when the
// statement's result is finished. Sources are opened and read on DuckDB's
// own worker threads (see Source).
package engine
