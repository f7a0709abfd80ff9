// Package etcdlog keeps the metadata log, node liveness and the coordinator
// lease in etcd (docs/metadata.md: key layout, chunked snapshots,
// truncation, compaction, limits). It is the only package of mink that
// imports etcd:
//
//   - Log (New) implements metalog.GuardedLog: an append is one etcd
//     transaction on the log head; NewGuard makes a metalog.Guard of etcd
//     comparisons for AppendGuarded.
//   - Liveness (NewLiveness) implements metalog.Liveness with one leased key
//     per live node.
//   - Election (NewElection) implements metalog.Election with an etcd
//     election on /<cluster>/coordinator.
//   - Dial and DialWith connect to etcd, retrying an unreachable cluster for
//     a while, and check the credentials.
//
// Everything here is safe for concurrent use. A Log starts no goroutines
// beyond the calls it serves (Tail watches until its context ends); the
// keepalive of a liveness session and the watch of a Liveness.Watch cache
// are owned by the session and the cache (metalog.LivenessSession.Revoke,
// metalog.LiveCache.Close), the goroutine that watches a held lease by the
// metalog.Leadership (Resign). internal/embedetcd runs a single-member etcd
// in the process.
package etcdlog
