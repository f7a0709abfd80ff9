// Package plan decides what the coordinator and the tiering worker do next,
// from a catalog.View (and the live nodes, the clock as a value). Every
// function here is pure: no I/O, no context, no goroutines, no clock reads,
// no dependence on map iteration order. The same view, live set and time give
// the same plan, in the same order, so plans can be tested exhaustively and
// replayed from a log (testdata/*.txt). The drivers that read a view, call a
// plan and propose its records live in package server (the coordinator and
// lifecycle loops) and package tiering (RoundWithProgress, Compact).
//
// Bucket ownership (docs/cluster.md, "Buckets and their leaders"; the
// design spec "Ownership and failover", section "Assignment"):
//
//   - Assign gives the buckets of new tables and partitions to live nodes,
//     round robin from a clock-derived start.
//   - Failover re-leads the buckets of dead nodes on every coordinator tick.
//   - Rebalance is `mink cluster rebalance`: orphans first, then moves from
//     nodes above 110% of the mean load to nodes below 90% of it.
//
// Failover and Rebalance choose a destination with the same rule, the live
// node leading the fewest buckets, lowest id on ties (loads.leastLoaded).
//
// Lifecycle (docs/tiering.md, "Retention"): Trims (log_retention and the
// primary-key changelog bound), PartitionDrops (partition_retention) and
// RetiredCloses (streams of dropped buckets whose holder is gone).
//
// Tiering: Round freezes a table for one tiering round (TableRound), and
// TableRound.Decide says, from what the round read of the lake, which
// offsets of which buckets it tiers, which retired buckets' files it deletes,
// whether it first repairs the log from the lake, and which offsets its
// snapshot and CommitTieringRound carry. Due says which tables the worker
// rounds next.
//
// All functions are safe for concurrent use; a View must not be mutated
// while a plan reads it (callers hold the catalog's read lock).
package plan
