package s3stream

import (
	"sync/atomic"
	"time"
)

// WALMetrics counts the writes of a node's WAL. One WALMetrics may serve
// the nodes a process runs one after another (one per node epoch), so
// that its counters only grow; its methods are safe for concurrent use.
type WALMetrics struct {
	writes   atomic.Uint64
	entries  atomic.Uint64
	bytes    atomic.Uint64
	failures atomic.Uint64
	// latency counts durable writes by how long they took, in the
	// buckets of WALLatencyBuckets (the last one: longer than all).
	latency   [len(WALLatencyBuckets) + 1]atomic.Uint64
	latencyNs atomic.Uint64
}

// WALLatencyBuckets are the upper bounds, in seconds, of the write
// latency histogram (WALStats.Latency).
var WALLatencyBuckets = [...]float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}

// WALStats is a snapshot of WALMetrics.
type WALStats struct {
	// Writes are the WAL objects made durable: one group commit each.
	Writes uint64
	// Entries are the appends in them, Bytes their encoded size.
	Entries, Bytes uint64
	// Failures are writes that failed and were retried (or given up when
	// the WAL was fenced or the node closed).
	Failures uint64
	// Latency[i] counts the durable writes that took at most
	// WALLatencyBuckets[i] (not cumulative); the last element those that
	// took longer. LatencySum is their total time.
	Latency    [len(WALLatencyBuckets) + 1]uint64
	LatencySum time.Duration
}

// Stats returns the counters now.
func (m *WALMetrics) Stats() WALStats {
	st := WALStats{Writes: m.writes.Load(), Entries: m.entries.Load(), Bytes: m.bytes.Load(), Failures: m.failures.Load(),
		LatencySum: time.Duration(m.latencyNs.Load())}
	for i := range m.latency {
		st.Latency[i] = m.latency[i].Load()
	}
	return st
}

// durable counts a WAL object of entries (bytes long) that took took to
// become durable.
func (m *WALMetrics) durable(entries, bytes int, took time.Duration) {
	m.writes.Add(1)
	m.entries.Add(uint64(entries))
	m.bytes.Add(uint64(bytes))
	m.latencyNs.Add(uint64(took))
	i := 0
	for i < len(WALLatencyBuckets) && took.Seconds() > WALLatencyBuckets[i] {
		i++
	}
	m.latency[i].Add(1)
}
