package main

// End-to-end test of TLS in the Rust client (clients/rust, Config::tls):
// its examples, which read the CA, a client certificate and the name to
// verify from MINK_CA_FILE, MINK_CERT_FILE, MINK_KEY_FILE and
// MINK_TLS_DOMAIN, against mink nodes started with the TLS flags.

import (
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

// One Rust client over TLS while buckets move: node 1 alone leads a
// table; the session (seeded with a grpc+tls:// location and the CA)
// writes to it; two nodes join and a rebalance moves buckets away, so the
// session's next write follows NotLeader redirects to grpc+tls://
// locations and dials the new leaders over TLS. One-shot examples then
// scan and load through other seeds (a bare host:port with the CA selects
// TLS), present a client certificate the cluster's CA signed, verify
// MINK_TLS_DOMAIN's name, and fail at once, with the cause, without the
// CA (the system's roots do not know it), with another CA's client
// certificate, with a name the certificates do not hold, and in plaintext.
func TestRustClientTLS(t *testing.T) {
	rustExamples(t)
	pki := newTLSPKI(t, "rust-tls-ca")
	etcd := startTestEtcd(t)
	endpoints := strings.Join(etcd.Endpoints(), ",")
	store := "file://" + t.TempDir()
	var nodes []*node
	for i := 1; i <= 3; i++ {
		certFile, keyFile := pki.issue(t, fmt.Sprintf("node%d", i), int64(3000+i), []string{"localhost"}, "127.0.0.1")
		extra := append(pki.flags(certFile, keyFile), "--object-store", store, "--coordinator-tick", "300ms")
		nodes = append(nodes, newNode(t, nodeOpts{nodeID: i, etcd: endpoints, leaseTTL: "3s", extra: extra}))
	}
	defer func() {
		for _, n := range nodes {
			n.stop()
		}
	}()
	admin := func(n *node, out any, args ...string) bool {
		stdout, _, code := runMinkQuiet(10*time.Second, append(args, "--json", "--ca-file", pki.caFile, "--server", "https://"+n.admin)...)
		return code == 0 && json.Unmarshal([]byte(stdout), out) == nil
	}
	waitLive := func(want int) {
		t.Helper()
		waitFor(t, 30*time.Second, fmt.Sprintf("%d live nodes and a coordinator", want), func() bool {
			var st server.ClusterStatus
			return admin(nodes[0], &st, "cluster", "status") && countLive(st) == want &&
				st.Coordinator.Epoch > 0 && st.Coordinator.Node == st.Coordinator.LeaseHolder
		})
	}
	// served waits for every bucket of rt to be open and returns them.
	served := func() []server.BucketStatus {
		t.Helper()
		var bs []server.BucketStatus
		waitFor(t, 60*time.Second, "every bucket of rt open", func() bool {
			if !admin(nodes[0], &bs, "table", "buckets", "rt") {
				return false
			}
			for _, b := range bs {
				if !b.Open {
					return false
				}
			}
			return len(bs) == 3
		})
		return bs
	}

	nodes[0].start()
	nodes[0].waitHealthyTLS(pki.pool())
	waitLive(1)
	ctx := context.Background()
	conn, err := nodes[0].pgTLS(ctx, "localhost", pki.caFile)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE TABLE rt (id bigint NOT NULL, v text) WITH (buckets = 3, bucket_key = 'id')"); err != nil {
		t.Fatal(err)
	}
	served()

	// The session inherits the CA from the environment.
	t.Setenv("MINK_CA_FILE", pki.caFile)
	s := startRustSession(t, "grpc+tls://"+nodes[0].flightAddr(), "rt")
	s.mustDo("append 1 1000", "acknowledged 1000 unacked -")
	for i := 0; i < 3; i++ {
		s.mustDo(fmt.Sprintf("leader %d", i), "leader "+nodes[0].flightAddr())
	}

	nodes[1].start()
	nodes[2].start()
	nodes[1].waitHealthyTLS(pki.pool())
	nodes[2].waitHealthyTLS(pki.pool())
	waitLive(3)
	out, errOut, code := nodes[2].adminTLS(t, pki.caFile, "cluster", "rebalance")
	if code != 0 || !strings.Contains(out, "done:") {
		t.Fatalf("rebalance: exit %d\n%s%s", code, out, errOut)
	}
	bs := served()
	moved, newLeader := -1, ""
	for _, b := range bs {
		if b.Leader != 1 {
			moved, newLeader = b.Index, nodes[b.Leader-1].flightAddr()
		}
	}
	if moved < 0 {
		t.Fatalf("the rebalance moved no bucket of rt: %v", bs)
	}
	t.Logf("bucket index %d moved to %s: %v", moved, newLeader, bs)
	// The cache still names node 1; the write follows the redirect to a
	// grpc+tls:// location and connects there over TLS.
	s.mustDo(fmt.Sprintf("leader %d", moved), "leader "+nodes[0].flightAddr())
	s.mustDo("append 1001 2000", "acknowledged 1000 unacked -")
	s.mustDo(fmt.Sprintf("leader %d", moved), "leader "+newLeader)
	s.mustDo("scan", "rows 2000 distinct 2000")

	// rust runs an example with exactly the TLS variables in env.
	rust := func(env []string, name string, args ...string) (string, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(rustExamples(t), name), append(args, "--table", "rt")...)
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "MINK_") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		cmd.Env = append(cmd.Env, env...)
		start := time.Now()
		b, err := cmd.CombinedOutput()
		out := strings.TrimSpace(string(b))
		t.Logf("%v %s %v (%v, %v): %s", env, name, args, time.Since(start).Round(time.Millisecond), err, lastLines(out, 3))
		return out, err
	}
	ca := "MINK_CA_FILE=" + pki.caFile
	tlsSeed := "grpc+tls://" + nodes[1].flightAddr()
	mustOut := func(out string, err error, want string) {
		t.Helper()
		if err != nil || !strings.HasSuffix(out, want) {
			t.Fatalf("got %v\n%s\nwant the last line %q", err, out, want)
		}
	}
	mustFail := func(out string, err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(out, want) {
			t.Fatalf("got %v\n%s\nwant a failure with %q", err, out, want)
		}
	}
	// A scan through node 2 reads every bucket from its leader over TLS.
	out, err = rust([]string{ca}, "scan", "--server", tlsSeed)
	mustOut(out, err, "rows 2000")
	// A bare host:port with the CA is TLS too.
	out, err = rust([]string{ca}, "load", "--server", nodes[2].flightAddr(), "--rows", "500", "--from", "2001")
	mustOut(out, err, "acknowledged 500")

	// A client certificate signed by the cluster's CA (the nodes verify
	// one with --tls-client-ca-file) is accepted; another CA's is refused.
	cert, key := pki.issue(t, "rust-client", 3100, []string{"rust-client"})
	out, err = rust([]string{ca, "MINK_CERT_FILE=" + cert, "MINK_KEY_FILE=" + key}, "scan", "--server", tlsSeed)
	mustOut(out, err, "rows 2500")
	other := newTLSPKI(t, "other-ca")
	otherCert, otherKey := other.issue(t, "stranger", 1, []string{"stranger"})
	out, err = rust([]string{ca, "MINK_CERT_FILE=" + otherCert, "MINK_KEY_FILE=" + otherKey, "MINK_TLS_DOMAIN=localhost"},
		"scan", "--server", tlsSeed, "--timeout-secs", "5")
	// TLS 1.3: the node refuses it after the handshake; the client reads
	// its alert (UnknownCA) or a closed connection, whichever comes first.
	mustFail(out, err, "transport error")

	// MINK_TLS_DOMAIN is the name verified instead of 127.0.0.1.
	out, err = rust([]string{ca, "MINK_TLS_DOMAIN=localhost"}, "scan", "--server", tlsSeed)
	mustOut(out, err, "rows 2500")
	out, err = rust([]string{ca, "MINK_TLS_DOMAIN=elsewhere.example"}, "scan", "--server", tlsSeed)
	mustFail(out, err, `scan: TLS: invalid peer certificate: certificate not valid for name "elsewhere.example"`)

	// Without the CA a grpc+tls:// seed verifies against the system's
	// roots, which do not know the test's CA: refused at once.
	out, err = rust(nil, "scan", "--server", tlsSeed)
	mustFail(out, err, "scan: TLS: invalid peer certificate: UnknownIssuer")
	// Plaintext towards a TLS listener: the node closes the connection.
	out, err = rust(nil, "scan", "--server", nodes[1].flightAddr(), "--timeout-secs", "3")
	mustFail(out, err, "transport error")

	var count, distinct int64
	if err := conn.QueryRow(ctx, "SELECT count(*), count(DISTINCT id) FROM rt").Scan(&count, &distinct); err != nil {
		t.Fatal(err)
	}
	if count != 2500 || distinct != 2500 {
		t.Fatalf("rt has %d rows, %d distinct ids; want 2500 of each", count, distinct)
	}
}
