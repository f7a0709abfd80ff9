package server_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/minkdb/mink/internal/minktest"
)

// /metrics counts the node's WAL writes: every INSERT is an entry of a
// durable WAL write, the writes carry bytes, and the latency histogram
// counts each write once.
func TestWALMetrics(t *testing.T) {
	n := minktest.Start(t, minktest.Options{})
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, n.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE TABLE w (a bigint) WITH (buckets = 1)"); err != nil {
		t.Fatal(err)
	}
	scrape := func() map[string]float64 {
		t.Helper()
		resp, err := http.Get("http://" + n.Config.AdminAddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		out := map[string]float64{}
		for _, line := range strings.Split(string(body), "\n") {
			if !strings.HasPrefix(line, "mink_wal_") {
				continue
			}
			name, value, _ := strings.Cut(line, " ")
			v, err := strconv.ParseFloat(value, 64)
			if err != nil {
				t.Fatalf("metric line %q", line)
			}
			out[name] = v
		}
		return out
	}
	before := scrape()
	const inserts = 20
	for i := range inserts {
		if _, err := conn.Exec(ctx, "INSERT INTO w VALUES ($1)", i); err != nil {
			t.Fatal(err)
		}
	}
	after := scrape()
	delta := func(name string) float64 { return after[name] - before[name] }
	if got := delta("mink_wal_entries_total"); got < inserts {
		t.Errorf("mink_wal_entries_total grew by %v over %d INSERTs, want at least %d", got, inserts, inserts)
	}
	if w := delta("mink_wal_writes_total"); w < 1 || w > delta("mink_wal_entries_total") {
		t.Errorf("mink_wal_writes_total grew by %v, want between 1 and the entries' %v", w, delta("mink_wal_entries_total"))
	}
	if got := delta("mink_wal_bytes_total"); got < inserts*8 {
		t.Errorf("mink_wal_bytes_total grew by %v over %d INSERTs", got, inserts)
	}
	if after["mink_wal_write_seconds_count"] != after["mink_wal_writes_total"] || after[`mink_wal_write_seconds_bucket{le="+Inf"}`] != after["mink_wal_writes_total"] {
		t.Errorf("mink_wal_write_seconds counts %v writes (+Inf bucket %v), mink_wal_writes_total %v",
			after["mink_wal_write_seconds_count"], after[`mink_wal_write_seconds_bucket{le="+Inf"}`], after["mink_wal_writes_total"])
	}
	if after["mink_wal_write_seconds_sum"] <= 0 {
		t.Errorf("mink_wal_write_seconds_sum %v, want the writes' time", after["mink_wal_write_seconds_sum"])
	}
	if _, ok := after["mink_wal_write_failures_total"]; !ok {
		t.Errorf("no mink_wal_write_failures_total in %v", after)
	}
}
