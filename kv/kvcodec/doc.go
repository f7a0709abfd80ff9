// Package kvcodec holds the encodings of primary-key tables
// (docs/format/kv.md): order-preserving primary keys, compact rows and
// changelog entries of one table schema (Codec), and the changelog's record
// and write types. It has no storage engine: the kv package (the tablet, on
// pebble) and the Go client (which encodes keys itself) both use it.
//
// A table's columns only grow, at the end (ALTER TABLE … ADD COLUMN): a
// Codec of the table's current columns reads every row and changelog entry
// stored with a prefix of them, filling the rest with their missing values,
// and refuses those holding more (ErrNewerColumns).
//
// Everything is pure and safe for concurrent use; a Codec is immutable.
package kvcodec
