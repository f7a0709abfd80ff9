package groups

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/minkdb/mink/catalog"
)

// stableGroup makes members join group g one after the other and brings the
// group to Stable; it returns the member ids and the generation.
func stableGroup(t *testing.T, n *node, count int) ([]string, int32) {
	t.Helper()
	var ids []string
	var generation int32
	for i := range count {
		id, ch := n.join("g", "range")
		var waits []<-chan kmsg.Response
		if i > 0 {
			n.waitState("g", "PreparingRebalance")
			// The members already in rejoin after a heartbeat tells them.
			for _, other := range ids {
				wantCode(t, "heartbeat during rebalance", n.heartbeat("g", other, generation), kerr.RebalanceInProgress.Code)
				waits = append(waits, n.start(joinReq("g", other, 7, "range")))
			}
		}
		ids = append(ids, id)
		waits = append(waits, ch)
		var leader string
		for _, w := range waits {
			r := joined(t, w)
			generation, leader = r.Generation, r.LeaderID
		}
		assignments := map[string]string{}
		for _, id := range ids {
			assignments[id] = "assigned-" + id
		}
		var syncs []<-chan kmsg.Response
		for _, id := range ids {
			if id != leader {
				syncs = append(syncs, n.start(syncReq("g", id, generation, nil)))
			}
		}
		syncs = append(syncs, n.start(syncReq("g", leader, generation, assignments)))
		for _, s := range syncs {
			synced(t, s)
		}
	}
	return ids, generation
}

