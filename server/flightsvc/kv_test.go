package flightsvc_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/minkdb/mink/buckets"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/flightwire"
	"github.com/minkdb/mink/kv"
	"github.com/minkdb/mink/kv/kvcodec"
	"github.com/minkdb/mink/server/flightsvc"
)

var kvtSpec = catalog.TableSpec{Name: "kvt", Columns: []catalog.Column{{Name: "k", Type: "bigint", NotNull: true}, {Name: "v", Type: "text"}},
	PrimaryKey: []string{"k"}, Buckets: 2}

// kvtWrites encodes one write of op per (key, value).
func kvtWrites(t *testing.T, c *kvcodec.Codec, op kvcodec.WriteOp, keys []int64, vals []string) []kvcodec.Write {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, c.Schema())
	defer b.Release()
	for i, k := range keys {
		b.Field(0).(*array.Int64Builder).Append(k)
		b.Field(1).(*array.StringBuilder).Append(vals[i])
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	ws, err := c.Writes(op, rec)
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

func kvtKey(t *testing.T, c *kvcodec.Codec, k int64) []byte {
	t.Helper()
	b := array.NewInt64Builder(memory.DefaultAllocator)
	b.Append(k)
	a := b.NewArray()
	defer a.Release()
	b.Release()
	key, err := c.AppendKeyOf(nil, []arrow.Array{a}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// kvtText renders k=v rows (with a leading _change_type if present).
func kvtText(recs ...arrow.RecordBatch) []string {
	var out []string
	for _, rec := range recs {
		ct := -1
		if rec.Schema().Field(0).Name == kvcodec.ChangeTypeColumn {
			ct = 0
		}
		ks := rec.Column(ct + 1).(*array.Int64)
		vs := rec.Column(ct + 2).(*array.String)
		for i := 0; i < int(rec.NumRows()); i++ {
			s := fmt.Sprintf("%d=%s", ks.Value(i), vs.Value(i))
			if ct == 0 {
				s = rec.Column(0).(*array.String).Value(i) + " " + s
			}
			out = append(out, s)
		}
	}
	return out
}

// Primary-key buckets over Flight, through node 1 for a bucket node 2
// leads: kv-write (with its change records, offsets and a duplicate key
// kept as *kv.DuplicateKeyError), lookup, state scan and changelog, each
// following the redirect; and the raw protocol's answers.
func TestKVTransport(t *testing.T) {
	n1, n2 := startPair(t)
	ctx := context.Background()
	if _, err := n1.Server.Catalog().Propose(ctx, catalog.CreateTable{Spec: kvtSpec}); err != nil {
		t.Fatal(err)
	}
	raw := dialFlight(t, n1.Config.FlightAddr)
	id := bucketOn(t, raw, "kvt", 2)
	codec, err := buckets.NewKVCodec(kvtSpec)
	if err != nil {
		t.Fatal(err)
	}
	pool := flightsvc.NewPool()
	defer pool.Close()
	addr := n1.Config.FlightAddr

	var recs []kvcodec.ChangeRecord
	var first uint64
	deadline := time.Now().Add(30 * time.Second)
	for {
		recs, first, err = pool.WriteKV(ctx, addr, id, kvtWrites(t, codec, kvcodec.OpInsert, []int64{1, 2, 3}, []string{"a", "b", "c"}))
		if err == nil {
			break
		}
		if !errors.Is(err, buckets.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(recs) != 3 || first != 0 || recs[0].Type != kvcodec.Insert || recs[2].Write != 2 {
		t.Fatalf("insert: %v at %d", recs, first)
	}
	recs, first, err = pool.WriteKV(ctx, addr, id, kvtWrites(t, codec, kvcodec.OpUpsert, []int64{2, 4}, []string{"b2", "d"}))
	if err != nil || first != 3 || len(recs) != 3 || recs[0].Type != kvcodec.UpdateBefore || recs[1].Type != kvcodec.UpdateAfter || recs[2].Type != kvcodec.Insert {
		t.Fatalf("upsert: %v at %d, %v", recs, first, err)
	}
	del := kvtWrites(t, codec, kvcodec.OpDelete, []int64{1}, []string{""})
	if recs, first, err = pool.WriteKV(ctx, addr, id, del); err != nil || first != 6 || len(recs) != 1 || recs[0].Type != kvcodec.Delete {
		t.Fatalf("delete: %v at %d, %v", recs, first, err)
	}
	// A duplicate key: nothing written, the error keeps its write index.
	_, _, err = pool.WriteKV(ctx, addr, id, kvtWrites(t, codec, kvcodec.OpInsert, []int64{9, 3}, []string{"x", "dup"}))
	var dup *kv.DuplicateKeyError
	if !errors.As(err, &dup) || dup.Write != 1 || !slices.Equal(dup.Key, kvtKey(t, codec, 3)) {
		t.Fatalf("duplicate insert: %v", err)
	}

	row, ok, err := pool.GetKV(ctx, addr, id, kvtKey(t, codec, 2))
	if err != nil || !ok {
		t.Fatalf("lookup 2: %v %v", ok, err)
	}
	rec, err := codec.DecodeRows(memory.DefaultAllocator, [][]byte{row})
	if err != nil {
		t.Fatal(err)
	}
	if got := kvtText(rec); fmt.Sprint(got) != "[2=b2]" {
		t.Fatalf("lookup 2: %v", got)
	}
	rec.Release()
	if _, ok, err := pool.GetKV(ctx, addr, id, kvtKey(t, codec, 1)); err != nil || ok {
		t.Fatalf("lookup of a deleted key: %v %v", ok, err)
	}
	if _, ok, err := pool.GetKV(ctx, addr, id, kvtKey(t, codec, 9)); err != nil || ok {
		t.Fatalf("lookup of the key of a failed batch: %v %v", ok, err)
	}

	state, err := pool.ScanKV(ctx, addr, id)
	if err != nil {
		t.Fatal(err)
	}
	if got := kvtText(state...); fmt.Sprint(got) != "[2=b2 3=c 4=d]" {
		t.Fatalf("scan: %v", got)
	}
	for _, r := range state {
		r.Release()
	}
	changes, err := pool.ReadChangelog(ctx, addr, id)
	if err != nil {
		t.Fatal(err)
	}
	var cl []arrow.RecordBatch
	for _, b := range changes {
		cl = append(cl, b.Record)
	}
	want := "[+I 1=a +I 2=b +I 3=c -U 2=b +U 2=b2 +I 4=d -D 1=a]"
	if got := kvtText(cl...); fmt.Sprint(got) != want || changes[0].Offset != 0 {
		t.Fatalf("changelog: %v, want %s", got, want)
	}
	buckets.ReleaseBatches(changes)

	// Raw protocol: node 1 redirects a state ticket to node 2.
	ticket := flightwire.Ticket{Bucket: uint64(id)}.Encode()
	_, err = readEndpoint(ctx, raw, &flight.FlightEndpoint{Ticket: &flight.Ticket{Ticket: ticket}})
	if r, ok := flightwire.RedirectOf(err); !ok || r.Leader != 2 {
		t.Fatalf("state ticket at node 1: %v", err)
	}
	raw2 := dialFlight(t, n2.Config.FlightAddr)
	rows, err := readEndpoint(ctx, raw2, &flight.FlightEndpoint{Ticket: &flight.Ticket{Ticket: ticket}})
	if err != nil || fmt.Sprint(rows) != "[2|b2 3|c 4|d]" {
		t.Fatalf("state ticket at node 2: %v %v", rows, err)
	}
	// GetFlightInfo lists every bucket of the table, each at its leader.
	info, err := raw.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"kvt"}})
	if err != nil || len(info.Endpoint) != 2 {
		t.Fatalf("flight info: %v %v", info, err)
	}
	// A table-addressed DoPut into a primary-key table upserts, routed to
	// both buckets (one here, one forwarded); within a DoPut a later row of
	// a key wins.
	put := func(keys []int64, vals []string) arrow.RecordBatch {
		b := array.NewRecordBuilder(memory.DefaultAllocator, codec.Schema())
		defer b.Release()
		for i, k := range keys {
			b.Field(0).(*array.Int64Builder).Append(k)
			b.Field(1).(*array.StringBuilder).Append(vals[i])
		}
		return b.NewRecordBatch()
	}
	p1 := put([]int64{100, 101, 102, 103}, []string{"p100", "p101", "p102", "p103"})
	p2 := put([]int64{100, 104}, []string{"p100-again", "p104"})
	defer p1.Release()
	defer p2.Release()
	res, err := doPut(t, raw, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"kvt"}}, p1, p2)
	if err != nil || len(res) != 1 || string(res[0].AppMetadata) != `{"rows":6}` {
		t.Fatalf("DoPut into a primary-key table: %v %v", res, err)
	}
	all := map[string]bool{}
	var ids []catalog.BucketID
	n1.Server.Catalog().Read(func(v *catalog.View) {
		tb, _ := v.TableNamed("kvt")
		ids = tb.Buckets
	})
	for _, bid := range ids {
		state, err := pool.ScanKV(ctx, addr, bid)
		if err != nil {
			t.Fatal(err)
		}
		put := 0
		for _, row := range kvtText(state...) {
			all[row] = true
			if strings.HasPrefix(row, "10") {
				put++
			}
		}
		if put == 0 {
			t.Fatalf("bucket %d got none of the DoPut's rows: the test does not cover both a local and a forwarded part", bid)
		}
		for _, r := range state {
			r.Release()
		}
	}
	// (The kv-writes above went to one bucket whatever the keys' hash.)
	for _, want := range []string{"2=b2", "3=c", "4=d", "100=p100-again", "101=p101", "102=p102", "103=p103", "104=p104"} {
		if !all[want] {
			t.Fatalf("after the DoPut: %v lacks %s", all, want)
		}
	}
	if len(all) != 8 {
		t.Fatalf("after the DoPut: %v", all)
	}
	// A bucket-addressed DoPut at a node that does not lead the bucket is
	// redirected (TestPutBucketKV covers the leader's side).
	if _, err := doPut(t, raw, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"kvt", "bucket", fmt.Sprint(id)}}, p2); err == nil {
		t.Fatal("a bucket-addressed DoPut at a node that does not lead the bucket was accepted")
	} else if r, ok := flightwire.RedirectOf(err); !ok || r.Leader != 2 {
		t.Fatalf("bucket-addressed DoPut at node 1: want NotLeader to node 2, got %v", err)
	}

	// kv-write to a log table's bucket, and an unknown bucket.
	if _, err := n1.Server.Catalog().Propose(ctx, catalog.CreateTable{Spec: catalog.TableSpec{Name: "logt", Columns: []catalog.Column{{Name: "k", Type: "bigint"}}, Buckets: 2}}); err != nil {
		t.Fatal(err)
	}
	logID := bucketOn(t, raw, "logt", 1)
	if _, _, err := pool.WriteKV(ctx, addr, logID, del); err == nil || !strings.Contains(err.Error(), "is a log bucket") || !strings.Contains(err.Error(), "InvalidArgument") {
		t.Fatalf("kv-write to a log bucket: %v", err)
	}
	if _, _, err := pool.WriteKV(ctx, addr, 999999, del); !errors.Is(err, buckets.ErrNoSuchBucket) {
		t.Fatalf("kv-write to an unknown bucket: %v", err)
	}
}
