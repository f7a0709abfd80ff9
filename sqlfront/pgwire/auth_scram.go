package pgwire

import (
	"errors"
	"net"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/minkdb/mink/auth"
)

// Authentication: the server asks Config.Auth how each connection
// authenticates and runs SCRAM-SHA-256 (package auth) when told to, as
// PostgreSQL does: the mechanism is offered alone (no -PLUS, so no channel
// binding), the user name inside the SCRAM exchange is ignored in favour of
// the startup packet's, and a user that cannot log in with a password goes
// through the whole exchange with made-up credentials so that the failure
// does not reveal whether the user exists.

// Method is how a connection authenticates.
type Method int

const (
	// MethodTrust lets the connection in without a password.
	MethodTrust Method = iota
	// MethodSCRAM runs SCRAM-SHA-256 against Authenticator.Verifier.
	MethodSCRAM
)

// AuthRequest describes a connection asking to log in.
type AuthRequest struct {
	User       string
	Database   string
	RemoteAddr net.Addr
	TLS        bool
	// CertCN is the common name of the client certificate, when the client
	// presented one and it verified against the server's client CAs.
	CertCN string
}

// Authenticator decides how connections authenticate. Its methods are
// called concurrently from many connections.
type Authenticator interface {
	// Method is called after the startup packet. An *Error refuses the
	// connection with it (a reject rule, too many failed logins).
	Method(r AuthRequest) (Method, error)
	// Verifier returns the SCRAM verifier of user, or a mock verifier and
	// false when the user cannot log in with a password.
	Verifier(user string) (auth.Verifier, bool)
	// Done reports the outcome of the exchange: reason is empty on
	// success, else why it failed (for the log; the client is told less).
	Done(r AuthRequest, reason string)
}

// staticUsers is the Authenticator of Config.Users: fixed passwords, SCRAM
// for everyone.
type staticUsers struct {
	users   map[string]auth.Verifier
	mockKey []byte
}

func newStaticUsers(users map[string]string) (*staticUsers, error) {
	s := &staticUsers{users: make(map[string]auth.Verifier, len(users)), mockKey: auth.NewKey()}
	for user, password := range users {
		v, err := auth.NewVerifier(password)
		if err != nil {
			return nil, err
		}
		s.users[user] = v
	}
	return s, nil
}

func (s *staticUsers) Method(AuthRequest) (Method, error) { return MethodSCRAM, nil }

func (s *staticUsers) Verifier(user string) (auth.Verifier, bool) {
	if v, ok := s.users[user]; ok {
		return v, true
	}
	return auth.MockVerifier(s.mockKey, user), false
}

func (s *staticUsers) Done(AuthRequest, string) {}

// authenticate asks the Authenticator how the connection logs in and runs
// the exchange. On failure it has sent the FATAL error and returns
// errCloseConn.
func (c *conn) authenticate(r AuthRequest) error {
	a := c.srv.auth
	method, err := a.Method(r)
	if err != nil {
		return c.sendFatal(toError(err))
	}
	if method == MethodTrust {
		a.Done(r, "")
		return nil
	}
	protocolError := func(format string, args ...any) error {
		a.Done(r, "protocol violation")
		return c.sendFatal(Errorf(CodeProtocolViolation, format, args...))
	}

	c.be.Send(&pgproto3.AuthenticationSASL{AuthMechanisms: []string{auth.Mechanism}})
	if err := c.flush(); err != nil {
		return err
	}
	if err := c.be.SetAuthType(pgproto3.AuthTypeSASL); err != nil {
		return err
	}
	msg, err := c.be.Receive()
	if err != nil {
		c.receiveFailed(err)
		return errCloseConn
	}
	initial, ok := msg.(*pgproto3.SASLInitialResponse)
	if !ok {
		return protocolError("expected SASL response, got message type %T", msg)
	}
	if initial.AuthMechanism != auth.Mechanism {
		return protocolError("client selected an invalid SASL authentication mechanism")
	}
	x := auth.NewSCRAMServer(func(string) (auth.Verifier, bool) { return a.Verifier(r.User) })
	serverFirst, err := x.ServerFirst(initial.Data)
	if err != nil {
		return protocolError("%v", err)
	}
	c.be.Send(&pgproto3.AuthenticationSASLContinue{Data: serverFirst})
	if err := c.flush(); err != nil {
		return err
	}
	if err := c.be.SetAuthType(pgproto3.AuthTypeSASLContinue); err != nil {
		return err
	}
	msg, err = c.be.Receive()
	if err != nil {
		c.receiveFailed(err)
		return errCloseConn
	}
	resp, ok := msg.(*pgproto3.SASLResponse)
	if !ok {
		return protocolError("expected SASL response, got message type %T", msg)
	}
	serverFinal, err := x.ServerFinal(resp.Data)
	switch {
	case errors.Is(err, auth.ErrAuthFailed):
		a.Done(r, "wrong password, or no such role with a password and LOGIN")
		return c.sendFatal(Errorf(CodeInvalidPassword, "password authentication failed for user %q", r.User))
	case err != nil:
		return protocolError("%v", err)
	}
	a.Done(r, "")
	c.be.Send(&pgproto3.AuthenticationSASLFinal{Data: serverFinal})
	return nil
}
