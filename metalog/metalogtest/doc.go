// Package metalogtest is test support for implementations of metalog.Log:
// LogConformance checks the Log contract (dense indexes, atomic batches,
// tailing, snapshots and truncation) against a fresh log per subtest, and
// CheckSnapshot and CheckTail check one log's state. It starts no goroutines
// of its own beyond the Tail calls it makes and waits for.
package metalogtest
