package access

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/minkdb/mink/auth"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/metalog"
)

func openCatalog(t *testing.T) *metalog.Catalog {
	t.Helper()
	cat, err := metalog.Open(context.Background(), metalog.NewMemLog(), metalog.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	return cat
}

func propose(t *testing.T, cat *metalog.Catalog, rec catalog.Record) catalog.Outcome {
	t.Helper()
	out, err := cat.Propose(context.Background(), rec)
	if err != nil {
		t.Fatalf("%+v: %v", rec, err)
	}
	return out
}

// countingLimiter refuses after max failures.
type countingLimiter struct{ failures, max int }

func (l *countingLimiter) Allow(netip.Addr, time.Time) (bool, time.Duration) {
	return l.failures < l.max, time.Second
}
func (l *countingLimiter) Failed(netip.Addr, time.Time) { l.failures++ }
func (l *countingLimiter) Succeeded(netip.Addr)         { l.failures = 0 }

func TestGuard(t *testing.T) {
	cat := openCatalog(t)
	v, err := auth.NewVerifier("right")
	if err != nil {
		t.Fatal(err)
	}
	propose(t, cat, catalog.CreateRole{Name: "mink", Login: true, Superuser: true, Verifier: v.String()})
	alice := propose(t, cat, catalog.CreateRole{Name: "alice", Login: true, Verifier: v.String()}).Role
	propose(t, cat, catalog.CreateRole{Name: "group"})
	propose(t, cat, catalog.CreateRole{Name: "nopw", Login: true})
	lim := &countingLimiter{max: 3}
	g := New(Config{Meta: cat, Node: 1, Limiter: lim, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	addr := &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 5000}
	login := func(user, pw string) (Identity, error) {
		return g.Password(Login{Listener: "kafka", User: user, Addr: addr}, pw)
	}

	if id, err := login("alice", "right"); err != nil || id.Role != alice {
		t.Fatalf("alice: %+v, %v", id, err)
	}
	for _, c := range [][2]string{{"alice", "wrong"}, {"nobody", "right"}, {"group", "right"}} {
		if _, err := login(c[0], c[1]); !errors.Is(err, ErrAuthFailed) {
			t.Errorf("%s/%s: %v, want ErrAuthFailed", c[0], c[1], err)
		}
	}
	if _, err := login("alice", "right"); !errors.Is(err, ErrTooManyFailures) {
		t.Fatalf("after 3 failures: %v, want ErrTooManyFailures", err)
	}
	lim.failures = 0
	if _, err := login("nopw", ""); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("a role without a password: %v", err)
	}
	if _, ok := g.Verifier("nopw"); ok {
		t.Fatal("a verifier for a role without a password")
	}

	// Tokens: issued for a role, accepted while the role may log in.
	if _, err := g.IssueToken(Identity{Role: alice, Name: "alice"}); err == nil {
		t.Fatal("a token before the cluster has a key")
	}
	if err := g.EnsureClusterKey(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A second node's guard sees the same key and accepts the first's tokens.
	g2 := New(Config{Meta: cat, Node: 2})
	if err := g2.EnsureClusterKey(context.Background()); err != nil {
		t.Fatal(err)
	}
	tok, err := g.IssueToken(Identity{Role: alice, Name: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if id, err := g2.Token(tok); err != nil || id.Role != alice {
		t.Fatalf("node 2 on node 1's token: %+v, %v", id, err)
	}
	fwd, err := g.ForwardToken(Identity{Role: alice, Name: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if id, err := g2.Token(fwd); err != nil || id.Role != alice {
		t.Fatalf("forwarded: %+v, %v", id, err)
	}
	forged, _ := auth.SignToken(auth.NewKey(), auth.Claims{Role: "mink", Expires: time.Now().Add(time.Hour)})
	if _, err := g2.Token(forged); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("forged token: %v", err)
	}
	// A new password ends the tokens issued before it (ALTER ROLE …
	// PASSWORD), also the same password set again (a new salt); a token
	// issued after it works.
	v2, err := auth.NewVerifier("right")
	if err != nil {
		t.Fatal(err)
	}
	verifier := v2.String()
	propose(t, cat, catalog.AlterRole{Role: alice, Verifier: &verifier})
	if _, err := g2.Token(tok); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("token issued before the password changed: %v, want ErrAuthFailed", err)
	}
	if id, err := g2.Token(fwd); err != nil || id.Role != alice {
		t.Fatalf("forwarding token after the password changed: %+v, %v", id, err)
	}
	if tok, err = g.IssueToken(Identity{Role: alice, Name: "alice"}); err != nil {
		t.Fatal(err)
	}
	if id, err := g2.Token(tok); err != nil || id.Role != alice {
		t.Fatalf("token issued after the password changed: %+v, %v", id, err)
	}
	no := false
	propose(t, cat, catalog.AlterRole{Role: alice, Login: &no})
	if _, err := g2.Token(tok); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("token of a role that lost LOGIN: %v", err)
	}

	// Privileges.
	tid := propose(t, cat, catalog.CreateTable{Spec: catalog.TableSpec{Name: "t", Columns: []catalog.Column{{Name: "id", Type: "bigint"}}, Buckets: 1}}).Table
	err = g.Authorize(Identity{Role: alice}, tid, catalog.PrivSelect)
	var pe *PermissionError
	if !errors.As(err, &pe) || pe.Error() != "permission denied for table t" {
		t.Fatalf("alice on t: %v", err)
	}
	propose(t, cat, catalog.GrantTable{Tables: []catalog.TableID{tid}, Grantee: catalog.Public, Privileges: catalog.PrivSelect})
	if err := g.Authorize(Identity{Role: alice}, tid, catalog.PrivSelect); err != nil {
		t.Fatalf("after GRANT SELECT TO PUBLIC: %v", err)
	}
	if err := g.Authorize(Identity{Role: alice}, tid, catalog.PrivSelect|catalog.PrivInsert); !errors.Is(err, ErrPermission) {
		t.Fatalf("SELECT and INSERT with only SELECT: %v", err)
	}
}

func TestGuardTrust(t *testing.T) {
	cat := openCatalog(t)
	propose(t, cat, catalog.CreateRole{Name: "mink", Login: true, Superuser: true})
	bob := propose(t, cat, catalog.CreateRole{Name: "bob", Login: true}).Role
	propose(t, cat, catalog.CreateRole{Name: "nologin"})
	g := New(Config{Meta: cat, Trust: true})
	if id, err := g.Password(Login{User: "anyone"}, ""); err != nil || id.Role != catalog.BootstrapRole || !g.IsSuperuser(id) {
		t.Fatalf("trust, unknown name: %+v, %v", id, err)
	}
	if id, err := g.Password(Login{User: "bob"}, "whatever"); err != nil || id.Role != bob || g.IsSuperuser(id) {
		t.Fatalf("trust, a role: %+v, %v (it keeps its own privileges)", id, err)
	}
	if _, err := g.Password(Login{User: "nologin"}, ""); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("trust, NOLOGIN: %v", err)
	}
}
