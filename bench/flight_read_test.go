package bench

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunFlightRead runs the benchmark with a few thousand rows so it
// stays compiled and working; it measures nothing useful.
func TestRunFlightRead(t *testing.T) {
	withPG := postgresInstalled(t)
	dir := searchableTempDir(t)
	cfg := FlightReadConfig{Dir: dir, Rows: 6000, ChunkRows: 2500, Runs: 1, SkipPostgres: !withPG,
		CPUProfile: filepath.Join(t.TempDir(), "cpu.pprof")}
	rep, err := MeasureFlightRead(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	WriteFlightReadTable(&out, rep)
	t.Log("\n" + out.String())
	want := 2
	if withPG {
		want = 3
	}
	if len(rep.Reads) != want {
		t.Fatalf("%d reads measured, want %d", len(rep.Reads), want)
	}
	for _, r := range rep.Reads {
		if r.Rows != 6000 || r.Bytes <= 0 || r.Elapsed <= 0 {
			t.Errorf("%+v", r)
		}
	}
	if !strings.Contains(out.String(), "endpoint after endpoint") {
		t.Error("no one-reader Flight row in the table")
	}
}
