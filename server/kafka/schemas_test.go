package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/minkdb/mink/internal/minktest"
)

// A log table of a schema other than public is the topic "schema.table":
// a producer writes its rows (SQL reads them there, not in public's table
// of the same name), a consumer group reads and commits them, and after
// ALTER SCHEMA … RENAME the topic has the new name and the group's
// committed offset moved with it. CreateTopics of "schema.name" creates
// the table in that schema.
func TestSchemaTopics(t *testing.T) {
	n := minktest.Start(t, minktest.Options{})
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, n.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{
		"CREATE SCHEMA staging",
		"CREATE TABLE staging.events (key bytea, value bytea, headers jsonb, ts timestamptz) WITH (buckets = 1)",
		"CREATE TABLE events (key bytea, value bytea, headers jsonb, ts timestamptz) WITH (buckets = 1)",
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Config.KafkaAddr), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for _, v := range []string{"a", "b", "c"} {
		recs = append(recs, &kgo.Record{Topic: "staging.events", Value: []byte(v)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var staged, public int
	if err := conn.QueryRow(ctx, "SELECT (SELECT count(*) FROM staging.events), (SELECT count(*) FROM events)").Scan(&staged, &public); err != nil {
		t.Fatal(err)
	}
	if staged != 3 || public != 0 {
		t.Fatalf("after producing 3 records to staging.events: staging.events has %d rows, public.events %d", staged, public)
	}

	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.Generation = "g", -1
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = "staging.events"
	cp := kmsg.NewOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset = 0, 2
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	cresp, err := retried(t, func() (*kmsg.OffsetCommitResponse, error) { return commit.RequestWith(ctx, cl) })
	if err != nil || cresp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("commit offset 2 of staging.events: %v %+v", err, cresp)
	}

	if _, err := conn.Exec(ctx, "ALTER SCHEMA staging RENAME TO marts"); err != nil {
		t.Fatal(err)
	}
	committed := func(topic string) int64 {
		t.Helper()
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Group = "g"
		ft := kmsg.NewOffsetFetchRequestTopic()
		ft.Topic, ft.Partitions = topic, []int32{0}
		req.Topics = append(req.Topics, ft)
		resp, err := retried(t, func() (*kmsg.OffsetFetchResponse, error) { return req.RequestWith(ctx, cl) })
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].Offset
	}
	if got := committed("marts.events"); got != 2 {
		t.Fatalf("group g's offset of marts.events after the rename: %d, want 2", got)
	}
	if got := committed("staging.events"); got != -1 {
		t.Fatalf("group g's offset of staging.events after the rename: %d, want -1 (none)", got)
	}
	fetch := kmsg.NewPtrFetchRequest()
	fetch.ReplicaID, fetch.MaxBytes, fetch.SessionEpoch = -1, 1<<20, -1
	fetchTopic := kmsg.NewFetchRequestTopic()
	fetchTopic.Topic = "marts.events"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = 0, 2, 1<<20, -1
	fetchTopic.Partitions = append(fetchTopic.Partitions, fp)
	fetch.Topics = append(fetch.Topics, fetchTopic)
	fresp, err := retried(t, func() (*kmsg.FetchResponse, error) { return fetch.RequestWith(ctx, cl) })
	if err != nil {
		t.Fatal(err)
	}
	if p := fresp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.HighWatermark != 3 {
		t.Fatalf("fetch marts.events from 2: %v, high watermark %d; want 3", kerr.ErrorForCode(p.ErrorCode), p.HighWatermark)
	}
	if got := minktest.RecordBatchOffsets(t, fresp.Topics[0].Partitions[0].RecordBatches); len(got) != 1 || got[0] != 2 {
		t.Fatalf("fetch marts.events from 2: offsets %v, want [2]", got)
	}

	create := kmsg.NewPtrCreateTopicsRequest()
	create.TimeoutMillis = 10_000
	topic := kmsg.NewCreateTopicsRequestTopic()
	topic.Topic, topic.NumPartitions, topic.ReplicationFactor = "marts.created", 2, -1
	create.Topics = append(create.Topics, topic)
	tresp, err := retried(t, func() (*kmsg.CreateTopicsResponse, error) { return create.RequestWith(ctx, cl) })
	if err != nil || tresp.Topics[0].ErrorCode != 0 {
		t.Fatalf("CreateTopics marts.created: %v %+v", err, tresp)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var buckets int
		err := conn.QueryRow(ctx, "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'marts' AND table_name = 'created'").Scan(&buckets)
		if err == nil && buckets == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("CreateTopics marts.created made no table created in schema marts (%v)", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
