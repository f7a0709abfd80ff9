package main

// Partitions that cut a node off from part of the world while it keeps
// running (issue 19): the node runs in a network namespace (netns_e2e_test.go)
// and the test takes one of its links down.

import (
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The zombie leader: a bucket leader loses etcd but keeps its clients, its
// peers and the object store. It must stop acknowledging writes and
// answering reads of its buckets once its liveness lease can no longer have
// been renewed — before another node can take over, which the lease TTL
// bounds — and never give a stale read. After the takeover its clients get
// errors; when the link comes back it registers again with a new epoch, and
// the history of every write and read (porcupine-checked) holds, with every
// acknowledged row present once.
func TestZombieLeaderCutFromEtcd(t *testing.T) {
	ns := newNetns(t)
	c := newTestCluster(t, clusterOpts{})
	victim := c.nodes[2]
	for _, n := range c.nodes[:2] {
		n.moveToHost(ns.svcHost)
	}
	victim.putInNetns(ns, c.endpoints)
	// Node 1 starts first and holds the coordinator lease, so that the cut
	// node is a bucket leader only (the coordinator's own cut is the
	// election's business, tested in metalog/etcdlog).
	c.nodes[0].start()
	c.nodes[0].waitHealthy()
	waitFor(t, 30*time.Second, "node 1 is the coordinator", func() bool {
		st, ok := c.status()
		return ok && st.Coordinator.Node == 1
	})
	for _, n := range c.nodes[1:] {
		n.start()
	}
	for _, n := range c.nodes[1:] {
		n.waitHealthy()
	}
	c.waitLive(3)
	const buckets = 6
	createTable(t, c.nodes[0], "z", buckets)
	bs := c.waitServed(c.nodes[0], "z", 60*time.Second)
	victimBuckets := map[int]bool{}
	for _, b := range bs {
		if b.Leader == 3 {
			victimBuckets[b.Index] = true
		}
	}
	if len(victimBuckets) == 0 {
		t.Fatalf("node 3 leads no bucket of z: %+v", bs)
	}
	st, _ := c.status()
	before, _ := findNode(st, 3)

	// Before the cut, writes and reads go through all three nodes; after
	// it, the writers use nodes 1 and 2 (a write through node 3 would
	// soon find its WAL sealed and fence it, hiding the window in which
	// only its lease can stop it). Through node 3 go a fast reader and,
	// from the moment its lease can no longer hold, a probe writer.
	h := newHistory()
	var cut atomic.Bool
	w := &workload{h: h, table: "z", writers: 4, readEvery: 100 * time.Millisecond, seed: 19, timeout: 5 * time.Second,
		target: func(r *rand.Rand) *node {
			if cut.Load() {
				return c.nodes[r.IntN(2)]
			}
			return c.nodes[r.IntN(3)]
		}}
	w.run(c)
	waitFor(t, 60*time.Second, "writes acknowledged through node 3", func() bool {
		for _, o := range h.snapshot() {
			if !o.read && o.node == 3 && o.status == opOK && victimBuckets[bucketOf(o.id, buckets)] {
				return true
			}
		}
		return false
	})

	// The lease is renewed every third of lease_ttl (2 s here), so it
	// cannot hold past cut + ttl; a write node 3 acknowledges for a bucket
	// it led ends no later than that, give or take how long a write takes.
	const leaseTTL, slack = 2 * time.Second, 300 * time.Millisecond
	onlyVictim := func(*rand.Rand) *node { return victim }
	reader := &workload{h: h, table: "z", readEvery: 20 * time.Millisecond, seed: 20, firstClient: 10, target: onlyVictim}
	probe := &workload{h: h, table: "z", writers: 1, seed: 21, firstClient: 20, timeout: time.Second, target: onlyVictim,
		keep: func(id int64) bool { return victimBuckets[bucketOf(id, buckets)] }}
	cut.Store(true)
	ns.cut(ns.etcdLink)
	cutAt := h.now()
	t.Logf("node 3 cut from etcd at %v", cutAt)
	reader.run(c)
	time.AfterFunc(leaseTTL+slack, func() { probe.run(c) })
	waitFor(t, 60*time.Second, "node 3's buckets led by live nodes and open", func() bool {
		bs, err := c.buckets(c.nodes[0], "z")
		if err != nil {
			return false
		}
		for _, b := range bs {
			if b.Leader == 3 || !b.Open {
				return false
			}
		}
		return true
	})
	movedAt := h.now()
	t.Logf("its buckets moved %v after the cut", movedAt-cutAt)
	// The new leaders serve for a while, node 3 still cut.
	time.Sleep(2 * time.Second)

	ns.heal(ns.etcdLink)
	healedAt := h.now()
	waitFor(t, 60*time.Second, "node 3 live again with a new epoch", func() bool {
		st, ok := c.status()
		n3, _ := findNode(st, 3)
		return ok && n3.Live && n3.Epoch > before.Epoch
	})
	t.Logf("node 3 live again %v after the link came back", h.now()-healedAt)
	probe.halt()
	reader.halt()
	w.haltAfter(t, 200)

	var late []string
	lastAck := time.Duration(0)
	for _, o := range h.snapshot() {
		if o.read || o.node != 3 || o.status != opOK || !victimBuckets[bucketOf(o.id, buckets)] {
			continue
		}
		// Acknowledged after node 3 is back: forwarded to the new leaders.
		if o.ret > cutAt+leaseTTL+slack && o.ret < healedAt {
			late = append(late, o.String())
		}
		if o.call < cutAt+leaseTTL+slack && o.ret > lastAck {
			lastAck = o.ret
		}
	}
	t.Logf("node 3's last acknowledgement for its own buckets %v after the cut", lastAck-cutAt)
	if len(late) > 0 {
		t.Fatalf("node 3 acknowledged %d writes to its buckets after its lease could no longer hold (cut at %v, moved at %v):\n%s",
			len(late), cutAt, movedAt, strings.Join(late, "\n"))
	}
	// Reads through node 3 between its lease's end and its return fail
	// or (forwarded to the new leaders) see everything; the checker below
	// holds each one to every write acknowledged before it was sent.
	readsCut := 0
	for _, o := range h.snapshot() {
		if o.read && o.node == 3 && o.call > cutAt && o.call < healedAt {
			readsCut++
		}
	}
	t.Logf("reads through node 3 answered while it was cut: %d", readsCut)
	acked, fail, info, reads := h.counts()
	t.Logf("inserts: %d acknowledged, %d failed, %d unknown; %d reads", acked, fail, info, reads)
	checkHistory(t, h, buckets)

	// Every node, node 3 included, reads every acknowledged row once.
	readCS := conns{}
	defer readCS.closeAll()
	for _, n := range c.nodes {
		ids, err := sqlRead(c, h, readCS, n, "z", 100, 30*time.Second)
		if err != nil {
			t.Fatalf("final read through node %d: %v", nodeIndex(c, n), err)
		}
		seen := map[int64]int{}
		for _, id := range ids {
			seen[id]++
		}
		for _, o := range h.snapshot() {
			if !o.read && o.status == opOK && seen[o.id] != 1 {
				t.Fatalf("node %d reads acknowledged id %d %d times", nodeIndex(c, n), o.id, seen[o.id])
			}
		}
	}
	sent, refused := 0, 0
	for _, o := range h.snapshot() {
		if !o.read && o.client == 20 && o.call < healedAt && victimBuckets[bucketOf(o.id, buckets)] {
			sent++
			if o.status != opOK {
				refused++
			}
		}
	}
	t.Logf("probe writes to node 3's buckets through node 3 while it was cut: %d, not acknowledged %d", sent, refused)
	if sent == 0 {
		t.Fatal("the probe sent no write to node 3's buckets while it was cut: the case was not exercised")
	}
	if !strings.Contains(victim.log(), "registering again with a new epoch") {
		t.Fatalf("node 3 did not say it registers again:\n%s", lastLines(victim.log(), 40))
	}
	for _, n := range c.nodes {
		n.stop()
	}
}
