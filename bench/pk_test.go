package bench

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestRunPK runs the primary-key benchmark for a second per workload so it
// stays compiled and working; it measures nothing useful, but it checks
// that mink and PostgreSQL answer the lookups alike and that every pgbench
// run completes without failed transactions.
func TestRunPK(t *testing.T) {
	if _, err := exec.LookPath("pgbench"); err != nil {
		t.Fatalf("pgbench is not installed: %v (Debian: apt-get install -y postgresql-client)", err)
	}
	withPG := postgresInstalled(t)
	var out bytes.Buffer
	cfg := PKConfig{Dir: searchableTempDir(t), Rows: 20_000, Duration: time.Second, SkipPostgres: !withPG}
	if err := RunPK(t.Context(), &out, cfg); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	for _, wl := range []string{"| point lookup | 1 |", "| point lookup | 4 |", "| upsert, 1 row | 4 |", "| upsert, 100 rows | 4 |"} {
		if !strings.Contains(out.String(), wl) {
			t.Errorf("no row %q", wl)
		}
	}
	if withPG == strings.Contains(out.String(), "not measured") {
		t.Errorf("PostgreSQL measured = %v, want %v", !withPG, withPG)
	}
}
