package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minkdb/mink/internal/testpki"
)

// testCA is a certificate authority made up for a test.
type testCA struct {
	*testpki.CA
	cert *x509.Certificate
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	ca, err := testpki.NewCA(name)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{CA: ca, cert: ca.Cert, pem: ca.PEM}
}

// issue returns a PEM certificate and key for localhost and 127.0.0.1,
// usable by servers and clients.
func (ca *testCA) issue(t *testing.T, serial int64) (certPEM, keyPEM []byte) {
	t.Helper()
	certPEM, keyPEM, err := ca.Issue("mink node", serial, []string{"localhost"}, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return certPEM, keyPEM
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// handshake connects a client with clientCfg to a server with serverCfg
// over loopback TCP and returns the server's certificate serial as the
// client saw it, and how many client certificate chains the server
// verified.
func handshake(t *testing.T, serverCfg, clientCfg *tls.Config) (serial int64, verified int, err error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type result struct {
		state tls.ConnectionState
		err   error
	}
	done := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- result{err: err}
			return
		}
		defer c.Close()
		srv := tls.Server(c, serverCfg)
		err = srv.Handshake()
		done <- result{srv.ConnectionState(), err}
	}()
	cc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	cli := tls.Client(cc, clientCfg)
	cerr := cli.Handshake()
	srv := <-done
	if cerr != nil {
		return 0, 0, cerr
	}
	if srv.err != nil {
		return 0, 0, srv.err
	}
	return cli.ConnectionState().PeerCertificates[0].SerialNumber.Int64(), len(srv.state.VerifiedChains), nil
}

// A reload swaps the certificate for the next handshake; one that cannot be
// loaded keeps the current one.
func TestTLSReload(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "test CA")
	certFile, keyFile, caFile := filepath.Join(dir, "node.crt"), filepath.Join(dir, "node.key"), filepath.Join(dir, "ca.pem")
	certPEM, keyPEM := ca.issue(t, 100)
	writeFile(t, certFile, certPEM)
	writeFile(t, keyFile, keyPEM)
	writeFile(t, caFile, ca.pem)

	nt, err := loadNodeTLS(&Config{TLSCertFile: certFile, TLSKeyFile: keyFile, TLSCAFile: caFile}, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	client := nt.clientConfig()
	client.ServerName = "localhost"
	server := nt.serverConfig()
	if serial, _, err := handshake(t, server, client); err != nil || serial != 100 {
		t.Fatalf("first handshake: serial %d, %v", serial, err)
	}

	certPEM, keyPEM = ca.issue(t, 200)
	writeFile(t, certFile, certPEM)
	writeFile(t, keyFile, keyPEM)
	if err := nt.Reload(); err != nil {
		t.Fatal(err)
	}
	// The tls.Config made before the reload serves the new certificate.
	if serial, _, err := handshake(t, server, client); err != nil || serial != 200 {
		t.Fatalf("after reload: serial %d, %v", serial, err)
	}

	for name, files := range map[string][2][]byte{
		"garbage certificate":  {[]byte("not a certificate"), keyPEM},
		"key of another cert":  {certPEM, func() []byte { _, k := ca.issue(t, 300); return k }()},
		"empty files mid-copy": {nil, nil},
	} {
		writeFile(t, certFile, files[0])
		writeFile(t, keyFile, files[1])
		if err := nt.Reload(); err == nil {
			t.Fatalf("%s: reload succeeded", name)
		}
		if serial, _, err := handshake(t, server, client); err != nil || serial != 200 {
			t.Fatalf("%s: after a failed reload: serial %d, %v", name, serial, err)
		}
	}

	// A node dialling with a CA that did not sign the certificate refuses it.
	other := newTestCA(t, "other CA")
	otherFile := filepath.Join(dir, "other.pem")
	writeFile(t, otherFile, other.pem)
	certPEM, keyPEM = ca.issue(t, 400)
	writeFile(t, certFile, certPEM)
	writeFile(t, keyFile, keyPEM)
	stranger, err := loadNodeTLS(&Config{TLSCertFile: certFile, TLSKeyFile: keyFile, TLSCAFile: otherFile}, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	sc := stranger.clientConfig()
	sc.ServerName = "localhost"
	if _, _, err := handshake(t, server, sc); err == nil || !strings.Contains(err.Error(), "unknown authority") {
		t.Fatalf("dial with the wrong CA: %v", err)
	}
}

// With --tls-client-ca-file, a client certificate is optional but must
// verify when given; nodes present theirs when dialling.
func TestTLSClientCertificates(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "cluster CA")
	certFile, keyFile, caFile := filepath.Join(dir, "node.crt"), filepath.Join(dir, "node.key"), filepath.Join(dir, "ca.pem")
	certPEM, keyPEM := ca.issue(t, 7)
	writeFile(t, certFile, certPEM)
	writeFile(t, keyFile, keyPEM)
	writeFile(t, caFile, ca.pem)
	nt, err := loadNodeTLS(&Config{TLSCertFile: certFile, TLSKeyFile: keyFile, TLSCAFile: caFile, TLSClientCAFile: caFile}, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	server := nt.serverConfig()
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)

	// A password client with no certificate.
	if _, verified, err := handshake(t, server, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}); err != nil || verified != 0 {
		t.Fatalf("client without a certificate: verified %d, %v", verified, err)
	}
	// Another node: its certificate is verified.
	peer := nt.clientConfig()
	peer.ServerName = "127.0.0.1"
	if _, verified, err := handshake(t, server, peer); err != nil || verified != 1 {
		t.Fatalf("node's client certificate: verified %d, %v", verified, err)
	}
	// A certificate from another CA is refused.
	other := newTestCA(t, "other CA")
	oc, ok := other.issue(t, 8)
	pair, err := tls.X509KeyPair(oc, ok)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = handshake(t, server, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1",
		// Certificates would send nothing the server's CAs did not sign.
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }})
	if err == nil {
		t.Fatal("a client certificate of another CA was accepted")
	}
}

func TestTLSConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*Config)
		want string
	}{
		{"cert without key", func(c *Config) { c.TLSCertFile = "c" }, "go together"},
		{"ca without cert", func(c *Config) { c.TLSCAFile = "ca" }, "need --tls-cert-file"},
		{"client ca without cert", func(c *Config) { c.TLSClientCAFile = "ca" }, "need --tls-cert-file"},
		{"all", func(c *Config) { c.TLSCertFile, c.TLSKeyFile, c.TLSCAFile, c.TLSClientCAFile = "c", "k", "ca", "ca" }, ""},
	} {
		cfg := DefaultConfig()
		tc.set(&cfg)
		err := cfg.Validate()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.pem")
	writeFile(t, empty, []byte("# nothing\n"))
	ca := newTestCA(t, "CA")
	certPEM, keyPEM := ca.issue(t, 1)
	writeFile(t, filepath.Join(dir, "c"), certPEM)
	writeFile(t, filepath.Join(dir, "k"), keyPEM)
	for _, cfg := range []Config{
		{TLSCertFile: filepath.Join(dir, "missing"), TLSKeyFile: filepath.Join(dir, "k")},
		{TLSCertFile: filepath.Join(dir, "c"), TLSKeyFile: filepath.Join(dir, "k"), TLSCAFile: empty},
		{TLSCertFile: filepath.Join(dir, "c"), TLSKeyFile: filepath.Join(dir, "k"), TLSClientCAFile: filepath.Join(dir, "missing")},
	} {
		if _, err := loadNodeTLS(&cfg, quietLogger()); err == nil {
			t.Errorf("loadNodeTLS(%+v) succeeded", cfg)
		}
	}
}

// The admin client speaks HTTPS with a CA, and says what is wrong when the
// scheme or the CA does not match the node.
func TestTLSAdminClient(t *testing.T) {
	ca := newTestCA(t, "CA")
	certPEM, keyPEM := ca.issue(t, 1)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(ClusterStatus{AnsweredBy: 3})
	})
	secure := httptest.NewUnstartedServer(handler)
	secure.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	secure.StartTLS()
	defer secure.Close()
	plain := httptest.NewServer(handler)
	defer plain.Close()
	hostPort := strings.TrimPrefix(secure.URL, "https://")

	caFile := filepath.Join(t.TempDir(), "ca.pem")
	writeFile(t, caFile, ca.pem)
	cfg, err := ClientTLSConfig(caFile)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, server := range []string{hostPort, secure.URL} {
		st, err := NewAdminClientTLS(server, cfg).ClusterStatus(ctx)
		if err != nil || st.AnsweredBy != 3 {
			t.Fatalf("https %s with the CA: %+v %v", server, st, err)
		}
	}
	if st, err := NewAdminClient(plain.URL).ClusterStatus(ctx); err != nil || st.AnsweredBy != 3 {
		t.Fatalf("plain http: %+v %v", st, err)
	}
	for _, tc := range []struct {
		name   string
		client *AdminClient
		want   string
	}{
		{"https without the CA", NewAdminClient(secure.URL), "--ca-file"},
		{"http to https", NewAdminClient(hostPort), "serves HTTPS"},
		{"https to http", NewAdminClientTLS(plain.URL[len("http://"):], cfg), "serves plain HTTP"},
	} {
		_, err := tc.client.ClusterStatus(ctx)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
