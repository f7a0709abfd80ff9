package main

// The harness of the cluster fault tests (cluster_faults_e2e_test.go,
// cluster_random_e2e_test.go): three mink server processes on one etcd (an
// embedded member in the test process, or a three-member etcd cluster run as
// helper processes) and one object store (a local directory or versitygw),
// with short timings.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap/zapcore"

	"github.com/minkdb/mink/internal/embedetcd"
	"github.com/minkdb/mink/internal/s3test"
	"github.com/minkdb/mink/server"
)

// etcdMemberEnv makes the test binary run one member of a multi-member etcd
// cluster instead of the tests (see startEtcdCluster). It is checked in init,
// before TestMain builds the mink binary.
const etcdMemberEnv = "MINK_E2E_ETCD_MEMBER"

type etcdMemberSpec struct {
	Name    string `json:"name"`
	Dir     string `json:"dir"`
	Client  string `json:"client"`  // host:port
	Peer    string `json:"peer"`    // host:port
	Cluster string `json:"cluster"` // name=http://peer,...
}

func init() {
	if spec := os.Getenv(etcdMemberEnv); spec != "" {
		os.Exit(runEtcdMember(spec))
	}
}

// runEtcdMember runs one etcd member until SIGTERM (or SIGKILL).
func runEtcdMember(specJSON string) int {
	var spec etcdMemberSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "etcd member spec:", err)
		return 2
	}
	clientURL := url.URL{Scheme: "http", Host: spec.Client}
	peerURL := url.URL{Scheme: "http", Host: spec.Peer}
	cfg := embed.NewConfig()
	cfg.Name = spec.Name
	cfg.Dir = spec.Dir
	cfg.ListenClientUrls = []url.URL{clientURL}
	cfg.AdvertiseClientUrls = []url.URL{clientURL}
	cfg.ListenPeerUrls = []url.URL{peerURL}
	cfg.AdvertisePeerUrls = []url.URL{peerURL}
	cfg.InitialCluster = spec.Cluster
	cfg.InitialClusterToken = "mink-e2e"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(embedetcd.ZapLogger(slog.New(slog.NewTextHandler(os.Stderr, nil)), zapcore.WarnLevel))
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "start etcd member:", err)
		return 1
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	select {
	case <-e.Server.ReadyNotify():
		fmt.Println("ready")
	case err := <-e.Err():
		fmt.Fprintln(os.Stderr, "etcd member:", err)
		return 1
	case <-sig:
		e.Close()
		return 0
	}
	select {
	case err := <-e.Err():
		fmt.Fprintln(os.Stderr, "etcd member:", err)
		e.Close()
		return 1
	case <-sig:
		e.Close()
		return 0
	}
}

// etcdMember is one member process of a multi-member etcd cluster.
type etcdMember struct {
	name   string
	client string
	cmd    *exec.Cmd
	exited chan struct{}
}

func (m *etcdMember) kill() {
	if m.cmd.Process != nil {
		_ = m.cmd.Process.Kill()
		<-m.exited
	}
}

// startEtcdCluster starts an n-member etcd cluster, each member a helper
// process (this test binary re-run with etcdMemberEnv), and returns once
// every member is ready. A member's port can be taken by another process
// between freePort and its listen (packages test at once), so a start in
// which a member exits or the cluster does not form is tried again on
// other ports.
func startEtcdCluster(t *testing.T, n int) []*etcdMember {
	t.Helper()
	for attempt := 1; ; attempt++ {
		members, err := tryEtcdCluster(t, n)
		if err == nil {
			return members
		}
		for _, m := range members {
			m.kill()
		}
		if attempt == 3 {
			t.Fatalf("etcd cluster of %d members: %v", n, err)
		}
		t.Logf("etcd cluster of %d members, attempt %d: %v; trying again on other ports", n, attempt, err)
	}
}