// TestJoinSyncHeartbeatLeave walks one member through the protocol and
// checks the error codes of requests that are off by a little.
func TestJoinSyncHeartbeatLeave(t *testing.T) {
	n := newCluster(t)

	// v4+ joins without a member id get one with MEMBER_ID_REQUIRED.
	id, ch := n.join("g", "range", "roundrobin")
	r := joined(t, ch)
	if r.Generation != 1 || r.LeaderID != id || r.MemberID != id || *r.Protocol != "range" || *r.ProtocolType != "consumer" {
		t.Fatalf("join response %+v, want generation 1 led by %s with protocol range", r, id)
	}
	if len(r.Members) != 1 || r.Members[0].MemberID != id || string(r.Members[0].ProtocolMetadata) != "meta-range-"+id {
		t.Fatalf("leader's members %+v", r.Members)
	}
	wantCode(t, "describe", n.describe("g").ErrorCode, 0)
	if s := n.describe("g").State; s != "CompletingRebalance" {
		t.Fatalf("state %s after the join, want CompletingRebalance", s)
	}

	s := synced(t, n.start(syncReq("g", id, 1, map[string]string{id: "all of it"})))
	if string(s.MemberAssignment) != "all of it" || *s.Protocol != "range" {
		t.Fatalf("sync response %+v", s)
	}
	d := n.describe("g")
	if d.State != "Stable" || d.Protocol != "range" || d.ProtocolType != "consumer" || len(d.Members) != 1 ||
		d.Members[0].ClientID != "client" || d.Members[0].ClientHost != "10.1.1.1" ||
		string(d.Members[0].MemberAssignment) != "all of it" || string(d.Members[0].ProtocolMetadata) != "meta-range-"+id {
		t.Fatalf("describe %+v", d)
	}

	for _, tc := range []struct {
		name string
		code int16
		want int16
	}{
		{"heartbeat", n.heartbeat("g", id, 1), 0},
		{"heartbeat of an old generation", n.heartbeat("g", id, 0), kerr.IllegalGeneration.Code},
		{"heartbeat of an unknown member", n.heartbeat("g", "nobody", 1), kerr.UnknownMemberID.Code},
		{"heartbeat of an unknown group", n.heartbeat("h", id, 1), kerr.UnknownMemberID.Code},
		{"sync of an old generation", n.do(syncReq("g", id, 0, nil)).(*kmsg.SyncGroupResponse).ErrorCode, kerr.IllegalGeneration.Code},
		{"sync of an unknown member", n.do(syncReq("g", "nobody", 1, nil)).(*kmsg.SyncGroupResponse).ErrorCode, kerr.UnknownMemberID.Code},
		{"join with an unknown member id", n.do(joinReq("g", "nobody", 7, "range")).(*kmsg.JoinGroupResponse).ErrorCode, kerr.UnknownMemberID.Code},
		{"join of an unknown group with a member id", n.do(joinReq("h", id, 7, "range")).(*kmsg.JoinGroupResponse).ErrorCode, kerr.UnknownMemberID.Code},
		{"join without a group id", n.do(joinReq("", "", 7, "range")).(*kmsg.JoinGroupResponse).ErrorCode, kerr.InvalidGroupID.Code},
		{"join without protocols", n.do(joinReq("h", "", 7)).(*kmsg.JoinGroupResponse).ErrorCode, kerr.InconsistentGroupProtocol.Code},
	} {
		wantCode(t, tc.name, tc.code, tc.want)
	}
	short := joinReq("h", "", 7, "range")
	short.SessionTimeoutMillis = 100
	wantCode(t, "session timeout too short", n.do(short).(*kmsg.JoinGroupResponse).ErrorCode, kerr.InvalidSessionTimeout.Code)

	// A follower-less leader rejoining with the same protocols rebalances
	// (the leader may want to reassign); a lost SyncGroup response is
	// answered again in Stable.
	s = n.do(syncReq("g", id, 1, nil)).(*kmsg.SyncGroupResponse)
	wantCode(t, "sync again", s.ErrorCode, 0)
	if string(s.MemberAssignment) != "all of it" {
		t.Fatalf("second sync %+v", s)
	}
	r = joined(t, n.start(joinReq("g", id, 7, "range", "roundrobin")))
	if r.Generation != 2 {
		t.Fatalf("leader's rejoin: generation %d, want 2", r.Generation)
	}
	synced(t, n.start(syncReq("g", id, 2, nil)))
	if a := n.do(syncReq("g", id, 2, nil)).(*kmsg.SyncGroupResponse).MemberAssignment; len(a) == 0 {
		t.Fatalf("a member the leader assigned nothing gets no decodable assignment")
	} else if ca := kmsg.NewConsumerMemberAssignment(); ca.ReadFrom(a) != nil || len(ca.Topics) != 0 {
		t.Fatalf("empty assignment %q does not decode as an empty consumer assignment", a)
	}

	// Leaving empties the group; the next generation is counted on.
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version = 1
	leave.Group, leave.MemberID = "g", id
	wantCode(t, "leave", n.do(leave).(*kmsg.LeaveGroupResponse).ErrorCode, 0)
	wantCode(t, "leave again", n.do(leave).(*kmsg.LeaveGroupResponse).ErrorCode, kerr.UnknownMemberID.Code)
	wantCode(t, "heartbeat after leaving", n.heartbeat("g", id, 2), kerr.UnknownMemberID.Code)
	if s := n.describe("g").State; s != "Dead" {
		t.Fatalf("state %s of a group that emptied without offsets, want Dead", s)
	}
}

// TestJoinOldVersions: JoinGroup v0-v3 join without MEMBER_ID_REQUIRED;
// v0 takes the session timeout as rebalance timeout.
func TestJoinOldVersions(t *testing.T) {
	n := newCluster(t)
	for _, version := range []int16{0, 1, 3} {
		group := "old" + itoa(int32(version))
		r := n.do(joinReq(group, "", version, "range")).(*kmsg.JoinGroupResponse)
		wantCode(t, "join", r.ErrorCode, 0)
		if r.MemberID == "" || r.Generation != 1 || r.LeaderID != r.MemberID {
			t.Fatalf("v%d join: %+v", version, r)
		}
		s := n.do(&kmsg.SyncGroupRequest{Version: 0, Group: group, MemberID: r.MemberID, Generation: 1,
			GroupAssignment: []kmsg.SyncGroupRequestGroupAssignment{{MemberID: r.MemberID, MemberAssignment: []byte("a")}}}).(*kmsg.SyncGroupResponse)
		wantCode(t, "sync", s.ErrorCode, 0)
		if string(s.MemberAssignment) != "a" {
			t.Fatalf("v0 sync: %+v", s)
		}
	}
}

