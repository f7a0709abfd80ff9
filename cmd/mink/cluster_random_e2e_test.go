package main

// A seeded randomized schedule of faults — SIGKILL, SIGSTOP/SIGCONT past or
// short of lease_ttl, cuts of one node from etcd, an S3 that refuses one
// node or slows and throttles all, etcd losing its quorum, clean restarts,
// rebalances — under a write workload,
// with the history checked at the end (cluster_history_e2e_test.go).
//
//	go test ./cmd/mink -run TestRandomFaultSchedule -v                  # 30 s, a new seed
//	go test ./cmd/mink -run TestRandomFaultSchedule -v -args -seed=42   # replay seed 42
//	MINK_SEED=42 MINK_SCHEDULE=10m go test ./cmd/mink -run TestRandomFaultSchedule -timeout 30m
//
// The seed fixes the schedule (which fault, which node, how long, the pauses
// between) and the choices of the writers; the timing of the processes is
// not reproducible, so a replay repeats the schedule, not the interleaving.
// `make soak` runs a long schedule.

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

var (
	seedFlag     = flag.Uint64("seed", 0, "seed of TestRandomFaultSchedule (default: MINK_SEED, else the clock)")
	scheduleFlag = flag.Duration("schedule", 0, "length of TestRandomFaultSchedule's fault schedule (default: MINK_SCHEDULE, else 30s)")
)

func scheduleSeed(t *testing.T) uint64 {
	if *seedFlag != 0 {
		return *seedFlag
	}
	if s := os.Getenv("MINK_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("MINK_SEED=%q: %v", s, err)
		}
		return seed
	}
	return uint64(time.Now().UnixNano())
}

func scheduleLength(t *testing.T) time.Duration {
	if *scheduleFlag != 0 {
		return *scheduleFlag
	}
	if s := os.Getenv("MINK_SCHEDULE"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("MINK_SCHEDULE=%q: %v", s, err)
		}
		return d
	}
	return 30 * time.Second
}

// nodeState is what the schedule did to a node last.
type nodeState int

const (
	nodeUp nodeState = iota
	nodeKilled
	nodePaused
)

