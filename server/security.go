package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/minkdb/mink/access"
	"github.com/minkdb/mink/auth"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/metalog/etcdlog"
	"github.com/minkdb/mink/sqlfront/pgwire"
)

// BootstrapUser is the superuser every cluster has (catalog.BootstrapRole).
const BootstrapUser = "mink"

// checkTrust refuses trust mode (no credentials) on a listener that is not
// on loopback, unless --insecure: anyone who reached it would be a
// superuser.
func (c *Config) checkTrust() error {
	if c.SuperuserPasswordFile != "" || c.Insecure {
		return nil
	}
	for _, l := range []struct{ flag, addr string }{
		{"--pg-addr", c.PGAddr}, {"--flight-addr", c.FlightAddr}, {"--admin-addr", c.AdminAddr}, {"--kafka-addr", c.KafkaAddr},
	} {
		if l.addr == "" {
			continue
		}
		host, _, err := net.SplitHostPort(l.addr)
		if err != nil {
			continue // reported by Validate
		}
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return fmt.Errorf("%s %q is not on loopback, and without --superuser-password-file every client would be trusted as a superuser: give --superuser-password-file (or --insecure to allow it)", l.flag, l.addr)
		}
	}
	return nil
}

// loadHBA reads --hba-file; nil without one.
func loadHBA(path string) (*auth.HBA, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--hba-file: %w", err)
	}
	defer f.Close()
	hba, err := auth.ParseHBA(path, f)
	if err != nil {
		return nil, fmt.Errorf("--hba-file: %w", err)
	}
	return hba, nil
}

// readSuperuserPassword reads the first line of --superuser-password-file.
func readSuperuserPassword(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--superuser-password-file: %w", err)
	}
	password, _, _ := strings.Cut(string(data), "\n")
	password = strings.TrimSuffix(password, "\r")
	if password == "" {
		return "", fmt.Errorf("--superuser-password-file %s: the first line is empty", path)
	}
	return password, nil
}

// startAccess starts the guard of every listener: it makes sure the
// bootstrap superuser exists (with the configured password) and that the
// cluster has a token key.
func (s *Server) startAccess(ctx context.Context) error {
	password := ""
	if s.cfg.SuperuserPasswordFile != "" {
		var err error
		if password, err = readSuperuserPassword(s.cfg.SuperuserPasswordFile); err != nil {
			return err
		}
	}
	s.guard = access.New(access.Config{
		Meta: s.cat, Node: catalog.NodeID(s.cfg.NodeID), Trust: password == "", Logger: s.logger, HBA: s.hba,
		Limiter: auth.NewLoginLimiter(auth.DefaultLoginBurst, auth.DefaultLoginRefill),
	})
	if err := s.bootstrapSuperuser(ctx, password); err != nil {
		return err
	}
	if err := s.guard.EnsureClusterKey(ctx); err != nil {
		return err
	}
	if password == "" {
		s.logger.Warn("trust mode: every client of every listener is trusted (give --superuser-password-file to require passwords)")
	}
	return nil
}

// bootstrapSuperuser creates the role mink at a cluster's first start, and
// sets its password when the configured one differs from the stored one.
// Several nodes starting at once race benignly: one CreateRole wins.
func (s *Server) bootstrapSuperuser(ctx context.Context, password string) error {
	for attempt := 0; ; attempt++ {
		var role *catalog.Role
		s.cat.Read(func(v *catalog.View) {
			if r, ok := v.Roles[catalog.BootstrapRole]; ok {
				c := *r
				role = &c
			}
		})
		var rec catalog.Record
		switch {
		case role == nil:
			cr := catalog.CreateRole{Name: BootstrapUser, Login: true, Superuser: true}
			if password != "" {
				v, err := auth.NewVerifier(password)
				if err != nil {
					return err
				}
				cr.Verifier = v.String()
			}
			rec = cr
		case password != "" && !verifierMatches(role.Verifier, password):
			v, err := auth.NewVerifier(password)
			if err != nil {
				return err
			}
			text, yes := v.String(), true
			rec = catalog.AlterRole{Role: role.ID, Verifier: &text, Login: &yes}
		default:
			return nil
		}
		_, err := s.cat.Propose(ctx, rec)
		switch {
		case err == nil:
			s.logger.Info("bootstrap superuser set", "role", BootstrapUser, "password", password != "")
			return nil
		case errors.Is(err, catalog.ErrExists) && attempt < 3:
			continue // another node created it first: look again
		default:
			return fmt.Errorf("create the superuser %s: %w", BootstrapUser, err)
		}
	}
}

