package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minkdb/mink/server"
)

// runMinkEnv runs a mink CLI command to completion with env added to the
// environment (MINK_PASSWORD dropped from it unless env sets it).
func runMinkEnv(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, minkBin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MINK_PASSWORD=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("mink %v did not finish within a minute:\n%s", args, errb.String())
	}
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// curlCode is the HTTP status curl gets for url (with curl's extra args).
func curlCode(t *testing.T, url string, args ...string) string {
	t.Helper()
	curl := requireCommand(t, "curl")
	out, err := exec.Command(curl, append([]string{"-sS", "--max-time", "10", "-o", "/dev/null", "-w", "%{http_code}"}, append(args, url)...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("curl %v %s: %v\n%s", args, url, err, out)
	}
	return string(out)
}

func writePasswordFile(t *testing.T, password string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(f, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// wantOneLineError fails unless a CLI run exited 1 with one line on stderr
// that says want.
func wantOneLineError(t *testing.T, what string, stdout, stderr string, code int, want string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if code != 1 || len(lines) != 1 || !strings.HasPrefix(lines[0], "mink: ") || !strings.Contains(lines[0], want) {
		t.Fatalf("%s: exit %d, want 1 and one line 'mink: …%s…'; stderr:\n%s\nstdout:\n%s", what, code, want, stderr, stdout)
	}
}

// A node with a superuser password: /healthz and /metrics answer curl
// without credentials, the rest of the admin API only a superuser (curl -u,
// the CLI with --password-file or MINK_PASSWORD); a role made over SQL
// that is not a superuser is 403; no password reaches the log.
func TestAdminAuthSingleNode(t *testing.T) {
	const password = "admin pw 7"
	n := startSecureNode(t, t.TempDir(), password)
	base := "http://" + n.admin
	for _, path := range []string{"/healthz", "/metrics"} {
		if code := curlCode(t, base+path); code != "200" {
			t.Fatalf("curl %s without credentials: %s, want 200", path, code)
		}
	}
	for _, path := range []string{"/api/v1/cluster/status", "/api/v1/tiering/status", "/debug/pprof/cmdline"} {
		if code := curlCode(t, base+path); code != "401" {
			t.Fatalf("curl %s without credentials: %s, want 401", path, code)
		}
	}
	curl := requireCommand(t, "curl")
	out, err := exec.Command(curl, "-sS", "-i", base+"/api/v1/cluster/status").CombinedOutput()
	if err != nil || !strings.Contains(strings.ToLower(string(out)), `www-authenticate: basic realm="mink"`) || !strings.Contains(string(out), `{"error":"authentication required`) {
		t.Fatalf("curl -i without credentials: %v\n%s", err, out)
	}
	if code := curlCode(t, base+"/api/v1/cluster/status", "-u", "mink:"+password); code != "200" {
		t.Fatalf("curl -u mink: %s, want 200", code)
	}
	if code := curlCode(t, base+"/api/v1/cluster/status", "-u", "mink:wrong"); code != "401" {
		t.Fatalf("curl -u mink:wrong: %s, want 401", code)
	}
	ctx := context.Background()
	conn, err := n.login(ctx, "mink", password)
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, conn, "CREATE ROLE ops LOGIN PASSWORD 'ops pw'")
	conn.Close(ctx)
	if code := curlCode(t, base+"/api/v1/cluster/status", "-u", "ops:ops pw"); code != "403" {
		t.Fatalf("curl -u ops: %s, want 403", code)
	}
	if code := curlCode(t, base+"/api/v1/cluster/rebalance?dry_run=1", "-X", "POST", "-u", "ops:ops pw"); code != "403" {
		t.Fatalf("curl -u ops POST rebalance: %s, want 403", code)
	}

	// The CLI.
	pwFile := writePasswordFile(t, password)
	stdout, stderr, code := runMinkEnv(t, nil, "cluster", "status", "--server", n.admin, "--password-file", pwFile)
	if code != 0 || !strings.Contains(stdout, "coordinator: node 1") {
		t.Fatalf("cluster status --password-file: exit %d\n%s%s", code, stdout, stderr)
	}
	stdout, stderr, code = runMinkEnv(t, []string{"MINK_PASSWORD=" + password}, "tiering", "status", "--server", n.admin)
	if code != 0 || !strings.Contains(stdout, "coordinator: node 1") {
		t.Fatalf("tiering status with MINK_PASSWORD: exit %d\n%s%s", code, stdout, stderr)
	}
	stdout, stderr, code = runMinkEnv(t, []string{"MINK_PASSWORD=wrong"}, "cluster", "status", "--server", n.admin)
	wantOneLineError(t, "MINK_PASSWORD=wrong", stdout, stderr, code,
		`the admin API refused the credentials of user "mink": give --password-file or MINK_PASSWORD`)
	stdout, stderr, code = runMinkEnv(t, nil, "table", "buckets", "t", "--server", n.admin)
	wantOneLineError(t, "no password", stdout, stderr, code, "needs the password of a superuser: give --password-file or MINK_PASSWORD")
	stdout, stderr, code = runMinkEnv(t, []string{"MINK_PASSWORD=ops pw"}, "cluster", "status", "--user", "ops", "--server", n.admin)
	wantOneLineError(t, "--user ops", stdout, stderr, code, `the admin API refused user "ops": the role is not a superuser`)
	// --password-file wins over MINK_PASSWORD.
	if _, stderr, code := runMinkEnv(t, []string{"MINK_PASSWORD=wrong"}, "cluster", "status", "--server", n.admin, "--password-file", pwFile); code != 0 {
		t.Fatalf("--password-file with a wrong MINK_PASSWORD: exit %d: %s", code, stderr)
	}
	if _, stderr, code := runMinkEnv(t, nil, "cluster", "status", "--server", n.admin, "--password-file", filepath.Join(t.TempDir(), "none")); code != 2 || !strings.Contains(stderr, "--password-file") {
		t.Fatalf("a missing --password-file: exit %d: %s", code, stderr)
	}
	checkLoginLog(t, n, "admin", "mink", password, "ops pw")
	n.stop()
}

// Two nodes with a superuser password: a request the CLI sends to the node
// that is not the coordinator is forwarded with a token of the caller's
// role, which the coordinator accepts for the superuser; ops gets 403.
func TestAdminAuthForwarded(t *testing.T) {
	const password = "cluster pw"
	pwFile := writePasswordFile(t, password)
	etcd := startTestEtcd(t)
	endpoints := strings.Join(etcd.Endpoints(), ",")
	extra := []string{"--superuser-password-file", pwFile, "--object-store", "file://" + t.TempDir(), "--coordinator-tick", "200ms"}
	nodes := make([]*node, 2)
	for i := range nodes {
		nodes[i] = newNode(t, nodeOpts{nodeID: i + 1, etcd: endpoints, leaseTTL: "3s", extra: extra})
		nodes[i].start()
		nodes[i].waitHealthy() // node 1 first: it becomes the coordinator
	}
	creds := []string{"--password-file", pwFile}
	var st server.ClusterStatus
	waitFor(t, 30*time.Second, "two live nodes and a coordinator", func() bool {
		out, _, code := runMinkEnv(t, nil, append([]string{"cluster", "status", "--json", "--server", nodes[1].admin}, creds...)...)
		st = server.ClusterStatus{}
		return code == 0 && json.Unmarshal([]byte(out), &st) == nil && countLive(st) == 2 &&
			st.Coordinator.Epoch > 0 && st.Coordinator.Node == st.Coordinator.LeaseHolder
	})
	coordinator, other := nodes[0], nodes[1]
	if st.Coordinator.Node != 1 {
		coordinator, other = nodes[1], nodes[0]
	}
	ctx := context.Background()
	conn, err := coordinator.login(ctx, "mink", password)
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, conn, "CREATE ROLE ops LOGIN PASSWORD 'ops pw'")
	mustExec(t, conn, "CREATE TABLE ev (id bigint NOT NULL) WITH (buckets = 2)")
	mustExec(t, conn, "INSERT INTO ev SELECT range FROM range(50)")
	conn.Close(ctx)

	coordinatorIs := fmt.Sprintf("coordinator: node %d", st.Coordinator.Node)
	out, errOut, code := runMinkEnv(t, nil, append([]string{"cluster", "rebalance", "--dry-run", "--server", other.admin}, creds...)...)
	if code != 0 || !strings.Contains(out, coordinatorIs) || !strings.Contains(out, "dry run: nothing moved") {
		t.Fatalf("rebalance --dry-run through node %s: exit %d\n%s%s", other.admin, code, out, errOut)
	}
	out, errOut, code = runMinkEnv(t, nil, append([]string{"tiering", "run", "--table", "ev", "--wait", "--server", other.admin}, creds...)...)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("round of ev on node %d", st.Coordinator.Node)) || !strings.Contains(out, "done: 50 rows tiered") {
		t.Fatalf("tiering run through node %s: exit %d\n%s%s", other.admin, code, out, errOut)
	}
	for _, args := range [][]string{
		{"cluster", "rebalance", "--dry-run"},
		{"tiering", "run", "--table", "ev"},
		{"tiering", "status"},
	} {
		out, errOut, code := runMinkEnv(t, []string{"MINK_PASSWORD=ops pw"}, append(args, "--user", "ops", "--server", other.admin)...)
		wantOneLineError(t, strings.Join(args, " ")+" as ops", out, errOut, code, `the admin API refused user "ops": the role is not a superuser`)
	}
	// Without credentials the node that is not the coordinator refuses
	// before it forwards anything.
	if code := curlCode(t, "http://"+other.admin+"/api/v1/tiering/status"); code != "401" {
		t.Fatalf("curl tiering status through node %s without credentials: %s, want 401", other.admin, code)
	}
	for _, n := range nodes {
		n.stop()
	}
}
