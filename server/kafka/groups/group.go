package groups

import (
	"bytes"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupState is a classic group's state, named as DescribeGroups and
// ListGroups show it. A group that is not in Coordinator.mu.groups is Empty
// if it has committed offsets, and Dead (unknown) otherwise.
type groupState int8

const (
	stateEmpty groupState = iota
	statePreparingRebalance
	stateCompletingRebalance
	stateStable
)

func (s groupState) String() string {
	switch s {
	case stateEmpty:
		return "Empty"
	case statePreparingRebalance:
		return "PreparingRebalance"
	case stateCompletingRebalance:
		return "CompletingRebalance"
	case stateStable:
		return "Stable"
	}
	return "Dead"
}

// group is the membership of one classic group on its coordinator.
//
// The rebalance protocol: a JoinGroup from a new member, a member whose
// protocols changed, the leader, or the loss of a member moves the group to
// PreparingRebalance. The join phase ends when every member has sent
// JoinGroup (and every member id handed out with MEMBER_ID_REQUIRED has
// joined or expired), or at joinDeadline (the longest rebalance timeout of
// the members); members that did not rejoin are removed. Then the
// generation goes up, a protocol every member supports is chosen, a leader
// is kept or picked, every blocked JoinGroup is answered (the leader's with
// all members' metadata) and the group is CompletingRebalance until the
// leader's SyncGroup hands out the assignments (Stable). Members that do not
// send SyncGroup by syncDeadline are removed and the group rebalances.
//
// A member's session runs while it is not blocked in JoinGroup or
// SyncGroup: the join and sync phases have their own deadlines.
//
// REQUIRES: Coordinator.mu held for every method.
type group struct {
	name         string
	state        groupState
	generation   int32
	protocolType string
	// protocol is the chosen protocol of the generation; "" when Empty.
	protocol string
	leader   string
	members  map[string]*member
	// pending are the member ids handed out with MEMBER_ID_REQUIRED, until
	// the member joins with it or its session timeout passes.
	pending map[string]time.Time
	// joinDeadline ends the join phase (PreparingRebalance).
	joinDeadline time.Time
	// syncDeadline ends the sync phase (CompletingRebalance): members still
	// in awaitingSync are removed then.
	syncDeadline time.Time
	awaitingSync map[string]bool
}

type member struct {
	id         string
	instanceID *string
	clientID   string
	clientHost string

	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	// protocols are the member's protocols, most preferred first.
	protocols []kmsg.JoinGroupRequestProtocol
	// assignment is the member's assignment of the generation (Stable).
	assignment []byte

	// sessionDeadline removes the member unless it heartbeats; not
	// counted while join or sync is set.
	sessionDeadline time.Time
	// join is the member's blocked JoinGroup, sync its blocked SyncGroup.
	join *joinWait
	sync *syncWait
}

// joinWait is a blocked JoinGroup: finish fills resp and closes done, after
// which the handler returns resp.
type joinWait struct {
	resp *kmsg.JoinGroupResponse
	done chan struct{}
}

type syncWait struct {
	resp *kmsg.SyncGroupResponse
	done chan struct{}
}

func newJoinWait(resp *kmsg.JoinGroupResponse) *joinWait {
	return &joinWait{resp: resp, done: make(chan struct{})}
}

func newSyncWait(resp *kmsg.SyncGroupResponse) *syncWait {
	return &syncWait{resp: resp, done: make(chan struct{})}
}

func newGroup(name string) *group {
	return &group{name: name, members: map[string]*member{}, pending: map[string]time.Time{}}
}

// removable reports whether the group holds nothing worth keeping in
// memory: no members and no pending member ids. Its committed offsets are
// in the metadata view.
func (g *group) removable() bool {
	return g.state == stateEmpty && len(g.members) == 0 && len(g.pending) == 0
}

// acceptsProtocols reports whether member self (new, or rejoining) may
// join with protocolType and protocols: the group's protocol type, and at
// least one protocol that every other member supports too.
func (g *group) acceptsProtocols(self, protocolType string, protocols []kmsg.JoinGroupRequestProtocol) bool {
	if protocolType == "" || len(protocols) == 0 {
		return false
	}
	if len(g.members) == 0 || (len(g.members) == 1 && g.members[self] != nil) {
		return true
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, p := range protocols {
		if g.supportedByAll(p.Name, self) {
			return true
		}
	}
	return false
}

// supportedByAll reports whether every member but except supports protocol.
func (g *group) supportedByAll(protocol, except string) bool {
	for id, m := range g.members {
		if id != except && !slices.ContainsFunc(m.protocols, func(p kmsg.JoinGroupRequestProtocol) bool { return p.Name == protocol }) {
			return false
		}
	}
	return true
}

// sameProtocols reports whether m joined with exactly protocols (names,
// order and metadata).
func (m *member) sameProtocols(protocols []kmsg.JoinGroupRequestProtocol) bool {
	return slices.EqualFunc(m.protocols, protocols, func(a, b kmsg.JoinGroupRequestProtocol) bool {
		return a.Name == b.Name && bytes.Equal(a.Metadata, b.Metadata)
	})
}

// addMember adds m to the group, blocked in join, and rebalances.
func (g *group) addMember(now time.Time, m *member, protocolType string, join *joinWait) {
	if len(g.members) == 0 {
		g.protocolType = protocolType
	}
	m.sessionDeadline = now.Add(m.sessionTimeout)
	delete(g.pending, m.id)
	g.members[m.id] = m
	g.rejoin(now, m, m.protocols, join)
}

// rejoin records m's JoinGroup (new protocols, blocked in join) and starts
// or continues a rebalance.
func (g *group) rejoin(now time.Time, m *member, protocols []kmsg.JoinGroupRequestProtocol, join *joinWait) {
	if m.join != nil {
		// A second JoinGroup for the same member, from another connection
		// (the first one's client gave up): the first is answered.
		m.join.resp.ErrorCode = kerr.RebalanceInProgress.Code
		m.join.finish()
	}
	m.protocols = protocols
	m.join = join
	g.prepareRebalance(now)
}

// prepareRebalance moves the group to PreparingRebalance (or keeps it
// there) and ends the join phase if nobody is missing.
func (g *group) prepareRebalance(now time.Time) {
	if g.state == stateCompletingRebalance {
		// The generation's syncs will not complete: the members rejoin.
		for _, m := range g.members {
			m.assignment = nil
			if m.sync != nil {
				m.sync.resp.ErrorCode = kerr.RebalanceInProgress.Code
				m.sync.finish()
				m.sync = nil
				m.sessionDeadline = now.Add(m.sessionTimeout)
			}
		}
		g.awaitingSync = nil
	}
	if g.state != statePreparingRebalance {
		g.state = statePreparingRebalance
		g.joinDeadline = now.Add(g.rebalanceTimeout())
	}
	g.maybeCompleteJoin(now)
}

// rebalanceTimeout is the longest rebalance timeout of the members.
func (g *group) rebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

// maybeCompleteJoin ends the join phase when every member has rejoined and
// no handed-out member id is still expected.
func (g *group) maybeCompleteJoin(now time.Time) {
	if g.state != statePreparingRebalance || len(g.pending) > 0 {
		return
	}
	for _, m := range g.members {
		if m.join == nil {
			return
		}
	}
	g.completeJoin(now)
}

// completeJoin ends the join phase: members that did not rejoin are
// removed, the generation goes up, and the joined members are answered.
func (g *group) completeJoin(now time.Time) {
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		if m := g.members[id]; m.join == nil {
			g.dropMember(m, kerr.UnknownMemberID.Code)
		}
	}
	g.generation++
	if g.generation < 0 {
		g.generation = 1
	}
	if len(g.members) == 0 {
		g.state = stateEmpty
		g.protocol, g.leader, g.protocolType = "", "", ""
		return
	}
	g.protocol = g.selectProtocol()
	if g.members[g.leader] == nil {
		g.leader = slices.Min(slices.Collect(maps.Keys(g.members)))
	}
	g.state = stateCompletingRebalance
	g.syncDeadline = now.Add(g.rebalanceTimeout())
	g.awaitingSync = make(map[string]bool, len(g.members))
	for id, m := range g.members {
		g.awaitingSync[id] = true
		g.fillJoin(m, m.join.resp)
		m.join.finish()
		m.join = nil
		m.sessionDeadline = now.Add(m.sessionTimeout)
	}
}

// selectProtocol chooses the generation's protocol as Kafka does: among
// the protocols every member supports, the one most members list first
// among them; ties go to the lexically smallest name, so the choice is
// deterministic.
func (g *group) selectProtocol() string {
	votes := map[string]int{}
	for _, m := range g.members {
		for _, p := range m.protocols {
			if g.supportedByAll(p.Name, "") {
				votes[p.Name]++
				break
			}
		}
	}
	// acceptsProtocols let every member in with a protocol all others
	// support, so there is a candidate.
	if len(votes) == 0 {
		panic("kafka groups: group " + g.name + " has no protocol every member supports")
	}
	return slices.MaxFunc(slices.Sorted(maps.Keys(votes)), func(a, b string) int {
		if votes[a] != votes[b] {
			return votes[a] - votes[b]
		}
		// Equal votes: the lexically smaller name wins.
		if a < b {
			return 1
		}
		return -1
	})
}

// fillJoin fills the successful JoinGroup response of m for the current
// generation; the leader's carries every member's metadata for the
// chosen protocol.
func (g *group) fillJoin(m *member, resp *kmsg.JoinGroupResponse) {
	resp.ErrorCode = 0
	resp.Generation = g.generation
	resp.ProtocolType = kmsg.StringPtr(g.protocolType)
	resp.Protocol = kmsg.StringPtr(g.protocol)
	resp.LeaderID = g.leader
	resp.MemberID = m.id
	resp.Members = nil
	if m.id != g.leader {
		return
	}
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		other := g.members[id]
		rm := kmsg.NewJoinGroupResponseMember()
		rm.MemberID = other.id
		rm.InstanceID = other.instanceID
		rm.ProtocolMetadata = other.metadataOf(g.protocol)
		resp.Members = append(resp.Members, rm)
	}
}

