package main

// End-to-end tests of TLS on every listener (docs/security.md): a CA and
// node certificates made by the test, mink servers started with the TLS
// flags, and real clients: psql, pgx, arrow-go's Flight client, mink's Go
// client, curl, kcat, franz-go and the mink CLI.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/minkdb/mink/client"
	"github.com/minkdb/mink/internal/testpki"
	"github.com/minkdb/mink/server"
)

// tlsPKI is a certificate authority made up for one test, its files in dir.
type tlsPKI struct {
	dir    string
	ca     *testpki.CA
	caFile string
}

func newTLSPKI(t *testing.T, name string) *tlsPKI {
	t.Helper()
	ca, err := testpki.NewCA(name)
	if err != nil {
		t.Fatal(err)
	}
	p := &tlsPKI{dir: t.TempDir(), ca: ca}
	p.caFile = filepath.Join(p.dir, name+".pem")
	writeTestFile(t, p.caFile, ca.PEM)
	return p
}

func writeTestFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// issue writes <name>.crt and <name>.key: a certificate with the serial
// and SANs given, for servers and clients alike (mink nodes present theirs
// to each other).
func (p *tlsPKI) issue(t *testing.T, name string, serial int64, dnsNames []string, ips ...string) (certFile, keyFile string) {
	t.Helper()
	certPEM, keyPEM, err := p.ca.Issue(name, serial, dnsNames, ips...)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(p.dir, name+".crt"), filepath.Join(p.dir, name+".key")
	writeTestFile(t, certFile, certPEM)
	writeTestFile(t, keyFile, keyPEM)
	return certFile, keyFile
}

func (p *tlsPKI) pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(p.ca.Cert)
	return pool
}

// flags are a node's TLS flags: its certificate, the cluster CA for peers,
// and the same CA for client certificates.
func (p *tlsPKI) flags(certFile, keyFile string) []string {
	return []string{"--tls-cert-file", certFile, "--tls-key-file", keyFile, "--tls-ca-file", p.caFile, "--tls-client-ca-file", p.caFile}
}

// waitHealthyTLS is waitHealthy for a node whose admin API serves HTTPS.
func (n *node) waitHealthyTLS(roots *x509.CertPool) {
	n.t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	defer hc.CloseIdleConnections()
	n.waitHealthyOver("https", hc)
}

// pgTLS connects with pgx and sslmode=verify-full to the node's Postgres
// port at host (which the certificate must name).
func (n *node) pgTLS(ctx context.Context, host, caFile string) (*pgx.Conn, error) {
	_, port, _ := net.SplitHostPort(n.pgAddr())
	return pgx.Connect(ctx, fmt.Sprintf("postgres://mink@%s/mink?sslmode=verify-full&sslrootcert=%s&connect_timeout=10",
		net.JoinHostPort(host, port), caFile))
}

// adminTLS runs a mink admin command against the node over HTTPS.
func (n *node) adminTLS(t *testing.T, caFile string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runMink(t, 30*time.Second, append(args, "--ca-file", caFile, "--server", "https://"+n.admin)...)
}

