package main

// End-to-end tests of the Kafka listener (docs/kafka.md) with the real
// binary and real Kafka clients: franz-go in process, kcat (librdkafka) and
// kafka-python as processes.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kafkaAddr is the node's --kafka-addr.
func (n *node) kafkaAddr() string {
	for i, a := range n.args {
		if a == "--kafka-addr" {
			return n.args[i+1]
		}
	}
	return ""
}

func kafkaClient(t *testing.T, seeds []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func createTopic(t *testing.T, cl *kgo.Client, name string, partitions int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 20000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, -1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
}

// retryRetriable repeats a raw request for up to 15 s while kgo answers
// with a retriable error, as Kafka's clients do with their own requests: a
// request kgo shards by partition leader goes by the client's cached
// metadata, which can still hold the LEADER_NOT_AVAILABLE of a partition
// from before its bucket opened.
func retryRetriable[R any](ctx context.Context, req func() (R, error)) (R, error) {
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := req()
		if err == nil || !kerr.IsRetriable(err) || time.Now().After(deadline) {
			return resp, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// consumeAll reads partitions [0, partitions) of topic from the start
// until want records arrived (or the timeout passes), through a
// direct-assigned consumer.
func consumeAll(t *testing.T, seeds []string, topic string, partitions int32, want int, timeout time.Duration) []*kgo.Record {
	t.Helper()
	offsets := map[int32]kgo.Offset{}
	for p := int32(0); p < partitions; p++ {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	cl := kafkaClient(t, seeds, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out []*kgo.Record
	for len(out) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records of %s in %v", len(out), want, topic, timeout)
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Logf("fetch %s/%d: %v", topic, p, err)
		})
		out = append(out, fs.Records()...)
	}
	cl.Close()
	return out
}

// endOffsets lists the end offset of each partition of topic.
func endOffsets(t *testing.T, cl *kgo.Client, topic string, partitions int32) map[int32]int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := int32(0); p < partitions; p++ {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = p, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	ends := map[int32]int64{}
	waitFor(t, 60*time.Second, "the end offsets of "+topic, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, shard := range cl.RequestSharded(ctx, req) {
			if shard.Err != nil {
				return false
			}
			for _, t := range shard.Resp.(*kmsg.ListOffsetsResponse).Topics {
				for _, p := range t.Partitions {
					if p.ErrorCode != 0 {
						return false
					}
					ends[p.Partition] = p.Offset
				}
			}
		}
		return len(ends) == int(partitions)
	})
	return ends
}

// consumeToEnd reads every partition of topic from the start to its end
// offset as of the call.
func consumeToEnd(t *testing.T, seeds []string, topic string, partitions int32, timeout time.Duration) []*kgo.Record {
	t.Helper()
	ends := endOffsets(t, kafkaClient(t, seeds), topic, partitions)
	total := 0
	for _, e := range ends {
		total += int(e)
	}
	recs := consumeAll(t, seeds, topic, partitions, total, timeout)
	var out []*kgo.Record
	for _, r := range recs {
		if r.Offset < ends[r.Partition] {
			out = append(out, r)
		}
	}
	return out
}

// checkDense fails unless the offsets of each partition are 0..n-1, each
// once.
func checkDense(t *testing.T, recs []*kgo.Record) map[int32]int {
	t.Helper()
	byPart := map[int32][]int64{}
	for _, r := range recs {
		byPart[r.Partition] = append(byPart[r.Partition], r.Offset)
	}
	counts := map[int32]int{}
	for p, offs := range byPart {
		sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
		for i, o := range offs {
			if o != int64(i) {
				t.Fatalf("partition %d: offsets are not dense from 0: %v", p, offs)
			}
		}
		counts[p] = len(offs)
	}
	return counts
}

// A topic created through Kafka is a log table: records produced with
// every compression codec by an idempotent producer are acknowledged at
// dense offsets, consumed back unchanged, and are rows in SQL; rows
// INSERTed by SQL are consumed as records.
func TestKafkaProduceConsume(t *testing.T) {
	n := newNode(t, nodeOpts{})
	n.start()
	n.waitHealthy()
	seeds := []string{n.kafkaAddr()}
	admin := kafkaClient(t, seeds)
	createTopic(t, admin, "events", 4)

	codecs := map[string]kgo.CompressionCodec{
		"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
	}
	ctx := context.Background()
	sent := map[string]*kgo.Record{}
	acked := map[int32][]int64{}
	for name, codec := range codecs {
		cl := kafkaClient(t, seeds, kgo.ProducerBatchCompression(codec), kgo.ProducerLinger(5*time.Millisecond))
		var recs []*kgo.Record
		for i := 0; i < 50; i++ {
			value := bytes.Repeat([]byte(fmt.Sprintf("%s-%d;", name, i)), 20) // compressible
			r := &kgo.Record{Topic: "events", Partition: int32(i % 4), Key: []byte(fmt.Sprintf("%s-%d", name, i)), Value: value,
				Headers: []kgo.RecordHeader{{Key: "codec", Value: []byte(name)}, {Key: "bin", Value: []byte{0xff, 0x00}}}}
			recs = append(recs, r)
			sent[string(r.Key)] = r
		}
		for _, res := range cl.ProduceSync(ctx, recs...) {
			if res.Err != nil {
				t.Fatalf("produce with %s: %v", name, res.Err)
			}
			acked[res.Record.Partition] = append(acked[res.Record.Partition], res.Record.Offset)
		}
	}
	for p, offs := range acked {
		sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
		for i, o := range offs {
			if o != int64(i) {
				t.Fatalf("partition %d: acknowledged offsets not dense: %v", p, offs)
			}
		}
	}
	got := consumeAll(t, seeds, "events", 4, len(sent), 30*time.Second)
	if len(got) != len(sent) {
		t.Fatalf("consumed %d records, produced %d", len(got), len(sent))
	}
	checkDense(t, got)
	for _, r := range got {
		want, ok := sent[string(r.Key)]
		if !ok {
			t.Fatalf("consumed a record never produced: key %q", r.Key)
		}
		if !bytes.Equal(r.Value, want.Value) || r.Partition != want.Partition || len(r.Headers) != 2 ||
			string(r.Headers[0].Value) != string(want.Headers[0].Value) || !bytes.Equal(r.Headers[1].Value, []byte{0xff, 0}) {
			t.Fatalf("record %q: consumed %q %v on partition %d, produced %q %v on %d", r.Key, r.Value, r.Headers, r.Partition, want.Value, want.Headers, want.Partition)
		}
		if d := r.Timestamp.Sub(want.Timestamp); d < -time.Millisecond || d > time.Millisecond {
			t.Fatalf("record %q: timestamp %v, produced at %v", r.Key, r.Timestamp, want.Timestamp)
		}
	}

	// The records are rows.
	conn, err := n.pg(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var rows int
	var headers string
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM events").Scan(&rows); err != nil || rows != len(sent) {
		t.Fatalf("SELECT count(*) FROM events: %d, %v; want %d", rows, err, len(sent))
	}
	var value []byte
	if err := conn.QueryRow(ctx, "SELECT value, headers::text FROM events WHERE key = 'zstd-7'::bytea").Scan(&value, &headers); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(value, sent["zstd-7"].Value) || headers != `[{"key": "codec", "value": "zstd"}, {"key": "bin", "value_base64": "/wA="}]` {
		t.Fatalf("row of zstd-7: value %q headers %s", value, headers)
	}

	// "events$changelog" shows each row at the bucket and offset Kafka
	// consumers see it at.
	bucketOf := map[int32]int64{}
	for _, b := range tableBuckets(t, n, "events") {
		bucketOf[int32(b.Index)] = int64(b.Bucket)
	}
	changes, err := conn.Query(ctx, `SELECT _change_type, _bucket, _offset, value FROM "events$changelog"`)
	if err != nil {
		t.Fatal(err)
	}
	type at struct{ bucket, offset int64 }
	logged := map[at][]byte{}
	for changes.Next() {
		var kind string
		var where at
		var v []byte
		if err := changes.Scan(&kind, &where.bucket, &where.offset, &v); err != nil {
			t.Fatal(err)
		}
		if kind != "+I" {
			t.Fatalf("a log table's changelog has a %q change", kind)
		}
		logged[where] = v
	}
	if err := changes.Err(); err != nil {
		t.Fatal(err)
	}
	if len(logged) != len(got) {
		t.Fatalf("events$changelog has %d rows, the topic %d records", len(logged), len(got))
	}
	for _, r := range got {
		if v, ok := logged[at{bucketOf[r.Partition], r.Offset}]; !ok || !bytes.Equal(v, r.Value) {
			t.Fatalf("record at %d/%d (%q): the changelog has %q there", r.Partition, r.Offset, r.Key, v)
		}
	}

	// Rows INSERTed by SQL into a table of columns are consumed as JSON
	// records, and JSON records produced are rows.
	if _, err := conn.Exec(ctx, `CREATE TABLE orders (id bigint NOT NULL, item text, qty int, price numeric(8,2), at timestamptz, tags text[]) WITH (buckets = 2)`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO orders VALUES (1, 'pen', 2, 1.50, '2024-01-02 03:04:05+00', '{a,b}')`); err != nil {
		t.Fatal(err)
	}
	cl := kafkaClient(t, seeds)
	res := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: 1, Value: []byte(`{"id": 2, "item": "ink", "qty": 5, "price": 9.99, "at": "2024-05-06T07:08:09Z"}`)})
	if err := res.FirstErr(); err != nil {
		t.Fatalf("produce a JSON row: %v", err)
	}
	for _, bad := range []string{`{"id": "two"}`, `{"id": 3, "colour": "red"}`, `[1,2]`, `{"id": 3, "qty": 1.5}`, `{"item": "no id"}`} {
		res := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: 0, Value: []byte(bad)})
		if err := res.FirstErr(); !errors.Is(err, kerr.InvalidRecord) {
			t.Fatalf("produce %s: %v, want INVALID_RECORD", bad, err)
		}
	}
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM orders").Scan(&rows); err != nil || rows != 2 {
		t.Fatalf("orders has %d rows (%v) after one good and five bad records; want 2", rows, err)
	}
	var item string
	if err := conn.QueryRow(ctx, "SELECT item FROM orders WHERE id = 2 AND qty = 5 AND price = 9.99 AND at = '2024-05-06 07:08:09+00' AND tags IS NULL").Scan(&item); err != nil || item != "ink" {
		t.Fatalf("the produced order: %q, %v", item, err)
	}
	orders := consumeAll(t, seeds, "orders", 2, 2, 30*time.Second)
	values := map[string]bool{}
	for _, r := range orders {
		values[string(r.Value)] = true
	}
	for _, want := range []string{
		`{"id":1,"item":"pen","qty":2,"price":1.50,"at":"2024-01-02T03:04:05+00:00","tags":["a","b"]}`,
		`{"id":2,"item":"ink","qty":5,"price":9.99,"at":"2024-05-06T07:08:09+00:00","tags":null}`,
	} {
		if !values[want] {
			t.Fatalf("consumed %v, want a record %s", values, want)
		}
	}

	// Metadata: a primary-key table is no topic, an unknown topic is
	// UNKNOWN_TOPIC_OR_PARTITION, every partition has a leader.
	if _, err := conn.Exec(ctx, `CREATE TABLE accounts (id bigint PRIMARY KEY, balance bigint)`); err != nil {
		t.Fatal(err)
	}
	mreq := kmsg.NewPtrMetadataRequest()
	for _, name := range []string{"events", "accounts", "nosuch"} {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(name)
		mreq.Topics = append(mreq.Topics, mt)
	}
	mresp, err := mreq.RequestWith(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if len(mresp.Brokers) != 1 || fmt.Sprintf("%s:%d", mresp.Brokers[0].Host, mresp.Brokers[0].Port) != n.kafkaAddr() {
		t.Fatalf("brokers %+v, want the node at %s", mresp.Brokers, n.kafkaAddr())
	}
	if e := mresp.Topics[0]; e.ErrorCode != 0 || len(e.Partitions) != 4 || e.Partitions[3].Leader != 1 || e.Partitions[3].LeaderEpoch < 1 {
		t.Fatalf("metadata of events: %+v", e)
	}
	for _, i := range []int{1, 2} {
		if code := mresp.Topics[i].ErrorCode; code != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("metadata of %s: error %v, want UNKNOWN_TOPIC_OR_PARTITION", *mresp.Topics[i].Topic, kerr.ErrorForCode(code))
		}
	}

	// ListOffsets: earliest 0, latest the partition's record count; a
	// fetch past the end is OFFSET_OUT_OF_RANGE.
	counts := checkDense(t, got)
	lreq := kmsg.NewPtrListOffsetsRequest()
	lreq.ReplicaID = -1
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "events"
	for _, ts := range []int64{-2, -1} {
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition, lp.Timestamp = 2, ts
		lt.Partitions = append(lt.Partitions, lp)
	}
	lreq.Topics = append(lreq.Topics, lt)
	shard := admin.RequestSharded(ctx, lreq)
	if shard[0].Err != nil {
		t.Fatal(shard[0].Err)
	}
	lresp := shard[0].Resp.(*kmsg.ListOffsetsResponse)
	var earliest, latest int64 = -9, -9
	for _, p := range lresp.Topics[0].Partitions {
		if p.ErrorCode != 0 {
			t.Fatalf("list offsets: %v", kerr.ErrorForCode(p.ErrorCode))
		}
		if earliest == -9 {
			earliest = p.Offset
		} else {
			latest = p.Offset
		}
	}
	if earliest != 0 || latest != int64(counts[2]) {
		t.Fatalf("list offsets of events/2: earliest %d latest %d, want 0 and %d", earliest, latest, counts[2])
	}
	freq := kmsg.NewPtrFetchRequest()
	freq.ReplicaID, freq.MaxBytes, freq.SessionEpoch = -1, 1<<20, -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "events"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = 2, latest+5, 1<<20, -1
	ft.Partitions = append(ft.Partitions, fp)
	freq.Topics = append(freq.Topics, ft)
	fresp, err := freq.RequestWith(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if code := fresp.Topics[0].Partitions[0].ErrorCode; code != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch past the end: %v, want OFFSET_OUT_OF_RANGE", kerr.ErrorForCode(code))
	}
	// A fetch returns what fits the partition's byte budget, and at least
	// one record however small the budget (KIP-74).
	for _, tc := range []struct {
		budget   int32
		min, max int
	}{{10, 1, 1}, {3000, 2, counts[2] - 1}, {1 << 20, counts[2], counts[2]}} {
		freq.Topics[0].Partitions[0].FetchOffset = 0
		freq.Topics[0].Partitions[0].PartitionMaxBytes = tc.budget
		fresp, err := freq.RequestWith(ctx, admin)
		if err != nil {
			t.Fatal(err)
		}
		p := fresp.Topics[0].Partitions[0]
		batches, err := parseFetched(p.RecordBatches)
		if err != nil || p.ErrorCode != 0 {
			t.Fatalf("fetch with a budget of %d: %v %v", tc.budget, kerr.ErrorForCode(p.ErrorCode), err)
		}
		if batches < tc.min || batches > tc.max || tc.budget > 10 && len(p.RecordBatches) > int(tc.budget) {
			t.Fatalf("fetch with a budget of %d: %d records in %d bytes, want %d to %d", tc.budget, batches, len(p.RecordBatches), tc.min, tc.max)
		}
	}
	n.stop()
}

// parseFetched counts the records of a fetch response's record batches,
// checking each batch's CRC-32C.
func parseFetched(raw []byte) (int, error) {
	records := 0
	for len(raw) > 0 {
		if len(raw) < 61 {
			return 0, fmt.Errorf("a batch cut short: %d bytes", len(raw))
		}
		n := 12 + int(binary.BigEndian.Uint32(raw[8:]))
		if n > len(raw) {
			return 0, fmt.Errorf("a batch of %d bytes in %d", n, len(raw))
		}
		if crc32.Checksum(raw[21:n], crc32.MakeTable(crc32.Castagnoli)) != binary.BigEndian.Uint32(raw[17:]) {
			return 0, fmt.Errorf("a batch with a bad CRC")
		}
		records += int(binary.BigEndian.Uint32(raw[57:]))
		raw = raw[n:]
	}
	return records, nil
}

// rawConn is a Kafka connection that speaks bytes.
type rawConn struct {
	t *testing.T
	c net.Conn
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c}
}

// send sends a request with header v1 (no flexible versions here).
func (r *rawConn) send(key, version int16, corr int32, body []byte) {
	var b []byte
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 4)
	b = append(b, "test"...)
	b = append(b, body...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	if _, err := r.c.Write(b); err != nil {
		r.t.Fatal(err)
	}
}

// closed reports whether the server closed the connection (within 5 s).
func (r *rawConn) closed() bool {
	r.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := r.c.Read(make([]byte, 1))
	return errors.Is(err, io.EOF) || err != nil && !isTimeout(err)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// produceRaw sends a Produce v7 of one partition's records and returns the
// partition's error code.
func produceRaw(t *testing.T, addr, topic string, partition int32, records []byte) int16 {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(7)
	req.Acks, req.TimeoutMillis = -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	r := dialRaw(t, addr)
	r.send(0, 7, 42, req.AppendTo(nil))
	r.c.SetReadDeadline(time.Now().Add(15 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(r.c, size[:]); err != nil {
		t.Fatalf("produce response: %v", err)
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(r.c, frame); err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrProduceResponse()
	resp.SetVersion(7)
	if err := resp.ReadFrom(frame[4:]); err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

// recordBatch is a valid uncompressed v2 batch of values.
func recordBatch(values ...string) []byte {
	b := kmsg.RecordBatch{Magic: 2, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		FirstTimestamp: time.Now().UnixMilli(), MaxTimestamp: time.Now().UnixMilli(),
		NumRecords: int32(len(values)), LastOffsetDelta: int32(len(values) - 1)}
	for i, v := range values {
		r := kmsg.Record{OffsetDelta: int32(i), Value: []byte(v)}
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		b.Records = r.AppendTo(b.Records)
	}
	b.Length = int32(49 + len(b.Records))
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

// Bad input on the Kafka port: a frame too short or too large, an unknown
// API key, an unsupported version, a corrupt batch, an old message format
// and a bad JSON value. Each gets a closed connection or a clear error,
// stores nothing, and a client on another connection is not disturbed.
func TestKafkaBadInput(t *testing.T) {
	n := newNode(t, nodeOpts{})
	n.start()
	n.waitHealthy()
	addr := n.kafkaAddr()
	neighbour := kafkaClient(t, []string{addr})
	createTopic(t, neighbour, "good", 1)
	ctx := context.Background()
	produced := 0
	produceOne := func() {
		t.Helper()
		res := neighbour.ProduceSync(ctx, &kgo.Record{Topic: "good", Value: []byte(fmt.Sprint(produced))})
		if err := res.FirstErr(); err != nil {
			t.Fatalf("the neighbour's produce: %v", err)
		}
		produced++
	}
	produceOne()

	short := dialRaw(t, addr)
	short.c.Write([]byte{0, 0, 0, 3, 1, 2, 3})
	if !short.closed() {
		t.Fatal("a 3-byte frame did not close the connection")
	}
	huge := dialRaw(t, addr)
	huge.c.Write([]byte{0x7f, 0xff, 0xff, 0xff, 0, 0})
	if !huge.closed() {
		t.Fatal("a 2 GiB frame header did not close the connection")
	}
	unknown := dialRaw(t, addr)
	unknown.send(999, 0, 1, nil)
	if !unknown.closed() {
		t.Fatal("an unknown API key did not close the connection")
	}
	garbage := dialRaw(t, addr)
	garbage.send(int16(kmsg.Metadata), 1, 1, []byte{0xff, 0xff, 0xff})
	if !garbage.closed() {
		t.Fatal("a Metadata body that does not parse did not close the connection")
	}
	unsupported := dialRaw(t, addr)
	unsupported.send(int16(kmsg.Fetch), 1, 1, nil)
	if !unsupported.closed() {
		t.Fatal("Fetch v1 (not advertised) did not close the connection")
	}
	produceOne()

	batch := recordBatch("a", "b")
	corrupt := append([]byte(nil), batch...)
	corrupt[len(corrupt)-1] ^= 0xff
	if code := produceRaw(t, addr, "good", 0, corrupt); code != kerr.CorruptMessage.Code {
		t.Fatalf("a batch with a bad CRC: %v, want CORRUPT_MESSAGE", kerr.ErrorForCode(code))
	}
	old := append([]byte(nil), batch...)
	old[16] = 1
	if code := produceRaw(t, addr, "good", 0, old); code != kerr.UnsupportedForMessageFormat.Code {
		t.Fatalf("a magic v1 batch: %v, want UNSUPPORTED_FOR_MESSAGE_FORMAT", kerr.ErrorForCode(code))
	}
	if code := produceRaw(t, addr, "good", 0, batch[:30]); code != kerr.CorruptMessage.Code {
		t.Fatalf("a batch cut short: %v, want CORRUPT_MESSAGE", kerr.ErrorForCode(code))
	}
	if code := produceRaw(t, addr, "good", 7, batch); code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("partition 7 of a 1-partition topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", kerr.ErrorForCode(code))
	}
	if code := produceRaw(t, addr, "good", 0, batch); code != 0 {
		t.Fatalf("a good raw batch: %v", kerr.ErrorForCode(code))
	}
	produced += 2
	produceOne()

	// ApiVersions of a version from the future is answered (KIP-511).
	future := dialRaw(t, addr)
	future.send(int16(kmsg.ApiVersions), 99, 7, nil)
	future.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(future.c, size[:]); err != nil {
		t.Fatalf("ApiVersions v99: %v", err)
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	io.ReadFull(future.c, frame)
	av := kmsg.NewPtrApiVersionsResponse()
	if err := av.ReadFrom(frame[4:]); err != nil || av.ErrorCode != kerr.UnsupportedVersion.Code || len(av.ApiKeys) == 0 {
		t.Fatalf("ApiVersions v99: %+v, %v", av, err)
	}

	conn, err := n.pg(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var rows int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM good").Scan(&rows); err != nil || rows != produced {
		t.Fatalf("good has %d rows (%v), want the %d produced", rows, err, produced)
	}
	// The operator sees the closed connections and the refused partitions.
	metrics := scrapeMetrics(t, n.admin)
	if metrics["mink_kafka_bad_requests_total"] < 5 || metrics["mink_kafka_produce_errors_total"] < 4 ||
		metrics["mink_kafka_produced_records_total"] != float64(produced) {
		t.Fatalf("metrics after the bad input: %v", metrics)
	}
	n.stop()
}

// kcatPath finds kcat, which scripts/install-test-deps.sh installs.
func kcatPath(t *testing.T) string {
	t.Helper()
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatal("kcat is not installed (scripts/install-test-deps.sh installs it)")
	}
	return kcat
}

// kcat (librdkafka, from Debian) lists the topic's partitions and leaders,
// produces with each compression codec and consumes everything back.
func TestKafkaKcat(t *testing.T) {
	kcat := kcatPath(t)
	n := newNode(t, nodeOpts{})
	n.start()
	n.waitHealthy()
	addr := n.kafkaAddr()
	createTopic(t, kafkaClient(t, []string{addr}), "kc", 3)
	run := func(stdin string, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, kcat, append([]string{"-b", addr}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kcat %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	meta := run("", "-L", "-t", "kc")
	for p := 0; p < 3; p++ {
		if !strings.Contains(meta, fmt.Sprintf("partition %d, leader 1, replicas: 1, isrs: 1", p)) {
			t.Fatalf("kcat -L does not show partition %d led by node 1:\n%s", p, meta)
		}
	}
	want := map[string]bool{}
	for i, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		var lines []string
		for j := 0; j < 20; j++ {
			v := fmt.Sprintf("%s-%d", codec, j)
			lines = append(lines, v)
			want[v] = true
		}
		run(strings.Join(lines, "\n")+"\n", "-P", "-t", "kc", "-p", fmt.Sprint(i%3), "-z", codec, "-X", "enable.idempotence=true")
	}
	out := run("", "-C", "-t", "kc", "-o", "beginning", "-e", "-q", "-f", "%p %o %s\n")
	got := map[string]bool{}
	perPart := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			t.Fatalf("kcat -C line %q", line)
		}
		if got[f[2]] {
			t.Fatalf("kcat consumed %s twice", f[2])
		}
		got[f[2]] = true
		perPart[f[0]] = append(perPart[f[0]], f[1])
	}
	if len(got) != len(want) {
		t.Fatalf("kcat consumed %d records, produced %d:\n%s", len(got), len(want), out)
	}
	for p, offs := range perPart {
		for i, o := range offs {
			if o != fmt.Sprint(i) {
				t.Fatalf("partition %s: offsets %v", p, offs)
			}
		}
	}
	n.stop()
}

// kafka-python (Debian's python3-kafka) produces and consumes a topic.
func TestKafkaPython(t *testing.T) {
	n := newNode(t, nodeOpts{})
	n.start()
	n.waitHealthy()
	addr := n.kafkaAddr()
	createTopic(t, kafkaClient(t, []string{addr}), "py", 2)
	script := `
import sys
from kafka import KafkaProducer, KafkaConsumer, TopicPartition
addr = sys.argv[1]
p = KafkaProducer(bootstrap_servers=addr, compression_type='gzip', acks='all')
offsets = [p.send('py', key=b'k%d' % i, value=b'v%d' % i, partition=i % 2).get(timeout=30).offset for i in range(10)]
print('produced', sorted(offsets))
c = KafkaConsumer(bootstrap_servers=addr, auto_offset_reset='earliest', consumer_timeout_ms=5000)
c.assign([TopicPartition('py', 0), TopicPartition('py', 1)])
got = sorted((m.partition, m.offset, m.value.decode()) for m in c)
print('consumed', len(got), got)
`
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "/usr/bin/python3", "-c", script, addr).CombinedOutput()
	if err != nil {
		t.Fatalf("kafka-python: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "produced [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]") ||
		!strings.Contains(string(out), "consumed 10 [(0, 0, 'v0'), (0, 1, 'v2')") {
		t.Fatalf("kafka-python:\n%s", out)
	}
	n.stop()
}

// Consumer groups with real clients: kcat -G consumes a topic in a group
// and a second run of the same group resumes after the committed offsets;
// kafka-python commits in one consumer and a second consumer of the group
// resumes there.
func TestKafkaConsumerGroups(t *testing.T) {
	kcat := kcatPath(t)
	n := newNode(t, nodeOpts{})
	n.start()
	n.waitHealthy()
	addr := n.kafkaAddr()
	cl := kafkaClient(t, []string{addr})
	createTopic(t, cl, "grp", 2)
	ctx := context.Background()
	produce := func(from, to int) {
		t.Helper()
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			recs = append(recs, &kgo.Record{Topic: "grp", Partition: int32(i % 2), Value: []byte(fmt.Sprintf("m%d", i))})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(0, 20)
	kcatGroup := func() []string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, kcat, "-b", addr, "-G", "kg", "-X", "auto.offset.reset=earliest", "-e", "-q", "-f", "%s\n",
			"-X", "auto.commit.interval.ms=100", "grp").CombinedOutput()
		if err != nil {
			t.Fatalf("kcat -G: %v\n%s", err, out)
		}
		var vals []string
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if l != "" {
				vals = append(vals, l)
			}
		}
		sort.Strings(vals)
		return vals
	}
	if got := kcatGroup(); len(got) != 20 {
		t.Fatalf("kcat -G consumed %d records, want 20: %v", len(got), got)
	}
	produce(20, 26)
	if got := kcatGroup(); fmt.Sprint(got) != "[m20 m21 m22 m23 m24 m25]" {
		t.Fatalf("kcat -G again consumed %v, want only the 6 new records", got)
	}

	script := `
import sys
from kafka import KafkaConsumer
addr = sys.argv[1]
def consumer():
    return KafkaConsumer('grp', bootstrap_servers=addr, group_id='pyg', auto_offset_reset='earliest',
                         enable_auto_commit=False, consumer_timeout_ms=8000)
c = consumer()
first = []
for m in c:
    first.append(m.value.decode())
    if len(first) == 10:
        c.commit()
        break
c.close()
c = consumer()
rest = [m.value.decode() for m in c]
c.close()
print('first', len(first), 'rest', len(rest), 'overlap', len(set(first) & set(rest)), 'all', len(set(first) | set(rest)))
`
	ctx2, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx2, "/usr/bin/python3", "-c", script, addr).CombinedOutput()
	if err != nil {
		t.Fatalf("kafka-python group: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "first 10 rest 16 overlap 0 all 26") {
		t.Fatalf("kafka-python group: want the second consumer to resume after the commit:\n%s", out)
	}
	n.stop()
}

// A topic is a log table for tiering and retention too: once its records
// are tiered and older than log_retention, the stream is trimmed; a fetch
// below the retained start is served from the lake and continues into the
// stream, the log start (and ListOffsets earliest) stays 0, a consumer from
// the start reads every record, and so does SQL.
func TestKafkaRetention(t *testing.T) {
	n := startTieringNode(t, t.TempDir(), "1h") // rounds only when asked
	ctx := context.Background()
	conn, err := n.pg(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TABLE ret (key bytea, value bytea, headers jsonb, ts timestamptz) WITH (buckets = 1, log_retention = '1s')`); err != nil {
		t.Fatal(err)
	}
	seeds := []string{n.kafkaAddr()}
	cl := kafkaClient(t, seeds)
	produce := func(from, to int) {
		t.Helper()
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			recs = append(recs, &kgo.Record{Topic: "ret", Value: []byte(fmt.Sprint(i))})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(0, 100)
	waitFor(t, 30*time.Second, "100 rows committed", func() bool {
		return tableTiering(t, tieringStatus(t, n), "ret").End == 100
	})
	time.Sleep(1500 * time.Millisecond) // older than log_retention
	out, errOut, code := runMink(t, 60*time.Second, "tiering", "run", "--table", "ret", "--wait", "--server", n.admin)
	if code != 0 {
		t.Fatalf("mink tiering run: exit %d: %s\n%s", code, errOut, out)
	}
	waitFor(t, 30*time.Second, "the stream trimmed to its tiered offset", func() bool {
		b := tableBuckets(t, n, "ret")[0]
		return b.Start == 100 && b.End == 100
	})
	produce(100, 110)

	freq := kmsg.NewPtrFetchRequest()
	freq.ReplicaID, freq.MaxBytes, freq.SessionEpoch = -1, 1<<20, -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "ret"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = 0, 50, 1<<20, -1
	ft.Partitions = append(ft.Partitions, fp)
	freq.Topics = append(freq.Topics, ft)
	fresp, err := freq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	p := fresp.Topics[0].Partitions[0]
	if n, err := parseFetched(p.RecordBatches); p.ErrorCode != 0 || err != nil || n != 60 || p.LogStartOffset != 0 || p.HighWatermark != 110 {
		t.Fatalf("fetch at 50 after the trim: %v, %d records (%v), log start %d, high watermark %d; want 60 records (the lake's, then the stream's), 0, 110",
			kerr.ErrorForCode(p.ErrorCode), n, err, p.LogStartOffset, p.HighWatermark)
	}
	lreq := kmsg.NewPtrListOffsetsRequest()
	lreq.ReplicaID = -1
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "ret"
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Timestamp = -2
	lt.Partitions = append(lt.Partitions, lp)
	lreq.Topics = append(lreq.Topics, lt)
	lresp, err := retryRetriable(ctx, func() (*kmsg.ListOffsetsResponse, error) { return lreq.RequestWith(ctx, cl) })
	if err != nil {
		t.Fatal(err)
	}
	if got := lresp.Topics[0].Partitions[0].Offset; got != 0 {
		t.Fatalf("earliest offset after the trim: %d, want 0 (the lake holds the trimmed rows)", got)
	}
	recs := consumeAll(t, seeds, "ret", 1, 110, 30*time.Second)
	if len(recs) != 110 || recs[0].Offset != 0 || string(recs[0].Value) != "0" || recs[109].Offset != 109 || string(recs[109].Value) != "109" {
		t.Fatalf("a consumer from the start got %d records, first at %d (%q)", len(recs), recs[0].Offset, recs[0].Value)
	}
	var rows int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM ret").Scan(&rows); err != nil || rows != 110 {
		t.Fatalf("SELECT count(*) FROM ret: %d, %v; want all 110 (the trimmed ones from the lake)", rows, err)
	}
	n.stop()
}

// scrapeMetrics reads the node's /metrics: unlabelled series by name.
func scrapeMetrics(t *testing.T, admin string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 || strings.HasPrefix(line, "#") || strings.Contains(f[0], "{") {
			continue
		}
		if v, err := strconv.ParseFloat(f[1], 64); err == nil {
			out[f[0]] = v
		}
	}
	return out
}

