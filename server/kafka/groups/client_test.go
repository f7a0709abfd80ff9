package groups

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"maps"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/metalog"
)

// The tests in this file run franz-go's consumer against a Coordinator
// behind a minimal Kafka listener (testBroker): ApiVersions, Metadata,
// ListOffsets and an always-empty Fetch, and the group requests. They check
// that a real client's group state machine gets through joins, syncs,
// heartbeats, commits, leaves and rebalances.

// testBroker is a one-node Kafka listener for the tests: topics with no
// records, and the Coordinator for group requests.
type testBroker struct {
	t      *testing.T
	ln     net.Listener
	coord  *Coordinator
	topics map[string]int32
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]bool
}

func startBroker(t *testing.T, topics map[string]int32) (*testBroker, *node) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := openNode(t, metalog.NewMemLog(), 1, nil)
	n.propose(catalog.RegisterNode{Node: 1, Addrs: catalog.Addrs{Kafka: ln.Addr().String()}})
	n.propose(catalog.RegisterCoordinator{Node: 1, NodeEpoch: 1})
	for name, partitions := range topics {
		n.propose(catalog.CreateTable{Spec: catalog.TableSpec{Name: name, Buckets: int(partitions),
			Columns: []catalog.Column{{Name: "v", Type: "text"}}}})
	}
	b := &testBroker{t: t, ln: ln, coord: n.coord, topics: topics, conns: map[net.Conn]bool{}}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	b.wg.Add(1)
	go b.accept()
	t.Cleanup(b.close)
	return b, n
}

func (b *testBroker) close() {
	b.cancel()
	b.ln.Close()
	b.mu.Lock()
	for c := range b.conns {
		c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
}

func (b *testBroker) accept() {
	defer b.wg.Done()
	for {
		conn, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.mu.Lock()
		b.conns[conn] = true
		b.mu.Unlock()
		b.wg.Add(1)
		go b.serve(conn)
	}
}

// serve answers the requests of one connection in order.
func (b *testBroker) serve(conn net.Conn) {
	defer b.wg.Done()
	defer conn.Close()
	for {
		var size [4]byte
		if _, err := io.ReadFull(conn, size[:]); err != nil {
			return
		}
		body := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(conn, body); err != nil {
			return
		}
		key, version := int16(binary.BigEndian.Uint16(body)), int16(binary.BigEndian.Uint16(body[2:]))
		correlation := body[4:8]
		clientIDLen := int16(binary.BigEndian.Uint16(body[8:]))
		rest := body[10:]
		if clientIDLen > 0 {
			rest = rest[clientIDLen:]
		}
		req := kmsg.RequestForKey(key)
		if req == nil {
			return
		}
		req.SetVersion(version)
		if req.IsFlexible() {
			rest = skipTags(rest)
		}
		if err := req.ReadFrom(rest); err != nil {
			b.t.Errorf("%s v%d: %v", kmsg.NameForKey(key), version, err)
			return
		}
		resp, err := b.handle(req)
		if err != nil {
			if b.ctx.Err() == nil {
				b.t.Errorf("%s v%d: %v", kmsg.NameForKey(key), version, err)
			}
			return
		}
		out := append([]byte{0, 0, 0, 0}, correlation...)
		if resp.IsFlexible() && key != kmsg.ApiVersions.Int16() {
			out = append(out, 0) // no tagged fields in the response header
		}
		out = resp.AppendTo(out)
		binary.BigEndian.PutUint32(out, uint32(len(out)-4))
		if _, err := conn.Write(out); err != nil {
			return
		}
	}
}

// skipTags skips a flexible request header's tagged fields.
func skipTags(b []byte) []byte {
	n, read := binary.Uvarint(b)
	b = b[read:]
	for range n {
		_, read = binary.Uvarint(b) // tag
		b = b[read:]
		size, read := binary.Uvarint(b)
		b = b[read+int(size):]
	}
	return b
}

func (b *testBroker) handle(req kmsg.Request) (kmsg.Response, error) {
	if Handles(req.Key()) {
		return b.coord.Handle(ContextWithClient(b.ctx, "kgo", "127.0.0.1"), req)
	}
	addr := b.ln.Addr().(*net.TCPAddr)
	switch r := req.(type) {
	case *kmsg.ApiVersionsRequest:
		resp := r.ResponseKind().(*kmsg.ApiVersionsResponse)
		for _, k := range []struct {
			key      kmsg.Key
			min, max int16
		}{{kmsg.ApiVersions, 0, 3}, {kmsg.Metadata, 1, 9}, {kmsg.ListOffsets, 1, 5}, {kmsg.Fetch, 4, 11}} {
			v := kmsg.NewApiVersionsResponseApiKey()
			v.ApiKey, v.MinVersion, v.MaxVersion = k.key.Int16(), k.min, k.max
			resp.ApiKeys = append(resp.ApiKeys, v)
		}
		resp.ApiKeys = append(resp.ApiKeys, Versions()...)
		return resp, nil
	case *kmsg.MetadataRequest:
		resp := r.ResponseKind().(*kmsg.MetadataResponse)
		broker := kmsg.NewMetadataResponseBroker()
		broker.NodeID, broker.Host, broker.Port = 1, addr.IP.String(), int32(addr.Port)
		resp.Brokers = append(resp.Brokers, broker)
		resp.ControllerID = 1
		names := slices.Sorted(maps.Keys(b.topics))
		if r.Topics != nil {
			names = nil
			for _, t := range r.Topics {
				names = append(names, *t.Topic)
			}
		}
		for _, name := range names {
			rt := kmsg.NewMetadataResponseTopic()
			rt.Topic = kmsg.StringPtr(name)
			partitions, ok := b.topics[name]
			if !ok {
				rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			}
			for p := range partitions {
				rp := kmsg.NewMetadataResponseTopicPartition()
				rp.Partition, rp.Leader, rp.LeaderEpoch, rp.Replicas, rp.ISR = p, 1, -1, []int32{1}, []int32{1}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	case *kmsg.ListOffsetsRequest:
		resp := r.ResponseKind().(*kmsg.ListOffsetsResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewListOffsetsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewListOffsetsResponseTopicPartition()
				rp.Partition, rp.Offset, rp.Timestamp, rp.LeaderEpoch = p.Partition, 0, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	case *kmsg.FetchRequest:
		// Nothing to fetch: wait as a broker with no new records does.
		select {
		case <-time.After(min(time.Duration(r.MaxWaitMillis)*time.Millisecond, 100*time.Millisecond)):
		case <-b.ctx.Done():
			return nil, b.ctx.Err()
		}
		resp := r.ResponseKind().(*kmsg.FetchResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewFetchResponseTopicPartition()
				rp.Partition = p.Partition
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}
	return nil, errors.New("the test broker does not answer " + kmsg.NameForKey(req.Key()))
}

// consumer is a franz-go group consumer of the test broker and the
// partitions it holds now.
type consumer struct {
	cl *kgo.Client
	mu sync.Mutex
	// held is the consumer's current assignment of "events".
	held map[int32]bool
	// stop stops polling and closes the client, which leaves the group.
	stop func()
}

func startConsumer(t *testing.T, b *testBroker, balancer kgo.GroupBalancer) *consumer {
	t.Helper()
	c := &consumer{held: map[int32]bool{}}
	update := func(add bool) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			c.mu.Lock()
			defer c.mu.Unlock()
			for _, p := range ps["events"] {
				if add {
					c.held[p] = true
				} else {
					delete(c.held, p)
				}
			}
		}
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(b.ln.Addr().String()),
		kgo.ConsumerGroup("g"),
		kgo.ConsumeTopics("events"),
		kgo.Balancers(balancer),
		kgo.SessionTimeout(6*time.Second),
		kgo.RebalanceTimeout(5*time.Second),
		kgo.HeartbeatInterval(100*time.Millisecond),
		kgo.FetchMaxWait(100*time.Millisecond),
		kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(update(true)),
		kgo.OnPartitionsRevoked(update(false)),
		kgo.OnPartitionsLost(update(false)),
	)
	if err != nil {
		t.Fatal(err)
	}
	c.cl = cl
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			cl.PollFetches(ctx)
		}
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			<-done
			cl.Close() // leaves the group
		})
	}
	c.stop = stop
	t.Cleanup(stop)
	return c
}

