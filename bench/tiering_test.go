package bench

import (
	"bytes"
	"strings"
	"testing"
)

// TestRunTiering runs the benchmark with a few thousand rows so it stays
// compiled and working; it measures nothing useful.
func TestRunTiering(t *testing.T) {
	rep, err := MeasureTiering(t.Context(), TieringConfig{Dir: t.TempDir(), Rows: 5000, BatchRows: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	WriteTieringTable(&out, rep)
	t.Log("\n" + out.String())
	if rep.Files != 4 || rep.ParquetBytes <= 0 || rep.DuckDBBytes <= 0 || rep.StreamBytes <= 0 {
		t.Errorf("report: %+v", rep)
	}
	if !strings.Contains(out.String(), "mink tiering round") || !strings.Contains(out.String(), "DuckDB") {
		t.Errorf("table:\n%s", out.String())
	}
}
