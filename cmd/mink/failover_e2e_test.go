package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// kill -9 of a bucket leader under continuous writes (spec, "Failover"):
// the coordinator moves its buckets after lease_ttl, the new leaders take
// over (fence, replay and seal the dead node's WAL), and every acknowledged
// row is present exactly once. Reports the time from the kill until every
// bucket is served again.
func TestKillLeaderUnderWrites(t *testing.T) {
	etcd := startTestEtcd(t)
	endpoints := strings.Join(etcd.Endpoints(), ",")
	extra := []string{"--object-store", "file://" + t.TempDir(), "--coordinator-tick", "500ms"}
	nodes := make([]*node, 3)
	for i := range nodes {
		nodes[i] = newNode(t, nodeOpts{nodeID: i + 1, etcd: endpoints, leaseTTL: "2s", extra: extra})
		nodes[i].start()
	}
	for _, n := range nodes {
		n.waitHealthy()
	}
	ctx := context.Background()
	waitFor(t, 30*time.Second, "three live nodes", func() bool {
		st := clusterStatus(t, nodes[0].admin)
		live := 0
		for _, n := range st.Nodes {
			if n.Live {
				live++
			}
		}
		return live == 3
	})
	url := fmt.Sprintf("postgres://mink@%s/mink?sslmode=disable", nodes[0].pgAddr())
	setup, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer setup.Close(ctx)
	if _, err := setup.Exec(ctx, "CREATE TABLE w (id bigint NOT NULL, writer int) WITH (buckets = 6, bucket_key = 'id')"); err != nil {
		t.Fatal(err)
	}
	if st := clusterStatus(t, nodes[0].admin); st.Nodes[2].BucketsLed == 0 {
		t.Fatalf("node 3 leads no bucket: %+v", st.Nodes)
	}

	// Writers on nodes 1 and 2 insert single rows (each lands in one
	// bucket, some led by node 3) and record what was acknowledged.
	var mu sync.Mutex
	acked := map[int64]bool{}
	var killedAt, recoveredAt time.Time
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://mink@%s/mink?sslmode=disable", nodes[w].pgAddr()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int64(0); ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := int64(w)<<40 | i
				cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				_, err := conn.Exec(cctx, "INSERT INTO w VALUES ($1, $2)", id, w)
				cancel()
				if err != nil {
					continue // not acknowledged; may or may not be present
				}
				mu.Lock()
				acked[id] = true
				mu.Unlock()
			}
		}()
	}
	time.Sleep(1500 * time.Millisecond)
	mu.Lock()
	killedAt = time.Now()
	before := len(acked)
	mu.Unlock()
	nodes[2].kill()

	// Wait until every bucket is led by a live node and open again.
	waitFor(t, 60*time.Second, "node 3's buckets served again", func() bool {
		out, _, code := runMink(t, 30*time.Second, "table", "buckets", "w", "--json", "--server", nodes[0].admin)
		return code == 0 && !strings.Contains(out, `"leader": 3`) && !strings.Contains(out, `"open": false`)
	})
	recoveredAt = time.Now()
	// Writes to every bucket succeed again.
	probe, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close(ctx)
	for i := int64(0); i < 60; i++ {
		id := int64(7)<<40 | i
		if _, err := probe.Exec(ctx, "INSERT INTO w VALUES ($1, 7)", id); err != nil {
			t.Fatalf("write after failover: %v", err)
		}
		mu.Lock()
		acked[id] = true
		mu.Unlock()
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	t.Logf("kill -9 to all buckets served again: %v (lease ttl 2s, tick 0.5s); %d rows acknowledged before the kill, %d in all",
		recoveredAt.Sub(killedAt).Round(10*time.Millisecond), before, len(acked))

	rows, err := setup.Query(ctx, "SELECT id FROM w")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	for rows.Next() {
		var id int64
		rows.Scan(&id)
		seen[id]++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for id, n := range seen {
		if n > 1 {
			t.Fatalf("row %d present %d times", id, n)
		}
	}
	for id := range acked {
		if seen[id] != 1 {
			t.Fatalf("acknowledged row %d missing (%d acknowledged, %d present)", id, len(acked), len(seen))
		}
	}
	nodes[0].stop()
	nodes[1].stop()
}
