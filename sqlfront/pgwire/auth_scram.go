package pgwire

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strings"
	"unicode"

	"github.com/jackc/pgx/v5/pgproto3"
	"golang.org/x/text/secure/precis"
)

// SCRAM-SHA-256 server side (RFC 5802, RFC 7677), as PostgreSQL runs it:
// the mechanism is offered alone (no -PLUS, so no channel binding), the
// user name inside the SCRAM exchange is ignored in favour of the startup
// packet's, and an unknown user goes through the whole exchange with made-up
// credentials so that the failure does not reveal whether the user exists.

const (
	scramMechanism  = "SCRAM-SHA-256"
	scramIterations = 4096 // PostgreSQL's scram_iterations default
)

// scramCredential is what a server stores for a user: enough to verify a
// proof and to prove itself, but not the password.
type scramCredential struct {
	salt       []byte
	iterations int
	storedKey  []byte // H(HMAC(SaltedPassword, "Client Key"))
	serverKey  []byte // HMAC(SaltedPassword, "Server Key")
}

// scramStore holds the credentials of the configured users. It is
// read-only after newSCRAMStore, so connections share it without locking.
type scramStore struct {
	users   map[string]scramCredential
	mockKey []byte // makes the mock salt of an unknown user stable
}

func newSCRAMStore(users map[string]string) (*scramStore, error) {
	s := &scramStore{users: make(map[string]scramCredential, len(users)), mockKey: make([]byte, 32)}
	_, _ = rand.Read(s.mockKey)
	for user, password := range users {
		salt := make([]byte, 16)
		_, _ = rand.Read(salt)
		cred, err := newSCRAMCredential(password, salt, scramIterations)
		if err != nil {
			return nil, fmt.Errorf("pgwire: SCRAM credential of user %q: %w", user, err)
		}
		s.users[user] = cred
	}
	return s, nil
}

func newSCRAMCredential(password string, salt []byte, iterations int) (scramCredential, error) {
	salted, err := pbkdf2.Key(sha256.New, saslPrep(password), salt, iterations, sha256.Size)
	if err != nil {
		return scramCredential{}, err
	}
	clientKey := hmacSHA256(salted, []byte("Client Key"))
	stored := sha256.Sum256(clientKey)
	return scramCredential{
		salt:       salt,
		iterations: iterations,
		storedKey:  stored[:],
		serverKey:  hmacSHA256(salted, []byte("Server Key")),
	}, nil
}

// lookup returns the user's credential, or a mock one and false.
func (s *scramStore) lookup(user string) (scramCredential, bool) {
	if cred, ok := s.users[user]; ok {
		return cred, true
	}
	mockSalt := hmacSHA256(s.mockKey, []byte(user))[:16]
	random := make([]byte, 32)
	_, _ = rand.Read(random)
	return scramCredential{salt: mockSalt, iterations: scramIterations, storedKey: random, serverKey: random}, false
}

// saslPrep normalises a password the way clients do before hashing it
// (pgx uses the same PRECIS profile; libpq implements SASLprep). Like
// PostgreSQL, a password that the profile rejects is used as is.
func saslPrep(password string) string {
	for _, r := range password {
		if r > unicode.MaxASCII {
			if p, err := precis.OpaqueString.String(password); err == nil {
				return p
			}
			return password
		}
	}
	return password
}

func hmacSHA256(key, msg []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write(msg)
	return h.Sum(nil)
}

// authenticate runs the SCRAM-SHA-256 exchange. On failure it has sent the
// FATAL error and returns errCloseConn.
func (c *conn) authenticate(user string) error {
	cred, known := c.srv.scram.lookup(user)
	authFailed := func() error {
		return c.sendFatal(Errorf(CodeInvalidPassword, "password authentication failed for user %q", user))
	}
	protocolError := func(format string, args ...any) error {
		return c.sendFatal(Errorf(CodeProtocolViolation, format, args...))
	}

	c.be.Send(&pgproto3.AuthenticationSASL{AuthMechanisms: []string{scramMechanism}})
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
	if initial.AuthMechanism != scramMechanism {
		return protocolError("client selected an invalid SASL authentication mechanism")
	}
	first, err := parseClientFirst(string(initial.Data))
	if err != nil {
		return protocolError("malformed SCRAM message: %v", err)
	}

	nonceBytes := make([]byte, 18)
	_, _ = rand.Read(nonceBytes)
	nonce := first.clientNonce + base64.StdEncoding.EncodeToString(nonceBytes)
	serverFirst := fmt.Sprintf("r=%s,s=%s,i=%d", nonce, base64.StdEncoding.EncodeToString(cred.salt), cred.iterations)
	c.be.Send(&pgproto3.AuthenticationSASLContinue{Data: []byte(serverFirst)})
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
	final, err := parseClientFinal(string(resp.Data))
	if err != nil {
		return protocolError("malformed SCRAM message: %v", err)
	}
	if final.channelBinding != base64.StdEncoding.EncodeToString([]byte(first.gs2Header)) {
		return protocolError("malformed SCRAM message: SCRAM channel binding check failed")
	}
	if final.nonce != nonce {
		return protocolError("malformed SCRAM message: unexpected SCRAM nonce")
	}

	serverFinal, ok := scramVerify(cred, first, serverFirst, final)
	if !known || !ok {
		c.log.Info("pgwire: password authentication failed", "user", user, "known_user", known)
		return authFailed()
	}
	c.be.Send(&pgproto3.AuthenticationSASLFinal{Data: []byte(serverFinal)})
	return nil
}

