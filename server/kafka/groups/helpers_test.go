package groups

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/metalog"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func quietLogger() *slog.Logger {
	if os.Getenv("MINK_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// fakeClock is the tests' clock: it moves only when told.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) add(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

// node is one mink node of a test: a catalog on the shared log and a
// Coordinator that takes the coordinator from its view, as the listener
// does.
type node struct {
	t     *testing.T
	id    catalog.NodeID
	cat   *metalog.Catalog
	coord *Coordinator
	clock *fakeClock
	// override, when set, replaces the view's coordinator (tests of
	// NOT_COORDINATOR without a registration). The timer loop reads it.
	override atomic.Pointer[func() (catalog.NodeID, string, bool)]
}

func (n *node) setOverride(f func() (catalog.NodeID, string, bool)) {
	if f == nil {
		n.override.Store(nil)
		return
	}
	n.override.Store(&f)
}

// openNode opens node id's catalog on log and its Coordinator (on the real
// clock when clock is nil); both are closed when the test ends.
func openNode(t *testing.T, log *metalog.MemLog, id catalog.NodeID, clock *fakeClock) *node {
	t.Helper()
	cat, err := metalog.Open(context.Background(), log, metalog.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	n := &node{t: t, id: id, cat: cat, clock: clock}
	cfg := Config{Node: id, Meta: cat, Coordinator: n.coordinator, Logger: quietLogger()}
	if clock != nil {
		cfg.Now = clock.Now
	}
	n.coord = New(cfg)
	t.Cleanup(func() {
		n.coord.Close()
		cat.Close()
	})
	return n
}

func (n *node) coordinator() (catalog.NodeID, string, bool) {
	if f := n.override.Load(); f != nil {
		return (*f)()
	}
	var (
		id   catalog.NodeID
		addr string
	)
	n.cat.Read(func(v *catalog.View) {
		id = v.Coordinator.Node
		if nd := v.Nodes[id]; nd != nil {
			addr = nd.Addrs.Kafka
		}
	})
	return id, addr, id != 0
}

// propose proposes rec on n's catalog and fails the test unless accepted.
func (n *node) propose(rec catalog.Record) catalog.Outcome {
	n.t.Helper()
	out, err := n.cat.Propose(context.Background(), rec)
	if err == nil {
		err = out.Err
	}
	if err != nil {
		n.t.Fatalf("%T: %v", rec, err)
	}
	return out
}

// newCluster returns node 1, the coordinator, with a log table "events"
// (4 partitions), a partitioned log table "clicks" with two partitions of
// 2 buckets, and a primary-key table "orders".
func newCluster(t *testing.T) *node {
	t.Helper()
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	n := openNode(t, metalog.NewMemLog(), 1, clock)
	n.propose(catalog.RegisterNode{Node: 1, Addrs: catalog.Addrs{Kafka: "10.0.0.1:9092"}})
	n.propose(catalog.RegisterCoordinator{Node: 1, NodeEpoch: 1})
	n.propose(catalog.CreateTable{Spec: catalog.TableSpec{Name: "events", Buckets: 4,
		Columns: []catalog.Column{{Name: "v", Type: "text"}}}})
	clicks := n.propose(catalog.CreateTable{Spec: catalog.TableSpec{Name: "clicks", Buckets: 2, PartitionBy: "dt",
		Columns: []catalog.Column{{Name: "dt", Type: "date"}}}}).Table
	n.propose(catalog.CreatePartition{Table: clicks, Value: "2026-01-01"})
	n.propose(catalog.CreatePartition{Table: clicks, Value: "2026-01-02"})
	n.propose(catalog.CreateTable{Spec: catalog.TableSpec{Name: "orders", PrimaryKey: []string{"id"},
		Columns: []catalog.Column{{Name: "id", Type: "bigint"}}}})
	return n
}

// do sends req and returns its response, which must come within a few
// seconds.
func (n *node) do(req kmsg.Request) kmsg.Response {
	n.t.Helper()
	select {
	case r := <-n.start(req):
		return r
	case <-time.After(5 * time.Second):
		n.t.Fatalf("%s got no response", kmsg.NameForKey(req.Key()))
		return nil
	}
}

// start sends req on its own goroutine and returns where its response will
// arrive (nil if Handle failed). The goroutine ends when the test ends.
func (n *node) start(req kmsg.Request) <-chan kmsg.Response {
	ch := make(chan kmsg.Response, 1)
	ctx, cancel := context.WithCancel(ContextWithClient(context.Background(), "client", "10.1.1.1"))
	n.t.Cleanup(cancel)
	go func() {
		resp, err := n.coord.Handle(ctx, req)
		if err != nil && ctx.Err() == nil {
			n.t.Errorf("%s: %v", kmsg.NameForKey(req.Key()), err)
		}
		ch <- resp
	}()
	return ch
}

// blocked checks that a request started with start has no response yet.
func blocked(t *testing.T, ch <-chan kmsg.Response, what string) {
	t.Helper()
	time.Sleep(20 * time.Millisecond)
	select {
	case r := <-ch:
		t.Fatalf("%s answered %+v, want it blocked", what, r)
	default:
	}
}

func recv(t *testing.T, ch <-chan kmsg.Response) kmsg.Response {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(5 * time.Second):
		t.Fatalf("no response")
		return nil
	}
}

// advance moves the clock and applies the deadlines that passed.
func (n *node) advance(d time.Duration) {
	n.clock.add(d)
	n.coord.expire()
}

func wantCode(t *testing.T, what string, got, want int16) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: error %s, want %s", what, codeName(got), codeName(want))
	}
}

