package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/minkdb/mink/buckets/routing"
	"github.com/minkdb/mink/client"
	"github.com/minkdb/mink/internal/minktest"
)

// pkBatch has rows id = ids[i], s = prefix + id.
func pkBatch(ids []int64, prefix string) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, kvSchema)
	defer b.Release()
	for _, id := range ids {
		b.Field(0).(*array.Int64Builder).Append(id)
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("%s%d", prefix, id))
	}
	return b.NewRecordBatch()
}

func ids(from, to int64) []int64 {
	var out []int64
	for id := from; id < to; id++ {
		out = append(out, id)
	}
	return out
}

// keyBatch is a batch of the key column id alone.
func keyBatch(keys ...int64) arrow.RecordBatch {
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendValues(keys, nil)
	return b.NewRecordBatch()
}

// rowsText renders the id and s columns of rec as "id=s".
func rowsText(rec arrow.RecordBatch) []string {
	idCol := rec.Column(rec.Schema().FieldIndices("id")[0]).(*array.Int64)
	sCol := rec.Column(rec.Schema().FieldIndices("s")[0]).(*array.String)
	var out []string
	for i := 0; i < int(rec.NumRows()); i++ {
		out = append(out, fmt.Sprintf("%d=%s", idCol.Value(i), sCol.Value(i)))
	}
	return out
}

