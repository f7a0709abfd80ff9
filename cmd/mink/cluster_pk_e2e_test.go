package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// Primary-key table failover (issue test 6): kill -9 the leader of
// primary-key buckets under upserts. The new leaders restore the tablets
// (snapshot plus changelog) and serve exactly the acknowledged state:
// checked with porcupine against a register per key, over every upsert
// (acknowledged, or of unknown outcome) and every read — full scans and
// point lookups (which take the KV path, not the engine) during the run and
// after the failover. Two ways in: "forwarded", six buckets and clients on
// the two surviving nodes, which forward to the leaders; "at the leader",
// one bucket and clients that follow its leader.
func TestKillPrimaryKeyLeaderUnderUpserts(t *testing.T) {
	t.Run("forwarded", func(t *testing.T) { testKillPrimaryKeyLeader(t, true) })
	t.Run("at the leader", func(t *testing.T) { testKillPrimaryKeyLeader(t, false) })
}

func testKillPrimaryKeyLeader(t *testing.T, forwarded bool) {
	c := newTestCluster(t, clusterOpts{})
	c.startAll()
	ctx := context.Background()
	setup, err := c.nodes[0].pg(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer setup.Close(ctx)
	nbuckets := 1
	if forwarded {
		nbuckets = 6
	}
	if _, err := setup.Exec(ctx, fmt.Sprintf("CREATE TABLE kv (id bigint PRIMARY KEY, v bigint NOT NULL) WITH (buckets = %d)", nbuckets)); err != nil {
		t.Fatal(err)
	}
	bs := c.waitServed(c.nodes[0], "kv", 60*time.Second)
	victim := c.nodes[bs[0].Leader-1]
	if forwarded {
		victim = c.nodes[2]
		if ledBy(bs, 3) == 0 {
			t.Fatalf("node 3 leads no bucket: %+v", bs)
		}
	}
	// currentLeader is the node a client sends its next statement to.
	// Forwarded: either survivor. At the leader: the bucket's leader,
	// refreshed from `mink table buckets` when a statement there fails.
	var leaderMu sync.Mutex
	leader, refreshed := victim, time.Now()
	pick := rand.New(rand.NewPCG(9, 9))
	currentLeader := func(failed *node) *node {
		leaderMu.Lock()
		defer leaderMu.Unlock()
		if forwarded {
			return c.nodes[pick.IntN(2)]
		}
		if failed == leader && time.Since(refreshed) > 200*time.Millisecond {
			refreshed = time.Now()
			for _, n := range c.nodes {
				if bs, err := c.buckets(n, "kv"); err == nil && bs[0].Leader != 0 {
					leader = c.nodes[bs[0].Leader-1]
					break
				}
			}
		}
		return leader
	}

	h := &kvHistory{start: time.Now()}
	const writers, keysPerWriter = 4, 40
	stop := make(chan struct{})
	var wg sync.WaitGroup
	// Writers send to the bucket's leader: each upserts its own keys with
	// increasing values, one statement at a time.
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(7, uint64(w)))
			var n *node
			cs := conns{}
			defer cs.closeAll()
			for v := int64(1); ; v++ {
				select {
				case <-stop:
					return
				default:
				}
				n = currentLeader(n)
				conn, err := cs.get(ctx, n)
				if err != nil {
					time.Sleep(50 * time.Millisecond)
					continue
				}
				key := int64(w*1000 + r.IntN(keysPerWriter))
				val := int64(w)<<32 | v
				op := kvOp{key: key, value: val, client: w, call: h.now()}
				qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				_, err = conn.Exec(qctx, "INSERT INTO kv VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET v = excluded.v", key, val)
				cancel()
				op.ret, op.status = h.now(), classify(err)
				if err != nil {
					op.err = err.Error()
					cs.drop(n)
				}
				h.add(op)
			}
		}()
	}
	allKeys := func() []int64 {
		var keys []int64
		for w := 0; w < writers; w++ {
			for k := 0; k < keysPerWriter; k++ {
				keys = append(keys, int64(w*1000+k))
			}
		}
		return keys
	}()
	// scan reads the whole table through node n; lookup reads one key.
	scan := func(cs conns, n *node, client int) error {
		conn, err := cs.get(ctx, n)
		if err != nil {
			return err
		}
		qctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		call := h.now()
		rows, err := conn.Query(qctx, "SELECT id, v FROM kv")
		if err != nil {
			cs.drop(n)
			return err
		}
		got := map[int64]int64{}
		for rows.Next() {
			var id, v int64
			if err := rows.Scan(&id, &v); err != nil {
				rows.Close()
				cs.drop(n)
				return err
			}
			if _, dup := got[id]; dup {
				t.Errorf("key %d returned twice by one scan through node %d", id, nodeIndex(c, n))
			}
			got[id] = v
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			cs.drop(n)
			return err
		}
		ret := h.now()
		for _, k := range allKeys {
			v, ok := got[k]
			h.add(kvOp{read: true, key: k, value: v, present: ok, client: client, call: call, ret: ret})
		}
		return nil
	}
	lookup := func(cs conns, n *node, client int, key int64) error {
		conn, err := cs.get(ctx, n)
		if err != nil {
			return err
		}
		qctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		op := kvOp{read: true, key: key, client: client, call: h.now()}
		rows, err := conn.Query(qctx, "SELECT v FROM kv WHERE id = $1", key)
		if err != nil {
			cs.drop(n)
			return err
		}
		for rows.Next() {
			if op.present {
				t.Errorf("key %d: two rows from a point lookup", key)
			}
			if err := rows.Scan(&op.value); err != nil {
				rows.Close()
				cs.drop(n)
				return err
			}
			op.present = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			cs.drop(n)
			return err
		}
		op.ret = h.now()
		h.add(op)
		return nil
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		cs := conns{}
		defer cs.closeAll()
		r := rand.New(rand.NewPCG(8, 8))
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(300 * time.Millisecond):
			}
			n := currentLeader(nil)
			if i%2 == 0 {
				scan(cs, n, writers)
			} else {
				lookup(cs, n, writers, allKeys[r.IntN(len(allKeys))])
			}
		}
	}()

	// Counts, not durations, so that a loaded machine runs the same
	// history, only slower.
	acked := func(since time.Duration) int {
		h.mu.Lock()
		defer h.mu.Unlock()
		n := 0
		for _, o := range h.ops {
			if !o.read && o.status == opOK && o.call > since {
				n++
			}
		}
		return n
	}
	waitFor(t, 60*time.Second, "50 upserts acknowledged before the kill", func() bool { return acked(-1) >= 50 })
	killed, killedAt := time.Now(), h.now()
	victim.kill()
	var survivor *node
	for _, n := range c.nodes {
		if n != victim {
			survivor = n
		}
	}
	waitFor(t, 60*time.Second, "every bucket led by a live node and open", func() bool {
		bs, err := c.buckets(survivor, "kv")
		if err != nil {
			return false
		}
		for _, b := range bs {
			if int(b.Leader) == nodeIndex(c, victim) || !b.Open {
				return false
			}
		}
		return true
	})
	t.Logf("kill -9 to every bucket open again: %v", time.Since(killed).Round(10*time.Millisecond))
	waitFor(t, 60*time.Second, "50 upserts against the new leaders acknowledged", func() bool { return acked(killedAt) >= 50 })
	close(stop)
	wg.Wait()

	// Final reads through the new leader: a scan, and a point lookup of
	// every key.
	cs := conns{}
	defer cs.closeAll()
	bs, err = c.buckets(survivor, "kv")
	if err != nil {
		t.Fatal(err)
	}
	finalNodes := []*node{c.nodes[bs[0].Leader-1]}
	if forwarded {
		finalNodes = []*node{c.nodes[0], c.nodes[1]}
	}
	for _, n := range finalNodes {
		if err := scan(cs, n, writers+1); err != nil {
			t.Fatalf("final scan through node %d: %v", nodeIndex(c, n), err)
		}
	}
	for i, k := range allKeys {
		n := finalNodes[i%len(finalNodes)]
		if err := lookup(cs, n, writers+1, k); err != nil {
			t.Fatalf("final lookup of %d through node %d: %v", k, nodeIndex(c, n), err)
		}
	}
	after := 0
	for _, o := range h.ops {
		if !o.read && o.status == opOK && o.call > killedAt {
			after++
		}
	}
	t.Logf("upserts sent after the kill and acknowledged: %d", after)
	if after == 0 {
		t.Fatal("no upsert sent after the kill was acknowledged")
	}
	ok, fail, info, reads := h.counts()
	t.Logf("upserts: %d acknowledged, %d failed, %d unknown; %d key reads", ok, fail, info, reads)
	if ok < 100 {
		t.Fatalf("only %d upserts acknowledged", ok)
	}
	res := porcupine.CheckOperationsTimeout(registerModel, h.operations(), 5*time.Minute)
	t.Logf("porcupine (register per key): %s", res)
	if res != porcupine.Ok {
		t.Fatalf("the primary-key table's history is not linearizable (%s): %s", res, h.explain())
	}
	for _, n := range c.nodes {
		if n != victim {
			n.stop()
		}
	}
}

