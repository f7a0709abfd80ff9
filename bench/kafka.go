package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The Kafka benchmark (issue 13): produce throughput and latency with
// acks=all and end-to-end consume throughput through the Kafka protocol,
// with franz-go as the client, against mink's Kafka listener and against
// Apache Kafka on the same machine in the same run, the latter both with
// its default durability (the page cache) and with flush.messages=1 (an
// fsync after every append).
//
// One run of one system on one topic: a fresh topic of P partitions; one
// producer sends N records of a 1 KiB value (no key, so franz-go's default
// sticky partitioner spreads batches over the partitions) and waits for
// every acknowledgement; then one consumer, outside any group, reads the
// topic from the start until it has all N. The consumer checks every
// value byte for byte and that each partition holds what the producer was
// told it got, so a run that loses, duplicates or misroutes records
// fails instead of reporting a number.

// KafkaConfig configures RunKafka. Zero values mean the defaults.
type KafkaConfig struct {
	// Dir holds the brokers' and nodes' data (fresh subdirectories,
	// removed afterwards). Default: the temp dir.
	Dir string
	// Records produced per run. Default 200,000 (about 205 MB of values).
	Records int
	// RecordBytes is the size of a record's value. Default 1024.
	RecordBytes int
	// Partitions are the topic sizes measured. Default 4 and 64.
	Partitions []int
	// Runs of every configuration, interleaved across the systems.
	// Default 2.
	Runs int
	// LatencyRate and LatencyRecords shape the latency phase: after the
	// throughput phases, LatencyRecords more records are produced at
	// LatencyRate records/s, a load below every system's capacity, so that
	// the latency is the server's acknowledgement path and not the time a
	// record queued behind the client's buffer. Default 5,000/s and 10,000.
	LatencyRate, LatencyRecords int
	// PhaseTimeout bounds one produce or one consume phase. Default 2 min.
	PhaseTimeout time.Duration
	// MinkBin is the mink binary; empty: build cmd/mink into the run's
	// directory.
	MinkBin string
	// SkipKafka leaves the Apache Kafka peer out; SkipMink leaves mink out.
	SkipKafka, SkipMink bool
	// MinkS3 also measures a mink node whose object store is versitygw
	// (S3 over loopback).
	MinkS3 bool
	// ClientLog, when set, receives franz-go's warnings and errors.
	ClientLog io.Writer
}

func (c *KafkaConfig) fill() {
	if c.Records == 0 {
		c.Records = 200_000
	}
	if c.RecordBytes == 0 {
		c.RecordBytes = 1024
	}
	if len(c.Partitions) == 0 {
		c.Partitions = []int{4, 64}
	}
	if c.Runs == 0 {
		c.Runs = 2
	}
	if c.LatencyRate == 0 {
		c.LatencyRate = 5000
	}
	if c.LatencyRecords == 0 {
		c.LatencyRecords = 10_000
	}
	if c.PhaseTimeout == 0 {
		c.PhaseTimeout = 2 * time.Minute
	}
}

// The systems of the Kafka benchmark.
const (
	KafkaSystemDefault = "kafka"       // Apache Kafka, default settings
	KafkaSystemFsync   = "kafka-fsync" // Apache Kafka, topic flush.messages=1
	KafkaSystemMink    = "mink"        // mink, local-directory object store
	KafkaSystemMinkS3  = "mink-s3"     // mink, versitygw object store
)

// KafkaResult is one run of one system on one topic size.
type KafkaResult struct {
	System     string // one of the KafkaSystem constants
	Name       string // how the system is named in tables
	Partitions int
	Run        int // 1-based
	// Produced is the records acknowledged, ProduceElapsed the time from
	// the first Produce call until the last acknowledgement.
	Produced       int64
	ProduceElapsed time.Duration
	// P50 and P99 of a record's produce latency in the throughput phase:
	// from its Produce call to its acknowledgement, the time it waited in
	// the client's buffer of up to 50,000 records included.
	P50, P99 time.Duration
	// RateP50 and RateP99 are the same in the latency phase, at
	// KafkaConfig.LatencyRate records/s.
	RateP50, RateP99 time.Duration
	// Consumed is the records a fresh consumer read from the start,
	// ConsumeElapsed the time from creating it until it had them all.
	Consumed       int64
	ConsumeElapsed time.Duration
	RecordBytes    int
	// Err is why the run failed, "" when it did not. Only mink's runs are
	// reported as failed; a failing peer aborts the benchmark.
	Err string
	// Note says how the topic was made when not by CreateTopics.
	Note string
}

