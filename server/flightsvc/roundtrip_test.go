package flightsvc_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"sort"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/minkdb/mink/internal/minktest"
)

// The round trips use arrow-go's own Flight client, not mink's, so that
// they check the service against an independent implementation.

func dialFlight(t *testing.T, addr string) flight.Client {
	t.Helper()
	c, err := flight.NewClientWithMiddleware(addr, nil, nil,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func connect(t *testing.T, n *minktest.Node) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, n.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	return conn
}

func exec(t *testing.T, conn *pgx.Conn, sqls ...string) {
	t.Helper()
	for _, sql := range sqls {
		if _, err := conn.Exec(context.Background(), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
}

// waitOpen waits until every bucket of table answers DoGet (leaders
// assigned and open).
func waitOpen(t *testing.T, c flight.Client, table string) *flight.FlightInfo {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := c.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{table}})
		if err != nil {
			t.Fatal(err)
		}
		ok := true
		for _, ep := range info.Endpoint {
			if _, err := readEndpoint(ctx, c, ep); err != nil {
				ok = false
				if time.Now().After(deadline) {
					t.Fatalf("bucket not open after 30 s: %v", err)
				}
			}
		}
		if ok {
			return info
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// rows is a table's content in a comparable form: one string per row.
type rows []string

func readEndpoint(ctx context.Context, c flight.Client, ep *flight.FlightEndpoint) (rows, error) {
	stream, err := c.DoGet(ctx, ep.Ticket)
	if err != nil {
		return nil, err
	}
	rdr, err := flight.NewRecordReader(stream)
	if err != nil {
		return nil, err
	}
	defer rdr.Release()
	var out rows
	for rdr.Next() {
		out = append(out, recordRows(rdr.RecordBatch())...)
	}
	if err := rdr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return out, nil
}

func recordRows(rec arrow.RecordBatch) rows {
	var out rows
	for i := 0; i < int(rec.NumRows()); i++ {
		row := ""
		for c := 0; c < int(rec.NumCols()); c++ {
			if c > 0 {
				row += "|"
			}
			row += rec.Column(c).ValueStr(i)
		}
		out = append(out, row)
	}
	return out
}

func readAll(t *testing.T, c flight.Client, info *flight.FlightInfo) rows {
	t.Helper()
	var out rows
	for _, ep := range info.Endpoint {
		got, err := readEndpoint(context.Background(), c, ep)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, got...)
	}
	sort.Strings(out)
	return out
}

func eventsBatch(ids []int64, names []string) arrow.RecordBatch {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "v", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i, id := range ids {
		b.Field(0).(*array.Float64Builder).Append(float64(id) / 2)
		b.Field(1).(*array.Int64Builder).Append(id)
		b.Field(2).(*array.StringBuilder).Append(names[i])
	}
	return b.NewRecordBatch()
}

func doPut(t *testing.T, c flight.Client, desc *flight.FlightDescriptor, recs ...arrow.RecordBatch) ([]*flight.PutResult, error) {
	t.Helper()
	stream, err := c.DoPut(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(recs[0].Schema()))
	w.SetFlightDescriptor(desc)
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			break
		}
	}
	w.Close()
	stream.CloseSend()
	var results []*flight.PutResult
	for {
		res, err := stream.Recv()
		if err == io.EOF {
			return results, nil
		}
		if err != nil {
			return results, err
		}
		results = append(results, res)
	}
}

