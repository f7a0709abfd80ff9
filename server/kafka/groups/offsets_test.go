package groups

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/metalog"
)

// TestOffsetCommitFetch: commits are validated against the view's log
// tables, stored in the metadata log, and fetched back; a partition
// without a commit fetches -1.
func TestOffsetCommitFetch(t *testing.T) {
	n := newCluster(t)
	codes := commitCodes(n.do(commitReq("g", "", -1, map[string]map[int32]int64{
		"events": {0: 10, 3: 30, 4: 1},
		"clicks": {3: 7},
		"orders": {0: 1},
		"nope":   {0: 1},
	})))
	for p, want := range map[string]int16{
		"events/0": 0, "events/3": 0, "clicks/3": 0,
		"events/4": kerr.UnknownTopicOrPartition.Code, // events has 4 partitions
		"orders/0": kerr.UnknownTopicOrPartition.Code, // a primary-key table is no topic
		"nope/0":   kerr.UnknownTopicOrPartition.Code,
	} {
		wantCode(t, "commit "+p, codes[p], want)
	}
	var view map[string]map[int32]catalog.CommittedOffset
	n.cat.Read(func(v *catalog.View) { view = v.Groups["g"].Offsets })
	if want := (catalog.CommittedOffset{Offset: 10, LeaderEpoch: 3, Metadata: "m"}); view["events"][0] != want || len(view) != 2 {
		t.Fatalf("view offsets %+v", view)
	}

	got, code := n.fetch("g", map[string][]int32{"events": {0, 1, 3}, "clicks": {3}, "nope": {0}})
	wantCode(t, "fetch", code, 0)
	for p, want := range map[string]int64{"events/0": 10, "events/1": -1, "events/3": 30, "clicks/3": 7, "nope/0": -1} {
		if got[p] != want {
			t.Fatalf("fetch %s = %d, want %d (all: %v)", p, got[p], want, got)
		}
	}
	if got, _ := n.fetch("unknown", map[string][]int32{"events": {0}}); got["events/0"] != -1 {
		t.Fatalf("fetch of an unknown group: %v", got)
	}

	// Fetch all (a null topic list, v2+), one group of v7 and several of v8.
	r := n.do(&kmsg.OffsetFetchRequest{Version: 7, Group: "g"}).(*kmsg.OffsetFetchResponse)
	if len(r.Topics) != 2 || r.Topics[0].Topic != "clicks" || r.Topics[1].Topic != "events" || len(r.Topics[1].Partitions) != 2 ||
		r.Topics[1].Partitions[1].Offset != 30 || *r.Topics[1].Partitions[1].Metadata != "m" || r.Topics[1].Partitions[1].LeaderEpoch != 3 {
		t.Fatalf("fetch all v7: %+v", r)
	}
	v8 := kmsg.NewPtrOffsetFetchRequest()
	v8.Version = 8
	v8.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g"}, {Group: "unknown"}, {Group: "g", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "events", Partitions: []int32{3}}}}}
	r = n.do(v8).(*kmsg.OffsetFetchResponse)
	if len(r.Groups) != 3 || len(r.Groups[0].Topics) != 2 || len(r.Groups[1].Topics) != 0 || r.Groups[2].Topics[0].Partitions[0].Offset != 30 {
		t.Fatalf("fetch v8 batch: %+v", r.Groups)
	}

	// Old versions: v0 commits (no generation) and v1 fetches.
	v0 := commitReq("old", "", 0, map[string]map[int32]int64{"events": {2: 5}})
	v0.Version = 0
	wantCode(t, "v0 commit", commitCodes(n.do(v0))["events/2"], 0)
	r = n.do(&kmsg.OffsetFetchRequest{Version: 1, Group: "old", Topics: []kmsg.OffsetFetchRequestTopic{{Topic: "events", Partitions: []int32{2}}}}).(*kmsg.OffsetFetchResponse)
	if r.Topics[0].Partitions[0].Offset != 5 || r.Topics[0].Partitions[0].LeaderEpoch != -1 {
		t.Fatalf("v1 fetch after a v0 commit: %+v", r.Topics)
	}

	// Bad input per partition.
	bad := commitReq("g", "", -1, map[string]map[int32]int64{"events": {0: -5}})
	big := commitReq("g", "", -1, map[string]map[int32]int64{"events": {1: 1}})
	big.Topics[0].Partitions[0].Metadata = kmsg.StringPtr(strings.Repeat("x", catalog.MaxGroupOffsetMetadata+1))
	wantCode(t, "negative offset", commitCodes(n.do(bad))["events/0"], kerr.OffsetOutOfRange.Code)
	wantCode(t, "metadata too large", commitCodes(n.do(big))["events/1"], kerr.OffsetMetadataTooLarge.Code)
	wantCode(t, "no group id", commitCodes(n.do(commitReq("", "", -1, map[string]map[int32]int64{"events": {0: 1}})))["events/0"], kerr.InvalidGroupID.Code)
	if got, _ := n.fetch("g", map[string][]int32{"events": {0, 1}}); got["events/0"] != 10 || got["events/1"] != -1 {
		t.Fatalf("refused commits changed offsets: %v", got)
	}
}

