package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestRunRecovery runs the recovery benchmark at a tiny size so that it
// stays compiled and working; it asserts the table, not the numbers: the
// second open replays exactly the changelog written after the snapshot
// (upserts of existing keys: two records each).
func TestRunRecovery(t *testing.T) {
	var buf bytes.Buffer
	cfg := RecoveryConfig{Dir: t.TempDir(), StateBytes: 2 << 20, ChangelogBytes: 512 << 10, RowBytes: 256, BatchRows: 100}
	if err := RunRecovery(context.Background(), &buf, cfg); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.Contains(out, "| 0 MiB |") || !strings.Contains(out, " | 0 | ") || !strings.Contains(out, " | 2048 | ") {
		t.Fatalf("table:\n%s", out)
	}
}
