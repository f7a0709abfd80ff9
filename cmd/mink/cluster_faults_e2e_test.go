package main

// Cluster fault tests (spec: ownership-and-failover.txt) with three mink
// server processes, lease_ttl 2 s and a 0.5 s coordinator tick. Every test
// records its writes and reads in a history and checks it
// (cluster_history_e2e_test.go).

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/minkdb/mink/server"
)

// createTable creates a log table keyed on id through node n.
func createTable(t *testing.T, n *node, table string, buckets int) {
	t.Helper()
	ctx := context.Background()
	conn, err := n.pg(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, fmt.Sprintf("CREATE TABLE %s (id bigint NOT NULL) WITH (buckets = %d, bucket_key = 'id')", table, buckets)); err != nil {
		t.Fatal(err)
	}
}

func ledBy(bs []server.BucketStatus, leader uint32) int {
	n := 0
	for _, b := range bs {
		if uint32(b.Leader) == leader {
			n++
		}
	}
	return n
}

// SIGSTOP a bucket leader past lease_ttl under writes, let its buckets move,
// then SIGCONT it (spec, "Failover": "If the dead node comes back…"). The
// old leader acknowledges nothing its old epoch wrote (writes sent to it
// after it resumes either fail or land in the new leaders' streams), serves
// no stale read, registers again with a fresh node epoch and opens none of
// the buckets that now belong to others; the cluster converges and every
// acknowledged row is there exactly once.
func TestPauseLeaderPastLease(t *testing.T) {
	c := newTestCluster(t, clusterOpts{})
	c.startAll()
	createTable(t, c.nodes[0], "p", 6)
	bs := c.waitServed(c.nodes[0], "p", 60*time.Second)
	victim := c.nodes[2]
	if ledBy(bs, 3) == 0 {
		t.Fatalf("node 3 leads no bucket of p: %+v", bs)
	}
	st, ok := c.status()
	before, found := findNode(st, 3)
	if !ok || !found || before.Epoch == 0 {
		t.Fatalf("node 3 before the pause: %+v", st)
	}

	h := newHistory()
	// Writers and a reader go to every node, the paused one included: its
	// requests hang while it is stopped and are answered after it resumes.
	w := &workload{h: h, table: "p", writers: 4, readEvery: 300 * time.Millisecond, seed: 1}
	w.run(c)
	time.Sleep(1500 * time.Millisecond)

	c.pause(victim)
	paused := time.Now()
	c.waitMovedOff("p", 3)
	t.Logf("buckets moved %v after SIGSTOP", time.Since(paused).Round(10*time.Millisecond))
	// Writes acknowledged by the new leaders while node 3 is stopped.
	time.Sleep(time.Second)

	// On resume, read through node 3 at once: it must not answer from its
	// stale state (rows acknowledged by the new leaders are missing there).
	c.resume(victim)
	resumed, resumedAt := time.Now(), h.now()
	readCS := conns{}
	defer readCS.closeAll()
	// Reads are retried until one succeeds: a read that fails checks
	// nothing, one that succeeds must see every row acknowledged before it.
	staleChecks := 0
	for time.Since(resumed) < 20*time.Second && staleChecks < 3 {
		if _, err := sqlRead(c, h, readCS, victim, "p", 100, 20*time.Second); err == nil {
			if staleChecks == 0 {
				t.Logf("first read through node 3 answered %v after SIGCONT", time.Since(resumed).Round(time.Millisecond))
			}
			staleChecks++
		}
	}
	if staleChecks == 0 {
		t.Fatal("no read through node 3 succeeded within 20s of SIGCONT")
	}
	waitFor(t, 60*time.Second, "node 3 live again with a new epoch", func() bool {
		st, ok := c.status()
		n3, _ := findNode(st, 3)
		return ok && n3.Live && n3.Epoch > before.Epoch
	})
	t.Logf("node 3 live again %v after SIGCONT", time.Since(resumed).Round(10*time.Millisecond))
	// Writes keep going through all three nodes for a while.
	time.Sleep(2 * time.Second)
	w.haltAfter(t, 100)

	bs = c.waitServed(c.nodes[0], "p", 60*time.Second)
	st, _ = c.status()
	n3, _ := findNode(st, 3)
	if n3.Epoch <= before.Epoch {
		t.Fatalf("node 3 epoch %d after resuming, was %d: want a fresh epoch", n3.Epoch, before.Epoch)
	}
	// Nothing moves back by itself: the buckets belong to others now.
	if got := ledBy(bs, 3); got != 0 || n3.BucketsLed != 0 {
		t.Fatalf("node 3 leads %d buckets after resuming (status says %d); want none: %+v", got, n3.BucketsLed, bs)
	}
	if !strings.Contains(victim.log(), "registering again with a new epoch") {
		t.Fatalf("node 3 did not say it registers again:\n%s", victim.log())
	}
	// Final reads through every node and through Flight.
	for _, n := range c.nodes {
		if _, err := sqlRead(c, h, readCS, n, "p", 100, 30*time.Second); err != nil {
			t.Fatalf("final read through node %d: %v", nodeIndex(c, n), err)
		}
	}
	if _, err := flightScan(c, h, "p", 101); err != nil {
		t.Fatalf("final Flight scan: %v", err)
	}
	acked, fail, info, reads := h.counts()
	t.Logf("inserts: %d acknowledged, %d failed, %d unknown; %d reads", acked, fail, info, reads)
	if acked < 100 {
		t.Fatalf("only %d inserts acknowledged: the workload did not run", acked)
	}
	// Writes sent to node 3 after it resumed (they were forwarded to the new
	// leaders, or failed): the checker holds every acknowledged one to be
	// present once.
	sentAfter, ackedAfter := 0, 0
	for _, o := range h.snapshot() {
		if !o.read && o.node == 3 && o.call > resumedAt {
			sentAfter++
			if o.status == opOK {
				ackedAfter++
			}
		}
	}
	t.Logf("writes sent to node 3 after SIGCONT: %d, acknowledged %d", sentAfter, ackedAfter)
	if ackedAfter == 0 {
		t.Fatal("no write sent to node 3 after it resumed was acknowledged: the case was not exercised")
	}
	checkHistory(t, h, 6)
	for _, n := range c.nodes {
		n.stop()
	}
}

