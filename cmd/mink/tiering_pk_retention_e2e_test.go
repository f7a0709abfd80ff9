package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/objstore"
	"github.com/minkdb/mink/server"
)

// startPKRetentionNode starts a single node that snapshots primary-key
// buckets every 500ms and tiers only on request (freshness 1h).
func startPKRetentionNode(t *testing.T, dataDir string) *node {
	t.Helper()
	var n *node
	for try := 0; ; try++ {
		n = newNode(t, nodeOpts{dataDir: dataDir, leaseTTL: "3s",
			extra: []string{"--coordinator-tick", "200ms", "--tiering-freshness", "1h", "--gc-interval", "1s", "--gc-delay", "2s",
				"--kv-snapshot-interval", "500ms"}})
		if distinctPorts(n.args) || try == 10 {
			break
		}
	}
	n.start()
	t.Cleanup(func() {
		if t.Failed() {
			for _, l := range strings.Split(n.log(), "\n") {
				if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") || strings.Contains(l, "retention") {
					t.Log(l)
				}
			}
		}
	})
	n.waitHealthy()
	n.waitSQL()
	return n
}

// tierPK runs a waited round of table and requires it to finish.
func tierPK(t *testing.T, n *node, table string) {
	t.Helper()
	out, errOut, code := runMink(t, 120*time.Second, "tiering", "run", "--table", table, "--wait", "--server", n.admin)
	if code != 0 || !strings.Contains(out, "done") {
		t.Fatalf("mink tiering run --table %s: exit %d: %s\n%s", table, code, errOut, out)
	}
}