func tryEtcdCluster(t *testing.T, n int) ([]*etcdMember, error) {
	t.Helper()
	members := make([]*etcdMember, n)
	var specs []etcdMemberSpec
	var cluster []string
	for i := range members {
		port := freePort(t, true)
		spec := etcdMemberSpec{
			Name:   fmt.Sprintf("e%d", i+1),
			Dir:    filepath.Join(t.TempDir(), "etcd"),
			Client: fmt.Sprintf("127.0.0.1:%d", port),
			Peer:   fmt.Sprintf("127.0.0.1:%d", port+1),
		}
		specs = append(specs, spec)
		cluster = append(cluster, spec.Name+"=http://"+spec.Peer)
	}
	ready := make(chan string, n)
	died := make(chan int, n) // the index of a member that exited
	var errMu sync.Mutex
	stderr := make([]*bytes.Buffer, n)
	var started []*etcdMember
	for i := range members {
		specs[i].Cluster = strings.Join(cluster, ",")
		raw, _ := json.Marshal(specs[i])
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), etcdMemberEnv+"="+string(raw))
		stderr[i] = &bytes.Buffer{}
		cmd.Stderr = &lockedWriter{mu: &errMu, w: stderr[i]}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		m := &etcdMember{name: specs[i].Name, client: "http://" + specs[i].Client, cmd: cmd, exited: make(chan struct{})}
		members[i] = m
		started = append(started, m)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if sc.Text() == "ready" {
					ready <- m.name
				}
			}
			cmd.Wait()
			close(m.exited)
			died <- i
		}()
		t.Cleanup(m.kill)
	}
	tail := func(i int) string {
		errMu.Lock()
		defer errMu.Unlock()
		lines := strings.Split(strings.TrimSpace(stderr[i].String()), "\n")
		return strings.Join(lines[max(0, len(lines)-3):], " | ")
	}
	deadline := time.After(60 * time.Second)
	for got := 0; got < n; {
		select {
		case <-ready:
			got++
		case i := <-died:
			return started, fmt.Errorf("member %s exited before the cluster was ready: %s", members[i].name, tail(i))
		case <-deadline:
			return started, fmt.Errorf("not ready after 60s (member e1: %s)", tail(0))
		}
	}
	return members, nil
}

// testCluster is mink server processes sharing one etcd and one object store.
type testCluster struct {
	t         *testing.T
	nodes     []*node
	endpoints string
	members   []*etcdMember // nil with the in-process etcd

	mu     sync.Mutex
	paused map[*node]bool
	// earlier holds each node's log from its earlier starts (node.start
	// resets it).
	earlier map[*node]*strings.Builder
}

// restart starts node n again, keeping the log of its previous run.
func (c *testCluster) restart(n *node) {
	c.mu.Lock()
	if c.earlier[n] == nil {
		c.earlier[n] = &strings.Builder{}
	}
	c.earlier[n].WriteString(n.log())
	c.mu.Unlock()
	n.start()
}

// fullLog is node n's log over all its starts.
func (c *testCluster) fullLog(n *node) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := n.log()
	if b := c.earlier[n]; b != nil {
		s = b.String() + s
	}
	return s
}

// pause stops node n with SIGSTOP; status polls skip it until resume.
func (c *testCluster) pause(n *node) {
	c.mu.Lock()
	c.paused[n] = true
	c.mu.Unlock()
	n.signal(syscall.SIGSTOP)
}

func (c *testCluster) resume(n *node) {
	n.signal(syscall.SIGCONT)
	c.mu.Lock()
	delete(c.paused, n)
	c.mu.Unlock()
}

func (c *testCluster) isPaused(n *node) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.paused[n]
}

type clusterOpts struct {
	nodes       int    // default 3
	etcdMembers int    // 0 or 1: an embedded etcd in the test process; 3: helper processes
	s3          bool   // versitygw instead of a local directory
	leaseTTL    string // default 2s
	tick        string // default 500ms
}

// newTestCluster creates the nodes (not started; see startAll).
func newTestCluster(t *testing.T, o clusterOpts) *testCluster {
	t.Helper()
	if o.nodes == 0 {
		o.nodes = 3
	}
	if o.leaseTTL == "" {
		o.leaseTTL = "2s"
	}
	if o.tick == "" {
		o.tick = "500ms"
	}
	c := &testCluster{t: t, paused: map[*node]bool{}, earlier: map[*node]*strings.Builder{}}
	if o.etcdMembers > 1 {
		c.members = startEtcdCluster(t, o.etcdMembers)
		var eps []string
		for _, m := range c.members {
			eps = append(eps, m.client)
		}
		c.endpoints = strings.Join(eps, ",")
	} else {
		etcd := startTestEtcd(t)
		c.endpoints = strings.Join(etcd.Endpoints(), ",")
	}
	extra := []string{"--coordinator-tick", o.tick}
	var env []string
	if o.s3 {
		s3 := s3test.Start(t)
		extra = append(extra, "--object-store", s3.URL("cluster"), "--s3-endpoint", s3.Endpoint)
		env = []string{"AWS_ACCESS_KEY_ID=" + s3.AccessKey, "AWS_SECRET_ACCESS_KEY=" + s3.SecretKey, "AWS_REGION=" + s3.Region}
	} else {
		extra = append(extra, "--object-store", "file://"+t.TempDir())
	}
	for i := 0; i < o.nodes; i++ {
		n := newNode(t, nodeOpts{nodeID: i + 1, etcd: c.endpoints, leaseTTL: o.leaseTTL, extra: extra})
		n.env = env
		c.nodes = append(c.nodes, n)
	}
	// MINK_E2E_LOGS=dir keeps each node's log there.
	if dir := os.Getenv("MINK_E2E_LOGS"); dir != "" {
		t.Cleanup(func() {
			for i, n := range c.nodes {
				os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-node%d.log", t.Name(), i+1)), []byte(c.fullLog(n)), 0o644)
			}
		})
	}
	return c
}