// TestRebalanceSecondMember: a second member's join rebalances the group;
// the first learns it from its heartbeat, rejoins, and both get the next
// generation, the leader with both members' metadata; a follower's sync
// waits for the leader's.
func TestRebalanceSecondMember(t *testing.T) {
	n := newCluster(t)
	ids, generation := stableGroup(t, n, 1)
	a := ids[0]

	b, bJoin := n.join("g", "roundrobin", "range")
	n.waitState("g", "PreparingRebalance")
	blocked(t, bJoin, "second member's join")
	wantCode(t, "heartbeat", n.heartbeat("g", a, generation), kerr.RebalanceInProgress.Code)
	commit := commitCodes(n.do(commitReq("g", a, generation, map[string]map[int32]int64{"events": {0: 10}})))
	wantCode(t, "commit of the old generation during the join phase", commit["events/0"], 0)

	aJoin := n.start(joinReq("g", a, 7, "range"))
	ra, rb := joined(t, aJoin), joined(t, bJoin)
	if ra.Generation != generation+1 || rb.Generation != ra.Generation || ra.LeaderID != a || rb.LeaderID != a {
		t.Fatalf("joins: %+v / %+v, want generation %d led by %s", ra, rb, generation+1, a)
	}
	if *ra.Protocol != "range" {
		t.Fatalf("protocol %s, want range (the only one both support)", *ra.Protocol)
	}
	var members []string
	for _, m := range ra.Members {
		members = append(members, m.MemberID)
		if want := "meta-range-" + m.MemberID; string(m.ProtocolMetadata) != want {
			t.Fatalf("member %s metadata %q, want %q", m.MemberID, m.ProtocolMetadata, want)
		}
	}
	slices.Sort(members)
	want := []string{a, b}
	slices.Sort(want)
	if !slices.Equal(members, want) || len(rb.Members) != 0 {
		t.Fatalf("leader's members %v, follower's %d; want %v and none", members, len(rb.Members), want)
	}
	commit = commitCodes(n.do(commitReq("g", a, ra.Generation, map[string]map[int32]int64{"events": {0: 11}})))
	wantCode(t, "commit while completing the rebalance", commit["events/0"], kerr.RebalanceInProgress.Code)
	commit = commitCodes(n.do(commitReq("g", a, generation, map[string]map[int32]int64{"events": {0: 11}})))
	wantCode(t, "commit of the previous generation", commit["events/0"], kerr.IllegalGeneration.Code)

	bSync := n.start(syncReq("g", b, rb.Generation, nil))
	blocked(t, bSync, "follower's sync")
	wantCode(t, "follower heartbeat while completing", n.heartbeat("g", b, rb.Generation), 0)
	aSync := n.start(syncReq("g", a, ra.Generation, map[string]string{a: "p0,p1", b: "p2,p3"}))
	if got := synced(t, aSync).MemberAssignment; string(got) != "p0,p1" {
		t.Fatalf("leader's assignment %q", got)
	}
	if got := synced(t, bSync).MemberAssignment; string(got) != "p2,p3" {
		t.Fatalf("follower's assignment %q", got)
	}
	wantCode(t, "heartbeat when stable", n.heartbeat("g", b, rb.Generation), 0)

	// A follower rejoining with the same protocols in Stable gets its
	// generation back without a rebalance.
	r := n.do(joinReq("g", b, 7, "roundrobin", "range")).(*kmsg.JoinGroupResponse)
	wantCode(t, "follower's repeated join", r.ErrorCode, 0)
	if r.Generation != rb.Generation || n.describe("g").State != "Stable" {
		t.Fatalf("follower's repeated join: %+v, state %s", r, n.describe("g").State)
	}
}