func (c *consumer) assigned() []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(maps.Keys(c.held))
}

// waitAssigned waits until the consumers hold every partition of "events"
// (4) between them, each one the count in want.
func waitAssigned(t *testing.T, want []int, consumers ...*consumer) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var got []int
		all := map[int32]bool{}
		for _, c := range consumers {
			a := c.assigned()
			got = append(got, len(a))
			for _, p := range a {
				all[p] = true
			}
		}
		if slices.Equal(got, want) && len(all) == 4 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("assignments %v, want %v of 4 partitions", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFranzGoConsumerGroup: two franz-go consumers share a topic's
// partitions, commit offsets that OffsetFetch returns, and one leaving
// hands its partitions to the other — with an eager and a cooperative
// balancer.
func TestFranzGoConsumerGroup(t *testing.T) {
	for _, tc := range []struct {
		name     string
		balancer kgo.GroupBalancer
	}{
		{"range", kgo.RangeBalancer()},
		{"cooperative-sticky", kgo.CooperativeStickyBalancer()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, n := startBroker(t, map[string]int32{"events": 4})
			first := startConsumer(t, b, tc.balancer)
			waitAssigned(t, []int{4}, first)
			second := startConsumer(t, b, tc.balancer)
			waitAssigned(t, []int{2, 2}, first, second)
			if d := n.describe("g"); d.State != "Stable" || len(d.Members) != 2 || d.Members[0].ClientID != "kgo" {
				t.Fatalf("describe %+v", d)
			}

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			offsets := map[string]map[int32]kgo.EpochOffset{"events": {}}
			for _, p := range second.assigned() {
				offsets["events"][p] = kgo.EpochOffset{Epoch: -1, Offset: int64(100 + p)}
			}
			var commitErr error
			second.cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
				commitErr = err
				for _, t := range resp.Topics {
					for _, p := range t.Partitions {
						if err := kerr.ErrorForCode(p.ErrorCode); err != nil && commitErr == nil {
							commitErr = err
						}
					}
				}
			})
			if commitErr != nil {
				t.Fatalf("commit: %v", commitErr)
			}
			got, code := n.fetch("g", map[string][]int32{"events": {0, 1, 2, 3}})
			wantCode(t, "fetch", code, 0)
			for p := range int32(4) {
				want := int64(-1)
				if _, ok := offsets["events"][p]; ok {
					want = int64(100 + p)
				}
				if got["events/"+itoa(p)] != want {
					t.Fatalf("fetch %v, want the second consumer's commits %v", got, offsets)
				}
			}

			second.stop()
			waitAssigned(t, []int{4}, first)
		})
	}
}
