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
	FilesRead, FilesPruned, RowGroupsRead, RowGroupsPruned float64
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
		c0, err := lakeFileCounters(ctx, admin)
		if err != nil {
			return nil, err
		}
		res, err := runInterleaved(ctx, mink, duck, []BenchQuery{q}, runs)
		if err != nil {
			return nil, err
		}
		c1, err := lakeFileCounters(ctx, admin)
		if err != nil {
			return nil, err
		}
		per := func(name string) float64 { return (c1[name] - c0[name]) / float64(runs+1) }
		out = append(out, SelectiveResult{QueryResult: res[0], FilesRead: per("files_read"), FilesPruned: per("files_pruned"),
			RowGroupsRead: per("row_groups_read"), RowGroupsPruned: per("row_groups_pruned")})
	}
	return out, nil
}

var lakeCounterRE = regexp.MustCompile(`(?m)^mink_lake_((?:files|row_groups)_(?:read|pruned))_total (\S+)$`)

// lakeFileCounters scrapes the mink_lake_{files,row_groups}_{read,pruned}
// counters, by "files_read" etc.
func lakeFileCounters(ctx context.Context, admin string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, m := range lakeCounterRE.FindAllStringSubmatch(string(body), -1) {
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			return nil, err
		}
		out[m[1]] = v
	}
	if len(out) != 4 {
		return nil, fmt.Errorf("/metrics of %s lacks mink_lake_files_*_total or mink_lake_row_groups_*_total (%v)", admin, out)
	}
	return out, nil
}

func writeSelective(w io.Writer, results []SelectiveResult) {
	fmt.Fprintln(w, "| query | lake files read / skipped per statement | row groups read / skipped (of the files read) | mink (union read) | DuckDB (Parquet) | mink/DuckDB |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|")
	logSum := 0.0
	for _, r := range results {
		ratio := float64(r.Mink) / float64(r.DuckDB)
		logSum += math.Log(ratio)
		fmt.Fprintf(w, "| %s | %.0f / %.0f | %.0f / %.0f | %s | %s | %.2f× |\n", r.Name, r.FilesRead, r.FilesPruned,
			r.RowGroupsRead, r.RowGroupsPruned, formatLatency(r.Mink), formatLatency(r.DuckDB), ratio)
	}
	if len(results) > 0 {
		fmt.Fprintf(w, "\nmink / DuckDB on selective filters, geometric mean: **%.2f×**\n", math.Exp(logSum/float64(len(results))))
	}
}