// TestProtocolSelection: a member must share a protocol with every member
// (INCONSISTENT_GROUP_PROTOCOL otherwise), and the protocol most members
// prefer among those all support is chosen.
func TestProtocolSelection(t *testing.T) {
	n := newCluster(t)
	ids, generation := stableGroup(t, n, 1)
	for _, tc := range []struct {
		name         string
		protocolType string
		protocols    []string
	}{
		{"no common protocol", "consumer", []string{"roundrobin"}},
		{"another protocol type", "connect", []string{"range"}},
	} {
		r := joinReq("g", "", 7, tc.protocols...)
		r.ProtocolType = tc.protocolType
		wantCode(t, tc.name, n.do(r).(*kmsg.JoinGroupResponse).ErrorCode, kerr.InconsistentGroupProtocol.Code)
	}
	if s := n.describe("g").State; s != "Stable" {
		t.Fatalf("a refused join changed the group to %s", s)
	}
	_ = generation

	for _, tc := range []struct {
		name    string
		a, b, c []string
		want    string
	}{
		{"majority", []string{"sticky", "range"}, []string{"sticky", "range"}, []string{"range", "sticky"}, "sticky"},
		{"only common one", []string{"a", "b"}, []string{"b", "c"}, []string{"c", "b"}, "b"},
		{"tie goes to the smaller name", []string{"y", "x"}, []string{"x", "y"}, []string{"z", "x", "y"}, "x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Member ids first, so that one join phase waits for all three.
			all := [][]string{tc.a, tc.b, tc.c}
			ids := make([]string, len(all))
			for i, protocols := range all {
				first := n.do(joinReq(tc.name, "", 7, protocols...)).(*kmsg.JoinGroupResponse)
				wantCode(t, "first join", first.ErrorCode, kerr.MemberIDRequired.Code)
				ids[i] = first.MemberID
			}
			var chans []<-chan kmsg.Response
			for i, protocols := range all {
				chans = append(chans, n.start(joinReq(tc.name, ids[i], 7, protocols...)))
			}
			for _, ch := range chans {
				r := joined(t, ch)
				if *r.Protocol != tc.want || r.Generation != 1 {
					t.Fatalf("protocol %s generation %d, want %s and 1", *r.Protocol, r.Generation, tc.want)
				}
			}
		})
	}
	_ = ids
}

// TestSessionExpiry: a member that stops heartbeating is removed after its
// session timeout and the group rebalances; a member that heartbeats stays.
func TestSessionExpiry(t *testing.T) {
	n := newCluster(t)
	ids, generation := stableGroup(t, n, 2)
	a, b := ids[0], ids[1]
	for range 2 {
		n.advance(4 * time.Second)
		wantCode(t, "heartbeat of a", n.heartbeat("g", a, generation), 0)
	}
	n.advance(4 * time.Second)
	// b has been silent for 12 s, past its 10 s session.
	wantCode(t, "heartbeat of the expired member", n.heartbeat("g", b, generation), kerr.UnknownMemberID.Code)
	wantCode(t, "heartbeat of the survivor", n.heartbeat("g", a, generation), kerr.RebalanceInProgress.Code)
	r := joined(t, n.start(joinReq("g", a, 7, "range")))
	if r.Generation != generation+1 || len(r.Members) != 1 {
		t.Fatalf("rejoin after expiry: %+v", r)
	}
	synced(t, n.start(syncReq("g", a, r.Generation, nil)))

	// A member id handed out with MEMBER_ID_REQUIRED expires unused.
	first := n.do(joinReq("g", "", 7, "range")).(*kmsg.JoinGroupResponse)
	wantCode(t, "first join", first.ErrorCode, kerr.MemberIDRequired.Code)
	n.advance(6 * time.Second)
	wantCode(t, "heartbeat of a", n.heartbeat("g", a, r.Generation), 0)
	n.advance(5 * time.Second)
	wantCode(t, "join with an expired member id", n.do(joinReq("g", first.MemberID, 7, "range")).(*kmsg.JoinGroupResponse).ErrorCode, kerr.UnknownMemberID.Code)

	// And the last member's expiry empties the group.
	if d := n.describe("g"); d.State != "Stable" || len(d.Members) != 1 {
		t.Fatalf("describe %+v", d)
	}
	n.advance(11 * time.Second)
	if d := n.describe("g"); d.State != "Dead" || len(d.Members) != 0 {
		t.Fatalf("after the last member expired: %+v", d)
	}
}

