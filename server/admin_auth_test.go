package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/minkdb/mink/access"
	"github.com/minkdb/mink/auth"
	"github.com/minkdb/mink/catalog"
)

// adminTestNode is a Server with just enough for its admin API's
// authentication and the handlers that read only the view: the roles mink
// (superuser), ops (LOGIN, not superuser) and nologin, and a table t.
type adminTestNode struct {
	*Server
	ops access.Identity
}

// newAdminTestNodes returns nodes 1..n sharing one in-memory metadata
// log. trust: no superuser password configured (mink has none).
func newAdminTestNodes(t *testing.T, n int, trust bool, limiter access.Limiter) []adminTestNode {
	t.Helper()
	cat, propose := memCatalog(t)
	verifier := func(pw string) string {
		v, err := auth.NewVerifier(pw)
		if err != nil {
			t.Fatal(err)
		}
		return v.String()
	}
	root := catalog.CreateRole{Name: "mink", Login: true, Superuser: true}
	if !trust {
		root.Verifier = verifier("root pw")
	}
	propose(root)
	ops := propose(catalog.CreateRole{Name: "ops", Login: true, Verifier: verifier("ops pw")}).Role
	propose(catalog.CreateRole{Name: "nologin", Verifier: verifier("nologin pw")})
	propose(catalog.CreateTable{Spec: catalog.TableSpec{Name: "t", Columns: []catalog.Column{{Name: "id", Type: "bigint"}}, Buckets: 1}})
	var nodes []adminTestNode
	for i := 1; i <= n; i++ {
		g := access.New(access.Config{Meta: cat, Node: catalog.NodeID(i), Trust: trust, Logger: quietLogger(), Limiter: limiter})
		if err := g.EnsureClusterKey(context.Background()); err != nil {
			t.Fatal(err)
		}
		s := &Server{cfg: Config{NodeID: uint32(i)}, logger: quietLogger(), cat: cat, guard: g,
			metrics: &metrics{registry: prometheus.NewRegistry()}}
		s.mu.ready, s.mu.live = true, true
		nodes = append(nodes, adminTestNode{Server: s, ops: access.Identity{Role: ops, Name: "ops"}})
	}
	return nodes
}

func basic(user, password string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
}

// serveAdmin sends one request to the node's admin API and returns the
// answer.
func serveAdmin(s *Server, method, path, authorization string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, nil)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	rec := httptest.NewRecorder()
	s.adminHandler().ServeHTTP(rec, req)
	return rec
}

// checkAnswer fails unless rec has the code, and for 401 and 403 the
// challenge and a JSON error as the API's other errors have.
func checkAnswer(t *testing.T, what string, rec *httptest.ResponseRecorder, code int) {
	t.Helper()
	if rec.Code != code {
		t.Errorf("%s: %d %s, want %d", what, rec.Code, strings.TrimSpace(rec.Body.String()), code)
		return
	}
	challenge := rec.Header().Get("WWW-Authenticate")
	switch {
	case code == http.StatusUnauthorized && challenge != `Basic realm="mink"`:
		t.Errorf("%s: WWW-Authenticate %q, want Basic realm=\"mink\"", what, challenge)
	case code != http.StatusUnauthorized && challenge != "":
		t.Errorf("%s: %d with WWW-Authenticate %q", what, code, challenge)
	}
	if code == http.StatusUnauthorized || code == http.StatusForbidden || code == http.StatusTooManyRequests {
		var body struct{ Error string }
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Error == "" ||
			rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%s: body %q (%s), want {\"error\": …}", what, rec.Body.String(), rec.Header().Get("Content-Type"))
		}
	}
}