func codeName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		return e.Message
	}
	return kerr.ErrorForCode(code).Error()
}

// Request builders. Versions are the newest each client family commonly
// sends, unless a test says otherwise.

func joinReq(group, member string, version int16, protocols ...string) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version = version
	r.Group, r.MemberID = group, member
	r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = 10_000, 30_000
	r.ProtocolType = "consumer"
	for _, p := range protocols {
		jp := kmsg.NewJoinGroupRequestProtocol()
		jp.Name = p
		jp.Metadata = []byte("meta-" + p + "-" + member)
		r.Protocols = append(r.Protocols, jp)
	}
	return r
}

func syncReq(group, member string, generation int32, assignments map[string]string) *kmsg.SyncGroupRequest {
	r := kmsg.NewPtrSyncGroupRequest()
	r.Version = 5
	r.Group, r.MemberID, r.Generation = group, member, generation
	for id, a := range assignments {
		ga := kmsg.NewSyncGroupRequestGroupAssignment()
		ga.MemberID, ga.MemberAssignment = id, []byte(a)
		r.GroupAssignment = append(r.GroupAssignment, ga)
	}
	return r
}

func heartbeatReq(group, member string, generation int32) *kmsg.HeartbeatRequest {
	r := kmsg.NewPtrHeartbeatRequest()
	r.Version = 4
	r.Group, r.MemberID, r.Generation = group, member, generation
	return r
}

func (n *node) heartbeat(group, member string, generation int32) int16 {
	n.t.Helper()
	return n.do(heartbeatReq(group, member, generation)).(*kmsg.HeartbeatResponse).ErrorCode
}

// join makes a new member join with the v4+ two-step join and returns the
// channel of its (blocked) second JoinGroup.
func (n *node) join(group string, protocols ...string) (string, <-chan kmsg.Response) {
	n.t.Helper()
	first := n.do(joinReq(group, "", 7, protocols...)).(*kmsg.JoinGroupResponse)
	wantCode(n.t, "first join", first.ErrorCode, kerr.MemberIDRequired.Code)
	if first.MemberID == "" {
		n.t.Fatalf("MEMBER_ID_REQUIRED without a member id")
	}
	return first.MemberID, n.start(joinReq(group, first.MemberID, 7, protocols...))
}

func joined(t *testing.T, ch <-chan kmsg.Response) *kmsg.JoinGroupResponse {
	t.Helper()
	r := recv(t, ch).(*kmsg.JoinGroupResponse)
	wantCode(t, "join", r.ErrorCode, 0)
	return r
}

func synced(t *testing.T, ch <-chan kmsg.Response) *kmsg.SyncGroupResponse {
	t.Helper()
	r := recv(t, ch).(*kmsg.SyncGroupResponse)
	wantCode(t, "sync", r.ErrorCode, 0)
	return r
}

func (n *node) describe(group string) kmsg.DescribeGroupsResponseGroup {
	n.t.Helper()
	r := kmsg.NewPtrDescribeGroupsRequest()
	r.Version = 5
	r.Groups = []string{group}
	return n.do(r).(*kmsg.DescribeGroupsResponse).Groups[0]
}

func commitReq(group, member string, generation int32, offsets map[string]map[int32]int64) *kmsg.OffsetCommitRequest {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version = 8
	r.Group, r.MemberID, r.Generation = group, member, generation
	for topic, parts := range offsets {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = topic
		for p, o := range parts {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = p, o, 3
			rp.Metadata = kmsg.StringPtr("m")
			rt.Partitions = append(rt.Partitions, rp)
		}
		r.Topics = append(r.Topics, rt)
	}
	return r
}

// commitCodes returns the error code of every partition of an
// OffsetCommit response, as "topic/partition" → code.
func commitCodes(resp kmsg.Response) map[string]int16 {
	codes := map[string]int16{}
	for _, t := range resp.(*kmsg.OffsetCommitResponse).Topics {
		for _, p := range t.Partitions {
			codes[t.Topic+"/"+itoa(p.Partition)] = p.ErrorCode
		}
	}
	return codes
}

// fetch returns the committed offsets of the partitions of group (v8
// OffsetFetch), as "topic/partition" → offset.
func (n *node) fetch(group string, topics map[string][]int32) (map[string]int64, int16) {
	n.t.Helper()
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version = 8
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	for topic, parts := range topics {
		rg.Topics = append(rg.Topics, kmsg.OffsetFetchRequestGroupTopic{Topic: topic, Partitions: parts})
	}
	r.Groups = append(r.Groups, rg)
	g := n.do(r).(*kmsg.OffsetFetchResponse).Groups[0]
	offsets := map[string]int64{}
	for _, t := range g.Topics {
		for _, p := range t.Partitions {
			offsets[t.Topic+"/"+itoa(p.Partition)] = p.Offset
		}
	}
	return offsets, g.ErrorCode
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

// waitState waits until DescribeGroups shows group in state (a request
// started with start may not have arrived yet).
func (n *node) waitState(group, state string) {
	n.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := n.describe(group).State
		if got == state {
			return
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("group %s is %s, want %s", group, got, state)
		}
		time.Sleep(time.Millisecond)
	}
}