// kvOp is an upsert of key to value, or a read of key that found value
// (present) or no row.
type kvOp struct {
	read    bool
	key     int64
	value   int64
	present bool
	client  int
	call    time.Duration
	ret     time.Duration
	status  opStatus
	err     string
}

type kvHistory struct {
	start time.Time
	mu    sync.Mutex
	ops   []kvOp
}

func (h *kvHistory) now() time.Duration { return time.Since(h.start) }

func (h *kvHistory) add(op kvOp) {
	h.mu.Lock()
	h.ops = append(h.ops, op)
	h.mu.Unlock()
}

func (h *kvHistory) counts() (ok, fail, info, reads int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, o := range h.ops {
		switch {
		case o.read:
			reads++
		case o.status == opOK:
			ok++
		case o.status == opFail:
			fail++
		default:
			info++
		}
	}
	return
}

// kvValue is a register's state: absent, or a value.
type kvValue struct {
	present bool
	value   int64
}

type kvInput struct {
	key   int64
	write bool
	value int64
}

// operations is the history for porcupine: failed upserts stored nothing
// and are left out; upserts of unknown outcome may take effect at any time
// after their call.
func (h *kvHistory) operations() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []porcupine.Operation
	for _, o := range h.ops {
		switch {
		case o.read:
			out = append(out, porcupine.Operation{ClientId: o.client, Input: kvInput{key: o.key}, Output: kvValue{o.present, o.value}, Call: int64(o.call), Return: int64(o.ret)})
		case o.status == opFail:
		default:
			ret := int64(o.ret)
			if o.status == opInfo {
				ret = math.MaxInt64
			}
			out = append(out, porcupine.Operation{ClientId: o.client, Input: kvInput{key: o.key, write: true, value: o.value}, Output: kvValue{}, Call: int64(o.call), Return: ret})
		}
	}
	return out
}

