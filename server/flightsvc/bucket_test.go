package flightsvc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/apache/arrow-go/v18/arrow/flight"

	"github.com/minkdb/mink/internal/minktest"
)

// A bucket-addressed DoPut acknowledges every batch once durable, in
// order, with the offset of its first row.
func TestPutBucketAcks(t *testing.T) {
	n := minktest.Start(t, minktest.Options{})
	conn := connect(t, n)
	exec(t, conn, "CREATE TABLE events (id bigint NOT NULL, name text, v double precision) WITH (buckets = 2)")
	c := dialFlight(t, n.Config.FlightAddr)
	info := waitOpen(t, c, "events")
	var tk struct {
		Bucket uint64 `json:"bucket"`
	}
	json.Unmarshal(info.Endpoint[1].Ticket.Ticket, &tk)
	a := eventsBatch([]int64{1, 2, 3}, []string{"a", "b", "c"})
	b := eventsBatch([]int64{4, 5}, []string{"d", "e"})
	defer a.Release()
	defer b.Release()
	desc := &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"events", "bucket", strconv.FormatUint(tk.Bucket, 10)}}
	results, err := doPut(t, c, desc, a, b, a)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range results {
		got = append(got, string(r.AppMetadata))
	}
	want := []string{
		fmt.Sprintf(`{"bucket":%d,"offset":0,"rows":3}`, tk.Bucket),
		fmt.Sprintf(`{"bucket":%d,"offset":3,"rows":2}`, tk.Bucket),
		fmt.Sprintf(`{"bucket":%d,"offset":5,"rows":3}`, tk.Bucket),
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("acks %v, want %v", got, want)
	}
	// Only that bucket got the rows.
	info = waitOpen(t, c, "events")
	for _, ep := range info.Endpoint {
		var e struct {
			Bucket uint64 `json:"bucket"`
		}
		json.Unmarshal(ep.AppMetadata, &e)
		rows, err := readEndpoint(context.Background(), c, ep)
		if err != nil {
			t.Fatal(err)
		}
		if wantRows := map[bool]int{true: 8, false: 0}[e.Bucket == tk.Bucket]; len(rows) != wantRows {
			t.Fatalf("bucket %d has %d rows, want %d", e.Bucket, len(rows), wantRows)
		}
	}
	// A ticket reads a range: rows [2, 6) of the bucket.
	ticket, _ := json.Marshal(map[string]any{"v": 1, "bucket": tk.Bucket, "from": 2, "to": 6, "columns": []string{"id"}})
	rows, err := readEndpoint(context.Background(), c, &flight.FlightEndpoint{Ticket: &flight.Ticket{Ticket: ticket}})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(rows) != "[3 4 5 1]" {
		t.Fatalf("rows [2, 6): %v", rows)
	}
}

// GetFlightInfo of a partitioned table lists the selected partitions'
// buckets only.
func TestPartitionFilter(t *testing.T) {
	n := minktest.Start(t, minktest.Options{})
	conn := connect(t, n)
	exec(t, conn, "CREATE TABLE p (id bigint, dt date) PARTITION BY LIST (dt) WITH (buckets = 2)",
		"INSERT INTO p VALUES (1, '2024-01-01'), (2, '2024-01-02'), (3, '2024-01-02'), (4, '2024-01-03')")
	c := dialFlight(t, n.Config.FlightAddr)
	waitOpen(t, c, "p")
	all, err := c.GetFlightInfo(context.Background(), &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"p"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Endpoint) != 6 || all.TotalRecords != 4 {
		t.Fatalf("%d endpoints, %d records; want 3 partitions × 2 buckets, 4 rows", len(all.Endpoint), all.TotalRecords)
	}
	cmd, _ := json.Marshal(map[string]any{"table": "p", "partitions": []string{"2024-01-02"}, "columns": []string{"id"}})
	info, err := c.GetFlightInfo(context.Background(), &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: cmd})
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Endpoint) != 2 {
		t.Fatalf("%d endpoints for one partition", len(info.Endpoint))
	}
	for _, ep := range info.Endpoint {
		var meta struct {
			Partition string `json:"partition"`
		}
		if json.Unmarshal(ep.AppMetadata, &meta); meta.Partition != "2024-01-02" {
			t.Fatalf("endpoint metadata %s", ep.AppMetadata)
		}
	}
	if got := fmt.Sprint(readAll(t, c, info)); got != "[2 3]" {
		t.Fatalf("rows %s", got)
	}
	// A table-addressed DoPut creates partitions as INSERT does.
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "dt", Type: arrow.FixedWidthTypes.Date32}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	for i, day := range []string{"2024-02-01", "2024-01-02", "2024-02-01"} {
		d, _ := time.Parse("2006-01-02", day)
		b.Field(0).(*array.Int64Builder).Append(int64(10 + i))
		b.Field(1).(*array.Date32Builder).Append(arrow.Date32FromTime(d))
	}
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	if _, err := doPut(t, c, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"p"}}, rec); err != nil {
		t.Fatal(err)
	}
	var feb, jan2 int64
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FILTER (WHERE dt = '2024-02-01'), count(*) FILTER (WHERE dt = '2024-01-02') FROM p").Scan(&feb, &jan2); err != nil {
		t.Fatal(err)
	}
	if feb != 2 || jan2 != 3 {
		t.Fatalf("after DoPut: %d rows on 2024-02-01 (want 2), %d on 2024-01-02 (want 3)", feb, jan2)
	}
}
