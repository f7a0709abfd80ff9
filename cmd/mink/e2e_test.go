package main

// End-to-end tests: they build the real mink binary and run it as a user
// would, against an embedded etcd inside the process under test or against
// an etcd and a versitygw S3 server started by the test.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/minkdb/mink/internal/embedetcd"
	"github.com/minkdb/mink/internal/minktest"
	"github.com/minkdb/mink/internal/s3test"
	"github.com/minkdb/mink/server"
)

var minkBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mink-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	minkBin = filepath.Join(dir, "mink")
	build := exec.Command("go", "build", "-tags", "duckdb_arrow", "-o", minkBin, ".")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build mink:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// handedOut holds the ports freePort has returned in this process: the
// kernel may give a closed probe's port to the next probe, and a node moved
// to another address (moveToHost) keeps its port, so two nodes of one test
// could otherwise be given the same port on different checks.
var handedOut struct {
	sync.Mutex
	ports map[int]bool
}

// freePort returns a loopback port that is free, and whose successor is free
// too when pair is set (the embedded etcd's peer port sits beside its client
// port). It never returns a port (or pair) it returned before.
func freePort(t *testing.T, pair bool) int {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	if handedOut.ports == nil {
		handedOut.ports = map[int]bool{}
	}
	for i := 0; i < 100; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		if handedOut.ports[port] || (pair && handedOut.ports[port+1]) {
			ln.Close()
			continue
		}
		if !pair {
			ln.Close()
			handedOut.ports[port] = true
			return port
		}
		ln2, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port+1))
		ln.Close()
		if err == nil {
			ln2.Close()
			handedOut.ports[port], handedOut.ports[port+1] = true, true
			return port
		}
	}
	t.Fatal("no free port pair")
	return 0
}

// node is one mink server process under test.
type node struct {
	t       *testing.T
	args    []string
	env     []string
	admin   string
	cmd     *exec.Cmd
	mu      sync.Mutex
	stderr  bytes.Buffer
	exited  chan struct{}
	exitErr error
	// healthy: the node answered /healthz once; before that, a start
	// that lost a listen port to another process is retried on another
	// port (portRetries times).
	healthy     bool
	portRetries int
	cleanup     bool // the cleanup that kills the process (and shows its log on failure) is registered
	// wrap runs the node under another command (`ip netns exec ns`),
	// which must exec it so that signals reach mink itself.
	wrap []string
}

type nodeOpts struct {
	dataDir  string
	nodeID   int
	etcd     string // external endpoints; empty: embedded
	extra    []string
	leaseTTL string
}

func newNode(t *testing.T, o nodeOpts) *node {
	t.Helper()
	if o.nodeID == 0 {
		o.nodeID = 1
	}
	if o.dataDir == "" {
		o.dataDir = t.TempDir()
	}
	admin := fmt.Sprintf("127.0.0.1:%d", freePort(t, false))
	args := []string{"server",
		"--data-dir", o.dataDir,
		"--node-id", fmt.Sprint(o.nodeID),
		"--pg-addr", fmt.Sprintf("127.0.0.1:%d", freePort(t, false)),
		"--flight-addr", fmt.Sprintf("127.0.0.1:%d", freePort(t, false)),
		"--admin-addr", admin,
		"--kafka-addr", fmt.Sprintf("127.0.0.1:%d", freePort(t, false)),
	}
	if o.etcd != "" {
		args = append(args, "--etcd-endpoints", o.etcd)
	} else {
		args = append(args, "--embedded-etcd-addr", fmt.Sprintf("127.0.0.1:%d", freePort(t, true)))
	}
	if o.leaseTTL != "" {
		args = append(args, "--lease-ttl", o.leaseTTL)
	}
	args = append(args, o.extra...)
	return &node{t: t, args: args, admin: admin}
}

func (n *node) start() {
	n.t.Helper()
	argv := append(append(append([]string(nil), n.wrap...), minkBin), n.args...)
	n.cmd = exec.Command(argv[0], argv[1:]...)
	n.cmd.Env = append(os.Environ(), n.env...)
	n.stderr.Reset()
	n.cmd.Stderr = &lockedWriter{mu: &n.mu, w: &n.stderr}
	n.exited = make(chan struct{})
	if err := n.cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	go func() { n.exitErr = n.cmd.Wait(); close(n.exited) }()
	if n.cleanup {
		return
	}
	n.cleanup = true
	n.t.Cleanup(func() {
		n.kill()
		if n.t.Failed() {
			n.t.Logf("the last lines of node %s's log:\n%s", n.admin, lastLines(n.log(), 80))
		}
	})
}