// ProduceRecordsPerSec and the others are the throughputs; MB/s counts
// the values' bytes (1 MB = 10^6 bytes).
func (r KafkaResult) ProduceRecordsPerSec() float64 { return perSec(r.Produced, r.ProduceElapsed) }
func (r KafkaResult) ProduceMBPerSec() float64 {
	return r.ProduceRecordsPerSec() * float64(r.RecordBytes) / 1e6
}
func (r KafkaResult) ConsumeRecordsPerSec() float64 { return perSec(r.Consumed, r.ConsumeElapsed) }
func (r KafkaResult) ConsumeMBPerSec() float64 {
	return r.ConsumeRecordsPerSec() * float64(r.RecordBytes) / 1e6
}

func perSec(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// KafkaReport is what MeasureKafka measured.
type KafkaReport struct {
	Config  KafkaConfig
	Results []KafkaResult
	// KafkaVersion is the peer's version, "" when it was not measured;
	// FranzGo the client's module version.
	KafkaVersion, FranzGo string
	// Skipped says which systems were not measured, and why.
	Skipped []string
}

// RunKafka measures and prints the report.
func RunKafka(ctx context.Context, w io.Writer, cfg KafkaConfig) error {
	rep, err := MeasureKafka(ctx, cfg)
	if err != nil {
		return err
	}
	WriteKafkaReport(w, rep)
	return nil
}

// kafkaTarget is one system under test: where to send Kafka requests and
// how to make a topic there.
type kafkaTarget struct {
	system, name, addr string
	// createTopic makes a topic of n partitions and returns a note when it
	// had to make it another way than with CreateTopics.
	createTopic func(ctx context.Context, topic string, n int) (note string, err error)
	// peer: a failure aborts the benchmark instead of being reported.
	peer bool
}

// MeasureKafka starts the systems (an Apache Kafka broker, a mink node,
// and a mink node on versitygw when asked), warms each up with a short
// unreported run, then measures every run × topic size × system, the
// systems interleaved so that the machine's noise spreads over all of
// them.
func MeasureKafka(ctx context.Context, cfg KafkaConfig) (_ *KafkaReport, err error) {
	cfg.fill()
	rep := &KafkaReport{Config: cfg, FranzGo: moduleVersion("github.com/twmb/franz-go")}
	dir, err := os.MkdirTemp(cfg.Dir, "mink-bench-kafka")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err == nil {
			os.RemoveAll(dir)
		} else {
			err = fmt.Errorf("%w (logs kept in %s)", err, dir)
		}
	}()
	var targets []kafkaTarget
	if !cfg.SkipKafka {
		k, err := StartKafka(ctx, dir)
		switch {
		case errors.Is(err, ErrNoKafka):
			// Said in the report, as a missing PostgreSQL peer is.
			rep.Skipped = append(rep.Skipped, fmt.Sprintf("Apache Kafka: %v", err))
		case err != nil:
			return nil, err
		default:
			defer k.Stop()
			rep.KafkaVersion = k.Version
			targets = append(targets, kafkaPeerTargets(k)...)
		}
	}
	if !cfg.SkipMink {
		bin := cfg.MinkBin
		if bin == "" {
			if bin, err = buildMink(ctx, dir); err != nil {
				return nil, err
			}
		}
		stores := []string{KafkaSystemMink}
		if cfg.MinkS3 {
			stores = append(stores, KafkaSystemMinkS3)
		}
		for _, system := range stores {
			node, err := startMinkKafkaNode(ctx, bin, dir, system == KafkaSystemMinkS3)
			if err != nil {
				// Reported, not fatal: the peer's numbers are still worth
				// having, and the reason is what needs fixing.
				rep.Skipped = append(rep.Skipped, fmt.Sprintf("%s: %v", system, err))
				continue
			}
			defer node.stop()
			targets = append(targets, kafkaTarget{system: system, name: node.name, addr: node.kafka, createTopic: node.createTopic})
		}
	}
	// Warm-up: JIT, connections, page cache; not reported. A mink that
	// fails here fails its measured runs too, which report why.
	for _, t := range targets {
		warm := cfg
		warm.Records = max(cfg.Records/10, 1000)
		res := measureKafkaOnce(ctx, warm, t, "bench_warmup_"+strings.ReplaceAll(t.system, "-", "_"), 4, 0)
		if res.Err != "" && t.peer {
			return nil, fmt.Errorf("%s warm-up: %s", t.name, res.Err)
		}
	}
	for run := 1; run <= cfg.Runs; run++ {
		for _, p := range cfg.Partitions {
			for _, t := range targets {
				topic := fmt.Sprintf("bench_%s_p%d_r%d", strings.ReplaceAll(t.system, "-", "_"), p, run)
				res := measureKafkaOnce(ctx, cfg, t, topic, p, run)
				if res.Err != "" && t.peer {
					return nil, fmt.Errorf("%s, %d partitions, run %d: %s", t.name, p, run, res.Err)
				}
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				rep.Results = append(rep.Results, res)
			}
		}
	}
	return rep, nil
}

