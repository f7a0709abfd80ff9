package pgwire

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testServer is a Server on a loopback port with a testHandler.
type testServer struct {
	srv     *Server
	h       *testHandler
	addr    string
	host    string
	port    string
	logs    *syncBuffer
	served  chan error
	stopped bool
}

// startServer starts a server; cfg.Handler defaults to a new testHandler.
// The server is closed when the test ends.
func startServer(t testing.TB, cfg Config) *testServer {
	t.Helper()
	h, _ := cfg.Handler.(*testHandler)
	if cfg.Handler == nil {
		h = &testHandler{}
		cfg.Handler = h
	}
	logs := &syncBuffer{}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	srv, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{srv: srv, h: h, addr: ln.Addr().String(), logs: logs, served: make(chan error, 1)}
	ts.host, ts.port, _ = net.SplitHostPort(ts.addr)
	go func() { ts.served <- srv.Serve(ln) }()
	t.Cleanup(func() { ts.close(t) })
	return ts
}

func (ts *testServer) close(t testing.TB) {
	if ts.stopped {
		return
	}
	ts.stopped = true
	if err := ts.srv.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := <-ts.served; !errors.Is(err, ErrServerClosed) {
		t.Errorf("Serve returned %v, want ErrServerClosed", err)
	}
}

// url is a connection string for pgx and lib/pq.
func (ts *testServer) url(userinfo string, extra string) string {
	if userinfo == "" {
		userinfo = "mink"
	}
	u := fmt.Sprintf("postgres://%s@%s/mink?sslmode=disable", userinfo, ts.addr)
	if extra != "" {
		u += "&" + extra
	}
	return u
}

func (ts *testServer) pgx(t testing.TB, extra string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, ts.url("", extra))
	if err != nil {
		t.Fatalf("pgx connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// syncBuffer collects the server's log; the server writes it from many
// goroutines while a test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
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

// rawClient speaks the protocol message by message, for the cases real
// drivers never produce.
type rawClient struct {
	t   testing.TB
	nc  net.Conn
	fe  *pgproto3.Frontend
	pid uint32
	key []byte
}

func dialRaw(t testing.TB, addr string) *rawClient {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	return &rawClient{t: t, nc: nc, fe: pgproto3.NewFrontend(nc, nc)}
}

// connectRaw dials and completes a trust startup.
func connectRaw(t testing.TB, addr string, params map[string]string) *rawClient {
	t.Helper()
	c := dialRaw(t, addr)
	if params == nil {
		params = map[string]string{"user": "mink", "database": "mink"}
	}
	c.send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30, Parameters: params})
	for _, m := range c.receiveUntil("ReadyForQuery") {
		switch m := m.(type) {
		case *pgproto3.BackendKeyData:
			c.pid, c.key = m.ProcessID, append([]byte(nil), m.SecretKey...)
		case *pgproto3.ErrorResponse:
			t.Fatalf("startup failed: %s %s", m.Code, m.Message)
		}
	}
	return c
}

func (c *rawClient) send(msgs ...pgproto3.FrontendMessage) {
	c.t.Helper()
	for _, m := range msgs {
		c.fe.Send(m)
	}
	if err := c.fe.Flush(); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

// receive returns the next message, or nil and the error.
func (c *rawClient) receive() (pgproto3.BackendMessage, error) {
	m, err := c.fe.Receive()
	if err != nil {
		return nil, err
	}
	return copyBackendMessage(m), nil
}

// receiveUntil reads messages up to and including one of type typ (a
// message type name such as "ReadyForQuery").
func (c *rawClient) receiveUntil(typ string) []pgproto3.BackendMessage {
	c.t.Helper()
	var out []pgproto3.BackendMessage
	for {
		m, err := c.receive()
		if err != nil {
			c.t.Fatalf("receive (after %s): %v", formatMessages(out), err)
		}
		out = append(out, m)
		if msgType(m) == typ {
			return out
		}
	}
}

// copyBackendMessage copies m out of the Frontend's reused buffers.
func copyBackendMessage(m pgproto3.BackendMessage) pgproto3.BackendMessage {
	switch m := m.(type) {
	case *pgproto3.DataRow:
		vals := make([][]byte, len(m.Values))
		for i, v := range m.Values {
			if v != nil {
				vals[i] = append([]byte{}, v...)
			}
		}
		return &pgproto3.DataRow{Values: vals}
	case *pgproto3.RowDescription:
		fields := make([]pgproto3.FieldDescription, len(m.Fields))
		for i, f := range m.Fields {
			f.Name = append([]byte(nil), f.Name...)
			fields[i] = f
		}
		return &pgproto3.RowDescription{Fields: fields}
	case *pgproto3.CommandComplete:
		return &pgproto3.CommandComplete{CommandTag: append([]byte(nil), m.CommandTag...)}
	case *pgproto3.CopyData:
		return &pgproto3.CopyData{Data: append([]byte(nil), m.Data...)}
	case *pgproto3.ErrorResponse:
		cp := *m
		return &cp
	case *pgproto3.NoticeResponse:
		cp := *m
		return &cp
	case *pgproto3.ParameterStatus:
		cp := *m
		return &cp
	case *pgproto3.ParameterDescription:
		return &pgproto3.ParameterDescription{ParameterOIDs: append([]uint32(nil), m.ParameterOIDs...)}
	case *pgproto3.ReadyForQuery:
		cp := *m
		return &cp
	case *pgproto3.BackendKeyData:
		return &pgproto3.BackendKeyData{ProcessID: m.ProcessID, SecretKey: append([]byte(nil), m.SecretKey...)}
	case *pgproto3.CopyInResponse:
		return &pgproto3.CopyInResponse{OverallFormat: m.OverallFormat, ColumnFormatCodes: append([]uint16(nil), m.ColumnFormatCodes...)}
	case *pgproto3.CopyOutResponse:
		return &pgproto3.CopyOutResponse{OverallFormat: m.OverallFormat, ColumnFormatCodes: append([]uint16(nil), m.ColumnFormatCodes...)}
	}
	return m
}

func msgType(m pgproto3.BackendMessage) string {
	return strings.TrimPrefix(fmt.Sprintf("%T", m), "*pgproto3.")
}

func formatMessages(msgs []pgproto3.BackendMessage) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString(formatMessage(m))
		b.WriteString("\n")
	}
	return b.String()
}

