package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/minkdb/mink/client"
)

// TestAlterTableDropColumn: a column dropped from a log table and a
// primary-key table with rows in the lake, in the stream and in the KV
// tablet, as the other clients see it: the Go Flight client appends,
// scans and looks up keys without it, a Kafka producer's JSON records are
// stored without it and a consumer's come back without it; then tiering
// rounds, kill -9 and a restart (KV snapshot restore and changelog
// replay of rows that still hold the column's bytes), and pgx reads every
// row and the changelog. What SQL reads return, with and without the
// engine's mirrors, is sqlfront/testdata/logic/drop_column.test.
func TestAlterTableDropColumn(t *testing.T) {
	dataDir := t.TempDir()
	n := startLakeNode(t, dataDir, false)
	ctx := context.Background()
	conn := connect(t, n.pgURL(), pgx.QueryExecModeSimpleProtocol)
	mustExec(t, conn, "CREATE TABLE ev (id bigint NOT NULL, gone text NOT NULL, msg text) WITH (buckets = 2)")
	mustExec(t, conn, "CREATE TABLE kv (k integer PRIMARY KEY, gone text NOT NULL, v text) WITH (buckets = 2)")
	for _, table := range []string{"ev", "kv"} {
		mustExec(t, conn, fmt.Sprintf("INSERT INTO %s SELECT g, 'gone' || g, 'r' || g FROM generate_series(0, 99) g", table))
		tierNow(t, n, table)
		mustExec(t, conn, fmt.Sprintf("INSERT INTO %s SELECT g, 'gone' || g, 'r' || g FROM generate_series(100, 149) g", table))
	}
	mustExec(t, conn, "ALTER TABLE ev DROP COLUMN gone")
	mustExec(t, conn, "ALTER TABLE kv DROP COLUMN gone")

	cl, err := client.Dial(ctx, n.flightAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// The Go client writes batches of the columns left.
	batch := func(keyType arrow.DataType, from, to int) arrow.RecordBatch {
		keys := array.NewBuilder(memory.DefaultAllocator, keyType)
		defer keys.Release()
		vals := array.NewStringBuilder(memory.DefaultAllocator)
		defer vals.Release()
		for i := from; i < to; i++ {
			switch b := keys.(type) {
			case *array.Int64Builder:
				b.Append(int64(i))
			case *array.Int32Builder:
				b.Append(int32(i))
			}
			vals.Append(fmt.Sprintf("c%d", i))
		}
		k, v := keys.NewArray(), vals.NewArray()
		defer k.Release()
		defer v.Release()
		name := "id"
		if keyType == arrow.PrimitiveTypes.Int32 {
			name = "k"
		}
		schema := arrow.NewSchema([]arrow.Field{{Name: name, Type: keyType, Nullable: keyType == arrow.PrimitiveTypes.Int64}, {Name: "msg", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
		if name == "k" {
			schema = arrow.NewSchema([]arrow.Field{{Name: "k", Type: keyType}, {Name: "v", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
		}
		return array.NewRecordBatch(schema, []arrow.Array{k, v}, int64(to-from))
	}
	evBatch := batch(arrow.PrimitiveTypes.Int64, 150, 160)
	defer evBatch.Release()
	if err := cl.AppendTable(ctx, "ev", evBatch); err != nil {
		t.Fatalf("append after the drop: %v", err)
	}
	kvBatch := batch(arrow.PrimitiveTypes.Int32, 145, 160) // 145..149 replace rows that hold the column
	defer kvBatch.Release()
	if err := cl.PutTable(ctx, "kv", kvBatch); err != nil {
		t.Fatalf("put after the drop: %v", err)
	}

	// A Kafka producer's JSON record, stored without the column.
	kc := kafkaClient(t, []string{n.kafkaAddr()})
	if err := kc.ProduceSync(ctx, &kgo.Record{Topic: "ev", Value: []byte(`{"id": 160, "msg": "k160"}`)}).FirstErr(); err != nil {
		t.Fatalf("produce after the drop: %v", err)
	}
	mustExec(t, conn, "UPDATE kv SET v = 'upd' WHERE k IN (3, 120)")

	wantEv := func() string {
		var b strings.Builder
		for i := 0; i <= 160; i++ {
			switch {
			case i < 150:
				fmt.Fprintf(&b, "%d r%d\n", i, i)
			case i < 160:
				fmt.Fprintf(&b, "%d c%d\n", i, i)
			default:
				fmt.Fprintf(&b, "%d k%d\n", i, i)
			}
		}
		return b.String()
	}()
	wantKV := func() string {
		var b strings.Builder
		for i := 0; i < 160; i++ {
			switch {
			case i == 3 || i == 120:
				fmt.Fprintf(&b, "%d upd\n", i)
			case i < 145:
				fmt.Fprintf(&b, "%d r%d\n", i, i)
			default:
				fmt.Fprintf(&b, "%d c%d\n", i, i)
			}
		}
		return b.String()
	}()
	check := func(stage string) {
		t.Helper()
		if got := dump(t, conn, "SELECT * FROM ev ORDER BY id"); got != wantEv {
			t.Fatalf("%s: ev differs\n got %.400q\nwant %.400q", stage, got, wantEv)
		}
		if got := dump(t, conn, "SELECT * FROM kv ORDER BY k"); got != wantKV {
			t.Fatalf("%s: kv differs\n got %.400q\nwant %.400q", stage, got, wantKV)
		}
		// A client that learns the table now looks keys up without the
		// column: a row stored before the drop, one after, an updated one.
		fresh, err := client.Dial(ctx, n.flightAddr())
		if err != nil {
			t.Fatal(err)
		}
		defer fresh.Close()
		b := array.NewInt32Builder(memory.DefaultAllocator)
		b.AppendValues([]int32{7, 150, 3}, nil)
		keys := b.NewArray()
		b.Release()
		defer keys.Release()
		kb := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.PrimitiveTypes.Int32}}, nil), []arrow.Array{keys}, 3)
		defer kb.Release()
		got, err := fresh.Lookup(ctx, "kv", kb)
		if err != nil {
			t.Fatalf("%s: lookup: %v", stage, err)
		}
		defer got.Release()
		var out strings.Builder
		for i := 0; i < int(got.NumRows()); i++ {
			fmt.Fprintf(&out, "%s %s\n", got.Column(0).ValueStr(i), got.Column(1).ValueStr(i))
		}
		if got.NumCols() != 2 || out.String() != "7 r7\n150 c150\n3 upd\n" {
			t.Fatalf("%s: lookup of 7, 150, 3: %d columns, %q", stage, got.NumCols(), out.String())
		}
		// Its scan of the log table has the columns left.
		rd, err := fresh.Scan(ctx, "ev", client.ScanOptions{})
		if err != nil {
			t.Fatalf("%s: flight scan: %v", stage, err)
		}
		defer rd.Release()
		rows := 0
		for rd.Next() {
			rec := rd.RecordBatch()
			if rec.NumCols() != 2 || rec.ColumnName(1) != "msg" {
				t.Fatalf("%s: flight scan schema %s, want id and msg", stage, rec.Schema())
			}
			rows += int(rec.NumRows())
		}
		if err := rd.Err(); err != nil || rows != 161 {
			t.Fatalf("%s: flight scan: %d rows, %v; want 161", stage, rows, err)
		}
	}
	check("after the drop")
	tierNow(t, n, "ev")
	tierNow(t, n, "kv")
	check("after tiering")
	n.kill()
	n.start()
	n.waitHealthy()
	n.waitSQL()
	conn = connect(t, n.pgURL(), pgx.QueryExecModeSimpleProtocol)
	check("after kill -9 and restart")

	// A consumer reads the records of both ages without the column.
	consumer := kafkaClient(t, []string{n.kafkaAddr()}, kgo.ConsumeTopics("ev"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	pollCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for read := 0; read < 161; {
		fs := consumer.PollFetches(pollCtx)
		if pollCtx.Err() != nil {
			t.Fatalf("consumed %d of 161 records", read)
		}
		fs.EachRecord(func(r *kgo.Record) {
			read++
			if strings.Contains(string(r.Value), "gone") || !strings.Contains(string(r.Value), `"msg":`) {
				t.Errorf("record %s, want id and msg only", r.Value)
			}
		})
	}
	if got := dump(t, conn, `SELECT _change_type, v FROM "kv$changelog" WHERE k = 3 ORDER BY _offset`); got != "+I r3\n-U r3\n+U upd\n" {
		t.Fatalf("changelog of key 3: %q", got)
	}
	rows, err := conn.Query(ctx, `SELECT * FROM "kv$changelog" LIMIT 1`)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range rows.FieldDescriptions() {
		names = append(names, f.Name)
	}
	rows.Close()
	if strings.Contains(strings.Join(names, " "), "gone") || !strings.Contains(strings.Join(names, " "), "v") {
		t.Fatalf("the changelog's columns %v, want them without the dropped one", names)
	}
}
