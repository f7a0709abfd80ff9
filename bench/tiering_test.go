package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"
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

// TestRunTieringLag runs the lag benchmark for a moment; it measures nothing
// useful but checks that every committed row was tiered or counted behind.
func TestRunTieringLag(t *testing.T) {
	rep, err := MeasureTieringLag(t.Context(), TieringLagConfig{Dir: t.TempDir(), Rate: 2000, Duration: 2500 * time.Millisecond, Freshness: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	WriteTieringLagTable(&out, rep)
	t.Log("\n" + out.String())
	tiered := int64(len(rep.Lags)) * 200
	if rep.Rounds == 0 || tiered+rep.Behind != rep.Rows {
		t.Fatalf("%d rounds; %d rows committed, %d tiered + %d behind", rep.Rounds, rep.Rows, tiered, rep.Behind)
	}
}

// TestRunLakeCompact runs the compaction benchmark on a small table so it
// stays compiled and working; it measures nothing useful but checks that
// the compaction replaced the rounds' files.
func TestRunLakeCompact(t *testing.T) {
	rep, err := MeasureLakeCompact(t.Context(), LakeCompactConfig{Dir: t.TempDir(), Rows: 20_000, Rounds: 20, Buckets: 2})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	WriteLakeCompactTable(&out, rep)
	t.Log("\n" + out.String())
	if c := rep.Compact; c.FilesBefore != 40 || c.FilesAfter != 2 || !c.Committed || rep.DuckDBBytes <= 0 {
		t.Errorf("report: %+v", rep)
	}
}
