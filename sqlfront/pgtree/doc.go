// Package pgtree owns the PostgreSQL parser: it parses SQL into
// PostgreSQL's own parse trees (pg_query, the parser of PostgreSQL built
// in), renders trees back to SQL, walks them, and builds their nodes.
//
// It is the one package that imports pg_query, a cgo dependency. The rest
// of sqlfront names the node types through the aliases in nodes.go, so a
// tree is the same value on both sides, and an upgrade of the parser
// touches this package alone.
package pgtree
