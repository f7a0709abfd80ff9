package main

// Kafka clients against three mink nodes (lease_ttl 2 s): leaders killed,
// paused past their lease and moved back and forth while an idempotent
// franz-go producer writes.

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (c *testCluster) kafkaSeeds(skip ...*node) []string {
	var seeds []string
	for _, n := range c.nodes {
		skipped := false
		for _, s := range skip {
			skipped = skipped || s == n
		}
		if !skipped {
			seeds = append(seeds, n.kafkaAddr())
		}
	}
	return seeds
}

// waitMovedOff waits until no bucket of table is led by node, and every
// one is open, as node 1 sees it.
func (c *testCluster) waitMovedOff(table string, node uint32) {
	c.t.Helper()
	waitFor(c.t, 60*time.Second, fmt.Sprintf("the buckets of %s led by nodes other than %d and open", table, node), func() bool {
		bs, err := c.buckets(c.nodes[0], table)
		if err != nil {
			return false
		}
		for _, b := range bs {
			if uint32(b.Leader) == node || !b.Open {
				return false
			}
		}
		return true
	})
}

// kafkaLoad produces the values 0, 1, 2, … to partitions value % parts
// with an idempotent franz-go producer until stop, recording each
// acknowledgement.
type kafkaLoad struct {
	t     *testing.T
	cl    *kgo.Client
	topic string
	parts int32

	mu     sync.Mutex
	acked  map[int64]*kgo.Record // by value
	failed int
	sent   int64
	stop   chan struct{}
	done   chan struct{}
}

