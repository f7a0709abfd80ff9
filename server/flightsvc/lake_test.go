package flightsvc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/jackc/pgx/v5"

	"github.com/minkdb/mink/internal/flightwire"
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

// TestLakeEndpointsOnAnyNode: a tiered table whose streams log_retention
// trimmed, with buckets led by two nodes. Each bucket's lake endpoint
// (rows below the stream's start) reads the same rows on either node, the
// non-leader included; with the stream endpoints the rows are those of
// SELECT, once each.
func TestLakeEndpointsOnAnyNode(t *testing.T) {
	n1, n2 := startPair(t)
	c1 := connect(t, n1)
	exec(t, c1, "CREATE TABLE events (id bigint NOT NULL, name text) WITH (buckets = 2, log_retention = '1s')")
	raw1, raw2 := dialFlight(t, n1.Config.FlightAddr), dialFlight(t, n2.Config.FlightAddr)
	bucketOn(t, raw1, "events", 1)
	bucketOn(t, raw1, "events", 2)
	ctx := context.Background()
	for i := range 4 { // statements go round-robin over the buckets
		exec(t, c1, fmt.Sprintf("INSERT INTO events SELECT g, 'n' || g FROM generate_series(%d, %d) AS s(g)", i*100, i*100+99))
	}
	admin := server.NewAdminClient(n1.Config.AdminAddr)
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := admin.TieringStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Tables) == 1 && st.Tables[0].End == 400 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("committed rows: %+v", st.Tables)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := admin.TieringRun(ctx, "events", true, func(server.TieringRunEvent) {}); err != nil {
		t.Fatal(err)
	}
	for deadline = time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		bs, err := admin.TableBuckets(ctx, "events")
		if err != nil {
			t.Fatal(err)
		}
		trimmed := 0
		for _, b := range bs {
			if b.Start > 0 && b.Start == b.End {
				trimmed++
			}
		}
		if trimmed == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("streams not trimmed to their tiered offsets: %+v", bs)
		}
	}
	exec(t, c1, "INSERT INTO events VALUES (400, 'n400'), (401, 'n401')")

	info, err := raw1.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"events"}})
	if err != nil {
		t.Fatal(err)
	}
	var all []int64
	lakeEndpoints := 0
	for _, ep := range info.Endpoint {
		var meta flightwire.EndpointMeta
		if err := json.Unmarshal(ep.AppMetadata, &meta); err != nil {
			t.Fatal(err)
		}
		if !meta.Lake {
			leader := raw1
			if meta.Leader == 2 {
				leader = raw2
			}
			ids := endpointIDs(t, leader, ep.Ticket.Ticket, "the leader")
			all = append(all, ids...)
			continue
		}
		lakeEndpoints++
		on1, on2 := endpointIDs(t, raw1, ep.Ticket.Ticket, "node 1"), endpointIDs(t, raw2, ep.Ticket.Ticket, "node 2")
		if !slices.Equal(on1, on2) || len(on1) == 0 {
			t.Fatalf("bucket %d (leader node %d): the lake endpoint reads %d rows on node 1, %d on node 2", meta.Bucket, meta.Leader, len(on1), len(on2))
		}
		all = append(all, on1...)
	}
	if lakeEndpoints != 2 {
		t.Fatalf("%d lake endpoints, want one per bucket", lakeEndpoints)
	}
	slices.Sort(all)
	want := make([]int64, 402)
	for i := range want {
		want[i] = int64(i)
	}
	if !slices.Equal(all, want) {
		t.Fatalf("the endpoints read %d rows, want ids 0..401 once each", len(all))
	}
}

// endpointIDs reads a ticket's "id" column at c, following no redirect.
func endpointIDs(t *testing.T, c flight.Client, ticket []byte, where string) []int64 {
	t.Helper()
	var ids []int64
	err := flightwire.GetStream(context.Background(), c, ticket, nil, func(rec arrow.RecordBatch, _ flightwire.BatchMeta) error {
		ids = append(ids, rec.Column(0).(*array.Int64).Int64Values()...)
		return nil
	})
	if err != nil {
		t.Fatalf("DoGet on %s: %v", where, err)
	}
	return ids
}
