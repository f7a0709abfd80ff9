package groups

import (
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var seedFlag = flag.Uint64("groups.seed", 0, "seed of the randomised group test (0: pick one)")

// simClient is a simulated consumer of TestGroupRandomized: what it knows
// of its membership, and its requests in flight.
type simClient struct {
	name       string
	memberID   string
	generation int32
	leader     bool
	protocols  []string
	join       *joinWait
	sync       *syncWait
	syncGen    int32
}

// TestGroupRandomized drives one group with random joins, syncs,
// heartbeats, leaves and clock jumps from a few simulated clients, some of
// them careless (stale generations, forgotten member ids), and checks the
// group's invariants after every step, and that every generation has one
// leader and hands each member the assignment the leader gave it.
func TestGroupRandomized(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -groups.seed=%d)", seed, seed)
	stats := map[string]int{}
	defer func() { t.Logf("outcomes: %v", stats) }()
	for run := range 20 {
		rng := rand.New(rand.NewPCG(seed, uint64(run)))
		n := newCluster(t)
		ids := 0
		n.coord.mu.Lock()
		n.coord.mu.newMemberID = func(clientID string) string {
			ids++
			return fmt.Sprintf("%s-%03d", clientID, rng.IntN(1000)) + fmt.Sprint("-", ids)
		}
		n.coord.mu.Unlock()
		leaders := map[int32]string{}             // generation → leader
		assigned := map[int32]map[string]string{} // generation → member → assignment
		protocolOf := map[int32]string{}          // generation → protocol
		pool := [][]string{{"range"}, {"range", "sticky"}, {"sticky", "range"}, {"roundrobin"}}
		var clients []*simClient
		for i := range 4 {
			clients = append(clients, &simClient{name: fmt.Sprint("c", i), protocols: pool[rng.IntN(len(pool))]})
		}
		collect := func(c *simClient) {
			if c.join != nil {
				select {
				case <-c.join.done:
					r := c.join.resp
					if r.ErrorCode == 0 {
						if l, ok := leaders[r.Generation]; ok && l != r.LeaderID {
							t.Fatalf("seed %d run %d: generation %d led by %s and %s", seed, run, r.Generation, l, r.LeaderID)
						}
						if p, ok := protocolOf[r.Generation]; ok && p != *r.Protocol {
							t.Fatalf("seed %d run %d: generation %d has protocols %s and %s", seed, run, r.Generation, p, *r.Protocol)
						}
						if !slices.Contains(c.protocols, *r.Protocol) {
							t.Fatalf("seed %d run %d: %s got protocol %s, supports %v", seed, run, c.name, *r.Protocol, c.protocols)
						}
						leaders[r.Generation], protocolOf[r.Generation] = r.LeaderID, *r.Protocol
						stats["join"]++
						c.memberID, c.generation, c.leader = r.MemberID, r.Generation, r.LeaderID == r.MemberID
					} else if r.ErrorCode == kerr.UnknownMemberID.Code {
						c.memberID = ""
					}
					c.join = nil
				default:
				}
			}
			if c.sync != nil {
				select {
				case <-c.sync.done:
					r := c.sync.resp
					stats[fmt.Sprintf("sync %s", codeName(r.ErrorCode))]++
					if r.ErrorCode == 0 {
						if want, ok := assigned[c.syncGen][c.memberID]; ok && want != string(r.MemberAssignment) {
							t.Fatalf("seed %d run %d: %s at generation %d got %q, the leader assigned %q",
								seed, run, c.name, c.syncGen, r.MemberAssignment, want)
						}
					}
					c.sync = nil
				default:
				}
			}
		}
		for step := range 400 {
			c := clients[rng.IntN(len(clients))]
			collect(c)
			gen := c.generation
			if rng.IntN(10) == 0 {
				gen += int32(rng.IntN(3)) - 1 // careless
			}
			switch op := rng.IntN(10); {
			case op < 3 && c.join == nil:
				version := int16(7)
				if rng.IntN(4) == 0 {
					version = 3
				}
				req := joinReq("g", c.memberID, version, c.protocols...)
				if rng.IntN(20) == 0 {
					c.protocols = pool[rng.IntN(len(pool))]
					req = joinReq("g", c.memberID, version, c.protocols...)
				}
				resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
				c.join = n.coord.startJoin(clientInfo{id: c.name}, req, resp)
				if c.join == nil {
					if resp.ErrorCode == kerr.MemberIDRequired.Code {
						c.memberID = resp.MemberID
					} else if resp.ErrorCode == 0 {
						c.join = &joinWait{resp: resp, done: closedChan()}
					}
				}
			case op < 5 && c.sync == nil && c.memberID != "":
				assignments := map[string]string{}
				if c.leader {
					n.coord.mu.Lock()
					if g := n.coord.mu.groups["g"]; g != nil {
						for id := range g.members {
							if rng.IntN(5) != 0 {
								assignments[id] = fmt.Sprintf("%s@%d", id, gen)
							}
						}
					}
					n.coord.mu.Unlock()
				}
				req := syncReq("g", c.memberID, gen, assignments)
				resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
				n.coord.mu.Lock()
				completing := n.coord.mu.groups["g"] != nil && n.coord.mu.groups["g"].state == stateCompletingRebalance &&
					n.coord.mu.groups["g"].leader == c.memberID && n.coord.mu.groups["g"].generation == gen
				n.coord.mu.Unlock()
				if completing {
					assigned[gen] = assignments
				}
				c.syncGen = gen
				c.sync = n.coord.startSync(req, resp)
				if c.sync == nil && resp.ErrorCode == 0 {
					c.sync = &syncWait{resp: resp, done: closedChan()}
				}
			case op < 8 && c.memberID != "":
				code := n.coord.heartbeatCode(heartbeatReq("g", c.memberID, gen))
				stats[fmt.Sprintf("heartbeat %s", codeName(code))]++
				if code == kerr.UnknownMemberID.Code {
					c.memberID = ""
				}
			case op < 9 && c.memberID != "" && rng.IntN(3) == 0:
				leave := kmsg.NewPtrLeaveGroupRequest()
				leave.Group, leave.MemberID = "g", c.memberID
				n.coord.leaveGroup(leave)
				c.memberID = ""
			default:
				// Mostly less than a session; now and then past the
				// session and rebalance timeouts.
				d := time.Duration(rng.IntN(3000)) * time.Millisecond
				if rng.IntN(10) == 0 {
					d = time.Duration(rng.IntN(35000)) * time.Millisecond
				}
				n.advance(d)
			}
			for _, c := range clients {
				collect(c)
			}
			n.coord.mu.Lock()
			err := checkGroups(n.coord)
			if n.coord.mu.groups["g"] == nil {
				// The group emptied and was forgotten: its next incarnation
				// counts generations from 1 again (stale members of the
				// old one are unknown to it).
				clear(leaders)
				clear(assigned)
				clear(protocolOf)
			}
			n.coord.mu.Unlock()
			if err != nil {
				t.Fatalf("seed %d run %d step %d: %v", seed, run, step, err)
			}
		}
	}
}