// kafkaPeerTargets are the two ways the benchmark runs Apache Kafka: one
// broker, topics with its default durability and topics with
// flush.messages=1.
func kafkaPeerTargets(k *Kafka) []kafkaTarget {
	return []kafkaTarget{
		{system: KafkaSystemDefault, name: "Apache Kafka " + k.Version + " (page cache)", addr: k.Addr, peer: true,
			createTopic: func(ctx context.Context, topic string, n int) (string, error) {
				return "", createKafkaTopic(ctx, k.Addr, topic, n, nil)
			}},
		{system: KafkaSystemFsync, name: "Apache Kafka " + k.Version + " (flush.messages=1)", addr: k.Addr, peer: true,
			createTopic: func(ctx context.Context, topic string, n int) (string, error) {
				return "", createKafkaTopic(ctx, k.Addr, topic, n, map[string]string{"flush.messages": "1"})
			}},
	}
}

// kafkaValues are the record values: count of them, each size bytes of
// pseudo-random data (incompressible) whose first 8 bytes are its index.
// Record i carries value i % count.
func kafkaValues(count, size int) [][]byte {
	values := make([][]byte, count)
	for j := range values {
		v := make([]byte, size)
		for off := 0; off < size; off += 8 {
			var word [8]byte
			binary.LittleEndian.PutUint64(word[:], splitmix64(uint64(j)<<32|uint64(off)))
			copy(v[off:], word[:])
		}
		if size >= 8 {
			binary.LittleEndian.PutUint64(v, uint64(j))
		}
		values[j] = v
	}
	return values
}

const kafkaValueCount = 4096

// kafkaClientOpts are the options every client of the benchmark has:
// franz-go's defaults (an idempotent producer, linger 10 ms, up to 5
// produce requests in flight per broker, 50,000 buffered records) with
// acks=all spelled out and compression off (the values are random).
func kafkaClientOpts(cfg KafkaConfig, addr string) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		// Only so that a listener which never answers fails the run
		// within its bound; records are not failed otherwise.
		kgo.AllowIdempotentProduceCancellation(),
		kgo.RecordDeliveryTimeout(cfg.PhaseTimeout),
	}
	if cfg.ClientLog != nil {
		opts = append(opts, kgo.WithLogger(kgo.BasicLogger(cfg.ClientLog, kgo.LogLevelWarn, func() string {
			return "franz-go " + addr + ": "
		})))
	}
	return opts
}

// measureKafkaOnce makes the topic, produces, consumes and checks.
func measureKafkaOnce(ctx context.Context, cfg KafkaConfig, t kafkaTarget, topic string, partitions, run int) KafkaResult {
	res := KafkaResult{System: t.system, Name: t.name, Partitions: partitions, Run: run, RecordBytes: cfg.RecordBytes}
	fail := func(format string, args ...any) KafkaResult {
		res.Err = fmt.Sprintf(format, args...)
		return res
	}
	createCtx, cancel := context.WithTimeout(ctx, time.Minute)
	note, err := t.createTopic(createCtx, topic, partitions)
	if err == nil {
		err = waitKafkaTopic(createCtx, t.addr, topic, partitions)
	}
	cancel()
	res.Note = note
	if err != nil {
		return fail("create topic %s: %v", topic, err)
	}
	values := kafkaValues(kafkaValueCount, cfg.RecordBytes)
	perPartition, err := produceKafka(ctx, cfg, t.addr, topic, partitions, values, &res)
	if err != nil {
		return fail("produce: %v", err)
	}
	if err := consumeKafka(ctx, cfg, t.addr, topic, values, perPartition, &res); err != nil {
		return fail("consume: %v", err)
	}
	paced := cfg
	paced.Records = cfg.LatencyRecords
	var pacedRes KafkaResult
	if _, err := produceKafkaAt(ctx, paced, t.addr, topic, partitions, values, cfg.LatencyRate, &pacedRes); err != nil {
		return fail("produce at %d records/s: %v", cfg.LatencyRate, err)
	}
	res.RateP50, res.RateP99 = pacedRes.P50, pacedRes.P99
	return res
}