// lastLines is the end of a log: its last n lines.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (n *node) log() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stderr.String()
}

// waitHealthy waits until /healthz answers 200.
func (n *node) waitHealthy() {
	n.t.Helper()
	n.waitHealthyOver("http", http.DefaultClient)
}

// waitHealthyOver waits until the node's /healthz answers 200 over scheme
// and the node has logged that it is ready: the log line tells that the
// answer came from this node, not from another process that holds the
// admin address this node failed to listen on. A node that exits before it
// is healthy because one of its ports was taken is started again on
// another port.
func (n *node) waitHealthyOver(scheme string, hc *http.Client) {
	n.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-n.exited:
			if !n.healthy && n.portRetries < 3 && n.repickBusyPort() {
				n.portRetries++
				n.start()
				continue
			}
			n.t.Fatalf("mink exited early (%v):\n%s", n.exitErr, n.log())
		default:
		}
		resp, err := hc.Get(scheme + "://" + n.admin + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 && strings.Contains(n.log(), `msg="mink server ready"`) {
				n.healthy = true
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	n.t.Fatalf("mink not healthy over %s after 60s:\n%s", scheme, n.log())
}

// busyPortRE finds the address a node could not listen on.
var busyPortRE = regexp.MustCompile(`listen tcp ([0-9.]+):(\d+): bind: address already in use`)

// repickBusyPort replaces the listen address the node's log says was taken
// (tests of several packages pick free ports at once) with a free one; the
// embedded etcd's peer port is its client port plus one. False if the log
// names none of the node's addresses.
func (n *node) repickBusyPort() bool {
	m := busyPortRE.FindStringSubmatch(n.log())
	if m == nil {
		return false
	}
	busyHost := m[1]
	busy, _ := strconv.Atoi(m[2])
	for i := 1; i < len(n.args); i++ {
		host, port, err := net.SplitHostPort(n.args[i])
		if err != nil || host != busyHost || !strings.HasPrefix(n.args[i-1], "--") {
			continue
		}
		p, _ := strconv.Atoi(port)
		pair := n.args[i-1] == "--embedded-etcd-addr"
		if p != busy && !(pair && p+1 == busy) {
			continue
		}
		n.args[i] = net.JoinHostPort(host, strconv.Itoa(freePort(n.t, pair)))
		if n.args[i-1] == "--admin-addr" {
			n.admin = n.args[i]
		}
		return true
	}
	return false
}

func (n *node) signal(sig syscall.Signal) { _ = n.cmd.Process.Signal(sig) }

func (n *node) kill() {
	if n.cmd != nil && n.cmd.Process != nil {
		_ = n.cmd.Process.Kill()
		<-n.exited
	}
}

// stop sends SIGTERM and requires a clean exit.
func (n *node) stop() {
	n.t.Helper()
	n.signal(syscall.SIGTERM)
	select {
	case <-n.exited:
		if n.exitErr != nil {
			n.t.Fatalf("mink exited with %v after SIGTERM:\n%s", n.exitErr, n.log())
		}
	case <-time.After(20 * time.Second):
		n.t.Fatalf("mink did not stop within 20s of SIGTERM:\n%s", n.log())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// runMink runs a mink CLI command to completion.
func runMink(t *testing.T, timeout time.Duration, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, minkBin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("mink %v did not finish within %v:\n%s", args, timeout, errb.String())
	}
	code = 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func clusterStatus(t *testing.T, admin string) server.ClusterStatus {
	t.Helper()
	out, errOut, code := runMink(t, 30*time.Second, "cluster", "status", "--json", "--server", admin)
	if code != 0 {
		t.Fatalf("cluster status exit %d: %s", code, errOut)
	}
	var st server.ClusterStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("cluster status --json: %v\n%s", err, out)
	}
	return st
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("timed out after %v waiting for %s", timeout, what)
}

func findNode(st server.ClusterStatus, id uint32) (server.NodeStatus, bool) {
	for _, n := range st.Nodes {
		if n.ID == id {
			return n, true
		}
	}
	return server.NodeStatus{}, false
}

func TestSingleNodeLifecycle(t *testing.T) {
	dataDir := t.TempDir()
	n := newNode(t, nodeOpts{dataDir: dataDir})
	n.start()
	n.waitHealthy()

	// The table names the node, its epoch and liveness, and the coordinator.
	out, errOut, code := runMink(t, 30*time.Second, "cluster", "status", "--server", n.admin)
	if code != 0 {
		t.Fatalf("cluster status: exit %d: %s", code, errOut)
	}
	lines := strings.Split(out, "\n")
	if !strings.HasPrefix(lines[0], "NODE") || !strings.Contains(lines[0], "EPOCH") || !strings.Contains(lines[0], "LIVE") {
		t.Fatalf("cluster status header: %q", lines[0])
	}
	if f := strings.Fields(lines[1]); len(f) < 4 || f[0] != "1" || f[1] != "1" || f[2] != "yes" || f[3] != "0" {
		t.Fatalf("cluster status row for node 1: %q\n%s", lines[1], out)
	}

	var st server.ClusterStatus
	waitFor(t, 30*time.Second, "node 1 to become coordinator", func() bool {
		st = clusterStatus(t, n.admin)
		return st.Coordinator.Node == 1 && st.Coordinator.Epoch == 1 && st.Coordinator.LeaseHolder == 1
	})
	if len(st.Nodes) != 1 || st.Nodes[0].Epoch != 1 || !st.Nodes[0].Live {
		t.Fatalf("status after first start: %+v", st)
	}
	if !strings.HasSuffix(st.Nodes[0].Addrs.Admin, n.admin[strings.LastIndex(n.admin, ":"):]) {
		t.Fatalf("advertised admin address %q, listening on %q", st.Nodes[0].Addrs.Admin, n.admin)
	}
	// The JSON has the documented shape.
	raw, _, _ := runMink(t, 30*time.Second, "cluster", "status", "--json", "--server", n.admin)
	var shape map[string]any
	if err := json.Unmarshal([]byte(raw), &shape); err != nil {
		t.Fatal(err)
	}
	nodes, ok := shape["nodes"].([]any)
	if !ok || len(nodes) != 1 {
		t.Fatalf("json nodes: %s", raw)
	}
	for _, key := range []string{"id", "epoch", "live", "addrs", "buckets_led"} {
		if _, ok := nodes[0].(map[string]any)[key]; !ok {
			t.Fatalf("json node lacks %q: %s", key, raw)
		}
	}
	if _, ok := shape["coordinator"].(map[string]any)["epoch"]; !ok {
		t.Fatalf("json coordinator lacks epoch: %s", raw)
	}

	// Prometheus metrics are served.
	resp, err := http.Get("http://" + n.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"mink_node_epoch 1", "mink_node_live 1", "go_goroutines"} {
		if !strings.Contains(string(body), want) {
			t.Fatalf("/metrics lacks %q", want)
		}
	}

	// A second server on the same data directory refuses to start and says why.
	second := newNode(t, nodeOpts{dataDir: dataDir})
	_, errOut, code = runMink(t, 30*time.Second, second.args...)
	if code == 0 || !strings.Contains(errOut, "in use by another mink server") {
		t.Fatalf("second server on the same data dir: exit %d, stderr:\n%s", code, errOut)
	}

	// A clean SIGTERM shutdown; the restart gets the next node epoch, and the
	// metadata from before the restart (node 1's first registration and the
	// coordinator) is still there: nothing lost, nothing applied twice.
	n.stop()
	if !strings.Contains(n.log(), "stopped") {
		t.Fatalf("no clean shutdown log line:\n%s", n.log())
	}
	n.start()
	n.waitHealthy()
	waitFor(t, 30*time.Second, "coordinator epoch 2 after restart", func() bool {
		st = clusterStatus(t, n.admin)
		return st.Coordinator.Epoch == 2
	})
	if got, _ := findNode(st, 1); got.Epoch != 2 || !got.Live {
		t.Fatalf("after restart: %+v", st)
	}

	// SIGKILL leaves no stale lock behind, and the restart gets epoch 3.
	n.kill()
	n.start()
	n.waitHealthy()
	st = clusterStatus(t, n.admin)
	if got, _ := findNode(st, 1); got.Epoch != 3 {
		t.Fatalf("after kill -9 and restart: %+v", st)
	}
	n.stop()
}

func TestBadInvocations(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown flag", []string{"server", "--no-such-flag"}, 2, "unknown flag: --no-such-flag"},
		{"bad object store scheme", []string{"server", "--data-dir", dir, "--object-store", "ftp://x/y"}, 1, "object store"},
		{"unparsable object store", []string{"server", "--data-dir", dir, "--object-store", "::nonsense"}, 1, "object store"},
		{"node id zero", []string{"server", "--node-id", "0"}, 2, "--node-id"},
		{"bad duration", []string{"server", "--lease-ttl", "soon"}, 2, "--lease-ttl"},
		{"negative memory limit", []string{"server", "--sql-memory-limit", "-1"}, 2, "--sql-memory-limit"},
		{"non-loopback embedded etcd", []string{"server", "--embedded-etcd-addr", "0.0.0.0:2379"}, 2, "loopback"},
		{"trust mode off loopback", []string{"server", "--data-dir", dir, "--pg-addr", "0.0.0.0:5432"}, 2, "--pg-addr \"0.0.0.0:5432\" is not on loopback, and without --superuser-password-file every client would be trusted"},
		{"an empty superuser password file", []string{"server", "--data-dir", dir, "--superuser-password-file", os.DevNull}, 1, "the first line is empty"},
		{"unknown command", []string{"frobnicate"}, 1, "unknown command"},
		{"status of nothing", []string{"cluster", "status", "--server", fmt.Sprintf("127.0.0.1:%d", freePort(t, false))}, 1, "cannot reach mink admin API"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, errOut, code := runMink(t, 30*time.Second, c.args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, c.code, errOut)
			}
			lines := strings.Split(strings.TrimSpace(errOut), "\n")
			if len(lines) != 1 || !strings.HasPrefix(lines[0], "mink: ") || !strings.Contains(lines[0], c.want) {
				t.Fatalf("want one line 'mink: …%s…', got:\n%s", c.want, errOut)
			}
		})
	}
}

