package main

import (
	"fmt"
	"maps"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// reusedRE matches the log line of a primary-key bucket opened from its
// local tablet.
var reusedRE = regexp.MustCompile(`msg="primary-key bucket open" node=\d+ bucket=\d+ leader_epoch=\d+ reused_tablet=true`)

// TestPKRestartReusesTablet: a primary-key table survives a clean restart
// (SIGTERM) and a crash (SIGKILL) of its only node with the same rows, and
// both times its buckets open from their local tablets (the log says so)
// instead of downloading their snapshots again.
func TestPKRestartReusesTablet(t *testing.T) {
	dataDir := t.TempDir()
	n := startSQLNode(t, dataDir)
	conn := connect(t, n.pgURL(), pgx.QueryExecModeCacheStatement)
	mustExec(t, conn, "CREATE TABLE pkr (id bigint PRIMARY KEY, v bigint) WITH (buckets = 2)")
	model := map[int64]int64{}
	var values []string
	for i := int64(0); i < 400; i++ {
		values = append(values, fmt.Sprintf("(%d, %d)", i, i*10))
		model[i] = i * 10
	}
	mustExec(t, conn, "INSERT INTO pkr VALUES "+strings.Join(values, ", "))
	mustExec(t, conn, "UPDATE pkr SET v = v + 1 WHERE id < 50")
	mustExec(t, conn, "DELETE FROM pkr WHERE id >= 390")
	for i := int64(0); i < 400; i++ {
		switch {
		case i < 50:
			model[i]++
		case i >= 390:
			delete(model, i)
		}
	}
	check := func(when string, want map[int64]int64) {
		t.Helper()
		if got := readKV(t, conn, "SELECT id, v FROM pkr"); !maps.Equal(got, want) {
			t.Fatalf("%s: %d rows, want %d: %v", when, len(got), len(want), sortedKV(got))
		}
	}
	check("before the restarts", model)

	restart := func(how string) {
		t.Helper()
		conn.Close(t.Context())
		if how == "SIGTERM" {
			n.stop()
		} else {
			n.kill()
		}
		n.start()
		n.waitHealthy()
		n.waitSQL()
		conn = connect(t, n.pgURL(), pgx.QueryExecModeCacheStatement)
		// A point lookup by key goes to the tablet.
		var v int64
		if err := conn.QueryRow(t.Context(), "SELECT v FROM pkr WHERE id = 7").Scan(&v); err != nil || v != model[7] {
			t.Fatalf("after %s: point lookup: %d, %v; want %d", how, v, err, model[7])
		}
		check("after "+how, model)
		if got := len(reusedRE.FindAllString(n.log(), -1)); got != 2 {
			t.Fatalf("after %s: %d of the 2 buckets opened from their local tablet; log:\n%s", how, got, n.log())
		}
	}
	restart("SIGTERM")
	mustExec(t, conn, "INSERT INTO pkr VALUES (1000, 1), (1001, 2) ON CONFLICT (id) DO UPDATE SET v = excluded.v")
	mustExec(t, conn, "DELETE FROM pkr WHERE id = 3")
	model[1000], model[1001] = 1, 2
	delete(model, 3)
	restart("SIGKILL")
}