// produceKafka sends cfg.Records records to topic and waits for their
// acknowledgements. It returns how many records each partition was said
// to hold.
func produceKafka(ctx context.Context, cfg KafkaConfig, addr, topic string, partitions int, values [][]byte, res *KafkaResult) ([]int64, error) {
	return produceKafkaAt(ctx, cfg, addr, topic, partitions, values, 0, res)
}

// produceKafkaAt is produceKafka at rate records/s (0: as fast as the
// client's buffer allows).
func produceKafkaAt(ctx context.Context, cfg KafkaConfig, addr, topic string, partitions int, values [][]byte, rate int, res *KafkaResult) ([]int64, error) {
	cl, err := kgo.NewClient(append(kafkaClientOpts(cfg, addr), kgo.DefaultProduceTopic(topic))...)
	if err != nil {
		return nil, err
	}
	defer closeKafkaClient(cl)
	phaseCtx, cancel := context.WithTimeout(ctx, cfg.PhaseTimeout)
	defer cancel()
	n := cfg.Records
	latencies := make([]time.Duration, n)
	perPartition := make([]atomic.Int64, partitions)
	var acked atomic.Int64
	var firstErr struct {
		sync.Mutex
		err error
	}
	start := time.Now()
	for i := 0; i < n && phaseCtx.Err() == nil; i++ {
		if rate > 0 {
			due := start.Add(time.Duration(i) * time.Second / time.Duration(rate))
			if wait := time.Until(due); wait > 0 {
				time.Sleep(wait)
			}
		}
		rec := &kgo.Record{Value: values[i%len(values)]}
		sent := time.Now()
		cl.Produce(phaseCtx, rec, func(r *kgo.Record, err error) {
			latencies[i] = time.Since(sent)
			if err == nil && (r.Partition < 0 || int(r.Partition) >= partitions) {
				err = fmt.Errorf("acknowledged in partition %d of a %d-partition topic", r.Partition, partitions)
			}
			if err != nil {
				firstErr.Lock()
				if firstErr.err == nil {
					firstErr.err = fmt.Errorf("record %d: %w", i, err)
				}
				firstErr.Unlock()
				return
			}
			perPartition[r.Partition].Add(1)
			acked.Add(1)
		})
	}
	flushErr := cl.Flush(phaseCtx)
	res.ProduceElapsed = time.Since(start)
	res.Produced = acked.Load()
	firstErr.Lock()
	err = firstErr.err
	firstErr.Unlock()
	if err != nil {
		return nil, fmt.Errorf("%d of %d acknowledged; first failure: %w", res.Produced, n, err)
	}
	if flushErr != nil || res.Produced != int64(n) {
		return nil, fmt.Errorf("%d of %d acknowledged within %v (flush: %v)", res.Produced, n, cfg.PhaseTimeout, flushErr)
	}
	slices.Sort(latencies)
	res.P50, res.P99 = percentile(latencies, 50), percentile(latencies, 99)
	out := make([]int64, partitions)
	for p := range perPartition {
		out[p] = perPartition[p].Load()
	}
	return out, nil
}

