// Package access decides who a client of any listener is and what it may
// do: it resolves role names and passwords against the roles in the
// metadata log, issues and checks the cluster's bearer tokens, limits
// failed logins per source address, logs them, and checks table
// privileges. The Postgres, Arrow Flight, Kafka and admin listeners all go
// through one Guard, so a role may do the same on every path.
//
// A node runs in trust mode when no credentials are configured (no
// --superuser-password-file): every client is trusted, a name that is not a
// role acts as the bootstrap superuser, and a role that is one keeps its
// privileges. server refuses trust mode on a non-loopback listener unless
// told --insecure.
package access

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/minkdb/mink/auth"
	"github.com/minkdb/mink/catalog"
)

// Metadata is the part of the metadata log a Guard reads and writes.
type Metadata interface {
	Read(fn func(v *catalog.View))
	Propose(ctx context.Context, rec catalog.Record) (catalog.Outcome, error)
}

// Errors a listener maps to its protocol's codes.
var (
	// ErrAuthFailed: a wrong password or token, or a role that does not
	// exist or may not log in. Messages do not say which, as PostgreSQL's
	// do not.
	ErrAuthFailed = errors.New("authentication failed")
	// ErrTooManyFailures: the source address failed too often; it may try
	// again later.
	ErrTooManyFailures = errors.New("too many failed logins from this address")
	// ErrPermission: the role lacks a privilege. The error is a
	// *PermissionError.
	ErrPermission = errors.New("permission denied")
)

// PermissionError is a missing privilege on a table.
type PermissionError struct {
	Table string
	Need  catalog.Privileges
}

func (e *PermissionError) Error() string { return "permission denied for table " + e.Table }

// Is makes errors.Is(err, ErrPermission) true.
func (e *PermissionError) Is(target error) bool { return target == ErrPermission }

// Identity is who a request acts as: a role, by id (its name and SUPERUSER
// are read from the view when needed, so that ALTER ROLE holds at once).
type Identity struct {
	Role catalog.RoleID
	Name string
}

// Limiter limits failed logins per source address (auth.LoginLimiter).
type Limiter interface {
	Allow(addr netip.Addr, now time.Time) (ok bool, retryAfter time.Duration)
	Failed(addr netip.Addr, now time.Time)
	Succeeded(addr netip.Addr)
}

// Config configures a Guard.
type Config struct {
	Meta   Metadata
	Node   catalog.NodeID
	Trust  bool // no credentials configured: every client is trusted
	Logger *slog.Logger
	// Limiter limits failed logins per source address; nil: no limit.
	Limiter Limiter
	// HBA holds the host rules of --hba-file; nil: no file (trust mode
	// trusts everyone, otherwise everyone gives a password).
	HBA *auth.HBA
	// TokenTTL is how long a bearer token from a Flight handshake lasts
	// (DefaultTokenTTL when 0).
	TokenTTL time.Duration
	Now      func() time.Time // time.Now when nil
}

// DefaultTokenTTL is the life of a Flight bearer token.
const DefaultTokenTTL = 12 * time.Hour

// forwardTTL is the life of a token a node makes to forward one request.
const forwardTTL = time.Minute

// Guard authenticates and authorizes. It is safe for concurrent use.
type Guard struct {
	cfg     Config
	mockKey []byte
}

