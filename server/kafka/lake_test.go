package kafka_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/minkdb/mink/internal/minktest"
	"github.com/minkdb/mink/server"
)

// TestFetchFromTheLake: a fetch of a partition whose stream retention
// trimmed after tiering reads the rows below the stream's start from the
// lake, within the partition's byte budget (one record even if it is
// larger, KIP-74), and fetch after fetch with a small budget a consumer
// gets every offset once, across the lake's end into the stream. A fetch
// of two partitions stays within the response's budget. ListOffsets finds
// the lake's rows by their timestamps.
func TestFetchFromTheLake(t *testing.T) {
	n := minktest.Start(t, minktest.Options{Tweak: func(cfg *server.Config) {
		cfg.TieringFreshness = time.Hour // rounds only when asked
	}})
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, n.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE TABLE t (key bytea, value bytea, headers jsonb, ts timestamptz) WITH (buckets = 2, log_retention = '1s')"); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Config.KafkaAddr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const valueSize, baseTS = 100, 1_700_000_000_000
	produce := func(from, to int) {
		t.Helper()
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			recs = append(recs, &kgo.Record{Topic: "t", Partition: int32(i % 2), Value: fmt.Appendf(nil, "%0*d", valueSize, i),
				Timestamp: time.UnixMilli(baseTS + int64(i)*1000)})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(0, 400) // 200 per partition
	admin := server.NewAdminClient(n.Config.AdminAddr)
	deadline := time.Now().Add(60 * time.Second)
	for trimmed := false; !trimmed; {
		if time.Now().After(deadline) {
			t.Fatal("the streams were not trimmed to their tiered offsets within 60 s")
		}
		if err := admin.TieringRun(ctx, "t", true, func(server.TieringRunEvent) {}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
		bs, err := admin.TableBuckets(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		trimmed = len(bs) == 2
		for _, b := range bs {
			trimmed = trimmed && b.Start == 200 && b.End == 200
		}
	}
	produce(400, 440) // the streams' part: offsets 200..219

	fetch := func(offsets map[int32]int64, partBytes, maxBytes int32) map[int32]kmsg.FetchResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxBytes, req.SessionEpoch = -1, maxBytes, -1
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = "t"
		for p, o := range offsets {
			fp := kmsg.NewFetchRequestTopicPartition()
			fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = p, o, partBytes, -1
			ft.Partitions = append(ft.Partitions, fp)
		}
		req.Topics = append(req.Topics, ft)
		resp, err := retried(t, func() (*kmsg.FetchResponse, error) { return req.RequestWith(ctx, cl) })
		if err != nil {
			t.Fatal(err)
		}
		out := map[int32]kmsg.FetchResponseTopicPartition{}
		for _, p := range resp.Topics[0].Partitions {
			if p.ErrorCode != 0 || p.LogStartOffset != 0 || p.HighWatermark != 220 {
				t.Fatalf("fetch %v: partition %d: %v, log start %d, high watermark %d; want log start 0, high watermark 220",
					offsets, p.Partition, kerr.ErrorForCode(p.ErrorCode), p.LogStartOffset, p.HighWatermark)
			}
			out[p.Partition] = p
		}
		return out
	}

	// A budget smaller than one record: that record.
	if got := minktest.RecordBatchOffsets(t, fetch(map[int32]int64{0: 0}, 1, 1<<20)[0].RecordBatches); !slices.Equal(got, []int64{0}) {
		t.Fatalf("fetch from 0 with a 1-byte budget: offsets %v, want [0]", got)
	}
	// Small budgets: every offset once, in order, each response within
	// its budget.
	for _, budget := range []int32{200, 1000, 5000} {
		var got []int64
		for next, fetches := int64(0), 0; next < 220; fetches++ {
			if fetches > 1000 {
				t.Fatalf("budget %d: no progress at offset %d", budget, next)
			}
			raw := fetch(map[int32]int64{1: next}, budget, 1<<20)[1].RecordBatches
			offs := minktest.RecordBatchOffsets(t, raw)
			if len(offs) == 0 || offs[0] != next || (len(offs) > 1 && len(raw) > int(budget)) {
				t.Fatalf("budget %d, fetch from %d: offsets %v in %d bytes", budget, next, offs, len(raw))
			}
			got = append(got, offs...)
			next = offs[len(offs)-1] + 1
		}
		if !slices.Equal(got, seq(0, 220)) {
			t.Fatalf("budget %d: offsets %v, want 0..219 once each", budget, got)
		}
	}
	// One fetch of two partitions stays within the response's budget.
	resp := fetch(map[int32]int64{0: 10, 1: 10}, 1<<20, 1500)
	total, records := 0, 0
	for p, rp := range resp {
		offs := minktest.RecordBatchOffsets(t, rp.RecordBatches)
		if len(offs) > 0 && !slices.Equal(offs, seq(10, 10+int64(len(offs)))) {
			t.Fatalf("two partitions in 1500 bytes: partition %d offsets %v, want from 10 on", p, offs)
		}
		total += len(rp.RecordBatches)
		records += len(offs)
	}
	if records == 0 || total > 1500 {
		t.Fatalf("two partitions in 1500 bytes: %d records in %d bytes", records, total)
	}
	// ListOffsets: earliest 0, and by time the lake's rows too. Record i
	// is at offset i/2 of partition i%2, its timestamp baseTS + i s.
	listOffset := func(ts int64) (int64, int64) {
		t.Helper()
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = 0, ts, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := retried(t, func() (*kmsg.ListOffsetsResponse, error) { return req.RequestWith(ctx, cl) })
		if err != nil {
			t.Fatal(err)
		}
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 {
			t.Fatalf("ListOffsets %d: %v", ts, kerr.ErrorForCode(p.ErrorCode))
		}
		return p.Offset, p.Timestamp
	}
	for _, c := range []struct{ ts, offset, timestamp int64 }{
		{-2, 0, -1}, {-1, 220, -1},
		{baseTS, 0, baseTS}, {baseTS + 50_500, 26, baseTS + 52_000}, // in the lake
		{baseTS + 398_000, 199, baseTS + 398_000}, {baseTS + 398_001, 200, baseTS + 400_000}, // across its end
		{baseTS + 410_000, 205, baseTS + 410_000}, // in the stream
		{-3, 219, baseTS + 438_000}, {baseTS + 10_000_000, -1, -1},
	} {
		if offset, ts := listOffset(c.ts); offset != c.offset || ts != c.timestamp {
			t.Fatalf("ListOffsets %d: offset %d, timestamp %d; want %d, %d", c.ts, offset, ts, c.offset, c.timestamp)
		}
	}
	// A large budget: from inside the lake to the stream's end.
	if got := minktest.RecordBatchOffsets(t, fetch(map[int32]int64{0: 150}, 1<<20, 1<<20)[0].RecordBatches); !slices.Equal(got, seq(150, 220)) {
		t.Fatalf("fetch from 150: offsets %v, want 150..219", got)
	}
}

func seq(from, to int64) []int64 {
	var out []int64
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// retried runs a request again, as a Kafka client does, while the client
// reports a retriable error (LEADER_NOT_AVAILABLE when a loaded machine
// delays a lease renewal past the node's view of it), for up to 15 s; each
// retry is logged.
func retried[R any](t *testing.T, req func() (R, error)) (R, error) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := req()
		if err == nil || !kerr.IsRetriable(err) || time.Now().After(deadline) {
			return resp, err
		}
		t.Logf("retrying after a retriable error: %v", err)
		time.Sleep(100 * time.Millisecond)
	}
}