// consumeKafka reads topic from the start with a new client until it has
// every produced record, checking each value and that every partition
// holds what the producer was told.
func consumeKafka(ctx context.Context, cfg KafkaConfig, addr, topic string, values [][]byte, perPartition []int64, res *KafkaResult) error {
	var want int64
	for _, c := range perPartition {
		want += c
	}
	phaseCtx, cancel := context.WithTimeout(ctx, cfg.PhaseTimeout)
	defer cancel()
	start := time.Now()
	cl, err := kgo.NewClient(append(kafkaClientOpts(cfg, addr),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		return err
	}
	defer closeKafkaClient(cl)
	got := make([]int64, len(perPartition))
	nextOffset := make([]int64, len(perPartition))
	gaps := 0
	var seen int64
	var bad error
	for seen < want && bad == nil {
		fetches := cl.PollFetches(phaseCtx)
		if phaseCtx.Err() != nil {
			return fmt.Errorf("%d of %d records within %v", seen, want, cfg.PhaseTimeout)
		}
		if errs := fetches.Errors(); len(errs) > 0 {
			fe := errs[0]
			return fmt.Errorf("fetch %s[%d]: %w (after %d of %d records)", fe.Topic, fe.Partition, fe.Err, seen, want)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if bad != nil {
				return
			}
			p := int(r.Partition)
			switch {
			case p < 0 || p >= len(got):
				bad = fmt.Errorf("record in partition %d of a %d-partition topic", p, len(got))
				return
			case r.Offset < nextOffset[p]:
				bad = fmt.Errorf("partition %d: offset %d after offset %d (a duplicate or a rewind)", p, r.Offset, nextOffset[p]-1)
				return
			case r.Offset > nextOffset[p]:
				gaps++
			}
			nextOffset[p] = r.Offset + 1
			if len(r.Value) != cfg.RecordBytes || len(r.Value) < 8 {
				bad = fmt.Errorf("partition %d offset %d: a %d-byte value, want %d", p, r.Offset, len(r.Value), cfg.RecordBytes)
				return
			}
			j := binary.LittleEndian.Uint64(r.Value)
			if j >= uint64(len(values)) || !bytes.Equal(r.Value, values[j]) {
				bad = fmt.Errorf("partition %d offset %d: the value is not one that was produced", p, r.Offset)
				return
			}
			got[p]++
			seen++
		})
	}
	res.ConsumeElapsed = time.Since(start)
	res.Consumed = seen
	if bad != nil {
		return bad
	}
	for p := range got {
		if got[p] != perPartition[p] {
			return fmt.Errorf("partition %d: read %d records, the producer had %d acknowledged there", p, got[p], perPartition[p])
		}
	}
	if gaps > 0 {
		res.Note = strings.TrimSpace(res.Note + fmt.Sprintf(" %d offset gaps while consuming", gaps))
	}
	return nil
}

// closeKafkaClient closes cl, giving up after 15 s on a client that is
// stuck on a peer that does not answer (its goroutines then end with the
// process).
func closeKafkaClient(cl *kgo.Client) {
	done := make(chan struct{})
	go func() { cl.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
	}
}

// createKafkaTopic sends CreateTopics for one topic of n partitions,
// replication factor 1, with configs.
func createKafkaTopic(ctx context.Context, addr, topic string, n int, configs map[string]string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return err
	}
	defer closeKafkaClient(cl)
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30_000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = topic
	rt.NumPartitions = int32(n)
	rt.ReplicationFactor = 1
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("CreateTopics: %w", err)
	}
	if len(resp.Topics) != 1 {
		return fmt.Errorf("CreateTopics: %d topics in the response, want 1", len(resp.Topics))
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		msg := ""
		if resp.Topics[0].ErrorMessage != nil {
			msg = ": " + *resp.Topics[0].ErrorMessage
		}
		return fmt.Errorf("CreateTopics: %w%s", err, msg)
	}
	if len(configs) == 0 {
		return nil
	}
	// The broker may not know the topic it just created for a moment.
	for {
		err := checkKafkaTopicConfigs(ctx, cl, topic, configs)
		if !errors.Is(err, kerr.UnknownTopicOrPartition) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// checkKafkaTopicConfigs reads the topic's configs back (DescribeConfigs),
// so that a run named "flush.messages=1" cannot silently be another.
func checkKafkaTopicConfigs(ctx context.Context, cl *kgo.Client, topic string, want map[string]string) error {
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType = kmsg.ConfigResourceTypeTopic
	rr.ResourceName = topic
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("DescribeConfigs: %w", err)
	}
	got := map[string]string{}
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return fmt.Errorf("DescribeConfigs: %w", err)
		}
		for _, c := range r.Configs {
			if c.Value != nil {
				got[c.Name] = *c.Value
			}
		}
	}
	for k, v := range want {
		if got[k] != v {
			return fmt.Errorf("topic %s has %s=%q, want %q", topic, k, got[k], v)
		}
	}
	return nil
}

