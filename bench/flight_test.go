package bench

import (
	"bytes"
	"strings"
	"testing"
)

// TestRunFlight runs the benchmark with a few thousand rows so it stays
// compiled and working; it measures nothing useful.
func TestRunFlight(t *testing.T) {
	withPG := postgresInstalled(t)
	cfg := FlightConfig{Dir: searchableTempDir(t), Rows: 6000, ChunkRows: 2500, BatchRows: 1000, Writers: 3, Runs: 1, SkipPostgres: !withPG}
	rep, err := MeasureFlight(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	WriteFlightTables(&out, rep)
	t.Log("\n" + out.String())
	wantReads, wantWrites := 2, 2
	if withPG {
		wantReads, wantWrites = 3, 3
	}
	if len(rep.Reads) != wantReads || len(rep.Writes) != wantWrites {
		t.Fatalf("%d reads, %d writes measured", len(rep.Reads), len(rep.Writes))
	}
	for _, r := range append(rep.Reads, rep.Writes...) {
		if r.Rows != 6000 || r.Bytes <= 0 || r.Elapsed <= 0 {
			t.Errorf("%+v", r)
		}
	}
	if !strings.Contains(out.String(), "Flight DoGet") {
		t.Error("no Flight row in the table")
	}
}