// state reads a primary-key table's current state through c, failing on a
// key seen twice.
func state(t *testing.T, c *client.Client, table string) map[int64]string {
	t.Helper()
	rdr, err := c.Scan(context.Background(), table, client.ScanOptions{Columns: []string{"s", "id"}})
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	got := map[int64]string{}
	for rdr.Next() {
		rec := rdr.RecordBatch()
		s, id := rec.Column(0).(*array.String), rec.Column(1).(*array.Int64)
		for i := 0; i < int(rec.NumRows()); i++ {
			if _, dup := got[id.Value(i)]; dup {
				t.Fatalf("key %d read twice", id.Value(i))
			}
			got[id.Value(i)] = s.Value(i)
		}
	}
	if err := rdr.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// changes reads a primary-key table's changelog through c: the number of
// records of each change type, and every record as "type id=s" per bucket
// in offset order is not comparable across buckets, so only per key: the
// sequence of "type s" of each id.
func changes(t *testing.T, c *client.Client, table string) (map[string]int, map[int64][]string) {
	t.Helper()
	rdr, err := c.Scan(context.Background(), table, client.ScanOptions{Changelog: true, Columns: []string{"_change_type", "id", "s"}})
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	counts := map[string]int{}
	perKey := map[int64][]string{}
	for rdr.Next() {
		rec := rdr.RecordBatch()
		ct, id, s := rec.Column(0).(*array.String), rec.Column(1).(*array.Int64), rec.Column(2).(*array.String)
		for i := 0; i < int(rec.NumRows()); i++ {
			counts[ct.Value(i)]++
			perKey[id.Value(i)] = append(perKey[id.Value(i)], ct.Value(i)+" "+s.Value(i))
		}
	}
	if err := rdr.Err(); err != nil {
		t.Fatal(err)
	}
	return counts, perKey
}

// sqlChangeCounts counts the changelog records of each type through SQL.
func sqlChangeCounts(t *testing.T, n *minktest.Node, table string) map[string]int {
	t.Helper()
	conn := connect(t, n)
	rows, err := conn.Query(context.Background(), fmt.Sprintf(`SELECT _change_type, count(*) FROM "%s$changelog" GROUP BY 1`, table))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var ct string
		var n int64
		if err := rows.Scan(&ct, &n); err != nil {
			t.Fatal(err)
		}
		out[ct] = int(n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// PutTable upserts into a primary-key table, Lookup finds rows by key,
// Scan reads the current state and the changelog, and the SQL front end
// sees the same rows and changes.
func TestPrimaryKeyTable(t *testing.T) {
	n := minktest.Start(t, minktest.Options{})
	conn := connect(t, n)
	exec(t, conn, "CREATE TABLE pk (id bigint PRIMARY KEY, s text) WITH (buckets = 3)")
	c := dial(t, n.Config.FlightAddr)
	ctx := context.Background()

	put := func(rec arrow.RecordBatch) {
		t.Helper()
		defer rec.Release()
		if err := c.PutTable(ctx, "pk", rec); err != nil {
			t.Fatal(err)
		}
	}
	model := map[int64]string{}
	put(pkBatch(ids(0, 1000), "s"))
	for id := int64(0); id < 1000; id++ {
		model[id] = fmt.Sprintf("s%d", id)
	}
	// Upserts: 500 existing keys replaced, 500 new.
	put(pkBatch(ids(500, 1500), "u"))
	for id := int64(500); id < 1500; id++ {
		model[id] = fmt.Sprintf("u%d", id)
	}
	// Within one call a later row of a key wins.
	put(pkBatch([]int64{7, 7}, "w"))
	model[7] = "w7"

	if got := state(t, c, "pk"); !maps.Equal(got, model) {
		t.Fatalf("state: %d rows, want %d (e.g. 7=%q 600=%q 1400=%q)", len(got), len(model), got[7], got[600], got[1400])
	}
	if got := count(t, conn, "SELECT count(*) FROM pk WHERE s LIKE 'u%'"); got != 1000 {
		t.Fatalf("SQL sees %d upserted rows, want 1000", got)
	}
	var s string
	if err := conn.QueryRow(ctx, "SELECT s FROM pk WHERE id = 7").Scan(&s); err != nil || s != "w7" {
		t.Fatalf("SQL row 7: %q, %v", s, err)
	}

	// Lookup: in key order, missing keys left out, duplicates repeated.
	keys := keyBatch(7, 600, 5000, 3, 1499, 7, -1)
	defer keys.Release()
	rows, err := c.Lookup(ctx, "pk", keys)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(rowsText(rows)), "[7=w7 600=u600 3=s3 1499=u1499 7=w7]"; got != want {
		t.Fatalf("lookup: %s, want %s", got, want)
	}
	rows.Release()
	// A row SQL writes is visible to Lookup (one state).
	exec(t, conn, "UPDATE pk SET s = 'sql' WHERE id = 3", "DELETE FROM pk WHERE id = 600")
	model[3] = "sql"
	delete(model, 600)
	if rows, err = c.Lookup(ctx, "pk", keys); err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(rowsText(rows)), "[7=w7 3=sql 1499=u1499 7=w7]"; got != want {
		t.Fatalf("lookup after SQL: %s, want %s", got, want)
	}
	rows.Release()

	// Changelog: +I for each of the first 1000 and the 500 new keys; -U/+U
	// for each of the 500 replaced, two pairs for key 7 in the last call
	// and one for the SQL UPDATE; -D for the DELETE.
	counts, perKey := changes(t, c, "pk")
	want := map[string]int{"+I": 1500, "-U": 503, "+U": 503, "-D": 1}
	if !maps.Equal(counts, want) {
		t.Fatalf("changelog counts %v, want %v", counts, want)
	}
	if got := sqlChangeCounts(t, n, "pk"); !maps.Equal(got, want) {
		t.Fatalf("SQL changelog counts %v, want %v", got, want)
	}
	if got, want := fmt.Sprint(perKey[7]), "[+I s7 -U s7 +U w7 -U w7 +U w7]"; got != want {
		t.Fatalf("changelog of key 7: %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(perKey[600]), "[+I s600 -U s600 +U u600 -D u600]"; got != want {
		t.Fatalf("changelog of key 600: %s, want %s", got, want)
	}
	if got := state(t, c, "pk"); !maps.Equal(got, model) {
		t.Fatalf("state after SQL: %d rows, want %d", len(got), len(model))
	}

	// Bad input: a null key, a key column of the wrong type, AppendTable.
	nullable := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}, {Name: "s", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, nullable)
	b.Field(0).(*array.Int64Builder).AppendNull()
	b.Field(1).(*array.StringBuilder).Append("null key")
	nullRow := b.NewRecordBatch()
	b.Release()
	defer nullRow.Release()
	if err := c.PutTable(ctx, "pk", nullRow); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("null key: want InvalidArgument, got %v", err)
	}
	i32 := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int32}}, nil)
	b = array.NewRecordBuilder(memory.DefaultAllocator, i32)
	b.Field(0).(*array.Int32Builder).Append(7)
	badKey := b.NewRecordBatch()
	b.Release()
	defer badKey.Release()
	if _, err := c.Lookup(ctx, "pk", badKey); err == nil {
		t.Fatal("lookup with an int32 key of a bigint column succeeded")
	}
	rec := pkBatch([]int64{1}, "x")
	defer rec.Release()
	if err := c.AppendTable(ctx, "pk", rec); !errors.Is(err, client.ErrWrongKind) {
		t.Fatalf("AppendTable into a primary-key table: %v", err)
	}
	if got := state(t, c, "pk"); !maps.Equal(got, model) {
		t.Fatalf("state after bad input changed: %d rows, want %d", len(got), len(model))
	}
}

