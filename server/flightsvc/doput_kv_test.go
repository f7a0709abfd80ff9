package flightsvc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/minkdb/mink/buckets/routing"
	"github.com/minkdb/mink/internal/minktest"
)

// kvbBatch has rows (k, v) in the column order v, k; a nil value is null.
func kvbBatch(keys []*int64, vals []string) arrow.RecordBatch {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "v", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "k", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i, k := range keys {
		b.Field(0).(*array.StringBuilder).Append(vals[i])
		if k == nil {
			b.Field(1).(*array.Int64Builder).AppendNull()
		} else {
			b.Field(1).(*array.Int64Builder).Append(*k)
		}
	}
	return b.NewRecordBatch()
}

func ptrs(keys ...int64) []*int64 {
	out := make([]*int64, len(keys))
	for i := range keys {
		out[i] = &keys[i]
	}
	return out
}

// A bucket-addressed DoPut into a primary-key bucket upserts each batch as
// one write, acknowledged with the changelog offset of its first record.
// A batch that fails half-way through the call (a row of another bucket, a
// null key) ends it with InvalidArgument: the acknowledged batches stay,
// the failed one and those after it are not written.
func TestPutBucketKV(t *testing.T) {
	n := minktest.Start(t, minktest.Options{})
	conn := connect(t, n)
	exec(t, conn, "CREATE TABLE kvb (k bigint PRIMARY KEY, v text) WITH (buckets = 2)")
	c := dialFlight(t, n.Config.FlightAddr)
	info := waitOpen(t, c, "kvb")
	var ids [2]uint64
	for i, ep := range info.Endpoint {
		var m struct {
			Bucket uint64 `json:"bucket"`
		}
		json.Unmarshal(ep.AppMetadata, &m)
		ids[i] = m.Bucket
	}
	// Keys 0..99 by bucket index.
	all := kvbBatch(ptrs(func() []int64 {
		var ks []int64
		for k := int64(0); k < 100; k++ {
			ks = append(ks, k)
		}
		return ks
	}()...), make([]string, 100))
	index, err := routing.Buckets(all, []int{1}, 2)
	all.Release()
	if err != nil {
		t.Fatal(err)
	}
	var in0, in1 []int64
	for k, b := range index {
		if b == 0 {
			in0 = append(in0, int64(k))
		} else {
			in1 = append(in1, int64(k))
		}
	}
	if len(in0) < 6 || len(in1) < 1 {
		t.Fatalf("keys do not spread: %v %v", in0, in1)
	}
	desc := &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"kvb", "bucket", strconv.FormatUint(ids[0], 10)}}
	a := kvbBatch(ptrs(in0[0], in0[1], in0[2]), []string{"a", "a", "a"})
	b := kvbBatch(ptrs(in0[0], in0[3]), []string{"b", "b"}) // one update, one insert
	bad := kvbBatch(ptrs(in0[4], in1[0]), []string{"bad", "bad"})
	after := kvbBatch(ptrs(in0[5]), []string{"after"})
	null := kvbBatch([]*int64{&in0[5], nil}, []string{"n", "n"})
	for _, r := range []arrow.RecordBatch{a, b, bad, after, null} {
		defer r.Release()
	}
	results, err := doPut(t, c, desc, a, b, bad, after)
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("batch with a row of another bucket: want InvalidArgument, got %v", err)
	}
	var acks []string
	for _, r := range results {
		acks = append(acks, string(r.AppMetadata))
	}
	want := []string{
		fmt.Sprintf(`{"bucket":%d,"offset":0,"rows":3}`, ids[0]),
		fmt.Sprintf(`{"bucket":%d,"offset":3,"rows":2}`, ids[0]),
	}
	if fmt.Sprint(acks) != fmt.Sprint(want) {
		t.Fatalf("acks %v, want %v", acks, want)
	}
	results, err = doPut(t, c, desc, null)
	if status.Code(err) != codes.InvalidArgument || len(results) != 0 {
		t.Fatalf("null key: want InvalidArgument and no ack, got %d acks, %v", len(results), err)
	}
	// The bucket holds the two acknowledged batches, nothing else; the
	// other bucket nothing.
	info = waitOpen(t, c, "kvb")
	got, err := readEndpoint(context.Background(), c, info.Endpoint[0])
	if err != nil {
		t.Fatal(err)
	}
	wantRows := rows{fmt.Sprintf("%d|b", in0[0]), fmt.Sprintf("%d|a", in0[1]), fmt.Sprintf("%d|a", in0[2]), fmt.Sprintf("%d|b", in0[3])}
	sort.Strings(got)
	sort.Strings(wantRows)
	if fmt.Sprint(got) != fmt.Sprint(wantRows) {
		t.Fatalf("bucket %d state %v, want %v", ids[0], got, wantRows)
	}
	if got, err := readEndpoint(context.Background(), c, info.Endpoint[1]); err != nil || len(got) != 0 {
		t.Fatalf("bucket %d state %v, %v: want empty", ids[1], got, err)
	}
	var sqlRows int64
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM kvb").Scan(&sqlRows); err != nil || sqlRows != 4 {
		t.Fatalf("SQL sees %d rows (%v), want 4", sqlRows, err)
	}
}