func verifierMatches(text, password string) bool {
	v, err := auth.ParseVerifier(text)
	return err == nil && v.Matches(password)
}

// pgAuth is the Postgres listener's side of the guard.
type pgAuth struct{ g *access.Guard }

func (a pgAuth) login(r pgwire.AuthRequest) access.Login {
	return access.Login{Listener: auth.ListenerPostgres, User: r.User, Addr: r.RemoteAddr, TLS: r.TLS, Database: r.Database, CertCN: r.CertCN}
}

// Method follows the host rules: trust and cert log in without a password
// (as a role that exists and may log in, unless trust mode), scram-sha-256
// runs SCRAM, reject and no matching rule refuse with 28000.
func (a pgAuth) Method(r pgwire.AuthRequest) (pgwire.Method, error) {
	l := a.login(r)
	if err := a.g.Admit(l); err != nil {
		return 0, pgwire.Errorf(pgwire.CodeInvalidAuthorizationSpecification, "%v", err)
	}
	method, clientCert, err := a.g.Rule(l)
	if err != nil {
		a.g.Failed(l, err.Error())
		return 0, pgwire.Errorf(pgwire.CodeInvalidAuthorizationSpecification, "%v", err)
	}
	if reason := access.CheckCert(l, method, clientCert); reason != "" {
		a.g.Failed(l, reason)
		if method == auth.HBACert {
			return 0, pgwire.Errorf(pgwire.CodeInvalidAuthorizationSpecification, "certificate authentication failed for user %q", r.User)
		}
		return 0, pgwire.Errorf(pgwire.CodeInvalidAuthorizationSpecification, "connection requires a valid client certificate")
	}
	if method == auth.HBASCRAM {
		return pgwire.MethodSCRAM, nil
	}
	if _, reason, err := a.g.Resolve(r.User); err != nil {
		a.g.Failed(l, reason)
		return 0, pgwire.Errorf(pgwire.CodeInvalidAuthorizationSpecification, "%s", reason)
	}
	return pgwire.MethodTrust, nil
}

func (a pgAuth) Verifier(user string) (auth.Verifier, bool) { return a.g.Verifier(user) }

func (a pgAuth) Done(r pgwire.AuthRequest, reason string) {
	if reason != "" {
		a.g.Failed(a.login(r), reason)
		return
	}
	a.g.Succeeded(a.login(r))
}

// checkEtcdCredentials checks that the etcd credential flags go together
// and with an external etcd.
func (c *Config) checkEtcdCredentials() error {
	given := c.EtcdUser != "" || c.EtcdPasswordFile != "" || c.EtcdCAFile != "" || c.EtcdCertFile != "" || c.EtcdKeyFile != ""
	switch {
	case given && len(c.EtcdEndpoints) == 0:
		return fmt.Errorf("--etcd-user, --etcd-password-file and the --etcd-*-file TLS flags are for an external etcd (--etcd-endpoints)")
	case (c.EtcdUser == "") != (c.EtcdPasswordFile == ""):
		return fmt.Errorf("--etcd-user and --etcd-password-file go together")
	case (c.EtcdCertFile == "") != (c.EtcdKeyFile == ""):
		return fmt.Errorf("--etcd-cert-file and --etcd-key-file go together")
	}
	return nil
}

// etcdCredentials loads what the etcd credential flags name.
func etcdCredentials(c *Config) (etcdlog.Credentials, error) {
	var creds etcdlog.Credentials
	if c.EtcdUser != "" {
		data, err := os.ReadFile(c.EtcdPasswordFile)
		if err != nil {
			return creds, fmt.Errorf("--etcd-password-file: %w", err)
		}
		password, _, _ := strings.Cut(string(data), "\n")
		creds.User, creds.Password = c.EtcdUser, strings.TrimSuffix(password, "\r")
	}
	if c.EtcdCAFile == "" && c.EtcdCertFile == "" {
		return creds, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.EtcdCAFile != "" {
		pem, err := os.ReadFile(c.EtcdCAFile)
		if err != nil {
			return creds, fmt.Errorf("--etcd-ca-file: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return creds, fmt.Errorf("--etcd-ca-file %s: no PEM certificate in it", c.EtcdCAFile)
		}
	}
	if c.EtcdCertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.EtcdCertFile, c.EtcdKeyFile)
		if err != nil {
			return creds, fmt.Errorf("--etcd-cert-file/--etcd-key-file: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	creds.TLS = tc
	return creds, nil
}
