package client_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/minkdb/mink/client"
	"github.com/minkdb/mink/internal/minktest"
)

func TestAppendAndScan(t *testing.T) {
	n := minktest.Start(t, minktest.Options{})
	conn := connect(t, n)
	exec(t, conn, "CREATE TABLE kv (id bigint NOT NULL, s text) WITH (buckets = 4, bucket_key = 'id')",
		"CREATE TABLE rr (id bigint, s text) WITH (buckets = 3)")
	c := dial(t, n.Config.FlightAddr)
	ctx := context.Background()
	for _, table := range []string{"kv", "rr"} {
		for from := int64(0); from < 3000; from += 1000 {
			rec := kvBatch(from, from+1000)
			if err := c.AppendTable(ctx, table, rec); err != nil {
				t.Fatalf("%s: %v", table, err)
			}
			rec.Release()
		}
		checkOnce(t, scanIDs(t, c, table, client.ScanOptions{}), 0, 3000)
		if got := count(t, conn, "SELECT count(DISTINCT id) FROM "+table); got != 3000 {
			t.Fatalf("%s: SQL sees %d distinct ids", table, got)
		}
	}
	// Projection in a chosen order.
	rdr, err := c.Scan(ctx, "kv", client.ScanOptions{Columns: []string{"s", "id"}})
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	for rdr.Next() {
		rec := rdr.RecordBatch()
		if rec.NumCols() != 2 || rec.ColumnName(0) != "s" {
			t.Fatalf("projected batch %v", rec.Schema())
		}
		s, id := rec.Column(0).(*array.String), rec.Column(1).(*array.Int64)
		for i := 0; i < s.Len(); i++ {
			if s.Value(i) != fmt.Sprintf("s%d", id.Value(i)) {
				t.Fatalf("row %d: s %q id %d", i, s.Value(i), id.Value(i))
			}
		}
		rows += int(rec.NumRows())
	}
	if err := rdr.Err(); err != nil || rows != 3000 {
		t.Fatalf("projected scan: %d rows, %v", rows, err)
	}
	rdr.Release()

	// The client's rows land in the same buckets as the SQL front end's:
	// DoPut by bucket and INSERT agree on the bucket of every key, so a
	// bucket holds each id once whichever way it was written.
	exec(t, conn, "INSERT INTO kv SELECT id + 3000, 'x' FROM kv")
	checkOnce(t, scanIDs(t, c, "kv", client.ScanOptions{}), 0, 6000)

	// Releasing a scan before the end stops its reads (TestMain checks
	// for leaked goroutines).
	rdr, err = c.Scan(ctx, "kv", client.ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rdr.Next() {
		t.Fatal(rdr.Err())
	}
	rdr.Release()

	if _, err := c.Scan(ctx, "nope", client.ScanOptions{}); !errors.Is(err, client.ErrNoSuchTable) {
		t.Fatalf("scan of a missing table: %v", err)
	}
	rec := kvBatch(0, 1)
	defer rec.Release()
	if err := c.AppendTable(ctx, "nope", rec); !errors.Is(err, client.ErrNoSuchTable) {
		t.Fatalf("append to a missing table: %v", err)
	}
	// kv is a log table: no upsert, lookup or changelog.
	if err := c.PutTable(ctx, "kv", rec); !errors.Is(err, client.ErrWrongKind) {
		t.Fatalf("PutTable into a log table: %v", err)
	}
	if _, err := c.Lookup(ctx, "kv", rec); !errors.Is(err, client.ErrWrongKind) {
		t.Fatalf("Lookup in a log table: %v", err)
	}
	if _, err := c.Scan(ctx, "kv", client.ScanOptions{Changelog: true}); !errors.Is(err, client.ErrWrongKind) {
		t.Fatalf("changelog scan of a log table: %v", err)
	}
}

func TestAppendPartitioned(t *testing.T) {
	n := minktest.Start(t, minktest.Options{})
	conn := connect(t, n)
	exec(t, conn, "CREATE TABLE ev (id bigint NOT NULL, dt date, s text) PARTITION BY LIST (dt) WITH (buckets = 2, bucket_key = 'id')",
		"INSERT INTO ev VALUES (-1, '2024-01-01', 'sql')")
	c := dial(t, n.Config.FlightAddr)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "s", Type: arrow.BinaryTypes.String},
		{Name: "dt", Type: arrow.FixedWidthTypes.Date32},
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	days := []string{"2024-01-01", "2024-01-02", "2024-01-03"}
	for id := int64(0); id < 300; id++ {
		b.Field(0).(*array.StringBuilder).Append("c")
		d, _ := time.Parse("2006-01-02", days[id%3])
		b.Field(1).(*array.Date32Builder).Append(arrow.Date32FromTime(d))
		b.Field(2).(*array.Int64Builder).Append(id)
	}
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	if err := c.AppendTable(context.Background(), "ev", rec); err != nil {
		t.Fatal(err)
	}
	for i, day := range days {
		want := int64(100)
		if i == 0 {
			want++ // the SQL row
		}
		if got := count(t, conn, "SELECT count(*) FROM ev WHERE dt = '"+day+"'"); got != want {
			t.Fatalf("%s: %d rows, want %d", day, got, want)
		}
	}
	got := scanIDs(t, c, "ev", client.ScanOptions{Partitions: []string{"2024-01-02"}})
	if len(got) != 100 {
		t.Fatalf("partition 2024-01-02: %d ids", len(got))
	}
	for id := range got {
		if id%3 != 1 {
			t.Fatalf("partition filter returned id %d", id)
		}
	}
}

// Many goroutines append at once, on one node and on two (through node 1,
// which leads only some of the buckets): every acknowledged row is there
// once.
func TestConcurrentAppend(t *testing.T) {
	t.Run("one node", func(t *testing.T) {
		concurrentAppend(t, []*minktest.Node{minktest.Start(t, minktest.Options{})})
	})
	t.Run("two nodes", func(t *testing.T) { concurrentAppend(t, startCluster(t, 2)) })
}

func concurrentAppend(t *testing.T, nodes []*minktest.Node) {
	conn := connect(t, nodes[0])
	exec(t, conn, "CREATE TABLE kv (id bigint NOT NULL, s text) WITH (buckets = 4, bucket_key = 'id')")
	c := dial(t, nodes[0].Config.FlightAddr)
	const writers, calls, rows = 16, 10, 250
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < calls; k++ {
				from := int64((w*calls + k) * rows)
				rec := kvBatch(from, from+rows)
				err := c.AppendTable(context.Background(), "kv", rec)
				rec.Release()
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	checkOnce(t, scanIDs(t, c, "kv", client.ScanOptions{}), 0, writers*calls*rows)
	if len(nodes) == 1 {
		if got := count(t, conn, "SELECT count(*) FROM kv"); got != writers*calls*rows {
			t.Fatalf("SQL sees %d rows", got)
		}
	}
}
