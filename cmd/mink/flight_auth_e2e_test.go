package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/minkdb/mink/auth"
	"github.com/minkdb/mink/client"
	"github.com/minkdb/mink/internal/flightwire"
)

// Arrow Flight authentication with the clients people use: arrow-go's
// AuthenticateBasicToken, pyarrow's authenticate_basic_token, mink's Go
// client and the Rust client's examples log in as the superuser and as a role made over SQL; a wrong
// password, no token and a forged token read nothing; a role's privileges
// hold for the next call of an open client.
func TestFlightAuthClients(t *testing.T) {
	n := startSecureNode(t, t.TempDir(), "root pw")
	ctx := context.Background()
	admin, err := n.login(ctx, "mink", "root pw")
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	mustExec(t, admin, "CREATE TABLE fa (id bigint NOT NULL, name text) WITH (buckets = 2, bucket_key = 'id')")
	mustExec(t, admin, "INSERT INTO fa SELECT i, 'r' || i FROM range(10) t(i)")
	mustExec(t, admin, "CREATE ROLE alice LOGIN PASSWORD 'alice pw'")
	mustExec(t, admin, "GRANT SELECT ON fa TO alice")
	addr := n.flightAddr()
	fc := arrowFlight(t, addr)

	// The superuser, and what a client without a valid token gets.
	root, err := fc.AuthenticateBasicToken(ctx, "mink", "root pw")
	if err != nil {
		t.Fatalf("AuthenticateBasicToken as mink: %v", err)
	}
	if rows, err := flightRows(root, fc, "fa"); err != nil || rows != 10 {
		t.Fatalf("mink reads %d rows, %v; want 10", rows, err)
	}
	if _, err := fc.AuthenticateBasicToken(ctx, "alice", "wrong"); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("a wrong password: %v, want Unauthenticated", err)
	}
	info, err := fc.GetFlightInfo(root, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"fa"}})
	if err != nil {
		t.Fatal(err)
	}
	forged, err := auth.SignToken(auth.NewKey(), auth.Claims{Role: "mink", Expires: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	for name, cctx := range map[string]context.Context{
		"no token":     ctx,
		"forged token": metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+forged),
	} {
		if _, err := flightRows(cctx, fc, "fa"); status.Code(err) != codes.Unauthenticated {
			t.Errorf("%s, GetFlightInfo: %v, want Unauthenticated", name, err)
		}
		if _, err := readTicket(cctx, fc, info.Endpoint[0].Ticket); status.Code(err) != codes.Unauthenticated {
			t.Errorf("%s, DoGet of a valid ticket: %v, want Unauthenticated", name, err)
		}
	}

	// alice reads, may not write until GRANT INSERT, then the same client
	// writes; REVOKE stops its next call.
	alice, err := fc.AuthenticateBasicToken(ctx, "alice", "alice pw")
	if err != nil {
		t.Fatalf("AuthenticateBasicToken as alice: %v", err)
	}
	if rows, err := flightRows(alice, fc, "fa"); err != nil || rows != 10 {
		t.Fatalf("alice reads %d rows, %v; want 10", rows, err)
	}
	if err := flightPut(alice, fc, "fa", tlsEvents(100, 105)); status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "permission denied for table fa") {
		t.Fatalf("alice's DoPut without INSERT: %v, want PermissionDenied", err)
	}
	mustExec(t, admin, "GRANT INSERT ON fa TO alice")
	if err := flightPut(alice, fc, "fa", tlsEvents(100, 105)); err != nil {
		t.Fatalf("alice's DoPut after GRANT INSERT: %v", err)
	}
	mustExec(t, admin, "REVOKE SELECT ON fa FROM alice")
	if _, err := readTicket(alice, fc, info.Endpoint[0].Ticket); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("alice's DoGet after REVOKE SELECT: %v, want PermissionDenied", err)
	}
	mustExec(t, admin, "GRANT SELECT ON fa TO alice")

	// A new password (the same one set again: a new salt) ends alice's
	// token; a new handshake reads again.
	mustExec(t, admin, "ALTER ROLE alice PASSWORD 'alice pw'")
	if _, err := flightRows(alice, fc, "fa"); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("alice's token after ALTER ROLE … PASSWORD: %v, want Unauthenticated", err)
	}
	if alice, err = fc.AuthenticateBasicToken(ctx, "alice", "alice pw"); err != nil {
		t.Fatalf("AuthenticateBasicToken as alice after the new password: %v", err)
	}
	if rows, err := flightRows(alice, fc, "fa"); err != nil || rows != 15 {
		t.Fatalf("alice reads %d rows after a new handshake, %v; want 15", rows, err)
	}

	// pyarrow, unmodified: authenticate_basic_token, then get_flight_info
	// and do_get with the token pair as a header.
	python := filepath.Join(kafkaClientCache(t), "venv", "bin", "python")
	if out, err := exec.Command(python, "-c", "import pyarrow.flight").CombinedOutput(); err != nil {
		t.Fatalf("pyarrow is not installed in %s (%v: %s): %s", python, err, out, installHint)
	}
	script := `
import sys
import pyarrow.flight as fl
c = fl.connect("grpc+tcp://" + sys.argv[1])
try:
    c.authenticate_basic_token(b"alice", b"wrong")
    print("a wrong password logged in"); sys.exit(1)
except fl.FlightUnauthenticatedError:
    pass
try:
    c.get_flight_info(fl.FlightDescriptor.for_path("fa"))
    print("no token read"); sys.exit(1)
except fl.FlightUnauthenticatedError:
    pass
opts = fl.FlightCallOptions(headers=[c.authenticate_basic_token(b"alice", b"alice pw")])
info = c.get_flight_info(fl.FlightDescriptor.for_path("fa"), opts)
print(sum(c.do_get(ep.ticket, opts).read_all().num_rows for ep in info.endpoints))
`
	out, err := exec.Command(python, "-c", script, addr).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "15" {
		t.Fatalf("pyarrow: %v\n%s", err, out)
	}

	// mink's Go client with Options.User and Password appends and scans.
	if _, err := client.DialOptions(ctx, client.Options{User: "alice", Password: "wrong"}, addr); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("mink's client with a wrong password: %v, want Unauthenticated", err)
	}
	mc, err := client.DialOptions(ctx, client.Options{User: "alice", Password: "alice pw"}, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	rec := tlsEvents(200, 300)
	defer rec.Release()
	if err := mc.AppendTable(ctx, "fa", rec); err != nil {
		t.Fatalf("mink's client appends as alice: %v", err)
	}
	if rows := scanRows(t, mc, "fa"); rows != 115 {
		t.Fatalf("mink's client scans %d rows as alice, want 115", rows)
	}

	// The Rust client's examples log in as $MINK_USER with $MINK_PASSWORD.
	rust := func(password, name string, args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(rustExamples(t), name), append([]string{"--server", addr, "--table", "fa", "--timeout-secs", "10"}, args...)...)
		cmd.Env = append(os.Environ(), "MINK_USER=alice", "MINK_PASSWORD="+password)
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	if out, err := rust("wrong", "scan"); err == nil || !strings.Contains(out, "unauthenticated") {
		t.Fatalf("the Rust client with a wrong password: %v\n%s", err, out)
	}
	if out, err := rust("alice pw", "load", "--rows", "50", "--from", "1000"); err != nil || !strings.HasSuffix(out, "acknowledged 50") {
		t.Fatalf("the Rust client's load as alice: %v\n%s", err, out)
	}
	if out, err := rust("alice pw", "scan"); err != nil || !strings.HasSuffix(out, "rows 165") {
		t.Fatalf("the Rust client's scan as alice: %v\n%s", err, out)
	}

	mustExec(t, admin, "REVOKE INSERT ON fa FROM alice")
	if out, err := rust("alice pw", "load", "--rows", "1", "--from", "2000"); err == nil || !strings.Contains(out, "permission denied for table fa") {
		t.Fatalf("the Rust client's load after REVOKE INSERT: %v\n%s", err, out)
	}
	if err := mc.AppendTable(ctx, "fa", rec); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("mink's client after REVOKE INSERT: %v, want PermissionDenied", err)
	}
}

