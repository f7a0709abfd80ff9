package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/jackc/pgx/v5"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/objstore"
	"github.com/minkdb/mink/server"
	"github.com/minkdb/mink/tiering"
)

// startTieringNode starts a single node whose tiering worker waits freshness
// between rounds of a table.
func startTieringNode(t *testing.T, dataDir, freshness string) *node {
	t.Helper()
	var n *node
	for try := 0; ; try++ {
		n = newNode(t, nodeOpts{dataDir: dataDir, leaseTTL: "3s",
			extra: []string{"--coordinator-tick", "200ms", "--tiering-freshness", freshness, "--gc-interval", "1s", "--gc-delay", "2s"}})
		if distinctPorts(n.args) || try == 10 {
			break
		}
	}
	n.start()
	n.waitHealthy()
	n.waitSQL()
	return n
}

func tieringStatus(t *testing.T, n *node) server.TieringStatus {
	t.Helper()
	out, errOut, code := runMink(t, 30*time.Second, "tiering", "status", "--json", "--server", n.admin)
	if code != 0 {
		t.Fatalf("mink tiering status: exit %d: %s", code, errOut)
	}
	var st server.TieringStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("mink tiering status --json: %v\n%s", err, out)
	}
	return st
}

func tableTiering(t *testing.T, st server.TieringStatus, name string) server.TableTiering {
	t.Helper()
	for _, tt := range st.Tables {
		if tt.Table == name {
			return tt
		}
	}
	t.Fatalf("tiering status has no table %q: %+v", name, st)
	return server.TableTiering{}
}

// lakeIDs reads the current lake snapshot of a table with iceberg-go and
// returns the "id" column of every row, and the (bucket, offset) pairs.
func lakeIDs(t *testing.T, dataDir string, id catalog.TableID) (ids []int64, parts map[string]int) {
	t.Helper()
	return lakeIDsIn(t, filepath.Join(dataDir, "objects"), id)
}

// lakeIDsIn is lakeIDs for the object store in directory root.
func lakeIDsIn(t *testing.T, root string, id catalog.TableID) (ids []int64, parts map[string]int) {
	t.Helper()
	root, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	store, err := objstore.NewDir(root)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tbl, err := tiering.NewLake(store, "file://"+root).Load(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	parts = map[string]int{}
	if tbl == nil || tbl.CurrentSnapshot() == nil {
		return nil, parts
	}
	_, recs, err := tbl.Scan().ToArrowRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[[2]int64]bool{}
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		col := func(name string) *array.Int64 {
			idx := rec.Schema().FieldIndices(name)
			if len(idx) != 1 {
				t.Fatalf("lake has no column %q: %s", name, rec.Schema())
			}
			return rec.Column(idx[0]).(*array.Int64)
		}
		idCol, bucket, offset := col("id"), col(tiering.BucketColumn), col(tiering.OffsetColumn)
		var dt *array.String
		if idx := rec.Schema().FieldIndices("dt"); len(idx) == 1 {
			dt = rec.Column(idx[0]).(*array.String)
		}
		for i := range int(rec.NumRows()) {
			key := [2]int64{bucket.Value(i), offset.Value(i)}
			if seen[key] {
				t.Fatalf("bucket %d offset %d is in the lake twice", key[0], key[1])
			}
			seen[key] = true
			ids = append(ids, idCol.Value(i))
			if dt != nil {
				parts[dt.Value(i)]++
			}
		}
		rec.Release()
	}
	slices.Sort(ids)
	return ids, parts
}

// insertIDs inserts rows (id, 'row id', now()) for ids [from, to), with a
// fourth column 'day-<id % 3>' when partitioned.
func insertIDs(t *testing.T, conn *pgx.Conn, table string, from, to int, partitioned bool) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "INSERT INTO %s VALUES ", table)
	for i := from; i < to; i++ {
		if i > from {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "(%d, 'row %d', now()", i, i)
		if partitioned {
			fmt.Fprintf(&b, ", 'day-%d'", i%3)
		}
		b.WriteString(")")
	}
	mustExec(t, conn, b.String())
}

