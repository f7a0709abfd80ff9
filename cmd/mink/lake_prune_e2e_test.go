package main

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// lakeCounter reads a mink_lake_* counter from the node's /metrics.
func lakeCounter(t *testing.T, n *node, name string) uint64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindStringSubmatch(scrape(t, n.admin))
	if m == nil {
		t.Fatalf("/metrics has no %s", name)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return uint64(v)
}

// TestLakeStatisticsPruning: with --disable-sql-mirrors, selective queries
// (a range on a time column that grows with the rows, a point filter on
// the id, with constants and parameters) over a table tiered in three
// rounds plus rows still in the streams return exactly the matching rows,
// and /metrics shows lake files skipped; an unselective query reads them
// all.
func TestLakeStatisticsPruning(t *testing.T) {
	n := startLakeNode(t, t.TempDir(), true)
	conn := connect(t, n.pgURL(), pgx.QueryExecModeCacheStatement)
	mustExec(t, conn, "CREATE TABLE ev (id bigint NOT NULL, ts timestamptz, tag text) WITH (buckets = 2)")
	base := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)
	const perRound = 400
	next := 0
	insert := func() {
		var b strings.Builder
		b.WriteString("INSERT INTO ev VALUES ")
		for i := range perRound {
			if i > 0 {
				b.WriteString(", ")
			}
			id := next + i
			tag := fmt.Sprintf("'t%05d'", id)
			if id%10 == 0 {
				tag = "NULL"
			}
			fmt.Fprintf(&b, "(%d, '%s', %s)", id, base.Add(time.Duration(id)*time.Second).Format("2006-01-02 15:04:05+00"), tag)
		}
		mustExec(t, conn, b.String())
		next += perRound
	}
	for range 3 {
		insert()
		tierNow(t, n, "ev")
	}
	insert() // in the streams only
	ids := func(sql string, args ...any) []int64 {
		t.Helper()
		rows, err := conn.Query(context.Background(), sql, args...)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		out, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return out
	}
	seq := func(from, to int, skip func(int) bool) []int64 {
		var out []int64
		for i := from; i < to; i++ {
			if skip == nil || !skip(i) {
				out = append(out, int64(i))
			}
		}
		return out
	}
	read0, pruned0 := lakeCounter(t, n, "mink_lake_files_read_total"), lakeCounter(t, n, "mink_lake_files_pruned_total")
	for _, c := range []struct {
		sql  string
		args []any
		want []int64
	}{
		{"SELECT id FROM ev WHERE ts >= '2024-03-01 00:07:00+00' AND ts < '2024-03-01 00:08:00+00' ORDER BY id", nil, seq(420, 480, nil)},
		{"SELECT id FROM ev WHERE ts BETWEEN $1 AND $2 ORDER BY id", []any{base.Add(100 * time.Second), base.Add(104 * time.Second)}, seq(100, 105, nil)},
		{"SELECT id FROM ev WHERE id = $1", []any{int64(777)}, []int64{777}},
		{"SELECT id FROM ev WHERE id = 1399", nil, []int64{1399}}, // a stream row
		{"SELECT id FROM ev WHERE tag IN ('t00005', 't00805') ORDER BY id", nil, []int64{5, 805}},
		{"SELECT id FROM ev WHERE tag IS NULL AND id < 30 ORDER BY id", nil, []int64{0, 10, 20}},
	} {
		if got := ids(c.sql, c.args...); !slices.Equal(got, c.want) {
			t.Fatalf("%s %v: %v, want %v", c.sql, c.args, got, c.want)
		}
	}
	read1, pruned1 := lakeCounter(t, n, "mink_lake_files_read_total"), lakeCounter(t, n, "mink_lake_files_pruned_total")
	if pruned1 <= pruned0 || read1-read0 >= pruned1-pruned0 {
		t.Fatalf("selective queries: %d lake files read, %d pruned; want most pruned", read1-read0, pruned1-pruned0)
	}
	if got := ids("SELECT id FROM ev ORDER BY id"); !slices.Equal(got, seq(0, next, nil)) {
		t.Fatalf("whole table: %d rows, want %d", len(got), next)
	}
	read2, pruned2 := lakeCounter(t, n, "mink_lake_files_read_total"), lakeCounter(t, n, "mink_lake_files_pruned_total")
	if read2-read1 < 3 || pruned2 != pruned1 {
		t.Fatalf("whole table: %d lake files read, %d pruned; want every file (at least 3) read", read2-read1, pruned2-pruned1)
	}
	t.Logf("selective: %d files read, %d pruned; whole table: %d files", read1-read0, pruned1-pruned0, read2-read1)
}
