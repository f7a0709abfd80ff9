package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/minkdb/mink/buckets/s3stream"
)

var (
	walWritesDesc = prometheus.NewDesc("mink_wal_writes_total",
		"WAL objects this node made durable: one group commit each (a record written and synced into a segment, or an object put).", nil, nil)
	walEntriesDesc = prometheus.NewDesc("mink_wal_entries_total",
		"Appends (log batches and KV changelog entries) in the WAL objects this node made durable.", nil, nil)
	walBytesDesc = prometheus.NewDesc("mink_wal_bytes_total",
		"Encoded bytes of the WAL objects this node made durable.", nil, nil)
	walFailuresDesc = prometheus.NewDesc("mink_wal_write_failures_total",
		"WAL writes that failed and were retried; every append waiting on one is told its outcome is unknown.", nil, nil)
	walSecondsDesc = prometheus.NewDesc("mink_wal_write_seconds",
		"How long each durable WAL write took: the write and its sync, or the put.", nil, nil)
)

// walCollector exports the WAL counters of every node epoch the process
// ran (s3stream.WALMetrics).
type walCollector struct{ s *Server }

func (c walCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- walWritesDesc
	ch <- walEntriesDesc
	ch <- walBytesDesc
	ch <- walFailuresDesc
	ch <- walSecondsDesc
}

func (c walCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.walMetrics.Stats()
	ch <- prometheus.MustNewConstMetric(walWritesDesc, prometheus.CounterValue, float64(st.Writes))
	ch <- prometheus.MustNewConstMetric(walEntriesDesc, prometheus.CounterValue, float64(st.Entries))
	ch <- prometheus.MustNewConstMetric(walBytesDesc, prometheus.CounterValue, float64(st.Bytes))
	ch <- prometheus.MustNewConstMetric(walFailuresDesc, prometheus.CounterValue, float64(st.Failures))
	buckets := make(map[float64]uint64, len(s3stream.WALLatencyBuckets))
	var cumulative uint64
	for i, le := range s3stream.WALLatencyBuckets {
		cumulative += st.Latency[i]
		buckets[le] = cumulative
	}
	ch <- prometheus.MustNewConstHistogram(walSecondsDesc, st.Writes, st.LatencySum.Seconds(), buckets)
}