func seq(from, to int) []int64 {
	var out []int64
	for i := from; i < to; i++ {
		out = append(out, int64(i))
	}
	return out
}

// TestTieringCLI: a log table written with pgx is tiered by `mink tiering run
// --wait`; iceberg-go reads exactly the inserted rows from the lake, and
// `mink tiering status` shows no lag. A table WITH (tiering = off) is
// refused and reported off. The worker tiers a partitioned table on its own
// into identity partitions.
func TestTieringCLI(t *testing.T) {
	dataDir := t.TempDir()
	n := startTieringNode(t, dataDir, "1h")
	conn := connect(t, n.pgURL(), pgx.QueryExecModeSimpleProtocol)
	mustExec(t, conn, "CREATE TABLE events (id bigint NOT NULL, msg text, ts timestamptz) WITH (buckets = 3)")
	insertIDs(t, conn, "events", 0, 500, false)

	out, errOut, code := runMink(t, 60*time.Second, "tiering", "run", "--table", "events", "--wait", "--server", n.admin)
	if code != 0 {
		t.Fatalf("mink tiering run: exit %d: %s\n%s", code, errOut, out)
	}
	if !strings.Contains(out, "done") && !strings.Contains(out, "up to date") {
		t.Fatalf("mink tiering run --wait printed:\n%s", out)
	}
	st := tableTiering(t, tieringStatus(t, n), "events")
	if st.LagRows != 0 || st.Tiered != 500 || st.End != 500 || st.LagSeconds != 0 {
		t.Fatalf("status after run --wait: %+v\nrun printed:\n%s", st, out)
	}
	ids, _ := lakeIDs(t, dataDir, st.ID)
	if !slices.Equal(ids, seq(0, 500)) {
		t.Fatalf("lake has %d rows (%v...), want ids 0..499", len(ids), ids[:min(len(ids), 5)])
	}

	// More rows: a second run tiers exactly them (the worker waits 1h).
	insertIDs(t, conn, "events", 500, 800, false)
	out, errOut, code = runMink(t, 60*time.Second, "tiering", "run", "--table", "events", "--wait", "--server", n.admin)
	if code != 0 || !strings.Contains(out, "done: 300 rows tiered") || !strings.Contains(out, "committed lake snapshot") ||
		!strings.Contains(out, "recorded the tiered offsets") {
		t.Fatalf("second run: exit %d: %s\n%s", code, errOut, out)
	}
	ids, _ = lakeIDs(t, dataDir, st.ID)
	if !slices.Equal(ids, seq(0, 800)) {
		t.Fatalf("lake has %d rows after the second run, want 800", len(ids))
	}
	metrics := scrape(t, n.admin)
	for _, want := range []string{`mink_tiering_lag_rows{table="events"} 0`, "mink_tiering_rows_total 800", `mink_tiering_rounds_total{result="committed"} 2`} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("/metrics has no line %q", want)
		}
	}
	text, _, code := runMink(t, 30*time.Second, "tiering", "status", "--server", n.admin)
	if code != 0 || !strings.Contains(text, "events") {
		t.Fatalf("mink tiering status: exit %d\n%s", code, text)
	}
	t.Logf("mink tiering status:\n%s", text)

	// Without --wait the round is queued and the worker runs it (its
	// freshness, 1h, does not hold back a requested round).
	insertIDs(t, conn, "events", 800, 805, false)
	waitFor(t, 30*time.Second, "the 5 new rows committed", func() bool {
		return tableTiering(t, tieringStatus(t, n), "events").End == 805
	})
	out, errOut, code = runMink(t, 30*time.Second, "tiering", "run", "--table", "events", "--server", n.admin)
	if code != 0 || !strings.Contains(out, "round of events queued on node 1") {
		t.Fatalf("run without --wait: exit %d: %s\n%s", code, errOut, out)
	}
	waitFor(t, 30*time.Second, "the queued round", func() bool {
		st := tableTiering(t, tieringStatus(t, n), "events")
		return st.Tiered == 805 && st.LagRows == 0
	})

	// tiering = off: refused, reported.
	mustExec(t, conn, "CREATE TABLE quiet (id bigint, msg text, ts timestamptz) WITH (tiering = off)")
	insertIDs(t, conn, "quiet", 0, 10, false)
	_, errOut, code = runMink(t, 30*time.Second, "tiering", "run", "--table", "quiet", "--wait", "--server", n.admin)
	if code == 0 || !strings.Contains(errOut, "tiering = off") {
		t.Fatalf("run of a table with tiering off: exit %d: %s", code, errOut)
	}
	if q := tableTiering(t, tieringStatus(t, n), "quiet"); q.Enabled || q.Tiered != 0 {
		t.Fatalf("status of a table with tiering off: %+v", q)
	}
	_, errOut, code = runMink(t, 30*time.Second, "tiering", "run", "--table", "nosuch", "--server", n.admin)
	if code == 0 || !strings.Contains(errOut, `table "nosuch" does not exist`) {
		t.Fatalf("run of a missing table: exit %d: %s", code, errOut)
	}

	// The worker on its own: a table with tiering_freshness = 1s is tiered
	// without being asked, partitioned by dt.
	mustExec(t, conn, "CREATE TABLE clicks (id bigint NOT NULL, msg text, ts timestamptz, dt text NOT NULL) PARTITION BY LIST (dt) WITH (buckets = 2, tiering_freshness = '1s')")
	insertIDs(t, conn, "clicks", 0, 90, true)
	var clicks server.TableTiering
	waitFor(t, 60*time.Second, "the worker to tier clicks", func() bool {
		clicks = tableTiering(t, tieringStatus(t, n), "clicks")
		return clicks.Tiered == 90 && clicks.LagRows == 0
	})
	ids, parts := lakeIDs(t, dataDir, clicks.ID)
	if !slices.Equal(ids, seq(0, 90)) || parts["day-0"] != 30 || parts["day-1"] != 30 || parts["day-2"] != 30 {
		t.Fatalf("clicks lake: %d rows, partitions %v", len(ids), parts)
	}
	if clicks.LastRound == nil || clicks.LastError != "" {
		t.Fatalf("clicks status: %+v", clicks)
	}
}

