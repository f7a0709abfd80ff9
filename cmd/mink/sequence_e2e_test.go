package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestSerialAcrossNodesAndKill: a bigserial primary key written through two
// nodes at once, by INSERT … RETURNING and by COPY, then again after one
// node is killed and restarted. Every row gets an id no other row has, and
// each INSERT's RETURNING lists the ids in the order of its rows.
func TestSerialAcrossNodesAndKill(t *testing.T) {
	etcd := startTestEtcd(t)
	extra := []string{"--object-store", "file://" + t.TempDir(), "--coordinator-tick", "200ms"}
	nodes := make([]*node, 2)
	for i := range nodes {
		nodes[i] = newNode(t, nodeOpts{nodeID: i + 1, etcd: strings.Join(etcd.Endpoints(), ","), leaseTTL: "3s", extra: extra})
		nodes[i].start()
		nodes[i].waitHealthy()
	}
	defer func() {
		for _, n := range nodes {
			n.stop()
		}
	}()
	ctx := context.Background()
	setup := connect(t, nodes[0].pgURL(), pgx.QueryExecModeSimpleProtocol)
	mustExec(t, setup, "CREATE TABLE serial_e2e (id bigserial PRIMARY KEY, writer text, n integer) WITH (buckets = 4)")
	setup.Close(ctx)

	var mu sync.Mutex
	ids := map[int64]string{}
	record := func(id int64, what string) {
		mu.Lock()
		defer mu.Unlock()
		if prev, ok := ids[id]; ok {
			t.Errorf("id %d given twice: %s and %s", id, prev, what)
		}
		ids[id] = what
	}
	// write inserts batches of 5 rows from one connection and checks that
	// RETURNING gives back the rows in order.
	write := func(n *node, writer string, batches int, mode pgx.QueryExecMode) {
		c := connect(t, n.pgURL(), mode)
		defer c.Close(ctx)
		for b := 0; b < batches; b++ {
			rows, err := c.Query(ctx, "INSERT INTO serial_e2e (writer, n) VALUES ($1, $2), ($1, $2 + 1), ($1, $2 + 2), ($1, $2 + 3), ($1, $2 + 4) RETURNING id, n", writer, b*5)
			if err != nil {
				t.Errorf("%s: %v", writer, err)
				return
			}
			k := 0
			for rows.Next() {
				var id int64
				var got int
				if err := rows.Scan(&id, &got); err != nil {
					t.Error(err)
				}
				if got != b*5+k {
					t.Errorf("%s batch %d: RETURNING row %d has n %d, want %d", writer, b, k, got, b*5+k)
				}
				record(id, fmt.Sprintf("%s/%d", writer, got))
				k++
			}
			if err := rows.Err(); err != nil || k != 5 {
				t.Errorf("%s batch %d: %d rows, %v", writer, b, k, err)
			}
		}
	}
	var wg sync.WaitGroup
	for i, n := range nodes {
		for j, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeSimpleProtocol} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				write(n, fmt.Sprintf("node%d-%d", i+1, j), 20, mode)
			}()
		}
	}
	wg.Wait()
	// COPY without the id column, through the second node.
	c := connect(t, nodes[1].pgURL(), pgx.QueryExecModeCacheStatement)
	copied, err := c.CopyFrom(ctx, pgx.Identifier{"serial_e2e"}, []string{"writer", "n"},
		pgx.CopyFromSlice(50, func(i int) ([]any, error) { return []any{"copy", int32(i)}, nil }))
	if err != nil || copied != 50 {
		t.Fatalf("COPY: %d rows, %v", copied, err)
	}
	c.Close(ctx)

	// Kill the first node and start it again: its cached values are gone,
	// and what it hands out next is still new.
	before := len(ids)
	nodes[0].kill()
	nodes[0].start()
	nodes[0].waitHealthy()
	nodes[0].waitSQL()
	write(nodes[0], "after-restart", 4, pgx.QueryExecModeCacheStatement)

	c = connect(t, nodes[1].pgURL(), pgx.QueryExecModeCacheStatement)
	defer c.Close(ctx)
	rows, err := c.Query(ctx, "SELECT id, writer FROM serial_e2e")
	if err != nil {
		t.Fatal(err)
	}
	stored := map[int64]bool{}
	copies := 0
	for rows.Next() {
		var id int64
		var writer string
		if err := rows.Scan(&id, &writer); err != nil {
			t.Fatal(err)
		}
		if stored[id] {
			t.Errorf("id %d stored twice", id)
		}
		stored[id] = true
		if writer == "copy" {
			copies++
		} else if _, ok := ids[id]; !ok {
			t.Errorf("stored id %d (%s) was not returned by any INSERT", id, writer)
		}
		if id <= 0 {
			t.Errorf("id %d", id)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if want := before + 20 + 50; len(stored) != want || copies != 50 || len(ids) != before+20 {
		t.Fatalf("%d rows stored (%d copied), %d returned; want %d rows", len(stored), copies, len(ids), want)
	}
	keys := slices.Sorted(maps.Keys(stored))
	t.Logf("%d ids from %d to %d", len(keys), keys[0], keys[len(keys)-1])

	// TRUNCATE … RESTART IDENTITY on the first node: both nodes, each with
	// values cached from before, hand out the new sequence's values
	// (unique, starting at 1), not their cached ones.
	mustExec(t, c, "TRUNCATE serial_e2e RESTART IDENTITY")
	ids = map[int64]string{}
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			write(n, fmt.Sprintf("restarted-node%d", i+1), 4, pgx.QueryExecModeCacheStatement)
		}()
	}
	wg.Wait()
	restarted := slices.Sorted(maps.Keys(ids))
	if len(restarted) != 40 || restarted[0] != 1 || restarted[39] > 2*128 {
		t.Fatalf("after RESTART IDENTITY the nodes handed out ids %v; want 40 from 1, within two cached ranges", restarted)
	}
}
