package kafka

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"go.uber.org/goleak"

	"github.com/minkdb/mink/access"
	"github.com/minkdb/mink/auth"
	"github.com/minkdb/mink/buckets"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/metalog"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// syncBuffer is a log sink the tests read while the listener writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// fakeGroups answers OffsetCommit and OffsetFetch as a coordinator would,
// and keeps what it was asked.
type fakeGroups struct {
	mu   sync.Mutex
	seen []kmsg.Request
	// committed is what an OffsetFetch of every offset answers.
	committed []string
}

func (f *fakeGroups) Handle(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	f.mu.Lock()
	f.seen = append(f.seen, req)
	f.mu.Unlock()
	switch r := req.(type) {
	case *kmsg.OffsetCommitRequest:
		resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition = p.Partition
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	case *kmsg.OffsetFetchRequest:
		resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
		topics := r.Topics
		if topics == nil {
			for _, name := range f.committed {
				topics = append(topics, kmsg.OffsetFetchRequestTopic{Topic: name, Partitions: []int32{0}})
			}
		}
		for _, t := range topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.Metadata = p, 5, kmsg.StringPtr("m")
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}
	return req.ResponseKind(), nil
}

func (f *fakeGroups) last() kmsg.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.seen) == 0 {
		return nil
	}
	return f.seen[len(f.seen)-1]
}

// saslNode is a listener with a guard over an in-memory catalog holding
// the roles mink (superuser, password "secret"), alice (LOGIN, "pw"),
// carol (no LOGIN, "pw") and the topics t (owned by mink) and t2.
type saslNode struct {
	t      *testing.T
	cat    *metalog.Catalog
	srv    *Server
	addr   string
	logs   *syncBuffer
	groups *fakeGroups
	alice  catalog.RoleID
	tables map[string]catalog.TableID
}

type saslNodeOpts struct {
	trust   bool
	limiter access.Limiter
	hba     string // --hba-file's text; "": none
}