// startAll starts every node and waits until all are live.
func (c *testCluster) startAll() {
	c.t.Helper()
	for _, n := range c.nodes {
		n.start()
	}
	for _, n := range c.nodes {
		n.waitHealthy()
	}
	c.waitLive(len(c.nodes))
}

// waitLive waits until want nodes are live, as node 1..n see it.
func (c *testCluster) waitLive(want int) {
	c.t.Helper()
	waitFor(c.t, 60*time.Second, fmt.Sprintf("%d live nodes", want), func() bool {
		st, ok := c.status()
		return ok && countLive(st) == want
	})
}

func countLive(st server.ClusterStatus) int {
	live := 0
	for _, n := range st.Nodes {
		if n.Live {
			live++
		}
	}
	return live
}

// status asks the first running node that answers (not a paused one).
func (c *testCluster) status() (server.ClusterStatus, bool) {
	for _, n := range c.running() {
		if c.isPaused(n) {
			continue
		}
		out, _, code := runMinkQuiet(10*time.Second, "cluster", "status", "--json", "--server", n.admin)
		var st server.ClusterStatus
		if code == 0 && json.Unmarshal([]byte(out), &st) == nil {
			return st, true
		}
	}
	return server.ClusterStatus{}, false
}

// running are the nodes whose process runs (paused ones included).
func (c *testCluster) running() []*node {
	var out []*node
	for _, n := range c.nodes {
		if n.cmd == nil {
			continue
		}
		select {
		case <-n.exited:
		default:
			out = append(out, n)
		}
	}
	return out
}

// buckets is `mink table buckets NAME --json` through node n.
func (c *testCluster) buckets(n *node, table string) ([]server.BucketStatus, error) {
	out, errOut, code := runMinkQuiet(30*time.Second, "table", "buckets", table, "--json", "--server", n.admin)
	if code != 0 {
		return nil, fmt.Errorf("table buckets exit %d: %s", code, errOut)
	}
	var bs []server.BucketStatus
	if err := json.Unmarshal([]byte(out), &bs); err != nil {
		return nil, fmt.Errorf("table buckets --json: %v", err)
	}
	return bs, nil
}

// waitServed waits until, as node n sees it, every bucket of table is led
// by a live node and open there, and returns the buckets.
func (c *testCluster) waitServed(n *node, table string, timeout time.Duration) []server.BucketStatus {
	c.t.Helper()
	var bs []server.BucketStatus
	waitFor(c.t, timeout, "every bucket of "+table+" led by a live node and open", func() bool {
		st, ok := c.status()
		if !ok {
			return false
		}
		var err error
		if bs, err = c.buckets(n, table); err != nil {
			return false
		}
		for _, b := range bs {
			ns, _ := findNode(st, uint32(b.Leader))
			if !b.Open || !ns.Live {
				return false
			}
		}
		return len(bs) > 0
	})
	return bs
}

// pg connects to node n's Postgres listener.
func (n *node) pg(ctx context.Context) (*pgx.Conn, error) {
	return pgx.Connect(ctx, fmt.Sprintf("postgres://mink@%s/mink?sslmode=disable&connect_timeout=10", n.pgAddr()))
}

// flightAddr is the node's --flight-addr.
func (n *node) flightAddr() string {
	for i, a := range n.args {
		if a == "--flight-addr" {
			return n.args[i+1]
		}
	}
	return ""
}

// runMinkQuiet is runMink for polling loops: a command that does not finish
// counts as a failure instead of ending the test.
func runMinkQuiet(timeout time.Duration, args ...string) (stdout, stderr string, code int) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, minkBin, args...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return out.String(), errb.String(), ee.ExitCode()
	} else if err != nil {
		return out.String(), errb.String() + err.Error(), -1
	}
	return out.String(), errb.String(), 0
}
