package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunQuery runs the benchmark with a few thousand rows so it stays
// compiled and working; it measures nothing useful, but it does check that
// mink, DuckDB and PostgreSQL return the same results.
func TestRunQuery(t *testing.T) {
	withPG := postgresInstalled(t)
	cfg := QueryConfig{Dir: searchableTempDir(t), Rows: 5000, ChunkRows: 2000, Runs: 1, SkipPostgres: !withPG}
	rep, err := MeasureQuery(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	WriteQueryTable(&out, rep)
	t.Log("\n" + out.String())
	if len(rep.Results) != len(Queries) {
		t.Fatalf("%d results for %d queries", len(rep.Results), len(Queries))
	}
	for _, r := range rep.Results {
		if r.Mink <= 0 || r.DuckDB <= 0 || (withPG && r.Postgres <= 0) {
			t.Errorf("%s: times %v %v %v", r.Name, r.Mink, r.DuckDB, r.Postgres)
		}
	}
	if withPG != strings.Contains(out.String(), "| mink/PostgreSQL |") {
		t.Errorf("PostgreSQL column present = %v, want %v", !withPG, withPG)
	}
}

func TestSameResult(t *testing.T) {
	day := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)
	want := [][]any{{int64(3), 0.1 + 0.2, day, "x"}}
	for _, tc := range []struct {
		got [][]any
		ok  bool
	}{
		{[][]any{{int32(3), 0.3, day.In(time.FixedZone("x", 3600)), "x"}}, true},
		{[][]any{{int64(4), 0.3, day, "x"}}, false},
		{[][]any{{int64(3), 0.3001, day, "x"}}, false},
		{[][]any{{int64(3), 0.3, day.Add(time.Microsecond), "x"}}, false},
		{[][]any{{int64(3), 0.3, day, "y"}}, false},
		{[][]any{}, false},
	} {
		if err := sameResult(want, tc.got); (err == nil) != tc.ok {
			t.Errorf("sameResult(%v) = %v, want ok %v", tc.got, err, tc.ok)
		}
	}
}

// searchableTempDir returns t.TempDir(), made searchable by the postgres
// user that the PostgreSQL peer runs as under root (t.TempDir's
// directories are 0700).
func searchableTempDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} {
		st, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, st.Mode().Perm()|0o011); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
