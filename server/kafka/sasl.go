package kafka

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/minkdb/mink/access"
	"github.com/minkdb/mink/auth"
)

// SASL on the Kafka listener (KIP-43, KIP-152), against the roles of the
// metadata log through the guard: SaslHandshake picks a mechanism, then
// the mechanism's tokens travel in SaslAuthenticate requests, or, after a
// v0 handshake, as unframed tokens (a 4-byte length and the bytes, both
// ways), as Kafka 0.10 clients send them. A failed authentication is
// answered and then closes the connection, as Kafka does. Authentication
// lasts as long as the connection (SessionLifetimeMs 0: no KIP-368
// re-authentication).

// The mechanisms offered, in the order SaslHandshake lists them.
// SCRAM-SHA-512 is not: the stored verifiers are SCRAM-SHA-256's.
const (
	mechanismPlain = "PLAIN"
	mechanismSCRAM = "SCRAM-SHA-256"
)

var mechanisms = []string{mechanismPlain, mechanismSCRAM}

// maxAuthFrameBytes bounds a frame before the connection is authenticated
// (Kafka's sasl.server.max.receive.size), so that an unauthenticated
// client cannot make the node allocate MaxRequestBytes.
const maxAuthFrameBytes = 512 << 10

// Kafka's messages for failed logins: they do not say whether the role
// exists, and neither do these.
const (
	msgPlainFailed = "Authentication failed: Invalid username or password"
	msgSCRAMFailed = "Authentication failed during authentication due to invalid credentials with SASL mechanism " + mechanismSCRAM
)

// saslStage is where a connection is in its SASL exchange.
type saslStage uint8

const (
	saslNone       saslStage = iota // no handshake yet
	saslHandshaken                  // a mechanism is chosen; its first token is next
	saslSCRAMFinal                  // SCRAM: the server-first-message is sent; the client-final-message is next
	saslDone                        // authenticated
)

// session is one connection's authentication: who it acts as and where
// its SASL exchange is. It is owned by the connection's reader goroutine.
type session struct {
	conn   net.Conn
	remote net.Addr
	// id is the role the connection authenticated as; nil before (in
	// trust mode such a connection acts as the bootstrap superuser).
	id        *access.Identity
	stage     saslStage
	mechanism string
	// raw: the handshake was v0, so tokens arrive unframed.
	raw   bool
	scram *auth.SCRAMServer
}

// needsAuth reports whether the connection must authenticate before
// anything but ApiVersions and SASL.
func (s *Server) needsAuth(ss *session) bool {
	return s.cfg.Access != nil && !s.cfg.Access.Trust() && ss.id == nil
}

// rawToken reports whether the next frame of the connection is an
// unframed SASL token (after a v0 handshake).
func (ss *session) rawToken() bool {
	return ss.raw && (ss.stage == saslHandshaken || ss.stage == saslSCRAMFinal)
}

// exchanging reports whether a SASL exchange is under way: only its next
// SaslAuthenticate may come.
func (ss *session) exchanging() bool {
	return ss.stage == saslHandshaken || ss.stage == saslSCRAMFinal
}

// allowedBeforeAuth reports whether a request of key may come on a
// connection that has not authenticated.
func allowedBeforeAuth(key int16) bool {
	switch kmsg.Key(key) {
	case kmsg.ApiVersions, kmsg.SASLHandshake, kmsg.SASLAuthenticate:
		return true
	}
	return false
}

// login describes an attempt to log in as user for the guard: with the
// connection's TLS and verified client certificate, which --hba-file's
// hostssl rules, clientcert and the cert method look at.
func (ss *session) login(user string) access.Login {
	l := access.Login{Listener: auth.ListenerKafka, User: user, Addr: ss.remote}
	if tc, ok := ss.conn.(*tls.Conn); ok {
		// The handshake is done: the connection has been read from.
		l.TLS = true
		if st := tc.ConnectionState(); len(st.VerifiedChains) > 0 {
			l.CertCN = st.PeerCertificates[0].Subject.CommonName
		}
	}
	return l
}

