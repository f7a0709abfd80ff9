package bench

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// postgresInstalled reports whether the PostgreSQL peer can run, and says
// in the test log when it cannot.
func postgresInstalled(t *testing.T) bool {
	t.Helper()
	if _, _, err := postgresBinDir(); err != nil {
		t.Logf("PostgreSQL peer skipped: %v", err)
		return false
	}
	return true
}

// TestRunIngest runs the benchmark with a few thousand rows so it stays
// compiled and working; it measures nothing useful.
func TestRunIngest(t *testing.T) {
	withPG := postgresInstalled(t)
	cfg := IngestConfig{Dir: searchableTempDir(t), Rows: 5000, ChunkRows: 2000, SkipPostgres: !withPG}
	rep, err := MeasureIngest(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	WriteIngestTable(&out, rep)
	t.Log("\n" + out.String())
	if rep.Mink.Rows != 5000 || rep.Mink.COPYs != 3 {
		t.Errorf("mink: %d rows in %d COPYs, want 5000 in 3", rep.Mink.Rows, rep.Mink.COPYs)
	}
	if withPG {
		if rep.Postgres == nil || rep.Postgres.Rows != 5000 {
			t.Fatalf("PostgreSQL not measured: %+v %q", rep.Postgres, rep.PostgresSkipped)
		}
		if !strings.Contains(out.String(), "mink / PostgreSQL") {
			t.Errorf("no ratio in the report")
		}
	} else if !strings.Contains(out.String(), "PostgreSQL peer not measured") {
		t.Errorf("the report does not say that the peer was not measured")
	}
}

// TestStartPostgres checks the peer's lifecycle: it accepts connections
// with fsync on, and Stop ends every process and removes its directory.
func TestStartPostgres(t *testing.T) {
	if !postgresInstalled(t) {
		t.Skip("PostgreSQL is not installed")
	}
	pg, err := StartPostgres(t.Context(), searchableTempDir(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Stop()
	if !strings.HasPrefix(pg.Version, pg.Major+".") {
		t.Errorf("version %q, binaries of %s", pg.Version, pg.Major)
	}
	out, err := exec.Command("psql", pg.DSN, "-Atc", "SHOW fsync").CombinedOutput()
	if err != nil {
		t.Logf("psql: %v %s", err, out)
	} else if strings.TrimSpace(string(out)) != "on" {
		t.Errorf("fsync = %q, want on", out)
	}
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := exec.Command("psql", pg.DSN, "-Atc", "SELECT 1").Run(); err == nil {
		t.Errorf("server still answers after Stop")
	}
}
