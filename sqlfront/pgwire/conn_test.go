package pgwire

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/lib/pq"
)

func wantPgError(t *testing.T, err error, severity, code, msg string) {
	t.Helper()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Severity != severity || pgErr.Code != code || (msg != "" && pgErr.Message != msg) {
		t.Fatalf("got %v, want %s %s %q", err, severity, code, msg)
	}
}

func TestSCRAM(t *testing.T) {
	ts := startServer(t, Config{Users: map[string]string{"mink": "s3cret", "ünï": "pässwörd ﬁ"}})
	ctx := testCtx(t)
	connect := func(userinfo string) error {
		conn, err := pgx.Connect(ctx, ts.url(userinfo, ""))
		if err == nil {
			conn.Close(ctx)
		}
		return err
	}
	if err := connect("mink:s3cret"); err != nil {
		t.Fatalf("pgx, right password: %v", err)
	}
	// Non-ASCII user and password: both sides normalise the password.
	if err := connect("%C3%BCn%C3%AF:p%C3%A4ssw%C3%B6rd%20%EF%AC%81"); err != nil {
		t.Fatalf("pgx, non-ASCII password: %v", err)
	}
	wantPgError(t, connect("mink:wrong"), "FATAL", CodeInvalidPassword, `password authentication failed for user "mink"`)
	wantPgError(t, connect("mink"), "FATAL", CodeInvalidPassword, `password authentication failed for user "mink"`)
	// An unknown user fails the same way, after the same exchange.
	wantPgError(t, connect("nobody:s3cret"), "FATAL", CodeInvalidPassword, `password authentication failed for user "nobody"`)

	// lib/pq.
	db, _ := sql.Open("postgres", ts.url("mink:s3cret", ""))
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("lib/pq, right password: %v", err)
	}
	db.Close()
	db, _ = sql.Open("postgres", ts.url("mink:nope", ""))
	err := db.PingContext(ctx)
	var pqErr *pq.Error
	if !errors.As(err, &pqErr) || pqErr.Code != CodeInvalidPassword {
		t.Fatalf("lib/pq, wrong password: %#v", err)
	}
	db.Close()

	// psql with PGPASSWORD.
	out, errOut, code := psql(t, ts, []string{"PGPASSWORD=s3cret"}, "-A", "-t", "-c", "select 1")
	if code != 0 || out != "1\n" {
		t.Fatalf("psql, right password: exit %d %q %q", code, out, errOut)
	}
	_, errOut, code = psql(t, ts, []string{"PGPASSWORD=bad"}, "-c", "select 1")
	if code != 2 || !strings.Contains(errOut, `FATAL:  password authentication failed for user "mink"`) {
		t.Fatalf("psql, wrong password: exit %d %q", code, errOut)
	}
}

// TestSCRAMChannelBinding: the server offers no SCRAM-SHA-256-PLUS, so a
// client insisting on channel binding is refused cleanly.
func TestSCRAMChannelBinding(t *testing.T) {
	ts := startServer(t, Config{Users: map[string]string{"mink": "pw"}})
	for _, tc := range []struct {
		mech, data, want string
	}{
		{"SCRAM-SHA-256", "p=tls-server-end-point,,n=,r=abcdef", "channel binding is not supported"},
		{"SCRAM-SHA-256-PLUS", "p=tls-server-end-point,,n=,r=abcdef", "invalid SASL authentication mechanism"},
		{"SCRAM-SHA-256", "n,,n=,r=", "malformed SCRAM message"},
	} {
		c := dialRaw(t, ts.addr)
		c.send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30, Parameters: map[string]string{"user": "mink"}})
		m, err := c.receive()
		if sasl, ok := m.(*pgproto3.AuthenticationSASL); err != nil || !ok || fmt.Sprint(sasl.AuthMechanisms) != "[SCRAM-SHA-256]" {
			t.Fatalf("first message %#v %v", m, err)
		}
		c.send(&pgproto3.SASLInitialResponse{AuthMechanism: tc.mech, Data: []byte(tc.data)})
		m, err = c.receive()
		e, ok := m.(*pgproto3.ErrorResponse)
		if err != nil || !ok || e.Severity != "FATAL" || e.Code != CodeProtocolViolation || !strings.Contains(e.Message, tc.want) {
			t.Fatalf("%s %q: got %#v %v", tc.mech, tc.data, m, err)
		}
		if _, err := c.receive(); err == nil {
			t.Fatal("connection still open after a FATAL error")
		}
	}
}