// CreateTopics honours the topic configs mink can (retention.ms becomes
// log_retention, max.message.bytes bounds a batch) and refuses the others
// with INVALID_CONFIG instead of dropping them; DescribeConfigs reports
// them.
func TestKafkaTopicConfigs(t *testing.T) {
	n := newNode(t, nodeOpts{})
	n.start()
	n.waitHealthy()
	cl := kafkaClient(t, []string{n.kafkaAddr()})
	ctx := context.Background()
	create := func(name string, kv ...string) (int16, string) {
		t.Helper()
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 20000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, 1
		for i := 0; i < len(kv); i += 2 {
			rt.Configs = append(rt.Configs, kmsg.CreateTopicsRequestTopicConfig{Name: kv[i], Value: kmsg.StringPtr(kv[i+1])})
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		msg := ""
		if m := resp.Topics[0].ErrorMessage; m != nil {
			msg = *m
		}
		return resp.Topics[0].ErrorCode, msg
	}
	if code, msg := create("compacted", "cleanup.policy", "compact"); code != kerr.InvalidConfig.Code || !strings.Contains(msg, "primary-key table") {
		t.Fatalf("cleanup.policy=compact: %v %q", kerr.ErrorForCode(code), msg)
	}
	if code, msg := create("odd", "no.such.config", "x"); code != kerr.InvalidConfig.Code || !strings.Contains(msg, "no.such.config") {
		t.Fatalf("an unknown config: %v %q", kerr.ErrorForCode(code), msg)
	}
	conn, err := n.pg(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var tables int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename IN ('compacted', 'odd')").Scan(&tables); err != nil || tables != 0 {
		t.Fatalf("refused topics left %d tables (%v)", tables, err)
	}
	if code, msg := create("limited", "retention.ms", "86400000", "max.message.bytes", "51200", "segment.bytes", "1048576"); code != 0 {
		t.Fatalf("create limited: %v %q", kerr.ErrorForCode(code), msg)
	}
	dreq := kmsg.NewPtrDescribeConfigsRequest()
	dr := kmsg.NewDescribeConfigsRequestResource()
	dr.ResourceType, dr.ResourceName = kmsg.ConfigResourceTypeTopic, "limited"
	dreq.Resources = append(dreq.Resources, dr)
	dresp, err := dreq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range dresp.Resources[0].Configs {
		got[c.Name] = *c.Value
	}
	if got["retention.ms"] != "86400000" || got["max.message.bytes"] != "51200" || got["cleanup.policy"] != "delete" {
		t.Fatalf("DescribeConfigs of limited: %v", got)
	}
	big := make([]byte, 100<<10)
	rand.NewChaCha8([32]byte{1}).Read(big) // incompressible: the limit is on the batch as sent
	res := cl.ProduceSync(ctx, &kgo.Record{Topic: "limited", Value: big})
	if err := res.FirstErr(); !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("a 100 KiB record to a topic of max.message.bytes 51200: %v, want MESSAGE_TOO_LARGE", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "limited", Value: []byte("small")}).FirstErr(); err != nil {
		t.Fatalf("a small record: %v", err)
	}
	var rows int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM limited").Scan(&rows); err != nil || rows != 1 {
		t.Fatalf("limited has %d rows (%v), want the small one", rows, err)
	}
	n.stop()
}
