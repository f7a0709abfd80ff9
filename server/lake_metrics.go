package server

import (
	"github.com/prometheus/client_golang/prometheus"
)

var (
	lakeFilesReadDesc = prometheus.NewDesc("mink_lake_files_read_total",
		"Lake data files this node's SQL scans read (the union read of tiered tables).", nil, nil)
	lakeFilesPrunedDesc = prometheus.NewDesc("mink_lake_files_pruned_total",
		"Lake data files a scan skipped by their column bounds (statistics pruning of the WHERE clause).", nil, nil)
	lakeRowGroupsReadDesc = prometheus.NewDesc("mink_lake_row_groups_read_total",
		"Row groups that filtered SQL scans read of the lake files they read.", nil, nil)
	lakeRowGroupsPrunedDesc = prometheus.NewDesc("mink_lake_row_groups_pruned_total",
		"Row groups of the lake files filtered SQL scans read that they skipped by their Parquet statistics.", nil, nil)
)

// lakeReadCollector exports the SQL lake reader's counters.
type lakeReadCollector struct{ s *Server }

func (c lakeReadCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- lakeFilesReadDesc
	ch <- lakeFilesPrunedDesc
	ch <- lakeRowGroupsReadDesc
	ch <- lakeRowGroupsPrunedDesc
}

func (c lakeReadCollector) Collect(ch chan<- prometheus.Metric) {
	lr := c.s.lakeReader.Load()
	if lr == nil {
		return
	}
	st := lr.Stats()
	ch <- prometheus.MustNewConstMetric(lakeFilesReadDesc, prometheus.CounterValue, float64(st.FilesRead))
	ch <- prometheus.MustNewConstMetric(lakeFilesPrunedDesc, prometheus.CounterValue, float64(st.FilesPruned))
	ch <- prometheus.MustNewConstMetric(lakeRowGroupsReadDesc, prometheus.CounterValue, float64(st.RowGroupsRead))
	ch <- prometheus.MustNewConstMetric(lakeRowGroupsPrunedDesc, prometheus.CounterValue, float64(st.RowGroupsPruned))
}