// TestRebalanceTimeout: members that do not rejoin within the rebalance
// timeout are removed, and the join phase completes without them; a
// member that joined but never syncs is removed after the rebalance
// timeout too, and the others' syncs are answered REBALANCE_IN_PROGRESS.
func TestRebalanceTimeout(t *testing.T) {
	n := newCluster(t)
	ids, generation := stableGroup(t, n, 2)
	a, b := ids[0], ids[1]
	c, cJoin := n.join("g", "range")
	n.waitState("g", "PreparingRebalance")
	aJoin := n.start(joinReq("g", a, 7, "range"))
	blocked(t, aJoin, "join while b has not rejoined")
	// b keeps heartbeating but never rejoins.
	n.advance(9 * time.Second)
	wantCode(t, "b heartbeat", n.heartbeat("g", b, generation), kerr.RebalanceInProgress.Code)
	n.advance(9 * time.Second)
	wantCode(t, "b heartbeat", n.heartbeat("g", b, generation), kerr.RebalanceInProgress.Code)
	blocked(t, aJoin, "join before the rebalance timeout")
	n.advance(13 * time.Second) // 31 s: past the 30 s rebalance timeout
	ra, rc := joined(t, aJoin), joined(t, cJoin)
	if ra.Generation != generation+1 || rc.Generation != ra.Generation || len(ra.Members) != 2 {
		t.Fatalf("joins %+v %+v", ra, rc)
	}
	wantCode(t, "heartbeat of the member left behind", n.heartbeat("g", b, generation), kerr.UnknownMemberID.Code)

	// c syncs, the leader a never does.
	leader := ra.LeaderID
	follower := c
	if leader == c {
		follower = a
	}
	fSync := n.start(syncReq("g", follower, ra.Generation, nil))
	blocked(t, fSync, "follower's sync")
	n.advance(31 * time.Second)
	r := recv(t, fSync).(*kmsg.SyncGroupResponse)
	wantCode(t, "follower's sync after the leader missed the sync phase", r.ErrorCode, kerr.RebalanceInProgress.Code)
	wantCode(t, "heartbeat of the leader that never synced", n.heartbeat("g", leader, ra.Generation), kerr.UnknownMemberID.Code)
	r2 := joined(t, n.start(joinReq("g", follower, 7, "range")))
	if r2.LeaderID != follower || r2.Generation != ra.Generation+1 {
		t.Fatalf("rejoin %+v", r2)
	}
}

// TestLeaveGroupBatch: LeaveGroup v3+ removes several members at once, by
// member id or instance id, with a code per member.
func TestLeaveGroupBatch(t *testing.T) {
	n := newCluster(t)
	ids, _ := stableGroup(t, n, 2)
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version = 5
	leave.Group = "g"
	for _, id := range append(ids, "nobody") {
		m := kmsg.NewLeaveGroupRequestMember()
		m.MemberID = id
		leave.Members = append(leave.Members, m)
	}
	r := n.do(leave).(*kmsg.LeaveGroupResponse)
	wantCode(t, "leave", r.ErrorCode, 0)
	if len(r.Members) != 3 {
		t.Fatalf("members %+v", r.Members)
	}
	for i, m := range r.Members {
		want := int16(0)
		if i == 2 {
			want = kerr.UnknownMemberID.Code
		}
		wantCode(t, "leave of "+m.MemberID, m.ErrorCode, want)
	}
	if s := n.describe("g").State; s != "Dead" {
		t.Fatalf("state %s", s)
	}
}

