package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/jackc/pgx/v5"

	"github.com/minkdb/mink/client"
	"github.com/minkdb/mink/internal/flightwire"
)

// flightIDRead is what one DoGet returned: the "id" and "msg" of every
// row, and the offset each message's app_metadata gave for its first row.
type flightIDRead struct {
	ids     []int64
	msgs    []string
	offsets []uint64 // of every row, from the messages' metadata
}

// doGetIDs reads a ticket with a raw arrow-go Flight client.
func doGetIDs(t *testing.T, c flight.Client, ticket []byte) (flightIDRead, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out flightIDRead
	err := flightwire.GetStream(ctx, c, ticket, nil, func(rec arrow.RecordBatch, meta flightwire.BatchMeta) error {
		ids := rec.Column(rec.Schema().FieldIndices("id")[0]).(*array.Int64)
		var msgs *array.String
		if idx := rec.Schema().FieldIndices("msg"); len(idx) == 1 {
			msgs = rec.Column(idx[0]).(*array.String)
		}
		for i := range ids.Len() {
			out.ids = append(out.ids, ids.Value(i))
			if msgs != nil {
				out.msgs = append(out.msgs, msgs.Value(i))
			}
			out.offsets = append(out.offsets, meta.Offset+uint64(i))
		}
		return nil
	})
	return out, err
}

// TestFlightReadsTrimmedRows: once log_retention trimmed a tiered table's
// streams, GetFlightInfo hands out, per bucket, an endpoint of the rows
// only the lake holds (no location: any node serves it) and one of the
// stream's rows; read endpoint after endpoint by a raw Flight client, and
// by mink's Go client, they are every row of SELECT exactly once, with
// dense offsets per bucket. A ticket that starts inside the lake part
// continues into the stream.
func TestFlightReadsTrimmedRows(t *testing.T) {
	dataDir := t.TempDir()
	n := startTieringNode(t, dataDir, "1h")
	conn := connect(t, n.pgURL(), pgx.QueryExecModeSimpleProtocol)
	mustExec(t, conn, "CREATE TABLE events (id bigint NOT NULL, msg text, ts timestamptz) WITH (buckets = 2, log_retention = '1s')")
	insertIDs(t, conn, "events", 0, 150, false) // statements go round-robin over the buckets
	insertIDs(t, conn, "events", 150, 300, false)
	out, errOut, code := runMink(t, 60*time.Second, "tiering", "run", "--table", "events", "--wait", "--server", n.admin)
	if code != 0 {
		t.Fatalf("mink tiering run: exit %d: %s\n%s", code, errOut, out)
	}
	waitFor(t, 30*time.Second, "the streams trimmed to their tiered offsets", func() bool {
		for _, b := range tableBuckets(t, n, "events") {
			if b.Start == 0 || b.Start != b.End {
				return false
			}
		}
		return true
	})
	insertIDs(t, conn, "events", 300, 320, false) // the streams' part
	insertIDs(t, conn, "events", 320, 350, false)
	want := selectIDs(t, conn, "SELECT id FROM events ORDER BY id")
	if !slices.Equal(want, seq(0, 350)) {
		t.Fatalf("SELECT: %d rows, want ids 0..349", len(want))
	}
	starts := map[uint64]uint64{}
	for _, b := range tableBuckets(t, n, "events") {
		starts[uint64(b.Bucket)] = b.Start
	}

	fc := arrowFlight(t, n.flightAddr())
	info, err := fc.GetFlightInfo(context.Background(), &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"events"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Endpoint) != 4 || info.TotalRecords != 350 {
		t.Fatalf("GetFlightInfo: %d endpoints, %d records; want a lake and a stream endpoint per bucket, 350 records", len(info.Endpoint), info.TotalRecords)
	}
	var got []int64
	perBucket := map[uint64][]uint64{}
	for _, ep := range info.Endpoint {
		var meta flightwire.EndpointMeta
		if err := json.Unmarshal(ep.AppMetadata, &meta); err != nil {
			t.Fatal(err)
		}
		tk, err := flightwire.ParseTicket(ep.Ticket.Ticket)
		if err != nil {
			t.Fatal(err)
		}
		if meta.Lake {
			if len(ep.Location) != 0 || tk.From != 0 || tk.To == nil || *tk.To != starts[meta.Bucket] {
				t.Fatalf("lake endpoint of bucket %d: ticket %+v, locations %v; want [0, %d), no location", meta.Bucket, tk, ep.Location, starts[meta.Bucket])
			}
		} else if tk.From != starts[meta.Bucket] {
			t.Fatalf("stream endpoint of bucket %d starts at %d, want the stream's start %d", meta.Bucket, tk.From, starts[meta.Bucket])
		}
		r, err := doGetIDs(t, fc, ep.Ticket.Ticket)
		if err != nil {
			t.Fatalf("DoGet of bucket %d (lake %v): %v", meta.Bucket, meta.Lake, err)
		}
		for i, msg := range r.msgs {
			if msg != fmt.Sprintf("row %d", r.ids[i]) {
				t.Fatalf("bucket %d: id %d has msg %q", meta.Bucket, r.ids[i], msg)
			}
		}
		got = append(got, r.ids...)
		perBucket[meta.Bucket] = append(perBucket[meta.Bucket], r.offsets...)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("the Flight read returned %d rows (%v…), SELECT %d", len(got), got[:min(10, len(got))], len(want))
	}
	for b, offs := range perBucket {
		slices.Sort(offs)
		for i, o := range offs {
			if o != uint64(i) {
				t.Fatalf("bucket %d: offsets are not 0..%d: %d at %d", b, len(offs)-1, o, i)
			}
		}
	}

	// A ticket from inside the lake part reads on into the stream, in
	// offset order.
	for b, start := range starts {
		from := start / 2
		r, err := doGetIDs(t, fc, flightwire.Ticket{Bucket: b, From: from}.Encode())
		if err != nil {
			t.Fatalf("DoGet bucket %d from %d: %v", b, from, err)
		}
		if uint64(len(r.offsets)) != uint64(len(perBucket[b]))-from {
			t.Fatalf("bucket %d from %d: %d rows, want %d", b, from, len(r.offsets), uint64(len(perBucket[b]))-from)
		}
		for i, o := range r.offsets {
			if o != from+uint64(i) {
				t.Fatalf("bucket %d from %d: row %d has offset %d", b, from, i, o)
			}
		}
	}

	// mink's Go client reads the same rows.
	ctx := context.Background()
	cl, err := client.Dial(ctx, n.flightAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rdr, err := cl.Scan(ctx, "events", client.ScanOptions{Columns: []string{"id"}})
	if err != nil {
		t.Fatal(err)
	}
	var viaClient []int64
	for rdr.Next() {
		ids := rdr.RecordBatch().Column(0).(*array.Int64)
		viaClient = append(viaClient, ids.Int64Values()...)
	}
	if err := rdr.Err(); err != nil {
		t.Fatal(err)
	}
	rdr.Release()
	slices.Sort(viaClient)
	if !slices.Equal(viaClient, want) {
		t.Fatalf("the Go client's Scan returned %d rows, SELECT %d", len(viaClient), len(want))
	}
}