// A bucket moves A → B → A through `mink cluster rebalance`, with writes
// before, during and after each move, on a versitygw object store (spec,
// "Opening a bucket": opening at the new leader epoch is the fence). The
// classic bug this guards against: the bucket comes back to A, A reuses
// offsets from its old epoch, and rows acknowledged by B are overwritten.
// Checked: each move raises the leader epoch, the committed end never goes
// back, at rest it equals the rows of the bucket (dense offsets, none
// reused), and the history of writes and reads checks out.
func TestBucketMovesBackAndForth(t *testing.T) {
	c := newTestCluster(t, clusterOpts{s3: true})
	// Node 1 alone creates the table, so it leads all three buckets.
	c.nodes[0].start()
	c.nodes[0].waitHealthy()
	c.waitLive(1)
	createTable(t, c.nodes[0], "m", 3)
	c.waitServed(c.nodes[0], "m", 60*time.Second)
	c.nodes[1].start()
	c.nodes[2].start()
	c.nodes[1].waitHealthy()
	c.nodes[2].waitHealthy()
	c.waitLive(3)

	h := newHistory()
	w := &workload{h: h, table: "m", writers: 3, readEvery: 500 * time.Millisecond, seed: 2}
	w.run(c)
	defer func() {
		select {
		case <-w.stop:
		default:
			w.halt()
		}
	}()
	leaders := map[int][]uint32{} // bucket index → leaders seen, in order
	epochs := map[int]uint64{}    // bucket index → last leader epoch
	ends := map[int]uint64{}      // bucket index → last committed end
	observe := func(what string) []server.BucketStatus {
		t.Helper()
		bs := c.waitServed(c.nodes[1], "m", 60*time.Second)
		for _, b := range bs {
			i := b.Index
			if l := leaders[i]; len(l) == 0 || l[len(l)-1] != uint32(b.Leader) {
				leaders[i] = append(leaders[i], uint32(b.Leader))
				if b.LeaderEpoch <= epochs[i] {
					t.Fatalf("%s: bucket %d moved to node %d at leader epoch %d, not above %d", what, b.Bucket, b.Leader, b.LeaderEpoch, epochs[i])
				}
			}
			if b.End < ends[i] {
				t.Fatalf("%s: bucket %d committed end went back from %d to %d", what, b.Bucket, ends[i], b.End)
			}
			epochs[i], ends[i] = b.LeaderEpoch, b.End
		}
		t.Logf("%s: %v", what, bs)
		return bs
	}
	rebalance := func(via *node) {
		t.Helper()
		out, errOut, code := runMink(t, 120*time.Second, "cluster", "rebalance", "--server", via.admin)
		if code != 0 || !strings.Contains(out, "done:") {
			t.Fatalf("rebalance via %s: exit %d\n%s%s", via.admin, code, out, errOut)
		}
		t.Logf("rebalance:\n%s", out)
	}
	time.Sleep(time.Second)
	observe("start (node 1 leads everything)")
	// 3/0/0 → 1/1/1: the highest bucket goes to node 2, the next to node 3.
	rebalance(c.nodes[2])
	time.Sleep(time.Second)
	observe("after the first rebalance")
	// Node 1 stops cleanly; its bucket fails over to node 2 (least loaded,
	// lowest id). Node 1 comes back empty, and the rebalance moves node 2's
	// highest bucket — the one that came from node 1 — back to node 1.
	c.nodes[0].stop()
	time.Sleep(time.Second)
	observe("node 1 stopped")
	c.restart(c.nodes[0])
	c.nodes[0].waitHealthy()
	c.waitLive(3)
	rebalance(c.nodes[1])
	time.Sleep(time.Second)
	observe("after the second rebalance")
	w.haltAfter(t, 100)

	back := -1
	for i, l := range leaders {
		if len(l) >= 3 && l[0] == l[2] && l[0] != l[1] {
			back = i
		}
	}
	if back < 0 {
		t.Fatalf("no bucket went A → B → A: leaders by bucket index %v", leaders)
	}
	t.Logf("bucket index %d: leaders %v", back, leaders[back])

	// At rest, the committed end of every bucket reaches the rows it holds:
	// offsets are dense and none was reused.
	ids, err := flightScan(c, h, "m", 100)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[int]uint64{}
	for _, id := range ids {
		rows[bucketOf(id, 3)]++
	}
	waitFor(t, 30*time.Second, "committed ends to reach the rows of each bucket", func() bool {
		bs, err := c.buckets(c.nodes[0], "m")
		if err != nil {
			return false
		}
		for _, b := range bs {
			if b.End != rows[b.Index] {
				return false
			}
		}
		return true
	})
	cs := conns{}
	defer cs.closeAll()
	for _, n := range c.nodes {
		if _, err := sqlRead(c, h, cs, n, "m", 101, 30*time.Second); err != nil {
			t.Fatalf("final read through node %d: %v", nodeIndex(c, n), err)
		}
	}
	ok, fail, info, reads := h.counts()
	t.Logf("inserts: %d acknowledged, %d failed, %d unknown; %d reads; rows per bucket %v", ok, fail, info, reads, rows)
	if ok < 100 {
		t.Fatalf("only %d inserts acknowledged", ok)
	}
	checkHistory(t, h, 3)
	for _, n := range c.nodes {
		n.stop()
	}
}

