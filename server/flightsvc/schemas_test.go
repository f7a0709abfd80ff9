package flightsvc_test

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/minkdb/mink/internal/minktest"
)

// A table of a schema other than public over Flight: its descriptor is
// [schema, table] (or the path "schema.table"), ListFlights names it so,
// DoGet reads its rows and not those of public's table of the same name,
// and DoPut writes rows SQL reads back from it.
func TestSchemaTablesFlight(t *testing.T) {
	n := minktest.Start(t, minktest.Options{})
	conn := connect(t, n)
	ctx := context.Background()
	exec(t, conn,
		"CREATE SCHEMA staging",
		"CREATE TABLE staging.ev (id bigint, v text) WITH (buckets = 2)",
		"CREATE TABLE ev (id bigint, v text)",
		"INSERT INTO staging.ev VALUES (1, 'staged'), (2, 'staged')",
		"INSERT INTO ev VALUES (9, 'public')")
	c := dialFlight(t, n.Config.FlightAddr)
	waitOpen(t, c, "staging.ev")
	info, err := c.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"staging", "ev"}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := readAll(t, c, info), (rows{"1|staged", "2|staged"}); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("DoGet [staging ev]: %q, want %q", got, want)
	}
	if got := readAll(t, c, waitOpen(t, c, "ev")); len(got) != 1 || got[0] != "9|public" {
		t.Fatalf("DoGet [ev]: %q, want public's row", got)
	}
	if _, err := c.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"nosuch", "ev"}}); status.Code(err) != codes.NotFound {
		t.Fatalf("GetFlightInfo [nosuch ev]: %v, want NotFound", err)
	}

	stream, err := c.ListFlights(ctx, &flight.Criteria{Expression: []byte("staging.")})
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for {
		fi, err := stream.Recv()
		if err != nil {
			break
		}
		listed = append(listed, fi.FlightDescriptor.Path...)
	}
	if len(listed) != 1 || listed[0] != "staging.ev" {
		t.Fatalf("ListFlights staging.: %q, want [staging.ev]", listed)
	}

	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "v", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	b.Field(0).(*array.Int64Builder).Append(3)
	b.Field(1).(*array.StringBuilder).Append("put")
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	if _, err := doPut(t, c, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"staging", "ev"}}, rec); err != nil {
		t.Fatal(err)
	}
	var staged, public int64
	if err := conn.QueryRow(ctx, "SELECT (SELECT count(*) FROM staging.ev), (SELECT count(*) FROM public.ev)").Scan(&staged, &public); err != nil {
		t.Fatal(err)
	}
	if staged != 3 || public != 1 {
		t.Fatalf("after DoPut to [staging ev]: staging.ev has %d rows, public.ev %d; want 3 and 1", staged, public)
	}
}
