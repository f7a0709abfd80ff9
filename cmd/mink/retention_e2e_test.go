package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/minkdb/mink/objstore"
	"github.com/minkdb/mink/server"
)

func tableBuckets(t *testing.T, n *node, table string) []server.BucketStatus {
	t.Helper()
	raw, errOut, code := runMink(t, 30*time.Second, "table", "buckets", table, "--json", "--server", n.admin)
	if code != 0 {
		t.Fatalf("mink table buckets %s: exit %d: %s", table, code, errOut)
	}
	var bs []server.BucketStatus
	if err := json.Unmarshal([]byte(raw), &bs); err != nil {
		t.Fatalf("mink table buckets --json: %v\n%s", err, raw)
	}
	return bs
}

// streamObjects lists the stream objects of a bucket in the node's store.
func streamObjects(t *testing.T, dataDir string, bucket uint64) []string {
	t.Helper()
	store, err := objstore.NewDir(filepath.Join(dataDir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := store.List(context.Background(), fmt.Sprintf("streams/%d/", bucket))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range objs {
		keys = append(keys, o.Key)
	}
	return keys
}

func selectIDs(t *testing.T, conn *pgx.Conn, sql string) []int64 {
	t.Helper()
	rows, err := conn.Query(context.Background(), sql)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return ids
}

// TestRetentionE2E: log_retention on a tiered table trims each bucket's
// stream to its tiered offset once the rows are older than the retention
// (never before they are tiered); the trimmed stream objects are deleted
// after the GC delay while the lake keeps every row; DROP TABLE makes all
// the table's stream objects garbage. With tiering off, log_retention trims
// by age alone. partition_retention drops a date partition whose day ended
// long ago and keeps today's (SELECT returns only today's rows). SELECT
// returns every row of the trimmed table (the union read of lake and
// streams).
func TestRetentionE2E(t *testing.T) {
	// Self-contained (one node of its own, no timing it depends on): it
	// runs beside another such test, which keeps make test in its budget.
	t.Parallel()
	dataDir := t.TempDir()
	n := startTieringNode(t, dataDir, "1h") // rounds only when asked
	conn := connect(t, n.pgURL(), pgx.QueryExecModeSimpleProtocol)
	mustExec(t, conn, "CREATE TABLE events (id bigint NOT NULL, msg text, ts timestamptz) WITH (buckets = 2, log_retention = '1s')")
	insertIDs(t, conn, "events", 0, 200, false)
	insertIDs(t, conn, "events", 200, 300, false)
	waitFor(t, 30*time.Second, "300 rows committed", func() bool {
		return tableTiering(t, tieringStatus(t, n), "events").End == 300
	})
	// Older than the retention, but not tiered: never trimmed.
	time.Sleep(3 * time.Second)
	for _, b := range tableBuckets(t, n, "events") {
		if b.Start != 0 || b.End == 0 {
			t.Fatalf("untiered bucket after the retention passed: %+v, want start 0", b)
		}
	}
	before := map[uint64][]string{}
	for _, b := range tableBuckets(t, n, "events") {
		before[uint64(b.Bucket)] = streamObjects(t, dataDir, uint64(b.Bucket))
		if len(before[uint64(b.Bucket)]) == 0 {
			t.Fatalf("bucket %d has no stream objects", b.Bucket)
		}
	}
	out, errOut, code := runMink(t, 60*time.Second, "tiering", "run", "--table", "events", "--wait", "--server", n.admin)
	if code != 0 {
		t.Fatalf("mink tiering run: exit %d: %s\n%s", code, errOut, out)
	}
	// Tiered and old: each stream is trimmed to its end (= its tiered offset).
	waitFor(t, 30*time.Second, "the streams trimmed to their tiered offsets", func() bool {
		for _, b := range tableBuckets(t, n, "events") {
			if b.Start != b.End {
				return false
			}
		}
		return true
	})
	text, _, _ := runMink(t, 30*time.Second, "table", "buckets", "events", "--server", n.admin)
	t.Logf("mink table buckets events:\n%s", text)
	st := tableTiering(t, tieringStatus(t, n), "events")
	if ids, _ := lakeIDs(t, dataDir, st.ID); !slices.Equal(ids, seq(0, 300)) {
		t.Fatalf("lake after the trim: %d rows, want ids 0..299", len(ids))
	}
	if got := selectIDs(t, conn, "SELECT id FROM events ORDER BY id"); !slices.Equal(got, seq(0, 300)) {
		t.Fatalf("SELECT right after the trim: %d rows, want ids 0..299", len(got))
	}
	// The trimmed objects go after the GC delay (2 s).
	waitFor(t, 30*time.Second, "the trimmed stream objects deleted", func() bool {
		for b, keys := range before {
			left := streamObjects(t, dataDir, b)
			for _, k := range keys {
				if slices.Contains(left, k) {
					return false
				}
			}
		}
		return true
	})
	// New rows are not tiered: however old they get, they stay.
	insertIDs(t, conn, "events", 300, 350, false)
	waitFor(t, 30*time.Second, "350 rows committed", func() bool {
		return tableTiering(t, tieringStatus(t, n), "events").End == 350
	})
	time.Sleep(3 * time.Second)
	var kept uint64
	for _, b := range tableBuckets(t, n, "events") {
		kept += b.End - b.Start
	}
	if kept != 50 {
		t.Fatalf("untiered rows left in the streams: %d, want 50", kept)
	}
	// SELECT still returns every row: the trimmed ones from the lake, the
	// untiered ones from the streams (the union read).
	if got := selectIDs(t, conn, "SELECT id FROM events ORDER BY id"); !slices.Equal(got, seq(0, 350)) {
		t.Fatalf("SELECT after the trim: %d rows, want ids 0..349", len(got))
	}

	// DROP TABLE: the streams leave the view and all their objects go.
	buckets := tableBuckets(t, n, "events")
	mustExec(t, conn, "DROP TABLE events")
	waitFor(t, 30*time.Second, "the dropped table's stream objects deleted", func() bool {
		for _, b := range buckets {
			if len(streamObjects(t, dataDir, uint64(b.Bucket))) != 0 {
				return false
			}
		}
		return true
	})

	// Tiering off: log_retention alone drops old rows, and SQL sees it.
	mustExec(t, conn, "CREATE TABLE raw (id bigint NOT NULL, msg text, ts timestamptz) WITH (buckets = 2, tiering = off, log_retention = '2s')")
	insertIDs(t, conn, "raw", 0, 100, false)
	waitFor(t, 30*time.Second, "raw trimmed by age", func() bool {
		var end uint64
		for _, b := range tableBuckets(t, n, "raw") {
			if b.Start != b.End {
				return false
			}
			end += b.End
		}
		return end == 100
	})
	// SQL over a table with tiering off: sqlfront's mirrors still hold the
	// trimmed rows (they assume log tables only grow); not asserted here.
	waitFor(t, 30*time.Second, "raw's trimmed stream objects deleted", func() bool {
		for _, b := range tableBuckets(t, n, "raw") {
			if len(streamObjects(t, dataDir, uint64(b.Bucket))) != 0 {
				return false
			}
		}
		return true
	})

	// partition_retention: a day that ended years ago is dropped; today's
	// partition is kept.
	today := time.Now().UTC().Format("2006-01-02")
	mustExec(t, conn, "CREATE TABLE daily (id bigint NOT NULL, d date NOT NULL) PARTITION BY LIST (d) WITH (buckets = 1, partition_retention = '24h', tiering = off)")
	mustExec(t, conn, fmt.Sprintf("INSERT INTO daily VALUES (1, '2020-01-01'), (2, '2020-01-01'), (3, '%s')", today))
	waitFor(t, 30*time.Second, "the 2020-01-01 partition dropped", func() bool {
		bs := tableBuckets(t, n, "daily")
		return len(bs) == 1 && bs[0].Partition == today
	})
	var ids []int64
	rows, err := conn.Query(context.Background(), "SELECT id FROM daily ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if rows.Err() != nil || !slices.Equal(ids, []int64{3}) {
		t.Fatalf("daily after partition retention: %v %v, want [3]", ids, rows.Err())
	}
	if strings.Contains(text, "ERROR") {
		t.Fatalf("table buckets printed an error: %s", text)
	}
}

// TestPartitionRetentionLake: partitions of a text column expire when no row
// was written to them within partition_retention. The expired partitions'
// rows leave the current lake snapshot (read with iceberg-go) as well as the
// table, the partition still written to stays, and tiering goes on working.
func TestPartitionRetentionLake(t *testing.T) {
	dataDir := t.TempDir()
	n := startTieringNode(t, dataDir, "1h")
	conn := connect(t, n.pgURL(), pgx.QueryExecModeSimpleProtocol)
	mustExec(t, conn, "CREATE TABLE clicks (id bigint NOT NULL, msg text, ts timestamptz, dt text NOT NULL) PARTITION BY LIST (dt) WITH (buckets = 1, partition_retention = '6s')")
	insertIDs(t, conn, "clicks", 0, 30, true) // day-0, day-1, day-2: 10 rows each
	out, errOut, code := runMink(t, 60*time.Second, "tiering", "run", "--table", "clicks", "--wait", "--server", n.admin)
	if code != 0 {
		t.Fatalf("mink tiering run: exit %d: %s\n%s", code, errOut, out)
	}
	id := tableTiering(t, tieringStatus(t, n), "clicks").ID
	if ids, parts := lakeIDs(t, dataDir, id); len(ids) != 30 || parts["day-1"] != 10 {
		t.Fatalf("lake before expiry: %d rows, partitions %v", len(ids), parts)
	}
	// day-0 keeps being written; day-1 and day-2 are not.
	next := 30
	waitFor(t, 60*time.Second, "day-1 and day-2 expired", func() bool {
		mustExec(t, conn, fmt.Sprintf("INSERT INTO clicks VALUES (%d, 'row', now(), 'day-0')", next))
		next += 3
		bs := tableBuckets(t, n, "clicks")
		return len(bs) == 1 && bs[0].Partition == "day-0"
	})
	ids, parts := lakeIDs(t, dataDir, id)
	if parts["day-1"] != 0 || parts["day-2"] != 0 || parts["day-0"] != 10 {
		t.Fatalf("lake after expiry: partitions %v, want day-0 only (10 rows)", parts)
	}
	for _, i := range ids {
		if i%3 != 0 {
			t.Fatalf("lake after expiry still has id %d (of day-%d)", i, i%3)
		}
	}
	// Tiering goes on: the next round adds the new day-0 rows.
	want := (next - 30) / 3
	waitFor(t, 30*time.Second, "the new day-0 rows committed", func() bool {
		return tableTiering(t, tieringStatus(t, n), "clicks").End == uint64(10+want)
	})
	out, errOut, code = runMink(t, 60*time.Second, "tiering", "run", "--table", "clicks", "--wait", "--server", n.admin)
	if code != 0 {
		t.Fatalf("mink tiering run after expiry: exit %d: %s\n%s", code, errOut, out)
	}
	if _, parts := lakeIDs(t, dataDir, id); parts["day-0"] != 10+want || len(parts) != 1 {
		t.Fatalf("lake after the next round: partitions %v, want day-0 with %d rows", parts, 10+want)
	}
	var others int64
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM clicks WHERE dt <> 'day-0'").Scan(&others); err != nil || others != 0 {
		t.Fatalf("rows of expired partitions in SELECT: %d, %v", others, err)
	}
}
