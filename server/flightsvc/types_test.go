package flightsvc_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/minkdb/mink/internal/minktest"
)

// everyTypeColumns has a column of every type a mink table can have.
const everyTypeColumns = `id bigint NOT NULL, b boolean, i2 smallint, i4 integer, i8 bigint, f4 real,
	f8 double precision, n numeric(12,2), nu numeric, t text, vc varchar(5), ch char(3), by bytea, d date,
	tm time, ts timestamp, tz timestamptz, iv interval, u uuid, j json, jb jsonb, ai integer[], at text[]`

// everyTypeValues: typical values, extremes and NULLs, after the id.
var everyTypeValues = []string{
	`true, -32768, 2147483647, -9223372036854775808, 1.5, -2.25e300, 9999999999.99,
	 123456789012345678.0123456789, 'héllo ✓', 'abcde', 'ab', '\x00ff', '2024-02-29', '23:59:59.999999',
	 '2024-02-29 12:34:56.789012', '2024-02-29 12:34:56.789012+00', '1 year 2 mons -3 days 01:02:03.000001',
	 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"a": [1, 2.5, null]}', '{"k": "v"}', '{1,NULL,3}', '{x,NULL,""}'`,
	`false, 32767, -2147483648, 9223372036854775807, -0.25, 5e-324, -0.01, -0.0000000001, '', '', '',
	 '', '1900-01-01', '00:00:00', '1900-01-01 00:00:00', '1969-12-31 23:59:59.999999+00', '0 seconds',
	 '00000000-0000-0000-0000-000000000000', 'null', '[]', '{}', '{}'`,
	`NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
	 NULL, NULL, NULL, NULL, NULL`,
}

// TestFlightReadEqualsSQLEveryType: a table with a column of every type,
// written by SQL in several statements (several batches per bucket, and
// one of more rows than a DoGet message holds), reads over Flight DoGet
// (arrow-go's client) exactly as SQL returns it (Flight SQL's SELECT),
// value for value.
func TestFlightReadEqualsSQLEveryType(t *testing.T) {
	n := minktest.Start(t, minktest.Options{})
	conn := connect(t, n)
	exec(t, conn, "CREATE TABLE every ("+everyTypeColumns+") WITH (buckets = 2)")
	id := 0
	for round := 0; round < 3; round++ {
		var vals []string
		for _, v := range everyTypeValues {
			vals = append(vals, fmt.Sprintf("(%d, %s)", id, v))
			id++
		}
		exec(t, conn, "INSERT INTO every VALUES "+strings.Join(vals, ", "))
	}
	// More rows than one message holds (65 536).
	exec(t, conn, fmt.Sprintf(`INSERT INTO every (id, i4, t, ts, ai)
		SELECT g, g::integer %% 1000, 'row ' || g::text, TIMESTAMP '2000-01-01' + g * INTERVAL '1 second',
		       CASE WHEN g %% 7 = 0 THEN NULL ELSE ARRAY[g::integer, 1] END
		FROM generate_series(%d, %d) AS s(g)`, id, id+99_999))

	c := dialFlight(t, n.Config.FlightAddr)
	info := waitOpen(t, c, "every")
	var flightRows rows
	for _, ep := range info.Endpoint {
		stream, err := c.DoGet(context.Background(), ep.Ticket)
		if err != nil {
			t.Fatal(err)
		}
		flightRows = append(flightRows, readCells(t, stream)...)
	}
	sort.Strings(flightRows)

	sc, err := flightsql.NewClient(n.Config.FlightAddr, nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	ctx := context.Background()
	sinfo, err := sc.Execute(ctx, "SELECT * FROM every")
	if err != nil {
		t.Fatal(err)
	}
	var sqlRows rows
	for _, ep := range sinfo.Endpoint {
		stream, err := sc.Client.DoGet(ctx, ep.Ticket)
		if err != nil {
			t.Fatal(err)
		}
		sqlRows = append(sqlRows, readCells(t, stream)...)
	}
	sort.Strings(sqlRows)
	if len(flightRows) != id+100_000 || len(sqlRows) != len(flightRows) {
		t.Fatalf("Flight read %d rows, SQL %d, want %d", len(flightRows), len(sqlRows), id+100_000)
	}
	for i := range flightRows {
		if flightRows[i] != sqlRows[i] {
			t.Fatalf("row %d: Flight\n%s\nSQL\n%s", i, flightRows[i], sqlRows[i])
		}
	}
}

// readCells reads a DoGet stream into one string per row, a cell's value
// as arrow-go prints it and NULL as "(null)" whatever the column's type
// (SQL returns json and uuid as text, where the table has Arrow extension
// types).
func readCells(t *testing.T, stream flight.FlightService_DoGetClient) rows {
	t.Helper()
	rdr, err := flight.NewRecordReader(stream)
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	var out rows
	for rdr.Next() {
		rec := rdr.RecordBatch()
		for i := 0; i < int(rec.NumRows()); i++ {
			cells := make([]string, rec.NumCols())
			for c, col := range rec.Columns() {
				cells[c] = "(null)"
				if col.IsValid(i) {
					cells[c] = col.ValueStr(i)
				}
			}
			out = append(out, strings.Join(cells, "|"))
		}
	}
	if err := rdr.Err(); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	return out
}
