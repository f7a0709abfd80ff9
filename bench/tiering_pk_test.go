package bench

import (
	"bytes"
	"strings"
	"testing"
)

// TestRunTieringPK runs the primary-key tiering benchmark on a few thousand
// keys so it stays compiled and working; it measures nothing useful.
func TestRunTieringPK(t *testing.T) {
	rep, err := MeasureTieringPK(t.Context(), TieringPKConfig{Dir: t.TempDir(), Keys: 4000, Changes: 400, Rounds: 2})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	WriteTieringPKTable(&out, rep)
	t.Log("\n" + out.String())
	if len(rep.Rounds) != 2 || rep.Load.ParquetWritten <= 0 || rep.Load.ParquetRead != 0 {
		t.Fatalf("report: %+v", rep)
	}
	for i, r := range rep.Rounds {
		// Every round rewrites every bucket (changes are uniform): it reads
		// back the files it replaces and writes about as much.
		if r.ParquetRead <= 0 || r.ParquetWritten <= 0 || r.ChangelogBytes <= 0 || r.Changes < 400 {
			t.Errorf("round %d: %+v", i+1, r)
		}
	}
	if !strings.Contains(out.String(), "write amplification") {
		t.Errorf("table:\n%s", out.String())
	}
}