// A partitioned primary-key table: PutTable creates partitions, Lookup
// routes by partition and finds nothing in a partition that does not exist.
func TestPrimaryKeyPartitioned(t *testing.T) {
	n := minktest.Start(t, minktest.Options{})
	conn := connect(t, n)
	exec(t, conn, "CREATE TABLE pp (region text, id bigint, s text, PRIMARY KEY (region, id)) PARTITION BY LIST (region) WITH (buckets = 2)")
	c := dial(t, n.Config.FlightAddr)
	ctx := context.Background()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "region", Type: arrow.BinaryTypes.String},
	}, nil)
	build := func(prefix string, regions ...string) arrow.RecordBatch {
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		defer b.Release()
		for _, r := range regions {
			for id := int64(0); id < 50; id++ {
				b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("%s%s%d", prefix, r, id))
				b.Field(1).(*array.Int64Builder).Append(id)
				b.Field(2).(*array.StringBuilder).Append(r)
			}
		}
		return b.NewRecordBatch()
	}
	for _, rec := range []arrow.RecordBatch{build("a", "eu", "us"), build("b", "us", "ap")} {
		err := c.PutTable(ctx, "pp", rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := count(t, conn, "SELECT count(*) FROM pp"); got != 150 {
		t.Fatalf("SQL sees %d rows, want 150", got)
	}
	if got := count(t, conn, "SELECT count(*) FROM pp WHERE s LIKE 'bus%'"); got != 50 {
		t.Fatalf("SQL sees %d upserted us rows, want 50", got)
	}
	kschema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "region", Type: arrow.BinaryTypes.String}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, kschema)
	for _, k := range []struct {
		id     int64
		region string
	}{{3, "us"}, {3, "eu"}, {3, "mars"}, {49, "ap"}, {50, "ap"}} {
		b.Field(0).(*array.Int64Builder).Append(k.id)
		b.Field(1).(*array.StringBuilder).Append(k.region)
	}
	keys := b.NewRecordBatch()
	b.Release()
	defer keys.Release()
	rows, err := c.Lookup(ctx, "pp", keys)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Release()
	sCol := rows.Column(rows.Schema().FieldIndices("s")[0]).(*array.String)
	var got []string
	for i := 0; i < sCol.Len(); i++ {
		got = append(got, sCol.Value(i))
	}
	if fmt.Sprint(got) != "[bus3 aeu3 bap49]" {
		t.Fatalf("lookup: %v", got)
	}
}

