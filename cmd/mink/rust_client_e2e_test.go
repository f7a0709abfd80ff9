package main

// End-to-end tests of the Rust client (clients/rust) against real mink
// server processes: the crate's examples are built once with cargo and
// driven against three nodes on one etcd with a short lease. A `session`
// example keeps one client, and its cached bucket leaders, alive while the
// cluster changes under it; rows are checked through SQL.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minkdb/mink/server"
)

var (
	rustExamplesOnce sync.Once
	rustExamplesDir  string
	rustExamplesErr  error
)

// rustExamples builds the Rust client's examples (once per test binary)
// and returns the directory of the executables. The target directory is
// CARGO_TARGET_DIR, or ~/.cache/mink/cargo-target, shared with
// `make test-rust`, so that nothing is rebuilt that is up to date.
func rustExamples(t *testing.T) string {
	t.Helper()
	rustExamplesOnce.Do(func() {
		target := os.Getenv("CARGO_TARGET_DIR")
		if target == "" {
			cache, err := os.UserCacheDir()
			if err != nil {
				rustExamplesErr = err
				return
			}
			target = filepath.Join(cache, "mink", "cargo-target")
		}
		cargo, err := exec.LookPath("cargo")
		if err != nil {
			home, _ := os.UserHomeDir()
			cargo = filepath.Join(home, ".cargo", "bin", "cargo")
		}
		manifest, err := filepath.Abs("../../clients/rust/Cargo.toml")
		if err != nil {
			rustExamplesErr = err
			return
		}
		cmd := exec.Command(cargo, "build", "--release", "-j2", "--examples", "--manifest-path", manifest)
		cmd.Env = append(os.Environ(), "CARGO_TARGET_DIR="+target)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			rustExamplesErr = fmt.Errorf("cargo build --examples: %v\n%s", err, out.String())
			return
		}
		rustExamplesDir = filepath.Join(target, "release", "examples")
	})
	if rustExamplesErr != nil {
		t.Fatal(rustExamplesErr)
	}
	return rustExamplesDir
}

// rustSession is one running `session` example.
type rustSession struct {
	t      *testing.T
	cmd    *exec.Cmd
	in     io.WriteCloser
	lines  chan string
	mu     sync.Mutex
	stderr bytes.Buffer
}

func startRustSession(t *testing.T, flightAddr, table string) *rustSession {
	t.Helper()
	s := &rustSession{t: t, lines: make(chan string, 16)}
	s.cmd = exec.Command(filepath.Join(rustExamples(t), "session"), "--server", flightAddr, "--table", table, "--timeout-secs", "40")
	s.cmd.Stderr = &lockedWriter{mu: &s.mu, w: &s.stderr}
	var err error
	if s.in, err = s.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		close(s.lines)
	}()
	t.Cleanup(func() {
		s.in.Close()
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	})
	if got := s.read(30 * time.Second); got != "ready" {
		t.Fatalf("session for %s: %q, want ready", table, got)
	}
	return s
}

func (s *rustSession) read(timeout time.Duration) string {
	s.t.Helper()
	select {
	case line, ok := <-s.lines:
		if !ok {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.t.Fatalf("rust session exited: %s", s.stderr.String())
		}
		return line
	case <-time.After(timeout):
		s.t.Fatalf("rust session: no answer within %v", timeout)
	}
	return ""
}

// do sends one command and returns its answer.
func (s *rustSession) do(cmd string) string {
	s.t.Helper()
	if _, err := fmt.Fprintln(s.in, cmd); err != nil {
		s.t.Fatal(err)
	}
	return s.read(90 * time.Second)
}

// mustDo is do that fails the test unless the answer starts with want.
func (s *rustSession) mustDo(cmd, want string) string {
	s.t.Helper()
	got := s.do(cmd)
	if !strings.HasPrefix(got, want) {
		s.t.Fatalf("%s: %q, want %q…", cmd, got, want)
	}
	return got
}

// writeAnswer is a parsed `acknowledged N unacked IDS [unknown U] [error …]`.
type writeAnswer struct {
	acked   int
	unacked map[int64]bool
	unknown int
	err     string
}

