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

// Array columns over Flight: DoGet returns the rows SQL wrote as Arrow
// lists; DoPut takes lists whatever their element field is named (here
// Iceberg's "element") and SQL reads them back; a list element too long
// for varchar(n)[] is refused and nothing is stored.
func TestArrayColumnsFlight(t *testing.T) {
	n := minktest.Start(t, minktest.Options{})
	conn := connect(t, n)
	ctx := context.Background()
	exec(t, conn,
		"CREATE TABLE arr (id bigint NOT NULL, tags varchar(5)[], ids integer[])",
		`INSERT INTO arr VALUES (1, '{a,"b c",NULL}', '{1,2}'), (2, '{}', NULL)`)
	c := dialFlight(t, n.Config.FlightAddr)
	info := waitOpen(t, c, "arr")
	got := readAll(t, c, info)
	if want := (rows{`1|["a","b c",null]|[1,2]`, `2|[]|(null)`}); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("DoGet %q, want %q", got, want)
	}

	elem := func(dt arrow.DataType) *arrow.ListType {
		return arrow.ListOfField(arrow.Field{Name: "element", Type: dt, Nullable: true})
	}
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "tags", Type: elem(arrow.BinaryTypes.String), Nullable: true},
		{Name: "ids", Type: elem(arrow.PrimitiveTypes.Int32), Nullable: true},
	}, nil)
	batch := func(tag string) arrow.RecordBatch {
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		defer b.Release()
		b.Field(0).(*array.Int64Builder).Append(3)
		tb := b.Field(1).(*array.ListBuilder)
		tb.Append(true)
		tb.ValueBuilder().(*array.StringBuilder).Append(tag)
		tb.ValueBuilder().(*array.StringBuilder).AppendNull()
		ib := b.Field(2).(*array.ListBuilder)
		ib.Append(true)
		ib.ValueBuilder().(*array.Int32Builder).Append(-7)
		return b.NewRecordBatch()
	}
	desc := &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"arr"}}
	bad := batch("toolong")
	defer bad.Release()
	if _, err := doPut(t, c, desc, bad); status.Code(err) == codes.OK {
		t.Fatalf("DoPut of a 7-character element into varchar(5)[]: %v", err)
	}
	rec := batch("flt")
	defer rec.Release()
	if _, err := doPut(t, c, desc, rec); err != nil {
		t.Fatal(err)
	}
	var tags []*string
	var ids []int32
	var count int64
	if err := conn.QueryRow(ctx, "SELECT tags, ids, (SELECT count(*) FROM arr) FROM arr WHERE id = 3").Scan(&tags, &ids, &count); err != nil {
		t.Fatal(err)
	}
	if len(tags) != 2 || *tags[0] != "flt" || tags[1] != nil || len(ids) != 1 || ids[0] != -7 || count != 3 {
		t.Fatalf("SQL reads %v %v, %d rows", tags, ids, count)
	}
}