// The coordinator lease holder stops during a rebalance (SIGSTOP past
// lease_ttl, on a three-member etcd cluster run as separate processes):
// another node takes the lease and registers with a higher coordinator
// epoch, the old holder's remaining LeadBucket proposals are rejected when
// it resumes (its rebalance stops with the stale-epoch error, and the CLI
// runs it again on the new holder), and a rebalance completes on the new
// holder — with one etcd member killed — leaving the load within the
// 110%/90% band. Writes run throughout and are checked.
func TestCoordinatorStopsDuringRebalance(t *testing.T) {
	c := newTestCluster(t, clusterOpts{etcdMembers: 3})
	c.nodes[0].start()
	c.nodes[0].waitHealthy()
	c.waitLive(1)
	createTable(t, c.nodes[0], "k", 24)
	c.waitServed(c.nodes[0], "k", 60*time.Second)
	c.nodes[1].start()
	c.nodes[2].start()
	c.nodes[1].waitHealthy()
	c.nodes[2].waitHealthy()
	c.waitLive(3)
	st, _ := c.status()
	if st.Coordinator.Node != 1 {
		t.Fatalf("coordinator %+v, want node 1", st.Coordinator)
	}
	oldEpoch := st.Coordinator.Epoch

	h := newHistory()
	w := &workload{h: h, table: "k", writers: 3, readEvery: 500 * time.Millisecond, seed: 3}
	w.run(c)
	defer func() {
		select {
		case <-w.stop:
		default:
			w.halt()
		}
	}()

	// The rebalance, asked of node 2 and forwarded to node 1; node 1 stops
	// once the first bucket has moved.
	type result struct {
		out, errOut string
		code        int
	}
	firstMove := make(chan struct{})
	done := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, minkBin, "cluster", "rebalance", "--server", c.nodes[1].admin)
		var out, errOut strings.Builder
		pipe, _ := cmd.StdoutPipe()
		cmd.Stderr = &errOut
		if err := cmd.Start(); err != nil {
			done <- result{errOut: err.Error(), code: -1}
			return
		}
		sc := bufio.NewScanner(pipe)
		signalled := false
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			if strings.HasPrefix(sc.Text(), "[1/") && !signalled {
				signalled = true
				close(firstMove)
			}
		}
		err := cmd.Wait()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			code = -1
		}
		done <- result{out.String(), errOut.String(), code}
	}()
	select {
	case <-firstMove:
	case r := <-done:
		t.Fatalf("rebalance ended before its first move: exit %d\n%s%s", r.code, r.out, r.errOut)
	case <-time.After(90 * time.Second):
		t.Fatal("no bucket moved within 90s")
	}
	c.pause(c.nodes[0])
	stopped := time.Now()
	waitFor(t, 60*time.Second, "a new coordinator with a higher epoch", func() bool {
		st, ok := c.status()
		return ok && st.Coordinator.Node != 1 && st.Coordinator.Epoch > oldEpoch && st.Coordinator.LeaseHolder == st.Coordinator.Node
	})
	st, _ = c.status()
	t.Logf("node %d took the coordinator lease at epoch %d (was node 1 at %d) %v after SIGSTOP",
		st.Coordinator.Node, st.Coordinator.Epoch, oldEpoch, time.Since(stopped).Round(10*time.Millisecond))
	// Node 1's buckets fail over to the live nodes.
	waitFor(t, 60*time.Second, "node 1's buckets moved to live nodes", func() bool {
		bs, err := c.buckets(c.nodes[1], "k")
		return err == nil && ledBy(bs, 1) == 0
	})
	// Node 1 resumes: the rebalance it was running proposes its next move
	// with the old coordinator epoch, and the metadata log rejects it.
	c.resume(c.nodes[0])
	var r result
	select {
	case r = <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the old coordinator's rebalance did not end within 2 minutes of SIGCONT")
	}
	// The command says so and runs the rebalance again on the new
	// coordinator, which finishes it.
	if r.code != 0 || !strings.Contains(r.errOut, fmt.Sprintf("coordinator epoch %d, current is", oldEpoch)) ||
		!strings.Contains(r.out, "running the rebalance again") {
		t.Fatalf("the old coordinator's rebalance: exit %d, want the stale coordinator epoch %d reported and the rebalance run again\n%s%s", r.code, oldEpoch, r.out, r.errOut)
	}
	t.Logf("old coordinator's rebalance:\n%s%s", r.out, r.errOut)
	st, _ = c.status()
	if st.Coordinator.Node == 1 || st.Coordinator.Epoch <= oldEpoch {
		t.Fatalf("coordinator after node 1 resumed: %+v", st.Coordinator)
	}
	c.waitLive(3)

	// One etcd member dies; the plan completes on the new coordinator.
	c.members[2].kill()
	out, errOut, code := runMink(t, 3*time.Minute, "cluster", "rebalance", "--server", c.nodes[2].admin)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("coordinator: node %d", st.Coordinator.Node)) {
		t.Fatalf("rebalance on the new coordinator: exit %d\n%s%s", code, out, errOut)
	}
	t.Logf("new coordinator's rebalance:\n%s", out)
	bs := c.waitServed(c.nodes[1], "k", 60*time.Second)
	mean := float64(len(bs)) / 3
	for id := uint32(1); id <= 3; id++ {
		if n := float64(ledBy(bs, id)); n > 1.1*mean || n < 0.9*mean {
			t.Fatalf("node %d leads %v buckets after the rebalance; band %.1f–%.1f: %+v", id, n, 0.9*mean, 1.1*mean, bs)
		}
	}
	time.Sleep(time.Second)
	w.haltAfter(t, 100)
	cs := conns{}
	defer cs.closeAll()
	for _, n := range c.nodes {
		if _, err := sqlRead(c, h, cs, n, "k", 100, 30*time.Second); err != nil {
			t.Fatalf("final read through node %d: %v", nodeIndex(c, n), err)
		}
	}
	if _, err := flightScan(c, h, "k", 101); err != nil {
		t.Fatalf("final Flight scan: %v", err)
	}
	ok, fail, info, reads := h.counts()
	t.Logf("inserts: %d acknowledged, %d failed, %d unknown; %d reads", ok, fail, info, reads)
	if ok < 100 {
		t.Fatalf("only %d inserts acknowledged", ok)
	}
	checkHistory(t, h, 24)
	for _, n := range c.nodes {
		n.stop()
	}
}
