package sqlfront_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/minkdb/mink/internal/minktest"
	"github.com/minkdb/mink/sqlfront"
)

// Queries fixing the partition column read only the matching partitions,
// and return exactly the rows an unpruned scan would.
func TestPartitionPruning(t *testing.T) {
	n := minktest.Start(t, minktest.Options{})
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, n.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec("CREATE TABLE clicks (user_id bigint, url text, dt date) PARTITION BY LIST (dt) WITH (buckets = 2, bucket_key = 'user_id')")
	exec("INSERT INTO clicks VALUES (1, 'a', '2024-01-01'), (2, 'b', '2024-01-02'), (3, 'c', '2024-01-02'), (4, 'd', '2024-01-03')")
	exec("CREATE TABLE clicks_0104 PARTITION OF clicks FOR VALUES IN ('2024-01-04')")
	front := n.Server.SQLFrontend().(*sqlfront.Frontend)
	// Pruning is of bucket reads; mirrored statements read no buckets.
	front.SetMirrors(false)

	cases := []struct {
		sql     string
		args    []any
		want    int64
		buckets uint64 // buckets read: 2 per partition
	}{
		{"SELECT count(*) FROM clicks", nil, 4, 8},
		{"SELECT count(*) FROM clicks WHERE dt = '2024-01-02'", nil, 2, 2},
		{"SELECT count(*) FROM clicks c WHERE c.dt = DATE '2024-1-2' AND user_id > 2", nil, 1, 2},
		{"SELECT count(*) FROM clicks WHERE dt IN ('2024-01-01', '2024-01-03')", nil, 2, 4},
		{"SELECT count(*) FROM clicks WHERE dt = $1", []any{"2024-01-03"}, 1, 2},
		{"SELECT count(*) FROM clicks WHERE dt = '2030-01-01'", nil, 0, 0},
		{"SELECT count(*) FROM clicks WHERE dt = '2024-01-02' OR user_id = 1", nil, 3, 8},
		// A second scan of the table (the subquery) needs its own
		// partitions: no pruning.
		{"SELECT count(*) FROM clicks WHERE dt = '2024-01-02' AND user_id IN (SELECT user_id FROM clicks WHERE dt = '2024-01-01')", nil, 0, 16},
	}
	for _, c := range cases {
		before := front.BucketScans()
		var got int64
		if err := conn.QueryRow(ctx, c.sql, c.args...).Scan(&got); err != nil {
			t.Fatalf("%s: %v", c.sql, err)
		}
		scanned := front.BucketScans() - before
		if got != c.want || scanned != c.buckets {
			t.Fatalf("%s: %d rows from %d buckets, want %d rows from %d buckets", c.sql, got, scanned, c.want, c.buckets)
		}
	}
	// A later statement without the filter reads everything again.
	var all int64
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM clicks", pgx.QueryExecModeSimpleProtocol).Scan(&all); err != nil || all != 4 {
		t.Fatalf("count after pruned queries: %d %v", all, err)
	}
}

// A text partition column prunes too (the partition value must not alias
// the engine's memory).
func TestPartitionPruningText(t *testing.T) {
	n := minktest.Start(t, minktest.Options{})
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, n.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, sql := range []string{
		"CREATE TABLE r (id int, region text) PARTITION BY LIST (region)",
		"INSERT INTO r VALUES (1, 'eu'), (2, 'us'), (3, 'eu')",
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3; i++ {
		var c int64
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM r WHERE region = 'eu'").Scan(&c); err != nil || c != 2 {
			t.Fatalf("count in eu: %d %v", c, err)
		}
	}
}
