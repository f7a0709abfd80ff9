package groups

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The membership requests: JoinGroup, SyncGroup, Heartbeat, LeaveGroup.
// Static membership (group.instance.id, KIP-345) is not supported: a member
// with an instance id is a dynamic member that carries it along (it shows
// in DescribeGroups, and LeaveGroup may name it).

func (c *Coordinator) joinGroup(ctx context.Context, req *kmsg.JoinGroupRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	wait := c.startJoin(clientOf(ctx), req, resp)
	if wait == nil {
		return resp, nil
	}
	select {
	case <-wait.done:
		return wait.resp, nil
	case <-ctx.Done():
		// The member stays in the join phase; its client will rejoin.
		return nil, ctx.Err()
	}
}

// startJoin answers req in resp, or returns the wait for the end of the
// join phase.
func (c *Coordinator) startJoin(client clientInfo, req *kmsg.JoinGroupRequest, resp *kmsg.JoinGroupResponse) *joinWait {
	resp.Generation = -1
	resp.MemberID = req.MemberID
	fail := func(code int16) *joinWait {
		resp.ErrorCode = code
		return nil
	}
	rebalanceTimeout := time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	if req.Version == 0 {
		// v0 has no rebalance timeout: the session timeout is both.
		rebalanceTimeout = time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	}
	sessionTimeout := time.Duration(req.SessionTimeoutMillis) * time.Millisecond

	c.mu.Lock()
	defer c.mu.Unlock()
	_, code := c.ownLocked()
	switch {
	case code != 0:
		return fail(code)
	case req.Group == "":
		return fail(kerr.InvalidGroupID.Code)
	case sessionTimeout < minSessionTimeout || sessionTimeout > maxSessionTimeout:
		return fail(kerr.InvalidSessionTimeout.Code)
	}
	now := c.now()
	g := c.mu.groups[req.Group]
	if g == nil {
		if req.MemberID != "" {
			// A member of a group this coordinator does not know (it moved
			// here, or the group expired): join anew.
			return fail(kerr.UnknownMemberID.Code)
		}
		g = newGroup(req.Group)
	}
	if !g.acceptsProtocols(req.MemberID, req.ProtocolType, req.Protocols) {
		return fail(kerr.InconsistentGroupProtocol.Code)
	}
	c.mu.groups[req.Group] = g
	defer c.wake()

	protocols := slices.Clone(req.Protocols)
	m, pending := g.members[req.MemberID], g.pending[req.MemberID]
	switch {
	case req.MemberID == "" && req.Version >= 4:
		// KIP-394: the member must come back with this id, so that a
		// client that retries a lost response does not join twice.
		id := c.mu.newMemberID(client.id)
		g.pending[id] = now.Add(sessionTimeout)
		resp.MemberID = id
		return fail(kerr.MemberIDRequired.Code)
	case req.MemberID == "" || !pending.IsZero():
		id := req.MemberID
		if id == "" {
			id = c.mu.newMemberID(client.id)
		}
		m = &member{id: id, instanceID: req.InstanceID, clientID: client.id, clientHost: client.host,
			sessionTimeout: sessionTimeout, rebalanceTimeout: rebalanceTimeout, protocols: protocols}
		wait := newJoinWait(resp)
		c.logger.Debug("member joins group", "group", g.name, "member", id, "generation", g.generation)
		g.addMember(now, m, req.ProtocolType, wait)
		return wait
	case m == nil:
		return fail(kerr.UnknownMemberID.Code)
	}
	m.sessionTimeout, m.rebalanceTimeout = sessionTimeout, rebalanceTimeout
	if len(g.members) == 1 {
		g.protocolType = req.ProtocolType
	}
	if g.state == stateCompletingRebalance && m.sameProtocols(protocols) ||
		g.state == stateStable && m.id != g.leader && m.sameProtocols(protocols) {
		// Nothing changed: the member gets the generation it is in (its
		// JoinGroup response was lost).
		g.fillJoin(m, resp)
		m.sessionDeadline = now.Add(m.sessionTimeout)
		return nil
	}
	wait := newJoinWait(resp)
	g.rejoin(now, m, protocols, wait)
	return wait
}

// newMemberID returns a member id as Kafka makes them: the client id, a
// dash and a random suffix.
func newMemberID(clientID string) string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand: " + err.Error())
	}
	return clientID + "-" + hex.EncodeToString(b[:])
}

