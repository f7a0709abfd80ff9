package flightsvc_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/minkdb/mink/buckets"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/kv/kvcodec"
	"github.com/minkdb/mink/plan"
	"github.com/minkdb/mink/server/flightsvc"
)

// A Flight changelog read of a primary-key bucket whose changelog retention
// trimmed (below its oldest KV snapshot) starts at the trim point, through
// a node that redirects to the leader; the records after it are exact.
func TestKVChangelogAfterTrim(t *testing.T) {
	n1, n2 := startPair(t)
	ctx := context.Background()
	spec := kvtSpec
	spec.Name = "kvtrim"
	spec.Options = map[string]string{"tiering": "off"}
	cat := n1.Server.Catalog()
	if _, err := cat.Propose(ctx, catalog.CreateTable{Spec: spec}); err != nil {
		t.Fatal(err)
	}
	raw := dialFlight(t, n1.Config.FlightAddr)
	id := bucketOn(t, raw, "kvtrim", 2)
	codec, err := buckets.NewKVCodec(spec)
	if err != nil {
		t.Fatal(err)
	}
	pool := flightsvc.NewPool()
	defer pool.Close()
	addr := n1.Config.FlightAddr
	committed := func(end uint64) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			var got uint64
			cat.Read(func(v *catalog.View) { got = v.Streams[catalog.StreamID(id)].End })
			if got >= end {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("stream %d committed to %d, want %d", id, got, end)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	leader := func() *buckets.KVBucket {
		b, err := n2.Server.Buckets().KVBucket(id)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var end uint64
	for step := range 3 {
		var keys []int64
		var vals []string
		for k := range 10 {
			keys, vals = append(keys, int64(k)), append(vals, fmt.Sprintf("s%d", step))
		}
		var recs []kvcodec.ChangeRecord
		var first uint64
		deadline := time.Now().Add(30 * time.Second)
		for {
			recs, first, err = pool.WriteKV(ctx, addr, id, kvtWrites(t, codec, kvcodec.OpUpsert, keys, vals))
			if err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			t.Fatal(err)
		}
		end = first + uint64(len(recs))
		committed(end)
		if step < 2 {
			if err := leader().Snapshot(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	var st catalog.Stream
	var oldest uint64
	var epoch uint64
	cat.Read(func(v *catalog.View) {
		st = *v.Streams[catalog.StreamID(id)]
		oldest = v.Buckets[id].Snapshots[0].LogOffset
		epoch = v.Coordinator.Epoch
	})
	point := plan.TrimPoint(&st, oldest, time.Time{})
	if point == 0 {
		t.Fatalf("nothing to trim below snapshot offset %d: %+v", oldest, st.Objects)
	}
	if _, err := cat.Propose(ctx, catalog.TrimStream{Stream: st.ID, Start: point, CoordinatorEpoch: epoch}); err != nil {
		t.Fatal(err)
	}
	changes, err := pool.ReadChangelog(ctx, addr, id)
	if err != nil {
		t.Fatal(err)
	}
	defer buckets.ReleaseBatches(changes)
	var cl []arrow.RecordBatch
	next := point
	for _, b := range changes {
		if b.Offset != next {
			t.Fatalf("changelog batch at offset %d, want %d (trimmed to %d)", b.Offset, next, point)
		}
		next += uint64(b.Record.NumRows())
		cl = append(cl, b.Record)
	}
	if next != end {
		t.Fatalf("changelog ends at %d, want %d", next, end)
	}
	// The last step's records are -U/+U pairs of value s2.
	got := kvtText(cl...)
	if last := got[len(got)-1]; last != "+U 9=s2" {
		t.Fatalf("last changelog record %q, want +U 9=s2 (%v)", last, got)
	}
	t.Logf("trimmed to %d (oldest snapshot at %d), changelog [%d, %d)", point, oldest, point, end)
}
