package bench

import (
	"bytes"
	"strings"
	"testing"
)

// TestRunFlightSQL runs the benchmark with a few thousand rows so it stays
// compiled and working; it measures nothing useful.
func TestRunFlightSQL(t *testing.T) {
	rep, err := MeasureFlightSQL(t.Context(), FlightSQLConfig{Dir: t.TempDir(), Rows: 6000, ChunkRows: 2500, Runs: 1})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	WriteFlightSQLTable(&out, rep)
	t.Log("\n" + out.String())
	if len(rep.Reads) != 3 {
		t.Fatalf("%d reads measured", len(rep.Reads))
	}
	for _, r := range rep.Reads {
		if r.Rows != 6000 || r.Bytes <= 0 || r.Elapsed <= 0 {
			t.Errorf("%+v", r)
		}
	}
	if !strings.Contains(out.String(), "Flight SQL") {
		t.Error("no Flight SQL row in the table")
	}
}
