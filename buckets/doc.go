// Package buckets runs a node's buckets: the sync task that opens and closes
// them as the metadata view says, the log buckets that store Arrow record
// batches in s3stream streams, the primary-key buckets (KVBucket) that keep
// a KV tablet of the current rows and carry their changelog in the stream,
// and the errors that tell a client where a bucket is served
// (NotLeaderError, ErrUnavailable).
//
// The sync task follows the "Opening a bucket" table of the ownership spec.
// Its decisions are made by the pure function decide(view, local) → actions,
// tested exhaustively; Manager is the thin driver that carries them out. It
// runs one goroutine for the sync loop and one per bucket being opened or
// closed; Close stops them all. Manager's methods are safe for concurrent use.
//
// A primary-key bucket opens in three steps — the stream at the leader
// epoch, the tablet in <DataDir>/kv/<bucket>-<epoch> (the local tablet the
// node left at its last stop, reused if it provably holds a prefix of the
// changelog, kvreuse.go; else kv.Restore of the newest usable snapshot),
// replay of the changelog after it — and is Unavailable until the last one
// is done. When no retained snapshot is
// usable and the changelog is trimmed (retention trims it below the oldest
// retained snapshot), the tablet is loaded from the lake at the tiered
// offset instead (Config.KVLake), or, without a lake, the open fails with
// ErrStateLost and is retried. Each open bucket runs an applier
// goroutine (acknowledged appends → tablet, in stream order) and a snapshot
// loop (every Config.KVSnapshotInterval while the tablet advances). A write
// whose append fails makes the bucket close and reopen at a new leader epoch.
// KVCollector deletes the snapshot objects no retained snapshot needs; the
// coordinator runs it.
//
// Retry is the loop with which a caller waits for a bucket that is opening
// or moving (Retryable errors), pausing between tries; it starts no
// goroutine.
//
// Subpackage routing holds the row → bucket hash shared with the Go client.
package buckets