// The admin API answers /healthz and /metrics to anyone and everything
// else to a superuser only: 401 with a basic challenge without credentials
// or with wrong ones, 403 for a role that is not a superuser; bearer
// tokens of the cluster key count as credentials.
func TestAdminAuth(t *testing.T) {
	s := newAdminTestNodes(t, 1, false, nil)[0]
	g := s.guard
	rootToken, err := g.IssueToken(access.Identity{Role: catalog.BootstrapRole, Name: "mink"})
	if err != nil {
		t.Fatal(err)
	}
	opsToken, err := g.ForwardToken(s.ops)
	if err != nil {
		t.Fatal(err)
	}
	forged, err := auth.SignToken(auth.NewKey(), auth.Claims{Role: "mink", Expires: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	const buckets = "/api/v1/tables/t/buckets"
	for _, c := range []struct {
		name, method, path, auth string
		code                     int
	}{
		{"healthz, no credentials", "GET", "/healthz", "", 200},
		{"healthz, wrong credentials", "GET", "/healthz", basic("mink", "wrong"), 200},
		{"metrics, no credentials", "GET", "/metrics", "", 200},
		{"no credentials", "GET", buckets, "", 401},
		{"superuser", "GET", buckets, basic("mink", "root pw"), 200},
		{"superuser, unknown table", "GET", "/api/v1/tables/nope/buckets", basic("mink", "root pw"), 404},
		{"wrong password", "GET", buckets, basic("mink", "wrong"), 401},
		{"no such role", "GET", buckets, basic("nobody", "root pw"), 401},
		{"NOLOGIN role", "GET", buckets, basic("nologin", "nologin pw"), 401},
		{"not a superuser", "GET", buckets, basic("ops", "ops pw"), 403},
		{"not a superuser, wrong password", "GET", buckets, basic("ops", "wrong"), 401},
		{"malformed basic", "GET", buckets, "Basic !!!", 401},
		{"other scheme", "GET", buckets, "Negotiate abc", 401},
		{"bearer of a superuser", "GET", buckets, "Bearer " + rootToken, 200},
		{"bearer of ops", "GET", buckets, "Bearer " + opsToken, 403},
		{"forged bearer", "GET", buckets, "Bearer " + forged, 401},
		{"empty bearer", "GET", buckets, "Bearer", 401},
		{"rebalance, no credentials", "POST", "/api/v1/cluster/rebalance", "", 401},
		{"rebalance, ops", "POST", "/api/v1/cluster/rebalance?dry_run=1", basic("ops", "ops pw"), 403},
		{"tiering run, no credentials", "POST", "/api/v1/tiering/run?table=t", "", 401},
		{"tiering status, ops", "GET", "/api/v1/tiering/status", basic("ops", "ops pw"), 403},
		{"cluster status, no credentials", "GET", "/api/v1/cluster/status", "", 401},
		{"pprof, no credentials", "GET", "/debug/pprof/cmdline", "", 401},
		{"pprof, superuser", "GET", "/debug/pprof/cmdline", basic("mink", "root pw"), 200},
		{"unknown path, no credentials", "GET", "/api/v1/nope", "", 401},
		{"unknown path, superuser", "GET", "/api/v1/nope", basic("mink", "root pw"), 404},
		{"healthz by POST, no credentials", "POST", "/healthz", "", 401},
	} {
		checkAnswer(t, c.name, serveAdmin(s.Server, c.method, c.path, c.auth), c.code)
	}
	// A role that loses SUPERUSER is refused at its next request, by
	// password and by token.
	yes, no := true, false
	if _, err := s.cat.Propose(context.Background(), catalog.AlterRole{Role: s.ops.Role, Superuser: &yes}); err != nil {
		t.Fatal(err)
	}
	checkAnswer(t, "ops made superuser", serveAdmin(s.Server, "GET", buckets, basic("ops", "ops pw")), 200)
	checkAnswer(t, "ops made superuser, bearer", serveAdmin(s.Server, "GET", buckets, "Bearer "+opsToken), 200)
	if _, err := s.cat.Propose(context.Background(), catalog.AlterRole{Role: s.ops.Role, Superuser: &no}); err != nil {
		t.Fatal(err)
	}
	checkAnswer(t, "ops no longer superuser", serveAdmin(s.Server, "GET", buckets, "Bearer "+opsToken), 403)
}

// In trust mode a request without credentials is the bootstrap
// superuser's; credentials that are given still name the role, which must
// be a superuser.
func TestAdminAuthTrust(t *testing.T) {
	s := newAdminTestNodes(t, 1, true, nil)[0]
	const buckets = "/api/v1/tables/t/buckets"
	for _, c := range []struct {
		name, auth string
		code       int
	}{
		{"no credentials", "", 200},
		{"superuser, any password", basic("mink", "anything"), 200},
		{"a name that is no role", basic("someone", "x"), 200},
		{"not a superuser", basic("ops", "anything"), 403},
		{"NOLOGIN role", basic("nologin", "x"), 401},
		{"forged bearer", "Bearer nonsense", 401},
	} {
		checkAnswer(t, c.name, serveAdmin(s.Server, "GET", buckets, c.auth), c.code)
	}
	checkAnswer(t, "healthz", serveAdmin(s.Server, "GET", "/healthz", ""), 200)
}

// Failed basic logins count towards the failed-login limit of the source
// address, and a refused address gets 429 even with the right password.
func TestAdminAuthLoginLimit(t *testing.T) {
	s := newAdminTestNodes(t, 1, false, auth.NewLoginLimiter(2, time.Hour))[0]
	const buckets = "/api/v1/tables/t/buckets"
	checkAnswer(t, "first guess", serveAdmin(s.Server, "GET", buckets, basic("mink", "guess 1")), 401)
	checkAnswer(t, "second guess", serveAdmin(s.Server, "GET", buckets, basic("mink", "guess 2")), 401)
	rec := serveAdmin(s.Server, "GET", buckets, basic("mink", "root pw"))
	checkAnswer(t, "the right password after two failures", rec, http.StatusTooManyRequests)
	if !strings.Contains(rec.Body.String(), "too many failed logins") {
		t.Errorf("429 body: %s", rec.Body.String())
	}
}

// A request one node forwards to another (the coordinator) acts there for
// the role of its caller: the forwarding token of a superuser passes, that
// of ops is 403, and the caller's own credentials are not what is sent.
func TestAdminForwardAuth(t *testing.T) {
	nodes := newAdminTestNodes(t, 2, false, nil)
	via, coordinator := nodes[0], nodes[1]
	for _, c := range []struct {
		id   access.Identity
		code int
	}{
		{access.Identity{Role: catalog.BootstrapRole, Name: "mink"}, 200},
		{via.ops, 403},
	} {
		in := httptest.NewRequest("GET", "/api/v1/tables/t/buckets", nil)
		in.Header.Set("Authorization", basic(c.id.Name, "whatever"))
		in = in.WithContext(access.NewContext(in.Context(), c.id))
		out := httptest.NewRequest("GET", "/api/v1/tables/t/buckets", nil)
		if err := via.setForwardAuth(out, in); err != nil {
			t.Fatal(err)
		}
		if h := out.Header.Get("Authorization"); !strings.HasPrefix(h, "Bearer ") {
			t.Fatalf("forwarded with Authorization %q, want a bearer token", h)
		}
		rec := httptest.NewRecorder()
		coordinator.adminHandler().ServeHTTP(rec, out)
		checkAnswer(t, "forwarded for "+c.id.Name, rec, c.code)
	}
}

// The CLI's client sends basic credentials and says what to do about a
// 401 or 403.
func TestAdminClientCredentials(t *testing.T) {
	s := newAdminTestNodes(t, 1, false, nil)[0]
	srv := httptest.NewServer(s.adminHandler())
	defer srv.Close()
	ctx := context.Background()
	client := func(user, password string) *AdminClient {
		c := NewAdminClient(srv.URL)
		c.User, c.Password = user, password
		return c
	}
	if bs, err := client("mink", "root pw").TableBuckets(ctx, "t"); err != nil || len(bs) != 1 {
		t.Fatalf("superuser: %v, %v", bs, err)
	}
	for _, c := range []struct {
		user, password string
		kind           error
		msg            string
	}{
		{"mink", "wrong", ErrAdminUnauthorized, `the admin API refused the credentials of user "mink": give --password-file or MINK_PASSWORD`},
		{"mink", "", ErrAdminUnauthorized, "needs the password of a superuser: give --password-file or MINK_PASSWORD"},
		{"ops", "ops pw", ErrAdminForbidden, `the admin API refused user "ops": the role is not a superuser`},
	} {
		_, err := client(c.user, c.password).TableBuckets(ctx, "t")
		if !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s/%q: %v, want %v saying %q", c.user, c.password, err, c.kind, c.msg)
		}
		// The streaming calls say the same.
		err = client(c.user, c.password).TieringRun(ctx, "t", false, func(TieringRunEvent) {})
		if !errors.Is(err, c.kind) {
			t.Errorf("tiering run as %s/%q: %v, want %v", c.user, c.password, err, c.kind)
		}
		err = client(c.user, c.password).Rebalance(ctx, true, func(RebalanceEvent) {})
		if !errors.Is(err, c.kind) {
			t.Errorf("rebalance as %s/%q: %v, want %v", c.user, c.password, err, c.kind)
		}
	}
}