// TestNotCoordinator: a node that does not hold the coordinator lease
// answers every group request NOT_COORDINATOR (COORDINATOR_NOT_AVAILABLE
// when nobody does), and FindCoordinator names the holder.
func TestNotCoordinator(t *testing.T) {
	n := newCluster(t)
	stableGroup(t, n, 1)
	for _, tc := range []struct {
		name     string
		override func() (catalog.NodeID, string, bool)
		want     int16
	}{
		{"another node", func() (catalog.NodeID, string, bool) { return 2, "10.0.0.2:9093", true }, kerr.NotCoordinator.Code},
		{"no coordinator", func() (catalog.NodeID, string, bool) { return 0, "", false }, kerr.CoordinatorNotAvailable.Code},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n.setOverride(tc.override)
			defer n.setOverride(nil)
			codes := map[string]int16{
				"join":      n.do(joinReq("g", "", 7, "range")).(*kmsg.JoinGroupResponse).ErrorCode,
				"sync":      n.do(syncReq("g", "x", 1, nil)).(*kmsg.SyncGroupResponse).ErrorCode,
				"heartbeat": n.heartbeat("g", "x", 1),
				"describe":  n.describe("g").ErrorCode,
				"commit":    commitCodes(n.do(commitReq("g", "", -1, map[string]map[int32]int64{"events": {0: 1}})))["events/0"],
				"delete":    n.do(&kmsg.DeleteGroupsRequest{Version: 2, Groups: []string{"g"}}).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode,
				"offsetdel": n.do(&kmsg.OffsetDeleteRequest{Group: "g"}).(*kmsg.OffsetDeleteResponse).ErrorCode,
			}
			_, codes["fetch"] = n.fetch("g", map[string][]int32{"events": {0}})
			leave := kmsg.NewPtrLeaveGroupRequest()
			leave.Version = 0
			leave.Group, leave.MemberID = "g", "x"
			codes["leave"] = n.do(leave).(*kmsg.LeaveGroupResponse).ErrorCode
			for what, code := range codes {
				wantCode(t, what, code, tc.want)
			}
			list := n.do(&kmsg.ListGroupsRequest{Version: 4}).(*kmsg.ListGroupsResponse)
			if tc.want == kerr.NotCoordinator.Code && (list.ErrorCode != 0 || len(list.Groups) != 0) {
				t.Fatalf("ListGroups of a node that does not coordinate: %+v, want no groups and no error", list)
			}
		})
	}
	// The membership was dropped when this node stopped coordinating: the
	// member rejoins.
	wantCode(t, "heartbeat after the coordinator came back", n.heartbeat("g", "x", 1), kerr.UnknownMemberID.Code)
	if s := n.describe("g").State; s != "Dead" {
		t.Fatalf("state %s after a coordinator change, want Dead", s)
	}
}

// TestFindCoordinator: every version answers the lease holder's Kafka
// address; v4+ answers each key; transactions are refused.
func TestFindCoordinator(t *testing.T) {
	n := newCluster(t)
	for _, version := range []int16{0, 1, 3} {
		r := n.do(&kmsg.FindCoordinatorRequest{Version: version, CoordinatorKey: "g"}).(*kmsg.FindCoordinatorResponse)
		if r.ErrorCode != 0 || r.NodeID != 1 || r.Host != "10.0.0.1" || r.Port != 9092 {
			t.Fatalf("v%d: %+v", version, r)
		}
	}
	r := n.do(&kmsg.FindCoordinatorRequest{Version: 4, CoordinatorKeys: []string{"a", "b"}}).(*kmsg.FindCoordinatorResponse)
	if len(r.Coordinators) != 2 || r.Coordinators[1].Key != "b" || r.Coordinators[1].NodeID != 1 || r.Coordinators[1].Port != 9092 {
		t.Fatalf("v4: %+v", r)
	}
	txn := n.do(&kmsg.FindCoordinatorRequest{Version: 4, CoordinatorType: 1, CoordinatorKeys: []string{"t"}}).(*kmsg.FindCoordinatorResponse)
	if c := txn.Coordinators[0]; c.ErrorCode != kerr.InvalidRequest.Code || c.ErrorMessage == nil {
		t.Fatalf("transaction coordinator: %+v", c)
	}

	n.setOverride(func() (catalog.NodeID, string, bool) { return 2, "[::1]:9093", true })
	r = n.do(&kmsg.FindCoordinatorRequest{Version: 5, CoordinatorKeys: []string{"g"}}).(*kmsg.FindCoordinatorResponse)
	if c := r.Coordinators[0]; c.ErrorCode != 0 || c.NodeID != 2 || c.Host != "::1" || c.Port != 9093 {
		t.Fatalf("another coordinator: %+v", c)
	}
	for _, o := range []func() (catalog.NodeID, string, bool){
		func() (catalog.NodeID, string, bool) { return 0, "", false },
		func() (catalog.NodeID, string, bool) { return 2, "", true },
	} {
		n.setOverride(o)
		r = n.do(&kmsg.FindCoordinatorRequest{Version: 2, CoordinatorKey: "g"}).(*kmsg.FindCoordinatorResponse)
		wantCode(t, "no coordinator", r.ErrorCode, kerr.CoordinatorNotAvailable.Code)
	}
}