// TestOffsetCommitGenerations: a group with members takes commits from its
// members at the current generation only; simple commits (generation -1,
// no member) only while it has no members.
func TestOffsetCommitGenerations(t *testing.T) {
	n := newCluster(t)
	ids, generation := stableGroup(t, n, 1)
	one := map[string]map[int32]int64{"events": {0: 1}}
	for _, tc := range []struct {
		name       string
		member     string
		generation int32
		want       int16
	}{
		{"member at the current generation", ids[0], generation, 0},
		{"member at an old generation", ids[0], generation - 1, kerr.IllegalGeneration.Code},
		{"member at a future generation", ids[0], generation + 1, kerr.IllegalGeneration.Code},
		{"unknown member", "nobody", generation, kerr.UnknownMemberID.Code},
		{"simple commit to an active group", "", -1, kerr.UnknownMemberID.Code},
	} {
		wantCode(t, tc.name, commitCodes(n.do(commitReq("g", tc.member, tc.generation, one)))["events/0"], tc.want)
	}
	// A group this coordinator has no members of (it moved here, or the
	// group emptied): members rejoin, simple commits are fine.
	wantCode(t, "member of an unknown group", commitCodes(n.do(commitReq("other", "m", 3, one)))["events/0"], kerr.IllegalGeneration.Code)
	wantCode(t, "simple commit to an unknown group", commitCodes(n.do(commitReq("other", "", -1, one)))["events/0"], 0)
}

