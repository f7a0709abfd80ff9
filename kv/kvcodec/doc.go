// Package kvcodec holds the encodings of primary-key tables
// (docs/format/kv.md): order-preserving primary keys, compact rows and
// changelog entries of one table schema (Codec), and the changelog's record
// and write types. It has no storage engine: the kv package (the tablet, on
// pebble) and the Go client (which encodes keys itself) both use it.
//
// Everything is pure and safe for concurrent use; a Codec is immutable.
package kvcodec