// saslError is a failed SASL step: the code and message for the client.
// The connection closes after it is answered.
type saslError struct {
	code *kerr.Error
	msg  string
}

func (e *saslError) Error() string { return e.msg }

// saslHandshake answers a SaslHandshake. close: answer, then close the
// connection (an unsupported mechanism, as Kafka does).
func (s *Server) saslHandshake(ss *session, req *kmsg.SASLHandshakeRequest) (resp kmsg.Response, close bool) {
	r := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	r.SupportedMechanisms = slices.Clone(mechanisms)
	switch {
	case ss.stage == saslDone:
		// No KIP-368 re-authentication; the connection stays as it is.
		// (During an exchange the reader closes the connection for any
		// request but SaslAuthenticate.)
		r.ErrorCode = kerr.IllegalSaslState.Code
		return r, false
	case !slices.Contains(mechanisms, req.Mechanism):
		r.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		s.cfg.Logger.Info("kafka: SASL mechanism not offered", "remote", ss.remote.String(), "mechanism", req.Mechanism)
		return r, true
	}
	ss.stage, ss.mechanism, ss.raw = saslHandshaken, req.Mechanism, req.Version == 0
	return r, false
}

// saslAuthenticate answers a SaslAuthenticate. close: answer, then close
// the connection (a failed authentication).
func (s *Server) saslAuthenticate(ss *session, req *kmsg.SASLAuthenticateRequest) (resp kmsg.Response, close bool) {
	r := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	r.SASLAuthBytes = []byte{}
	fail := func(code *kerr.Error, msg string) (kmsg.Response, bool) {
		r.ErrorCode, r.ErrorMessage = code.Code, &msg
		return r, true
	}
	switch {
	case ss.stage == saslDone:
		// KIP-368 re-authentication is not offered (SessionLifetimeMs
		// 0); the connection stays as it is.
		msg := "SaslAuthenticate after a successful authentication: this listener does not re-authenticate"
		r.ErrorCode, r.ErrorMessage = kerr.IllegalSaslState.Code, &msg
		return r, false
	case ss.stage == saslNone:
		return fail(kerr.IllegalSaslState, "SaslAuthenticate before SaslHandshake")
	}
	// After a v0 handshake the reader takes the next frame as an unframed
	// token, so a SaslAuthenticate cannot arrive here then.
	out, err := s.saslToken(ss, req.SASLAuthBytes)
	if err != nil {
		var se *saslError
		if !errors.As(err, &se) {
			se = &saslError{code: kerr.SaslAuthenticationFailed, msg: err.Error()}
		}
		return fail(se.code, se.msg)
	}
	r.SASLAuthBytes = out
	r.SessionLifetimeMillis = 0
	return r, false
}

// saslToken takes the next token of the exchange and returns the server's
// answer: a challenge, or the last token when ss is authenticated. An
// error is a *saslError; the caller answers it and closes the connection.
func (s *Server) saslToken(ss *session, token []byte) ([]byte, error) {
	switch {
	case ss.mechanism == mechanismPlain && ss.stage == saslHandshaken:
		return s.plain(ss, token)
	case ss.mechanism == mechanismSCRAM && ss.stage == saslHandshaken:
		return s.scramFirst(ss, token)
	case ss.mechanism == mechanismSCRAM && ss.stage == saslSCRAMFinal:
		return s.scramFinal(ss, token)
	}
	panic(fmt.Sprintf("kafka: SASL token in stage %d of mechanism %q", ss.stage, ss.mechanism))
}

