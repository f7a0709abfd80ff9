package main

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/minkdb/mink/server"
)

// startLakeNode is startTieringNode with the engine's mirrors of log tables
// off when direct: SELECTs then read the buckets and the lake themselves.
func startLakeNode(t *testing.T, dataDir string, direct bool) *node {
	t.Helper()
	extra := []string{"--coordinator-tick", "200ms", "--tiering-freshness", "1h", "--gc-interval", "1s", "--gc-delay", "2s"}
	if direct {
		extra = append(extra, "--disable-sql-mirrors")
	}
	var n *node
	for try := 0; ; try++ {
		n = newNode(t, nodeOpts{dataDir: dataDir, leaseTTL: "3s", extra: extra})
		if distinctPorts(n.args) || try == 10 {
			break
		}
	}
	n.start()
	n.waitHealthy()
	n.waitSQL()
	return n
}

// tierNow runs `mink tiering run --table table --wait`.
func tierNow(t *testing.T, n *node, table string) {
	t.Helper()
	out, errOut, code := runMink(t, 60*time.Second, "tiering", "run", "--table", table, "--wait", "--server", n.admin)
	if code != 0 {
		t.Fatalf("mink tiering run --table %s: exit %d: %s\n%s", table, code, errOut, out)
	}
}

// dump returns every row of query as text, one line per row.
func dump(t *testing.T, conn *pgx.Conn, query string) string {
	t.Helper()
	rows, err := conn.Query(context.Background(), query)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		fmt.Fprintln(&b, vals...)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return b.String()
}

// TestLakeUnionRead: a writer inserts into a log table while `mink tiering
// run --wait` rounds run and queries read it: each SELECT sees every row
// acknowledged before it started, never a row twice and none never
// written; with the engine's mirrors off the reads go through the lake
// cache. What a union read of lake and stream rows returns (every column
// type, partition filters, after each round and after a restart) is
// sqlfront/testdata/logic/lake_union.test and lake_union_direct.test.
func TestLakeUnionRead(t *testing.T) {
	// Self-contained (one node of its own, no timing it depends on): it
	// runs beside another such test, which keeps make test in its budget.
	t.Parallel()
	for _, direct := range []bool{true, false} {
		t.Run(fmt.Sprintf("direct=%v", direct), func(t *testing.T) { testLakeUnionRead(t, direct) })
	}
}

func testLakeUnionRead(t *testing.T, direct bool) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	dataDir := t.TempDir()
	n := startLakeNode(t, dataDir, direct)
	conn := connect(t, n.pgURL(), pgx.QueryExecModeSimpleProtocol)

	// A writer inserts while rounds run and queries read.
	w := connect(t, n.pgURL(), pgx.QueryExecModeSimpleProtocol)
	mustExec(t, w, "CREATE TABLE live (id bigint NOT NULL) WITH (buckets = 2)")
	var acked atomic.Int64 // ids [0, acked) are acknowledged
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	var werr error
	go func() {
		defer wg.Done()
		for id := int64(0); ; id += 10 {
			select {
			case <-stop:
				return
			default:
			}
			var b strings.Builder
			b.WriteString("INSERT INTO live VALUES ")
			for i := id; i < id+10; i++ {
				if i > id {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, "(%d)", i)
			}
			if _, err := w.Exec(context.Background(), b.String()); err != nil {
				werr = err
				return
			}
			acked.Store(id + 10)
		}
	}()
	deadline := time.Now().Add(20 * time.Second)
	var reads, tiers int
	for time.Now().Before(deadline) {
		if rng.IntN(3) == 0 {
			tierNow(t, n, "live")
			tiers++
			continue
		}
		// An INSERT writes its buckets one after the other and a
		// statement reads each bucket as of its start (docs/sql.md,
		// "What is atomic"), so a read may see part of the INSERT in
		// flight; it must see every acknowledged row, once.
		low := acked.Load()
		var count, distinct, below, maxID int64
		if err := conn.QueryRow(context.Background(), fmt.Sprintf("SELECT count(*), count(DISTINCT id), count(*) FILTER (WHERE id < %d), coalesce(max(id), -1) FROM live", low)).Scan(&count, &distinct, &below, &maxID); err != nil {
			t.Fatalf("read live: %v", err)
		}
		reads++
		if high := acked.Load() + 10; count != distinct || below != low || maxID >= high {
			t.Fatalf("live: count %d distinct %d, %d of the %d rows acknowledged before the read, max %d (%d issued)", count, distinct, below, low, maxID, high)
		}
	}
	close(stop)
	wg.Wait()
	if werr != nil {
		t.Fatalf("writer: %v", werr)
	}
	var count int64
	if err := conn.QueryRow(context.Background(), "SELECT count(DISTINCT id) FROM live").Scan(&count); err != nil || count != acked.Load() {
		t.Fatalf("live at the end: %d rows (%v), want %d", count, err, acked.Load())
	}
	t.Logf("live: %d rows, %d reads, %d tiering runs", count, reads, tiers)
	if direct {
		// The reads above went through the lake (and its cache).
		if ents, err := os.ReadDir(filepath.Join(dataDir, "lake-cache")); err != nil || len(ents) == 0 {
			t.Fatalf("lake cache is empty (%v) after reading tiered tables", err)
		}
	}
}