func closedChan() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}

// checkGroups returns the first broken invariant of c's groups.
// REQUIRES: c.mu held.
func checkGroups(c *Coordinator) error {
	for name, g := range c.mu.groups {
		if g.name != name || g.generation < 0 {
			return fmt.Errorf("group %q: name %q generation %d", name, g.name, g.generation)
		}
		if g.state == stateEmpty && len(g.members) > 0 {
			return fmt.Errorf("group %q: Empty with %d members", name, len(g.members))
		}
		if len(g.members) == 0 && g.state != stateEmpty && !(g.state == statePreparingRebalance && len(g.pending) > 0) {
			return fmt.Errorf("group %q: %v without members or pending ids", name, g.state)
		}
		if (g.awaitingSync != nil) != (g.state == stateCompletingRebalance) {
			return fmt.Errorf("group %q: %v, awaiting sync %v", name, g.state, g.awaitingSync)
		}
		for id := range g.awaitingSync {
			if g.members[id] == nil {
				return fmt.Errorf("group %q: %s awaits sync but is no member", name, id)
			}
		}
		if g.state == stateCompletingRebalance && !g.awaitingSync[g.leader] {
			return fmt.Errorf("group %q: completing, but the leader %s has synced", name, g.leader)
		}
		if g.state == stateCompletingRebalance || g.state == stateStable {
			if g.members[g.leader] == nil || g.protocol == "" {
				return fmt.Errorf("group %q: %v with leader %q protocol %q", name, g.state, g.leader, g.protocol)
			}
			for _, m := range g.members {
				if m.metadataOf(g.protocol) == nil {
					return fmt.Errorf("group %q: member %s does not support the protocol %s", name, m.id, g.protocol)
				}
			}
		}
		for _, id := range slices.Sorted(maps.Keys(g.members)) {
			m := g.members[id]
			switch {
			case m.id != id:
				return fmt.Errorf("group %q: member %s filed as %s", name, m.id, id)
			case m.join != nil && g.state != statePreparingRebalance:
				return fmt.Errorf("group %q: %s blocked in join while %v", name, id, g.state)
			case m.sync != nil && g.state != stateCompletingRebalance:
				return fmt.Errorf("group %q: %s blocked in sync while %v", name, id, g.state)
			case g.state == stateStable && len(m.assignment) == 0:
				return fmt.Errorf("group %q: %s has no assignment in Stable", name, id)
			}
		}
		if len(g.members) > 0 {
			var common bool
			for _, p := range slices.Collect(maps.Values(g.members))[0].protocols {
				common = common || g.supportedByAll(p.Name, "")
			}
			if !common {
				return fmt.Errorf("group %q: no protocol every member supports", name)
			}
		}
		if g.removable() {
			return fmt.Errorf("group %q: removable but kept", name)
		}
	}
	return nil
}
