package main

// A history of the writes and reads a workload made against a cluster, and
// its checker. Each write is a single-row INSERT of a unique id through some
// node; each read is `SELECT id` through some node, or a Flight scan. Writes
// end ok (acknowledged), fail (57P03: the server says it stored nothing) or
// info (anything else: a timeout, a broken connection, 40003 — the row may
// or may not be stored, now or later).
//
// The check has two parts:
//
//   - Linearizability of a set, with porcupine (github.com/anishathalye/porcupine),
//     partitioned per id: the state of one id is how many times it is stored;
//     an insert adds one, a read observes the count. So an acknowledged row
//     that a later read misses (lost, or a stale read), a row present twice
//     (duplicated), a row that appears although its insert failed or was never
//     made, and a row that disappears after a read saw it all fail the check.
//   - Order: within a bucket, a Flight scan returns rows in offset order, so
//     for two acknowledged inserts into the same bucket where the first was
//     acknowledged before the second was sent, the first must come first
//     (reordered acknowledged writes, e.g. offsets reused after a move).

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/minkdb/mink/buckets/routing"
	"github.com/minkdb/mink/client"
)

type opStatus int

const (
	opOK opStatus = iota
	opFail
	opInfo
)

func (s opStatus) String() string {
	return [...]string{"ok", "fail", "info"}[s]
}

// histOp is one operation: an insert of id, or a read returning ids.
type histOp struct {
	read   bool
	id     int64   // insert
	ids    []int64 // read: the ids returned, in the order returned
	node   int     // the node the statement went to (1-based), 0 for a Flight scan
	client int
	call   time.Duration // since the history began
	ret    time.Duration // for info: when the client gave up
	status opStatus
	err    string
}

func (o histOp) String() string {
	if o.read {
		return fmt.Sprintf("read via node %d [%v, %v] %v: %d rows %s", o.node, o.call, o.ret, o.status, len(o.ids), o.err)
	}
	return fmt.Sprintf("insert %d via node %d [%v, %v] %v %s", o.id, o.node, o.call, o.ret, o.status, o.err)
}

type history struct {
	start time.Time
	mu    sync.Mutex
	ops   []histOp
}

func newHistory() *history { return &history{start: time.Now()} }

func (h *history) now() time.Duration { return time.Since(h.start) }

func (h *history) add(op histOp) {
	h.mu.Lock()
	h.ops = append(h.ops, op)
	h.mu.Unlock()
}

func (h *history) snapshot() []histOp {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]histOp(nil), h.ops...)
}