// TestTieringKillMidRound: the lease holder is killed (SIGKILL) while a round
// runs. The restarted node (a new coordinator epoch) completes tiering: the
// lake read by iceberg-go holds every row exactly once.
func TestTieringKillMidRound(t *testing.T) {
	dataDir := t.TempDir()
	n := startTieringNode(t, dataDir, "1h")
	ctx := context.Background()
	conn := connect(t, n.pgURL(), pgx.QueryExecModeCacheStatement)
	mustExec(t, conn, "CREATE TABLE events (id bigint NOT NULL, msg text, ts timestamptz) WITH (buckets = 4)")
	const total = 200_000
	for from := 0; from < total; from += 50_000 {
		var rows [][]any
		for i := from; i < from+50_000; i++ {
			rows = append(rows, []any{int64(i), fmt.Sprintf("row %d with some text to make it longer", i), time.Now()})
		}
		if _, err := conn.CopyFrom(ctx, pgx.Identifier{"events"}, []string{"id", "msg", "ts"}, pgx.CopyFromRows(rows)); err != nil {
			t.Fatal(err)
		}
	}
	conn.Close(ctx)
	tableID := tableTiering(t, tieringStatus(t, n), "events").ID

	// Start a waited round and kill the server as soon as it has planned.
	run := exec.Command(minkBin, "tiering", "run", "--table", "events", "--wait", "--server", n.admin)
	stdout, err := run.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	var printed strings.Builder
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		printed.WriteString(sc.Text() + "\n")
		if strings.HasPrefix(sc.Text(), "round of events") {
			n.kill()
			break
		}
	}
	io.Copy(io.Discard, stdout)
	_ = run.Wait()
	t.Logf("the run printed before the kill:\n%s", printed.String())
	if !strings.Contains(printed.String(), "round of events") {
		t.Fatalf("the round never started:\n%s", printed.String())
	}
	midRound := !strings.Contains(printed.String(), "recorded")

	// An orphan data file, as a failed round leaves behind (whether the
	// killed round got to write any is a matter of timing).
	root, _ := filepath.Abs(filepath.Join(dataDir, "objects"))
	orphans, err := objstore.NewDir(root)
	if err != nil {
		t.Fatal(err)
	}
	orphan := tiering.LakePrefix(tableID) + "data/b1-0-10-e1-0000000000000000.parquet"
	if err := orphans.PutIfAbsent(ctx, orphan, []byte("not a parquet file")); err != nil {
		t.Fatal(err)
	}

	n.start()
	n.waitHealthy()
	// The old incarnation's coordinator lease lasts until its TTL (3s)
	// runs out; until the new one registers, run asks to retry.
	var out, errOut string
	var code int
	waitFor(t, 60*time.Second, "a tiering run after the restart", func() bool {
		out, errOut, code = runMink(t, 120*time.Second, "tiering", "run", "--table", "events", "--wait", "--server", n.admin)
		if code != 0 && !strings.Contains(errOut, "retry") {
			t.Fatalf("run after the restart: exit %d: %s\n%s", code, errOut, out)
		}
		return code == 0
	})
	st := tableTiering(t, tieringStatus(t, n), "events")
	if st.LagRows != 0 || st.Tiered != total {
		t.Fatalf("status after the restart: %+v\nrun printed:\n%s", st, out)
	}
	ids, _ := lakeIDs(t, dataDir, st.ID)
	if !slices.Equal(ids, seq(0, total)) {
		t.Fatalf("lake has %d rows, want %d (each id once)", len(ids), total)
	}
	t.Logf("killed mid-round: %v; the run after the restart printed:\n%s", midRound, out)

	// The killed round's files are garbage: the lifecycle loop deletes
	// them (gc-delay 2s) and keeps every file of the lake snapshot.
	stored, live := lakeDataFiles(t, filepath.Join(dataDir, "objects"), st.ID)
	t.Logf("data files after the restart's round: %d stored, %d in the lake snapshot", stored, live)
	if stored <= live {
		t.Fatalf("the orphan is not among the %d stored data files (%d live)", stored, live)
	}
	waitFor(t, 60*time.Second, "lake garbage collected", func() bool {
		stored, live := lakeDataFiles(t, filepath.Join(dataDir, "objects"), st.ID)
		return stored == live
	})
	if _, err := orphans.Get(ctx, orphan); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("the orphan is still there: %v", err)
	}
	if ids, _ := lakeIDs(t, dataDir, st.ID); !slices.Equal(ids, seq(0, total)) {
		t.Fatalf("lake has %d rows after garbage collection, want %d", len(ids), total)
	}
}

