package main

import (
	"fmt"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestTruncate: TRUNCATE of a tiered log table, a primary-key table and a
// partitioned table with rows in the lake, the stream and the KV tablets,
// as the process keeps it: the next tiering round leaves only the rows
// written after it in the current lake snapshot, as iceberg-go reads it
// (an empty lake after a TRUNCATE with nothing written after it), and the
// rows queries see hold after kill -9 and a restart. What queries see
// before and after the rounds, with the engine's mirrors and without, and
// after a clean restart, is sqlfront/testdata/logic/truncate_lake.test.
func TestTruncate(t *testing.T) {
	// Self-contained (one node of its own, no timing it depends on): it
	// runs beside another such test, which keeps make test in its budget.
	t.Parallel()
	dataDir := t.TempDir()
	n := startLakeNode(t, dataDir, false)
	conn := connect(t, n.pgURL(), pgx.QueryExecModeSimpleProtocol)
	mustExec(t, conn, "CREATE TABLE ev (id bigint NOT NULL, msg text, ts timestamptz) WITH (buckets = 2)")
	mustExec(t, conn, "CREATE TABLE kv (id bigint PRIMARY KEY, msg text, ts timestamptz) WITH (buckets = 2)")
	mustExec(t, conn, "CREATE TABLE pv (id bigint NOT NULL, msg text, ts timestamptz, d text NOT NULL) PARTITION BY LIST (d) WITH (buckets = 2)")
	insertIDs(t, conn, "ev", 0, 300, false)
	insertIDs(t, conn, "kv", 0, 100, false)
	insertIDs(t, conn, "pv", 0, 90, true)
	for _, table := range []string{"ev", "kv", "pv"} {
		tierNow(t, n, table)
	}
	insertIDs(t, conn, "ev", 300, 350, false) // stream rows after the lake
	insertIDs(t, conn, "kv", 100, 120, false)

	mustExec(t, conn, "TRUNCATE ev, kv")
	mustExec(t, conn, "TRUNCATE TABLE pv")
	same := func(stage, query, want string) {
		t.Helper()
		if got := dump(t, conn, query); got != want {
			t.Fatalf("%s: %s:\n got %.300q\nwant %.300q", stage, query, got, want)
		}
	}
	insertIDs(t, conn, "ev", 1000, 1040, false)
	insertIDs(t, conn, "kv", 5, 15, false) // keys that existed before
	insertIDs(t, conn, "pv", 2000, 2009, true)
	idsOf := func(from, to int) string {
		var s string
		for i := from; i < to; i++ {
			s += fmt.Sprintf("%d\n", i)
		}
		return s
	}
	check := func(stage string) {
		t.Helper()
		same(stage, "SELECT id FROM ev ORDER BY id", idsOf(1000, 1040))
		same(stage, "SELECT id FROM kv ORDER BY id", idsOf(5, 15))
		same(stage, "SELECT msg FROM kv WHERE id = 7", "row 7\n")
		same(stage, "SELECT count(*) FROM kv WHERE id = 50", "0\n")
		same(stage, "SELECT id FROM pv ORDER BY id", idsOf(2000, 2009))
		same(stage, "SELECT id FROM pv WHERE d = 'day-1' ORDER BY id", "2002\n2005\n2008\n")
	}
	for _, table := range []string{"ev", "kv", "pv"} {
		tierNow(t, n, table)
	}
	st := tieringStatus(t, n)
	if ids, _ := lakeIDs(t, dataDir, tableTiering(t, st, "ev").ID); !slices.Equal(ids, seq(1000, 1040)) {
		t.Fatalf("the lake of ev holds %d rows (%v…), want ids 1000..1039", len(ids), ids[:min(len(ids), 5)])
	}
	if ids, _ := lakeIDs(t, dataDir, tableTiering(t, st, "pv").ID); !slices.Equal(ids, seq(2000, 2009)) {
		t.Fatalf("the lake of pv holds %v, want ids 2000..2008", ids)
	}

	n.kill()
	n.start()
	n.waitHealthy()
	n.waitSQL()
	conn = connect(t, n.pgURL(), pgx.QueryExecModeSimpleProtocol)
	check("after kill -9 and a restart")

	// A TRUNCATE with nothing written after it empties the lake at the
	// next round.
	mustExec(t, conn, "TRUNCATE ev")
	tierNow(t, n, "ev")
	same("second TRUNCATE", "SELECT count(*) FROM ev", "0\n")
	if ids, _ := lakeIDs(t, dataDir, tableTiering(t, tieringStatus(t, n), "ev").ID); len(ids) != 0 {
		t.Fatalf("the lake of ev holds %d rows after TRUNCATE and a round, want none", len(ids))
	}
}