func parseWrite(t *testing.T, line string) writeAnswer {
	t.Helper()
	f := strings.Fields(line)
	if len(f) < 4 || f[0] != "acknowledged" || f[2] != "unacked" {
		t.Fatalf("write answer %q", line)
	}
	a := writeAnswer{unacked: map[int64]bool{}}
	a.acked, _ = strconv.Atoi(f[1])
	if f[3] != "-" {
		for _, r := range strings.Split(f[3], ",") {
			lo, hi, ok := strings.Cut(r, "-")
			l, _ := strconv.ParseInt(lo, 10, 64)
			h := l
			if ok {
				h, _ = strconv.ParseInt(hi, 10, 64)
			}
			for id := l; id <= h; id++ {
				a.unacked[id] = true
			}
		}
	}
	if len(f) > 5 && f[4] == "unknown" {
		a.unknown, _ = strconv.Atoi(f[5])
	}
	if i := strings.Index(line, " error "); i >= 0 {
		a.err = line[i+7:]
	}
	return a
}

// sqlIDs returns how often each id occurs in table, read through node n.
func sqlIDs(t *testing.T, n *node, table string) map[int64]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := n.pg(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, fmt.Sprintf("SELECT id, count(*) FROM %s GROUP BY id", table))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int64]int{}
	for rows.Next() {
		var id, count int64
		if err := rows.Scan(&id, &count); err != nil {
			t.Fatal(err)
		}
		out[id] = int(count)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func execSQL(t *testing.T, n *node, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := n.pg(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func flightOf(c *testCluster, id uint32) string {
	return c.nodes[id-1].flightAddr()
}

// A bucket leader is killed with SIGKILL while one Rust client appends:
// every acknowledged row is stored exactly once, no row the client reported
// as not written is stored, rows of unknown outcome are stored at most
// once, and the client writes again once the buckets failed over (it drops
// the dead node's leaders and describes the table again).
func TestRustClientAppendUnderLeaderKill(t *testing.T) {
	rustExamples(t)
	c := newTestCluster(t, clusterOpts{})
	c.startAll()
	createTable(t, c.nodes[0], "rk", 6)
	bs := c.waitServed(c.nodes[0], "rk", 60*time.Second)
	if ledBy(bs, 3) == 0 {
		t.Fatalf("node 3 leads no bucket of rk: %v", bs)
	}
	s := startRustSession(t, c.nodes[0].flightAddr(), "rk")

	acked := map[int64]bool{}
	unknownIDs := map[int64]bool{}
	notWritten := map[int64]bool{}
	next := int64(1)
	var answers []writeAnswer
	write := func() writeAnswer {
		lo, hi := next, next+999
		next += 1000
		a := parseWrite(t, s.do(fmt.Sprintf("append %d %d", lo, hi)))
		for id := lo; id <= hi; id++ {
			if !a.unacked[id] {
				acked[id] = true
			} else if a.unknown > 0 {
				// The answer does not say which unacknowledged rows are
				// of unknown outcome; treat them all as possibly stored.
				unknownIDs[id] = true
			} else {
				notWritten[id] = true
			}
		}
		answers = append(answers, a)
		return a
	}
	start := time.Now()
	for time.Since(start) < 2*time.Second {
		if a := write(); len(a.unacked) > 0 {
			t.Fatalf("before the kill: %+v", a)
		}
	}
	killed := len(answers)
	killedAt := make(chan time.Time, 1)
	go func() {
		// Kill while a write is in flight.
		time.Sleep(5 * time.Millisecond)
		c.nodes[2].kill()
		killedAt <- time.Now()
	}()
	// Write through the failover (the lease expires, the coordinator moves
	// node 3's buckets) until three writes in a row are fully acknowledged,
	// for at least 6 s after the kill.
	clean := 0
	var kill time.Time
	for deadline := time.Now().Add(90 * time.Second); clean < 3 || kill.IsZero() || time.Since(kill) < 6*time.Second; {
		select {
		case kill = <-killedAt:
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no recovery after the kill: last answers %+v", answers[len(answers)-3:])
		}
		if a := write(); len(a.unacked) == 0 {
			clean++
		} else {
			clean = 0
			t.Logf("write after the kill: %d acknowledged, %d not (%d unknown): %s", a.acked, len(a.unacked), a.unknown, a.err)
		}
	}
	t.Logf("%d writes before the kill, %d after; %d rows acknowledged, %d unknown, %d not written", killed, len(answers)-killed, len(acked), len(unknownIDs), len(notWritten))
	// The buckets did fail over: node 3 leads none of them now.
	if bs := c.waitServed(c.nodes[0], "rk", 60*time.Second); ledBy(bs, 3) != 0 {
		t.Fatalf("node 3 still leads buckets after its kill: %v", bs)
	}
	c.waitServed(c.nodes[0], "rk", 60*time.Second)
	stored := sqlIDs(t, c.nodes[0], "rk")
	for id := range acked {
		if stored[id] != 1 {
			t.Fatalf("acknowledged id %d stored %d times", id, stored[id])
		}
	}
	for id, n := range stored {
		switch {
		case n > 1:
			t.Fatalf("id %d stored %d times", id, n)
		case notWritten[id]:
			t.Fatalf("id %d was reported not written but is stored", id)
		case !acked[id] && !unknownIDs[id]:
			t.Fatalf("id %d is stored but was never written", id)
		}
	}
	// The client's own scan reads the same rows.
	total := len(stored)
	s.mustDo("scan", fmt.Sprintf("rows %d distinct %d", total, total))
}

// One Rust client per table stays up while buckets move: node 1 alone
// creates the tables and leads everything, the client caches that; two
// nodes join and a rebalance moves buckets away (the client's cached
// leaders are stale: it follows the redirects and learns the new leaders);
// upserts, lookups, deletes and scans work across it; then node 1 stops,
// comes back and a second rebalance moves a bucket back (A → B → A) while
// the client's cache names B.
func TestRustClientAcrossRebalance(t *testing.T) {
	rustExamples(t)
	c := newTestCluster(t, clusterOpts{})
	c.nodes[0].start()
	c.nodes[0].waitHealthy()
	c.waitLive(1)
	execSQL(t, c.nodes[0], "CREATE TABLE m (id bigint NOT NULL, v text) WITH (buckets = 3, bucket_key = 'id')")
	execSQL(t, c.nodes[0], "CREATE TABLE kv (id bigint PRIMARY KEY, name text, x integer) WITH (buckets = 3)")
	c.waitServed(c.nodes[0], "m", 60*time.Second)
	c.waitServed(c.nodes[0], "kv", 60*time.Second)

	sm := startRustSession(t, c.nodes[0].flightAddr(), "m")
	sk := startRustSession(t, c.nodes[0].flightAddr(), "kv")
	sm.mustDo("append 1 1000", "acknowledged 1000 unacked -")
	sk.mustDo("upsert 1 3000", "acknowledged 3000 unacked -")
	for i := 0; i < 3; i++ {
		sm.mustDo(fmt.Sprintf("leader %d", i), "leader "+c.nodes[0].flightAddr())
	}

	// table → bucket index → leaders seen, in order
	leaders := map[string]map[int][]uint32{"m": {}, "kv": {}}
	observe := func(via *node, what string) []server.BucketStatus {
		t.Helper()
		var bs []server.BucketStatus
		for _, table := range []string{"kv", "m"} {
			bs = c.waitServed(via, table, 60*time.Second)
			for _, b := range bs {
				if l := leaders[table][b.Index]; len(l) == 0 || l[len(l)-1] != uint32(b.Leader) {
					leaders[table][b.Index] = append(leaders[table][b.Index], uint32(b.Leader))
				}
			}
			t.Logf("%s: %s %v", what, table, bs)
		}
		return bs // m's
	}
	rebalance := func(via *node) {
		t.Helper()
		out, errOut, code := runMink(t, 120*time.Second, "cluster", "rebalance", "--server", via.admin)
		if code != 0 || !strings.Contains(out, "done:") {
			t.Fatalf("rebalance via %s: exit %d\n%s%s", via.admin, code, out, errOut)
		}
	}
	observe(c.nodes[0], "start")
	c.nodes[1].start()
	c.nodes[2].start()
	c.nodes[1].waitHealthy()
	c.nodes[2].waitHealthy()
	c.waitLive(3)
	rebalance(c.nodes[2])
	bs := observe(c.nodes[1], "after the first rebalance")
	moved := -1
	for _, b := range bs {
		if b.Leader != 1 {
			moved = b.Index
		}
	}
	if moved < 0 {
		t.Fatalf("the rebalance moved no bucket of m: %v", bs)
	}
	// The cache still names node 1 for the moved bucket; the write follows
	// the redirect and the cache learns the new leader.
	sm.mustDo(fmt.Sprintf("leader %d", moved), "leader "+c.nodes[0].flightAddr())
	sm.mustDo("append 1001 2000", "acknowledged 1000 unacked -")
	sm.mustDo(fmt.Sprintf("leader %d", moved), "leader "+flightOf(c, uint32(bs[moved].Leader)))
	sm.mustDo("scan", "rows 2000 distinct 2000")

	// Primary-key table across the same rebalance.
	sk.mustDo("lookup 1 3000", "found 3000")
	sk.mustDo("upsert 2001 5000", "acknowledged 3000 unacked -")
	sk.mustDo("lookup 1 6000", "found 5000")
	sk.mustDo("delete 1 100", "deleted 100")
	sk.mustDo("lookup 1 200", "found 100")
	sk.mustDo("scan", "rows 4900 distinct 4900")

	// A → B → A: node 1 stops, its buckets fail over; it comes back and the
	// second rebalance moves a bucket back to it.
	c.nodes[0].stop()
	observe(c.nodes[1], "node 1 stopped")
	sm.mustDo("append 2001 3000", "acknowledged 1000 unacked -")
	c.restart(c.nodes[0])
	c.nodes[0].waitHealthy()
	c.waitLive(3)
	rebalance(c.nodes[1])
	observe(c.nodes[1], "after the second rebalance")
	// The second rebalance moves buckets back to node 1, of m or kv.
	type back struct {
		table string
		index int
		a     string
	}
	var backs []back
	for _, table := range []string{"m", "kv"} {
		for i, l := range leaders[table] {
			if len(l) >= 3 && l[0] == l[len(l)-1] && l[len(l)-2] != l[0] {
				backs = append(backs, back{table, i, flightOf(c, l[0])})
				t.Logf("%s bucket index %d went %v", table, i, l)
			}
		}
	}
	if len(backs) == 0 {
		t.Fatalf("no bucket went A → B → A: leaders %v", leaders)
	}
	session := map[string]*rustSession{"m": sm, "kv": sk}
	// The cache names B for every bucket that moved back: it was learnt
	// while B led the bucket.
	for _, b := range backs {
		if got := session[b.table].do(fmt.Sprintf("leader %d", b.index)); got == "leader "+b.a {
			t.Fatalf("%s bucket index %d: the cache already names the final leader (%q)", b.table, b.index, got)
		}
	}
	// One write per table follows the redirects back to A.
	sm.mustDo("append 3001 4000", "acknowledged 1000 unacked -")
	sk.mustDo("upsert 5001 6000", "acknowledged 1000 unacked -")
	for _, b := range backs {
		session[b.table].mustDo(fmt.Sprintf("leader %d", b.index), "leader "+b.a)
	}
	wantM, wantKV := 4000, 5900
	sm.mustDo("scan", fmt.Sprintf("rows %d distinct %d", wantM, wantM))
	sk.mustDo("scan", fmt.Sprintf("rows %d distinct %d", wantKV, wantKV))
	sk.mustDo(fmt.Sprintf("lookup 1 %d", wantKV+100), fmt.Sprintf("found %d", wantKV))

	stored := sqlIDs(t, c.nodes[1], "m")
	if len(stored) != wantM {
		t.Fatalf("m has %d distinct ids, want %d", len(stored), wantM)
	}
	for id := int64(1); id <= int64(wantM); id++ {
		if stored[id] != 1 {
			t.Fatalf("id %d stored %d times", id, stored[id])
		}
	}
	kvIDs := sqlIDs(t, c.nodes[2], "kv")
	if len(kvIDs) != wantKV || kvIDs[100] != 0 || kvIDs[101] != 1 || kvIDs[int64(wantKV+100)] != 1 {
		t.Fatalf("kv has %d keys (100: %d, 101: %d), want %d keys from 101", len(kvIDs), kvIDs[100], kvIDs[101], wantKV)
	}
}

// runRustExample runs one of the Rust client's examples to completion and
// returns its stdout.
func runRustExample(t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(rustExamples(t), name), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("%s %v: %w: %s", name, args, err, errb.String())
	}
	return out.String(), err
}

// The example tools against partitioned tables of every kind: `load`
// routes rows to partitions it creates and prints what was acknowledged,
// `scan` prints the rows (and the changelog of a primary-key table),
// `keys` looks rows up and deletes them, and SQL sees the same rows. Bad
// invocations fail with an error, not a panic.
func TestRustClientExamplesOnPartitionedTables(t *testing.T) {
	rustExamples(t)
	c := newTestCluster(t, clusterOpts{nodes: 2})
	c.startAll()
	n := c.nodes[0]
	execSQL(t, n, "CREATE TABLE ev (id bigint NOT NULL, dt date, amount numeric(12,2), tags text[], u uuid, at timestamptz) "+
		"PARTITION BY LIST (dt) WITH (buckets = 3, bucket_key = 'id')")
	execSQL(t, n, "CREATE TABLE acc (id bigint NOT NULL, region text NOT NULL, balance double precision, note varchar(4), "+
		"PRIMARY KEY (region, id)) PARTITION BY LIST (region) WITH (buckets = 2)")
	srv := n.flightAddr()
	must := func(out string, err error, want string) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if lines := strings.Split(strings.TrimSpace(out), "\n"); lines[len(lines)-1] != want {
			t.Fatalf("output %q, want last line %q", out, want)
		}
	}
	out, err := runRustExample(t, "load", "--server", srv, "--table", "ev", "--rows", "30000", "--batch-rows", "4000")
	must(out, err, "acknowledged 30000")
	out, err = runRustExample(t, "scan", "--server", srv, "--table", "ev")
	must(out, err, "rows 30000")
	// The generator gives the partition column 3 values.
	ctx := context.Background()
	conn, err := n.pg(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var parts, rows, distinct int
	if err := conn.QueryRow(ctx, "SELECT count(DISTINCT dt), count(*), count(DISTINCT id) FROM ev").Scan(&parts, &rows, &distinct); err != nil {
		t.Fatal(err)
	}
	if parts != 3 || rows != 30000 || distinct != 30000 {
		t.Fatalf("ev: %d partitions, %d rows, %d distinct ids; want 3, 30000, 30000", parts, rows, distinct)
	}

	out, err = runRustExample(t, "load", "--server", srv, "--table", "acc", "--rows", "5000", "--upsert")
	must(out, err, "acknowledged 5000")
	out, err = runRustExample(t, "load", "--server", srv, "--table", "acc", "--rows", "2000", "--upsert")
	must(out, err, "acknowledged 2000")
	out, err = runRustExample(t, "scan", "--server", srv, "--table", "acc")
	must(out, err, "rows 5000")
	// 5000 inserts, then 2000 updates of two records each.
	out, err = runRustExample(t, "scan", "--server", srv, "--table", "acc", "--changelog")
	must(out, err, "rows 9000")
	out, err = runRustExample(t, "keys", "--server", srv, "--table", "acc", "--lookup", "--from", "4990", "--to", "5010", "--check")
	must(out, err, "found 11")
	out, err = runRustExample(t, "keys", "--server", srv, "--table", "acc", "--delete", "--from", "1", "--to", "50")
	must(out, err, "deleted 50")
	if err := conn.QueryRow(ctx, "SELECT count(*), min(id) FROM acc").Scan(&rows, &distinct); err != nil {
		t.Fatal(err)
	}
	if rows != 4950 || distinct != 51 {
		t.Fatalf("acc: %d rows from id %d, want 4950 from 51", rows, distinct)
	}

	// Errors, not panics: an append to a primary-key table, a missing
	// table, a changelog of a log table.
	for _, args := range [][]string{
		{"load", "--server", srv, "--table", "acc", "--rows", "1"},
		{"load", "--server", srv, "--table", "nope", "--rows", "1"},
		{"scan", "--server", srv, "--table", "ev", "--changelog"},
	} {
		_, err := runRustExample(t, args[0], args[1:]...)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("%v: %v, want exit status 1", args, err)
		}
	}
}
