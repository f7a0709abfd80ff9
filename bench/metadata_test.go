package bench

import (
	"bytes"
	"strings"
	"testing"
)

// TestRunMetadata runs the metadata benchmark at a tiny size so it stays
// compiled and working; it measures nothing useful.
func TestRunMetadata(t *testing.T) {
	var out bytes.Buffer
	cfg := MetadataConfig{Dir: t.TempDir(), Proposals: 24, Concurrency: []int{1, 4}, SnapshotEvery: 10}
	if err := RunMetadata(t.Context(), &out, cfg); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	rows := 0
	for line := range strings.SplitSeq(out.String(), "\n") {
		if strings.HasPrefix(line, "| propose") || strings.HasPrefix(line, "| raw") {
			rows++
		}
	}
	if rows != 4 {
		t.Fatalf("table has %d rows, want 4:\n%s", rows, out.String())
	}
}
