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
// The driver (Catalog: proposing, tailing, snapshotting) and its backends
// (Log: MemLog, EtcdLog), node liveness and the coordinator election are
// described in their own files.
package catalog