// TestLakeCorruptFile: a damaged lake data file makes queries of its table
// fail with XX001 naming the file; the table's metadata is intact
// (tiering status unchanged), other tables still read, and once the file is
// restored the table reads again.
func TestLakeCorruptFile(t *testing.T) {
	for _, direct := range []bool{true, false} {
		t.Run(fmt.Sprintf("direct=%v", direct), func(t *testing.T) { testLakeCorruptFile(t, direct) })
	}
}

func testLakeCorruptFile(t *testing.T, direct bool) {
	dataDir := t.TempDir()
	n := startLakeNode(t, dataDir, direct)
	conn := connect(t, n.pgURL(), pgx.QueryExecModeSimpleProtocol)
	for _, name := range []string{"good", "bad"} {
		mustExec(t, conn, fmt.Sprintf("CREATE TABLE %s (id bigint NOT NULL, msg text, ts timestamptz) WITH (buckets = 2)", name))
		insertIDs(t, conn, name, 0, 300, false)
		tierNow(t, n, name)
		insertIDs(t, conn, name, 300, 310, false)
	}
	st := tableTiering(t, tieringStatus(t, n), "bad")
	var victim string
	filepath.WalkDir(filepath.Join(dataDir, "objects", "lake", fmt.Sprint(st.ID), "data"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && victim == "" && strings.HasSuffix(p, ".parquet") {
			victim = p
		}
		return nil
	})
	if victim == "" {
		t.Fatalf("no data file in the lake of table bad")
	}
	orig, err := os.ReadFile(victim)
	if err != nil {
		t.Fatal(err)
	}
	bad := append([]byte(nil), orig...)
	for i := 4; i < len(bad)-8; i++ {
		bad[i] ^= 0x5a
	}
	if err := os.WriteFile(victim, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	key := strings.TrimPrefix(filepath.ToSlash(victim), filepath.ToSlash(filepath.Join(dataDir, "objects"))+"/")

	_, err = conn.Exec(context.Background(), "SELECT count(*), sum(id) FROM bad")
	if sqlState(err) != "XX001" || !strings.Contains(err.Error(), key) {
		t.Fatalf("query of the table with a corrupt lake file: %v (SQLSTATE %q), want XX001 naming %s", err, sqlState(err), key)
	}
	t.Logf("error: %v", err)
	var count, sum int64
	if err := conn.QueryRow(context.Background(), "SELECT count(*), sum(id) FROM good").Scan(&count, &sum); err != nil || count != 310 || sum != 309*310/2 {
		t.Fatalf("other table: count %d sum %d err %v", count, sum, err)
	}
	if st2 := tableTiering(t, tieringStatus(t, n), "bad"); st2.Tiered != st.Tiered || st2.Tiered != 300 {
		t.Fatalf("tiering status after the failed query: %+v, before %+v", st2, st)
	}
	if err := os.WriteFile(victim, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(context.Background(), "SELECT count(*), sum(id) FROM bad").Scan(&count, &sum); err != nil || count != 310 || sum != 309*310/2 {
		t.Fatalf("table bad after restoring the file: count %d sum %d err %v", count, sum, err)
	}
}

// TestLakeReadAfterTrim: once log_retention trimmed the streams of a tiered
// table to their tiered offsets, SELECT still returns every row exactly
// once: the tiered ones from the lake, the newer ones from the streams;
// also after a restart (the mirrors are filled from the lake again).
func TestLakeReadAfterTrim(t *testing.T) {
	for _, direct := range []bool{true, false} {
		t.Run(fmt.Sprintf("direct=%v", direct), func(t *testing.T) {
			dataDir := t.TempDir()
			n := startLakeNode(t, dataDir, direct)
			conn := connect(t, n.pgURL(), pgx.QueryExecModeSimpleProtocol)
			mustExec(t, conn, "CREATE TABLE events (id bigint NOT NULL, msg text, ts timestamptz) WITH (buckets = 1, log_retention = '1s')")
			insertIDs(t, conn, "events", 0, 150, false)
			// A SELECT now makes the engine's mirror hold rows 0..149 from
			// the stream; the trim below then passes what it holds. (One
			// bucket: with more, round-robin puts each INSERT in one
			// bucket and the trim would not pass a mirrored bucket.)
			var half int64
			if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM events").Scan(&half); err != nil || half != 150 {
				t.Fatalf("count before tiering: %d (%v), want 150", half, err)
			}
			insertIDs(t, conn, "events", 150, 300, false)
			waitFor(t, 30*time.Second, "300 rows committed", func() bool {
				return tableTiering(t, tieringStatus(t, n), "events").End == 300
			})
			tierNow(t, n, "events")
			var last []server.BucketStatus
			deadline := time.Now().Add(30 * time.Second)
			for trimmed := false; !trimmed; {
				last, trimmed = tableBuckets(t, n, "events"), true
				var start uint64
				for _, b := range last {
					trimmed = trimmed && b.Start == b.End
					start += b.Start
				}
				trimmed = trimmed && start == 300
				if time.Now().After(deadline) {
					t.Fatalf("streams not trimmed to their tiered offsets after 30 s: %+v", last)
				}
				time.Sleep(100 * time.Millisecond)
			}
			insertIDs(t, conn, "events", 300, 350, false)
			check := func(stage string) {
				t.Helper()
				var count, distinct, sum, maxID int64
				if err := conn.QueryRow(context.Background(), "SELECT count(*), count(DISTINCT id), sum(id), max(id) FROM events").Scan(&count, &distinct, &sum, &maxID); err != nil {
					t.Fatalf("%s: %v", stage, err)
				}
				if count != 350 || distinct != 350 || sum != 349*350/2 || maxID != 349 {
					t.Fatalf("%s: count %d distinct %d sum %d max %d, want ids 0..349", stage, count, distinct, sum, maxID)
				}
				var msg string
				if err := conn.QueryRow(context.Background(), "SELECT msg FROM events WHERE id = 17").Scan(&msg); err != nil || msg != "row 17" {
					t.Fatalf("%s: row 17: %q (%v)", stage, msg, err)
				}
			}
			check("after the trim")
			check("again after the trim") // a rebuilt mirror, if any
			conn.Close(context.Background())
			n.stop()
			n.start()
			n.waitHealthy()
			n.waitSQL()
			conn = connect(t, n.pgURL(), pgx.QueryExecModeSimpleProtocol)
			check("after a restart")
		})
	}
}
