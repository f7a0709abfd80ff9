// Package metalog is the driver of the metadata log: it appends records to a
// Log, tails it, applies every entry to a node's live view with catalog.Apply,
// and saves view snapshots. It also names the other two things nodes agree on
// outside the log: node liveness (Liveness) and the coordinator lease
// (Election). Every interface has an in-memory implementation here, MemLog
// with fault injection (AppendFault), MemLiveness and MemElection with
// Expire; the etcd implementations are in metalog/etcdlog, the only package
// that imports etcd, and metalogtest checks any Log against the contract.
//
// # The Catalog
//
// A Catalog (catalog.go) is a node's copy of the log. Open loads the latest
// view snapshot from a Log, replays the entries after it, and returns once it
// has caught up with the head; from then on its tail goroutine applies every
// new entry to the live view. A record is applied exactly once, in log order,
// on every node, across restarts: a view is only ever loaded from a snapshot
// of the view at index n and then tailed from n+1. Propose wraps the record
// in an envelope with a random 128-bit proposal id, hands it to the append
// goroutine (which groups the proposals that queue up meanwhile into one
// AppendBatch), and returns the outcome once the tail goroutine has applied
// the entry. After an ambiguous append (a timeout, a lost response) it
// searches the log for its proposal id before appending again, so a record
// is never appended twice and never reported with an outcome nobody saw.
// ProposeGuarded appends only while a Guard holds (Leadership.Guard: the
// coordinator lease), checked atomically with the append by a GuardedLog.
// Every SnapshotEvery entries the snapshot goroutine saves the view (the
// first node to do so wins); the Log then drops the entries older than the
// previous snapshot.
//
// # Goroutines and concurrency
//
// A Catalog starts three goroutines (tail, append, snapshot); Close stops
// them and waits. All Catalog methods are safe for concurrent use; Read runs
// its function under the view's read lock. A LiveCache, a Leadership and a
// LivenessSession each own what keeps them current (a watch, a lease
// keepalive), which Close, Resign and Revoke stop. The Log, Liveness and
// Election implementations are safe for concurrent use.
package metalog
