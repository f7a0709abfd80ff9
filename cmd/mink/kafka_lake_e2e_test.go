package main

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/minkdb/mink/internal/minktest"
)

// partOffset names a record.
type partOffset struct {
	partition int32
	offset    int64
}

// byOffset indexes records by partition and offset, failing the test on a
// record seen twice.
func byOffset(t *testing.T, what string, recs []*kgo.Record) map[partOffset]*kgo.Record {
	t.Helper()
	out := map[partOffset]*kgo.Record{}
	for _, r := range recs {
		k := partOffset{r.Partition, r.Offset}
		if out[k] != nil {
			t.Fatalf("%s: partition %d offset %d consumed twice", what, r.Partition, r.Offset)
		}
		out[k] = r
	}
	return out
}

// recordDiff says how two records differ ("" if not): key, value and
// headers byte for byte (a null apart from an empty one), and timestamp.
func recordDiff(got, want *kgo.Record, sameTime bool) string {
	sameBytes := func(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }
	switch {
	case !sameBytes(got.Key, want.Key):
		return fmt.Sprintf("key %q, want %q", got.Key, want.Key)
	case !sameBytes(got.Value, want.Value):
		return fmt.Sprintf("value %q, want %q", got.Value, want.Value)
	case len(got.Headers) != len(want.Headers):
		return fmt.Sprintf("headers %v, want %v", got.Headers, want.Headers)
	case sameTime && !got.Timestamp.Equal(want.Timestamp):
		return fmt.Sprintf("timestamp %v, want %v", got.Timestamp.UnixMilli(), want.Timestamp.UnixMilli())
	}
	for i, h := range got.Headers {
		if h.Key != want.Headers[i].Key || !sameBytes(h.Value, want.Headers[i].Value) {
			return fmt.Sprintf("header %d %q=%q, want %q=%q", i, h.Key, h.Value, want.Headers[i].Key, want.Headers[i].Value)
		}
	}
	return ""
}

// consumeFrom reads topic's partitions from offsets until each reached
// ends[p], through a direct-assigned franz-go consumer.
func consumeFrom(t *testing.T, seeds []string, topic string, offsets map[int32]kgo.Offset, ends map[int32]int64, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	cl := kafkaClient(t, seeds, append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}))...)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	next := map[int32]int64{}
	var out []*kgo.Record
	for {
		done := true
		for p := range offsets {
			done = done && next[p] >= ends[p]
		}
		if done {
			return out
		}
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s: consumed up to %v in 30 s, want up to %v", topic, next, ends)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s/%d: %v", topic, p, err) })
		for _, r := range fs.Records() {
			next[r.Partition] = max(next[r.Partition], r.Offset+1)
			if r.Offset < ends[r.Partition] {
				out = append(out, r)
			}
		}
	}
}

// listOffsets answers ListOffsets for timestamp ts (-2 earliest, -1
// latest) of each partition.
func listOffsets(t *testing.T, cl *kgo.Client, topic string, partitions int32, ts int64) map[int32]int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := range partitions {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = p, ts
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	ctx := context.Background()
	resp, err := retryRetriable(ctx, func() (*kmsg.ListOffsetsResponse, error) { return req.RequestWith(ctx, cl) })
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	for _, p := range resp.Topics[0].Partitions {
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			t.Fatalf("ListOffsets %d of %s/%d: %v", ts, topic, p.Partition, err)
		}
		out[p.Partition] = p.Offset
	}
	return out
}

// fetchRaw sends one Fetch of a partition from offset with a partition
// byte budget.
func fetchRaw(t *testing.T, cl *kgo.Client, topic string, partition int32, offset int64, budget int32) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxBytes, req.SessionEpoch = -1, 1<<20, -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = topic
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = partition, offset, budget, -1
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	ctx := context.Background()
	resp, err := retryRetriable(ctx, func() (*kmsg.FetchResponse, error) { return req.RequestWith(ctx, cl) })
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0]
}

// waitTrimmed waits until retention trimmed every bucket of table to its
// end, and returns each partition's stream start.
func waitTrimmed(t *testing.T, n *node, table string) map[int32]int64 {
	t.Helper()
	starts := map[int32]int64{}
	waitFor(t, 30*time.Second, table+"'s streams trimmed to their tiered offsets", func() bool {
		for i, b := range tableBuckets(t, n, table) {
			if b.Start == 0 || b.Start != b.End {
				return false
			}
			starts[int32(i)] = int64(b.Start)
		}
		return true
	})
	return starts
}