// waitKafkaTopic waits until Metadata shows topic with n partitions, each
// with a leader, and every leader answers ListOffsets for its partition.
// The second matters: a KRaft broker lists a new partition's leader a
// moment before its replica leads, and a produce in that window gets
// NOT_LEADER_FOR_PARTITION, after which franz-go waits out its 5 s
// metadata minimum age; that wait would be measured as throughput.
func waitKafkaTopic(ctx context.Context, addr, topic string, n int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return err
	}
	defer closeKafkaClient(cl)
	var last error
	for {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		last = err
		if err == nil {
			last = kafkaTopicReady(resp, topic, n)
			if last == nil {
				last = kafkaPartitionsLead(ctx, cl, topic, n)
			}
			if last == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topic not ready: %v (%w)", last, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// kafkaPartitionsLead sends ListOffsets (latest) for every partition of
// topic; cl routes each to its leader.
func kafkaPartitionsLead(ctx context.Context, cl *kgo.Client, topic string, n int) error {
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := range n {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = int32(p)
		rp.Timestamp = -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("ListOffsets: %w", err)
	}
	answered := 0
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("ListOffsets: partition %d: %w", p.Partition, err)
			}
			answered++
		}
	}
	if answered != n {
		return fmt.Errorf("ListOffsets: %d of %d partitions answered", answered, n)
	}
	return nil
}

func kafkaTopicReady(resp *kmsg.MetadataResponse, topic string, n int) error {
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return fmt.Errorf("metadata: %w", err)
		}
		if len(t.Partitions) != n {
			return fmt.Errorf("metadata: %d partitions, want %d", len(t.Partitions), n)
		}
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("metadata: partition %d: %w", p.Partition, err)
			}
			if p.Leader < 0 {
				return fmt.Errorf("metadata: partition %d has no leader", p.Partition)
			}
		}
		return nil
	}
	return errors.New("metadata: topic not listed")
}

// moduleVersion is the version of module path this binary was built with.
func moduleVersion(path string) string {
	// Test binaries carry no dependency list.
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "(version in go.mod)"
	}
	for _, d := range info.Deps {
		if d.Path == path {
			return d.Version
		}
	}
	return "(version in go.mod)"
}

// WriteKafkaReport writes the setup, a markdown table per topic size with
// the ratios of each run to the peers' same run, and any failures.
func WriteKafkaReport(w io.Writer, rep *KafkaReport) {
	cfg := rep.Config
	fmt.Fprintf(w, "%d records of a %s value (no key) per run, %d runs; franz-go %s, one producer (idempotent, acks=all, "+
		"linger 10 ms, ≤5 requests in flight, no compression), then one consumer from the start (no group). "+
		"Latency at full load counts the time a record queued in the client's 50,000-record buffer; "+
		"then %d more records at %d/s give the latency of the acknowledgement path.\n\n",
		cfg.Records, formatSize(cfg.RecordBytes), cfg.Runs, rep.FranzGo, cfg.LatencyRecords, cfg.LatencyRate)
	for _, s := range rep.Skipped {
		fmt.Fprintf(w, "Not measured: %s\n\n", s)
	}
	type key struct {
		system          string
		partitions, run int
	}
	bySystem := map[key]KafkaResult{}
	for _, r := range rep.Results {
		bySystem[key{r.System, r.Partitions, r.Run}] = r
	}
	ratio := func(r KafkaResult, peer string, consume bool) string {
		pr, ok := bySystem[key{peer, r.Partitions, r.Run}]
		if !ok || pr.Err != "" || r.Err != "" {
			return "-"
		}
		a, b := r.ProduceRecordsPerSec(), pr.ProduceRecordsPerSec()
		if consume {
			a, b = r.ConsumeRecordsPerSec(), pr.ConsumeRecordsPerSec()
		}
		if b == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", a/b)
	}
	var failures []string
	for _, p := range cfg.Partitions {
		fmt.Fprintf(w, "### %d partitions\n\n", p)
		fmt.Fprintf(w, "| system | run | produce rec/s | produce MB/s | p50 | p99 | p50 at %d/s | p99 at %d/s | consume rec/s | consume MB/s | produce vs Kafka fsync | produce vs Kafka default | consume vs Kafka fsync | consume vs Kafka default |\n",
			cfg.LatencyRate, cfg.LatencyRate)
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, r := range rep.Results {
			if r.Partitions != p {
				continue
			}
			if r.Err != "" {
				fmt.Fprintf(w, "| %s | %d | failed | | | | | | | | | | | |\n", r.Name, r.Run)
				failures = append(failures, fmt.Sprintf("%s, %d partitions, run %d: %s", r.Name, r.Partitions, r.Run, r.Err))
				continue
			}
			fmt.Fprintf(w, "| %s | %d | %.0f | %.1f | %s | %s | %s | %s | %.0f | %.1f | %s | %s | %s | %s |\n",
				r.Name, r.Run, r.ProduceRecordsPerSec(), r.ProduceMBPerSec(), formatLatency(r.P50), formatLatency(r.P99),
				formatLatency(r.RateP50), formatLatency(r.RateP99),
				r.ConsumeRecordsPerSec(), r.ConsumeMBPerSec(),
				ratio(r, KafkaSystemFsync, false), ratio(r, KafkaSystemDefault, false),
				ratio(r, KafkaSystemFsync, true), ratio(r, KafkaSystemDefault, true))
			if r.Note != "" {
				failures = append(failures, fmt.Sprintf("note: %s, %d partitions, run %d: %s", r.Name, r.Partitions, r.Run, r.Note))
			}
		}
		fmt.Fprintln(w)
	}
	if rep.KafkaVersion == "" {
		fmt.Fprintf(w, "Apache Kafka peer not measured.\n\n")
	} else {
		writeKafkaSummary(w, rep)
	}
	for _, f := range failures {
		fmt.Fprintf(w, "- %s\n", f)
	}
	if len(failures) > 0 {
		fmt.Fprintln(w)
	}
}

