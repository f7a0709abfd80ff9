package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"time"
)

// SelectiveResult is one selective query of the lake query benchmark: the
// times, and the lake data files mink read and skipped per run.
type SelectiveResult struct {
	QueryResult
	FilesRead, FilesPruned float64
}

// SelectiveLakeQueries are queries over facts whose WHERE selects a small
// part of it by columns that grow with the rows (id, ts), so that the lake
// files' column bounds and row groups' statistics exclude most of them.
// rows is the facts table's size.
func SelectiveLakeQueries(rows int) []BenchQuery {
	n := int64(rows)
	at := func(i int64) string {
		return time.UnixMicro(factsEpochMicros + i*1_000_000).UTC().Format("'2006-01-02 15:04:05+00'")
	}
	return []BenchQuery{
		{"ts range 1%", fmt.Sprintf("SELECT count(*), sum(amount) FROM facts WHERE ts >= %s AND ts < %s", at(n/2), at(n/2+n/100))},
		{"id range 0.1% top-N", fmt.Sprintf("SELECT id, name, amount FROM facts WHERE id BETWEEN %d AND %d ORDER BY amount DESC, id LIMIT 10", n/3, n/3+n/1000)},
		{"id point", fmt.Sprintf("SELECT id, store, name, amount, ts FROM facts WHERE id = %d", n*2/3)},
	}
}

// runSelective is runInterleaved for queries, adding the lake files mink
// read and skipped per run (from the node's /metrics at admin).
func runSelective(ctx context.Context, admin string, mink, duck func(ctx context.Context, sql string) ([][]any, error), queries []BenchQuery, runs int) ([]SelectiveResult, error) {
	var out []SelectiveResult
	for _, q := range queries {
		read0, pruned0, err := lakeFileCounters(ctx, admin)
		if err != nil {
			return nil, err
		}
		res, err := runInterleaved(ctx, mink, duck, []BenchQuery{q}, runs)
		if err != nil {
			return nil, err
		}
		read1, pruned1, err := lakeFileCounters(ctx, admin)
		if err != nil {
			return nil, err
		}
		statements := float64(runs + 1)
		out = append(out, SelectiveResult{QueryResult: res[0], FilesRead: (read1 - read0) / statements, FilesPruned: (pruned1 - pruned0) / statements})
	}
	return out, nil
}

var lakeCounterRE = regexp.MustCompile(`(?m)^mink_lake_files_(read|pruned)_total (\S+)$`)

// lakeFileCounters scrapes mink_lake_files_read_total and
// mink_lake_files_pruned_total.
func lakeFileCounters(ctx context.Context, admin string) (read, pruned float64, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/metrics", nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, 0, err
	}
	found := 0
	for _, m := range lakeCounterRE.FindAllStringSubmatch(string(body), -1) {
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			return 0, 0, err
		}
		if m[1] == "read" {
			read = v
		} else {
			pruned = v
		}
		found++
	}
	if found != 2 {
		return 0, 0, fmt.Errorf("/metrics of %s lacks mink_lake_files_read_total or mink_lake_files_pruned_total", admin)
	}
	return read, pruned, nil
}

func writeSelective(w io.Writer, results []SelectiveResult) {
	fmt.Fprintln(w, "| query | lake files read / skipped per run | mink (union read) | DuckDB (Parquet) | mink/DuckDB |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|")
	logSum := 0.0
	for _, r := range results {
		ratio := float64(r.Mink) / float64(r.DuckDB)
		logSum += math.Log(ratio)
		fmt.Fprintf(w, "| %s | %.0f / %.0f | %s | %s | %.2f× |\n", r.Name, r.FilesRead, r.FilesPruned, formatLatency(r.Mink), formatLatency(r.DuckDB), ratio)
	}
	if len(results) > 0 {
		fmt.Fprintf(w, "\nmink / DuckDB on selective filters, geometric mean: **%.2f×**\n", math.Exp(logSum/float64(len(results))))
	}
}