// With two nodes, the client's cache pointing at the wrong node for a
// bucket: PutTable, Lookup and both scans follow the redirect; a
// bucket-addressed DoPut at the wrong node is NotLeader, and one whose rows
// do not hash to the bucket is refused with nothing written.
func TestPrimaryKeyRedirect(t *testing.T) {
	nodes := startCluster(t, 2)
	n1, n2 := nodes[0], nodes[1]
	conn := connect(t, n1)
	exec(t, conn, "CREATE TABLE pk (id bigint PRIMARY KEY, s text) WITH (buckets = 2)")
	raw1 := arrowClient(t, n1.Config.FlightAddr)
	ctx := context.Background()
	c := dial(t, n1.Config.FlightAddr)

	var onNode2 bucketLeader
	var bucketIndex int
	deadline := time.Now().Add(30 * time.Second)
	for {
		bs := describe(t, raw1, "pk")
		onNode2 = bucketLeader{}
		for i, b := range bs {
			if b.Leader == 2 {
				onNode2, bucketIndex = b, i
			}
		}
		if onNode2.ID != 0 && len(bs) == 2 && bs[0].Leader != bs[1].Leader {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("buckets not spread over both nodes: %+v", bs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	all := ids(0, 200)
	batch := pkBatch(all, "s")
	defer batch.Release()
	index, err := routing.Buckets(batch, []int{0}, 2)
	if err != nil {
		t.Fatal(err)
	}
	var toNode2, elsewhere []int64
	for i, b := range index {
		if b == bucketIndex {
			toNode2 = append(toNode2, all[i])
		} else {
			elsewhere = append(elsewhere, all[i])
		}
	}
	if len(toNode2) == 0 || len(elsewhere) == 0 {
		t.Fatal("the keys do not spread over both buckets")
	}

	// A stale cache entry: node 1 for node 2's bucket.
	c.SetLeader(onNode2.ID, n1.Config.FlightAddr)
	if err := c.PutTable(ctx, "pk", batch); err != nil {
		t.Fatal(err)
	}
	if got := c.Leader(onNode2.ID); got != n2.Config.FlightAddr {
		t.Fatalf("leader cache after the redirect: %q, want %q", got, n2.Config.FlightAddr)
	}
	c.SetLeader(onNode2.ID, n1.Config.FlightAddr)
	keys := keyBatch(toNode2[0], elsewhere[0], 1000)
	defer keys.Release()
	rows, err := c.Lookup(ctx, "pk", keys)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(rowsText(rows)), fmt.Sprintf("[%d=s%d %d=s%d]", toNode2[0], toNode2[0], elsewhere[0], elsewhere[0]); got != want {
		t.Fatalf("lookup through a stale cache: %s, want %s", got, want)
	}
	rows.Release()
	if got := c.Leader(onNode2.ID); got != n2.Config.FlightAddr {
		t.Fatalf("leader cache after the lookup's redirect: %q", got)
	}
	c.SetLeader(onNode2.ID, n1.Config.FlightAddr)
	counts, _ := changes(t, c, "pk")
	if !maps.Equal(counts, map[string]int{"+I": 200}) {
		t.Fatalf("changelog through a stale cache: %v", counts)
	}
	// A client that knows only node 2 reads the same state.
	c2 := dial(t, n2.Config.FlightAddr)
	model := map[int64]string{}
	for _, id := range all {
		model[id] = fmt.Sprintf("s%d", id)
	}
	if got := state(t, c2, "pk"); !maps.Equal(got, model) {
		t.Fatalf("state through node 2: %d rows", len(got))
	}

	// Raw Flight: a bucket-addressed DoPut of node 2's bucket at node 1.
	upd := pkBatch(toNode2, "v")
	defer upd.Release()
	_, err = putBucket(t, raw1, "pk", onNode2.ID, upd)
	checkNotLeader(t, err, onNode2.ID, n2.Config.FlightAddr)
	// At node 2: upserted and acknowledged with the changelog offset of
	// the batch's first record (200 records before it in this bucket's
	// changelog: the +I of its keys).
	raw2 := arrowClient(t, n2.Config.FlightAddr)
	acks, err := putBucket(t, raw2, "pk", onNode2.ID, upd)
	if err != nil {
		t.Fatal(err)
	}
	wantAck := fmt.Sprintf(`{"bucket":%d,"offset":%d,"rows":%d}`, onNode2.ID, len(toNode2), len(toNode2))
	if len(acks) != 1 || acks[0] != wantAck {
		t.Fatalf("acks %v, want [%s]", acks, wantAck)
	}
	for _, id := range toNode2 {
		model[id] = fmt.Sprintf("v%d", id)
	}
	// Rows of the other bucket sent to this one: refused, nothing written.
	wrong := pkBatch([]int64{toNode2[0], elsewhere[0]}, "wrong")
	defer wrong.Release()
	if _, err := putBucket(t, raw2, "pk", onNode2.ID, wrong); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("rows of another bucket: want InvalidArgument, got %v", err)
	}
	if got := state(t, c, "pk"); !maps.Equal(got, model) {
		t.Fatalf("state after the bucket puts: %d rows (e.g. %d=%q)", len(got), toNode2[0], got[toNode2[0]])
	}
}

// putBucket sends rec to one bucket with a bucket-addressed DoPut and
// returns the acknowledgements' app_metadata and the call's status.
func putBucket(t *testing.T, c flight.Client, table string, bucket uint64, rec arrow.RecordBatch) ([]string, error) {
	t.Helper()
	stream, err := c.DoPut(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(rec.Schema()))
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{table, "bucket", itoa(bucket)}})
	w.Write(rec)
	w.Close()
	stream.CloseSend()
	var acks []string
	for {
		res, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return acks, nil
			}
			return acks, err
		}
		var v map[string]any
		if json.Unmarshal(res.AppMetadata, &v) != nil {
			t.Fatalf("ack %q", res.AppMetadata)
		}
		acks = append(acks, string(res.AppMetadata))
	}
}
