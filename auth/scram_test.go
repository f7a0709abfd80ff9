package auth

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// The exchange of RFC 7677 section 3 (user "user", password "pencil"), with
// the server's nonce and salt fixed to the RFC's.
func TestSCRAMRFC7677(t *testing.T) {
	salt := []byte{0x5b, 0x6d, 0x99, 0x68, 0x9d, 0x12, 0x35, 0x8e, 0xec, 0xa0, 0x4b, 0x14, 0x12, 0x36, 0xfa, 0x81}
	v, err := deriveVerifier("pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	x := NewSCRAMServer(func(user string) (Verifier, bool) { return v, user == "user" })
	if _, err := x.ServerFirst([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO")); err != nil {
		t.Fatal(err)
	}
	if x.User() != "user" {
		t.Fatalf("user %q", x.User())
	}
	// Replace the random server nonce with the RFC's, as if we had chosen it.
	x.nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
	x.serverFirst = "r=" + x.nonce + ",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
	final, err := x.ServerFinal([]byte("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(final), "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="; got != want {
		t.Fatalf("server-final %q, want %q", got, want)
	}
}

// A client side of the exchange, to drive the server with a password.
func clientExchange(t *testing.T, x *SCRAMServer, user, password string) error {
	t.Helper()
	bare := "n=" + user + ",r=clientnonce123"
	sf, err := x.ServerFirst([]byte("n,," + bare))
	if err != nil {
		return err
	}
	var nonce, saltB64 string
	var iter int
	for _, a := range strings.Split(string(sf), ",") {
		switch {
		case strings.HasPrefix(a, "r="):
			nonce = a[2:]
		case strings.HasPrefix(a, "s="):
			saltB64 = a[2:]
		case strings.HasPrefix(a, "i="):
			for _, c := range a[2:] {
				iter = iter*10 + int(c-'0')
			}
		}
	}
	salt, _ := b64decode(saltB64)
	salted, _ := saltedPassword(password, salt, iter)
	clientKey := hmacSHA256(salted, []byte("Client Key"))
	stored := sha256Sum(clientKey)
	withoutProof := "c=biws,r=" + nonce
	sig := hmacSHA256(stored, []byte(bare+","+string(sf)+","+withoutProof))
	proof := make([]byte, len(sig))
	for i := range sig {
		proof[i] = clientKey[i] ^ sig[i]
	}
	_, err = x.ServerFinal([]byte(withoutProof + ",p=" + b64encode(proof)))
	return err
}

func TestSCRAMPasswords(t *testing.T) {
	v, err := NewVerifier("s3cret é")
	if err != nil {
		t.Fatal(err)
	}
	mockKey := NewKey()
	lookup := func(user string) (Verifier, bool) {
		if user == "alice" {
			return v, true
		}
		return MockVerifier(mockKey, user), false
	}
	if err := clientExchange(t, NewSCRAMServer(lookup), "alice", "s3cret é"); err != nil {
		t.Fatalf("right password: %v", err)
	}
	if err := clientExchange(t, NewSCRAMServer(lookup), "alice", "wrong"); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("wrong password: %v, want ErrAuthFailed", err)
	}
	if err := clientExchange(t, NewSCRAMServer(lookup), "bob", "anything"); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("unknown user: %v, want ErrAuthFailed", err)
	}
	// An unknown user's salt is stable, as a real one's is.
	if a, b := MockVerifier(mockKey, "bob"), MockVerifier(mockKey, "bob"); string(a.Salt) != string(b.Salt) {
		t.Fatal("mock salt changes between lookups")
	}
	// User names escape ',' and '='.
	x := NewSCRAMServer(lookup)
	if _, err := x.ServerFirst([]byte("n,,n=a=2Cb=3Dc,r=abc")); err != nil || x.User() != "a,b=c" {
		t.Fatalf("escaped name: %q, %v", x.User(), err)
	}
}

func TestSCRAMMalformed(t *testing.T) {
	lookup := func(string) (Verifier, bool) { return MockVerifier(NewKey(), ""), false }
	for _, first := range []string{"", "x", "p=tls-server-end-point,,n=,r=a", "n,", "n,,", "n,,m=ext,n=,r=a", "n,,r=a,n=b", "n,,n=,r=", "n,,n=,r=a b", "n,,n=a=2X,r=abc"} {
		if _, err := NewSCRAMServer(lookup).ServerFirst([]byte(first)); !errors.Is(err, ErrMalformed) {
			t.Errorf("client-first %q: %v, want ErrMalformed", first, err)
		}
	}
	x := NewSCRAMServer(lookup)
	if _, err := x.ServerFinal([]byte("c=biws,r=a,p=AA==")); !errors.Is(err, ErrMalformed) {
		t.Errorf("final before first: %v", err)
	}
	if _, err := x.ServerFirst([]byte("n,,n=,r=abc")); err != nil {
		t.Fatal(err)
	}
	for _, final := range []string{"", "c=biws,r=abc", "c=biws,r=abc,p=!!", "r=abc,c=biws,p=AA==", "c=eSws,r=" + x.nonce + ",p=AA==", "c=biws,r=other,p=AA=="} {
		y := *x
		if _, err := y.ServerFinal([]byte(final)); !errors.Is(err, ErrMalformed) {
			t.Errorf("client-final %q: %v, want ErrMalformed", final, err)
		}
	}
}

func TestVerifierText(t *testing.T) {
	// A verifier PostgreSQL 15 stored for password "pw" (CREATE ROLE alice
	// LOGIN PASSWORD 'pw'; SELECT rolpassword FROM pg_authid): mink parses it and checks the password against it.
	const pg = "SCRAM-SHA-256$4096:SkoWARZoAKv7Fwmv0Po3Xg==$qf8skLXqW4HzIu1icljt+VfGEMcVtTs2P1GT1MGZtds=:X134gPSCpm5g7Yu4X2a51JE34rb3gzFhmlmEHynKxvE="
	v, err := ParseVerifier(pg)
	if err != nil {
		t.Fatal(err)
	}
	if v.String() != pg {
		t.Fatalf("round trip: %s", v.String())
	}
	if !v.Matches("pw") || v.Matches("pw ") || v.Matches("") {
		t.Fatal("Matches disagrees with PostgreSQL's verifier")
	}
	fresh, err := NewVerifier("pw")
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseVerifier(fresh.String())
	if err != nil || !back.Matches("pw") {
		t.Fatalf("a new verifier does not round-trip: %v", err)
	}
	for _, bad := range []string{"", "pw", "md5abc", "SCRAM-SHA-256$", "SCRAM-SHA-256$x:AA==$AA==:AA==", "SCRAM-SHA-256$4096:AA==$AA==:AA==", "SCRAM-SHA-256$0:" + pg[19:]} {
		if LooksLikeVerifier(bad) {
			t.Errorf("%q parsed as a verifier", bad)
		}
	}
}

func TestTokens(t *testing.T) {
	key, other := NewKey(), NewKey()
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	tok, err := SignToken(key, Claims{Role: "alice", Expires: now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	c, err := VerifyToken(key, tok, now)
	if err != nil || c.Role != "alice" {
		t.Fatalf("verify: %+v, %v", c, err)
	}
	if _, err := VerifyToken(key, tok, now.Add(time.Hour)); !errors.Is(err, ErrTokenExpired) {
		t.Fatalf("expired: %v", err)
	}
	if _, err := VerifyToken(other, tok, now); !errors.Is(err, ErrBadToken) {
		t.Fatalf("another cluster's key: %v", err)
	}
	// Changing the claims (say, to another role) breaks the signature.
	forged, _ := SignToken(other, Claims{Role: "mink", Expires: now.Add(time.Hour)})
	parts := strings.Split(tok, ".")
	fparts := strings.Split(forged, ".")
	for _, bad := range []string{"", "mink1.", "mink1..", tok + "x", parts[0] + "." + fparts[1] + "." + parts[2], "Bearer " + tok, strings.ToUpper(tok)} {
		if _, err := VerifyToken(key, bad, now); !errors.Is(err, ErrBadToken) {
			t.Errorf("token %q: %v, want ErrBadToken", bad, err)
		}
	}
	if _, err := SignToken([]byte("short"), Claims{Role: "a"}); err == nil {
		t.Fatal("a short key signs")
	}
}

// librdkafka before 2.6.1 repeats the client nonce in its final message;
// the server accepts that form (as Kafka does) and no other.
func TestSCRAMRepeatedClientNonce(t *testing.T) {
	v, err := NewVerifier("pw")
	if err != nil {
		t.Fatal(err)
	}
	final := func(x *SCRAMServer, nonce string) error {
		withoutProof := "c=biws,r=" + nonce
		salted, _ := saltedPassword("pw", v.Salt, v.Iterations)
		clientKey := hmacSHA256(salted, []byte("Client Key"))
		sig := hmacSHA256(sha256Sum(clientKey), []byte(x.first.bare+","+x.serverFirst+","+withoutProof))
		proof := make([]byte, len(sig))
		for i := range sig {
			proof[i] = clientKey[i] ^ sig[i]
		}
		_, err := x.ServerFinal([]byte(withoutProof + ",p=" + b64encode(proof)))
		return err
	}
	for _, c := range []struct {
		nonce func(x *SCRAMServer) string
		ok    bool
	}{
		{func(x *SCRAMServer) string { return x.nonce }, true},
		{func(x *SCRAMServer) string { return "cn" + x.nonce }, true},
		{func(x *SCRAMServer) string { return "cncn" }, false},
		{func(x *SCRAMServer) string { return "cnxx" + x.nonce[2:] }, false},
	} {
		x := NewSCRAMServer(func(string) (Verifier, bool) { return v, true })
		if _, err := x.ServerFirst([]byte("n,,n=u,r=cn")); err != nil {
			t.Fatal(err)
		}
		nonce := c.nonce(x)
		if err := final(x, nonce); (err == nil) != c.ok {
			t.Errorf("final nonce %q (server's %q): %v, want ok %v", nonce, x.nonce, err, c.ok)
		}
	}
}