// explain names, per key, the last acknowledged upsert and what the final
// reads returned, for the keys where they differ.
func (h *kvHistory) explain() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	last := map[int64]kvOp{}
	final := map[int64]kvOp{}
	for _, o := range h.ops {
		if !o.read && o.status == opOK && o.ret > last[o.key].ret {
			last[o.key] = o
		}
		if o.read && o.call >= final[o.key].call {
			final[o.key] = o
		}
	}
	out := ""
	shown := 0
	for k, r := range final {
		if w, ok := last[k]; ok && (!r.present || r.value != w.value) && shown < 20 {
			out += fmt.Sprintf("\nkey %d: last acknowledged upsert %d at %v; last read (at %v) present=%v value %d", k, w.value, w.ret, r.call, r.present, r.value)
			shown++
		}
	}
	return out
}

// registerModel is one register per key.
var registerModel = porcupine.Model{
	Partition: func(ops []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[int64][]porcupine.Operation{}
		for _, o := range ops {
			k := o.Input.(kvInput).key
			byKey[k] = append(byKey[k], o)
		}
		var out [][]porcupine.Operation
		for _, p := range byKey {
			out = append(out, p)
		}
		return out
	},
	Init: func() any { return kvValue{} },
	Step: func(state, input, output any) (bool, any) {
		in := input.(kvInput)
		if in.write {
			return true, kvValue{present: true, value: in.value}
		}
		return output.(kvValue) == state.(kvValue), state
	},
}

