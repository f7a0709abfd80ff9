// Package s3stream keeps streams on object storage: ordered sequences of
// entries at dense offsets 0, 1, 2, …, each stream opened by one node under
// one epoch at a time. It is the layer that enforces bucket ownership: a
// writer whose epoch has been superseded cannot make anything durable.
//
// Write path. A Node batches the appends of all the streams it has open into
// WAL objects wal/<node>/<node epoch>/<seq>, with consecutive seq, written
// create-only. Append returns once the WAL object holding the entry and every
// WAL object before it are durable; acknowledgements are in order. A node
// taking over a dead node's streams seals the dead node's WAL by creating the
// object at its first free seq; the old writer's create-only put of that seq
// then fails and it knows it is fenced (ErrFenced).
//
// Acknowledged entries stay in the leader's memory until the flusher writes
// them as per-stream objects streams/<stream>/<start>-<end>.<epoch>
// (create-only) and commits them with catalog.CommitStreamObjects, which the
// state machine accepts only at the stream's current epoch and only when the
// objects continue the stream without a gap. The WAL trim point then moves
// past them (catalog.CommitWALTrim) and garbage collection deletes the WAL
// objects below it.
//
// Read path. Offsets below a stream's committed end are read from stream
// objects by any node, through a local disk Cache. Offsets above it are served
// by the leader from memory.
//
// Failover replays a dead node epoch's WAL from its trim point, commits what
// each stream had not committed, seals the WAL and closes the dead node's
// streams. Every step is idempotent: running it again after a crash at any
// point finishes the job.
//
// Goroutines: a Node runs one batcher, at most MaxInflight uploaders and one
// flusher; Close stops them and waits. All exported methods are safe for
// concurrent use.
//
// Byte layouts are in docs/format/s3stream.md.
package s3stream