func selfSignedTLS(t *testing.T) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
}

func TestTLS(t *testing.T) {
	ctx := testCtx(t)
	ts := startServer(t, Config{TLSConfig: selfSignedTLS(t), Users: map[string]string{"mink": "pw"}})
	u := strings.Replace(ts.url("mink:pw", ""), "sslmode=disable", "sslmode=require", 1)
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatalf("pgx over TLS: %v", err)
	}
	var one int32
	if err := conn.QueryRow(ctx, "select 1").Scan(&one); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	ts.h.mu.Lock()
	info := ts.h.mu.infos[0]
	ts.h.mu.Unlock()
	if !info.TLS {
		t.Error("SessionInfo.TLS is false on a TLS connection")
	}
	out, errOut, code := psql(t, ts, []string{"PGPASSWORD=pw", "PGSSLMODE=require"}, "-A", "-t", "-c", "select 1")
	if code != 0 || out != "1\n" {
		t.Fatalf("psql over TLS: exit %d %q %q", code, out, errOut)
	}

	// Without TLSConfig, SSLRequest gets 'N': sslmode=require fails and the
	// default (prefer) falls back to plain text.
	plain := startServer(t, Config{})
	if _, err := pgx.Connect(ctx, strings.Replace(plain.url("", ""), "sslmode=disable", "sslmode=require", 1)); err == nil {
		t.Fatal("sslmode=require succeeded against a server without TLS")
	}
	conn, err = pgx.Connect(ctx, strings.Replace(plain.url("", ""), "sslmode=disable", "sslmode=prefer", 1))
	if err != nil {
		t.Fatalf("sslmode=prefer: %v", err)
	}
	conn.Close(ctx)
}

// rawStartupPacket builds a startup-phase packet: length, code, body.
func rawStartupPacket(code uint32, body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(8+len(body)))
	b = binary.BigEndian.AppendUint32(b, code)
	return append(b, body...)
}

