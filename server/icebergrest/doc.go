// Package icebergrest serves the Iceberg REST catalog API
// (https://iceberg.apache.org/rest-catalog-spec/) of mink's lake: the one
// catalog Spark, Trino, Flink, PyIceberg, DuckDB and iceberg-go all speak,
// so that they can find mink's lake tables by name (docs/lake.md).
//
// The catalog is read-only. Every answer is computed from the node's
// metadata view (catalog.View): a table is loadable once a tiering round
// for it is recorded (CommitTieringRound), and loadTable returns the lake
// metadata version whose current snapshot is the one the log records
// (tiering.Lake.MetadataAt), so every node answers the same and a new round
// is visible as soon as the node has applied its record. Requests that
// would change the catalog (create, commit, rename, drop, register) are
// refused with 403: mink is the only writer of its lake.
//
// A Handler starts no goroutines and is safe for concurrent use; each
// request reads the view once and the lake's metadata objects through the
// node's object store.
package icebergrest