// Three nodes with a password: a write through a node that does not lead
// the bucket is forwarded with the writer's role, and the leader checks
// that role itself, so a REVOKE refuses the forwarded part there while the
// superuser's forwarded writes go on; SQL on a node reads and writes a
// bucket led by another node as the session's role (SELECT, INSERT and
// COPY), which the leader accepts for the role that holds the privilege.
func TestFlightAuthCluster(t *testing.T) {
	pwFile := filepath.Join(t.TempDir(), "superuser")
	if err := os.WriteFile(pwFile, []byte("root pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	etcd := startTestEtcd(t)
	endpoints := strings.Join(etcd.Endpoints(), ",")
	store := "file://" + t.TempDir()
	var nodes []*node
	for i := 1; i <= 3; i++ {
		n := newNode(t, nodeOpts{nodeID: i, etcd: endpoints, leaseTTL: "3s",
			extra: []string{"--superuser-password-file", pwFile, "--object-store", store, "--coordinator-tick", "300ms"}})
		n.start()
		nodes = append(nodes, n)
	}
	for _, n := range nodes {
		n.waitHealthy()
	}
	ctx := context.Background()
	fcs := map[string]flight.Client{} // by Flight address
	roots := map[string]context.Context{}
	waitFor(t, 60*time.Second, "every node logs mink in over Flight and sees three live nodes", func() bool {
		for _, n := range nodes {
			addr := n.flightAddr()
			if fcs[addr] == nil {
				fcs[addr] = arrowFlight(t, addr)
			}
			root, err := fcs[addr].AuthenticateBasicToken(ctx, "mink", "root pw")
			if err != nil {
				return false
			}
			roots[addr] = root
			var st flightwire.ClusterStatus
			if err := flightwire.DoAction(root, fcs[addr], flightwire.ActionClusterStatus, nil, &st); err != nil {
				return false
			}
			live := 0
			for _, ns := range st.Nodes {
				if ns.Live {
					live++
				}
			}
			if live != 3 {
				return false
			}
		}
		return true
	})
	admin, err := nodes[0].login(ctx, "mink", "root pw")
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	mustExec(t, admin, "CREATE TABLE fwd (id bigint NOT NULL, name text) WITH (buckets = 1)")
	mustExec(t, admin, "CREATE ROLE alice LOGIN PASSWORD 'alice pw'")
	mustExec(t, admin, "GRANT SELECT ON fwd TO alice")

	// The leader of fwd's bucket, and an entry node that does not lead it.
	var leader, entry *node
	var bucket uint64
	waitFor(t, 30*time.Second, "fwd's bucket led and open", func() bool {
		addr := nodes[0].flightAddr()
		info, err := fcs[addr].GetFlightInfo(roots[addr], &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"fwd"}})
		if err != nil || len(info.Endpoint) != 1 {
			return false
		}
		var meta flightwire.EndpointMeta
		if json.Unmarshal(info.Endpoint[0].AppMetadata, &meta) != nil || meta.Leader == 0 {
			return false
		}
		bucket, leader = meta.Bucket, nodes[meta.Leader-1]
		_, err = flightRows(roots[leader.flightAddr()], fcs[leader.flightAddr()], "fwd")
		return err == nil
	})
	for _, n := range nodes {
		if n != leader {
			entry = n
			break
		}
	}
	t.Logf("bucket %d is led by %s; writing through %s", bucket, leader.flightAddr(), entry.flightAddr())
	efc := fcs[entry.flightAddr()]
	alice, err := efc.AuthenticateBasicToken(ctx, "alice", "alice pw")
	if err != nil {
		t.Fatal(err)
	}
	countAt := func(n *node) int64 {
		t.Helper()
		var count int64
		c, err := n.login(ctx, "mink", "root pw")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		if err := c.QueryRow(ctx, "SELECT count(*) FROM fwd").Scan(&count); err != nil {
			t.Fatal(err)
		}
		return count
	}

	// mink's write through the entry node is forwarded and stored; alice,
	// with SELECT only, may not write.
	if err := flightPut(roots[entry.flightAddr()], efc, "fwd", tlsEvents(0, 10)); err != nil {
		t.Fatalf("mink's forwarded write: %v", err)
	}
	if got := countAt(leader); got != 10 {
		t.Fatalf("the leader has %d rows after mink's forwarded write, want 10", got)
	}
	if err := flightPut(alice, efc, "fwd", tlsEvents(10, 20)); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("alice's write without INSERT: %v, want PermissionDenied", err)
	}

	// SQL on the entry node, as alice, reads the leader's bucket (the
	// forwarded read carries her role); with INSERT her INSERT and COPY
	// are forwarded as her too.
	aliceSQL, err := entry.login(ctx, "alice", "alice pw")
	if err != nil {
		t.Fatal(err)
	}
	defer aliceSQL.Close(ctx)
	var count int64
	if err := aliceSQL.QueryRow(ctx, "SELECT count(*) FROM fwd").Scan(&count); err != nil || count != 10 {
		t.Fatalf("alice's SELECT through the entry node: %d, %v; want 10", count, err)
	}
	mustExec(t, admin, "GRANT INSERT ON fwd TO alice")
	mustExec(t, aliceSQL, "INSERT INTO fwd VALUES (20, 'sql')")
	rows := [][]any{{int64(21), "copy"}, {int64(22), "copy"}}
	if n, err := aliceSQL.CopyFrom(ctx, pgx.Identifier{"fwd"}, []string{"id", "name"}, pgx.CopyFromRows(rows)); err != nil || n != 2 {
		t.Fatalf("alice's COPY through the entry node: %d, %v", n, err)
	}
	if got := countAt(leader); got != 13 {
		t.Fatalf("the leader has %d rows after alice's SQL writes, want 13", got)
	}

	// A long DoPut of alice through the entry node: the entry node checked
	// INSERT when it began, and forwards each part with a token for her.
	// After REVOKE INSERT the leader refuses the next part itself.
	stream, err := efc.DoPut(alice)
	if err != nil {
		t.Fatal(err)
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(tlsEvents(0, 1).Schema()))
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"fwd"}})
	send := func(from int64) error {
		rec := tlsEvents(from, from+1)
		defer rec.Release()
		return w.Write(rec)
	}
	if err := send(1000); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "alice's first streamed row forwarded to the leader", func() bool { return countAt(leader) == 14 })
	mustExec(t, admin, "REVOKE INSERT ON fwd FROM alice")
	deadline := time.Now().Add(20 * time.Second)
	for id := int64(1001); ; id++ {
		if err := send(id); err != nil {
			break // the entry node ended the call: Recv has its status
		}
		if time.Now().After(deadline) {
			t.Fatal("the leader kept taking alice's forwarded rows after REVOKE INSERT")
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, err = stream.Recv()
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "refused by node "+leader.flightAddr()) {
		t.Fatalf("alice's forwarded part after REVOKE: %v, want PermissionDenied from the leader %s", err, leader.flightAddr())
	}
	// The superuser's forwarded writes go on.
	if err := flightPut(roots[entry.flightAddr()], efc, "fwd", tlsEvents(2000, 2010)); err != nil {
		t.Fatalf("mink's forwarded write after the revoke: %v", err)
	}
	// alice still reads through SQL on the entry node (SELECT is left).
	before := countAt(leader)
	if err := aliceSQL.QueryRow(ctx, "SELECT count(*) FROM fwd").Scan(&count); err != nil || count != before {
		t.Fatalf("alice's SELECT after the revoke: %d, %v; want %d", count, err, before)
	}
}