// formatMessage renders a backend message compactly for test output.
func formatMessage(m pgproto3.BackendMessage) string {
	switch m := m.(type) {
	case *pgproto3.RowDescription:
		var parts []string
		for _, f := range m.Fields {
			p := fmt.Sprintf("%s:%s", f.Name, oidName(f.DataTypeOID))
			if f.Format == 1 {
				p += "/b"
			}
			parts = append(parts, p)
		}
		return "RowDescription " + strings.Join(parts, " ")
	case *pgproto3.DataRow:
		var parts []string
		for _, v := range m.Values {
			switch {
			case v == nil:
				parts = append(parts, "NULL")
			case isPrintable(v):
				parts = append(parts, fmt.Sprintf("%q", v))
			default:
				parts = append(parts, fmt.Sprintf("0x%x", v))
			}
		}
		return "DataRow " + strings.Join(parts, " ")
	case *pgproto3.CommandComplete:
		return "CommandComplete " + string(m.CommandTag)
	case *pgproto3.ReadyForQuery:
		return "ReadyForQuery " + string(m.TxStatus)
	case *pgproto3.ErrorResponse:
		s := fmt.Sprintf("ErrorResponse %s %s %s", m.Severity, m.Code, m.Message)
		if m.Position != 0 {
			s += fmt.Sprintf(" (position %d)", m.Position)
		}
		if m.Where != "" {
			s += " [where: " + m.Where + "]"
		}
		return s
	case *pgproto3.NoticeResponse:
		return fmt.Sprintf("NoticeResponse %s %s %s", m.Severity, m.Code, m.Message)
	case *pgproto3.ParameterDescription:
		var parts []string
		for _, oid := range m.ParameterOIDs {
			parts = append(parts, oidName(oid))
		}
		return "ParameterDescription [" + strings.Join(parts, " ") + "]"
	case *pgproto3.ParameterStatus:
		return fmt.Sprintf("ParameterStatus %s=%s", m.Name, m.Value)
	case *pgproto3.CopyData:
		if isPrintable(m.Data) {
			return fmt.Sprintf("CopyData %q", m.Data)
		}
		return fmt.Sprintf("CopyData 0x%x", m.Data)
	case *pgproto3.CopyInResponse:
		return fmt.Sprintf("CopyInResponse format=%d columns=%v", m.OverallFormat, m.ColumnFormatCodes)
	case *pgproto3.CopyOutResponse:
		return fmt.Sprintf("CopyOutResponse format=%d columns=%v", m.OverallFormat, m.ColumnFormatCodes)
	}
	return msgType(m)
}

func isPrintable(b []byte) bool {
	for _, c := range b {
		if c < 0x20 && c != '\t' && c != '\n' && c != '\r' {
			return false
		}
	}
	return true
}

func oidName(oid uint32) string {
	for name, o := range typeOIDs {
		if o == oid {
			return name
		}
	}
	return fmt.Sprint(oid)
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// requireBinary returns the path of a client binary, failing the test with
// the install hint when it is missing.
func requireBinary(t testing.TB, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found in PATH: run scripts/install-test-deps.sh (or `make test-deps`) to install it", name)
	}
	return path
}
