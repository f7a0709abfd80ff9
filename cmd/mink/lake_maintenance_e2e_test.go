package main

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/objstore"
	"github.com/minkdb/mink/tiering"
)

// startMaintNode starts a single node with a fast lifecycle loop (GC every
// second, 2 s delay), tiering only on request (freshness 1h), and extra
// flags.
func startMaintNode(t *testing.T, dataDir string, extra ...string) *node {
	t.Helper()
	var n *node
	for try := 0; ; try++ {
		n = newNode(t, nodeOpts{dataDir: dataDir, leaseTTL: "3s",
			extra: append([]string{"--coordinator-tick", "200ms", "--tiering-freshness", "1h", "--gc-interval", "1s", "--gc-delay", "2s"}, extra...)})
		if distinctPorts(n.args) || try == 10 {
			break
		}
	}
	n.start()
	n.waitHealthy()
	n.waitSQL()
	return n
}

// lakeObjects counts the objects stored under a table's lake.
func lakeObjects(t *testing.T, dataDir string, id catalog.TableID) int {
	t.Helper()
	store, err := objstore.NewDir(filepath.Join(dataDir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := store.List(context.Background(), tiering.LakePrefix(id))
	if err != nil {
		t.Fatal(err)
	}
	return len(objs)
}

// TestLakeCompactionExpiryAndDrop: eight rounds leave eight small lake files
// per bucket (compaction off). Restarted with compaction on, the lifecycle
// loop compacts them into one file per bucket: the rows read through pgx
// (lake files read directly, no mirrors) and through iceberg-go are
// unchanged. After more rounds the snapshots holding the small files expire
// (lake_snapshot_retention = '0s') and the store keeps only the files the
// lake uses. The lake of a dropped table is deleted, and `mink tiering
// status` does not show the table.
func TestLakeCompactionExpiryAndDrop(t *testing.T) {
	// Self-contained (one node of its own, no timing it depends on): it
	// runs beside another such test, which keeps make test in its budget.
	t.Parallel()
	dataDir := t.TempDir()
	n := startMaintNode(t, dataDir, "--lake-compact-files", "0")
	conn := connect(t, n.pgURL(), pgx.QueryExecModeSimpleProtocol)
	if _, err := conn.Exec(context.Background(), "CREATE TABLE bad (id bigint) WITH (lake_snapshot_retention = '-1h')"); err == nil ||
		!strings.Contains(err.Error(), "lake_snapshot_retention") {
		t.Fatalf("a negative lake_snapshot_retention: %v", err)
	}
	mustExec(t, conn, "CREATE TABLE events (id bigint NOT NULL, msg text, ts timestamptz) WITH (buckets = 2, lake_snapshot_retention = '0s')")
	total := 0
	batch := func() {
		// Two statements: one per bucket (rows of a keyless statement go
		// to one bucket, the next statement to the next).
		insertIDs(t, conn, "events", total, total+50, false)
		insertIDs(t, conn, "events", total+50, total+100, false)
		total += 100
		tierNow(t, n, "events")
	}
	for range 8 {
		batch()
	}
	id := tableTiering(t, tieringStatus(t, n), "events").ID
	stored, live := lakeDataFiles(t, filepath.Join(dataDir, "objects"), id)
	if live != 16 || stored != 16 {
		t.Fatalf("after 8 rounds without compaction: %d data files live, %d stored; want 16", live, stored)
	}
	conn.Close(context.Background())
	n.stop()

	n = startMaintNode(t, dataDir, "--lake-compact-files", "4", "--disable-sql-mirrors")
	conn = connect(t, n.pgURL(), pgx.QueryExecModeSimpleProtocol)
	waitFor(t, 60*time.Second, "the lifecycle loop to compact the lake", func() bool {
		_, live = lakeDataFiles(t, filepath.Join(dataDir, "objects"), id)
		return live == 2
	})
	st := tableTiering(t, tieringStatus(t, n), "events")
	if st.Tiered != 800 || st.LagRows != 0 {
		t.Fatalf("status after compaction: %+v", st)
	}
	if ids, _ := lakeIDs(t, dataDir, id); !slices.Equal(ids, seq(0, 800)) {
		t.Fatalf("iceberg-go reads %d rows after compaction, want ids 0..799", len(ids))
	}
	if ids := selectIDs(t, conn, "SELECT id FROM events ORDER BY id"); !slices.Equal(ids, seq(0, 800)) {
		t.Fatalf("SELECT returns %d rows after compaction, want ids 0..799", len(ids))
	}
	metrics := scrape(t, n.admin)
	for _, want := range []string{"mink_lake_compactions_total 1", "mink_lake_compacted_files_total 16"} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("/metrics has no line %q", want)
		}
	}
	// Three more rounds: the snapshots before the compaction expire (the
	// newest 3 are kept) and their small files are deleted.
	for range 3 {
		batch()
	}
	waitFor(t, 60*time.Second, "the expired snapshots' files to be deleted", func() bool {
		stored, live = lakeDataFiles(t, filepath.Join(dataDir, "objects"), id)
		return stored == live
	})
	if live != 2+2*3 {
		t.Fatalf("%d live data files after compaction and 3 rounds, want 8", live)
	}
	if ids, _ := lakeIDs(t, dataDir, id); !slices.Equal(ids, seq(0, total)) {
		t.Fatalf("iceberg-go reads %d rows after expiry, want %d", len(ids), total)
	}
	if ids := selectIDs(t, conn, "SELECT id FROM events ORDER BY id"); !slices.Equal(ids, seq(0, total)) {
		t.Fatalf("SELECT returns %d rows after expiry, want %d", len(ids), total)
	}

	// A dropped table's lake goes.
	mustExec(t, conn, "CREATE TABLE gone (id bigint NOT NULL, msg text, ts timestamptz)")
	insertIDs(t, conn, "gone", 0, 30, false)
	tierNow(t, n, "gone")
	goneID := tableTiering(t, tieringStatus(t, n), "gone").ID
	if lakeObjects(t, dataDir, goneID) == 0 {
		t.Fatal("the table to drop has no lake")
	}
	mustExec(t, conn, "DROP TABLE gone")
	waitFor(t, 60*time.Second, "the dropped table's lake to be deleted", func() bool {
		return lakeObjects(t, dataDir, goneID) == 0
	})
	for _, tt := range tieringStatus(t, n).Tables {
		if tt.Table == "gone" || tt.ID == goneID {
			t.Fatalf("mink tiering status shows the dropped table: %+v", tt)
		}
	}
	if ids := selectIDs(t, conn, "SELECT id FROM events ORDER BY id"); !slices.Equal(ids, seq(0, total)) {
		t.Fatalf("SELECT of the other table returns %d rows, want %d", len(ids), total)
	}
}