func (c *Coordinator) syncGroup(ctx context.Context, req *kmsg.SyncGroupRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	wait := c.startSync(req, resp)
	if wait == nil {
		return resp, nil
	}
	select {
	case <-wait.done:
		return wait.resp, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// startSync answers req in resp, or returns the wait for the leader's
// assignment.
func (c *Coordinator) startSync(req *kmsg.SyncGroupRequest, resp *kmsg.SyncGroupResponse) *syncWait {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, code := c.ownLocked(); code != 0 {
		resp.ErrorCode = code
		return nil
	}
	g := c.mu.groups[req.Group]
	var m *member
	if g != nil {
		m = g.members[req.MemberID]
	}
	switch {
	case m == nil:
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return nil
	case req.Generation != g.generation:
		resp.ErrorCode = kerr.IllegalGeneration.Code
		return nil
	case req.ProtocolType != nil && *req.ProtocolType != g.protocolType,
		req.Protocol != nil && *req.Protocol != g.protocol:
		resp.ErrorCode = kerr.InconsistentGroupProtocol.Code
		return nil
	}
	now := c.now()
	switch g.state {
	case statePreparingRebalance:
		resp.ErrorCode = kerr.RebalanceInProgress.Code
		return nil
	case stateStable:
		// A SyncGroup again (the first response was lost).
		g.fillSync(m, resp)
		m.sessionDeadline = now.Add(m.sessionTimeout)
		return nil
	}
	if m.sync != nil {
		m.sync.resp.ErrorCode = kerr.RebalanceInProgress.Code
		m.sync.finish()
	}
	wait := newSyncWait(resp)
	m.sync = wait
	delete(g.awaitingSync, m.id)
	if m.id == g.leader {
		c.logger.Debug("group is stable", "group", g.name, "generation", g.generation, "protocol", g.protocol, "members", len(g.members))
		g.completeSync(now, req.GroupAssignment)
	}
	c.wake()
	return wait
}

func (c *Coordinator) heartbeat(req *kmsg.HeartbeatRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	resp.ErrorCode = c.heartbeatCode(req)
	return resp
}

func (c *Coordinator) heartbeatCode(req *kmsg.HeartbeatRequest) int16 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, code := c.ownLocked(); code != 0 {
		return code
	}
	g := c.mu.groups[req.Group]
	if g == nil {
		return kerr.UnknownMemberID.Code
	}
	m := g.members[req.MemberID]
	switch {
	case m == nil:
		return kerr.UnknownMemberID.Code
	case req.Generation != g.generation:
		return kerr.IllegalGeneration.Code
	}
	m.sessionDeadline = c.now().Add(m.sessionTimeout)
	if g.state == statePreparingRebalance {
		return kerr.RebalanceInProgress.Code
	}
	return 0
}

func (c *Coordinator) leaveGroup(req *kmsg.LeaveGroupRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	leaving := req.Members
	if req.Version < 3 {
		leaving = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.wake()
	_, code := c.ownLocked()
	g := c.mu.groups[req.Group]
	now := c.now()
	for _, l := range leaving {
		r := kmsg.NewLeaveGroupResponseMember()
		r.MemberID, r.InstanceID = l.MemberID, l.InstanceID
		switch {
		case code != 0:
			r.ErrorCode = code
		case g == nil:
			r.ErrorCode = kerr.UnknownMemberID.Code
		default:
			r.ErrorCode = g.leave(now, l.MemberID, l.InstanceID)
		}
		if r.ErrorCode == 0 {
			c.logger.Debug("member leaves group", "group", req.Group, "member", l.MemberID)
		}
		resp.Members = append(resp.Members, r)
	}
	if g != nil && g.removable() {
		delete(c.mu.groups, req.Group)
	}
	if req.Version < 3 {
		resp.ErrorCode, resp.Members = resp.Members[0].ErrorCode, nil
	} else if code != 0 {
		resp.ErrorCode = code
	}
	return resp
}

// leave removes the member named by id, or with an empty id the members
// with instance id instanceID, and rebalances.
func (g *group) leave(now time.Time, id string, instanceID *string) int16 {
	if id == "" && instanceID != nil {
		var found bool
		for _, m := range g.members {
			if m.instanceID != nil && *m.instanceID == *instanceID {
				g.removeMember(now, m)
				found = true
			}
		}
		if !found {
			return kerr.UnknownMemberID.Code
		}
		return 0
	}
	if _, ok := g.pending[id]; ok {
		delete(g.pending, id)
		g.maybeCompleteJoin(now)
		return 0
	}
	m := g.members[id]
	if m == nil {
		return kerr.UnknownMemberID.Code
	}
	g.removeMember(now, m)
	return 0
}
