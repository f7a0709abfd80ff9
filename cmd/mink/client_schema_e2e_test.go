package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"

	"github.com/minkdb/mink/client"
)

// TestClientLookupAfterAlter: a Go and a Rust client that looked keys up
// in a primary-key table (so they cache its columns) look them up again
// after ALTER TABLE … DROP COLUMN, RENAME COLUMN and ADD COLUMN on SQL, and
// get the rows with the columns as they are now: the node's answer
// carries the table's schema tag, and a client whose cached tag differs
// describes the table again before it decodes the rows.
func TestClientLookupAfterAlter(t *testing.T) {
	n := startLakeNode(t, t.TempDir(), false)
	ctx := context.Background()
	conn := connect(t, n.pgURL(), pgx.QueryExecModeSimpleProtocol)
	mustExec(t, conn, "CREATE TABLE kv (id bigint PRIMARY KEY, gone text, v text) WITH (buckets = 2)")
	mustExec(t, conn, "INSERT INTO kv SELECT g, 'gone' || g, 'v' || g FROM generate_series(1, 3) g")

	cl, err := client.Dial(ctx, n.flightAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	goLookup := func() string {
		t.Helper()
		b := array.NewInt64Builder(memory.DefaultAllocator)
		defer b.Release()
		b.AppendValues([]int64{1, 2, 3}, nil)
		ids := b.NewArray()
		defer ids.Release()
		keys := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil), []arrow.Array{ids}, 3)
		defer keys.Release()
		got, err := cl.Lookup(ctx, "kv", keys)
		if err != nil {
			t.Fatalf("Go lookup: %v", err)
		}
		defer got.Release()
		var names []string
		for _, f := range got.Schema().Fields() {
			names = append(names, f.Name)
		}
		var rows []string
		for r := 0; r < int(got.NumRows()); r++ {
			var vals []string
			for _, c := range got.Columns() {
				vals = append(vals, c.ValueStr(r))
			}
			rows = append(rows, strings.Join(vals, ","))
		}
		// The Rust session's form: "columns a,b rows 1,x;2,y" (rows in id order).
		return fmt.Sprintf("columns %s rows %s", strings.Join(names, ","), strings.Join(sortedRows(rows), ";"))
	}
	rs := startRustSession(t, n.flightAddr(), "kv")
	rustLookup := func() string {
		t.Helper()
		got := rs.mustDo("columns 1 3", "columns ")
		cols, rows, _ := strings.Cut(strings.TrimPrefix(got, "columns "), " rows ")
		return fmt.Sprintf("columns %s rows %s", cols, strings.Join(sortedRows(strings.Split(rows, ";")), ";"))
	}
	check := func(step, want string) {
		t.Helper()
		if got := goLookup(); got != want {
			t.Fatalf("%s: the Go client's lookup: %q, want %q", step, got, want)
		}
		if got := rustLookup(); got != want {
			t.Fatalf("%s: the Rust client's lookup: %q, want %q", step, got, want)
		}
	}
	check("before", "columns id,gone,v rows 1,gone1,v1;2,gone2,v2;3,gone3,v3")
	mustExec(t, conn, "ALTER TABLE kv DROP COLUMN gone")
	check("after DROP COLUMN", "columns id,v rows 1,v1;2,v2;3,v3")
	mustExec(t, conn, "ALTER TABLE kv RENAME COLUMN v TO w")
	check("after RENAME COLUMN", "columns id,w rows 1,v1;2,v2;3,v3")
	mustExec(t, conn, "ALTER TABLE kv ADD COLUMN n integer DEFAULT 7")
	mustExec(t, conn, "UPDATE kv SET n = 8 WHERE id = 2")
	check("after ADD COLUMN", "columns id,w,n rows 1,v1,7;2,v2,8;3,v3,7")
}

func sortedRows(rows []string) []string {
	return slices.Sorted(slices.Values(rows))
}