func (m *member) metadataOf(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

// completeSync takes the leader's assignments and makes the group Stable;
// every blocked SyncGroup gets its member's assignment. Members the leader
// gave nothing get an empty assignment.
func (g *group) completeSync(now time.Time, assignments []kmsg.SyncGroupRequestGroupAssignment) {
	for _, m := range g.members {
		m.assignment = nil
	}
	for _, a := range assignments {
		if m := g.members[a.MemberID]; m != nil {
			m.assignment = a.MemberAssignment
		}
	}
	g.state = stateStable
	g.awaitingSync = nil
	for _, m := range g.members {
		if len(m.assignment) == 0 {
			m.assignment = g.emptyAssignment()
		}
		if m.sync != nil {
			g.fillSync(m, m.sync.resp)
			m.sync.finish()
			m.sync = nil
			m.sessionDeadline = now.Add(m.sessionTimeout)
		}
	}
}

// emptyAssignment is the assignment of a member the leader assigned
// nothing: for the "consumer" protocol type an encoded empty
// ConsumerMemberAssignment, which clients can decode (some fail on zero
// bytes); for other protocol types nothing.
func (g *group) emptyAssignment() []byte {
	if g.protocolType != "consumer" {
		return nil
	}
	a := kmsg.NewConsumerMemberAssignment()
	return a.AppendTo(nil)
}

func (g *group) fillSync(m *member, resp *kmsg.SyncGroupResponse) {
	resp.ErrorCode = 0
	resp.ProtocolType = kmsg.StringPtr(g.protocolType)
	resp.Protocol = kmsg.StringPtr(g.protocol)
	resp.MemberAssignment = m.assignment
}

// removeMember removes m (LeaveGroup, session expiry) and rebalances the
// rest.
func (g *group) removeMember(now time.Time, m *member) {
	g.dropMember(m, kerr.UnknownMemberID.Code)
	switch g.state {
	case stateStable, stateCompletingRebalance:
		g.prepareRebalance(now)
	case statePreparingRebalance:
		g.maybeCompleteJoin(now)
	}
}

// dropMember removes m without rebalancing, answering its blocked requests
// with code.
func (g *group) dropMember(m *member, code int16) {
	if m.join != nil {
		m.join.resp.ErrorCode = code
		m.join.resp.MemberID = m.id
		m.join.finish()
		m.join = nil
	}
	if m.sync != nil {
		m.sync.resp.ErrorCode = code
		m.sync.finish()
		m.sync = nil
	}
	delete(g.members, m.id)
	delete(g.awaitingSync, m.id)
}

// expire applies the deadlines that passed by now: pending member ids and
// sessions expire, the join phase and the sync phase end.
func (g *group) expire(now time.Time) {
	for id, deadline := range g.pending {
		if !now.Before(deadline) {
			delete(g.pending, id)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(g.members)) {
		m := g.members[id]
		if m == nil || m.join != nil || m.sync != nil || now.Before(m.sessionDeadline) {
			continue
		}
		g.removeMember(now, m)
	}
	switch g.state {
	case statePreparingRebalance:
		if !now.Before(g.joinDeadline) {
			g.completeJoin(now)
		} else {
			g.maybeCompleteJoin(now)
		}
	case stateCompletingRebalance:
		if !now.Before(g.syncDeadline) {
			for _, id := range slices.Sorted(maps.Keys(g.awaitingSync)) {
				if m := g.members[id]; m != nil {
					g.dropMember(m, kerr.RebalanceInProgress.Code)
				}
			}
			g.prepareRebalance(now)
		}
	}
}

// nextDeadline returns the earliest deadline of the group, if any.
func (g *group) nextDeadline() (time.Time, bool) {
	var next time.Time
	consider := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	for _, d := range g.pending {
		consider(d)
	}
	for _, m := range g.members {
		if m.join == nil && m.sync == nil {
			consider(m.sessionDeadline)
		}
	}
	switch g.state {
	case statePreparingRebalance:
		consider(g.joinDeadline)
	case stateCompletingRebalance:
		consider(g.syncDeadline)
	}
	return next, !next.IsZero()
}

// unload answers every blocked request with code; the group is then
// forgotten (the coordinator moved or closed).
func (g *group) unload(code int16) {
	for _, m := range g.members {
		g.dropMember(m, code)
	}
	g.pending = map[string]time.Time{}
}

// subscribedTo reports whether a member of the group may consume topic:
// for the "consumer" protocol type, whether a member's subscription of the
// chosen protocol names it; for others (whose metadata this package cannot
// read), whenever the group has members.
func (g *group) subscribedTo(topic string) bool {
	if len(g.members) == 0 {
		return false
	}
	if g.protocolType != "consumer" {
		return true
	}
	for _, m := range g.members {
		protocol := g.protocol
		if protocol == "" && len(m.protocols) > 0 {
			protocol = m.protocols[0].Name
		}
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(m.metadataOf(protocol)); err != nil {
			return true
		}
		if slices.Contains(meta.Topics, topic) {
			return true
		}
	}
	return false
}

func (w *joinWait) finish() { close(w.done) }
func (w *syncWait) finish() { close(w.done) }
