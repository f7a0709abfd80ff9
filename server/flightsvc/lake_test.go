package flightsvc_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/minkdb/mink/server"
)

// TestUnionReadAcrossNodes: a tiered table whose buckets are led by two
// nodes is read on each node as lake rows below the tiered offsets plus
// each bucket's stream after them, the other node's bucket through
// Pool.ReadBucketFrom: every row once, before and after more inserts and
// rounds.
func TestUnionReadAcrossNodes(t *testing.T) {
	n1, n2 := startPair(t)
	c1, c2 := connect(t, n1), connect(t, n2)
	exec(t, c1, "CREATE TABLE events (id bigint NOT NULL, name text, v double precision) WITH (buckets = 2)")
	raw := dialFlight(t, n1.Config.FlightAddr)
	bucketOn(t, raw, "events", 2)
	bucketOn(t, raw, "events", 1)
	ctx := context.Background()
	next := 0
	insert := func(k int) {
		for range 4 { // statements go round-robin over the buckets
			var b strings.Builder
			b.WriteString("INSERT INTO events VALUES ")
			for i := 0; i < k; i++ {
				if i > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, "(%d, 'n%d', %d.5)", next, next, next)
				next++
			}
			exec(t, c1, b.String())
		}
	}
	check := func(stage string) {
		t.Helper()
		want := int64(next) * int64(next-1) / 2
		for i, c := range []*pgx.Conn{c1, c2} {
			var count, distinct, sum int64
			if err := c.QueryRow(ctx, "SELECT count(*), count(DISTINCT id), sum(id) FROM events").Scan(&count, &distinct, &sum); err != nil {
				t.Fatalf("%s: node %d: %v", stage, i+1, err)
			}
			if count != int64(next) || distinct != count || sum != want {
				t.Fatalf("%s: node %d: count %d distinct %d sum %d, want %d rows summing to %d", stage, i+1, count, distinct, sum, next, want)
			}
		}
	}
	admin := server.NewAdminClient(n1.Config.AdminAddr)
	tier := func() {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			st, err := admin.TieringStatus(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var end uint64
			for _, tt := range st.Tables {
				if tt.Table == "events" {
					end = tt.End
				}
			}
			if end == uint64(next) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("committed rows %d, want %d", end, next)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err := admin.TieringRun(ctx, "events", true, func(server.TieringRunEvent) {}); err != nil {
			t.Fatal(err)
		}
	}
	for round := 0; round < 3; round++ {
		insert(50 + round)
		check(fmt.Sprintf("round %d before tiering", round))
		tier()
		check(fmt.Sprintf("round %d after tiering", round))
		insert(7)
		check(fmt.Sprintf("round %d after more inserts", round))
	}
	st, err := admin.TieringStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range st.Tables {
		if tt.Table == "events" && (tt.Tiered == 0 || tt.Tiered >= uint64(next)) {
			t.Fatalf("tiering status %+v: want some rows tiered and some not (%d rows)", tt, next)
		}
	}
}
