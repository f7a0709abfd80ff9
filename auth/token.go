package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Bearer tokens: what an Arrow Flight handshake hands a client, and what a
// node forwarding a request sends for the role it acts for. A token is
//
//	mink1.<claims>.<signature>
//
// with the claims as JSON and both parts in unpadded base64url; the
// signature is HMAC-SHA256 over "mink1.<claims>" with the cluster key (kept
// in the metadata log, so every node of the cluster accepts every node's
// tokens and a process without the key cannot make one).

const tokenPrefix = "mink1."

// KeyLen is the length of a cluster key.
const KeyLen = 32

var (
	// ErrBadToken is a token that is malformed or not signed with the key.
	ErrBadToken = errors.New("invalid token")
	// ErrTokenExpired is a well-signed token past its expiry.
	ErrTokenExpired = errors.New("token expired")
)

// Claims are what a token asserts.
type Claims struct {
	Role    string    `json:"role"`
	Expires time.Time `json:"exp"`
	// Forwarded marks a token a node made to forward a client's request
	// (Role is the client's); Node is that node.
	Forwarded bool   `json:"fwd,omitempty"`
	Node      uint64 `json:"node,omitempty"`
	// Password is PasswordStamp of the role's password when the token
	// was issued: a token stops working when the password changes.
	Password string `json:"pw,omitempty"`
}

// PasswordStamp is what a token records of a role's password: an HMAC of
// its SCRAM verifier's text under the cluster key, shortened (the token's
// claims are readable by whoever holds it, so they hold nothing that
// helps guess the password). "" for a role without a password.
func PasswordStamp(key []byte, verifier string) string {
	if verifier == "" {
		return ""
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte("mink password stamp\x00" + verifier))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:12])
}

// NewKey returns a random cluster key.
func NewKey() []byte {
	k := make([]byte, KeyLen)
	_, _ = rand.Read(k)
	return k
}

// SignToken returns the token of c signed with key.
func SignToken(key []byte, c Claims) (string, error) {
	if len(key) < KeyLen {
		return "", fmt.Errorf("auth: a cluster key of %d bytes, want %d", len(key), KeyLen)
	}
	body, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	signed := tokenPrefix + base64.RawURLEncoding.EncodeToString(body)
	return signed + "." + base64.RawURLEncoding.EncodeToString(hmacSHA256(key, []byte(signed))), nil
}

// VerifyToken checks token's signature against key and its expiry against
// now, and returns its claims.
func VerifyToken(key []byte, token string, now time.Time) (Claims, error) {
	if len(key) < KeyLen || !strings.HasPrefix(token, tokenPrefix) {
		return Claims{}, ErrBadToken
	}
	i := strings.LastIndexByte(token, '.')
	if i <= len(tokenPrefix) {
		return Claims{}, ErrBadToken
	}
	sig, err := base64.RawURLEncoding.DecodeString(token[i+1:])
	if err != nil || !hmac.Equal(sig, hmacSHA256(key, []byte(token[:i]))) {
		return Claims{}, ErrBadToken
	}
	body, err := base64.RawURLEncoding.DecodeString(token[len(tokenPrefix):i])
	if err != nil {
		return Claims{}, ErrBadToken
	}
	var c Claims
	if err := json.Unmarshal(body, &c); err != nil || c.Role == "" {
		return Claims{}, ErrBadToken
	}
	if !now.Before(c.Expires) {
		return Claims{}, ErrTokenExpired
	}
	return c, nil
}
