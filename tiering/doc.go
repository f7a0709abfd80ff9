// Package tiering copies tables from their bucket streams into the lake: one
// Apache Iceberg v2 table per mink table, in the object store under
// lake/<table id>/ (docs/format/lake.md), with Parquet data files written by
// parquet-go and metadata committed with iceberg-go.
//
// A round (Tierer.Round) freezes each bucket's committed stream end, writes
// the rows between the table's tiered offsets and those ends as Parquet
// files with the extra columns __bucket and __offset, commits one lake
// snapshot whose summary carries the new per-bucket offsets, and then
// records CommitTieringRound under the coordinator epoch. The lake, not the
// log, is the record of what is tiered: a round whose lake commit succeeded
// but whose CommitTieringRound was lost or fenced is recorded by the next
// round from the offsets in the lake snapshot, so no row is tiered twice or
// skipped. A lake commit is the create-only put of the next metadata version,
// so two rounds (an old and a new coordinator) can never both commit on the
// same base. What a round takes and commits is decided by package plan
// (plan.Round, plan.TableRound.Decide) from the view and what the round read
// of the lake; RoundWithProgress does the I/O around that decision.
//
// A table's columns can grow (ALTER TABLE … ADD COLUMN): the first round or
// compaction that writes after it adds the columns to the lake's Iceberg
// schema (Lake.evolve). Files are not rewritten for it; a file, stream batch
// or changelog record written before a column holds a prefix of the table's
// columns and reads (LakeReader) or is rewritten (rounds, compaction) with
// the column's missing value (catalog Column.Missing).
//
// A bucket can leave its table (TRUNCATE, a dropped partition) with rows in
// the lake: the next round's snapshot deletes its files (plan.TableRound.RetiredFiles), also
// when nothing new is tiered, and no lake snapshot still holding them is
// recorded or compacted. Readers pass the table's current buckets
// (ScanRequest.Buckets) so an older snapshot's retired rows are skipped.
// LakeReader.ReadBucket reads one bucket's offset range in offset order,
// each offset once or an error (ErrLakeIncomplete, a LakeFileError): how
// Flight and the Kafka listener serve the rows retention trimmed from a
// stream after tiering (LakeSplit says where they end).
//
// Files written by rounds that never committed are garbage; LakeCollector
// deletes them after a grace delay, and never a file referenced by a
// retained lake snapshot.
//
// The package starts no goroutines. A Tierer is safe for concurrent use on
// different tables.
package tiering
