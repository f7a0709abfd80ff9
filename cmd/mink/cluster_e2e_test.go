package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/minkdb/mink/server"
)

// Three nodes on one etcd and one object store: a node that joins moves
// nothing, new tables spread over it, and `mink cluster rebalance`, run on
// any node and forwarded to the coordinator, evens the load within the
// 110%/90% band, one bucket at a time, each open on its new leader.
func TestJoinAndRebalance(t *testing.T) {
	etcd := startTestEtcd(t)
	endpoints := strings.Join(etcd.Endpoints(), ",")
	store := "file://" + t.TempDir()
	extra := []string{"--object-store", store, "--coordinator-tick", "200ms"}
	nodes := make([]*node, 3)
	for i := range nodes {
		nodes[i] = newNode(t, nodeOpts{nodeID: i + 1, etcd: endpoints, leaseTTL: "3s", extra: extra})
	}
	nodes[0].start()
	nodes[0].waitHealthy()

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://mink@%s/mink?sslmode=disable", nodes[0].pgAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE TABLE first (a bigint) WITH (buckets = 6)"); err != nil {
		t.Fatal(err)
	}
	led := func(st server.ClusterStatus) string {
		var parts []string
		for _, n := range st.Nodes {
			parts = append(parts, fmt.Sprint(n.BucketsLed))
		}
		return strings.Join(parts, "/")
	}
	nodes[1].start()
	nodes[2].start()
	nodes[1].waitHealthy()
	nodes[2].waitHealthy()
	var st server.ClusterStatus
	waitFor(t, 30*time.Second, "three live nodes", func() bool {
		st = clusterStatus(t, nodes[2].admin)
		live := 0
		for _, n := range st.Nodes {
			if n.Live {
				live++
			}
		}
		return live == 3
	})
	if got := led(st); got != "6/0/0" {
		t.Fatalf("after two nodes joined: buckets led %s, want 6/0/0 (nothing moves on join)", got)
	}
	// A new table spreads over the new nodes.
	if _, err := conn.Exec(ctx, "CREATE TABLE second (a bigint) WITH (buckets = 3)"); err != nil {
		t.Fatal(err)
	}
	st = clusterStatus(t, nodes[0].admin)
	if got := led(st); got != "7/1/1" {
		t.Fatalf("after creating a 3-bucket table: buckets led %s, want 7/1/1", got)
	}

	// Dry run on node 3, forwarded to the coordinator (node 1).
	out, errOut, code := runMink(t, 60*time.Second, "cluster", "rebalance", "--dry-run", "--server", nodes[2].admin)
	if code != 0 || !strings.Contains(out, "plan (coordinator: node 1): 4 moves") || !strings.Contains(out, "dry run: nothing moved") {
		t.Fatalf("dry run: exit %d\n%s\n%s", code, out, errOut)
	}
	if got := led(clusterStatus(t, nodes[0].admin)); got != "7/1/1" {
		t.Fatalf("a dry run moved buckets: %s", got)
	}
	out, errOut, code = runMink(t, 120*time.Second, "cluster", "rebalance", "--server", nodes[1].admin)
	if code != 0 || !strings.Contains(out, "[4/4]") || !strings.Contains(out, "done: 4 buckets moved") {
		t.Fatalf("rebalance: exit %d\n%s\n%s", code, out, errOut)
	}
	if got := led(clusterStatus(t, nodes[0].admin)); got != "3/3/3" {
		t.Fatalf("after rebalance: buckets led %s, want 3/3/3", got)
	}
	raw, errOut, code := runMink(t, 30*time.Second, "table", "buckets", "first", "--json", "--server", nodes[1].admin)
	if code != 0 {
		t.Fatalf("table buckets: %s", errOut)
	}
	var bs []server.BucketStatus
	if err := json.Unmarshal([]byte(raw), &bs); err != nil || len(bs) != 6 {
		t.Fatalf("table buckets: %v\n%s", err, raw)
	}
	for _, b := range bs {
		if !b.Open || b.Leader == 0 {
			t.Fatalf("bucket not open after rebalance: %+v", b)
		}
	}
	// Nothing left to move.
	out, _, code = runMink(t, 60*time.Second, "cluster", "rebalance", "--server", nodes[0].admin)
	if code != 0 || !strings.Contains(out, "nothing to move") {
		t.Fatalf("second rebalance: %s", out)
	}
	_, errOut, code = runMink(t, 30*time.Second, "table", "buckets", "nope", "--server", nodes[0].admin)
	if code == 0 || !strings.Contains(errOut, `table "nope" does not exist`) {
		t.Fatalf("unknown table: %d %s", code, errOut)
	}
	// SQL on any node reaches every bucket: writes are forwarded to the
	// leaders, queries read the buckets led elsewhere over Flight.
	conns := make([]*pgx.Conn, 3)
	for i, n := range nodes {
		if conns[i], err = pgx.Connect(ctx, fmt.Sprintf("postgres://mink@%s/mink?sslmode=disable", n.pgAddr())); err != nil {
			t.Fatal(err)
		}
		defer conns[i].Close(ctx)
	}
	if _, err := conns[0].Exec(ctx, "CREATE TABLE keyed (a bigint) WITH (buckets = 6, bucket_key = 'a')"); err != nil {
		t.Fatal(err)
	}
	for i, c := range conns {
		if _, err := c.Exec(ctx, fmt.Sprintf("INSERT INTO keyed SELECT range + %d FROM range(1000)", i*1000)); err != nil {
			t.Fatalf("insert through node %d: %v", i+1, err)
		}
	}
	for i, c := range conns {
		var count, distinct int64
		if err := c.QueryRow(ctx, "SELECT count(*), count(DISTINCT a) FROM keyed").Scan(&count, &distinct); err != nil {
			t.Fatalf("query through node %d: %v", i+1, err)
		}
		if count != 3000 || distinct != 3000 {
			t.Fatalf("through node %d: %d rows, %d distinct, want 3000", i+1, count, distinct)
		}
	}
	for _, n := range nodes {
		n.stop()
	}
}
