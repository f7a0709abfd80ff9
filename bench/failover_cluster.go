package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/minkdb/mink/internal/embedetcd"
	"github.com/minkdb/mink/server"
)

// A cluster of mink server processes for the cluster benchmarks (failover
// and throughput): one etcd member in this process, a shared local object
// store, and n nodes built from this module's cmd/mink. Processes are what
// a failover needs: the benchmark kills one with SIGKILL.

// buildMink builds cmd/mink into dir and returns the binary's path.
func buildMink(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "mink")
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "duckdb_arrow", "-o", bin, "github.com/minkdb/mink/cmd/mink")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build mink: %v\n%s", err, out)
	}
	return bin, nil
}

type procCluster struct {
	bin   string
	dir   string
	etcd  *embedetcd.Etcd
	nodes []*procNode
}

type procNode struct {
	id      int
	args    []string
	pg      string
	flight  string
	admin   string
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{}
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// startProcCluster starts n nodes with the given lease TTL and coordinator
// tick and waits until they are all live.
func startProcCluster(ctx context.Context, bin, dir string, n int, leaseTTL, tick time.Duration) (*procCluster, error) {
	c := &procCluster{bin: bin, dir: dir}
	var etcdAddr string
	for {
		// The embedded etcd's peer port is its client port + 1.
		a, err := freeAddr()
		if err != nil {
			return nil, err
		}
		host, port, _ := net.SplitHostPort(a)
		var p int
		fmt.Sscan(port, &p)
		if ln, err := net.Listen("tcp", net.JoinHostPort(host, fmt.Sprint(p+1))); err == nil {
			ln.Close()
			etcdAddr = a
			break
		}
	}
	var err error
	c.etcd, err = embedetcd.Start(ctx, embedetcd.Config{Dir: filepath.Join(dir, "etcd"), ClientAddr: etcdAddr,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return nil, err
	}
	store := "file://" + filepath.Join(dir, "objects")
	for i := 1; i <= n; i++ {
		nd := &procNode{id: i, logPath: filepath.Join(dir, fmt.Sprintf("node%d.log", i))}
		for _, p := range []*string{&nd.pg, &nd.flight, &nd.admin} {
			if *p, err = freeAddr(); err != nil {
				c.close()
				return nil, err
			}
		}
		nd.args = []string{"server", "--node-id", fmt.Sprint(i), "--data-dir", filepath.Join(dir, fmt.Sprintf("node%d", i)),
			"--etcd-endpoints", strings.Join(c.etcd.Endpoints(), ","), "--object-store", store,
			"--pg-addr", nd.pg, "--flight-addr", nd.flight, "--admin-addr", nd.admin, "--kafka-addr", "",
			"--lease-ttl", leaseTTL.String(), "--coordinator-tick", tick.String(), "--log-format", "json"}
		c.nodes = append(c.nodes, nd)
		if err := nd.start(bin); err != nil {
			c.close()
			return nil, err
		}
	}
	for _, nd := range c.nodes {
		if err := nd.waitHealthy(ctx); err != nil {
			c.close()
			return nil, err
		}
	}
	deadline := time.Now().Add(time.Minute)
	for {
		st, err := server.NewAdminClient(c.nodes[0].admin).ClusterStatus(ctx)
		live := 0
		if err == nil {
			for _, ns := range st.Nodes {
				if ns.Live {
					live++
				}
			}
		}
		if live == n {
			return c, nil
		}
		if time.Now().After(deadline) {
			c.close()
			return nil, fmt.Errorf("%d of %d nodes live after a minute", live, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (nd *procNode) start(bin string) error {
	f, err := os.OpenFile(nd.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	nd.cmd = exec.Command(bin, nd.args...)
	nd.cmd.Stderr = f
	nd.exited = make(chan struct{})
	if err := nd.cmd.Start(); err != nil {
		f.Close()
		return err
	}
	go func() { nd.cmd.Wait(); f.Close(); close(nd.exited) }()
	return nil
}

func (nd *procNode) waitHealthy(ctx context.Context) error {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		select {
		case <-nd.exited:
			return fmt.Errorf("node %d exited at start; log in %s", nd.id, nd.logPath)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		resp, err := http.Get("http://" + nd.admin + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("node %d not healthy after a minute", nd.id)
}

func (nd *procNode) kill() {
	if nd.cmd != nil && nd.cmd.Process != nil {
		nd.cmd.Process.Kill()
		<-nd.exited
	}
}

func (nd *procNode) running() bool {
	select {
	case <-nd.exited:
		return false
	default:
		return nd.cmd != nil
	}
}

func (nd *procNode) connect(ctx context.Context) (*pgx.Conn, error) {
	return pgx.Connect(ctx, fmt.Sprintf("postgres://mink@%s/mink?sslmode=disable", nd.pg))
}

func (c *procCluster) close() {
	var wg sync.WaitGroup
	for _, nd := range c.nodes {
		if nd.running() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				nd.cmd.Process.Signal(os.Interrupt)
				select {
				case <-nd.exited:
				case <-time.After(15 * time.Second):
					nd.kill()
				}
			}()
		}
	}
	wg.Wait()
	if c.etcd != nil {
		c.etcd.Close()
	}
}

// logEvent is one line of a node's JSON log.
type logEvent struct {
	Time   time.Time `json:"time"`
	Msg    string    `json:"msg"`
	Bucket uint64    `json:"bucket"`
	Holder uint32    `json:"holder"`
}

// readLog returns the events of node nd's log with msg among msgs, at or
// after since.
func (nd *procNode) readLog(since time.Time, msgs ...string) ([]logEvent, error) {
	f, err := os.Open(nd.logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	want := map[string]bool{}
	for _, m := range msgs {
		want[m] = true
	}
	var out []logEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev logEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil || !want[ev.Msg] || ev.Time.Before(since) {
			continue
		}
		out = append(out, ev)
	}
	return out, sc.Err()
}