func TestStartupNegotiation(t *testing.T) {
	ts := startServer(t, Config{})
	params := []byte("user\x00mink\x00database\x00mink\x00\x00")

	// SSLRequest and GSSENCRequest are refused with 'N', then the startup
	// continues on the same connection.
	c := dialRaw(t, ts.addr)
	for _, code := range []uint32{sslRequestCode, gssEncRequestCode} {
		c.nc.Write(rawStartupPacket(code, nil))
		var b [1]byte
		if _, err := io.ReadFull(c.nc, b[:]); err != nil || b[0] != 'N' {
			t.Fatalf("answer to request %d: %q %v", code, b, err)
		}
	}
	c.nc.Write(rawStartupPacket(pgproto3.ProtocolVersion30, params))
	if msgs := c.receiveUntil("ReadyForQuery"); msgType(msgs[0]) != "AuthenticationOk" {
		t.Fatalf("startup after SSL refusal: %s", formatMessages(msgs))
	}

	// A newer minor version and _pq_ options are answered with
	// NegotiateProtocolVersion, and the connection goes on in 3.0.
	c = dialRaw(t, ts.addr)
	c.nc.Write(rawStartupPacket(3<<16|2, []byte("user\x00mink\x00_pq_.shiny\x00on\x00\x00")))
	m, err := c.receive()
	npv, ok := m.(*pgproto3.NegotiateProtocolVersion)
	if err != nil || !ok || npv.NewestMinorProtocol != 0 || fmt.Sprint(npv.UnrecognizedOptions) != "[_pq_.shiny]" {
		t.Fatalf("got %#v %v, want NegotiateProtocolVersion", m, err)
	}
	c.receiveUntil("ReadyForQuery")
	c.send(&pgproto3.Query{String: "select 1"})
	if got := formatMessages(c.receiveUntil("ReadyForQuery")); !strings.Contains(got, "CommandComplete SELECT 1") {
		t.Fatalf("query after negotiation: %s", got)
	}

	for _, tc := range []struct {
		name   string
		packet []byte
		want   string
	}{
		{"protocol 2.0", rawStartupPacket(2<<16, params), "FATAL 0A000 unsupported frontend protocol 2.0: server supports 3.0 to 3.0"},
		{"protocol 4.0", rawStartupPacket(4<<16, params), "FATAL 0A000 unsupported frontend protocol 4.0: server supports 3.0 to 3.0"},
		{"no user", rawStartupPacket(pgproto3.ProtocolVersion30, []byte("database\x00mink\x00\x00")), "FATAL 28000 no PostgreSQL user name specified in startup packet"},
		{"bad layout", rawStartupPacket(pgproto3.ProtocolVersion30, []byte("user\x00mink")), "FATAL 08P01 invalid startup packet layout: expected terminator as last byte"},
		{"bad length", []byte{0, 0, 0, 2, 0, 0}, "FATAL 08P01 invalid length of startup packet"},
		{"huge length", []byte{0, 1, 0, 0, 0, 3, 0, 0}, "FATAL 08P01 invalid length of startup packet"},
		{"bad TimeZone", rawStartupPacket(pgproto3.ProtocolVersion30, []byte("user\x00mink\x00TimeZone\x00Mars/Base\x00\x00")), `FATAL 22023 invalid value for parameter "TimeZone": "Mars/Base"`},
		{"unknown database", rawStartupPacket(pgproto3.ProtocolVersion30, []byte("user\x00mink\x00database\x00nosuchdb\x00\x00")), `FATAL 3D000 database "nosuchdb" does not exist`},
	} {
		c := dialRaw(t, ts.addr)
		c.nc.Write(tc.packet)
		var got string
		for {
			m, err := c.receive()
			if err != nil {
				break
			}
			if e, ok := m.(*pgproto3.ErrorResponse); ok {
				got = fmt.Sprintf("%s %s %s", e.Severity, e.Code, e.Message)
			}
		}
		if got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestStartupTimeout(t *testing.T) {
	ts := startServer(t, Config{StartupTimeout: 100 * time.Millisecond})
	c := dialRaw(t, ts.addr)
	start := time.Now()
	if _, err := c.nc.Read(make([]byte, 1)); err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("a silent client was not disconnected: %v after %v", err, time.Since(start))
	}
}

func TestMaxConnections(t *testing.T) {
	ts := startServer(t, Config{MaxConnections: 1})
	ts.pgx(t, "")
	_, err := pgx.Connect(testCtx(t), ts.url("", ""))
	wantPgError(t, err, "FATAL", CodeTooManyConnections, "sorry, too many clients already")
}

// TestBadInputIsolated sends malformed and oversized messages on raw
// connections while a pgx client keeps querying on another: each bad client
// gets FATAL 08P01 and loses only its own connection.
func TestBadInputIsolated(t *testing.T) {
	ts := startServer(t, Config{MaxMessageSize: 1 << 20})
	conn := ts.pgx(t, "")
	ctx := testCtx(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var queries atomic.Int64
	var failed atomic.Bool
	var queryErr error // read after wg.Wait
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			rows, err := conn.Query(ctx, "select n from series(50)")
			if err == nil {
				var ns []int64
				ns, err = pgx.CollectRows(rows, pgx.RowTo[int64])
				if err == nil && len(ns) != 50 {
					err = fmt.Errorf("%d rows", len(ns))
				}
			}
			if err != nil {
				queryErr = err
				failed.Store(true)
				return
			}
			queries.Add(1)
		}
	}()

	msg := func(typ byte, body []byte) []byte {
		b := []byte{typ}
		b = binary.BigEndian.AppendUint32(b, uint32(4+len(body)))
		return append(b, body...)
	}
	for _, tc := range []struct {
		name  string
		bytes []byte
		want  string // "" when the client cannot be told (it is gone)
	}{
		{"unknown type", msg('Z', nil), "FATAL 08P01 invalid frontend message: unknown message type: Z"},
		{"length below 4", []byte{'Q', 0, 0, 0, 2}, "FATAL 08P01 invalid frontend message: invalid message length: 2"},
		{"negative length", []byte{'Q', 0xff, 0xff, 0xff, 0xf0}, "FATAL 08P01 invalid frontend message: invalid message length: -16"},
		{"oversized", append([]byte{'Q'}, binary.BigEndian.AppendUint32(nil, 2<<20)...), "FATAL 08P01 invalid message length"},
		{"malformed Bind", msg('B', []byte("\x00\x00\x00\x05")), "FATAL 08P01 invalid frontend message: "},
		{"Parse without terminator", msg('P', []byte("name")), "FATAL 08P01 invalid frontend message: "},
		{"garbage", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), "FATAL 08P01 invalid message length"},
		{"password message after startup", msg('p', []byte("pw\x00")), "FATAL 08P01 "},
		{"truncated then gone", msg('Q', []byte("select 1\x00"))[:7], ""},
	} {
		c := connectRaw(t, ts.addr, nil)
		c.nc.Write(tc.bytes)
		if tc.want == "" {
			c.nc.Close()
			continue
		}
		var got string
		for {
			m, err := c.receive()
			if err != nil {
				break
			}
			if e, ok := m.(*pgproto3.ErrorResponse); ok {
				got = fmt.Sprintf("%s %s %s", e.Severity, e.Code, e.Message)
			}
		}
		if !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: got %q, want prefix %q", tc.name, got, tc.want)
		}
	}
	// The well-behaved client never noticed.
	waitFor(t, "the pgx client to run queries", func() bool { return queries.Load() >= 3 || failed.Load() })
	close(stop)
	wg.Wait()
	if queryErr != nil {
		t.Fatalf("pgx client next to the bad ones failed after %d queries: %v", queries.Load(), queryErr)
	}
	waitFor(t, "bad connections to close their sessions", func() bool { return ts.h.sessions.Load() == 1 })
	if !strings.Contains(ts.logs.String(), "message too large") {
		t.Errorf("oversized message not logged:\n%s", ts.logs)
	}
}