func newSASLNode(t *testing.T, o saslNodeOpts) *saslNode {
	t.Helper()
	logs := &syncBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cat, err := metalog.Open(context.Background(), metalog.NewMemLog(), metalog.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	n := &saslNode{t: t, cat: cat, logs: logs, groups: &fakeGroups{}, tables: map[string]catalog.TableID{}}
	verifier := func(password string) string {
		v, err := auth.NewVerifier(password)
		if err != nil {
			t.Fatal(err)
		}
		return v.String()
	}
	if id := n.propose(catalog.CreateRole{Name: "mink", Login: true, Superuser: true, Verifier: verifier("secret")}).Role; id != catalog.BootstrapRole {
		t.Fatalf("the first role is %d, not the bootstrap role", id)
	}
	n.alice = n.propose(catalog.CreateRole{Name: "alice", Login: true, Verifier: verifier("pw")}).Role
	n.propose(catalog.CreateRole{Name: "carol", Verifier: verifier("pw")})
	for _, name := range []string{"t", "t2"} {
		spec := catalog.TableSpec{Name: name, Columns: slices.Clone(kafkaShape), Buckets: 2}
		n.tables[name] = n.propose(catalog.CreateTable{Spec: spec, Owner: catalog.BootstrapRole}).Table
	}
	var hba *auth.HBA
	if o.hba != "" {
		if hba, err = auth.ParseHBA("hba.conf", strings.NewReader(o.hba)); err != nil {
			t.Fatal(err)
		}
	}
	guard := access.New(access.Config{Meta: cat, Node: 1, Trust: o.trust, Logger: logger, Limiter: o.limiter, HBA: hba})
	n.srv = New(Config{
		Node: 1, Cluster: "test", Meta: cat, Buckets: func() *buckets.Manager { return nil },
		Groups: n.groups, GroupKeys: []kmsg.ApiVersionsResponseApiKey{
			{ApiKey: int16(kmsg.OffsetCommit), MinVersion: 0, MaxVersion: 9},
			{ApiKey: int16(kmsg.OffsetFetch), MinVersion: 0, MaxVersion: 9},
			{ApiKey: int16(kmsg.OffsetDelete), MinVersion: 0, MaxVersion: 0},
		},
		Access: guard, Logger: logger,
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n.addr = ln.Addr().String()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := n.srv.Serve(ln); err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	t.Cleanup(func() {
		n.srv.Close()
		<-done
	})
	return n
}

func (n *saslNode) propose(rec catalog.Record) catalog.Outcome {
	n.t.Helper()
	out, err := n.cat.Propose(context.Background(), rec)
	if err == nil {
		err = out.Err
	}
	if err != nil {
		n.t.Fatalf("%T: %v", rec, err)
	}
	return out
}

func (n *saslNode) grant(table string, p catalog.Privileges, revoke bool) {
	n.t.Helper()
	n.propose(catalog.GrantTable{Tables: []catalog.TableID{n.tables[table]}, Grantee: n.alice, Privileges: p, Revoke: revoke})
}

// kconn is a test's Kafka connection: kmsg requests, and raw SASL tokens.
type kconn struct {
	t    *testing.T
	c    net.Conn
	corr int32
}

func (n *saslNode) dial() *kconn {
	n.t.Helper()
	c, err := net.DialTimeout("tcp", n.addr, 5*time.Second)
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(func() { c.Close() })
	return &kconn{t: n.t, c: c}
}

var formatter = kmsg.NewRequestFormatter(kmsg.FormatterClientID("sasl-test"))

func (k *kconn) write(b []byte) error {
	k.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, err := k.c.Write(b)
	return err
}

// readFrame reads one length-prefixed frame.
func (k *kconn) readFrame() ([]byte, error) {
	k.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(k.c, size[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err := io.ReadFull(k.c, b)
	return b, err
}

// do sends req at its version and returns the response; an error is the
// connection's (it was closed).
func (k *kconn) do(req kmsg.Request) (kmsg.Response, error) {
	k.corr++
	if err := k.write(formatter.AppendRequest(nil, req, k.corr)); err != nil {
		return nil, err
	}
	b, err := k.readFrame()
	if err != nil {
		return nil, err
	}
	if len(b) < 4 || int32(binary.BigEndian.Uint32(b)) != k.corr {
		k.t.Fatalf("response header %x, want correlation %d", b, k.corr)
	}
	b = b[4:]
	resp := req.ResponseKind()
	if resp.IsFlexible() && req.Key() != int16(kmsg.ApiVersions) {
		if b, err = skipTags(b); err != nil {
			k.t.Fatal(err)
		}
	}
	if err := resp.ReadFrom(b); err != nil {
		k.t.Fatalf("%s response: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp, nil
}

func (k *kconn) mustDo(req kmsg.Request) kmsg.Response {
	k.t.Helper()
	resp, err := k.do(req)
	if err != nil {
		k.t.Fatalf("%s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp
}

// closed reports whether the server closed the connection (within 5 s).
func (k *kconn) closed() bool {
	k.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := k.c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

func handshake(version int16, mechanism string) *kmsg.SASLHandshakeRequest {
	r := kmsg.NewPtrSASLHandshakeRequest()
	r.Version, r.Mechanism = version, mechanism
	return r
}

func authenticate(version int16, token []byte) *kmsg.SASLAuthenticateRequest {
	r := kmsg.NewPtrSASLAuthenticateRequest()
	r.Version, r.SASLAuthBytes = version, token
	return r
}

func plainToken(authzid, user, password string) []byte {
	return []byte(authzid + "\x00" + user + "\x00" + password)
}

// metadataOf asks for topics (nil: every topic) and returns each topic's
// error code by name.
func (k *kconn) metadataOf(topics ...string) map[string]int16 {
	k.t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 9
	if topics != nil {
		req.Topics = []kmsg.MetadataRequestTopic{}
	}
	for _, name := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	out := map[string]int16{}
	for _, t := range k.mustDo(req).(*kmsg.MetadataResponse).Topics {
		out[*t.Topic] = t.ErrorCode
	}
	return out
}

// loginPlain authenticates with SASL/PLAIN over SaslAuthenticate.
func (k *kconn) loginPlain(user, password string) *kmsg.SASLAuthenticateResponse {
	k.t.Helper()
	if hs := k.mustDo(handshake(1, "PLAIN")).(*kmsg.SASLHandshakeResponse); hs.ErrorCode != 0 {
		k.t.Fatalf("handshake: %v", kerr.ErrorForCode(hs.ErrorCode))
	}
	return k.mustDo(authenticate(1, plainToken("", user, password))).(*kmsg.SASLAuthenticateResponse)
}

// loginSCRAM runs franz-go's SCRAM-SHA-256 client over SaslAuthenticate
// (raw: unframed tokens after a v0 handshake). It returns the error of the
// server's answer or of the client's check of the server signature.
func (k *kconn) loginSCRAM(user, password string, raw bool) error {
	k.t.Helper()
	version := int16(1)
	if raw {
		version = 0
	}
	if hs := k.mustDo(handshake(version, "SCRAM-SHA-256")).(*kmsg.SASLHandshakeResponse); hs.ErrorCode != 0 {
		k.t.Fatalf("handshake: %v", kerr.ErrorForCode(hs.ErrorCode))
	}
	session, msg, err := scram.Auth{User: user, Pass: password}.AsSha256Mechanism().Authenticate(context.Background(), k.c.RemoteAddr().String())
	if err != nil {
		k.t.Fatal(err)
	}
	for {
		var challenge []byte
		if raw {
			if err := k.write(append(binary.BigEndian.AppendUint32(nil, uint32(len(msg))), msg...)); err != nil {
				return err
			}
			if challenge, err = k.readFrame(); err != nil {
				return err
			}
		} else {
			resp, err := k.do(authenticate(2, msg))
			if err != nil {
				return err
			}
			r := resp.(*kmsg.SASLAuthenticateResponse)
			if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
				return &authError{err: err, msg: *r.ErrorMessage}
			}
			if r.SessionLifetimeMillis != 0 {
				k.t.Errorf("SessionLifetimeMillis %d, want 0", r.SessionLifetimeMillis)
			}
			challenge = r.SASLAuthBytes
		}
		done, next, err := session.Challenge(challenge)
		if err != nil || done {
			return err
		}
		msg = next
	}
}

type authError struct {
	err error
	msg string
}

func (e *authError) Error() string { return e.err.Error() + ": " + e.msg }
func (e *authError) Unwrap() error { return e.err }

// SASL/PLAIN over SaslAuthenticate: the right password authenticates;
// anything else is SASL_AUTHENTICATION_FAILED with Kafka's message, logged
// by the guard (without the password), and closes the connection.
func TestSASLPlain(t *testing.T) {
	n := newSASLNode(t, saslNodeOpts{})
	for _, tc := range []struct {
		name    string
		token   []byte
		wantMsg string // "": authenticated
		reason  string // in the log
	}{
		{name: "superuser", token: plainToken("", "mink", "secret")},
		{name: "role", token: plainToken("alice", "alice", "pw")},
		{name: "wrong password", token: plainToken("", "mink", "wrong-pw-1234"), wantMsg: msgPlainFailed, reason: "wrong password"},
		{name: "no such role", token: plainToken("", "nobody", "pw"), wantMsg: msgPlainFailed, reason: `role \"nobody\" does not exist`},
		{name: "no LOGIN", token: plainToken("", "carol", "pw"), wantMsg: msgPlainFailed, reason: `role \"carol\" is not permitted to log in`},
		{name: "two fields", token: []byte("mink\x00secret"), wantMsg: "Authentication failed: Invalid SASL/PLAIN response: expected 3 tokens, got 2", reason: "malformed SASL/PLAIN message"},
		{name: "other authzid", token: plainToken("mink", "alice", "pw"), wantMsg: "Authentication failed: Client requested an authorization id that is different from username", reason: "malformed"},
		{name: "no password", token: plainToken("", "mink", ""), wantMsg: "Authentication failed: password not specified", reason: "malformed"},
		{name: "empty", token: []byte{}, wantMsg: "Authentication failed: Invalid SASL/PLAIN response: expected 3 tokens, got 1", reason: "malformed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := n.dial()
			if hs := k.mustDo(handshake(1, "PLAIN")).(*kmsg.SASLHandshakeResponse); hs.ErrorCode != 0 {
				t.Fatalf("handshake: %v", kerr.ErrorForCode(hs.ErrorCode))
			}
			before := len(n.logs.String())
			r := k.mustDo(authenticate(2, tc.token)).(*kmsg.SASLAuthenticateResponse)
			if tc.wantMsg == "" {
				if r.ErrorCode != 0 {
					t.Fatalf("authenticate: %v: %s", kerr.ErrorForCode(r.ErrorCode), *r.ErrorMessage)
				}
				if got := k.metadataOf("t"); got["t"] == kerr.TopicAuthorizationFailed.Code && tc.name == "superuser" {
					t.Fatalf("the superuser may not describe t: %v", got)
				}
				return
			}
			if r.ErrorCode != kerr.SaslAuthenticationFailed.Code || r.ErrorMessage == nil || *r.ErrorMessage != tc.wantMsg {
				t.Fatalf("got %v %v, want SASL_AUTHENTICATION_FAILED %q", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage, tc.wantMsg)
			}
			if !k.closed() {
				t.Fatal("the connection stays open after a failed authentication")
			}
			logged := n.logs.String()[before:]
			if !strings.Contains(logged, "login failed") || !strings.Contains(logged, "listener=kafka") || !strings.Contains(logged, tc.reason) {
				t.Fatalf("the failure is not logged with reason %q:\n%s", tc.reason, logged)
			}
			if strings.Contains(logged, "wrong-pw-1234") {
				t.Fatalf("the password is in the log:\n%s", logged)
			}
		})
	}
}

// SASL/SCRAM-SHA-256 with franz-go's client, over SaslAuthenticate and as
// the unframed tokens of a v0 handshake: the client checks the server's
// signature, so a success proves the server knows the verifier.
func TestSASLSCRAM(t *testing.T) {
	n := newSASLNode(t, saslNodeOpts{})
	for _, raw := range []bool{false, true} {
		for _, tc := range []struct {
			name, user, password string
			reason               string // "": authenticates
		}{
			{name: "superuser", user: "mink", password: "secret"},
			{name: "role", user: "alice", password: "pw"},
			{name: "wrong password", user: "alice", password: "nope", reason: "wrong password"},
			{name: "no such role", user: "nobody", password: "pw", reason: `role \"nobody\" does not exist`},
			{name: "no LOGIN", user: "carol", password: "pw", reason: `role \"carol\" is not permitted to log in`},
		} {
			name := tc.name
			if raw {
				name = "v0/" + name
			}
			t.Run(name, func(t *testing.T) {
				k := n.dial()
				before := len(n.logs.String())
				err := k.loginSCRAM(tc.user, tc.password, raw)
				if tc.reason == "" {
					if err != nil {
						t.Fatal(err)
					}
					k.metadataOf() // authenticated: answered
					return
				}
				switch {
				case raw && err == nil:
					t.Fatal("authenticated with a wrong password")
				case raw:
					// After a v0 handshake a failure has no answer.
				default:
					var ae *authError
					if !errors.As(err, &ae) || !errors.Is(err, kerr.SaslAuthenticationFailed) || ae.msg != msgSCRAMFailed {
						t.Fatalf("got %v, want SASL_AUTHENTICATION_FAILED %q", err, msgSCRAMFailed)
					}
				}
				if !k.closed() {
					t.Fatal("the connection stays open after a failed authentication")
				}
				if logged := n.logs.String()[before:]; !strings.Contains(logged, "login failed") || !strings.Contains(logged, tc.reason) {
					t.Fatalf("the failure is not logged with reason %q:\n%s", tc.reason, logged)
				}
			})
		}
	}
}

// Malformed SCRAM messages fail the authentication and close the
// connection.
func TestSASLSCRAMMalformed(t *testing.T) {
	n := newSASLNode(t, saslNodeOpts{})
	first := []byte("n,,n=alice,r=abcdefghijkl")
	for _, tc := range []struct {
		name  string
		first []byte
		final func(serverFirst string) []byte // nil: the first message fails
		want  string
	}{
		{name: "garbage", first: []byte("\x00\xff garbage"), want: "unexpected channel-binding flag"},
		{name: "channel binding", first: []byte("p=tls-server-end-point,,n=alice,r=abc"), want: "channel binding is not supported"},
		{name: "no nonce", first: []byte("n,,n=alice"), want: "client-first-message too short"},
		{name: "bad escape", first: []byte("n,,n=al=ice,r=abc"), want: "invalid escape"},
		{name: "wrong nonce", first: first, final: func(string) []byte { return []byte("c=biws,r=other,p=AAAA") }, want: "unexpected SCRAM nonce"},
		{name: "no proof", first: first, final: func(sf string) []byte { return []byte("c=biws," + strings.Split(sf, ",")[0]) }, want: "could not find proof"},
		{name: "wrong proof", first: first, final: func(sf string) []byte {
			return []byte("c=biws," + strings.Split(sf, ",")[0] + ",p=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")
		}, want: msgSCRAMFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := n.dial()
			k.mustDo(handshake(1, "SCRAM-SHA-256"))
			r := k.mustDo(authenticate(2, tc.first)).(*kmsg.SASLAuthenticateResponse)
			if tc.final != nil {
				if r.ErrorCode != 0 {
					t.Fatalf("client-first: %v", kerr.ErrorForCode(r.ErrorCode))
				}
				r = k.mustDo(authenticate(2, tc.final(string(r.SASLAuthBytes)))).(*kmsg.SASLAuthenticateResponse)
			}
			if r.ErrorCode != kerr.SaslAuthenticationFailed.Code || r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, tc.want) {
				t.Fatalf("got %v %v, want SASL_AUTHENTICATION_FAILED with %q", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage, tc.want)
			}
			if !k.closed() {
				t.Fatal("the connection stays open")
			}
		})
	}
}

// The order of the exchange: mechanisms not offered, messages out of
// order, requests during the exchange, and SASL again after success.
func TestSASLStateMachine(t *testing.T) {
	n := newSASLNode(t, saslNodeOpts{})
	t.Run("advertised", func(t *testing.T) {
		k := n.dial()
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = 3
		want := map[int16][2]int16{int16(kmsg.SASLHandshake): {0, 1}, int16(kmsg.SASLAuthenticate): {0, 2}}
		for _, key := range k.mustDo(req).(*kmsg.ApiVersionsResponse).ApiKeys {
			if w, ok := want[key.ApiKey]; ok {
				if key.MinVersion != w[0] || key.MaxVersion != w[1] {
					t.Errorf("%s v%d-%d, want v%d-%d", kmsg.NameForKey(key.ApiKey), key.MinVersion, key.MaxVersion, w[0], w[1])
				}
				delete(want, key.ApiKey)
			}
		}
		if len(want) > 0 {
			t.Fatalf("not advertised: %v", want)
		}
	})
	for _, mech := range []string{"SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER", "plain", ""} {
		t.Run("mechanism "+mech, func(t *testing.T) {
			k := n.dial()
			hs := k.mustDo(handshake(1, mech)).(*kmsg.SASLHandshakeResponse)
			if hs.ErrorCode != kerr.UnsupportedSaslMechanism.Code || !slices.Equal(hs.SupportedMechanisms, []string{"PLAIN", "SCRAM-SHA-256"}) {
				t.Fatalf("got %v %v, want UNSUPPORTED_SASL_MECHANISM [PLAIN SCRAM-SHA-256]", kerr.ErrorForCode(hs.ErrorCode), hs.SupportedMechanisms)
			}
			if !k.closed() {
				t.Fatal("the connection stays open")
			}
		})
	}
	t.Run("authenticate before handshake", func(t *testing.T) {
		k := n.dial()
		r := k.mustDo(authenticate(1, plainToken("", "mink", "secret"))).(*kmsg.SASLAuthenticateResponse)
		if r.ErrorCode != kerr.IllegalSaslState.Code {
			t.Fatalf("got %v, want ILLEGAL_SASL_STATE", kerr.ErrorForCode(r.ErrorCode))
		}
		if !k.closed() {
			t.Fatal("the connection stays open")
		}
	})
	t.Run("second handshake", func(t *testing.T) {
		k := n.dial()
		// As in Kafka: during the exchange anything but SaslAuthenticate
		// closes the connection unanswered.
		k.mustDo(handshake(1, "PLAIN"))
		if _, err := k.do(handshake(1, "PLAIN")); err == nil {
			t.Fatal("a second SaslHandshake answered")
		}
	})
	t.Run("request during the exchange", func(t *testing.T) {
		k := n.dial()
		k.mustDo(handshake(1, "SCRAM-SHA-256"))
		k.mustDo(authenticate(2, []byte("n,,n=alice,r=abcdefghijkl")))
		if _, err := k.do(kmsg.NewPtrMetadataRequest()); err == nil {
			t.Fatal("Metadata answered in the middle of a SCRAM exchange")
		}
	})
	t.Run("v0 handshake, then a framed request", func(t *testing.T) {
		// The frame is taken as the PLAIN token, which it is not.
		k := n.dial()
		k.mustDo(handshake(0, "PLAIN"))
		if _, err := k.do(authenticate(1, plainToken("", "mink", "secret"))); err == nil {
			t.Fatal("answered")
		}
	})
	t.Run("v0 PLAIN", func(t *testing.T) {
		k := n.dial()
		k.mustDo(handshake(0, "PLAIN"))
		token := plainToken("", "mink", "secret")
		if err := k.write(append(binary.BigEndian.AppendUint32(nil, uint32(len(token))), token...)); err != nil {
			t.Fatal(err)
		}
		if b, err := k.readFrame(); err != nil || len(b) != 0 {
			t.Fatalf("got %q, %v; want an empty token", b, err)
		}
		if got := k.metadataOf(); len(got) != 2 {
			t.Fatalf("metadata after a v0 PLAIN login: %v", got)
		}
	})
	t.Run("SASL again after success", func(t *testing.T) {
		k := n.dial()
		if r := k.loginPlain("mink", "secret"); r.ErrorCode != 0 {
			t.Fatal(kerr.ErrorForCode(r.ErrorCode))
		}
		r := k.mustDo(authenticate(2, plainToken("", "alice", "pw"))).(*kmsg.SASLAuthenticateResponse)
		if r.ErrorCode != kerr.IllegalSaslState.Code {
			t.Fatalf("got %v, want ILLEGAL_SASL_STATE", kerr.ErrorForCode(r.ErrorCode))
		}
		if hs := k.mustDo(handshake(1, "PLAIN")).(*kmsg.SASLHandshakeResponse); hs.ErrorCode != kerr.IllegalSaslState.Code {
			t.Fatalf("got %v, want ILLEGAL_SASL_STATE", kerr.ErrorForCode(hs.ErrorCode))
		}
		// Still the superuser, still open.
		if got := k.metadataOf(); len(got) != 2 {
			t.Fatalf("metadata: %v", got)
		}
	})
}

// Before authentication a password node answers ApiVersions and SASL
// only: any other request closes the connection unanswered, as Kafka's
// brokers do, and frames are limited to 512 KiB.
func TestSASLUnauthenticated(t *testing.T) {
	n := newSASLNode(t, saslNodeOpts{})
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version = 11
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group = "g"
	for _, req := range []kmsg.Request{
		kmsg.NewPtrMetadataRequest(), produceRequest("t", make([]byte, 64)), fetch, kmsg.NewPtrListOffsetsRequest(),
		kmsg.NewPtrCreateTopicsRequest(), kmsg.NewPtrDeleteTopicsRequest(), kmsg.NewPtrDescribeClusterRequest(),
		kmsg.NewPtrInitProducerIDRequest(), commit, kmsg.NewPtrFindCoordinatorRequest(),
	} {
		t.Run(kmsg.NameForKey(req.Key()), func(t *testing.T) {
			k := n.dial()
			k.mustDo(kmsg.NewPtrApiVersionsRequest())
			if _, err := k.do(req); err == nil {
				t.Fatal("answered before authentication")
			}
		})
	}
	t.Run("large frame", func(t *testing.T) {
		k := n.dial()
		k.mustDo(handshake(1, "PLAIN"))
		if _, err := k.do(authenticate(1, make([]byte, 600<<10))); err == nil {
			t.Fatal("a 600 KiB SaslAuthenticate answered")
		}
		// Once authenticated, the frame limit is MaxRequestBytes.
		k = n.dial()
		if r := k.loginPlain("mink", "secret"); r.ErrorCode != 0 {
			t.Fatal(kerr.ErrorForCode(r.ErrorCode))
		}
		if code := k.produceCode(produceRequest("t", make([]byte, 600<<10))); code != kerr.LeaderNotAvailable.Code {
			t.Fatalf("a 600 KiB produce after authentication: %v", kerr.ErrorForCode(code))
		}
	})
}

// Failed logins are limited per source address through the guard.
func TestSASLRateLimit(t *testing.T) {
	n := newSASLNode(t, saslNodeOpts{limiter: auth.NewLoginLimiter(2, time.Hour)})
	for i := 0; i < 2; i++ {
		if r := n.dial().loginPlain("alice", "nope"); *r.ErrorMessage != msgPlainFailed {
			t.Fatalf("attempt %d: %q", i, *r.ErrorMessage)
		}
	}
	if r := n.dial().loginPlain("alice", "pw"); r.ErrorCode != kerr.SaslAuthenticationFailed.Code || !strings.Contains(*r.ErrorMessage, "too many failed logins") {
		t.Fatalf("the right password after 2 failures: %v %v", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
	}
	if err := n.dial().loginSCRAM("alice", "pw", false); err == nil || !strings.Contains(err.Error(), "too many failed logins") {
		t.Fatalf("SCRAM after 2 failures: %v", err)
	}
}

// In trust mode nothing needs SASL; a connection that authenticates as a
// role gets that role's privileges, and a name that is no role is the
// bootstrap superuser.
func TestSASLTrustMode(t *testing.T) {
	n := newSASLNode(t, saslNodeOpts{trust: true})
	k := n.dial()
	if got := k.metadataOf(); len(got) != 2 {
		t.Fatalf("metadata without SASL: %v", got)
	}
	if code := k.produceCode(produceRequest("t", nil)); code != kerr.LeaderNotAvailable.Code {
		t.Fatalf("produce without SASL: %v", kerr.ErrorForCode(code))
	}
	k = n.dial()
	if r := k.loginPlain("alice", "anything"); r.ErrorCode != 0 {
		t.Fatalf("PLAIN as alice: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if got := k.metadataOf(); len(got) != 0 {
		t.Fatalf("alice, who holds no privilege, sees %v", got)
	}
	if code := k.produceCode(produceRequest("t", nil)); code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("alice's produce: %v", kerr.ErrorForCode(code))
	}
	k = n.dial()
	if r := k.loginPlain("nobody", "x"); r.ErrorCode != 0 {
		t.Fatalf("PLAIN as nobody: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if got := k.metadataOf(); len(got) != 2 {
		t.Fatalf("nobody (the superuser) sees %v", got)
	}
	if err := n.dial().loginSCRAM("alice", "pw", false); err != nil {
		t.Fatalf("SCRAM as alice in trust mode: %v", err)
	}
	if r := n.dial().loginPlain("carol", "pw"); r.ErrorCode != kerr.SaslAuthenticationFailed.Code {
		t.Fatalf("carol may not log in, even in trust mode: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

// --hba-file's rules hold on the Kafka listener for both mechanisms: a
// reject rule refuses the role whatever its password, and a hostssl rule
// does not match a plaintext connection.
func TestSASLHostRules(t *testing.T) {
	n := newSASLNode(t, saslNodeOpts{hba: `
host    all  alice  127.0.0.1/32  reject
hostssl all  bob    127.0.0.1/32  scram-sha-256
host    all  mink   127.0.0.1/32  scram-sha-256
`})
	v, _ := auth.NewVerifier("pw")
	n.propose(catalog.CreateRole{Name: "bob", Login: true, Verifier: v.String()})
	if r := n.dial().loginPlain("mink", "secret"); r.ErrorCode != 0 {
		t.Fatalf("mink: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if err := n.dial().loginSCRAM("mink", "secret", false); err != nil {
		t.Fatalf("mink: %v", err)
	}
	for _, user := range []string{"alice", "bob"} {
		before := len(n.logs.String())
		if r := n.dial().loginPlain(user, "pw"); r.ErrorCode != kerr.SaslAuthenticationFailed.Code {
			t.Fatalf("PLAIN as %s: %v", user, kerr.ErrorForCode(r.ErrorCode))
		}
		if err := n.dial().loginSCRAM(user, "pw", false); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("SCRAM as %s: %v", user, err)
		}
		if logged := n.logs.String()[before:]; strings.Count(logged, "login failed") != 2 {
			t.Fatalf("the refusals of %s are not logged:\n%s", user, logged)
		}
	}
}

// FuzzSASLToken feeds any bytes to each step of each mechanism: the
// answer is a challenge or a failure, never a panic.
func FuzzSASLToken(f *testing.F) {
	for _, seed := range []string{"", "\x00a\x00b", "n,,n=alice,r=abc", "c=biws,r=abc,p=AAAA", "n,a=x,n=y,r=z", "y,,m=ext,n=a,r=b", "n,,n==2C=3D,r=\x7f"} {
		f.Add([]byte(seed), uint8(0))
		f.Add([]byte(seed), uint8(1))
		f.Add([]byte(seed), uint8(2))
	}
	cat, err := metalog.Open(context.Background(), metalog.NewMemLog(), metalog.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		f.Fatal(err)
	}
	defer cat.Close()
	v, _ := auth.NewVerifier("pw")
	if _, err := cat.Propose(context.Background(), catalog.CreateRole{Name: "alice", Login: true, Verifier: v.String()}); err != nil {
		f.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := New(Config{Meta: cat, Logger: quiet, Access: access.New(access.Config{Meta: cat, Logger: quiet})})
	f.Fuzz(func(t *testing.T, token []byte, step uint8) {
		ss := &session{remote: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, stage: saslHandshaken, mechanism: mechanismPlain}
		switch step % 3 {
		case 1:
			ss.mechanism = mechanismSCRAM
		case 2:
			ss.mechanism = mechanismSCRAM
			if _, err := s.saslToken(ss, []byte("n,,n=alice,r=abcdef")); err != nil {
				t.Fatal(err)
			}
		}
		out, err := s.saslToken(ss, token)
		var se *saslError
		switch {
		case err != nil && !errors.As(err, &se):
			t.Fatalf("error %v is no saslError", err)
		case err == nil && ss.stage == saslDone && ss.id == nil:
			t.Fatal("done without an identity")
		case err == nil && ss.stage == saslDone && ss.mechanism == mechanismSCRAM:
			t.Fatalf("authenticated by %q", token)
		case err == nil && out == nil:
			t.Fatal("no answer")
		}
	})
}