// peerSerial is the serial of the certificate a TLS listener at addr
// presents now.
func peerSerial(t *testing.T, addr string, roots *x509.CertPool) int64 {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{RootCAs: roots, NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		t.Fatalf("TLS handshake with %s: %v", addr, err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

// pgSerial is the serial of the certificate a new verify-full Postgres
// connection sees.
func pgSerial(t *testing.T, n *node, caFile string) int64 {
	t.Helper()
	ctx := context.Background()
	conn, err := n.pgTLS(ctx, "127.0.0.1", caFile)
	if err != nil {
		t.Fatalf("verify-full connection: %v", err)
	}
	defer conn.Close(ctx)
	tc, ok := conn.PgConn().Conn().(*tls.Conn)
	if !ok {
		t.Fatalf("sslmode=verify-full connection is a %T, not TLS", conn.PgConn().Conn())
	}
	return tc.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

// tlsEvents is a batch of the table tls_events (id bigint, name text).
func tlsEvents(from, to int64) arrow.RecordBatch {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for id := from; id < to; id++ {
		b.Field(0).(*array.Int64Builder).Append(id)
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("e%d", id))
	}
	return b.NewRecordBatch()
}

// flightCount reads every endpoint of table with the arrow-go client and
// returns the rows and the endpoint locations.
func flightCount(t *testing.T, fc flight.Client, table string) (rows int64, locations []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := fc.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{table}})
	if err != nil {
		t.Fatalf("GetFlightInfo over TLS: %v", err)
	}
	for _, ep := range info.Endpoint {
		for _, l := range ep.Location {
			locations = append(locations, l.Uri)
		}
		stream, err := fc.DoGet(ctx, ep.Ticket)
		if err != nil {
			t.Fatalf("DoGet over TLS: %v", err)
		}
		rdr, err := flight.NewRecordReader(stream)
		if err != nil {
			t.Fatalf("DoGet over TLS: %v", err)
		}
		for rdr.Next() {
			rows += rdr.RecordBatch().NumRows()
		}
		err = rdr.Err()
		rdr.Release()
		if err != nil && !errors.Is(err, io.EOF) {
			t.Fatalf("DoGet over TLS: %v", err)
		}
	}
	return rows, locations
}

// One node with TLS on every listener: each is reached by its usual
// clients with the test CA, refused without it, and a SIGHUP swaps the
// certificate for the next handshake on every port (a broken file on
// SIGHUP keeps the old one).
func TestTLSListeners(t *testing.T) {
	pki := newTLSPKI(t, "ca")
	certFile, keyFile := pki.issue(t, "node", 1001, []string{"localhost"}, "127.0.0.1")
	n := newNode(t, nodeOpts{extra: pki.flags(certFile, keyFile)})
	n.start()
	n.waitHealthyTLS(pki.pool())
	ctx := context.Background()
	_, pgPort, _ := net.SplitHostPort(n.pgAddr())

	t.Run("psql verify-full", func(t *testing.T) {
		psql := func(conninfo string) (string, error) {
			cmd := exec.Command("psql", conninfo, "-XAtc", "SELECT 40 + 2")
			cmd.Env = append(os.Environ(), "PGCONNECT_TIMEOUT=10")
			out, err := cmd.CombinedOutput()
			return strings.TrimSpace(string(out)), err
		}
		for _, host := range []string{"localhost", "127.0.0.1"} {
			out, err := psql(fmt.Sprintf("host=%s port=%s user=mink dbname=mink sslmode=verify-full sslrootcert=%s", host, pgPort, pki.caFile))
			if err != nil || out != "42" {
				t.Fatalf("psql verify-full host=%s: %v\n%s", host, err, out)
			}
		}
		// The certificate does not name this host: libpq refuses it.
		out, err := psql(fmt.Sprintf("host=mink.invalid hostaddr=127.0.0.1 port=%s user=mink dbname=mink sslmode=verify-full sslrootcert=%s", pgPort, pki.caFile))
		if err == nil || !strings.Contains(out, `does not match host name "mink.invalid"`) {
			t.Fatalf("psql verify-full with a host the certificate does not name: %v\n%s", err, out)
		}
		// Without the CA: an unknown issuer.
		other := newTLSPKI(t, "other")
		out, err = psql(fmt.Sprintf("host=localhost port=%s user=mink dbname=mink sslmode=verify-full sslrootcert=%s", pgPort, other.caFile))
		if err == nil || !strings.Contains(out, "certificate verify failed") {
			t.Fatalf("psql verify-full with another CA: %v\n%s", err, out)
		}
	})

	conn, err := n.pgTLS(ctx, "localhost", pki.caFile)
	if err != nil {
		t.Fatalf("pgx verify-full: %v", err)
	}
	defer conn.Close(ctx)
	if _, ok := conn.PgConn().Conn().(*tls.Conn); !ok {
		t.Fatalf("pgx verify-full connection is a %T", conn.PgConn().Conn())
	}
	for _, sql := range []string{
		"CREATE TABLE tls_events (id bigint NOT NULL, name text) WITH (buckets = 3, bucket_key = 'id')",
		"INSERT INTO tls_events VALUES (0, 'sql')",
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}

	t.Run("Flight", func(t *testing.T) {
		fc, err := flight.NewClientWithMiddleware(n.flightAddr(), nil, nil,
			grpc.WithTransportCredentials(credentials.NewClientTLSFromCert(pki.pool(), "")))
		if err != nil {
			t.Fatal(err)
		}
		defer fc.Close()
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		stream, err := fc.DoPut(pctx)
		if err != nil {
			t.Fatalf("DoPut over TLS: %v", err)
		}
		rec := tlsEvents(1, 101)
		defer rec.Release()
		w := flight.NewRecordWriter(stream, ipc.WithSchema(rec.Schema()))
		w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"tls_events"}})
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		w.Close()
		stream.CloseSend()
		for {
			if _, err := stream.Recv(); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("DoPut over TLS: %v", err)
			}
		}
		rows, locations := flightCount(t, fc, "tls_events")
		if rows != 101 {
			t.Fatalf("DoGet over TLS read %d rows, want 101", rows)
		}
		if len(locations) != 3 {
			t.Fatalf("locations %v, want one per bucket", locations)
		}
		for _, l := range locations {
			if l != "grpc+tls://"+n.flightAddr() {
				t.Fatalf("FlightInfo location %q, want grpc+tls://%s", l, n.flightAddr())
			}
		}

		// A plaintext gRPC client gets nothing from the TLS port.
		plain, err := flight.NewClientWithMiddleware(n.flightAddr(), nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer plain.Close()
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if _, err := plain.GetFlightInfo(sctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"tls_events"}}); err == nil {
			t.Fatal("a plaintext gRPC client got a FlightInfo from the TLS listener")
		}

		// mink's Go client with Options.TLS.
		mc, err := client.DialOptions(ctx, client.Options{TLS: &tls.Config{RootCAs: pki.pool()}, RetryTimeout: 20 * time.Second}, "grpc+tls://"+n.flightAddr())
		if err != nil {
			t.Fatalf("client.DialOptions with TLS: %v", err)
		}
		defer mc.Close()
		more := tlsEvents(101, 111)
		defer more.Release()
		if err := mc.AppendTable(ctx, "tls_events", more); err != nil {
			t.Fatalf("client AppendTable over TLS: %v", err)
		}
		rdr, err := mc.Scan(ctx, "tls_events", client.ScanOptions{})
		if err != nil {
			t.Fatalf("client Scan over TLS: %v", err)
		}
		var scanned int64
		for rdr.Next() {
			scanned += rdr.RecordBatch().NumRows()
		}
		err = rdr.Err()
		rdr.Release()
		if err != nil || scanned != 111 {
			t.Fatalf("client Scan over TLS: %d rows, %v; want 111", scanned, err)
		}
	})

	t.Run("admin HTTPS and the CLI", func(t *testing.T) {
		curl := func(args ...string) (string, error) {
			out, err := exec.Command("curl", append([]string{"-sS", "--max-time", "10", "-o", "/dev/null", "-w", "%{http_code}"}, args...)...).CombinedOutput()
			return string(out), err
		}
		for _, host := range []string{"127.0.0.1", "localhost"} {
			_, port, _ := net.SplitHostPort(n.admin)
			if code, err := curl("--cacert", pki.caFile, "https://"+net.JoinHostPort(host, port)+"/healthz"); err != nil || code != "200" {
				t.Fatalf("curl --cacert https://%s/healthz: %s %v", host, code, err)
			}
		}
		if out, err := curl("https://" + n.admin + "/healthz"); err == nil {
			t.Fatalf("curl without the CA: %s", out)
		}
		// A client certificate of the node's CA is accepted, one of another
		// CA is refused (--tls-client-ca-file).
		cc, ck := pki.issue(t, "client", 5001, nil)
		if code, err := curl("--cacert", pki.caFile, "--cert", cc, "--key", ck, "https://"+n.admin+"/healthz"); err != nil || code != "200" {
			t.Fatalf("curl with a client certificate of the CA: %s %v", code, err)
		}
		other := newTLSPKI(t, "other")
		oc, ok := other.issue(t, "stranger", 5002, nil)
		if code, err := curl("--cacert", pki.caFile, "--cert", oc, "--key", ok, "https://"+n.admin+"/healthz"); err == nil {
			t.Fatalf("curl with a client certificate of another CA: %s", code)
		}

		out, errOut, code := n.adminTLS(t, pki.caFile, "cluster", "status", "--json")
		var st server.ClusterStatus
		if code != 0 || json.Unmarshal([]byte(out), &st) != nil || len(st.Nodes) != 1 || !st.Nodes[0].Live {
			t.Fatalf("cluster status --ca-file: exit %d\n%s%s", code, out, errOut)
		}
		// --ca-file alone implies https.
		if _, errOut, code := runMink(t, 30*time.Second, "table", "buckets", "tls_events", "--ca-file", pki.caFile, "--server", n.admin); code != 0 {
			t.Fatalf("table buckets --ca-file --server HOST:PORT: exit %d: %s", code, errOut)
		}
		for _, tc := range []struct {
			name string
			args []string
			want string
		}{
			{"https without --ca-file", []string{"--server", "https://" + n.admin}, "certificate signed by unknown authority"},
			{"plain http", []string{"--server", n.admin}, "serves HTTPS"},
		} {
			_, errOut, code := runMink(t, 30*time.Second, append([]string{"cluster", "status"}, tc.args...)...)
			lines := strings.Split(strings.TrimSpace(errOut), "\n")
			if code != 1 || len(lines) != 1 || !strings.HasPrefix(lines[0], "mink: ") || !strings.Contains(errOut, tc.want) || strings.Contains(errOut, "panic") {
				t.Fatalf("%s: exit %d, want 1 and one line 'mink: …%s…':\n%s", tc.name, code, tc.want, errOut)
			}
		}
	})

	t.Run("Kafka SSL", func(t *testing.T) {
		kcat := kcatPath(t)
		addr := n.kafkaAddr()
		cl := kafkaClient(t, []string{addr}, kgo.DialTLSConfig(&tls.Config{RootCAs: pki.pool()}))
		createTopic(t, cl, "tls_topic", 2)
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := cl.ProduceSync(pctx, &kgo.Record{Topic: "tls_topic", Partition: 1, Value: []byte("from-kgo")}).FirstErr(); err != nil {
			t.Fatalf("franz-go produce over TLS: %v", err)
		}
		run := func(stdin string, args ...string) string {
			t.Helper()
			kctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(kctx, kcat, append([]string{"-b", addr, "-X", "security.protocol=SSL", "-X", "ssl.ca.location=" + pki.caFile}, args...)...)
			cmd.Stdin = strings.NewReader(stdin)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("kcat %v: %v\n%s", args, err, out)
			}
			return string(out)
		}
		run("a\nb\nc\n", "-P", "-t", "tls_topic", "-p", "0")
		got := strings.Fields(run("", "-C", "-t", "tls_topic", "-e", "-o", "beginning", "-q", "-f", "%s\n"))
		sort.Strings(got)
		if strings.Join(got, ",") != "a,b,c,from-kgo" {
			t.Fatalf("kcat consumed %v, want a b c from-kgo", got)
		}
	})

	t.Run("SIGHUP reloads the certificate", func(t *testing.T) {
		ports := []string{n.flightAddr(), n.admin, n.kafkaAddr()}
		check := func(want int64) {
			t.Helper()
			for _, addr := range ports {
				if got := peerSerial(t, addr, pki.pool()); got != want {
					t.Fatalf("%s presents serial %d, want %d", addr, got, want)
				}
			}
			if got := pgSerial(t, n, pki.caFile); got != want {
				t.Fatalf("Postgres presents serial %d, want %d", got, want)
			}
		}
		check(1001)
		pki.issue(t, "node", 1002, []string{"localhost"}, "127.0.0.1") // overwrites certFile and keyFile
		n.signal(syscall.SIGHUP)
		waitFor(t, 10*time.Second, "the reload in the log", func() bool { return strings.Contains(n.log(), "TLS certificate reloaded") })
		check(1002)
		// The connection opened before the reload still works.
		var one int
		if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
			t.Fatalf("the connection from before the reload: %v", err)
		}

		// A half-written certificate is refused; the node keeps serving
		// with the one it has.
		if err := os.WriteFile(certFile, []byte("-----BEGIN CERTIFICATE-----\ntruncated"), 0o600); err != nil {
			t.Fatal(err)
		}
		n.signal(syscall.SIGHUP)
		waitFor(t, 10*time.Second, "the failed reload in the log", func() bool {
			return strings.Contains(n.log(), "TLS certificate reload failed; keeping the current certificate")
		})
		select {
		case <-n.exited:
			t.Fatalf("the node exited after a bad certificate on SIGHUP:\n%s", n.log())
		default:
		}
		check(1002)
		if _, errOut, code := n.adminTLS(t, pki.caFile, "cluster", "status"); code != 0 {
			t.Fatalf("cluster status after the failed reload: exit %d: %s", code, errOut)
		}
	})
	conn.Close(ctx)
	n.stop()
}

