// Package sqlfront is mink's SQL front end: the Postgres wire protocol's
// SQL half. It parses statements with the PostgreSQL parser (sqlfront/pgtree),
// executes DDL and writes itself (metadata
// log proposals, Arrow batches appended to buckets), and runs queries in the
// embedded analytic engine (sqlfront/engine, DuckDB) over the tables' bucket
// data, which it exposes to the engine as Arrow sources; sqlfront/translate
// turns each query into the engine's SQL.
//
// Frontend implements pgwire.Handler; one session per connection. A session
// is used from one goroutine at a time (pgwire's contract); the Frontend is
// safe for concurrent use. Sessions start no goroutines of their own.
package sqlfront