func TestUnreachableEtcd(t *testing.T) {
	dead := fmt.Sprintf("127.0.0.1:%d", freePort(t, false))
	n := newNode(t, nodeOpts{etcd: dead, extra: []string{"--etcd-dial-timeout", "3s"}})
	start := time.Now()
	_, errOut, code := runMink(t, 60*time.Second, n.args...)
	if code == 0 {
		t.Fatalf("started against an unreachable etcd:\n%s", errOut)
	}
	if time.Since(start) > 30*time.Second {
		t.Fatalf("gave up after %v, want about 3s", time.Since(start))
	}
	if !strings.Contains(errOut, "retrying") {
		t.Fatalf("no retry log line:\n%s", errOut)
	}
	last := strings.Split(strings.TrimSpace(errOut), "\n")
	if l := last[len(last)-1]; !strings.HasPrefix(l, "mink: ") || !strings.Contains(l, dead) || !strings.Contains(l, "unreachable") {
		t.Fatalf("last line should say etcd at %s is unreachable, got %q", dead, l)
	}
}

func TestConfigFile(t *testing.T) {
	n := newNode(t, nodeOpts{})
	// Move every flag after "server" into the file except --config itself.
	cfg := &strings.Builder{}
	for i := 1; i+1 < len(n.args); i += 2 {
		fmt.Fprintf(cfg, "%s: %q\n", strings.TrimPrefix(n.args[i], "--"), n.args[i+1])
	}
	path := filepath.Join(t.TempDir(), "mink.yaml")
	if err := os.WriteFile(path, []byte(cfg.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	n.args = []string{"server", "--config", path}
	n.start()
	n.waitHealthy()
	n.stop()

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("no-such-key: 1\n"), 0o644)
	_, errOut, code := runMink(t, 30*time.Second, "server", "--config", bad)
	if code != 2 || !strings.Contains(errOut, `unknown key "no-such-key"`) {
		t.Fatalf("bad config key: exit %d\n%s", code, errOut)
	}
}

// Two nodes share an external etcd and a versitygw S3 store: both register
// and are live; when the coordinator is killed with SIGKILL, it leaves the
// live set after lease_ttl and the other node takes the coordinator lease
// with the next coordinator epoch. The restarted node gets a new node epoch.
func TestTwoNodesSharedEtcdAndS3(t *testing.T) {
	etcd := startTestEtcd(t)
	s3 := s3test.Start(t)
	endpoints := strings.Join(etcd.Endpoints(), ",")
	extra := []string{"--object-store", s3.URL("cluster"), "--s3-endpoint", s3.Endpoint, "--coordinator-tick", "200ms"}
	env := []string{"AWS_ACCESS_KEY_ID=" + s3.AccessKey, "AWS_SECRET_ACCESS_KEY=" + s3.SecretKey, "AWS_REGION=" + s3.Region}

	n1 := newNode(t, nodeOpts{nodeID: 1, etcd: endpoints, leaseTTL: "2s", extra: extra})
	n1.env = env
	n1.start()
	n1.waitHealthy()
	n2 := newNode(t, nodeOpts{nodeID: 2, etcd: endpoints, leaseTTL: "2s", extra: extra})
	n2.env = env
	n2.start()
	n2.waitHealthy()

	var st server.ClusterStatus
	waitFor(t, 30*time.Second, "both nodes live, node 1 coordinator", func() bool {
		st = clusterStatus(t, n2.admin)
		a, _ := findNode(st, 1)
		b, _ := findNode(st, 2)
		return a.Live && b.Live && st.Coordinator.Node == 1 && st.Coordinator.Epoch == 1
	})
	if b, _ := findNode(st, 2); b.Epoch != 1 || !strings.HasSuffix(b.Addrs.Admin, n2.admin[strings.LastIndex(n2.admin, ":"):]) {
		t.Fatalf("node 2 as seen from node 2: %+v", b)
	}

	killed := time.Now()
	n1.kill()
	waitFor(t, 30*time.Second, "node 1 dead and node 2 coordinator", func() bool {
		st = clusterStatus(t, n2.admin)
		a, _ := findNode(st, 1)
		return !a.Live && st.Coordinator.Node == 2 && st.Coordinator.Epoch == 2 && st.Coordinator.LeaseHolder == 2
	})
	t.Logf("coordinator moved %v after kill -9 (lease ttl 2s)", time.Since(killed).Round(10*time.Millisecond))

	n1.start()
	n1.waitHealthy()
	waitFor(t, 30*time.Second, "node 1 back with epoch 2", func() bool {
		st = clusterStatus(t, n1.admin)
		a, _ := findNode(st, 1)
		return a.Live && a.Epoch == 2
	})
	if st.Coordinator.Node != 2 {
		t.Fatalf("the coordinator moved back to node 1 by itself: %+v", st.Coordinator)
	}
	n1.stop()
	n2.stop()
}

// pgAddr is the node's --pg-addr.
func (n *node) pgAddr() string {
	for i, a := range n.args {
		if a == "--pg-addr" {
			return n.args[i+1]
		}
	}
	return ""
}

// startTestEtcd starts an embedded etcd on loopback ports for the nodes of
// a test to share; it stops when the test ends.
func startTestEtcd(t *testing.T) *embedetcd.Etcd {
	t.Helper()
	return minktest.StartEtcd(t)
}

// TestNodeStartRetriesBusyAdminPort: the harness itself. A node moved off
// 127.0.0.1 whose admin address another process holds, and answers
// /healthz on, is not taken for healthy: it starts again on another port of
// its own host and answers there.
func TestNodeStartRetriesBusyAdminPort(t *testing.T) {
	n := newNode(t, nodeOpts{})
	n.moveToHost("127.0.0.2")
	ln, err := net.Listen("tcp", n.admin)
	if err != nil {
		t.Fatal(err)
	}
	impostor := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(200) })}
	go impostor.Serve(ln)
	defer impostor.Close()
	taken := n.admin
	n.start()
	n.waitHealthy()
	defer n.stop()
	if n.portRetries != 1 || n.admin == taken || !strings.HasPrefix(n.admin, "127.0.0.2:") {
		t.Fatalf("retries %d, admin address %s (taken: %s)", n.portRetries, n.admin, taken)
	}
	conn := connect(t, n.pgURL(), pgx.QueryExecModeSimpleProtocol)
	defer conn.Close(context.Background())
	var one int
	if err := conn.QueryRow(context.Background(), "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1: %d %v", one, err)
	}
}

// TestNodeStartRetriesBusyPort: the harness itself. A node whose listen
// port another process took starts on another port, and answers there.
func TestNodeStartRetriesBusyPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	n := newNode(t, nodeOpts{})
	taken := ln.Addr().String()
	for i, a := range n.args {
		if a == "--pg-addr" {
			n.args[i+1] = taken
		}
	}
	n.start()
	n.waitHealthy()
	defer n.stop()
	if n.portRetries != 1 || n.pgAddr() == taken {
		t.Fatalf("retries %d, pg address %s (taken: %s)", n.portRetries, n.pgAddr(), taken)
	}
	conn := connect(t, n.pgURL(), pgx.QueryExecModeSimpleProtocol)
	defer conn.Close(context.Background())
	var one int
	if err := conn.QueryRow(context.Background(), "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1 on the new port: %d %v", one, err)
	}
}