func TestRoundTrip(t *testing.T) {
	n := minktest.Start(t, minktest.Options{})
	conn := connect(t, n)
	exec(t, conn,
		"CREATE TABLE events (id bigint NOT NULL, name text, v double precision) WITH (buckets = 3, bucket_key = 'id')",
		"CREATE TABLE other (a int)",
		"INSERT INTO events VALUES (1, 'one', 0.5), (2, 'two', 1), (3, NULL, 1.5)")
	c := dialFlight(t, n.Config.FlightAddr)
	ctx := context.Background()

	t.Run("ListFlights", func(t *testing.T) {
		stream, err := c.ListFlights(ctx, &flight.Criteria{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for {
			info, err := stream.Recv()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, info.FlightDescriptor.Path[0])
			if info.FlightDescriptor.Path[0] == "events" {
				schema, err := flight.DeserializeSchema(info.Schema, memory.DefaultAllocator)
				if err != nil {
					t.Fatal(err)
				}
				if schema.NumFields() != 3 || schema.Field(0).Name != "id" || schema.Field(0).Nullable {
					t.Fatalf("schema %v", schema)
				}
			}
		}
		if len(names) != 2 || names[0] != "events" || names[1] != "other" {
			t.Fatalf("tables %v", names)
		}
	})

	info := waitOpen(t, c, "events")
	t.Run("GetFlightInfo", func(t *testing.T) {
		if len(info.Endpoint) != 3 {
			t.Fatalf("%d endpoints, want one per bucket (3)", len(info.Endpoint))
		}
		want := "grpc+tcp://" + n.Config.FlightAddr
		for _, ep := range info.Endpoint {
			if len(ep.Location) != 1 || ep.Location[0].Uri != want {
				t.Fatalf("endpoint location %v, want %s", ep.Location, want)
			}
			var tk struct {
				Bucket uint64  `json:"bucket"`
				To     *uint64 `json:"to"`
			}
			if err := json.Unmarshal(ep.Ticket.Ticket, &tk); err != nil || tk.Bucket == 0 || tk.To == nil {
				t.Fatalf("ticket %s: %v", ep.Ticket.Ticket, err)
			}
		}
		if info.TotalRecords != 3 {
			t.Fatalf("total records %d", info.TotalRecords)
		}
	})

	t.Run("DoGet of SQL rows", func(t *testing.T) {
		got := readAll(t, c, info)
		want := rows{"1|one|0.5", "2|two|1", "3|(null)|1.5"}
		if len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
			t.Fatalf("got %q want %q", got, want)
		}
	})

	t.Run("projection", func(t *testing.T) {
		cmd, _ := json.Marshal(map[string]any{"table": "events", "columns": []string{"v", "id"}})
		pinfo, err := c.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: cmd})
		if err != nil {
			t.Fatal(err)
		}
		schema, _ := flight.DeserializeSchema(pinfo.Schema, memory.DefaultAllocator)
		if schema.NumFields() != 2 || schema.Field(0).Name != "v" || schema.Field(1).Name != "id" {
			t.Fatalf("projected schema %v", schema)
		}
		got := readAll(t, c, pinfo)
		if len(got) != 3 || got[0] != "0.5|1" || got[1] != "1.5|3" || got[2] != "1|2" {
			t.Fatalf("projected rows %q", got)
		}
	})

	t.Run("DoPut table then SQL", func(t *testing.T) {
		// Columns in another order than the table's: matched by name.
		rec := eventsBatch([]int64{10, 11, 12, 13, 14}, []string{"a", "b", "c", "d", "e"})
		defer rec.Release()
		results, err := doPut(t, c, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"events"}}, rec, rec)
		if err != nil {
			t.Fatal(err)
		}
		if len(results) != 1 || string(results[0].AppMetadata) != `{"rows":10}` {
			t.Fatalf("put results %v", results)
		}
		var count, sum int64
		if err := conn.QueryRow(ctx, "SELECT count(*), sum(id) FROM events WHERE id >= 10").Scan(&count, &sum); err != nil {
			t.Fatal(err)
		}
		if count != 10 || sum != 2*(10+11+12+13+14) {
			t.Fatalf("SQL sees %d rows, sum %d", count, sum)
		}
	})

	t.Run("errors", func(t *testing.T) {
		_, err := c.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"nope"}})
		if status.Code(err) != codes.NotFound {
			t.Fatalf("unknown table: %v", err)
		}
		cmd, _ := json.Marshal(map[string]any{"table": "events", "columns": []string{"zz"}})
		_, err = c.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: cmd})
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("unknown column: %v", err)
		}
		bad := eventsBatch([]int64{1}, []string{"x"})
		defer bad.Release()
		_, err = doPut(t, c, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"other"}}, bad)
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("wrong columns: %v", err)
		}
		stream, err := c.DoAction(ctx, &flight.Action{Type: "lookup"})
		if err == nil {
			_, err = stream.Recv()
		}
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("lookup without a body: %v", err)
		}
	})
}
