// Package objstore is mink's object-store seam: a small Store interface of
// get, range get, create-only put, list and delete, with no domain verbs.
// Object key layouts (WAL objects, stream objects, snapshots) belong to the
// packages that write them; this package only moves bytes.
//
// It owns four implementations:
//
//   - Dir (NewDir): a local directory, the embedded default. Create-only
//     puts stage the data in a private temp directory, fsync it, and publish
//     it with an exclusive hard link, so a reader never sees a partial object
//     and a second put of the same key fails with ErrExists.
//   - S3 (NewS3): any S3-compatible service, using If-None-Match: * for
//     create-only puts.
//   - Mem (NewMem): an in-memory store for fast unit tests.
//   - Faulty (NewFaulty): a wrapper that injects errors, latency and lost
//     responses after a successful write, and lets tests pause operations.
//
// Open builds a Store from a "file:///abs/path" or "s3://bucket/prefix" URL.
//
// Every implementation passes the conformance suite in package
// objstore/objstoretest; docs/format/objstore.md states the contract.
//
// Concurrency: every Store in this package is safe for concurrent use by
// multiple goroutines, including concurrent create-only puts of one key,
// of which exactly one succeeds. No implementation starts goroutines of its
// own (the S3 client's HTTP transport keeps idle connections, which Close
// releases).
package objstore