// changelogStarts returns, per bucket, the first _offset and the number of
// records "t$changelog" returns.
func changelogStarts(t *testing.T, conn *pgx.Conn, table string) (first, count map[uint64]uint64) {
	t.Helper()
	rows, err := conn.Query(context.Background(), fmt.Sprintf(`SELECT _bucket, min(_offset), count(*) FROM "%s$changelog" GROUP BY _bucket`, table))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	first, count = map[uint64]uint64{}, map[uint64]uint64{}
	for rows.Next() {
		var b, f, c int64
		if err := rows.Scan(&b, &f, &c); err != nil {
			t.Fatal(err)
		}
		first[uint64(b)], count[uint64(b)] = uint64(f), uint64(c)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return first, count
}

// sqlPKRowsEventually is sqlPKRows once the table's buckets serve (after a
// restart or failover they are Unavailable for a while).
func sqlPKRowsEventually(t *testing.T, conn *pgx.Conn, table string, partitioned bool) map[string]string {
	t.Helper()
	dtCol := "''"
	if partitioned {
		dtCol = "dt"
	}
	var out map[string]string
	waitFor(t, 60*time.Second, "SELECT of "+table, func() bool {
		rows, err := conn.Query(context.Background(), fmt.Sprintf("SELECT id, coalesce(v, 'NULL'), n, %s FROM %s", dtCol, table))
		if err != nil {
			return false
		}
		defer rows.Close()
		out = map[string]string{}
		for rows.Next() {
			var (
				id    int64
				v, dt string
				n     int32
			)
			if err := rows.Scan(&id, &v, &n, &dt); err != nil {
				t.Fatal(err)
			}
			out[fmt.Sprintf("%d/%s", id, dt)] = fmt.Sprintf("%d|%s|%d|%s", id, v, n, dt)
		}
		return rows.Err() == nil
	})
	return out
}

// TestPKChangelogTrimRestart: a tiered primary-key table written in steps
// (inserts, upserts, updates, deletes) has its changelog trimmed by the
// retention loop, with no table option, below each bucket's oldest retained
// KV snapshot and its tiered offset. "t$changelog" then starts at each
// bucket's trim point. After kill -9 and a restart, the table (restored from
// a snapshot plus the changelog after it: a full replay is impossible now)
// has exactly the rows it had, and the lake read by iceberg-go equals it
// after the next round.
func TestPKChangelogTrimRestart(t *testing.T) {
	dataDir := t.TempDir()
	n := startPKRetentionNode(t, dataDir)
	conn := connect(t, n.pgURL(), pgx.QueryExecModeSimpleProtocol)
	mustExec(t, conn, "CREATE TABLE kv (id bigint PRIMARY KEY, v text, n integer NOT NULL DEFAULT 0) WITH (buckets = 2)")
	steps := []string{
		"INSERT INTO kv (id, v, n) SELECT i, 'v' || i, i FROM generate_series(1, 400) AS g(i)",
		"INSERT INTO kv (id, v, n) SELECT i, 'up' || i, 1000 + i FROM generate_series(300, 500) AS g(i) ON CONFLICT (id) DO UPDATE SET v = excluded.v, n = excluded.n",
		"UPDATE kv SET v = NULL, n = n + 1 WHERE id % 7 = 0",
		"DELETE FROM kv WHERE id % 5 = 0",
		"DELETE FROM kv WHERE id < 50",
		"UPDATE kv SET v = 'x' || coalesce(v, '') WHERE id % 3 = 0",
		"INSERT INTO kv (id, v, n) VALUES (5, 'back', 5), (10, 'back', 10)",
	}
	for i, s := range steps {
		mustExec(t, conn, s)
		// Let the step reach stream objects and a KV snapshot, so that the
		// streams have object boundaries below the snapshots.
		time.Sleep(1200 * time.Millisecond)
		if i == 3 {
			tierPK(t, n, "kv")
		}
	}
	tierPK(t, n, "kv")
	st := tableTiering(t, tieringStatus(t, n), "kv")

	// Retention trims every bucket; wait until the starts stop moving (no
	// writes, so no new snapshots).
	var bs []server.BucketStatus
	waitFor(t, 60*time.Second, "every bucket's changelog trimmed", func() bool {
		bs = tableBuckets(t, n, "kv")
		for _, b := range bs {
			if b.Start == 0 {
				return false
			}
		}
		return true
	})
	time.Sleep(3 * time.Second)
	bs = tableBuckets(t, n, "kv")
	tiered := map[catalog.BucketID]uint64{}
	for _, b := range st.Buckets {
		tiered[b.Bucket] = b.Tiered
	}
	starts := map[uint64]uint64{}
	for _, b := range bs {
		starts[uint64(b.Bucket)] = b.Start
		t.Logf("bucket %d: changelog trimmed to %d of %d (tiered to %d)", b.Bucket, b.Start, b.End, tiered[b.Bucket])
		if b.Start >= b.End || b.Start > tiered[b.Bucket] {
			t.Fatalf("bucket %d: start %d, end %d, tiered to %d: trimmed past what tiering read or to the end", b.Bucket, b.Start, b.End, tiered[b.Bucket])
		}
	}
	first, count := changelogStarts(t, conn, "kv")
	for _, b := range bs {
		id := uint64(b.Bucket)
		if first[id] != b.Start || count[id] != b.End-b.Start {
			t.Fatalf("bucket %d: t$changelog starts at %d with %d records; the stream starts at %d and ends at %d",
				id, first[id], count[id], b.Start, b.End)
		}
	}
	want := sqlPKRows(t, conn, "kv", false)
	if len(want) == 0 {
		t.Fatal("the table is empty")
	}
	conn.Close(context.Background())

	// kill -9 and restart: every bucket restores from a KV snapshot and
	// replays the trimmed changelog after it.
	n.kill()
	n.start()
	n.waitHealthy()
	n.waitSQL()
	conn = connect(t, n.pgURL(), pgx.QueryExecModeSimpleProtocol)
	got := sqlPKRowsEventually(t, conn, "kv", false)
	if d := diffRows(got, want); d != "" {
		t.Fatalf("after the restart (%d rows) the table differs from before (%d rows):\n%s", len(got), len(want), d)
	}
	for _, b := range tableBuckets(t, n, "kv") {
		if b.Start < starts[uint64(b.Bucket)] {
			t.Fatalf("bucket %d starts at %d after the restart, %d before", b.Bucket, b.Start, starts[uint64(b.Bucket)])
		}
	}
	if strings.Contains(n.log(), "cannot be restored") {
		t.Fatalf("a bucket could not be restored:\n%s", n.log())
	}
	// Writes go on; the lake equals the table after the next round (run
	// once the restarted node is the coordinator again).
	mustExec(t, conn, "INSERT INTO kv (id, v, n) VALUES (7000, 'after restart', 1) ON CONFLICT (id) DO UPDATE SET v = excluded.v")
	mustExec(t, conn, "DELETE FROM kv WHERE id = 5")
	runRoundOn(t, n, "kv")
	want = sqlPKRows(t, conn, "kv", false)
	if d := diffRows(lakePKRows(t, dataDir, st.ID), want); d != "" {
		t.Fatalf("lake after the restart differs from SELECT:\n%s", d)
	}

	// Every KV snapshot object of one bucket is lost while its changelog is
	// trimmed: after kill -9 and a restart, the bucket restores from the
	// lake (its rows at the tiered offset) and replays the changes after
	// the last round.
	mustExec(t, conn, "INSERT INTO kv (id, v, n) SELECT i, 'after the round', i FROM generate_series(8000, 8020) AS g(i)")
	mustExec(t, conn, "UPDATE kv SET n = n + 100 WHERE id % 2 = 0")
	mustExec(t, conn, "DELETE FROM kv WHERE id % 9 = 0")
	want = sqlPKRows(t, conn, "kv", false)
	conn.Close(context.Background())
	time.Sleep(1500 * time.Millisecond) // committed to stream objects
	victim := tableBuckets(t, n, "kv")[0]
	if victim.Start == 0 {
		t.Fatalf("bucket %d is not trimmed", victim.Bucket)
	}
	n.kill()
	// The node's local tablets go too (a new disk): with them it would
	// reopen its buckets without the snapshots.
	if err := os.RemoveAll(filepath.Join(dataDir, "kv")); err != nil {
		t.Fatal(err)
	}
	store, err := objstore.NewDir(filepath.Join(dataDir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	snapObjs, err := store.List(context.Background(), fmt.Sprintf("kv/%d/", victim.Bucket))
	if err != nil || len(snapObjs) == 0 {
		t.Fatalf("KV snapshot objects of bucket %d: %d, %v", victim.Bucket, len(snapObjs), err)
	}
	for _, o := range snapObjs {
		if err := store.Delete(context.Background(), o.Key); err != nil {
			t.Fatal(err)
		}
	}
	n.start()
	n.waitHealthy()
	n.waitSQL()
	conn = connect(t, n.pgURL(), pgx.QueryExecModeSimpleProtocol)
	got = sqlPKRowsEventually(t, conn, "kv", false)
	if d := diffRows(got, want); d != "" {
		t.Fatalf("after losing bucket %d's snapshots (%d rows, want %d):\n%s\n%s", victim.Bucket, len(got), len(want), d, n.log())
	}
	// The node's log reaches the test through a pipe: the line may lag
	// the rows it came before.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(n.log(), "restored from the lake") {
		if time.Now().After(deadline) {
			t.Fatalf("bucket %d did not restore from the lake; log:\n%s", victim.Bucket, n.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("bucket %d (changelog from %d) restored from the lake after losing %d snapshot objects", victim.Bucket, victim.Start, len(snapObjs))
}

// TestPKPartitionRetention: a partitioned primary-key table with
// partition_retention. The partitions not written within the retention
// expire: they leave SELECT, the current lake snapshot (read with
// iceberg-go), and their streams and KV snapshots are retired and deleted,
// while upserts to the partition still written continue and the next round
// tiers them.
func TestPKPartitionRetention(t *testing.T) {
	dataDir := t.TempDir()
	n := startPKRetentionNode(t, dataDir)
	conn := connect(t, n.pgURL(), pgx.QueryExecModeSimpleProtocol)
	mustExec(t, conn, "CREATE TABLE kvp (id bigint NOT NULL, dt text NOT NULL, v text, n integer NOT NULL DEFAULT 0, PRIMARY KEY (id, dt)) PARTITION BY LIST (dt) WITH (buckets = 2, partition_retention = '8s')")
	mustExec(t, conn, "INSERT INTO kvp (id, dt, v, n) SELECT i, 'day-' || (i % 3), 'v' || i, i FROM generate_series(1, 300) AS g(i)")
	mustExec(t, conn, "UPDATE kvp SET v = 'u' || v WHERE id % 4 = 0")
	mustExec(t, conn, "DELETE FROM kvp WHERE id % 10 = 0")
	tierPK(t, n, "kvp")
	id := tableTiering(t, tieringStatus(t, n), "kvp").ID
	before := sqlPKRows(t, conn, "kvp", true)
	if d := diffRows(lakePKRows(t, dataDir, id), before); d != "" {
		t.Fatalf("lake before expiry differs from SELECT:\n%s", d)
	}
	var expired []uint64
	for _, b := range tableBuckets(t, n, "kvp") {
		if b.Partition != "day-0" {
			expired = append(expired, uint64(b.Bucket))
		}
	}
	if len(expired) != 4 {
		t.Fatalf("buckets of day-1 and day-2: %v, want 4", expired)
	}

	// day-0 keeps being written (upserts of existing and new keys); day-1
	// and day-2 are not, and expire.
	next := 0
	waitFor(t, 90*time.Second, "day-1 and day-2 expired", func() bool {
		mustExec(t, conn, fmt.Sprintf("INSERT INTO kvp (id, dt, v, n) VALUES (%d, 'day-0', 'live', %d), (%d, 'day-0', 'new', 1) ON CONFLICT (id, dt) DO UPDATE SET v = excluded.v, n = kvp.n + 1",
			3*(next%100), next, 10000+next))
		next++
		parts := map[string]bool{}
		for _, b := range tableBuckets(t, n, "kvp") {
			parts[b.Partition] = true
		}
		return len(parts) == 1 && parts["day-0"]
	})
	var others int64
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM kvp WHERE dt <> 'day-0'").Scan(&others); err != nil || others != 0 {
		t.Fatalf("rows of expired partitions in SELECT: %d, %v", others, err)
	}
	want := sqlPKRows(t, conn, "kvp", true)
	for k := range before {
		if strings.HasSuffix(k, "/day-0") {
			if _, ok := want[k]; !ok {
				t.Fatalf("day-0 row %s is gone after the expiry", k)
			}
		}
	}
	if got := len(want); got < len(before)/3 {
		t.Fatalf("%d rows left, fewer than day-0 had", got)
	}
	for k := range lakePKRows(t, dataDir, id) {
		if !strings.HasSuffix(k, "/day-0") {
			t.Fatalf("the current lake snapshot still has row %s of an expired partition", k)
		}
	}
	// The expired buckets' stream objects and KV snapshot objects are
	// garbage collected (gc-delay 2s).
	store, err := objstore.NewDir(filepath.Join(dataDir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the expired buckets' objects deleted", func() bool {
		for _, b := range expired {
			if len(streamObjects(t, dataDir, b)) > 0 {
				return false
			}
			objs, err := store.List(context.Background(), fmt.Sprintf("kv/%d/", b))
			if err != nil {
				t.Fatal(err)
			}
			if len(objs) > 0 {
				return false
			}
		}
		return true
	})
	// Writes went on throughout; the next round makes the lake equal the
	// table again.
	tierPK(t, n, "kvp")
	want = sqlPKRows(t, conn, "kvp", true)
	lake := lakePKRows(t, dataDir, id)
	if d := diffRows(lake, want); d != "" {
		t.Fatalf("lake after the next round (%d rows) differs from SELECT (%d rows):\n%s", len(lake), len(want), d)
	}
	t.Logf("%d upsert statements during expiry; %d rows left, partitions %v", next, len(want),
		slices.Sorted(maps.Keys(partitionsOf(want))))
}

func partitionsOf(rows map[string]string) map[string]bool {
	out := map[string]bool{}
	for k := range rows {
		_, p, _ := strings.Cut(k, "/")
		out[p] = true
	}
	return out
}

// startRound starts `mink tiering run --table T --wait` against n and
// returns once it printed the round's plan ("round of T"), with a channel
// that receives the run's output and error when it ends.
func startRound(t *testing.T, n *node, table string) (planned string, done <-chan roundResult) {
	t.Helper()
	run := exec.Command(minkBin, "tiering", "run", "--table", table, "--wait", "--server", n.admin)
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
		if strings.HasPrefix(sc.Text(), "round of "+table) {
			break
		}
	}
	planned = printed.String()
	if !strings.Contains(planned, "round of "+table) {
		_ = run.Wait()
		t.Fatalf("the round never started: %s%s", planned, stderr.String())
	}
	ch := make(chan roundResult, 1)
	go func() {
		rest, _ := io.ReadAll(stdout)
		printed.Write(rest)
		err := run.Wait()
		ch <- roundResult{out: printed.String() + stderr.String(), err: err}
	}()
	return planned, ch
}

type roundResult struct {
	out string
	err error
}

// runRoundOn runs a waited round on n, retrying while the node is not (yet)
// the lease holder.
func runRoundOn(t *testing.T, n *node, table string) string {
	t.Helper()
	var out, errOut string
	var code int
	waitFor(t, 90*time.Second, "a tiering run on "+n.admin, func() bool {
		out, errOut, code = runMinkQuiet(120*time.Second, "tiering", "run", "--table", table, "--wait", "--server", n.admin)
		if code != 0 && !strings.Contains(errOut, "retry") {
			t.Fatalf("tiering run on %s: exit %d: %s\n%s", n.admin, code, errOut, out)
		}
		return code == 0
	})
	return out
}

// TestPKTieringHolderKilled: two nodes share an etcd and an object store; a
// primary-key table (200k keys, then upserts, updates and deletes) spreads
// over both. First the lease holder (node 1) is stopped (SIGSTOP) as its
// round starts: node 2 takes the lease and completes the round, and node 1's
// round, resumed, is not recorded (its late report is rejected). Then node 2,
// now the holder, is killed (SIGKILL) as its next round starts: node 1 takes
// over the lease and the buckets, and completes tiering. Each time the lake
// read by iceberg-go equals SELECT * through mink, with no key twice.
func TestPKTieringHolderKilled(t *testing.T) {
	etcd := startTestEtcd(t)
	base := t.TempDir()
	objects := filepath.Join(base, "objects")
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
	conn := connect(t, n1.pgURL(), pgx.QueryExecModeSimpleProtocol)
	mustExec(t, conn, "CREATE TABLE kv (id bigint PRIMARY KEY, v text, n integer NOT NULL DEFAULT 0) WITH (buckets = 4)")
	const keys = 200_000
	for from := 1; from <= keys; from += 50_000 {
		mustExec(t, conn, fmt.Sprintf("INSERT INTO kv (id, v, n) SELECT i, 'row ' || i || ' with some text to make it longer', i FROM generate_series(%d, %d) AS g(i)", from, from+49_999))
	}
	mustExec(t, conn, "INSERT INTO kv (id, v, n) SELECT i, 'up' || i, -i FROM generate_series(199000, 201000) AS g(i) ON CONFLICT (id) DO UPDATE SET v = excluded.v, n = excluded.n")
	mustExec(t, conn, "UPDATE kv SET v = NULL WHERE id % 1000 = 7")
	mustExec(t, conn, "DELETE FROM kv WHERE id % 1000 = 3")
	var leaders []catalog.NodeID
	for _, b := range tableBuckets(t, n1, "kv") {
		leaders = append(leaders, b.Leader)
	}
	if !slices.Contains(leaders, 1) || !slices.Contains(leaders, 2) {
		t.Fatalf("bucket leaders %v: want buckets on both nodes", leaders)
	}
	want := sqlPKRows(t, conn, "kv", false)
	conn.Close(ctx)
	waitFor(t, 30*time.Second, "every change committed to the streams", func() bool {
		st := tableTiering(t, tieringStatus(t, n1), "kv")
		return st.End > 0 && st.End == st.LagRows+st.Tiered && st.End >= uint64(len(want))
	})
	tableID := tableTiering(t, tieringStatus(t, n1), "kv").ID

	// 1. SIGSTOP node 1 as its round starts.
	planned, stale := startRound(t, n1, "kv")
	n1.signal(syscall.SIGSTOP)
	t.Logf("node 1's round printed before SIGSTOP:\n%s", planned)
	waitFor(t, 60*time.Second, "node 2 coordinator", func() bool {
		st := clusterStatus(t, n2.admin)
		return st.Coordinator.Node == 2 && st.Coordinator.LeaseHolder == 2
	})
	t.Logf("node 2's round printed:\n%s", runRoundOn(t, n2, "kv"))
	st := tableTiering(t, tieringStatus(t, n2), "kv")
	if st.LagRows != 0 || st.LastError != "" {
		t.Fatalf("status on node 2: %+v", st)
	}
	n1.signal(syscall.SIGCONT)
	select {
	case r := <-stale:
		if r.err == nil && strings.Contains(r.out, "recorded the tiered offsets") {
			t.Fatalf("node 1's stale round was recorded:\n%s", r.out)
		}
		t.Logf("node 1's stale run ended (%v):\n%s", r.err, r.out)
	case <-time.After(90 * time.Second):
		t.Fatal("node 1's run did not end after SIGCONT")
	}
	if after := tableTiering(t, tieringStatus(t, n2), "kv"); after.LakeSnapshotID != st.LakeSnapshotID || after.Tiered != st.Tiered {
		t.Fatalf("node 1's late round changed the recorded tiering: %+v, before %+v", after, st)
	}
	conn = connect(t, n2.pgURL(), pgx.QueryExecModeSimpleProtocol)
	if got := sqlPKRowsEventually(t, conn, "kv", false); diffRows(got, want) != "" {
		t.Fatalf("the table changed across the SIGSTOP:\n%s", diffRows(got, want))
	}
	if d := diffRows(lakePKRows(t, base, tableID), want); d != "" {
		t.Fatalf("lake after node 2's round differs from the table:\n%s", d)
	}

	// 2. More changes, then SIGKILL node 2 (the holder) as its round starts.
	waitFor(t, 60*time.Second, "node 1 live again", func() bool {
		a, _ := findNode(clusterStatus(t, n2.admin), 1)
		return a.Live
	})
	mustExec(t, conn, "INSERT INTO kv (id, v, n) SELECT i, 'second ' || i, i FROM generate_series(150000, 250000, 7) AS g(i) ON CONFLICT (id) DO UPDATE SET v = excluded.v, n = kv.n + 1")
	mustExec(t, conn, "DELETE FROM kv WHERE id % 1000 = 11")
	want = sqlPKRows(t, conn, "kv", false)
	conn.Close(ctx)
	waitFor(t, 30*time.Second, "the new changes committed", func() bool {
		return tableTiering(t, tieringStatus(t, n2), "kv").LagRows > 0
	})
	planned, killed := startRound(t, n2, "kv")
	n2.kill()
	t.Logf("node 2's round printed before SIGKILL:\n%s", planned)
	<-killed
	waitFor(t, 60*time.Second, "node 1 coordinator", func() bool {
		st := clusterStatus(t, n1.admin)
		return st.Coordinator.Node == 1 && st.Coordinator.LeaseHolder == 1
	})
	t.Logf("node 1's round printed:\n%s", runRoundOn(t, n1, "kv"))
	st = tableTiering(t, tieringStatus(t, n1), "kv")
	if st.LagRows != 0 || st.LastError != "" {
		t.Fatalf("status on node 1: %+v", st)
	}
	conn = connect(t, n1.pgURL(), pgx.QueryExecModeSimpleProtocol)
	got := sqlPKRowsEventually(t, conn, "kv", false)
	if d := diffRows(got, want); d != "" {
		t.Fatalf("the table after node 2 died differs from before (%d rows, want %d):\n%s", len(got), len(want), d)
	}
	lake := lakePKRows(t, base, tableID)
	if d := diffRows(lake, want); d != "" {
		t.Fatalf("lake after node 1's round (%d rows) differs from the table (%d rows):\n%s", len(lake), len(want), d)
	}
	t.Logf("%d rows in the table and the lake; tiered %d changelog records", len(want), st.Tiered)
}

// TestPKTrimmedSnapshotsLostUnavailable: a primary-key table with tiering
// off (no lake to fall back on) whose changelog was trimmed below its KV
// snapshots loses every snapshot object. After kill -9 and a restart the
// bucket never serves a partial state: SELECT and point lookups fail with
// 57P03 naming the lost state and the trim point.
func TestPKTrimmedSnapshotsLostUnavailable(t *testing.T) {
	dataDir := t.TempDir()
	n := startPKRetentionNode(t, dataDir)
	conn := connect(t, n.pgURL(), pgx.QueryExecModeSimpleProtocol)
	mustExec(t, conn, "CREATE TABLE kvoff (id bigint PRIMARY KEY, v text, n integer NOT NULL DEFAULT 0) WITH (buckets = 1, tiering = off)")
	for i, s := range []string{
		"INSERT INTO kvoff (id, v, n) SELECT i, 'v' || i, i FROM generate_series(1, 100) AS g(i)",
		"UPDATE kvoff SET n = n + 1 WHERE id % 2 = 0",
		"DELETE FROM kvoff WHERE id % 3 = 0",
	} {
		mustExec(t, conn, s)
		time.Sleep(1200 * time.Millisecond)
		t.Logf("step %d done", i)
	}
	var b server.BucketStatus
	waitFor(t, 30*time.Second, "the changelog trimmed", func() bool {
		b = tableBuckets(t, n, "kvoff")[0]
		return b.Start > 0
	})
	conn.Close(context.Background())
	n.kill()
	// The node's local tablets go too (a new disk): with them it would
	// reopen its buckets without the snapshots.
	if err := os.RemoveAll(filepath.Join(dataDir, "kv")); err != nil {
		t.Fatal(err)
	}
	store, err := objstore.NewDir(filepath.Join(dataDir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := store.List(context.Background(), fmt.Sprintf("kv/%d/", b.Bucket))
	if err != nil || len(objs) == 0 {
		t.Fatalf("KV snapshot objects: %d, %v", len(objs), err)
	}
	for _, o := range objs {
		if err := store.Delete(context.Background(), o.Key); err != nil {
			t.Fatal(err)
		}
	}
	n.start()
	n.waitHealthy()
	n.waitSQL()
	conn = connect(t, n.pgURL(), pgx.QueryExecModeSimpleProtocol)
	for _, q := range []string{"SELECT count(*) FROM kvoff", "SELECT v FROM kvoff WHERE id = 1"} {
		var x any
		began := time.Now()
		err := conn.QueryRow(context.Background(), q).Scan(&x)
		// The lost state will not come back by itself: the statement fails
		// at once, not after the 30 s a statement waits for an opening
		// bucket.
		if took := time.Since(began); took > 15*time.Second {
			t.Errorf("%s took %v to fail, want an immediate error", q, took)
		}
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "57P03" || !strings.Contains(pgErr.Message, "cannot be restored") ||
			!strings.Contains(pgErr.Message, fmt.Sprintf("trimmed to offset %d", b.Start)) {
			t.Fatalf("%s after losing every snapshot of a trimmed bucket: %v (%v), want 57P03 naming the lost state and offset %d", q, err, x, b.Start)
		}
		t.Logf("%s: %s", q, pgErr.Message)
	}
	if !strings.Contains(n.log(), "cannot be restored") {
		t.Fatal("the leader did not log the lost state")
	}
}