// New returns a Guard.
func New(cfg Config) *Guard {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.TokenTTL <= 0 {
		cfg.TokenTTL = DefaultTokenTTL
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Guard{cfg: cfg, mockKey: auth.NewKey()}
}

// Trust reports whether the node trusts every client.
func (g *Guard) Trust() bool { return g.cfg.Trust }

// Login is one attempt to log in, for the host rules, the limiter and the
// log.
type Login struct {
	Listener string // auth.ListenerPostgres, …Flight, …Kafka, …Admin
	User     string
	Addr     net.Addr
	TLS      bool
	Database string // Postgres only
	// CertCN is the common name of the client's certificate, when it
	// presented one that verified against --tls-client-ca-file.
	CertCN string
}

// Rule is how l must authenticate: an auth.HBASCRAM, HBATrust or HBACert
// method and the clientcert option of the host rule it matched, or the
// error (errors.Is auth.ErrHBADenied) of a rule that refuses it. Without a
// rules file, trust mode trusts everyone and otherwise everyone gives a
// password.
func (g *Guard) Rule(l Login) (method, clientCert string, err error) {
	if g.cfg.HBA == nil {
		if g.cfg.Trust {
			return auth.HBATrust, "", nil
		}
		return auth.HBASCRAM, "", nil
	}
	addr, _ := l.addr()
	r := auth.HBARequest{Listener: l.Listener, TLS: l.TLS, Database: l.Database, User: l.User, Addr: addr,
		MemberOf: func(role, group string) bool {
			member := false
			g.cfg.Meta.Read(func(v *catalog.View) {
				r, ok1 := v.RoleByName(role)
				gr, ok2 := v.RoleByName(group)
				member = ok1 && ok2 && v.IsMember(r.ID, gr.ID)
			})
			return member
		}}
	m, ok := g.cfg.HBA.Match(r)
	switch {
	case !ok:
		return "", "", r.NoEntryError()
	case m.Method == auth.HBAReject:
		return "", "", r.RejectError()
	}
	return m.Method, m.ClientCert, nil
}

// CheckCert checks the client certificate a rule asks for: a verified one
// (clientcert=verify-ca), whose CN is the role (verify-full, and the cert
// method). It returns the reason for the log, or "".
func CheckCert(l Login, method, clientCert string) string {
	switch {
	case (method == auth.HBACert || clientCert != "") && l.CertCN == "" && !l.TLS:
		return "the rule wants a client certificate and the connection has no TLS"
	case (method == auth.HBACert || clientCert != "") && l.CertCN == "":
		return "the rule wants a verified client certificate and there is none"
	case (method == auth.HBACert || clientCert == auth.ClientCertVerifyFull) && l.CertCN != l.User:
		return fmt.Sprintf("the client certificate is for %q", l.CertCN)
	}
	return ""
}

func (l Login) addr() (netip.Addr, bool) {
	if l.Addr == nil {
		return netip.Addr{}, false
	}
	ap, err := netip.ParseAddrPort(l.Addr.String())
	if err != nil {
		return netip.Addr{}, false
	}
	return ap.Addr().Unmap(), true
}

// Admit checks, before authenticating, that l's source address has not
// failed too often.
func (g *Guard) Admit(l Login) error {
	a, ok := l.addr()
	if g.cfg.Limiter == nil || !ok {
		return nil
	}
	if allowed, retry := g.cfg.Limiter.Allow(a, g.cfg.Now()); !allowed {
		g.cfg.Logger.Warn("login refused: too many failures from this address",
			"listener", l.Listener, "role", l.User, "addr", l.Addr.String(), "retry_after", retry.Round(time.Second))
		return fmt.Errorf("%w; try again in %v", ErrTooManyFailures, retry.Round(time.Second))
	}
	return nil
}

// Failed records a failed login and logs it (never with the password).
func (g *Guard) Failed(l Login, reason string) {
	if a, ok := l.addr(); ok && g.cfg.Limiter != nil {
		g.cfg.Limiter.Failed(a, g.cfg.Now())
	}
	addr := ""
	if l.Addr != nil {
		addr = l.Addr.String()
	}
	g.cfg.Logger.Warn("login failed", "listener", l.Listener, "role", l.User, "addr", addr, "reason", reason)
}

// Succeeded records a successful login.
func (g *Guard) Succeeded(l Login) {
	if a, ok := l.addr(); ok && g.cfg.Limiter != nil {
		g.cfg.Limiter.Succeeded(a)
	}
}

// Resolve returns the identity a client naming user logs in as, before any
// password check: the LOGIN role of that name; in trust mode, the
// bootstrap superuser for a name that is no role. The reason is for the
// log.
func (g *Guard) Resolve(user string) (id Identity, reason string, err error) {
	var role *catalog.Role
	g.cfg.Meta.Read(func(v *catalog.View) {
		if r, ok := v.RoleByName(user); ok {
			c := *r
			role = &c
		}
	})
	switch {
	case role == nil && g.cfg.Trust:
		return Identity{Role: catalog.BootstrapRole, Name: user}, "", nil
	case role == nil:
		return Identity{}, fmt.Sprintf("role %q does not exist", user), ErrAuthFailed
	case !role.Login:
		return Identity{}, fmt.Sprintf("role %q is not permitted to log in", user), ErrAuthFailed
	}
	return Identity{Role: role.ID, Name: role.Name}, "", nil
}

// Verifier returns the SCRAM verifier of user for a SCRAM exchange: a
// mock one and false for a user that cannot log in with a password, so
// that the exchange runs to its end and fails without saying why.
func (g *Guard) Verifier(user string) (auth.Verifier, bool) {
	var text string
	var login bool
	g.cfg.Meta.Read(func(v *catalog.View) {
		if r, ok := v.RoleByName(user); ok {
			text, login = r.Verifier, r.Login
		}
	})
	if login && text != "" {
		if v, err := auth.ParseVerifier(text); err == nil {
			return v, true
		}
	}
	return auth.MockVerifier(g.mockKey, user), false
}

// Password checks a password sent in the clear (Kafka SASL/PLAIN, HTTP
// basic): it runs Admit, Resolve and the check, and records the outcome.
// In trust mode any password is accepted.
func (g *Guard) Password(l Login, password string) (Identity, error) {
	if err := g.Admit(l); err != nil {
		return Identity{}, err
	}
	method, clientCert, err := g.Rule(l)
	if err != nil {
		g.Failed(l, err.Error())
		return Identity{}, fmt.Errorf("%w: %v", ErrAuthFailed, err)
	}
	id, reason, err := g.Resolve(l.User)
	if err == nil {
		reason = CheckCert(l, method, clientCert)
		if reason != "" {
			err = ErrAuthFailed
		}
	}
	if err == nil && method == auth.HBASCRAM {
		v, ok := g.Verifier(l.User)
		if !ok {
			reason, err = "the role has no password", ErrAuthFailed
		} else if !v.Matches(password) {
			reason, err = "wrong password", ErrAuthFailed
		}
	}
	if err != nil {
		g.Failed(l, reason)
		return Identity{}, err
	}
	g.Succeeded(l)
	return id, nil
}

// clusterKey returns the key that signs tokens.
func (g *Guard) clusterKey() ([]byte, error) {
	var key []byte
	g.cfg.Meta.Read(func(v *catalog.View) { key = v.ClusterKey })
	if key == nil {
		return nil, errors.New("the cluster has no token key yet")
	}
	return key, nil
}

// EnsureClusterKey sets the cluster's token key if no node has.
func (g *Guard) EnsureClusterKey(ctx context.Context) error {
	if _, err := g.clusterKey(); err == nil {
		return nil
	}
	_, err := g.cfg.Meta.Propose(ctx, catalog.SetClusterKey{Key: auth.NewKey()})
	if err != nil && !errors.Is(err, catalog.ErrExists) {
		return fmt.Errorf("set the cluster's token key: %w", err)
	}
	return nil
}

// IssueToken returns a bearer token for id (after a Flight handshake).
func (g *Guard) IssueToken(id Identity) (string, error) {
	key, err := g.clusterKey()
	if err != nil {
		return "", err
	}
	return auth.SignToken(key, auth.Claims{Role: id.Name, Expires: g.cfg.Now().Add(g.cfg.TokenTTL), Password: g.passwordStamp(key, id.Name)})
}

// passwordStamp is auth.PasswordStamp of role name's password now.
func (g *Guard) passwordStamp(key []byte, name string) string {
	var verifier string
	g.cfg.Meta.Read(func(v *catalog.View) {
		if r, ok := v.RoleByName(name); ok {
			verifier = r.Verifier
		}
	})
	return auth.PasswordStamp(key, verifier)
}

// TokenTTL is how long a token from IssueToken lasts.
func (g *Guard) TokenTTL() time.Duration { return g.cfg.TokenTTL }

// ForwardToken returns a short-lived token with which this node forwards a
// request of id to another node: the other node acts for id, no more.
func (g *Guard) ForwardToken(id Identity) (string, error) {
	key, err := g.clusterKey()
	if err != nil {
		return "", err
	}
	return auth.SignToken(key, auth.Claims{Role: id.Name, Expires: g.cfg.Now().Add(forwardTTL), Forwarded: true, Node: uint64(g.cfg.Node)})
}

// Token checks a bearer token and returns who it is for. A token of a role
// since dropped, renamed, denied LOGIN or given another password no longer
// works (a node's short-lived forwarding token carries no password: the
// request it forwards was authenticated). In trust mode a token naming no
// role acts as the bootstrap superuser, as a login would.
func (g *Guard) Token(token string) (Identity, error) {
	key, err := g.clusterKey()
	if err != nil {
		return Identity{}, err
	}
	c, err := auth.VerifyToken(key, token, g.cfg.Now())
	if err != nil {
		return Identity{}, fmt.Errorf("%w: %v", ErrAuthFailed, err)
	}
	id, _, err := g.Resolve(c.Role)
	if err != nil {
		return Identity{}, err
	}
	if !c.Forwarded && c.Password != g.passwordStamp(key, c.Role) {
		return Identity{}, fmt.Errorf("%w: the password of role %q changed after the token was issued", ErrAuthFailed, c.Role)
	}
	return id, nil
}

// IsSuperuser reports whether id is a superuser now.
func (g *Guard) IsSuperuser(id Identity) bool {
	var super bool
	g.cfg.Meta.Read(func(v *catalog.View) {
		if r := v.Roles[id.Role]; r != nil {
			super = r.Superuser
		}
	})
	return super
}

// Authorize checks that id holds need on table t (read within the caller's
// view).
func Authorize(v *catalog.View, id Identity, t *catalog.Table, need catalog.Privileges) error {
	if v.TablePrivileges(id.Role, t)&need != need {
		return &PermissionError{Table: t.Spec.Name, Need: need}
	}
	return nil
}

// Authorize checks that id holds need on the table with the given id.
func (g *Guard) Authorize(id Identity, table catalog.TableID, need catalog.Privileges) error {
	var err error
	g.cfg.Meta.Read(func(v *catalog.View) {
		t := v.Tables[table]
		if t == nil {
			err = fmt.Errorf("table %d: %w", table, catalog.ErrNotFound)
			return
		}
		err = Authorize(v, id, t, need)
	})
	return err
}

type identityKey struct{}

// NewContext returns ctx carrying id: the role a request acts for, so that
// a node forwarding the request to another (sqlfront's remote reads and
// writes, Flight forwarding) sends a token for that role and no other.
func NewContext(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// FromContext returns the identity NewContext put in ctx.
func FromContext(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}
