package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestRunRestart runs the restart benchmark at a tiny size so that it stays
// compiled and working; it asserts what the table says, not the numbers:
// both restarts with the local tablet reuse it and download nothing (the
// crash replays the upserts its tablet had not flushed: 512 rows, two
// records each), the baseline downloads the snapshot; PostgreSQL (its own
// cluster, when installed) is restarted fast and immediate, the immediate
// stop leaving WAL to replay.
func TestRunRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the mink binary")
	}
	var buf bytes.Buffer
	withPG := postgresInstalled(t)
	cfg := RestartConfig{Dir: searchableTempDir(t), SkipPostgres: !withPG, StateBytes: 4 << 20, RowBytes: 512, CopyRows: 1000, CrashBytes: 256 << 10, SnapshotInterval: time.Second}
	if err := RunRestart(context.Background(), &buf, cfg); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	t.Log(out)
	lines := strings.Split(out, "\n")
	var rows []string
	for _, l := range lines {
		if (strings.HasPrefix(l, "| clean") || strings.HasPrefix(l, "| crash")) && !strings.Contains(l, "stop -m") {
			rows = append(rows, l)
		}
	}
	if len(rows) != 3 || !strings.Contains(rows[0], "| true | 0 MiB | 0 |") || !strings.Contains(rows[1], "| true | 0 MiB | 1024 |") ||
		!strings.Contains(rows[2], "| false |") || strings.Contains(rows[2], "| false | 0 MiB |") {
		t.Fatalf("table:\n%s", out)
	}
	if !withPG {
		return
	}
	var pgRows []string
	for _, l := range lines {
		if strings.HasPrefix(l, "| clean restart (stop -m fast") || strings.HasPrefix(l, "| crash (CHECKPOINT") {
			pgRows = append(pgRows, l)
		}
	}
	if len(pgRows) != 2 || strings.Contains(pgRows[1], "| 0.0 MiB |") || !strings.Contains(out, "mink / PostgreSQL") {
		t.Fatalf("PostgreSQL table:\n%s", out)
	}
}
