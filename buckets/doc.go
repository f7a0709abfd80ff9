// Package buckets runs a node's buckets: the sync task that opens and closes
// them as the metadata view says, the log buckets that store Arrow record
// batches in s3stream streams, and the errors that tell a client where a
// bucket is served (NotLeaderError, ErrUnavailable).
//
// The sync task follows the "Opening a bucket" table of the ownership spec.
// Its decisions are made by the pure function decide(view, local) → actions,
// tested exhaustively; Manager is the thin driver that carries them out. It
// runs one goroutine for the sync loop and one per bucket being opened or
// closed; Close stops them all. Manager's methods are safe for concurrent use.
//
// Subpackage routing holds the row → bucket hash shared with the Go client.
package buckets
