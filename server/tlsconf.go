package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync/atomic"
	"time"
)

// nodeTLS is a node's TLS material: its certificate and key, which Reload
// replaces (mink server does on SIGHUP), and the CA pools, read once at
// start. Every listener's tls.Config and every connection this node opens
// to another node read the certificate through cert, so a reload takes
// effect at the next handshake everywhere; connections already established
// keep the certificate they were set up with.
//
// It is safe for concurrent use.
type nodeTLS struct {
	certFile, keyFile string
	// roots verify the certificates of other nodes this node dials
	// (--tls-ca-file); nil: the system roots.
	roots *x509.CertPool
	// clientCAs, when set (--tls-client-ca-file), verify the certificates
	// clients present to any listener.
	clientCAs *x509.CertPool
	logger    *slog.Logger

	// cert is the current certificate; never nil once loadNodeTLS returned.
	cert atomic.Pointer[tls.Certificate]
	// peerHTTP is the HTTPS client with which this node calls other
	// nodes' admin APIs (it keeps connections between calls).
	peerHTTP *http.Client
}

// loadNodeTLS reads the files named by cfg. It returns nil without
// --tls-cert-file: every listener is then plaintext.
func loadNodeTLS(cfg *Config, logger *slog.Logger) (*nodeTLS, error) {
	if cfg.TLSCertFile == "" {
		return nil, nil
	}
	t := &nodeTLS{certFile: cfg.TLSCertFile, keyFile: cfg.TLSKeyFile, logger: logger}
	cert, err := loadKeyPair(t.certFile, t.keyFile)
	if err != nil {
		return nil, err
	}
	t.cert.Store(cert)
	if cfg.TLSCAFile != "" {
		if t.roots, err = LoadCAFile(cfg.TLSCAFile); err != nil {
			return nil, fmt.Errorf("--tls-ca-file: %w", err)
		}
	}
	if cfg.TLSClientCAFile != "" {
		if t.clientCAs, err = LoadCAFile(cfg.TLSClientCAFile); err != nil {
			return nil, fmt.Errorf("--tls-client-ca-file: %w", err)
		}
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = t.clientConfig()
	t.peerHTTP = &http.Client{Transport: transport}
	t.logCertificate("TLS on every listener", "client_certificates", t.clientCAs != nil)
	return t, nil
}

// logCertificate logs the current certificate, and warns when it is not
// valid now: clients will refuse it.
func (t *nodeTLS) logCertificate(msg string, args ...any) {
	leaf := t.current().Leaf
	args = append(args, "subject", leaf.Subject.String(), "serial", leaf.SerialNumber.String(),
		"not_after", leaf.NotAfter.UTC().Format(time.RFC3339))
	t.logger.Info(msg, args...)
	if now := time.Now(); now.After(leaf.NotAfter) || now.Before(leaf.NotBefore) {
		t.logger.Warn("the TLS certificate is not valid now: clients will refuse it", "not_before", leaf.NotBefore.UTC().Format(time.RFC3339),
			"not_after", leaf.NotAfter.UTC().Format(time.RFC3339))
	}
}

// loadKeyPair reads a PEM certificate (chain) and its private key.
func loadKeyPair(certFile, keyFile string) (*tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate %s and key %s: %w", certFile, keyFile, err)
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("TLS certificate %s: %w", certFile, err)
		}
	}
	return &cert, nil
}

// Reload reads the certificate and key files again. On error the current
// certificate stays in use and the error says why the new one was refused.
func (t *nodeTLS) Reload() error {
	cert, err := loadKeyPair(t.certFile, t.keyFile)
	if err != nil {
		return err
	}
	t.cert.Store(cert)
	return nil
}

// current is the certificate presented by listeners and by dials to peers.
func (t *nodeTLS) current() *tls.Certificate { return t.cert.Load() }

// serverConfig is the tls.Config of a listener: the current certificate,
// and with --tls-client-ca-file, client certificates verified against it.
//
// Client certificates are requested but optional
// (tls.VerifyClientCertIfGiven): one that is presented must verify, but a
// client without one (psql with a password, a Kafka or Flight client that
// only checks the server) still connects, and the listener's own
// authentication decides. Each call returns a new tls.Config, since the
// HTTP and gRPC servers set their ALPN protocols on the one they get.
func (t *nodeTLS) serverConfig() *tls.Config {
	c := &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return t.current(), nil
		},
	}
	if t.clientCAs != nil {
		c.ClientCAs = t.clientCAs
		c.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return c
}

// clientConfig is the tls.Config with which this node dials other nodes
// (Flight, admin): their certificates verified against --tls-ca-file (or
// the system roots) and the host they are dialled at, and this node's
// current certificate presented when they ask for one.
func (t *nodeTLS) clientConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		RootCAs:    t.roots,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return t.current(), nil
		},
	}
}

// LoadCAFile reads a PEM bundle of CA certificates.
func LoadCAFile(path string) (*x509.CertPool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}

// ClientTLSConfig is the tls.Config of a client of a node's listeners (the
// CLI's admin calls): the node's certificate is verified against the CA
// bundle caFile, or against the system roots when caFile is empty.
func ClientTLSConfig(caFile string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pool, err := LoadCAFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("CA file: %w", err)
		}
		c.RootCAs = pool
	}
	return c, nil
}

// ErrNoTLS is returned by ReloadTLS on a node started without
// --tls-cert-file.
var ErrNoTLS = errors.New("TLS is off (no --tls-cert-file)")

// ReloadTLS reads the node's certificate and key files again (mink server
// calls it on SIGHUP) and logs the outcome. New handshakes on every
// listener, and new connections to other nodes, present the new
// certificate. A certificate that cannot be loaded is refused: the node
// keeps the one it has, and the error says why.
func (s *Server) ReloadTLS() error {
	if s.tls == nil {
		return ErrNoTLS
	}
	if err := s.tls.Reload(); err != nil {
		s.logger.Error("TLS certificate reload failed; keeping the current certificate", "err", err)
		return err
	}
	s.tls.logCertificate("TLS certificate reloaded")
	return nil
}

// adminScheme is the scheme of the admin API of every node: each is started
// with the same TLS flags.
func (s *Server) adminScheme() string {
	if s.tls != nil {
		return "https"
	}
	return "http"
}

// peerHTTP is the client for other nodes' admin APIs.
func (s *Server) peerHTTP() *http.Client {
	if s.tls != nil {
		return s.tls.peerHTTP
	}
	return http.DefaultClient
}
