// Package kv is the KV tablet of a primary-key bucket (DESIGN.md §7): the
// storage engine holding the current row of every key, the changelog that
// the bucket's stream carries, snapshots of the tablet in the object store,
// and restore.
//
//   - Codec encodes primary keys (order-preserving) and rows (compact,
//     per row) of one table schema, and changelog entries (one Arrow record
//     batch per stream entry, with a _change_type column). It and the
//     record and write types are kv/kvcodec's, which has no storage engine
//     and which the Go client uses; kv re-exports them.
//   - Changes turns writes (insert, insert-if-absent, upsert, update,
//     delete) into changelog records (+I, -U/+U, -D) by reading the current
//     rows. Pending is the leader's write-side overlay that lets it compute
//     the next batch while earlier appends are unacknowledged.
//   - Tablet, on pebble, applies acknowledged records (Apply) together with
//     the offset they reach, serves Get and consistent scans (Reader,
//     RecordReader), and uploads snapshots (Snapshot). It is a cache that can
//     always be rebuilt: nothing lives only in it. Its History names the
//     leader epoch it was last opened at, so that a bucket's owner can
//     reopen it in place after a restart (Open) when the changelog is
//     provably the one it counted in.
//   - Restore rebuilds a tablet from the newest usable retained snapshot;
//     the caller replays the changelog from its offset. Garbage lists the
//     snapshot objects no retained snapshot needs.
//
// The write path of the bucket's leader:
//
//	records, err := pending.Changes(codec, writes) // read current rows
//	payload, err := codec.EncodeChanges(records)   // one stream entry
//	p, err := stream.AppendAsync(ctx, payload, uint32(len(records)))
//	base, err := p.Wait(ctx)                        // acknowledged
//	pending.Apply(records, base+uint64(len(records))) // now readers see it
//
// Opening the bucket:
//
//	t, res, err := kv.Restore(ctx, store, dir, kv.RestoreOptions{Snapshots: bucket.Snapshots, …})
//	for each stream entry e from res.LogOffset on: t.ApplyEntry(codec, e.Offset, e.Count, e.Payload)
//
// Snapshotting (periodically, on the leader):
//
//	res, err := t.Snapshot(ctx, store, kv.SnapshotOptions{LeaderEpoch: …, Retained: bucket.Snapshots})
//	outcome, err := catalog.Propose(ctx, res.Record)      // CommitKVSnapshot
//
// Goroutines: pebble's background goroutines belong to the Tablet and stop
// at Close. Snapshot and Restore run bounded transfer goroutines that end
// before they return. Concurrency rules are on each type.
//
// Formats (keys, rows, changelog entries, snapshot objects and manifest) are
// in docs/format/kv.md.
package kv