// TestCloseAnswersBlocked: Close answers a blocked JoinGroup.
func TestCloseAnswersBlocked(t *testing.T) {
	n := newCluster(t)
	ids, _ := stableGroup(t, n, 1)
	_, ch := n.join("g", "range")
	blocked(t, ch, "join")
	n.coord.Close()
	r := recv(t, ch).(*kmsg.JoinGroupResponse)
	wantCode(t, "blocked join at Close", r.ErrorCode, kerr.CoordinatorNotAvailable.Code)
	wantCode(t, "heartbeat after Close", n.heartbeat("g", ids[0], 1), kerr.CoordinatorNotAvailable.Code)
}

// TestDescribeAndList: states of groups with members, groups with
// committed offsets only, and unknown groups; ListGroups filters.
func TestDescribeAndList(t *testing.T) {
	n := newCluster(t)
	stableGroup(t, n, 1)
	commit := commitCodes(n.do(commitReq("offsets-only", "", -1, map[string]map[int32]int64{"events": {1: 5}})))
	wantCode(t, "simple commit", commit["events/1"], 0)

	if d := n.describe("offsets-only"); d.State != "Empty" || d.ErrorCode != 0 {
		t.Fatalf("describe offsets-only %+v", d)
	}
	if d := n.describe("nope"); d.State != "Dead" || d.ErrorCode != 0 {
		t.Fatalf("describe v5 of an unknown group %+v", d)
	}
	r := n.do(&kmsg.DescribeGroupsRequest{Version: 6, Groups: []string{"nope"}}).(*kmsg.DescribeGroupsResponse)
	wantCode(t, "describe v6 of an unknown group", r.Groups[0].ErrorCode, kerr.GroupIDNotFound.Code)

	list := func(states ...string) []string {
		r := n.do(&kmsg.ListGroupsRequest{Version: 5, StatesFilter: states}).(*kmsg.ListGroupsResponse)
		wantCode(t, "list", r.ErrorCode, 0)
		var out []string
		for _, g := range r.Groups {
			out = append(out, g.Group+":"+g.GroupState+":"+g.ProtocolType+":"+g.GroupType)
		}
		return out
	}
	if got, want := list(), []string{"g:Stable:consumer:classic", "offsets-only:Empty::classic"}; !slices.Equal(got, want) {
		t.Fatalf("list %v, want %v", got, want)
	}
	if got, want := list("empty"), []string{"offsets-only:Empty::classic"}; !slices.Equal(got, want) {
		t.Fatalf("list of empty groups %v, want %v", got, want)
	}
	if r := n.do(&kmsg.ListGroupsRequest{Version: 5, TypesFilter: []string{"consumer"}}).(*kmsg.ListGroupsResponse); len(r.Groups) != 0 {
		t.Fatalf("list of KIP-848 groups: %+v", r.Groups)
	}
}