// plain checks a SASL/PLAIN message (RFC 4616): [authzid] NUL authcid NUL
// passwd.
func (s *Server) plain(ss *session, token []byte) ([]byte, error) {
	g := s.cfg.Access
	parts := bytes.Split(token, []byte{0})
	malformed := func(user, why string) error {
		if err := g.Admit(ss.login(user)); err != nil {
			return &saslError{code: kerr.SaslAuthenticationFailed, msg: "Authentication failed: " + err.Error()}
		}
		g.Failed(ss.login(user), "malformed SASL/PLAIN message: "+why)
		return &saslError{code: kerr.SaslAuthenticationFailed, msg: "Authentication failed: " + why}
	}
	if len(parts) != 3 {
		return nil, malformed("", fmt.Sprintf("Invalid SASL/PLAIN response: expected 3 tokens, got %d", len(parts)))
	}
	authzid, user, password := string(parts[0]), string(parts[1]), string(parts[2])
	switch {
	case user == "":
		return nil, malformed(user, "username not specified")
	case password == "":
		return nil, malformed(user, "password not specified")
	case authzid != "" && authzid != user:
		return nil, malformed(user, "Client requested an authorization id that is different from username")
	}
	id, err := g.Password(ss.login(user), password)
	switch {
	case errors.Is(err, access.ErrTooManyFailures):
		return nil, &saslError{code: kerr.SaslAuthenticationFailed, msg: "Authentication failed: " + err.Error()}
	case err != nil:
		return nil, &saslError{code: kerr.SaslAuthenticationFailed, msg: msgPlainFailed}
	}
	ss.id, ss.stage, ss.scram = &id, saslDone, nil
	return []byte{}, nil
}

// scramFirst takes the client-first-message, which names the user, and
// returns the server-first-message.
func (s *Server) scramFirst(ss *session, token []byte) ([]byte, error) {
	g := s.cfg.Access
	ss.scram = auth.NewSCRAMServer(g.Verifier)
	first, err := ss.scram.ServerFirst(token)
	l := ss.login(ss.scram.User())
	if err := g.Admit(l); err != nil {
		return nil, &saslError{code: kerr.SaslAuthenticationFailed, msg: "Authentication failed: " + err.Error()}
	}
	if err != nil {
		g.Failed(l, err.Error())
		return nil, &saslError{code: kerr.SaslAuthenticationFailed, msg: "Authentication failed: " + err.Error()}
	}
	// The host rules (--hba-file) may refuse the role here, or want a
	// client certificate besides. A rule of method trust cannot spare
	// SCRAM its password: the client checks the server's proof, which
	// only the verifier gives.
	method, clientCert, err := g.Rule(l)
	if err == nil {
		if reason := access.CheckCert(l, method, clientCert); reason != "" {
			err = errors.New(reason)
		}
	}
	if err != nil {
		g.Failed(l, err.Error())
		return nil, &saslError{code: kerr.SaslAuthenticationFailed, msg: msgSCRAMFailed}
	}
	ss.stage = saslSCRAMFinal
	return first, nil
}

// scramFinal checks the client-final-message's proof and returns the
// server-final-message.
func (s *Server) scramFinal(ss *session, token []byte) ([]byte, error) {
	g := s.cfg.Access
	user := ss.scram.User()
	l := ss.login(user)
	final, err := ss.scram.ServerFinal(token)
	ss.scram = nil
	var id access.Identity
	var reason string
	switch {
	case errors.Is(err, auth.ErrAuthFailed):
		reason = s.scramFailure(user)
	case err != nil:
		g.Failed(l, err.Error())
		return nil, &saslError{code: kerr.SaslAuthenticationFailed, msg: "Authentication failed: " + err.Error()}
	default:
		// The role may have changed since the verifier was read.
		id, reason, err = g.Resolve(user)
	}
	if reason != "" || err != nil {
		g.Failed(l, reason)
		return nil, &saslError{code: kerr.SaslAuthenticationFailed, msg: msgSCRAMFailed}
	}
	g.Succeeded(l)
	ss.id, ss.stage = &id, saslDone
	return final, nil
}

// scramFailure is why a SCRAM proof failed, for the log.
func (s *Server) scramFailure(user string) string {
	g := s.cfg.Access
	if _, reason, err := g.Resolve(user); err != nil {
		return reason
	}
	if _, ok := g.Verifier(user); !ok {
		return "the role has no password"
	}
	return "wrong password"
}
