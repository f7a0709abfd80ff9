// Package metalogtest is test support for implementations of metalog.Log and
// for tests of a metalog.Catalog over them: LogConformance checks the Log
// contract (dense indexes, atomic batches, tailing, snapshots and
// truncation) against a fresh log per subtest, and CheckSnapshot and
// CheckTail check one log's state. The helpers in catalog.go (OpenCatalog,
// Options, CreateTable, ApplyLog, WaitFor, CheckLeader, …) serve the tests
// that metalog runs against its in-memory implementations and
// metalog/etcdlog runs again against etcd. It starts no goroutines of its
// own beyond the Tail calls it makes and waits for.
package metalogtest
