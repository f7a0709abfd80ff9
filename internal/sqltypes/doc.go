// Package sqltypes is mink's catalogue of SQL column types: the types a
// table column may have (DESIGN.md §3), how their names are written and
// parsed, what PostgreSQL clients are told about them (type OID, typmod,
// typlen) and how their values are laid out in Arrow, which is how rows are
// stored in buckets and fed to the query engine. It also describes result
// columns computed by the engine (DuckDB) to PostgreSQL clients, including
// types a table cannot hold (HUGEINT, LIST, STRUCT, …).
//
// docs/sql-types.md is the user-facing table of the mapping.
//
// The package is pure Go, starts no goroutines and holds no state: every
// function is safe to call concurrently. Type is a small comparable value.
//
// # Storage forms
//
// A stored value is in canonical form, which Conform enforces on every batch
// before it is appended to a bucket:
//
//   - character varying(n): at most n characters; a longer value is an error
//     (22001) unless the excess is spaces, which are cut (PostgreSQL's
//     assignment rule).
//   - character(n): the same length rule, and trailing spaces are removed. A
//     char(n) value is therefore stored unpadded, which gives PostgreSQL's
//     semantics for comparison, length(), concatenation and casts to text
//     (bpchar ignores trailing spaces in all of them). Only output differs:
//     PostgreSQL prints char(n) values padded to n, which callers that know
//     a result column is char(n) do with PadChar.
//   - numeric without precision: Decimal128(38,10), i.e. at most 28 digits
//     before the point and 10 after; more fractional digits are rounded.
//   - uuid: Arrow's canonical arrow.uuid extension (FixedSizeBinary(16)).
//   - json and jsonb: Arrow's canonical arrow.json extension over String.
//     Both are stored as the validated text; jsonb is not normalised
//     (key order, duplicate keys and whitespace are kept as written).
//   - timestamptz: Timestamp(µs, "UTC"), an absolute instant.
//   - arrays (T[]): an Arrow list of T's storage form, element field "item",
//     one dimension; elements follow T's rules. ParseArrayText and
//     AppendArrayElement read and write PostgreSQL's array text.
package sqltypes