func TestRandomFaultSchedule(t *testing.T) {
	seed := scheduleSeed(t)
	length := scheduleLength(t)
	// Printed first, so that a run that hangs or crashes can be replayed.
	fmt.Printf("TestRandomFaultSchedule: seed %d, schedule %v (replay: -args -seed=%d or MINK_SEED=%d)\n", seed, length, seed, seed)
	t.Logf("seed %d, schedule %v", seed, length)
	rng := rand.New(rand.NewPCG(seed, 0x6d696e6b))

	// Three etcd members (so that the schedule can take the quorum away)
	// and versitygw, each node reaching them through paths of its own
	// that the schedule can cut: a forwarder per node and member, frozen
	// to cut that node off from etcd alone (the zombie leader of
	// partition_e2e_test.go, without a namespace), and an S3 proxy per
	// node that slows, throttles or refuses its requests.
	c := newTestCluster(t, clusterOpts{etcdMembers: 3, s3: true})
	etcdCuts := make([][]*forwarder, len(c.nodes))
	proxies := make([]*s3Proxy, len(c.nodes))
	for i, n := range c.nodes {
		n.args = append(n.args, "--store-outage-timeout", "3s")
		for j := 1; j < len(n.args); j++ {
			switch n.args[j-1] {
			case "--etcd-endpoints":
				var eps []string
				for _, ep := range strings.Split(n.args[j], ",") {
					f := newForwarder(t, "127.0.0.1", strings.TrimPrefix(ep, "http://"))
					etcdCuts[i] = append(etcdCuts[i], f)
					eps = append(eps, "http://"+f.addr)
				}
				n.args[j] = strings.Join(eps, ",")
			case "--s3-endpoint":
				proxies[i], n.args[j] = startS3Proxy(t, n.args[j], seed+uint64(i))
			}
		}
	}
	cutEtcd := func(i int, cut bool) {
		for _, f := range etcdCuts[i] {
			if cut {
				f.freeze()
			} else {
				f.thaw()
			}
		}
	}
	c.startAll()
	const table, nbuckets = "r", 6
	createTable(t, c.nodes[0], table, nbuckets)
	c.waitServed(c.nodes[0], table, 60*time.Second)

	h := newHistory()
	w := &workload{h: h, table: table, writers: 4, readEvery: 700 * time.Millisecond, seed: seed, timeout: 8 * time.Second}
	w.run(c)
	defer func() {
		select {
		case <-w.stop:
		default:
			w.halt()
		}
	}()

	state := make([]nodeState, len(c.nodes))
	var log []string
	step := func(format string, args ...any) {
		line := fmt.Sprintf("%6.1fs ", h.now().Seconds()) + fmt.Sprintf(format, args...)
		log = append(log, line)
		t.Log(line)
	}
	// heal brings node i back to running.
	heal := func(i int) {
		switch state[i] {
		case nodePaused:
			c.resume(c.nodes[i])
			step("SIGCONT node %d", i+1)
		case nodeKilled:
			c.restart(c.nodes[i])
			c.nodes[i].waitHealthy()
			step("node %d restarted", i+1)
		}
		state[i] = nodeUp
	}
	end := time.Now().Add(length)
	for time.Now().Before(end) {
		// One fault at a time (two paused nodes at most), healed before the
		// next, so that the cluster keeps serving.
		i := rng.IntN(len(c.nodes))
		n := c.nodes[i]
		switch op := rng.IntN(15); {
		case op < 3:
			step("SIGKILL node %d", i+1)
			n.kill()
			state[i] = nodeKilled
			sleepRand(rng, 1000, 5000)
			heal(i)
		case op < 6:
			// Short of or past lease_ttl (2 s).
			d := time.Duration(300+rng.IntN(4000)) * time.Millisecond
			step("SIGSTOP node %d for %v", i+1, d)
			c.pause(n)
			state[i] = nodePaused
			time.Sleep(d)
			heal(i)
		case op < 8:
			step("SIGTERM node %d (clean restart)", i+1)
			n.stop()
			state[i] = nodeKilled
			sleepRand(rng, 200, 2000)
			heal(i)
		case op < 9:
			out, errOut, code := runMinkQuiet(30*time.Second, "cluster", "rebalance", "--server", n.admin)
			step("rebalance via node %d: exit %d: %s", i+1, code, strings.TrimSpace(lastLine(out+errOut)))
		case op < 10:
			// Two nodes paused at once: the third serves everything.
			j := (i + 1 + rng.IntN(len(c.nodes)-1)) % len(c.nodes)
			d := time.Duration(300+rng.IntN(3000)) * time.Millisecond
			step("SIGSTOP nodes %d and %d for %v", i+1, j+1, d)
			c.pause(n)
			c.pause(c.nodes[j])
			state[i], state[j] = nodePaused, nodePaused
			time.Sleep(d)
			heal(i)
			heal(j)
		case op < 11:
			// Cut from etcd, short of or past lease_ttl; its clients, its
			// peers and the store still reach it.
			d := time.Duration(300+rng.IntN(4000)) * time.Millisecond
			step("cut node %d from etcd for %v", i+1, d)
			cutEtcd(i, true)
			time.Sleep(d)
			cutEtcd(i, false)
			step("node %d reaches etcd again", i+1)
		case op < 12:
			// Its S3 answers nothing but 503, short of or past
			// --store-outage-timeout (3 s), after which it gives its
			// buckets up.
			d := time.Duration(300+rng.IntN(5000)) * time.Millisecond
			step("S3 refuses node %d for %v", i+1, d)
			proxies[i].set(0, 1, 0)
			time.Sleep(d)
			proxies[i].set(0, 0, 0)
			step("S3 serves node %d again", i+1)
		case op < 13:
			// A slow, throttling S3 for every node, some 503s after the
			// request was carried out.
			d := time.Duration(1000+rng.IntN(4000)) * time.Millisecond
			step("S3 slow and throttling for %v", d)
			for _, p := range proxies {
				p.set(30*time.Millisecond, 0.1, 0.05)
			}
			time.Sleep(d)
			for _, p := range proxies {
				p.set(0, 0, 0)
			}
			step("S3 fast again")
		case op < 14:
			// etcd loses its quorum: two of three members stopped.
			d := time.Duration(500+rng.IntN(4000)) * time.Millisecond
			step("etcd members 2 and 3 stopped for %v", d)
			for _, m := range c.members[1:] {
				m.cmd.Process.Signal(syscall.SIGSTOP)
			}
			time.Sleep(d)
			for _, m := range c.members[1:] {
				m.cmd.Process.Signal(syscall.SIGCONT)
			}
			step("etcd has its quorum again")
		default:
			// A fault during a rebalance (asked of another node; node i may
			// be the coordinator running it).
			j := (i + 1 + rng.IntN(len(c.nodes)-1)) % len(c.nodes)
			done := make(chan string, 1)
			go func() {
				out, errOut, code := runMinkQuiet(60*time.Second, "cluster", "rebalance", "--server", c.nodes[j].admin)
				done <- fmt.Sprintf("exit %d: %s", code, strings.TrimSpace(lastLine(out+errOut)))
			}()
			step("rebalance via node %d started", j+1)
			sleepRand(rng, 0, 300)
			if rng.IntN(2) == 0 {
				step("SIGKILL node %d during the rebalance", i+1)
				n.kill()
				state[i] = nodeKilled
			} else {
				step("SIGSTOP node %d during the rebalance", i+1)
				c.pause(n)
				state[i] = nodePaused
			}
			sleepRand(rng, 500, 4000)
			heal(i)
			step("rebalance via node %d: %s", j+1, <-done)
		}
		sleepRand(rng, 500, 2500)
	}
	for i := range c.nodes {
		heal(i)
	}
	step("healed; waiting for the cluster to converge")
	c.waitLive(len(c.nodes))
	c.waitServed(c.nodes[0], table, 90*time.Second)
	time.Sleep(time.Second)
	w.haltAfter(t, 50)

	cs := conns{}
	defer cs.closeAll()
	for _, n := range c.nodes {
		if _, err := sqlRead(c, h, cs, n, table, 100, 30*time.Second); err != nil {
			t.Fatalf("final read through node %d: %v", nodeIndex(c, n), err)
		}
	}
	if _, err := flightScan(c, h, table, 101); err != nil {
		t.Fatalf("final Flight scan: %v", err)
	}
	ok, fail, info, reads := h.counts()
	t.Logf("seed %d: inserts %d acknowledged, %d failed (57P03), %d unknown; %d reads", seed, ok, fail, info, reads)
	if ok < 50 {
		t.Fatalf("seed %d: only %d inserts acknowledged", seed, ok)
	}
	summary, problems := verifyHistory(h.snapshot(), nbuckets)
	t.Log(summary)
	if len(problems) > 0 {
		t.Errorf("seed %d: the history fails the check; schedule:\n%s", seed, strings.Join(log, "\n"))
		for _, p := range problems {
			t.Error(p)
		}
	}
	for _, n := range c.nodes {
		n.stop()
	}
}

func sleepRand(rng *rand.Rand, minMS, maxMS int) {
	time.Sleep(time.Duration(minMS+rng.IntN(maxMS-minMS)) * time.Millisecond)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
