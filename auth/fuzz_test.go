package auth

import (
	"testing"
	"time"
)

// Arbitrary client messages never panic the SCRAM server, and never log in
// without the password.
func FuzzSCRAMServer(f *testing.F) {
	v, err := NewVerifier("secret")
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte("n,,n=user,r=abc"), []byte("c=biws,r=abc,p=AAAA"))
	f.Add([]byte("y,a=x,n=a=2Cb,r=xyz"), []byte("c=eSxhPXgs,r=xyz123,p="))
	f.Add([]byte("p=tls-server-end-point,,n=,r=a"), []byte(""))
	f.Add([]byte("n,,m=x,n=u,r=n"), []byte(",p=,p=,p="))
	f.Fuzz(func(t *testing.T, first, final []byte) {
		x := NewSCRAMServer(func(string) (Verifier, bool) { return v, true })
		if _, err := x.ServerFirst(first); err != nil {
			return
		}
		if out, err := x.ServerFinal(final); err == nil {
			t.Fatalf("logged in without the password: first %q final %q -> %q", first, final, out)
		}
	})
}

// Arbitrary text never panics the verifier and token parsers, and never
// verifies as a token without the key.
func FuzzParseVerifierAndToken(f *testing.F) {
	key := NewKey()
	tok, err := SignToken(key, Claims{Role: "a", Expires: time.Now().Add(time.Hour)})
	if err != nil {
		f.Fatal(err)
	}
	f.Add("SCRAM-SHA-256$4096:c2FsdA==$c3RvcmVk:c2VydmVy")
	f.Add(tok)
	f.Add("mink1..")
	f.Fuzz(func(t *testing.T, s string) {
		if v, err := ParseVerifier(s); err == nil {
			if _, err := ParseVerifier(v.String()); err != nil {
				t.Fatalf("%q parses, its String %q does not", s, v.String())
			}
		}
		if s != tok {
			if _, err := VerifyToken(key, s, time.Now()); err == nil {
				t.Fatalf("%q verifies without being signed", s)
			}
		}
	})
}