// The register check fails on the anomalies it exists for.
func TestRegisterChecker(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	up := func(v int64, call, ret int, st opStatus) kvOp {
		return kvOp{key: 1, value: v, call: ms(call), ret: ms(ret), status: st}
	}
	rd := func(present bool, v int64, call, ret int) kvOp {
		return kvOp{read: true, key: 1, present: present, value: v, call: ms(call), ret: ms(ret), client: 1}
	}
	cases := []struct {
		name string
		ops  []kvOp
		ok   bool
	}{
		{"acknowledged state", []kvOp{up(1, 0, 10, opOK), up(2, 20, 30, opOK), rd(true, 2, 40, 50)}, true},
		{"unknown outcome applied", []kvOp{up(1, 0, 10, opOK), up(2, 20, 30, opInfo), rd(true, 2, 40, 50)}, true},
		{"unknown outcome not applied", []kvOp{up(1, 0, 10, opOK), up(2, 20, 30, opInfo), rd(true, 1, 40, 50)}, true},
		{"lost upsert: older value", []kvOp{up(1, 0, 10, opOK), up(2, 20, 30, opOK), rd(true, 1, 40, 50)}, false},
		{"lost row", []kvOp{up(1, 0, 10, opOK), rd(false, 0, 40, 50)}, false},
		{"failed upsert applied", []kvOp{up(1, 0, 10, opOK), up(2, 20, 30, opFail), rd(true, 2, 40, 50)}, false},
		{"value goes back", []kvOp{up(1, 0, 10, opOK), up(2, 20, 100, opInfo), rd(true, 2, 40, 50), rd(true, 1, 60, 70)}, false},
	}
	for _, c := range cases {
		h := &kvHistory{ops: c.ops}
		if got := porcupine.CheckOperations(registerModel, h.operations()); got != c.ok {
			t.Errorf("%s: linearizable %v, want %v", c.name, got, c.ok)
		}
	}
}

// A write in flight across a failover waits for the bucket to be served
// again (docs/cluster.md: statements wait for a moving bucket up to 30 s),
// for log and primary-key tables alike: kill -9 the leader of some
// buckets, at once send a write through a surviving node into one of them,
// and it succeeds once the bucket is open on its new leader.
func TestWriteWaitsForFailover(t *testing.T) {
	for _, kind := range []string{"log", "primary key"} {
		t.Run(kind, func(t *testing.T) {
			c := newTestCluster(t, clusterOpts{})
			c.startAll()
			ctx := context.Background()
			conn, err := c.nodes[0].pg(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			ddl, write := "CREATE TABLE w (id bigint NOT NULL, v bigint) WITH (buckets = 6, bucket_key = 'id')", "INSERT INTO w VALUES ($1, 1)"
			if kind == "primary key" {
				ddl, write = "CREATE TABLE w (id bigint PRIMARY KEY, v bigint) WITH (buckets = 6)", "INSERT INTO w VALUES ($1, 1) ON CONFLICT (id) DO UPDATE SET v = excluded.v + 1"
			}
			if _, err := conn.Exec(ctx, ddl); err != nil {
				t.Fatal(err)
			}
			bs := c.waitServed(c.nodes[0], "w", 60*time.Second)
			leaderOf := map[int]uint32{}
			for _, b := range bs {
				leaderOf[b.Index] = uint32(b.Leader)
			}
			var key int64 = -1
			for id := int64(0); key < 0 && id < 1000; id++ {
				if leaderOf[bucketOf(id, 6)] == 3 {
					key = id
				}
			}
			if key < 0 {
				t.Fatalf("node 3 leads no bucket: %+v", bs)
			}
			if _, err := conn.Exec(ctx, write, key); err != nil {
				t.Fatalf("write through node 1 into node 3's bucket before the kill: %v", err)
			}
			c.nodes[2].kill()
			killed := time.Now()
			// Well inside the statement's own 30 s wait; the bucket is
			// served again about lease_ttl (2 s) after the kill.
			wctx, cancel := context.WithTimeout(ctx, 25*time.Second)
			defer cancel()
			if _, err := conn.Exec(wctx, write, key); err != nil {
				t.Fatalf("write through node 1 sent right after the kill of the bucket's leader: %v after %v", err, time.Since(killed).Round(time.Millisecond))
			}
			t.Logf("write sent at the kill acknowledged after %v", time.Since(killed).Round(time.Millisecond))
		})
	}
}