func TestHandlerPanic(t *testing.T) {
	ts := startServer(t, Config{})
	ctx := testCtx(t)
	bystander := ts.pgx(t, "")
	victim := ts.pgx(t, "")
	_, err := victim.Exec(ctx, "panic")
	wantPgError(t, err, "FATAL", CodeInternalError, "internal error")
	var one int32
	if err := bystander.QueryRow(ctx, "select 1").Scan(&one); err != nil {
		t.Fatalf("other connection after a panic: %v", err)
	}
	waitFor(t, "the panicking session to close", func() bool { return ts.h.sessions.Load() == 1 })
	if logs := ts.logs.String(); !strings.Contains(logs, "test handler panic") || !strings.Contains(logs, "goroutine") {
		t.Errorf("panic not logged with its stack:\n%s", logs)
	}
}

// TestDisconnect: a client that goes away mid-query or mid-COPY cancels the
// query, aborts the COPY and closes its session.
func TestDisconnect(t *testing.T) {
	h := &testHandler{sleeping: make(chan struct{}, 1)}
	ts := startServer(t, Config{Handler: h})

	c := connectRaw(t, ts.addr, nil)
	c.send(&pgproto3.Query{String: "select pg_sleep"})
	<-h.sleeping
	c.nc.Close()
	waitFor(t, "the sleeping session to close", func() bool { return h.sessions.Load() == 0 })

	c = connectRaw(t, ts.addr, nil)
	c.send(&pgproto3.Query{String: "copy c from stdin"}, &pgproto3.CopyData{Data: []byte("1\ta\t1\n2\tb\t2\n3\tc\t3\n")})
	c.receiveUntil("CopyInResponse")
	c.nc.Close()
	waitFor(t, "the COPY to abort", func() bool { return len(h.aborts()) == 1 })
	if len(h.committed()) != 0 {
		t.Fatal("an interrupted COPY stored rows")
	}

	// Terminate closes the connection from the server side.
	c = connectRaw(t, ts.addr, nil)
	c.send(&pgproto3.Terminate{})
	if _, err := c.receive(); err == nil {
		t.Fatal("connection open after Terminate")
	}
	waitFor(t, "sessions to close", func() bool { return h.sessions.Load() == 0 })
}

// TestServerClose: Close ends idle and busy connections with FATAL 57P01
// and waits for them.
func TestServerClose(t *testing.T) {
	h := &testHandler{sleeping: make(chan struct{}, 1)}
	ts := startServer(t, Config{Handler: h})
	ctx := testCtx(t)
	busy := ts.pgx(t, "")
	idle := connectRaw(t, ts.addr, nil)
	done := make(chan error, 1)
	go func() {
		_, err := busy.Exec(ctx, "select pg_sleep")
		done <- err
	}()
	<-h.sleeping
	ts.close(t)
	wantPgError(t, <-done, "FATAL", CodeAdminShutdown, "terminating connection due to administrator command")
	m, err := idle.receive()
	if e, ok := m.(*pgproto3.ErrorResponse); err != nil || !ok || e.Code != CodeAdminShutdown {
		t.Fatalf("idle connection got %#v %v", m, err)
	}
	if h.sessions.Load() != 0 {
		t.Fatalf("%d sessions open after Close", h.sessions.Load())
	}
	if _, err := net.DialTimeout("tcp", ts.addr, time.Second); err == nil {
		t.Fatal("still accepting after Close")
	}
	if err := ts.srv.Serve(nil); !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve after Close: %v", err)
	}
}
