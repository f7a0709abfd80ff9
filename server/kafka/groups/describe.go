package groups

import (
	"maps"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/minkdb/mink/catalog"
)

// FindCoordinator, DescribeGroups and ListGroups.

// Coordinator key types of FindCoordinator (v1+).
const (
	coordinatorKeyGroup       int8 = 0
	coordinatorKeyTransaction int8 = 1
)

func (c *Coordinator) findCoordinator(req *kmsg.FindCoordinatorRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	node, host, port, code, msg := c.locate(req.CoordinatorType)
	if req.Version < 4 {
		resp.ErrorCode, resp.NodeID, resp.Host, resp.Port = code, node, host, port
		if msg != "" {
			resp.ErrorMessage = kmsg.StringPtr(msg)
		}
		return resp
	}
	for _, key := range req.CoordinatorKeys {
		rc := kmsg.NewFindCoordinatorResponseCoordinator()
		rc.Key, rc.ErrorCode, rc.NodeID, rc.Host, rc.Port = key, code, node, host, port
		if msg != "" {
			rc.ErrorMessage = kmsg.StringPtr(msg)
		}
		resp.Coordinators = append(resp.Coordinators, rc)
	}
	return resp
}

// locate returns the group coordinator's node id, host and port, or an
// error code and message.
func (c *Coordinator) locate(keyType int8) (node int32, host string, port int32, code int16, msg string) {
	switch keyType {
	case coordinatorKeyGroup:
	case coordinatorKeyTransaction:
		return -1, "", -1, kerr.InvalidRequest.Code, "mink does not support Kafka transactions"
	default:
		return -1, "", -1, kerr.InvalidRequest.Code, "unknown coordinator key type " + strconv.Itoa(int(keyType))
	}
	id, addr, ok := c.cfg.Coordinator()
	if !ok {
		return -1, "", -1, kerr.CoordinatorNotAvailable.Code, "no node holds the coordinator lease"
	}
	h, p, err := net.SplitHostPort(addr)
	portNum, perr := strconv.ParseUint(p, 10, 16)
	if err != nil || perr != nil || h == "" {
		c.logger.Warn("the coordinator advertises no usable Kafka address", "node", id, "addr", addr)
		return -1, "", -1, kerr.CoordinatorNotAvailable.Code, "node " + strconv.Itoa(int(id)) + " advertises no Kafka address"
	}
	return int32(id), h, int32(portNum), 0, ""
}

// authorizedGroupOperations is what DescribeGroups reports when asked for
// the authorized operations: mink has no ACLs, so all of a group's (READ,
// DELETE, DESCRIBE, as bits of Kafka's ACL operation codes).
const authorizedGroupOperations = 1<<3 | 1<<6 | 1<<8

func (c *Coordinator) describeGroups(req *kmsg.DescribeGroupsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	c.mu.Lock()
	defer c.mu.Unlock()
	_, code := c.ownLocked()
	for _, name := range req.Groups {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group = name
		rg.AuthorizedOperations = math.MinInt32
		if req.IncludeAuthorizedOperations {
			rg.AuthorizedOperations = authorizedGroupOperations
		}
		if code != 0 {
			rg.ErrorCode = code
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		g := c.mu.groups[name]
		switch {
		case g != nil:
			rg.State = g.state.String()
			rg.ProtocolType = g.protocolType
			if g.state == stateStable {
				rg.Protocol = g.protocol
			}
			for _, id := range slices.Sorted(maps.Keys(g.members)) {
				m := g.members[id]
				rm := kmsg.NewDescribeGroupsResponseGroupMember()
				rm.MemberID, rm.InstanceID, rm.ClientID, rm.ClientHost = m.id, m.instanceID, m.clientID, m.clientHost
				if g.state == stateStable {
					rm.ProtocolMetadata = m.metadataOf(g.protocol)
					rm.MemberAssignment = m.assignment
				}
				rg.Members = append(rg.Members, rm)
			}
		case c.hasOffsets(name):
			// Known from its committed offsets only (no member since this
			// node became the coordinator).
			rg.State = stateEmpty.String()
		case req.Version >= 6:
			rg.ErrorCode = kerr.GroupIDNotFound.Code
			rg.ErrorMessage = kmsg.StringPtr("group " + name + " is not known")
			rg.State = "Dead"
		default:
			rg.State = "Dead"
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

// hasOffsets reports whether the metadata view holds offsets of group.
func (c *Coordinator) hasOffsets(group string) bool {
	var ok bool
	c.cfg.Meta.Read(func(v *catalog.View) { ok = v.Groups[group] != nil })
	return ok
}

// listGroups lists the groups this node coordinates: those with members
// and those with committed offsets. A node that does not coordinate lists
// none, without an error, as a Kafka broker that coordinates no group does
// (admin clients ask every broker and merge the lists).
func (c *Coordinator) listGroups(req *kmsg.ListGroupsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	c.mu.Lock()
	defer c.mu.Unlock()
	_, code := c.ownLocked()
	switch code {
	case 0:
	case kerr.NotCoordinator.Code:
		return resp
	default:
		resp.ErrorCode = code
		return resp
	}
	type listed struct{ state, protocolType string }
	groups := map[string]listed{}
	c.cfg.Meta.Read(func(v *catalog.View) {
		for name := range v.Groups {
			groups[name] = listed{state: stateEmpty.String()}
		}
	})
	for name, g := range c.mu.groups {
		groups[name] = listed{state: g.state.String(), protocolType: g.protocolType}
	}
	matches := func(filter []string, value string) bool {
		return len(filter) == 0 || slices.ContainsFunc(filter, func(f string) bool { return strings.EqualFold(f, value) })
	}
	for _, name := range slices.Sorted(maps.Keys(groups)) {
		l := groups[name]
		if !matches(req.StatesFilter, l.state) || !matches(req.TypesFilter, "classic") {
			continue
		}
		rg := kmsg.NewListGroupsResponseGroup()
		rg.Group, rg.ProtocolType, rg.GroupState, rg.GroupType = name, l.protocolType, l.state, "classic"
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}
