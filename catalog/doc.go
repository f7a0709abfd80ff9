// Package catalog is the metadata log's state machine: the records that make
// up the log (records.go, roles.go), the view they build (view.go), the
// deterministic function that applies one to the other (statemachine.go,
// with the rules of each kind of record in apply_nodes.go, apply_tables.go,
// apply_altertable.go, apply_sequence.go, apply_buckets.go,
// apply_streams.go, apply_tiering.go, apply_groups.go and apply_roles.go,
// and the view's invariants in invariants.go), and their encodings
// (encoding.go, docs/format/metadata-log.md). The driver that appends, tails
// and snapshots the log is package metalog; its etcd backends are
// metalog/etcdlog.
//
// # The state machine
//
// All cluster state that matters for correctness is the View obtained by
// applying the log, in order, from NewView. A proposal is an append; whether
// it takes effect is decided when it is applied: Apply(view, index, record)
// accepts the record and mutates the view, or rejects it with a reason
// (Outcome.Err wraps ErrStaleEpoch, ErrFenced, ErrHeldBy, ErrExists,
// ErrNotFound, ErrGap, ErrSequenceExhausted, ErrInUse or ErrInvalid) and
// leaves the view as it was, apart from View.Index. The acceptance rule of
// every record is in its doc comment and in docs/format/metadata-log.md, and
// the data-driven scripts in testdata/statemachine exercise every kind
// (syntax: catalogtest.ParseRecord).
//
// Apply is pure: no I/O, no goroutines, no clock, no randomness, no
// dependence on map iteration order. Every node that applies the same log
// prefix holds an identical view (EncodeView gives identical bytes) and
// computes identical outcomes, so a proposer can read its outcome on any node.
// Records that act for a node, a bucket or the coordinator carry the epoch
// they act under, and Apply rejects them when it is not current: stale actors
// are fenced by the log, not by nodes agreeing among themselves.
//
// Records are encoded as a small binary header and a JSON body, view
// snapshots likewise; decoders reject unknown versions and kinds and ignore
// unknown JSON fields.
//
// The package starts no goroutines. A View is not safe for concurrent use
// while Apply mutates it; Clone gives an independent copy, and the View
// methods that only read it may run concurrently with each other.
package catalog