// TestKafkaReadsTrimmedRows: once retention trimmed a tiered topic's
// streams, Kafka consumers still read every row SQL does. ListOffsets
// earliest and the fetches' log start are 0; a consumer from the earliest
// offset (direct, in a group with auto.offset.reset=earliest, and kcat's
// -o beginning) gets each row once at its offset, the lake's records equal
// to what the stream served before the trim (key, value, headers,
// timestamp); a consumer from the middle of the lake part reads on into
// the stream; a fetch crosses from the lake into the stream without a gap,
// and a small budget still makes progress. Renamed columns keep their new
// name in the lake's records, and added ones have their default. A lake file removed makes its partition's
// fetches KAFKA_STORAGE_ERROR with no records, and the log names the file.
func TestKafkaReadsTrimmedRows(t *testing.T) {
	dataDir := t.TempDir()
	n := startTieringNode(t, dataDir, "1h") // rounds only when asked
	ctx := context.Background()
	conn := connect(t, n.pgURL(), pgx.QueryExecModeSimpleProtocol)
	seeds := []string{n.kafkaAddr()}
	cl := kafkaClient(t, seeds)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))

	// kt is Kafka-shaped: records as produced, with keys, null values,
	// headers (one not UTF-8, one null) and their own timestamps.
	mustExec(t, conn, "CREATE TABLE kt (key bytea, value bytea, headers jsonb, ts timestamptz) WITH (buckets = 2, log_retention = '1s')")
	produceKT := func(from, to int) {
		t.Helper()
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			r := &kgo.Record{Topic: "kt", Partition: int32(i % 2), Value: fmt.Appendf(nil, "value %d %x", i, rng.Uint64()),
				Timestamp: time.UnixMilli(1_700_000_000_000 + int64(i)*1000 + rng.Int64N(1000))}
			switch i % 5 {
			case 0:
				r.Key = fmt.Appendf(nil, "key-%d", i)
			case 1:
				r.Key = []byte{}
			case 2:
				r.Value = nil
			}
			if i%3 == 0 {
				r.Headers = []kgo.RecordHeader{{Key: "h", Value: []byte("v\"\\é")}, {Key: "bin", Value: []byte{0xff, 0, byte(i)}}, {Key: "null"}}
			}
			recs = append(recs, r)
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// jt's records are JSON objects of its columns; key is the record key.
	mustExec(t, conn, `CREATE TABLE jt (id bigint NOT NULL, key text, msg text, amount numeric(12,2), doc jsonb, at timestamptz,
		d date, iv interval, u uuid, b bytea, f double precision, ok boolean, tags int[]) WITH (buckets = 2, log_retention = '1s')`)
	insertJT := func(from, to int) {
		t.Helper()
		var b strings.Builder
		b.WriteString("INSERT INTO jt VALUES ")
		for i := from; i < to; i++ {
			if i > from {
				b.WriteString(", ")
			}
			msg := fmt.Sprintf("row %d \"q\" \\ é \t %d", i, rng.IntN(1000))
			f := []string{"0.1", "-2.5e300", "'NaN'", "'Infinity'", fmt.Sprint(rng.Float64())}[i%5]
			fmt.Fprintf(&b, "(%d, 'k%d', %s, %d.%02d, '{\"a\": %d, \"b\": [1, null, \"x\"]}', '2024-05-06 07:08:09.%06d+02', '2024-01-%02d', '%d days 02:03:04.5', '%08x-0000-4000-8000-%012x', '\\x%02x00ff', %s, %v, '{%d,NULL,3}')",
				i, i, quoteSQL(msg), rng.IntN(100000), rng.IntN(100), i, rng.IntN(1000000), 1+i%28, i%40, rng.Uint32(), i, i%256, f, i%2 == 0, i)
			if i%7 == 0 { // and a row of NULLs
				fmt.Fprintf(&b, ", (%d, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)", -i-1)
			}
		}
		mustExec(t, conn, b.String())
	}
	// nt has no timestamp column: the stream's records carry the append
	// time, which the lake does not keep.
	mustExec(t, conn, "CREATE TABLE nt (id bigint NOT NULL, msg text) WITH (buckets = 1, log_retention = '1s')")
	insertNT := func(from, to int) {
		t.Helper()
		for i := from; i < to; i += 25 { // several batches
			var b strings.Builder
			b.WriteString("INSERT INTO nt VALUES ")
			for j := i; j < min(i+25, to); j++ {
				if j > i {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, "(%d, 'n%d')", j, j)
			}
			mustExec(t, conn, b.String())
		}
	}
	// ft is for the fault, read by nobody before it: the node's lake file
	// cache has none of its files.
	mustExec(t, conn, "CREATE TABLE ft (key bytea, value bytea, headers jsonb, ts timestamptz) WITH (buckets = 1, log_retention = '1s')")

	produceKT(0, 300)
	insertJT(0, 100)
	insertJT(100, 200)
	insertNT(0, 100)
	var ftRecs []*kgo.Record
	for i := range 50 {
		ftRecs = append(ftRecs, &kgo.Record{Topic: "ft", Value: fmt.Appendf(nil, "f%d", i)})
	}
	if err := cl.ProduceSync(ctx, ftRecs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	parts := map[string]int32{"kt": 2, "jt": 2, "nt": 1}
	// What consumers got from the streams, before the trim.
	before := map[string]map[partOffset]*kgo.Record{}
	for topic, np := range parts {
		before[topic] = byOffset(t, topic+" before the trim", consumeToEnd(t, seeds, topic, np, 30*time.Second))
	}

	starts := map[string]map[int32]int64{}
	for _, topic := range []string{"kt", "jt", "nt", "ft"} {
		tierNow(t, n, topic)
		starts[topic] = waitTrimmed(t, n, topic)
	}
	produceKT(300, 340) // the streams' part
	insertJT(200, 230)
	insertNT(100, 120)
	ftRecs = nil
	for i := range 5 {
		ftRecs = append(ftRecs, &kgo.Record{Topic: "ft", Value: fmt.Appendf(nil, "f%d", 50+i)})
	}
	if err := cl.ProduceSync(ctx, ftRecs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	for topic, np := range parts {
		if got := listOffsets(t, cl, topic, np, -2); !maps.Equal(got, zeros(np)) {
			t.Fatalf("%s: ListOffsets earliest %v after the trim (stream starts %v), want 0 for every partition", topic, got, starts[topic])
		}
		ends := listOffsets(t, cl, topic, np, -1)
		var rows int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+topic).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		total := 0
		for _, e := range ends {
			total += int(e)
		}
		if total != rows {
			t.Fatalf("%s: end offsets %v (%d), SELECT count(*) %d", topic, ends, total, rows)
		}
		fromStart := map[int32]kgo.Offset{}
		for p := range np {
			fromStart[p] = kgo.NewOffset().AtStart()
		}
		// A small budget: many fetches, each a few records, across the
		// lake's end into the stream.
		for _, opts := range [][]kgo.Opt{nil, {kgo.FetchMaxPartitionBytes(300), kgo.FetchMaxBytes(300)}} {
			recs := consumeFrom(t, seeds, topic, fromStart, ends, opts...)
			got := byOffset(t, topic+" after the trim", recs)
			if counts := checkDense(t, recs); len(got) != rows {
				t.Fatalf("%s (options %d): consumed %d records (per partition %v) from the earliest offset, SELECT has %d rows", topic, len(opts), len(got), counts, rows)
			}
			for k, want := range before[topic] {
				lake := k.offset < starts[topic][k.partition]
				// A row without a timestamp column, or with NULL in it,
				// has its append time in the stream, which the lake
				// does not keep: -1 from the lake.
				appendTime := topic == "nt" || (topic == "jt" && bytes.Contains(want.Value, []byte(`"at":null`)))
				if d := recordDiff(got[k], want, !(appendTime && lake)); d != "" {
					t.Fatalf("%s partition %d offset %d (lake: %v): %s", topic, k.partition, k.offset, lake, d)
				}
				if appendTime && lake && got[k].Timestamp.UnixMilli() != -1 {
					t.Fatalf("%s offset %d from the lake: timestamp %d, want -1 (the lake has no append time)", topic, k.offset, got[k].Timestamp.UnixMilli())
				}
			}
		}
		// A consumer from the middle of the lake part.
		mid := map[int32]kgo.Offset{}
		for p := range np {
			mid[p] = kgo.NewOffset().At(starts[topic][p] / 2)
		}
		recs := consumeFrom(t, seeds, topic, mid, ends)
		byOffset(t, topic+" from the middle", recs)
		for p := range np {
			var offs []int64
			for _, r := range recs {
				if r.Partition == p {
					offs = append(offs, r.Offset)
				}
			}
			slices.Sort(offs)
			if want := ends[p] - starts[topic][p]/2; int64(len(offs)) != want || (want > 0 && offs[0] != starts[topic][p]/2) {
				t.Fatalf("%s/%d from offset %d: %d records from %v, want %d", topic, p, starts[topic][p]/2, len(offs), offs[:min(1, len(offs))], want)
			}
		}
		// One fetch from just below the stream's start crosses into it.
		for p := range np {
			from := starts[topic][p] - 2
			rp := fetchRaw(t, cl, topic, p, from, 1<<20)
			offs := minktest.RecordBatchOffsets(t, rp.RecordBatches)
			if rp.ErrorCode != 0 || rp.LogStartOffset != 0 || rp.HighWatermark != ends[p] || !slices.Equal(offs, seq64(from, ends[p])) {
				t.Fatalf("%s/%d: a fetch from %d: %v, log start %d, high watermark %d, offsets %v; want offsets %d..%d, log start 0",
					topic, p, from, kerr.ErrorForCode(rp.ErrorCode), rp.LogStartOffset, rp.HighWatermark, offs, from, ends[p]-1)
			}
		}
	}

	// jt's rows are those of SELECT: its ids, in the JSON values.
	ids := selectIDs(t, conn, "SELECT id FROM jt ORDER BY id")
	ends := listOffsets(t, cl, "jt", 2, -1)
	var consumed []int64
	for _, r := range consumeFrom(t, seeds, "jt", map[int32]kgo.Offset{0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart()}, ends) {
		var id int64
		if _, err := fmt.Sscanf(string(r.Value), `{"id":%d,`, &id); err != nil {
			t.Fatalf("jt record %s", r.Value)
		}
		consumed = append(consumed, id)
	}
	slices.Sort(consumed)
	if !slices.Equal(consumed, ids) {
		t.Fatalf("jt: consumed ids %v…, SELECT %v…", consumed[:min(10, len(consumed))], ids[:min(10, len(ids))])
	}

	// A consumer group with auto.offset.reset=earliest and no committed
	// offsets reads kt from 0.
	ktEnds := listOffsets(t, cl, "kt", 2, -1)
	gc := kafkaClient(t, seeds, kgo.ConsumerGroup("lake-readers"), kgo.ConsumeTopics("kt"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	gctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	var grouped []*kgo.Record
	for len(grouped) < int(ktEnds[0]+ktEnds[1]) && gctx.Err() == nil {
		fs := gc.PollFetches(gctx)
		fs.EachError(func(topic string, p int32, err error) { t.Logf("group fetch %s/%d: %v", topic, p, err) })
		grouped = append(grouped, fs.Records()...)
	}
	cancel()
	gc.Close()
	if counts := checkDense(t, grouped); len(grouped) != int(ktEnds[0]+ktEnds[1]) {
		t.Fatalf("a group consumer of kt from earliest: %d records (%v), want %d", len(grouped), counts, ktEnds[0]+ktEnds[1])
	}

	// kcat (librdkafka) -o beginning.
	if kcat, err := exec.LookPath("kcat"); err == nil {
		kctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		out, err := exec.CommandContext(kctx, kcat, "-b", seeds[0], "-C", "-t", "kt", "-o", "beginning", "-e", "-q", "-f", "%p %o\n").CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("kcat: %v\n%s", err, out)
		}
		perPart := map[string][]string{}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.Fields(line)
			perPart[f[0]] = append(perPart[f[0]], f[1])
		}
		for p := range int32(2) {
			offs := perPart[fmt.Sprint(p)]
			if int64(len(offs)) != ktEnds[p] || offs[0] != "0" || offs[len(offs)-1] != fmt.Sprint(ktEnds[p]-1) {
				t.Fatalf("kcat -o beginning: partition %d: %d records, want %d from 0", p, len(offs), ktEnds[p])
			}
		}
	} else {
		t.Logf("kcat is not installed: its check is skipped")
	}

	// A renamed column keeps its new name in the lake's records, which
	// are otherwise those the stream served.
	mustExec(t, conn, "ALTER TABLE jt RENAME COLUMN msg TO note")
	renamed := byOffset(t, "jt after the rename", consumeFrom(t, seeds, "jt", map[int32]kgo.Offset{0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart()}, ends))
	for k, want := range before["jt"] {
		w := *want
		w.Value = bytes.Replace(want.Value, []byte(`,"msg":`), []byte(`,"note":`), 1)
		if d := recordDiff(renamed[k], &w, !bytes.Contains(want.Value, []byte(`"at":null`))); d != "" || bytes.Equal(w.Value, want.Value) {
			t.Fatalf("jt partition %d offset %d after RENAME COLUMN msg TO note: %s", k.partition, k.offset, d)
		}
	}

	// So does a column added after the rows were tiered: the lake's
	// records have its default, as SQL's rows.
	mustExec(t, conn, "ALTER TABLE jt ADD COLUMN extra int DEFAULT 7")
	added := byOffset(t, "jt after ADD COLUMN", consumeFrom(t, seeds, "jt", map[int32]kgo.Offset{0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart()}, ends))
	for k, want := range before["jt"] {
		w := *renamed[k]
		w.Value = append(bytes.TrimSuffix(slices.Clone(w.Value), []byte("}")), []byte(`,"extra":7}`)...)
		if d := recordDiff(added[k], &w, true); d != "" {
			t.Fatalf("jt partition %d offset %d after ADD COLUMN extra int DEFAULT 7: %s (before: %s)", k.partition, k.offset, d, want.Value)
		}
	}

	// The fault: ft's one lake file removed.
	var victim string
	ftLake := filepath.Join(dataDir, "objects", "lake", fmt.Sprint(tableTiering(t, tieringStatus(t, n), "ft").ID), "data")
	filepath.WalkDir(ftLake, func(p string, d fs.DirEntry, err error) error {
		if err == nil && victim == "" && strings.HasSuffix(p, ".parquet") {
			victim = p
		}
		return nil
	})
	if victim == "" {
		t.Fatal("no lake data file of ft")
	}
	if err := os.Remove(victim); err != nil {
		t.Fatal(err)
	}
	key := strings.TrimPrefix(filepath.ToSlash(victim), filepath.ToSlash(filepath.Join(dataDir, "objects"))+"/")
	for _, from := range []int64{0, starts["ft"][0] - 1} {
		rp := fetchRaw(t, cl, "ft", 0, from, 1<<20)
		if rp.ErrorCode != kerr.KafkaStorageError.Code || len(rp.RecordBatches) != 0 || rp.LogStartOffset != 0 {
			t.Fatalf("ft from %d with lake file %s removed: %v, %d bytes of records, log start %d; want KAFKA_STORAGE_ERROR, none, 0",
				from, key, kerr.ErrorForCode(rp.ErrorCode), len(rp.RecordBatches), rp.LogStartOffset)
		}
	}
	if !strings.Contains(n.log(), "lake file "+key+" is missing") {
		t.Fatalf("the node's log does not name the missing lake file %s:\n%s", key, lastLines(n.log(), 20))
	}
	// The stream's part still reads.
	if rp := fetchRaw(t, cl, "ft", 0, starts["ft"][0], 1<<20); rp.ErrorCode != 0 || !slices.Equal(minktest.RecordBatchOffsets(t, rp.RecordBatches), seq64(starts["ft"][0], starts["ft"][0]+5)) {
		t.Fatalf("ft from its stream's start %d: %v, offsets %v; want the 5 records produced after the trim", starts["ft"][0], kerr.ErrorForCode(rp.ErrorCode), minktest.RecordBatchOffsets(t, rp.RecordBatches))
	}
	n.stop()
}

func quoteSQL(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func zeros(n int32) map[int32]int64 {
	out := map[int32]int64{}
	for p := range n {
		out[p] = 0
	}
	return out
}

func seq64(from, to int64) []int64 {
	var out []int64
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}
