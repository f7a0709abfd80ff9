package server

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/minkdb/mink/catalog"
)

// tieringCounters are the worker's totals since the node started.
type tieringCounters struct {
	committed, repaired, empty, failed atomic.Uint64 // rounds by outcome
	rows, bytes, files                 atomic.Uint64
	// Lake maintenance: compaction snapshots committed, files they
	// replaced, snapshots expired, lake objects deleted.
	compactions, compactedFiles, expired, lakeDeleted atomic.Uint64
	// retiredFiles: data files of retired buckets (TRUNCATE, dropped
	// partitions) that rounds removed from the current lake snapshot.
	retiredFiles atomic.Uint64
}

var (
	tieringRoundsDesc = prometheus.NewDesc("mink_tiering_rounds_total",
		"Tiering rounds run on this node, by result: committed (a lake snapshot), repaired (recorded a lake snapshot the log had missed, nothing new), empty (nothing to tier), failed.",
		[]string{"result"}, nil)
	tieringRowsDesc     = prometheus.NewDesc("mink_tiering_rows_total", "Rows in lake snapshots committed by this node's tiering rounds.", nil, nil)
	tieringBytesDesc    = prometheus.NewDesc("mink_tiering_bytes_total", "Parquet bytes in lake snapshots committed by this node's tiering rounds.", nil, nil)
	tieringFilesDesc    = prometheus.NewDesc("mink_tiering_files_total", "Parquet files in lake snapshots committed by this node's tiering rounds.", nil, nil)
	lakeCompactionsDesc = prometheus.NewDesc("mink_lake_compactions_total", "Lake compaction snapshots committed by this node.", nil, nil)
	lakeCompactedDesc   = prometheus.NewDesc("mink_lake_compacted_files_total", "Small lake data files replaced by this node's compactions.", nil, nil)
	lakeExpiredDesc     = prometheus.NewDesc("mink_lake_snapshots_expired_total", "Lake snapshots expired by this node.", nil, nil)
	lakeDeletedDesc     = prometheus.NewDesc("mink_lake_objects_deleted_total", "Lake objects (files of failed rounds or expired snapshots, old metadata, lakes of dropped tables) deleted by this node.", nil, nil)
	lakeRetiredDesc     = prometheus.NewDesc("mink_lake_retired_files_total", "Lake data files of buckets a table no longer has (TRUNCATE, dropped partitions) that this node's tiering rounds removed from the current lake snapshot.", nil, nil)
	tieringLagDesc      = prometheus.NewDesc("mink_tiering_lag_rows",
		"Rows committed to a table's bucket streams and not yet tiered (exported by the coordinator lease holder only).",
		[]string{"table"}, nil)
)

// tieringCollector exports the tiering worker's metrics.
type tieringCollector struct{ s *Server }

func (c tieringCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{tieringRoundsDesc, tieringRowsDesc, tieringBytesDesc, tieringFilesDesc, tieringLagDesc,
		lakeCompactionsDesc, lakeCompactedDesc, lakeExpiredDesc, lakeDeletedDesc, lakeRetiredDesc} {
		ch <- d
	}
}

func (c tieringCollector) Collect(ch chan<- prometheus.Metric) {
	w := c.s.tiering
	if w == nil {
		return
	}
	n := &w.counters
	for result, v := range map[string]uint64{"committed": n.committed.Load(), "repaired": n.repaired.Load(),
		"empty": n.empty.Load(), "failed": n.failed.Load()} {
		ch <- prometheus.MustNewConstMetric(tieringRoundsDesc, prometheus.CounterValue, float64(v), result)
	}
	ch <- prometheus.MustNewConstMetric(tieringRowsDesc, prometheus.CounterValue, float64(n.rows.Load()))
	ch <- prometheus.MustNewConstMetric(tieringBytesDesc, prometheus.CounterValue, float64(n.bytes.Load()))
	ch <- prometheus.MustNewConstMetric(tieringFilesDesc, prometheus.CounterValue, float64(n.files.Load()))
	ch <- prometheus.MustNewConstMetric(lakeCompactionsDesc, prometheus.CounterValue, float64(n.compactions.Load()))
	ch <- prometheus.MustNewConstMetric(lakeCompactedDesc, prometheus.CounterValue, float64(n.compactedFiles.Load()))
	ch <- prometheus.MustNewConstMetric(lakeExpiredDesc, prometheus.CounterValue, float64(n.expired.Load()))
	ch <- prometheus.MustNewConstMetric(lakeDeletedDesc, prometheus.CounterValue, float64(n.lakeDeleted.Load()))
	ch <- prometheus.MustNewConstMetric(lakeRetiredDesc, prometheus.CounterValue, float64(n.retiredFiles.Load()))
	if w.epoch() == 0 {
		return
	}
	c.s.cat.Read(func(v *catalog.View) {
		for _, t := range v.Tables {
			if !w.policy(t.Spec).enabled {
				continue
			}
			var lag uint64
			for _, b := range v.BucketsOf(t.ID) {
				if st := v.Streams[catalog.StreamID(b)]; st != nil && st.End > t.Tiering.Offsets[b] {
					lag += st.End - t.Tiering.Offsets[b]
				}
			}
			ch <- prometheus.MustNewConstMetric(tieringLagDesc, prometheus.GaugeValue, float64(lag), v.TopicName(t))
		}
	})
}
