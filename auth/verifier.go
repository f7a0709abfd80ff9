package auth

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"golang.org/x/text/secure/precis"
)

const (
	// Mechanism is the SASL mechanism name of the verifiers.
	Mechanism = "SCRAM-SHA-256"
	// DefaultIterations is PostgreSQL's scram_iterations default.
	DefaultIterations = 4096

	saltLen = 16
)

// ErrBadVerifier is returned by ParseVerifier for text that is not a
// SCRAM-SHA-256 verifier.
var ErrBadVerifier = errors.New("auth: not a SCRAM-SHA-256 verifier")

// A Verifier is what a server stores for a password: enough to check a
// SCRAM proof (or a password sent in the clear, over TLS) and to prove
// itself to the client, but not the password.
type Verifier struct {
	Iterations int
	Salt       []byte
	StoredKey  []byte // H(HMAC(SaltedPassword, "Client Key"))
	ServerKey  []byte // HMAC(SaltedPassword, "Server Key")
}

// NewVerifier derives the verifier of password with a random salt and
// DefaultIterations.
func NewVerifier(password string) (Verifier, error) {
	salt := make([]byte, saltLen)
	_, _ = rand.Read(salt)
	return deriveVerifier(password, salt, DefaultIterations)
}

func deriveVerifier(password string, salt []byte, iterations int) (Verifier, error) {
	salted, err := saltedPassword(password, salt, iterations)
	if err != nil {
		return Verifier{}, err
	}
	stored := sha256.Sum256(hmacSHA256(salted, []byte("Client Key")))
	return Verifier{
		Iterations: iterations,
		Salt:       salt,
		StoredKey:  stored[:],
		ServerKey:  hmacSHA256(salted, []byte("Server Key")),
	}, nil
}

func saltedPassword(password string, salt []byte, iterations int) ([]byte, error) {
	return pbkdf2.Key(sha256.New, saslPrep(password), salt, iterations, sha256.Size)
}

// String is the verifier in PostgreSQL's pg_authid.rolpassword format:
//
//	SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>
//
// with the three byte strings in standard base64.
func (v Verifier) String() string {
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("%s$%d:%s$%s:%s", Mechanism, v.Iterations, b64(v.Salt), b64(v.StoredKey), b64(v.ServerKey))
}

// ParseVerifier parses the String form. It also accepts the verifiers
// PostgreSQL stores, so that a role's rolpassword can be carried over.
func ParseVerifier(s string) (Verifier, error) {
	mech, rest, ok := strings.Cut(s, "$")
	if !ok || mech != Mechanism {
		return Verifier{}, ErrBadVerifier
	}
	params, keys, ok := strings.Cut(rest, "$")
	if !ok {
		return Verifier{}, ErrBadVerifier
	}
	iterText, saltText, ok := strings.Cut(params, ":")
	if !ok {
		return Verifier{}, ErrBadVerifier
	}
	storedText, serverText, ok := strings.Cut(keys, ":")
	if !ok {
		return Verifier{}, ErrBadVerifier
	}
	iterations, err := strconv.Atoi(iterText)
	if err != nil || iterations < 1 || iterations > 1<<24 {
		return Verifier{}, ErrBadVerifier
	}
	var v Verifier
	v.Iterations = iterations
	for _, f := range []struct {
		text string
		dst  *[]byte
		n    int // 0: any non-empty length
	}{{saltText, &v.Salt, 0}, {storedText, &v.StoredKey, sha256.Size}, {serverText, &v.ServerKey, sha256.Size}} {
		b, err := base64.StdEncoding.DecodeString(f.text)
		if err != nil || len(b) == 0 || (f.n > 0 && len(b) != f.n) {
			return Verifier{}, ErrBadVerifier
		}
		*f.dst = b
	}
	return v, nil
}

// LooksLikeVerifier reports whether s is in a verifier's format: PASSWORD
// 'SCRAM-SHA-256$…' stores the verifier given instead of deriving one, as
// PostgreSQL does.
func LooksLikeVerifier(s string) bool {
	_, err := ParseVerifier(s)
	return err == nil
}

// Matches reports whether password is the one the verifier was derived
// from. It costs one key derivation (Iterations rounds of HMAC), like a
// SCRAM exchange; it is for protocols that carry the password itself
// (Kafka SASL/PLAIN and HTTP basic, both only sensible over TLS).
func (v Verifier) Matches(password string) bool {
	salted, err := saltedPassword(password, v.Salt, v.Iterations)
	if err != nil {
		return false
	}
	stored := sha256.Sum256(hmacSHA256(salted, []byte("Client Key")))
	return subtle.ConstantTimeCompare(stored[:], v.StoredKey) == 1
}

// MockVerifier is the stand-in verifier of an unknown user: a server runs
// the whole exchange with it so that the failure does not reveal whether
// the user exists. The salt is stable per user (derived from key), as a
// real user's would be; the keys match no password.
func MockVerifier(key []byte, user string) Verifier {
	random := make([]byte, sha256.Size)
	_, _ = rand.Read(random)
	return Verifier{
		Iterations: DefaultIterations,
		Salt:       hmacSHA256(key, []byte(user))[:saltLen],
		StoredKey:  random,
		ServerKey:  random,
	}
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