// counts returns the number of inserts by status.
func (h *history) counts() (ok, fail, info, reads int) {
	for _, o := range h.snapshot() {
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

// classify maps an INSERT's error to a status.
func classify(err error) opStatus {
	if err == nil {
		return opOK
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "57P03" {
		return opFail
	}
	return opInfo
}

// workload writes unique ids into table through the nodes target returns
// and reads them back, recording everything in h.
type workload struct {
	h       *history
	table   string
	writers int
	// target picks the node (1-based) for the next statement; nil: any of
	// the cluster's running nodes.
	target func(r *rand.Rand) *node
	// readEvery is the pause between reads of the reader (0: no reader).
	readEvery time.Duration
	timeout   time.Duration
	seed      uint64
	// firstClient numbers this workload's clients from it (ids embed the
	// client), so that two workloads on one history use distinct ids.
	firstClient int
	// keep, if set, picks the ids the writers insert (the others are
	// skipped): to aim writes at chosen buckets.
	keep func(id int64) bool

	stop chan struct{}
	wg   sync.WaitGroup
}

func (w *workload) run(c *testCluster) {
	w.stop = make(chan struct{})
	if w.timeout == 0 {
		w.timeout = 10 * time.Second
	}
	if w.target == nil {
		w.target = func(r *rand.Rand) *node {
			running := c.running()
			if len(running) == 0 {
				return nil
			}
			return running[r.IntN(len(running))]
		}
	}
	for i := 0; i < w.writers; i++ {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			w.writer(c, w.firstClient+i)
		}()
	}
	if w.readEvery > 0 {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			w.reader(c, w.firstClient+w.writers)
		}()
	}
}

func (w *workload) halt() {
	close(w.stop)
	w.wg.Wait()
}

// haltAfter halts the workload once at least n of its inserts are
// acknowledged (waiting up to a minute), so that a loaded machine runs the
// same history, only slower, where a fixed time would leave fewer.
func (w *workload) haltAfter(t *testing.T, n int) {
	t.Helper()
	waitFor(t, 60*time.Second, fmt.Sprintf("%d inserts acknowledged", n), func() bool {
		ok, _, _, _ := w.h.counts()
		return ok >= n
	})
	w.halt()
}

func nodeIndex(c *testCluster, n *node) int {
	for i, m := range c.nodes {
		if m == n {
			return i + 1
		}
	}
	return 0
}

// conns keeps one connection per node for a client; a connection that saw an
// error is dropped.
type conns map[*node]*pgx.Conn

func (cs conns) get(ctx context.Context, n *node) (*pgx.Conn, error) {
	if c := cs[n]; c != nil {
		return c, nil
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := n.pg(cctx)
	if err != nil {
		return nil, err
	}
	cs[n] = c
	return c, nil
}

func (cs conns) drop(n *node) {
	if c := cs[n]; c != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c.Close(ctx)
		cancel()
		delete(cs, n)
	}
}

func (cs conns) closeAll() {
	for n := range cs {
		cs.drop(n)
	}
}

func (w *workload) stopped() bool {
	select {
	case <-w.stop:
		return true
	default:
		return false
	}
}

func (w *workload) writer(c *testCluster, client int) {
	r := rand.New(rand.NewPCG(w.seed, uint64(client)))
	cs := conns{}
	defer cs.closeAll()
	ctx := context.Background()
	for seq := int64(1); !w.stopped(); seq++ {
		n := w.target(r)
		if n == nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		conn, err := cs.get(ctx, n)
		if err != nil {
			// Nothing was sent: not an operation.
			time.Sleep(50 * time.Millisecond)
			continue
		}
		id := int64(client+1)<<32 | seq
		if w.keep != nil && !w.keep(id) {
			continue
		}
		op := histOp{id: id, node: nodeIndex(c, n), client: client, call: w.h.now()}
		qctx, cancel := context.WithTimeout(ctx, w.timeout)
		_, err = conn.Exec(qctx, "INSERT INTO "+w.table+" VALUES ($1)", id)
		cancel()
		op.ret, op.status = w.h.now(), classify(err)
		if err != nil {
			op.err = err.Error()
			cs.drop(n)
		}
		w.h.add(op)
	}
}

func (w *workload) reader(c *testCluster, client int) {
	r := rand.New(rand.NewPCG(w.seed, uint64(client)))
	cs := conns{}
	defer cs.closeAll()
	for !w.stopped() {
		if n := w.target(r); n != nil {
			sqlRead(c, w.h, cs, n, w.table, client, 20*time.Second)
		}
		select {
		case <-w.stop:
		case <-time.After(w.readEvery):
		}
	}
}

// sqlRead reads every id of table through node n and records the read if
// it succeeded (a failed read constrains nothing). It returns the ids.
func sqlRead(c *testCluster, h *history, cs conns, n *node, table string, client int, timeout time.Duration) ([]int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := cs.get(ctx, n)
	if err != nil {
		return nil, err
	}
	op := histOp{read: true, node: nodeIndex(c, n), client: client, call: h.now()}
	rows, err := conn.Query(ctx, "SELECT id FROM "+table)
	if err == nil {
		for rows.Next() {
			var id int64
			if err = rows.Scan(&id); err != nil {
				break
			}
			op.ids = append(op.ids, id)
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	op.ret = h.now()
	if err != nil {
		cs.drop(n)
		return nil, err
	}
	h.add(op)
	return op.ids, nil
}

// flightScan reads every id of table with the Go client (Arrow Flight) and
// records the read; within a bucket, ids come in offset order.
func flightScan(c *testCluster, h *history, table string, clientID int) ([]int64, error) {
	var addrs []string
	for _, n := range c.running() {
		addrs = append(addrs, n.flightAddr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, addrs...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	op := histOp{read: true, client: clientID, call: h.now()}
	rd, err := cl.Scan(ctx, table, client.ScanOptions{Columns: []string{"id"}})
	if err != nil {
		return nil, err
	}
	defer rd.Release()
	for rd.Next() {
		col := rd.RecordBatch().Column(0).(*array.Int64)
		for i := 0; i < col.Len(); i++ {
			op.ids = append(op.ids, col.Value(i))
		}
	}
	if err := rd.Err(); err != nil {
		return nil, err
	}
	op.ret = h.now()
	op.status = opOK
	h.add(op)
	return op.ids, nil
}

// setInput is a porcupine operation on one id: an insert, or a read that
// observed count copies of it.
type setInput struct {
	id     int64
	insert bool
}

// setModel is the per-id model: the state is how many copies of the id the
// table holds.
var setModel = porcupine.Model{
	Partition: func(ops []porcupine.Operation) [][]porcupine.Operation {
		byID := map[int64][]porcupine.Operation{}
		for _, o := range ops {
			id := o.Input.(setInput).id
			byID[id] = append(byID[id], o)
		}
		out := make([][]porcupine.Operation, 0, len(byID))
		for _, p := range byID {
			out = append(out, p)
		}
		return out
	},
	Init: func() any { return 0 },
	Step: func(state, input, output any) (bool, any) {
		n := state.(int)
		if input.(setInput).insert {
			return true, n + 1
		}
		return output.(int) == n, n
	},
	DescribeOperation: func(input, output any) string {
		in := input.(setInput)
		if in.insert {
			return fmt.Sprintf("insert(%d)", in.id)
		}
		return fmt.Sprintf("read(%d) -> %d copies", in.id, output.(int))
	},
}

// checkHistory runs both checks and fails the test with the offending
// operations. buckets is the table's bucket count (for the order check).
func checkHistory(t *testing.T, h *history, buckets int) {
	t.Helper()
	summary, problems := verifyHistory(h.snapshot(), buckets)
	t.Log(summary)
	for _, p := range problems {
		t.Error(p)
	}
}

// verifyHistory checks ops and returns a summary and what is wrong.
func verifyHistory(ops []histOp, buckets int) (summary string, problems []string) {
	// The ids of interest: every insert made, and every id any read saw.
	universe := map[int64]bool{}
	var reads []histOp
	for _, o := range ops {
		if o.read {
			reads = append(reads, o)
			for _, id := range o.ids {
				universe[id] = true
			}
		} else {
			universe[o.id] = true
		}
	}
	var pops []porcupine.Operation
	for _, o := range ops {
		if o.read || o.status == opFail {
			continue // a failed insert stored nothing: it is not in the model
		}
		ret := int64(o.ret)
		if o.status == opInfo {
			ret = math.MaxInt64 // may take effect at any time from its call on
		}
		pops = append(pops, porcupine.Operation{ClientId: o.client, Input: setInput{id: o.id, insert: true}, Call: int64(o.call), Return: ret, Output: 0})
	}
	// Each id's reads are reduced to the two that bound it — the first read
	// to return with it (earliest return) and the last read to start
	// without it (latest call) — plus any read with more than one copy. Any
	// violation among all reads (seen before it was inserted, missed after
	// it was acknowledged, missed after a read saw it) shows among these
	// two, and a long history stays small.
	type bound struct {
		seen, unseen *histOp
	}
	bounds := make(map[int64]*bound, len(universe))
	for id := range universe {
		bounds[id] = &bound{}
	}
	for ri := range reads {
		r := &reads[ri]
		count := map[int64]int{}
		for _, id := range r.ids {
			count[id]++
		}
		for id, b := range bounds {
			n := count[id]
			switch {
			case n > 1:
				pops = append(pops, porcupine.Operation{ClientId: r.client, Input: setInput{id: id}, Call: int64(r.call), Return: int64(r.ret), Output: n})
			case n == 1 && (b.seen == nil || r.ret < b.seen.ret):
				b.seen = r
			case n == 0 && (b.unseen == nil || r.call > b.unseen.call):
				b.unseen = r
			}
		}
	}
	for id, b := range bounds {
		if r := b.seen; r != nil {
			pops = append(pops, porcupine.Operation{ClientId: r.client, Input: setInput{id: id}, Call: int64(r.call), Return: int64(r.ret), Output: 1})
		}
		if r := b.unseen; r != nil {
			pops = append(pops, porcupine.Operation{ClientId: r.client, Input: setInput{id: id}, Call: int64(r.call), Return: int64(r.ret), Output: 0})
		}
	}
	res := porcupine.CheckOperationsTimeout(setModel, pops, 5*time.Minute)
	summary = fmt.Sprintf("history: %d operations (%d reads) over %d ids; porcupine (per-id set model): %s", len(ops), len(reads), len(universe), res)
	if res != porcupine.Ok {
		problems = append(problems, fmt.Sprintf("history is not linearizable (%s):\n%s", res, explainSet(ops, reads)))
	}
	if msg := checkOrder(ops, buckets); msg != "" {
		problems = append(problems, "acknowledged writes reordered within a bucket:\n"+msg)
	}
	return summary, problems
}

// explainSet names the ids that break the set model, in words.
func explainSet(ops, reads []histOp) string {
	inserts := map[int64]histOp{}
	for _, o := range ops {
		if !o.read {
			inserts[o.id] = o
		}
	}
	var b strings.Builder
	lines := 0
	say := func(format string, args ...any) {
		if lines > 20 {
			return
		}
		if lines < 20 {
			fmt.Fprintf(&b, format+"\n", args...)
		}
		lines++
	}
	for ri, r := range reads {
		if lines > 20 {
			break
		}
		count := map[int64]int{}
		for _, id := range r.ids {
			count[id]++
		}
		for id, n := range count {
			in, ok := inserts[id]
			switch {
			case n > 1:
				say("duplicated: id %d present %d times in %v", id, n, r)
			case !ok:
				say("phantom: id %d was never inserted, read by %v", id, r)
			case in.status == opFail:
				say("stored although the insert failed: %v, read by %v", in, r)
			case in.call > r.ret:
				say("read before it was written: %v, read by %v", in, r)
			}
		}
		for id, in := range inserts {
			if count[id] == 0 && in.status == opOK && in.ret < r.call {
				say("lost or stale: acknowledged %v, missing from %v", in, r)
			}
			if count[id] == 0 {
				for _, prev := range reads[:ri] {
					if prev.ret < r.call && containsID(prev.ids, id) {
						say("vanished: id %d seen by %v, missing from %v", id, prev, r)
						break
					}
				}
			}
		}
	}
	if lines > 20 {
		fmt.Fprintf(&b, "… and %d more\n", lines-20)
	}
	return b.String()
}

func containsID(ids []int64, id int64) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// bucketOf is the bucket index of a bigint bucket key (buckets/routing).
func bucketOf(id int64, buckets int) int {
	key := binary.BigEndian.AppendUint64([]byte{1}, uint64(id))
	return routing.Bucket(key, buckets)
}

// checkOrder checks every Flight read (node 0): within a bucket, for
// acknowledged inserts a and b with a acknowledged before b was sent, a
// comes before b.
func checkOrder(ops []histOp, buckets int) string {
	acked := map[int64]histOp{}
	for _, o := range ops {
		if !o.read && o.status == opOK {
			acked[o.id] = o
		}
	}
	var b strings.Builder
	for _, r := range ops {
		if !r.read || r.node != 0 {
			continue
		}
		perBucket := make([][]histOp, buckets)
		for _, id := range r.ids {
			if o, ok := acked[id]; ok {
				bk := bucketOf(id, buckets)
				perBucket[bk] = append(perBucket[bk], o)
			}
		}
		for bk, seq := range perBucket {
			// Walking backwards, track the earliest acknowledgement among
			// the rows after position i; one before b.call is a reorder.
			minRet, minAt := time.Duration(math.MaxInt64), -1
			for i := len(seq) - 1; i >= 0; i-- {
				if minRet < seq[i].call {
					fmt.Fprintf(&b, "bucket %d: %v comes after %v\n", bk, seq[minAt], seq[i])
					break
				}
				if seq[i].ret < minRet {
					minRet, minAt = seq[i].ret, i
				}
			}
		}
	}
	return b.String()
}

// The checker itself: each anomaly it exists for makes it fail, and the
// histories a correct system may produce pass.
func TestHistoryChecker(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	ins := func(id int64, call, ret int, st opStatus) histOp {
		return histOp{id: id, call: ms(call), ret: ms(ret), status: st, node: 1}
	}
	read := func(node, call, ret int, ids ...int64) histOp {
		return histOp{read: true, node: node, call: ms(call), ret: ms(ret), ids: ids, status: opOK, client: 9}
	}
	// Two ids in the same bucket (of 2), for the order cases.
	var a, b int64 = 1, 2
	for bucketOf(b, 2) != bucketOf(a, 2) {
		b++
	}
	cases := []struct {
		name string
		ops  []histOp
		ok   bool
	}{
		{"acknowledged and read", []histOp{ins(a, 0, 10, opOK), read(1, 20, 30, a)}, true},
		{"unknown outcome, stored late", []histOp{ins(a, 0, 10, opInfo), read(1, 20, 30), read(2, 40, 50, a)}, true},
		{"unknown outcome, never stored", []histOp{ins(a, 0, 10, opInfo), read(1, 20, 30)}, true},
		{"read concurrent with the insert", []histOp{ins(a, 0, 30, opOK), read(1, 10, 20)}, true},
		{"lost", []histOp{ins(a, 0, 10, opOK), read(1, 20, 30)}, false},
		{"stale read after a newer one", []histOp{ins(a, 0, 30, opOK), read(1, 10, 20, a), read(2, 25, 28)}, false},
		{"duplicated", []histOp{ins(a, 0, 10, opOK), read(1, 20, 30, a, a)}, false},
		{"stored although it failed", []histOp{ins(a, 0, 10, opFail), read(1, 20, 30, a)}, false},
		{"phantom", []histOp{read(1, 20, 30, 99)}, false},
		{"missed after the ack, seen later", []histOp{ins(a, 0, 10, opOK), read(1, 20, 30), read(2, 40, 50, a)}, false},
		{"vanished between reads that saw it", []histOp{ins(a, 0, 100, opInfo), read(1, 10, 20, a), read(2, 30, 40, a), read(1, 50, 60), read(2, 70, 80, a)}, false},
		{"unknown outcome appears, then stays", []histOp{ins(a, 0, 100, opInfo), read(1, 10, 20), read(2, 30, 40), read(1, 50, 60, a), read(2, 70, 80, a)}, true},
		{"in order within a bucket", []histOp{ins(a, 0, 10, opOK), ins(b, 20, 30, opOK), read(0, 40, 50, a, b)}, true},
		{"reordered within a bucket", []histOp{ins(a, 0, 10, opOK), ins(b, 20, 30, opOK), read(0, 40, 50, b, a)}, false},
		{"concurrent inserts in either order", []histOp{ins(a, 0, 30, opOK), ins(b, 10, 40, opOK), read(0, 50, 60, b, a)}, true},
		{"SQL reads have no order", []histOp{ins(a, 0, 10, opOK), ins(b, 20, 30, opOK), read(1, 40, 50, b, a)}, true},
	}
	for _, c := range cases {
		_, problems := verifyHistory(c.ops, 2)
		if (len(problems) == 0) != c.ok {
			t.Errorf("%s: problems %q, want ok=%v", c.name, problems, c.ok)
		}
	}
}
