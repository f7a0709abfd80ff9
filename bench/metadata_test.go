package bench

import (
	"bytes"
	"flag"
	"strings"
	"testing"
)

var metadataFull = flag.Bool("metadata.full", false,
	"TestRunMetadata: run the metadata benchmark at its default size (2000 proposals at 1 and 16 proposers) and print the table")

// TestRunMetadata runs the metadata benchmark at a tiny size so it stays
// compiled and working; it measures nothing useful. With -metadata.full it
// runs the real thing:
//
//	go test -count=1 -run TestRunMetadata -v ./bench/ -metadata.full
func TestRunMetadata(t *testing.T) {
	cfg := MetadataConfig{Dir: t.TempDir(), Proposals: 24, Concurrency: []int{1, 4}, SnapshotEvery: 10}
	if *metadataFull {
		cfg = MetadataConfig{Dir: t.TempDir()}
	}
	var out bytes.Buffer
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
