// Package server is one mink node: it turns a Config into running listeners
// and background loops, and owns their lifecycle. It owns the node's wiring
// (the data directory lock, the embedded or external etcd, the object store,
// the metadata log, liveness and the coordinator election, the bucket
// manager, the SQL, Flight, Kafka and admin HTTP listeners, TLS and access
// control), the node's registration and re-registration, the coordinator
// role while the node holds the lease, and the admin API (cluster status,
// rebalance, tiering status and runs, metrics).
//
// # Lifecycle
//
// New validates the config, takes the data directory lock, starts or
// connects to etcd, opens the object store and the metadata log
// (metalog.Catalog), registers the node under a new node epoch, starts the
// liveness lease and the bucket manager, then the listeners, and returns
// once every listener is up. On an error it stops what it started. Close
// stops the listeners, hands the buckets over cleanly (flush, commit, close
// their streams) while the heartbeat still runs, cancels and waits for every
// goroutine, then revokes the lease and closes the metadata log, etcd, the
// object store and the lock, in that order. Close is safe to call more than
// once; the accessors (Catalog, Buckets, NodeEpoch, …) are safe for
// concurrent use.
//
// # Goroutines
//
// Every goroutine below is owned by the Server and stopped by Close:
//
//   - one per listener (admin, SQL, Flight, and Kafka with --kafka-addr),
//     serving until it is closed;
//   - heartbeat: keeps the liveness lease; when the lease is lost or the
//     node's epoch is fenced it registers again under a new epoch and
//     restarts the bucket manager;
//   - campaign: runs for the coordinator lease for the life of the node.
//     While it holds the lease at a coordinator epoch, coordinate (one
//     goroutine per lease) proposes assignments and failovers on every view
//     change, live-set change and coordinator tick, and runs the lifecycle
//     loops beside it: garbage collection of stream and KV snapshot objects,
//     retention (retain) and the tiering worker (tieringWorker.run, with its
//     lake maintenance loop). They all stop when the lease is lost or the
//     epoch turns out stale.
//
// The coordinator's decisions are package plan's pure functions of the view,
// the live nodes and the time (plan.Assign, plan.Failover, plan.Rebalance,
// plan.Trims, plan.PartitionDrops, plan.RetiredCloses, plan.Due); this
// package reads the view, calls them and proposes their records. The bucket
// manager (package buckets) starts its own goroutines; the tiering rounds
// themselves are package tiering's.
package server
