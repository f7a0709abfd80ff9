// Package catalog owns the metadata log of a mink cluster: the records that
// make up the log (records.go), the view they build (view.go), the
// deterministic state machine that applies one to the other
// (statemachine.go), their encodings (encoding.go,
// docs/format/metadata-log.md), and the driver and backends that append,
// tail and snapshot the log, with node liveness and the coordinator lease.
//
// # The state machine
//
// All cluster state that matters for correctness is the View obtained by
// applying the log, in order, from NewView. A proposal is an append; whether
// it takes effect is decided when it is applied: Apply(view, index, record)
// accepts the record and mutates the view, or rejects it with a reason
// (Outcome.Err wraps ErrStaleEpoch, ErrFenced, ErrHeldBy, ErrExists,
// ErrNotFound, ErrGap or ErrInvalid) and leaves the view as it was, apart from
// View.Index. The acceptance rule of every record is in its doc comment and in
// docs/format/metadata-log.md.
//
// Apply is pure: no I/O, no goroutines, no clock, no randomness, no
// dependence on map iteration order. Every node that applies the same log
// prefix holds an identical view (EncodeView gives identical bytes) and
// computes identical outcomes, so a proposer can read its outcome on any node.
// A View is not safe for concurrent use while Apply mutates it; Clone gives an
// independent copy. Records that act for a node, a bucket or the coordinator
// carry the epoch they act under, and Apply rejects them when it is not
// current: stale actors are fenced by the log, not by nodes agreeing among
// themselves.
//
// Records are encoded as a small binary header and a JSON body, view
// snapshots likewise; decoders reject unknown versions and kinds and ignore
// unknown JSON fields.
//
// # The driver and its backends
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
// Every SnapshotEvery entries the snapshot goroutine saves the view (the
// first node to do so wins); the Log then drops the entries older than the
// previous snapshot. Close stops the three goroutines (tail, append,
// snapshot) and waits. All Catalog methods are safe for concurrent use; Read
// runs its function under the view's read lock.
//
// Log holds bytes only. EtcdLog keeps it in etcd (docs/metadata.md: key
// layout, chunked snapshots, truncation, compaction, limits); MemLog keeps it
// in memory for tests, with fault injection. Node liveness (EtcdLiveness,
// MemLiveness: one leased key per live node) and the coordinator lease
// (EtcdElection, MemElection) are not in the log. A LivenessSession, a
// LiveCache and a Leadership each own goroutines that Revoke, Close and
// Resign stop. internal/embedetcd runs a single-member etcd in the process.
package catalog
