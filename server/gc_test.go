package server_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/minkdb/mink/internal/minktest"
	"github.com/minkdb/mink/server"
)

// The coordinator's garbage collection deletes trimmed WAL segments: after
// writes are flushed to stream objects, the WAL shrinks to what is not yet
// committed (and a node's own live WAL keeps its newest segment), while the
// rows stay readable. After a restart every segment of the previous epoch's
// WAL goes, the last one included (its streams were closed; after a crash
// the recovery closes them, see s3stream's TestSegmentWALCrashRecovery).
func TestGarbageCollectionOfTrimmedWAL(t *testing.T) {
	dataDir := t.TempDir()
	tweak := func(c *server.Config) {
		c.GCInterval = 100 * time.Millisecond
		c.GCDelay = 0
		c.WALSegmentBytes = 4096
	}
	n := minktest.Start(t, minktest.Options{DataDir: dataDir, Tweak: tweak})
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, n.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE TABLE g (a bigint) WITH (buckets = 2)"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 30; i++ {
		if _, err := conn.Exec(ctx, "INSERT INTO g SELECT range FROM range(100)"); err != nil {
			t.Fatal(err)
		}
	}
	walDir := filepath.Join(dataDir, "objects", "wal")
	// countWAL counts the WAL's segments, and its other objects (seals and
	// fences), per node epoch directory.
	countWAL := func() (segs, others map[string]int) {
		segs, others = map[string]int{}, map[string]int{}
		filepath.Walk(walDir, func(path string, info os.FileInfo, err error) error {
			if err != nil || info.IsDir() {
				return nil
			}
			if strings.HasSuffix(info.Name(), ".seg") {
				segs[filepath.Base(filepath.Dir(path))]++
			} else {
				others[filepath.Base(filepath.Dir(path))]++
			}
			return nil
		})
		return segs, others
	}
	total := func(m map[string]int) (sum int) {
		for _, v := range m {
			sum += v
		}
		return sum
	}
	segs, _ := countWAL()
	before := total(segs)
	if before < 10 {
		t.Fatalf("only %d WAL segments after 30 inserts in 4 KiB segments", before)
	}
	deadline := time.Now().Add(20 * time.Second)
	for segs, _ := countWAL(); total(segs) > before/3 && time.Now().Before(deadline); segs, _ = countWAL() {
		time.Sleep(100 * time.Millisecond)
	}
	if segs, _ := countWAL(); total(segs) > before/3 {
		t.Fatalf("WAL segments: %d before, %d after flush and GC", before, total(segs))
	}
	var count int64
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM g").Scan(&count); err != nil || count != 3000 {
		t.Fatalf("rows after GC: %d %v", count, err)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO g SELECT range FROM range(100)"); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	oldSegs, _ := countWAL()
	n.Server.Close()

	n = minktest.Start(t, minktest.Options{DataDir: dataDir, Tweak: tweak})
	conn2, err := pgx.Connect(ctx, n.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close(ctx)
	if err := conn2.QueryRow(ctx, "SELECT count(*) FROM g").Scan(&count); err != nil || count != 3100 {
		t.Fatalf("rows after a restart: %d %v, want 3100", count, err)
	}
	deadline = time.Now().Add(20 * time.Second)
	for {
		segs, _ := countWAL()
		left := 0
		for epoch := range oldSegs {
			left += segs[epoch]
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d segments of the previous epoch's WAL are left after its recovery", left)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