// Three nodes with TLS between them: a write through a node that does not
// lead every bucket of the table is forwarded to the leaders over TLS
// (each node verifying the other's certificate and presenting its own), reads
// of remote buckets come back the same way, and an admin request for the
// coordinator is forwarded over HTTPS.
func TestTLSCluster(t *testing.T) {
	pki := newTLSPKI(t, "cluster-ca")
	etcd := startTestEtcd(t)
	endpoints := strings.Join(etcd.Endpoints(), ",")
	store := "file://" + t.TempDir()
	var nodes []*node
	for i := 1; i <= 3; i++ {
		certFile, keyFile := pki.issue(t, fmt.Sprintf("node%d", i), int64(2000+i), []string{"localhost"}, "127.0.0.1")
		extra := append(pki.flags(certFile, keyFile), "--object-store", store, "--coordinator-tick", "300ms")
		n := newNode(t, nodeOpts{nodeID: i, etcd: endpoints, leaseTTL: "3s", extra: extra})
		n.start()
		nodes = append(nodes, n)
	}
	for _, n := range nodes {
		n.waitHealthyTLS(pki.pool())
	}
	status := func(n *node) (server.ClusterStatus, bool) {
		out, _, code := runMinkQuiet(10*time.Second, "cluster", "status", "--json", "--ca-file", pki.caFile, "--server", "https://"+n.admin)
		var st server.ClusterStatus
		return st, code == 0 && json.Unmarshal([]byte(out), &st) == nil
	}
	var st server.ClusterStatus
	waitFor(t, 30*time.Second, "three live nodes and a coordinator", func() bool {
		var ok bool
		st, ok = status(nodes[0])
		return ok && countLive(st) == 3 && st.Coordinator.Epoch > 0 && st.Coordinator.Node == st.Coordinator.LeaseHolder
	})

	ctx := context.Background()
	conn, err := nodes[0].pgTLS(ctx, "localhost", pki.caFile)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE TABLE tls_fwd (id bigint NOT NULL, v text) WITH (buckets = 6, bucket_key = 'id')"); err != nil {
		t.Fatal(err)
	}
	var bs []server.BucketStatus
	waitFor(t, 30*time.Second, "every bucket of tls_fwd open, led by more than one node", func() bool {
		out, _, code := runMinkQuiet(10*time.Second, "table", "buckets", "tls_fwd", "--json", "--ca-file", pki.caFile, "--server", "https://"+nodes[0].admin)
		if code != 0 || json.Unmarshal([]byte(out), &bs) != nil {
			return false
		}
		leaders := map[uint32]bool{}
		for _, b := range bs {
			if !b.Open {
				return false
			}
			leaders[uint32(b.Leader)] = true
		}
		return len(bs) == 6 && len(leaders) > 1
	})
	// Write through a node that does not lead some bucket.
	var writer *node
	remote := map[uint64]bool{} // buckets led by other nodes than the writer
	for i, n := range nodes {
		for _, b := range bs {
			if uint32(b.Leader) != uint32(i+1) {
				writer = n
				remote[uint64(b.Bucket)] = true
			}
		}
		if writer != nil {
			break
		}
	}
	t.Logf("writing through %s; buckets led elsewhere: %v", writer.admin, remote)
	wconn, err := writer.pgTLS(ctx, "127.0.0.1", pki.caFile)
	if err != nil {
		t.Fatal(err)
	}
	defer wconn.Close(ctx)
	values := make([]string, 600)
	for i := range values {
		values[i] = fmt.Sprintf("(%d, 'v%d')", i, i)
	}
	if _, err := wconn.Exec(ctx, "INSERT INTO tls_fwd VALUES "+strings.Join(values, ", ")); err != nil {
		t.Fatalf("INSERT forwarded over TLS: %v\n%s", err, lastLines(writer.log(), 30))
	}
	// Every node reads all of it, the remote buckets over TLS.
	for i, n := range nodes {
		c, err := n.pgTLS(ctx, "localhost", pki.caFile)
		if err != nil {
			t.Fatal(err)
		}
		var count int64
		err = c.QueryRow(ctx, "SELECT count(*) FROM tls_fwd").Scan(&count)
		c.Close(ctx)
		if err != nil || count != 600 {
			t.Fatalf("count(*) through node %d: %d %v, want 600", i+1, count, err)
		}
	}
	// The rows are in the buckets the writer does not lead: forwarded.
	waitFor(t, 15*time.Second, "rows committed in the buckets led by other nodes", func() bool {
		out, _, code := runMinkQuiet(10*time.Second, "table", "buckets", "tls_fwd", "--json", "--ca-file", pki.caFile, "--server", "https://"+writer.admin)
		if code != 0 || json.Unmarshal([]byte(out), &bs) != nil {
			return false
		}
		for _, b := range bs {
			if remote[uint64(b.Bucket)] && b.End == 0 {
				return false
			}
		}
		return true
	})

	// A coordinator request through another node is forwarded over HTTPS.
	var other *node
	for i, n := range nodes {
		if uint32(i+1) != st.Coordinator.Node {
			other = n
			break
		}
	}
	out, errOut, code := other.adminTLS(t, pki.caFile, "tiering", "status")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("coordinator: node %d", st.Coordinator.Node)) {
		t.Fatalf("tiering status through node %s: exit %d\n%s%s", other.admin, code, out, errOut)
	}
	for _, n := range nodes {
		n.stop()
	}
}