// scramVerify checks the client's proof. It returns the server-final-message
// ("v=" and the server signature) and whether the proof is right.
func scramVerify(cred scramCredential, first scramClientFirst, serverFirst string, final scramClientFinal) (string, bool) {
	authMessage := []byte(first.bare + "," + serverFirst + "," + final.withoutProof)
	clientSignature := hmacSHA256(cred.storedKey, authMessage)
	if len(final.proof) != len(clientSignature) {
		return "", false
	}
	clientKey := make([]byte, len(clientSignature))
	subtle.XORBytes(clientKey, final.proof, clientSignature)
	got := sha256.Sum256(clientKey)
	if subtle.ConstantTimeCompare(got[:], cred.storedKey) != 1 {
		return "", false
	}
	serverSignature := hmacSHA256(cred.serverKey, authMessage)
	return "v=" + base64.StdEncoding.EncodeToString(serverSignature), true
}

type scramClientFirst struct {
	gs2Header   string // "n,," or "y,,", with any authzid
	bare        string // client-first-message-bare
	clientNonce string
}

// parseClientFirst parses
//
//	gs2-cbind-flag "," [authzid] "," ["m=" ext ","] "n=" user "," "r=" nonce ["," ext]...
func parseClientFirst(s string) (scramClientFirst, error) {
	var f scramClientFirst
	switch {
	case strings.HasPrefix(s, "p="):
		return f, fmt.Errorf("channel binding is not supported by this server (client sent %q)", strings.SplitN(s, ",", 2)[0])
	case strings.HasPrefix(s, "n,"), strings.HasPrefix(s, "y,"):
	default:
		return f, fmt.Errorf("unexpected channel-binding flag in client-first-message")
	}
	authzEnd := strings.IndexByte(s[2:], ',')
	if authzEnd < 0 {
		return f, fmt.Errorf("missing authzid separator")
	}
	f.gs2Header = s[:2+authzEnd+1]
	f.bare = s[len(f.gs2Header):]
	attrs := strings.Split(f.bare, ",")
	if len(attrs) < 2 {
		return f, fmt.Errorf("client-first-message too short")
	}
	if strings.HasPrefix(attrs[0], "m=") {
		return f, fmt.Errorf("unsupported mandatory SCRAM extension")
	}
	if !strings.HasPrefix(attrs[0], "n=") {
		return f, fmt.Errorf("expected attribute \"n\"")
	}
	if !strings.HasPrefix(attrs[1], "r=") || len(attrs[1]) < 3 {
		return f, fmt.Errorf("expected attribute \"r\"")
	}
	f.clientNonce = attrs[1][2:]
	for _, ch := range f.clientNonce {
		if ch < 0x21 || ch > 0x7e || ch == ',' {
			return f, fmt.Errorf("invalid nonce")
		}
	}
	return f, nil
}

type scramClientFinal struct {
	channelBinding string // the c= attribute, base64
	nonce          string
	proof          []byte
	withoutProof   string // client-final-message-without-proof
}

// parseClientFinal parses "c=" cbind "," "r=" nonce ["," ext]... "," "p=" proof.
func parseClientFinal(s string) (scramClientFinal, error) {
	var f scramClientFinal
	i := strings.LastIndex(s, ",p=")
	if i < 0 {
		return f, fmt.Errorf("could not find proof in client-final-message")
	}
	f.withoutProof = s[:i]
	proof, err := base64.StdEncoding.DecodeString(s[i+3:])
	if err != nil {
		return f, fmt.Errorf("malformed proof in client-final-message")
	}
	f.proof = proof
	attrs := strings.Split(f.withoutProof, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "c=") || !strings.HasPrefix(attrs[1], "r=") {
		return f, fmt.Errorf("expected attributes \"c\" and \"r\"")
	}
	f.channelBinding = attrs[0][2:]
	f.nonce = attrs[1][2:]
	return f, nil
}