// lakeDataFiles counts the data files stored under a table's lake and the
// data files of its current snapshot.
func lakeDataFiles(t *testing.T, root string, id catalog.TableID) (stored, live int) {
	t.Helper()
	root, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	store, err := objstore.NewDir(root)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	objs, err := store.List(ctx, tiering.LakePrefix(id)+"data/")
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := tiering.NewLake(store, "file://"+root).Load(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return len(objs), len(tasks)
}

// TestTieringStalledHolderFenced: two nodes share an etcd and an object
// store. The coordinator lease holder is stopped (SIGSTOP) in the middle of a
// round; the other node takes the lease and tiers the table. When the old
// holder resumes, its round is refused (stale epoch or lost commit race), and
// the lake read by iceberg-go holds every row exactly once.
func TestTieringStalledHolderFenced(t *testing.T) {
	etcd := startTestEtcd(t)
	objects := t.TempDir()
	extra := []string{"--object-store", "file://" + objects, "--coordinator-tick", "200ms", "--tiering-freshness", "1h"}
	endpoints := strings.Join(etcd.Endpoints(), ",")
	n1 := newNode(t, nodeOpts{nodeID: 1, etcd: endpoints, leaseTTL: "3s", extra: extra})
	n1.start()
	n1.waitHealthy()
	n2 := newNode(t, nodeOpts{nodeID: 2, etcd: endpoints, leaseTTL: "3s", extra: extra})
	n2.start()
	n2.waitHealthy()
	waitFor(t, 30*time.Second, "node 1 coordinator, both live", func() bool {
		st := clusterStatus(t, n2.admin)
		a, _ := findNode(st, 1)
		b, _ := findNode(st, 2)
		return a.Live && b.Live && st.Coordinator.Node == 1
	})
	n1.waitSQL()
	ctx := context.Background()
	conn := connect(t, n1.pgURL(), pgx.QueryExecModeCacheStatement)
	mustExec(t, conn, "CREATE TABLE events (id bigint NOT NULL, msg text, ts timestamptz) WITH (buckets = 4)")
	const total = 200_000
	for from := 0; from < total; from += 50_000 {
		var rows [][]any
		for i := from; i < from+50_000; i++ {
			rows = append(rows, []any{int64(i), fmt.Sprintf("row %d with some text to make it longer", i), time.Now()})
		}
		if _, err := conn.CopyFrom(ctx, pgx.Identifier{"events"}, []string{"id", "msg", "ts"}, pgx.CopyFromRows(rows)); err != nil {
			t.Fatal(err)
		}
	}
	conn.Close(ctx)
	waitFor(t, 30*time.Second, "all rows committed to the streams", func() bool {
		return tableTiering(t, tieringStatus(t, n1), "events").End == total
	})

	// A waited round on node 1; stop node 1 as soon as it has planned.
	run := exec.Command(minkBin, "tiering", "run", "--table", "events", "--wait", "--server", n1.admin)
	stdout, err := run.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	run.Stderr = &stderr
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	var printed strings.Builder
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		printed.WriteString(sc.Text() + "\n")
		if strings.HasPrefix(sc.Text(), "round of events") {
			n1.signal(syscall.SIGSTOP)
			break
		}
	}
	stopped := printed.String()
	t.Logf("node 1's round printed before SIGSTOP:\n%s", stopped)
	if !strings.Contains(stopped, "round of events") {
		t.Fatalf("the round never started: %s", stderr.String())
	}
	runDone := make(chan error, 1)
	go func() {
		rest, _ := io.ReadAll(stdout)
		printed.Write(rest)
		runDone <- run.Wait()
	}()

	waitFor(t, 60*time.Second, "node 2 coordinator", func() bool {
		st := clusterStatus(t, n2.admin)
		return st.Coordinator.Node == 2 && st.Coordinator.LeaseHolder == 2
	})
	var out, errOut string
	var code int
	waitFor(t, 60*time.Second, "a tiering run on node 2", func() bool {
		out, errOut, code = runMink(t, 120*time.Second, "tiering", "run", "--table", "events", "--wait", "--server", n2.admin)
		if code != 0 && !strings.Contains(errOut, "retry") {
			t.Fatalf("run on node 2: exit %d: %s\n%s", code, errOut, out)
		}
		return code == 0
	})
	t.Logf("node 2's round printed:\n%s", out)
	st := tableTiering(t, tieringStatus(t, n2), "events")
	if st.LagRows != 0 || st.Tiered != total {
		t.Fatalf("status on node 2: %+v", st)
	}

	// Node 1 resumes: its round must not land.
	n1.signal(syscall.SIGCONT)
	select {
	case err := <-runDone:
		if err == nil && !strings.Contains(printed.String(), "recorded the tiered offsets") {
			t.Logf("node 1's run ended without error but recorded nothing:\n%s", printed.String())
		} else if err == nil {
			t.Fatalf("node 1's stale round was recorded:\n%s", printed.String())
		}
		t.Logf("node 1's stale run ended (%v): %s%s", err, printed.String(), stderr.String())
	case <-time.After(90 * time.Second):
		t.Fatalf("node 1's run did not end after SIGCONT:\n%s", printed.String())
	}
	ids, _ := lakeIDsIn(t, objects, st.ID)
	if !slices.Equal(ids, seq(0, total)) {
		t.Fatalf("lake has %d rows, want %d (each id once)", len(ids), total)
	}
	if after := tableTiering(t, tieringStatus(t, n2), "events"); after.Tiered != total || after.LakeSnapshotID != st.LakeSnapshotID {
		t.Fatalf("status after node 1 resumed: %+v (before: snapshot %d)", after, st.LakeSnapshotID)
	}
}

// scrape returns the node's /metrics text.
func scrape(t *testing.T, admin string) string {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}