// TestOffsetDeleteAndDeleteGroups: OffsetDelete drops partitions the group
// is not subscribed to; DeleteGroups drops an empty group's offsets.
func TestOffsetDeleteAndDeleteGroups(t *testing.T) {
	n := newCluster(t)
	ids, generation := stableGroup(t, n, 1) // subscribed per its (unreadable) metadata: to everything
	wantCode(t, "commit", commitCodes(n.do(commitReq("g", ids[0], generation, map[string]map[int32]int64{"events": {0: 1, 1: 2}})))["events/0"], 0)

	od := &kmsg.OffsetDeleteRequest{Group: "g", Topics: []kmsg.OffsetDeleteRequestTopic{{Topic: "events", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}}
	r := n.do(od).(*kmsg.OffsetDeleteResponse)
	wantCode(t, "offset delete", r.ErrorCode, 0)
	wantCode(t, "offset delete of a topic a member may consume", r.Topics[0].Partitions[0].ErrorCode, kerr.GroupSubscribedToTopic.Code)

	dg := &kmsg.DeleteGroupsRequest{Version: 2, Groups: []string{"g", "unknown"}}
	dr := n.do(dg).(*kmsg.DeleteGroupsResponse)
	wantCode(t, "delete an active group", dr.Groups[0].ErrorCode, kerr.NonEmptyGroup.Code)
	wantCode(t, "delete an unknown group", dr.Groups[1].ErrorCode, kerr.GroupIDNotFound.Code)

	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Group, leave.MemberID = "g", ids[0]
	wantCode(t, "leave", n.do(leave).(*kmsg.LeaveGroupResponse).ErrorCode, 0)

	r = n.do(od).(*kmsg.OffsetDeleteResponse)
	wantCode(t, "offset delete", r.ErrorCode, 0)
	wantCode(t, "offset delete of an empty group", r.Topics[0].Partitions[0].ErrorCode, 0)
	if got, _ := n.fetch("g", map[string][]int32{"events": {0, 1}}); got["events/0"] != -1 || got["events/1"] != 2 {
		t.Fatalf("after offset delete: %v", got)
	}
	wantCode(t, "offset delete of an unknown group", n.do(&kmsg.OffsetDeleteRequest{Group: "unknown"}).(*kmsg.OffsetDeleteResponse).ErrorCode, kerr.GroupIDNotFound.Code)

	dr = n.do(dg).(*kmsg.DeleteGroupsResponse)
	wantCode(t, "delete an empty group", dr.Groups[0].ErrorCode, 0)
	if got, _ := n.fetch("g", map[string][]int32{"events": {1}}); got["events/1"] != -1 {
		t.Fatalf("after delete: %v", got)
	}
	if d := n.describe("g"); d.State != "Dead" {
		t.Fatalf("deleted group: %+v", d)
	}
}

// TestOffsetDeleteSubscription: with the consumer protocol's metadata, only
// the topics a member subscribes to are protected.
func TestOffsetDeleteSubscription(t *testing.T) {
	n := newCluster(t)
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{"clicks"}
	req := joinReq("g", "", 3, "range")
	req.Protocols[0].Metadata = meta.AppendTo(nil)
	r := n.do(req).(*kmsg.JoinGroupResponse)
	wantCode(t, "join", r.ErrorCode, 0)
	synced(t, n.start(syncReq("g", r.MemberID, r.Generation, nil)))
	wantCode(t, "commit", commitCodes(n.do(commitReq("g", r.MemberID, r.Generation, map[string]map[int32]int64{"events": {0: 1}, "clicks": {0: 1}})))["events/0"], 0)
	od := &kmsg.OffsetDeleteRequest{Group: "g", Topics: []kmsg.OffsetDeleteRequestTopic{
		{Topic: "events", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}},
		{Topic: "clicks", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}}
	resp := n.do(od).(*kmsg.OffsetDeleteResponse)
	wantCode(t, "events", resp.Topics[0].Partitions[0].ErrorCode, 0)
	wantCode(t, "clicks", resp.Topics[1].Partitions[0].ErrorCode, kerr.GroupSubscribedToTopic.Code)
	if got, _ := n.fetch("g", map[string][]int32{"events": {0}, "clicks": {0}}); got["events/0"] != -1 || got["clicks/0"] != 1 {
		t.Fatalf("after offset delete: %v", got)
	}
}

// TestDropTableDropsOffsets: a dropped table's offsets go; a new table of
// the same name starts without any.
func TestDropTableDropsOffsets(t *testing.T) {
	n := newCluster(t)
	wantCode(t, "commit", commitCodes(n.do(commitReq("g", "", -1, map[string]map[int32]int64{"events": {0: 9}, "clicks": {0: 9}})))["events/0"], 0)
	var events catalog.TableID
	n.cat.Read(func(v *catalog.View) { t, _ := v.TableNamed("events"); events = t.ID })
	n.propose(catalog.DropTable{Table: events})
	n.propose(catalog.CreateTable{Spec: catalog.TableSpec{Name: "events", Buckets: 4, Columns: []catalog.Column{{Name: "v", Type: "text"}}}})
	if got, _ := n.fetch("g", map[string][]int32{"events": {0}, "clicks": {0}}); got["events/0"] != -1 || got["clicks/0"] != 9 {
		t.Fatalf("after drop and create: %v", got)
	}
}

// TestCommitRacesDrop: a table dropped between the coordinator's check and
// the commit's apply makes the log reject the record; the coordinator
// commits the partitions still valid.
func TestCommitRacesDrop(t *testing.T) {
	n := newCluster(t)
	var clicks catalog.TableID
	n.cat.Read(func(v *catalog.View) { t, _ := v.TableNamed("clicks"); clicks = t.ID })
	var epoch uint64
	n.cat.Read(func(v *catalog.View) { epoch = v.Coordinator.Epoch })
	n.propose(catalog.DropTable{Table: clicks})
	codes := map[catalog.GroupPartition]int16{}
	n.coord.commit(context.Background(), "g", epoch, []catalog.GroupOffset{
		{Topic: "clicks", Partition: 0, Offset: 1, LeaderEpoch: -1}, {Topic: "events", Partition: 0, Offset: 2, LeaderEpoch: -1}}, codes)
	wantCode(t, "dropped", codes[catalog.GroupPartition{Topic: "clicks", Partition: 0}], kerr.UnknownTopicOrPartition.Code)
	wantCode(t, "kept", codes[catalog.GroupPartition{Topic: "events", Partition: 0}], 0)
	if got, _ := n.fetch("g", map[string][]int32{"events": {0}}); got["events/0"] != 2 {
		t.Fatalf("fetch %v", got)
	}
}

// TestCommitBatches: a commit larger than one record's budget is split.
func TestCommitBatches(t *testing.T) {
	var offsets []catalog.GroupOffset
	for i := range 300 {
		offsets = append(offsets, catalog.GroupOffset{Topic: "t", Partition: int32(i), Metadata: strings.Repeat("x", 2000)})
	}
	batches := commitBatches(offsets)
	total := 0
	for _, b := range batches {
		size := 0
		for _, o := range b {
			size += 96 + len(o.Topic) + 2*len(o.Metadata)
		}
		if size > maxCommitRecordBytes {
			t.Fatalf("batch of %d bytes", size)
		}
		total += len(b)
	}
	if total != 300 || len(batches) < 2 {
		t.Fatalf("%d batches of %d offsets", len(batches), total)
	}
	if commitBatches(nil) != nil {
		t.Fatalf("batches of nothing")
	}
}

// TestCoordinatorMoves: two nodes share one metadata log. A member's commit
// on node 1 is fetched on node 2 after the coordinator lease moves there;
// node 1 answers NOT_COORDINATOR and drops its membership, and the member
// rejoins on node 2.
func TestCoordinatorMoves(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	log := metalog.NewMemLog()
	a := openNode(t, log, 1, clock)
	b := openNode(t, log, 2, clock)
	a.propose(catalog.RegisterNode{Node: 1, Addrs: catalog.Addrs{Kafka: "10.0.0.1:9092"}})
	b.propose(catalog.RegisterNode{Node: 2, Addrs: catalog.Addrs{Kafka: "10.0.0.2:9092"}})
	a.propose(catalog.RegisterCoordinator{Node: 1, NodeEpoch: 1})
	a.propose(catalog.CreateTable{Spec: catalog.TableSpec{Name: "events", Buckets: 2, Columns: []catalog.Column{{Name: "v", Type: "text"}}}})
	if err := b.cat.WaitIndex(context.Background(), a.cat.AppliedIndex()); err != nil {
		t.Fatal(err)
	}

	ids, generation := stableGroup(t, a, 1)
	wantCode(t, "commit on node 1", commitCodes(a.do(commitReq("g", ids[0], generation, map[string]map[int32]int64{"events": {1: 42}})))["events/1"], 0)
	wantCode(t, "node 2 before the move", b.heartbeat("g", ids[0], generation), kerr.NotCoordinator.Code)
	fc := b.do(&kmsg.FindCoordinatorRequest{Version: 3, CoordinatorKey: "g"}).(*kmsg.FindCoordinatorResponse)
	if fc.NodeID != 1 || fc.Host != "10.0.0.1" {
		t.Fatalf("node 2 points at %+v, want node 1", fc)
	}

	b.propose(catalog.RegisterCoordinator{Node: 2, NodeEpoch: 1, ExpectEpoch: 1})
	if err := a.cat.WaitIndex(context.Background(), b.cat.AppliedIndex()); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "node 1 after the move", a.heartbeat("g", ids[0], generation), kerr.NotCoordinator.Code)
	wantCode(t, "commit on node 1 after the move",
		commitCodes(a.do(commitReq("g", ids[0], generation, map[string]map[int32]int64{"events": {1: 43}})))["events/1"], kerr.NotCoordinator.Code)
	fc = a.do(&kmsg.FindCoordinatorRequest{Version: 3, CoordinatorKey: "g"}).(*kmsg.FindCoordinatorResponse)
	if fc.NodeID != 2 || fc.Host != "10.0.0.2" {
		t.Fatalf("node 1 points at %+v, want node 2", fc)
	}

	got, code := b.fetch("g", map[string][]int32{"events": {0, 1}})
	wantCode(t, "fetch on node 2", code, 0)
	if got["events/1"] != 42 || got["events/0"] != -1 {
		t.Fatalf("fetch on node 2: %v, want events/1 at 42", got)
	}
	// The member is unknown on node 2 and rejoins there.
	wantCode(t, "heartbeat on node 2", b.heartbeat("g", ids[0], generation), kerr.UnknownMemberID.Code)
	wantCode(t, "commit of the old generation on node 2",
		commitCodes(b.do(commitReq("g", ids[0], generation, map[string]map[int32]int64{"events": {1: 44}})))["events/1"], kerr.IllegalGeneration.Code)
	_, ch := b.join("g", "range")
	r := joined(t, ch)
	synced(t, b.start(syncReq("g", r.MemberID, r.Generation, nil)))
	wantCode(t, "commit on node 2", commitCodes(b.do(commitReq("g", r.MemberID, r.Generation, map[string]map[int32]int64{"events": {1: 45}})))["events/1"], 0)

	// Node 1's view has the commit too, and the log refuses a commit
	// carrying node 1's old coordinator epoch.
	if err := a.cat.WaitIndex(context.Background(), b.cat.AppliedIndex()); err != nil {
		t.Fatal(err)
	}
	var offsets map[string]map[int32]catalog.CommittedOffset
	a.cat.Read(func(v *catalog.View) { offsets = maps.Clone(v.Groups["g"].Offsets) })
	if offsets["events"][1].Offset != 45 {
		t.Fatalf("node 1's view: %+v", offsets)
	}
	codes := map[catalog.GroupPartition]int16{}
	a.coord.commit(context.Background(), "g", 1, []catalog.GroupOffset{{Topic: "events", Partition: 1, Offset: 1}}, codes)
	wantCode(t, "commit under the old coordinator epoch", codes[catalog.GroupPartition{Topic: "events", Partition: 1}], kerr.NotCoordinator.Code)
}