// arrowFlight dials addr with arrow-go's Flight client.
func arrowFlight(t *testing.T, addr string) flight.Client {
	t.Helper()
	c, err := flight.NewClientWithMiddleware(addr, nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// flightRows reads every endpoint of table through c.
func flightRows(ctx context.Context, c flight.Client, table string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	info, err := c.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{table}})
	if err != nil {
		return 0, err
	}
	var rows int64
	for _, ep := range info.Endpoint {
		n, err := readTicket(ctx, c, ep.Ticket)
		if err != nil {
			return rows, err
		}
		rows += n
	}
	return rows, nil
}

func readTicket(ctx context.Context, c flight.Client, ticket *flight.Ticket) (int64, error) {
	stream, err := c.DoGet(ctx, ticket)
	if err != nil {
		return 0, err
	}
	rdr, err := flight.NewRecordReader(stream)
	if err != nil {
		return 0, err
	}
	defer rdr.Release()
	var rows int64
	for rdr.Next() {
		rows += rdr.RecordBatch().NumRows()
	}
	if err := rdr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return rows, err
	}
	return rows, nil
}

// flightPut writes rec to table in one table-addressed DoPut and waits
// for its result.
func flightPut(ctx context.Context, c flight.Client, table string, rec arrow.RecordBatch) error {
	defer rec.Release()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	stream, err := c.DoPut(ctx)
	if err != nil {
		return err
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(rec.Schema()))
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{table}})
	if err := w.Write(rec); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	if err := w.Close(); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	if err := stream.CloseSend(); err != nil {
		return err
	}
	for {
		if _, err := stream.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// scanRows counts the rows of a Scan with mink's client.
func scanRows(t *testing.T, c *client.Client, table string) int64 {
	t.Helper()
	rdr, err := c.Scan(context.Background(), table, client.ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	var rows int64
	for rdr.Next() {
		rows += rdr.RecordBatch().NumRows()
	}
	if err := rdr.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}
