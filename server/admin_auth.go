package server

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/minkdb/mink/access"
	"github.com/minkdb/mink/auth"
	"github.com/minkdb/mink/catalog"
)

// Authentication of the admin API (docs/admin-api.md, "Authentication").
//
// /healthz and /metrics are open; every other request needs a superuser:
// HTTP basic (checked like any password login: host rules, the failed-login
// limit, LOGIN, the password) or a bearer token signed with the cluster key
// (a Flight handshake's, or the one a node makes when it forwards a request
// to the coordinator). In trust mode a request without credentials acts as
// the bootstrap superuser, and one with credentials as their role, which
// must still be a superuser.

// adminRealm is the realm of the admin API's basic challenge.
const adminRealm = `Basic realm="mink"`

// Errors of the admin API's authentication, in its {"error": …} body.
var (
	errAdminNoCredentials = errors.New("authentication required: give the user name and password of a superuser (HTTP basic), or a bearer token")
	errAdminBadToken      = errors.New("invalid or expired bearer token")
	errAdminScheme        = errors.New("the authorization header takes Basic or Bearer credentials")
)

// requireSuperuser serves h only to a superuser: the caller's identity is
// in the request's context (access.FromContext) for handlers that forward
// the request to another node.
func (s *Server) requireSuperuser(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, code, err := s.adminIdentity(r)
		if err != nil {
			if code == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", adminRealm)
			}
			writeError(w, code, err)
			return
		}
		if !s.guard.IsSuperuser(id) {
			writeError(w, http.StatusForbidden, fmt.Errorf("permission denied: role %q is not a superuser, and the admin API takes only superusers", id.Name))
			return
		}
		h.ServeHTTP(w, r.WithContext(access.NewContext(r.Context(), id)))
	})
}

// adminIdentity authenticates r: it returns who the request acts as, or
// the status (401, or 429 after too many failed logins) and error to
// answer with. The reasons for a refusal go to the log, not to the client.
func (s *Server) adminIdentity(r *http.Request) (access.Identity, int, error) {
	header := r.Header.Get("Authorization")
	if header == "" {
		if s.guard.Trust() {
			return s.bootstrapIdentity(), 0, nil
		}
		return access.Identity{}, http.StatusUnauthorized, errAdminNoCredentials
	}
	scheme, credential, _ := strings.Cut(strings.TrimSpace(header), " ")
	credential = strings.TrimSpace(credential)
	switch {
	case strings.EqualFold(scheme, "Basic"):
		user, password, ok := r.BasicAuth()
		if !ok {
			return access.Identity{}, http.StatusUnauthorized, errors.New("malformed basic credentials")
		}
		id, err := s.guard.Password(adminLogin(r, user), password)
		switch {
		case errors.Is(err, access.ErrTooManyFailures):
			return access.Identity{}, http.StatusTooManyRequests, err
		case err != nil:
			return access.Identity{}, http.StatusUnauthorized, fmt.Errorf("authentication failed for user %q", user)
		}
		return id, 0, nil
	case strings.EqualFold(scheme, "Bearer"):
		id, err := s.guard.Token(credential)
		if err != nil {
			s.logger.Debug("admin: bearer token refused", "addr", r.RemoteAddr, "err", err)
			return access.Identity{}, http.StatusUnauthorized, errAdminBadToken
		}
		return id, 0, nil
	}
	return access.Identity{}, http.StatusUnauthorized, errAdminScheme
}

// adminLogin describes a basic login for the guard: the client's address,
// TLS and verified client certificate, which --hba-file's rules look at.
func adminLogin(r *http.Request, user string) access.Login {
	l := access.Login{Listener: auth.ListenerAdmin, User: user}
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		l.Addr = net.TCPAddrFromAddrPort(ap)
	}
	if r.TLS != nil {
		l.TLS = true
		if len(r.TLS.VerifiedChains) > 0 && len(r.TLS.PeerCertificates) > 0 {
			l.CertCN = r.TLS.PeerCertificates[0].Subject.CommonName
		}
	}
	return l
}

// bootstrapIdentity is who a request without credentials acts as in trust
// mode: the bootstrap superuser, by its current name.
func (s *Server) bootstrapIdentity() access.Identity {
	id := access.Identity{Role: catalog.BootstrapRole, Name: BootstrapUser}
	s.cat.Read(func(v *catalog.View) {
		if r, ok := v.Roles[catalog.BootstrapRole]; ok {
			id.Name = r.Name
		}
	})
	return id
}

// setForwardAuth makes req, a request this node forwards to another node's
// admin API on behalf of the caller of in, act for that caller there: a
// short-lived bearer token for the caller's role, so that the other node
// checks the same role.
func (s *Server) setForwardAuth(req, in *http.Request) error {
	id, ok := access.FromContext(in.Context())
	if !ok {
		// Every request but /healthz and /metrics went through
		// requireSuperuser, which put the identity there.
		panic(fmt.Sprintf("admin: forwarding %s %s without an authenticated caller", in.Method, in.URL.Path))
	}
	token, err := s.guard.ForwardToken(id)
	if err != nil {
		return fmt.Errorf("sign a token to forward the request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	return nil
}
