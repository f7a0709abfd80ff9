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

// The coordinator's garbage collection deletes trimmed WAL objects: after
// writes are flushed to stream objects, the WAL shrinks to what is not yet
// committed (and a node's own live WAL keeps its newest objects), while the
// rows stay readable.
func TestGarbageCollectionOfTrimmedWAL(t *testing.T) {
	n := minktest.Start(t, minktest.Options{Tweak: func(c *server.Config) {
		c.GCInterval = 100 * time.Millisecond
		c.GCDelay = 0
	}})
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
	walDir := filepath.Join(n.Config.DataDir, "objects", "wal")
	countWAL := func() int {
		count := 0
		filepath.Walk(walDir, func(path string, info os.FileInfo, err error) error {
			if err == nil && !info.IsDir() && !strings.HasPrefix(info.Name(), ".") {
				count++
			}
			return nil
		})
		return count
	}
	before := countWAL()
	if before < 10 {
		t.Fatalf("only %d WAL objects after 30 inserts", before)
	}
	deadline := time.Now().Add(20 * time.Second)
	for countWAL() > before/3 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if after := countWAL(); after > before/3 {
		t.Fatalf("WAL objects: %d before, %d after flush and GC", before, after)
	}
	var count int64
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM g").Scan(&count); err != nil || count != 3000 {
		t.Fatalf("rows after GC: %d %v", count, err)
	}
}