// writeKafkaSummary lists, for each mink system and topic size, its
// ratios to the peer run by run: the goal of issue 13 is a produce
// throughput of at least 1.0× the fsync'd Kafka's.
func writeKafkaSummary(w io.Writer, rep *KafkaReport) {
	type key struct {
		system          string
		partitions, run int
	}
	results := map[key]KafkaResult{}
	var systems []string
	for _, r := range rep.Results {
		results[key{r.System, r.Partitions, r.Run}] = r
		if !slices.Contains(systems, r.System) && r.System != KafkaSystemDefault && r.System != KafkaSystemFsync {
			systems = append(systems, r.System)
		}
	}
	if len(systems) == 0 {
		return
	}
	fmt.Fprintln(w, "| system | partitions | produce vs Kafka fsync, by run | produce vs Kafka default | consume vs Kafka fsync | consume vs Kafka default |")
	fmt.Fprintln(w, "|---|---:|---|---|---|---|")
	for _, system := range systems {
		for _, p := range rep.Config.Partitions {
			var cells [4][]string
			for run := 1; run <= rep.Config.Runs; run++ {
				r, ok := results[key{system, p, run}]
				fsync, okF := results[key{KafkaSystemFsync, p, run}]
				def, okD := results[key{KafkaSystemDefault, p, run}]
				cell := func(a, b float64, ok bool) string {
					if !ok || r.Err != "" || b == 0 {
						return "-"
					}
					return fmt.Sprintf("%.2f", a/b)
				}
				cells[0] = append(cells[0], cell(r.ProduceRecordsPerSec(), fsync.ProduceRecordsPerSec(), ok && okF))
				cells[1] = append(cells[1], cell(r.ProduceRecordsPerSec(), def.ProduceRecordsPerSec(), ok && okD))
				cells[2] = append(cells[2], cell(r.ConsumeRecordsPerSec(), fsync.ConsumeRecordsPerSec(), ok && okF))
				cells[3] = append(cells[3], cell(r.ConsumeRecordsPerSec(), def.ConsumeRecordsPerSec(), ok && okD))
			}
			name := system
			for _, r := range rep.Results {
				if r.System == system {
					name = r.Name
					break
				}
			}
			fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s |\n", name, p,
				strings.Join(cells[0], ", "), strings.Join(cells[1], ", "), strings.Join(cells[2], ", "), strings.Join(cells[3], ", "))
		}
	}
	fmt.Fprintln(w)
}
