package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// The server side of SCRAM-SHA-256 (RFC 5802, RFC 7677), shared by the
// Postgres listener (SASL in the startup exchange) and the Kafka listener
// (SaslAuthenticate). The mechanism is offered alone, without -PLUS: no
// channel binding.

var (
	// ErrMalformed is a SCRAM message that breaks the protocol; the
	// wrapped text says how.
	ErrMalformed = errors.New("malformed SCRAM message")
	// ErrAuthFailed is a wrong proof, or a user that does not exist (the
	// two are not told apart).
	ErrAuthFailed = errors.New("password authentication failed")
)

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// SCRAMServer runs one exchange: ServerFirst, then ServerFinal. It is not
// safe for concurrent use.
type SCRAMServer struct {
	lookup func(user string) (Verifier, bool)

	user        string
	verifier    Verifier
	known       bool
	first       clientFirst
	serverFirst string
	nonce       string
	done        bool
}

// NewSCRAMServer starts an exchange. lookup returns the verifier of the
// user the client names (for an unknown user: MockVerifier and false, so
// that the exchange runs to its end either way). The Postgres listener
// ignores the name, which libpq leaves empty, and looks up the startup
// packet's user instead.
func NewSCRAMServer(lookup func(user string) (v Verifier, known bool)) *SCRAMServer {
	return &SCRAMServer{lookup: lookup}
}

// User is the user named in the client-first-message, unescaped.
func (x *SCRAMServer) User() string { return x.user }

// ServerFirst takes the client-first-message and returns the
// server-first-message (nonce, salt, iterations).
func (x *SCRAMServer) ServerFirst(clientFirstMessage []byte) ([]byte, error) {
	if x.serverFirst != "" {
		return nil, malformed("a second client-first-message")
	}
	first, err := parseClientFirst(string(clientFirstMessage))
	if err != nil {
		return nil, err
	}
	x.first, x.user = first, first.user
	x.verifier, x.known = x.lookup(first.user)
	nonce := make([]byte, 18)
	_, _ = rand.Read(nonce)
	x.nonce = first.clientNonce + base64.StdEncoding.EncodeToString(nonce)
	x.serverFirst = fmt.Sprintf("r=%s,s=%s,i=%d", x.nonce, base64.StdEncoding.EncodeToString(x.verifier.Salt), x.verifier.Iterations)
	return []byte(x.serverFirst), nil
}

// ServerFinal takes the client-final-message and checks its proof. It
// returns the server-final-message ("v=" and the server signature) when the
// proof is right, ErrAuthFailed when it is wrong or the user is unknown, and
// an ErrMalformed error for a message that breaks the protocol.
func (x *SCRAMServer) ServerFinal(clientFinalMessage []byte) ([]byte, error) {
	if x.serverFirst == "" || x.done {
		return nil, malformed("client-final-message out of order")
	}
	x.done = true
	final, err := parseClientFinal(string(clientFinalMessage))
	if err != nil {
		return nil, err
	}
	if final.channelBinding != base64.StdEncoding.EncodeToString([]byte(x.first.gs2Header)) {
		return nil, malformed("SCRAM channel binding check failed")
	}
	// librdkafka before 2.6.1 (kcat, confluent-kafka) sends the client's
	// nonce twice (confluentinc/librdkafka#4895); Kafka accepts it. The
	// server's fresh part must be there either way.
	if final.nonce != x.nonce && final.nonce != x.first.clientNonce+x.nonce {
		return nil, malformed("unexpected SCRAM nonce")
	}
	authMessage := []byte(x.first.bare + "," + x.serverFirst + "," + final.withoutProof)
	clientSignature := hmacSHA256(x.verifier.StoredKey, authMessage)
	if len(final.proof) != len(clientSignature) {
		return nil, ErrAuthFailed
	}
	clientKey := make([]byte, len(clientSignature))
	subtle.XORBytes(clientKey, final.proof, clientSignature)
	got := sha256.Sum256(clientKey)
	if subtle.ConstantTimeCompare(got[:], x.verifier.StoredKey) != 1 || !x.known {
		return nil, ErrAuthFailed
	}
	return []byte("v=" + base64.StdEncoding.EncodeToString(hmacSHA256(x.verifier.ServerKey, authMessage))), nil
}

type clientFirst struct {
	gs2Header   string // "n,," or "y,,", with any authzid
	bare        string // client-first-message-bare
	user        string
	clientNonce string
}

// parseClientFirst parses
//
//	gs2-cbind-flag "," [authzid] "," ["m=" ext ","] "n=" user "," "r=" nonce ["," ext]...
func parseClientFirst(s string) (clientFirst, error) {
	var f clientFirst
	switch {
	case strings.HasPrefix(s, "p="):
		return f, malformed("channel binding is not supported by this server (client sent %q)", strings.SplitN(s, ",", 2)[0])
	case strings.HasPrefix(s, "n,"), strings.HasPrefix(s, "y,"):
	default:
		return f, malformed("unexpected channel-binding flag in client-first-message")
	}
	authzEnd := strings.IndexByte(s[2:], ',')
	if authzEnd < 0 {
		return f, malformed("missing authzid separator")
	}
	f.gs2Header = s[:2+authzEnd+1]
	f.bare = s[len(f.gs2Header):]
	attrs := strings.Split(f.bare, ",")
	if len(attrs) < 2 {
		return f, malformed("client-first-message too short")
	}
	if strings.HasPrefix(attrs[0], "m=") {
		return f, malformed("unsupported mandatory SCRAM extension")
	}
	if !strings.HasPrefix(attrs[0], "n=") {
		return f, malformed("expected attribute \"n\"")
	}
	user, err := unescapeSASLName(attrs[0][2:])
	if err != nil {
		return f, err
	}
	f.user = user
	if !strings.HasPrefix(attrs[1], "r=") || len(attrs[1]) < 3 {
		return f, malformed("expected attribute \"r\"")
	}
	f.clientNonce = attrs[1][2:]
	for _, ch := range f.clientNonce {
		if ch < 0x21 || ch > 0x7e || ch == ',' {
			return f, malformed("invalid nonce")
		}
	}
	return f, nil
}

// unescapeSASLName undoes RFC 5802's escaping of ',' as "=2C" and '=' as
// "=3D" in a user name.
func unescapeSASLName(s string) (string, error) {
	if !strings.Contains(s, "=") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", malformed("invalid escape in user name")
		}
		i += 2
	}
	return b.String(), nil
}

type clientFinal struct {
	channelBinding string // the c= attribute, base64
	nonce          string
	proof          []byte
	withoutProof   string // client-final-message-without-proof
}

// parseClientFinal parses "c=" cbind "," "r=" nonce ["," ext]... "," "p=" proof.
func parseClientFinal(s string) (clientFinal, error) {
	var f clientFinal
	i := strings.LastIndex(s, ",p=")
	if i < 0 {
		return f, malformed("could not find proof in client-final-message")
	}
	f.withoutProof = s[:i]
	proof, err := base64.StdEncoding.DecodeString(s[i+3:])
	if err != nil {
		return f, malformed("malformed proof in client-final-message")
	}
	f.proof = proof
	attrs := strings.Split(f.withoutProof, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "c=") || !strings.HasPrefix(attrs[1], "r=") {
		return f, malformed("expected attributes \"c\" and \"r\"")
	}
	f.channelBinding = attrs[0][2:]
	f.nonce = attrs[1][2:]
	return f, nil
}
