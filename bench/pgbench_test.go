package bench

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestRunPgbench runs the pgbench workload for a second per cell so it
// stays compiled and working; it measures nothing useful, but every run
// must complete without failed transactions, log every transaction, and
// add to the log table exactly the rows pgbench counted.
func TestRunPgbench(t *testing.T) {
	if _, err := exec.LookPath("pgbench"); err != nil {
		t.Fatalf("pgbench is not installed: %v (Debian: apt-get install -y postgresql-client)", err)
	}
	withPG := postgresInstalled(t)
	rep, err := MeasurePgbench(t.Context(), PgbenchConfig{Dir: searchableTempDir(t), Rows: 5_000, Duration: time.Second,
		Clients: []int{1, 8}, Runs: 1, SkipPostgres: !withPG})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	WritePgbenchTable(&out, rep)
	t.Log("\n" + out.String())
	for _, row := range []string{"| INSERT, 1 row | 1 |", "| INSERT, 1 row | 8 |", "| upsert, 1 row | 8 |"} {
		if !strings.Contains(out.String(), row) {
			t.Errorf("no row %q", row)
		}
	}
	for _, res := range rep.Results {
		for _, runs := range res.Systems {
			if len(runs) != 1 || runs[0].Transactions == 0 || runs[0].P99 < runs[0].Mean/10 {
				t.Errorf("%s, %d clients: runs %+v", res.Workload, res.Clients, runs)
			}
		}
	}
	if withPG && !strings.Contains(out.String(), "×**") {
		t.Errorf("no ratio to PostgreSQL in:\n%s", out.String())
	}
}