// TestVersions: what is advertised is handled, within kmsg's ranges, and
// KIP-848's ConsumerGroupHeartbeat is not.
func TestVersions(t *testing.T) {
	keys := map[int16]bool{}
	for _, v := range Versions() {
		keys[v.ApiKey] = true
		req := kmsg.RequestForKey(v.ApiKey)
		if !Handles(v.ApiKey) || req == nil || v.MinVersion != 0 || v.MaxVersion > req.MaxVersion() {
			t.Errorf("key %d: versions %d-%d, kmsg max %d", v.ApiKey, v.MinVersion, v.MaxVersion, req.MaxVersion())
		}
	}
	for _, k := range []kmsg.Key{kmsg.FindCoordinator, kmsg.JoinGroup, kmsg.Heartbeat, kmsg.LeaveGroup, kmsg.SyncGroup,
		kmsg.DescribeGroups, kmsg.ListGroups, kmsg.OffsetCommit, kmsg.OffsetFetch, kmsg.DeleteGroups, kmsg.OffsetDelete} {
		if !keys[k.Int16()] {
			t.Errorf("%s is not advertised", k.Name())
		}
	}
	for _, k := range []kmsg.Key{kmsg.ConsumerGroupHeartbeat, kmsg.Produce, kmsg.TxnOffsetCommit} {
		if Handles(k.Int16()) {
			t.Errorf("%s is handled", k.Name())
		}
	}

	n := newCluster(t)
	if _, err := n.coord.Handle(t.Context(), &kmsg.OffsetCommitRequest{Version: 10}); err == nil {
		t.Errorf("OffsetCommit v10 answered")
	}
	if _, err := n.coord.Handle(t.Context(), kmsg.NewPtrProduceRequest()); err == nil {
		t.Errorf("Produce answered")
	}
}

// TestWireRoundTrip encodes each kind of response at its advertised
// versions, as the listener will, to catch a field that cannot be
// encoded at some version.
func TestWireRoundTrip(t *testing.T) {
	n := newCluster(t)
	id, ch := n.join("g", "range")
	joinResp := joined(t, ch)
	for _, v := range Versions() {
		for version := v.MinVersion; version <= v.MaxVersion; version++ {
			req := kmsg.RequestForKey(v.ApiKey)
			req.SetVersion(version)
			switch r := req.(type) {
			case *kmsg.JoinGroupRequest:
				r.Group, r.MemberID, r.SessionTimeoutMillis, r.RebalanceTimeoutMillis, r.ProtocolType = "g", id, 10000, 30000, "consumer"
				r.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte("meta-range-" + id)}}
			case *kmsg.SyncGroupRequest:
				r.Group, r.MemberID, r.Generation = "g", id, joinResp.Generation
			case *kmsg.OffsetCommitRequest:
				*r = *commitReq("h", "", -1, map[string]map[int32]int64{"events": {0: 1}})
				r.Version = version
			case *kmsg.OffsetFetchRequest:
				r.Group = "h"
				r.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "h"}}
			case *kmsg.FindCoordinatorRequest:
				r.CoordinatorKey, r.CoordinatorKeys = "g", []string{"g"}
			case *kmsg.DescribeGroupsRequest:
				r.Groups = []string{"g", "h"}
			}
			// Through the wire: decode what a client would send.
			wire := req.AppendTo(nil)
			decoded := kmsg.RequestForKey(v.ApiKey)
			decoded.SetVersion(version)
			if err := decoded.ReadFrom(wire); err != nil {
				t.Fatalf("%s v%d request: %v", kmsg.NameForKey(v.ApiKey), version, err)
			}
			resp := n.do(decoded)
			if resp.GetVersion() != version {
				t.Fatalf("%s v%d answered at v%d", kmsg.NameForKey(v.ApiKey), version, resp.GetVersion())
			}
			out := resp.AppendTo(nil)
			back := decoded.ResponseKind()
			if err := back.ReadFrom(out); err != nil {
				t.Fatalf("%s v%d response does not decode: %v", kmsg.NameForKey(v.ApiKey), version, err)
			}
			if again := back.AppendTo(nil); !bytes.Equal(again, out) {
				t.Fatalf("%s v%d response does not round-trip", kmsg.NameForKey(v.ApiKey), version)
			}
		}
	}
}