func startKafkaLoad(t *testing.T, seeds []string, topic string, parts int32) *kafkaLoad {
	l := &kafkaLoad{t: t, topic: topic, parts: parts, acked: map[int64]*kgo.Record{}, stop: make(chan struct{}), done: make(chan struct{})}
	l.cl = kafkaClient(t, seeds, kgo.RecordDeliveryTimeout(2*time.Minute), kgo.MetadataMinAge(200*time.Millisecond),
		kgo.MaxBufferedRecords(2000), kgo.ProducerLinger(2*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
	go func() {
		defer close(l.done)
		for v := int64(0); ; v++ {
			select {
			case <-l.stop:
				return
			default:
			}
			r := &kgo.Record{Topic: topic, Partition: int32(v % int64(parts)), Value: []byte(strconv.FormatInt(v, 10))}
			l.mu.Lock()
			l.sent = v + 1
			l.mu.Unlock()
			l.cl.Produce(context.Background(), r, func(r *kgo.Record, err error) {
				l.mu.Lock()
				defer l.mu.Unlock()
				if err != nil {
					l.failed++
					return
				}
				l.acked[v] = r
			})
			if v%50 == 49 {
				time.Sleep(5 * time.Millisecond) // a steady, bounded load
			}
		}
	}()
	return l
}

func (l *kafkaLoad) ackedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// finish stops producing and waits for every record's outcome.
func (l *kafkaLoad) finish() {
	close(l.stop)
	<-l.done
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := l.cl.Flush(ctx); err != nil {
		l.t.Fatalf("flush the producer: %v", err)
	}
}

// check consumes the topic and requires every acknowledged value exactly
// once, at the partition and offset it was acknowledged at, no value
// twice, and dense offsets.
func (l *kafkaLoad) check(seeds []string) []*kgo.Record {
	l.t.Helper()
	// A record that was not acknowledged failed (its delivery timed
	// out) and may or may not be there: read to the end.
	got := consumeToEnd(l.t, seeds, l.topic, l.parts, 2*time.Minute)
	seen := map[int64]*kgo.Record{}
	for _, r := range got {
		v, err := strconv.ParseInt(string(r.Value), 10, 64)
		if err != nil {
			l.t.Fatalf("a record not produced by the load: %q", r.Value)
		}
		if prev, dup := seen[v]; dup {
			l.t.Fatalf("value %d is in the topic twice: partition %d offset %d and partition %d offset %d", v, prev.Partition, prev.Offset, r.Partition, r.Offset)
		}
		seen[v] = r
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for v, a := range l.acked {
		r, ok := seen[v]
		if !ok {
			l.t.Fatalf("acknowledged value %d (partition %d offset %d) is not in the topic", v, a.Partition, a.Offset)
		}
		if r.Partition != a.Partition || r.Offset != a.Offset {
			l.t.Fatalf("value %d acknowledged at %d/%d but stored at %d/%d", v, a.Partition, a.Offset, r.Partition, r.Offset)
		}
	}
	checkDense(l.t, got)
	l.t.Logf("%d records sent, %d acknowledged, %d failed; %d in the topic", l.sent, len(l.acked), l.failed, len(got))
	return got
}

// An idempotent producer writes through a leader kill -9, the restart of
// that node and a rebalance that moves buckets back to it (A → B → A):
// every acknowledged record is in the topic exactly once at its
// acknowledged offset, no record twice, offsets dense.
func TestKafkaIdempotentProduceAcrossLeaderKill(t *testing.T) {
	c := newTestCluster(t, clusterOpts{})
	c.startAll()
	const parts = 6
	createTopic(t, kafkaClient(t, c.kafkaSeeds()), "fo", parts)
	bs := c.waitServed(c.nodes[0], "fo", 60*time.Second)
	victim := c.nodes[2]
	if ledBy(bs, 3) == 0 {
		t.Fatalf("node 3 leads no partition of fo: %+v", bs)
	}
	l := startKafkaLoad(t, c.kafkaSeeds(), "fo", parts)
	waitFor(t, 30*time.Second, "500 acknowledged records", func() bool { return l.ackedCount() >= 500 })
	victim.kill()
	killedAt := l.ackedCount()
	c.waitMovedOff("fo", 3)
	waitFor(t, 60*time.Second, "500 more acknowledged records after the kill", func() bool { return l.ackedCount() >= killedAt+500 })
	// Node 3 comes back; the rebalance gives it buckets again, some of them
	// the ones it led before the kill.
	c.restart(victim)
	victim.waitHealthy()
	c.waitLive(3)
	out, errOut, code := runMink(t, 120*time.Second, "cluster", "rebalance", "--server", c.nodes[0].admin)
	if code != 0 || !strings.Contains(out, "done:") {
		t.Fatalf("rebalance: exit %d\n%s%s", code, out, errOut)
	}
	bs = c.waitServed(c.nodes[0], "fo", 60*time.Second)
	if ledBy(bs, 3) == 0 {
		t.Fatalf("node 3 leads no partition after the rebalance: %+v", bs)
	}
	movedAt := l.ackedCount()
	waitFor(t, 60*time.Second, "500 more acknowledged records after the rebalance", func() bool { return l.ackedCount() >= movedAt+500 })
	l.finish()
	l.check(c.kafkaSeeds())
	for _, n := range c.nodes {
		n.stop()
	}
}

// A leader paused (SIGSTOP) past its lease loses its partitions; after
// SIGCONT it acknowledges nothing for them: a produce sent to it on a
// connection opened before the pause gets an error, and its records are
// not in the topic, while the producer writing through the new leaders
// loses nothing.
func TestKafkaZombieLeaderAcknowledgesNothing(t *testing.T) {
	c := newTestCluster(t, clusterOpts{})
	c.startAll()
	const parts = 3
	createTopic(t, kafkaClient(t, c.kafkaSeeds()), "zb", parts)
	bs := c.waitServed(c.nodes[0], "zb", 60*time.Second)
	victim := c.nodes[2]
	victimPart := -1
	for _, b := range bs {
		if b.Leader == 3 {
			victimPart = b.Index
		}
	}
	if victimPart < 0 {
		t.Fatalf("node 3 leads no partition of zb: %+v", bs)
	}
	l := startKafkaLoad(t, c.kafkaSeeds(), "zb", parts)
	waitFor(t, 30*time.Second, "200 acknowledged records", func() bool { return l.ackedCount() >= 200 })
	zombie := dialRaw(t, victim.kafkaAddr())
	c.pause(victim)
	c.waitMovedOff("zb", 3)
	pausedAt := l.ackedCount()
	waitFor(t, 60*time.Second, "200 more acknowledged records while node 3 is stopped", func() bool { return l.ackedCount() >= pausedAt+200 })

	// The request is written to the socket before SIGCONT, so that node 3
	// reads it the moment it runs again.
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(7)
	req.Acks, req.TimeoutMillis = -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "zb"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = int32(victimPart), recordBatch("zombie-1", "zombie-2")
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	zombie.send(0, 7, 1, req.AppendTo(nil))
	c.resume(victim)
	zombie.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp := kmsg.NewPtrProduceResponse()
	resp.SetVersion(7)
	if frame, err := readFrame(zombie); err == nil {
		if err := resp.ReadFrom(frame[4:]); err != nil {
			t.Fatal(err)
		}
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode == 0 {
			t.Fatalf("the resumed node acknowledged a produce to partition %d at offset %d", victimPart, p.BaseOffset)
		}
		t.Logf("the resumed node answered the produce with error %d", p.ErrorCode)
	} else {
		t.Logf("the resumed node closed the connection: %v", err)
	}
	resumedAt := l.ackedCount()
	waitFor(t, 60*time.Second, "200 more acknowledged records after SIGCONT", func() bool { return l.ackedCount() >= resumedAt+200 })
	l.finish()
	for _, r := range l.check(c.kafkaSeeds()) {
		if strings.HasPrefix(string(r.Value), "zombie") {
			t.Fatalf("the zombie's record %q is in the topic at %d/%d", r.Value, r.Partition, r.Offset)
		}
	}
	for _, n := range c.nodes {
		n.stop()
	}
}

func readFrame(r *rawConn) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r.c, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > 1<<26 {
		return nil, fmt.Errorf("frame of %d bytes", n)
	}
	frame := make([]byte, n)
	_, err := io.ReadFull(r.c, frame)
	return frame, err
}

// Committed group offsets live in the metadata log: after the group
// coordinator (the coordinator lease holder) is killed, a new member of
// the group, coordinated by the next lease holder, resumes exactly at the
// committed offsets.
func TestKafkaGroupOffsetsSurviveCoordinatorKill(t *testing.T) {
	c := newTestCluster(t, clusterOpts{})
	c.startAll()
	const parts = 3
	admin := kafkaClient(t, c.kafkaSeeds())
	createTopic(t, admin, "gf", parts)
	c.waitServed(c.nodes[0], "gf", 60*time.Second)
	ctx := context.Background()
	var recs []*kgo.Record
	for i := 0; i < 300; i++ {
		recs = append(recs, &kgo.Record{Topic: "gf", Partition: int32(i % parts), Value: []byte(strconv.Itoa(i))})
	}
	if err := admin.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	member := func(seeds []string) *kgo.Client {
		return kafkaClient(t, seeds, kgo.ConsumerGroup("gf-group"), kgo.ConsumeTopics("gf"), kgo.DisableAutoCommit(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(500*time.Millisecond))
	}
	first := member(c.kafkaSeeds())
	pollCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	committed := map[int32]int64{} // next offset per partition
	read := 0
	for read < 150 {
		fs := first.PollRecords(pollCtx, 150-read)
		if pollCtx.Err() != nil {
			t.Fatalf("the first member read %d records", read)
		}
		fs.EachRecord(func(r *kgo.Record) {
			read++
			committed[r.Partition] = r.Offset + 1
		})
	}
	if err := first.CommitUncommittedOffsets(pollCtx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	first.Close()
	st, ok := c.status()
	if !ok || st.Coordinator.Node == 0 {
		t.Fatalf("no coordinator: %+v", st)
	}
	victim := c.nodes[st.Coordinator.Node-1]
	victim.kill()
	waitFor(t, 60*time.Second, "a new coordinator and gf served by live nodes", func() bool {
		st, ok := c.status()
		if !ok || st.Coordinator.Node == 0 || c.nodes[st.Coordinator.Node-1] == victim {
			return false
		}
		bs, err := c.buckets(c.nodes[st.Coordinator.Node-1], "gf")
		if err != nil {
			return false
		}
		for _, b := range bs {
			if c.nodes[b.Leader-1] == victim || !b.Open {
				return false
			}
		}
		return true
	})
	second := member(c.kafkaSeeds(victim))
	firstSeen := map[int32]int64{}
	rest := 0
	pollCtx2, cancel2 := context.WithTimeout(ctx, 90*time.Second)
	defer cancel2()
	for rest < 300-read {
		fs := second.PollFetches(pollCtx2)
		if pollCtx2.Err() != nil {
			t.Fatalf("the second member read %d of the %d records after the commit", rest, 300-read)
		}
		fs.EachRecord(func(r *kgo.Record) {
			rest++
			if _, ok := firstSeen[r.Partition]; !ok {
				firstSeen[r.Partition] = r.Offset
			}
		})
	}
	for p := int32(0); p < parts; p++ {
		start, ok := firstSeen[p]
		if committed[p] == 300/parts && !ok {
			continue // read to its end before the kill
		}
		if start != committed[p] {
			t.Fatalf("partition %d: the second member started at %d, the commit was %d (committed %v, started %v)", p, firstSeen[p], committed[p], committed, firstSeen)
		}
	}
	second.Close()
	for _, n := range c.nodes {
		if n != victim {
			n.stop()
		}
	}
}
