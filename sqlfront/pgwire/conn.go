package pgwire

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net"
	"runtime/debug"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// flushThreshold is how many bytes of rows the server buffers before it
// writes them to the socket in the middle of a result.
const flushThreshold = 64 << 10

var (
	// errCloseConn unwinds the connection's goroutine after a FATAL error
	// was sent, a Terminate arrived or the socket failed.
	errCloseConn = errors.New("close connection")
	// errCancelRequest ends a connection that carried a CancelRequest.
	errCancelRequest = errors.New("cancel request served")
)

// conn is one client connection. Its goroutine (serve) runs the protocol and
// every call into the Session, and reads the socket between calls; while a
// call runs long, a watcher goroutine reads it (sockReader) so that a
// disconnect cancels the running query.
type conn struct {
	srv *Server
	log *slog.Logger
	nc  net.Conn
	rw  io.ReadWriter // nc, or the TLS connection over it
	tls bool

	pid    uint32
	secret [4]byte

	// ctx ends the connection: it is cancelled with errClientGone when
	// reading the socket fails, errServerClosing by Server.Close, or nil on
	// return.
	ctx  context.Context
	stop context.CancelCauseFunc

	reader   *sockReader
	be       *pgproto3.Backend
	codec    *codec
	session  Session
	user     string
	reported map[string]string // parameter statuses as the client knows them
	// pendingParams are the settings the statements since the last
	// ReadyForQuery changed (ParamReporter), reported before the next.
	pendingParams map[string]string
	timeZone      string // the TimeZone setting codec.loc was made from

	stmts   map[string]*stmtEntry
	portals map[string]*portal
	// ignoreTillSync is set by an error in the extended protocol: every
	// message up to the next Sync is discarded.
	ignoreTillSync bool
	// failed records that an error was sent since the last Sync.
	failed bool
	// txStatus is the session's status after the last statement, to detect
	// the end of a transaction block.
	txStatus  TxStatus
	unflushed int // bytes of DataRow and CopyData sent since the last flush
	// errPosShift is added to error positions while a statement of a
	// multi-statement simple Query runs (Statement.Offset in characters).
	errPosShift int32

	// Reused by sendDataRow and for CommandComplete (Backend.Send encodes
	// a message at once, so the structs can be reused).
	rowBuf      []byte
	rowOffsets  []int
	rowValues   [][]byte
	dataRow     pgproto3.DataRow
	cmdComplete pgproto3.CommandComplete
	tagBuf      []byte

	mu struct {
		sync.Mutex
		// cancelQuery cancels the context of the running query; nil
		// between queries.
		cancelQuery context.CancelCauseFunc
	}
}

func newConn(s *Server, nc net.Conn) *conn {
	// A connection lives until its client leaves or Server.Close ends it,
	// not for the span of a caller's context: it roots its own.
	ctx, stop := context.WithCancelCause(context.Background())
	c := &conn{
		srv:      s,
		log:      s.log.With("remote", nc.RemoteAddr().String()),
		nc:       nc,
		rw:       nc,
		ctx:      ctx,
		stop:     stop,
		stmts:    make(map[string]*stmtEntry),
		portals:  make(map[string]*portal),
		reported: make(map[string]string),
		txStatus: TxIdle,
	}
	_, _ = rand.Read(c.secret[:])
	return c
}

// shutdown is Server.Close's request to end the connection. It may be called
// from any goroutine.
func (c *conn) shutdown() {
	c.stop(errServerClosing)
	// Unblock a read of the socket (startup, idle, a watcher); leave a
	// moment for the FATAL message to go out, but never wait on a client
	// that does not read.
	c.nc.SetReadDeadline(time.Now())
	c.nc.SetWriteDeadline(time.Now().Add(time.Second))
}

// cancelQuery cancels the running query, if any (CancelRequest).
func (c *conn) cancelQuery() {
	c.mu.Lock()
	cancel := c.mu.cancelQuery
	c.mu.Unlock()
	if cancel != nil {
		c.log.Debug("pgwire: query canceled by cancel request", "pid", c.pid)
		cancel(errCanceledByUser)
	}
}

// beginQuery returns the context of one handler call that a CancelRequest
// may cancel; endQuery ends it.
func (c *conn) beginQuery() context.Context {
	ctx, cancel := context.WithCancelCause(c.ctx)
	c.mu.Lock()
	c.mu.cancelQuery = cancel
	c.mu.Unlock()
	c.reader.arm()
	return ctx
}

// endQuery ends the handler call beginQuery began.
func (c *conn) endQuery() {
	c.reader.disarm()
	c.mu.Lock()
	cancel := c.mu.cancelQuery
	c.mu.cancelQuery = nil
	c.mu.Unlock()
	if cancel != nil {
		cancel(nil)
	}
}

// serve runs the connection until it ends. tooMany rejects it after
// startup (MaxConnections).
func (c *conn) serve(tooMany bool) {
	defer c.close()
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("pgwire: panic serving connection", "panic", r, "stack", string(debug.Stack()))
			c.sendFatal(&Error{Severity: SeverityFatal, Code: CodeInternalError, Message: "internal error"})
		}
	}()
	if err := c.startup(tooMany); err != nil {
		if err != errCancelRequest && err != errCloseConn {
			c.log.Debug("pgwire: startup failed", "err", err)
		}
		return
	}
	for {
		msg, err := c.be.Receive()
		if err != nil {
			c.receiveFailed(err)
			return
		}
		if err := c.dispatch(msg); err != nil {
			return
		}
	}
}

// close releases everything the connection holds. It runs on the
// connection's goroutine as it returns.
func (c *conn) close() {
	c.stop(nil)
	c.nc.Close()
	if c.reader != nil {
		c.reader.close()
	}
	// Handler code runs below, perhaps after it panicked once already:
	// each call is guarded so that Session.Close still runs.
	for name := range c.portals {
		c.guard("close portal", func() { c.dropPortal(name) })
	}
	for name := range c.stmts {
		c.guard("close statement", func() { c.dropStatement(name) })
	}
	if c.session != nil {
		c.guard("close session", c.session.Close)
	}
}

// guard runs f, logging a panic instead of propagating it.
func (c *conn) guard(what string, f func()) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("pgwire: panic in "+what, "panic", r, "stack", string(debug.Stack()))
		}
	}()
	f()
}

// dispatch handles one message. A non-nil error closes the connection.
func (c *conn) dispatch(msg pgproto3.FrontendMessage) (err error) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("pgwire: panic in handler", "panic", r, "stack", string(debug.Stack()))
			c.sendFatal(&Error{Severity: SeverityFatal, Code: CodeInternalError, Message: "internal error"})
			err = errCloseConn
		}
	}()
	if c.ignoreTillSync {
		switch msg.(type) {
		case *pgproto3.Sync:
		case *pgproto3.Terminate:
			return errCloseConn
		default:
			return nil
		}
	}
	switch m := msg.(type) {
	case *pgproto3.Query:
		return c.simpleQuery(m.String)
	case *pgproto3.Parse:
		return c.handleParse(m)
	case *pgproto3.Bind:
		return c.handleBind(m)
	case *pgproto3.Describe:
		return c.handleDescribe(m)
	case *pgproto3.Execute:
		return c.handleExecute(m)
	case *pgproto3.Close:
		return c.handleClose(m)
	case *pgproto3.Sync:
		return c.handleSync()
	case *pgproto3.Flush:
		return c.flush()
	case *pgproto3.Terminate:
		return errCloseConn
	case *pgproto3.CopyData, *pgproto3.CopyDone, *pgproto3.CopyFail:
		// Left over from a COPY that failed early; PostgreSQL drops them.
		return nil
	case *pgproto3.FunctionCall:
		if err := c.reportError(Errorf(CodeFeatureNotSupported, "fastpath function calls are not supported")); err != nil {
			return err
		}
		return c.readyForQuery()
	default:
		return c.sendFatal(Errorf(CodeProtocolViolation, "unexpected message type %T", msg))
	}
}

// receiveFailed reports why reading the next message failed, where the
// client can still be told.
func (c *conn) receiveFailed(err error) {
	var tooBig *pgproto3.ExceededMaxBodyLenErr
	var rerr *readError
	switch {
	case context.Cause(c.ctx) == errServerClosing:
		c.sendFatal(toError(canceled(c.ctx, err)))
	case errors.As(err, &tooBig):
		c.log.Warn("pgwire: message too large", "size", tooBig.ActualBodyLen, "max", tooBig.MaxExpectedBodyLen)
		c.sendFatal(&Error{Severity: SeverityFatal, Code: CodeProtocolViolation,
			Message: "invalid message length",
			Detail:  "Message of " + itoa(int64(tooBig.ActualBodyLen)) + " bytes exceeds the maximum of " + itoa(int64(tooBig.MaxExpectedBodyLen)) + " bytes."})
	case errors.As(err, &rerr):
		// The client went away, perhaps in the middle of a message.
	default:
		c.log.Warn("pgwire: malformed message", "err", err)
		c.sendFatal(&Error{Severity: SeverityFatal, Code: CodeProtocolViolation, Message: "invalid frontend message: " + err.Error()})
	}
}

// sendError sends the error of a handler call that ran under ctx (see
// canceled) and records the failure. It returns errCloseConn when the error
// is FATAL.
func (c *conn) sendError(ctx context.Context, err error) error {
	return c.reportError(toError(canceled(ctx, err)))
}

// reportError sends e as an ErrorResponse and records the failure. It
// returns errCloseConn when e is FATAL.
func (c *conn) reportError(e *Error) error {
	if e.Code == CodeInternalError && e.Err != nil {
		c.log.Warn("pgwire: internal error", "err", e.Err)
	}
	if e.Position > 0 && c.errPosShift > 0 {
		shifted := *e // the handler's *Error may be shared; do not modify it
		shifted.Position += c.errPosShift
		e = &shifted
	}
	if e.Severity == SeverityFatal {
		return c.sendFatal(e)
	}
	c.failed = true
	c.be.Send(e.response())
	return nil
}

// sendFatal sends a FATAL error and returns errCloseConn: the caller ends
// the connection.
func (c *conn) sendFatal(e *Error) error {
	e.Severity = SeverityFatal
	if c.be == nil {
		buf, err := e.response().Encode(nil)
		if err == nil {
			_, _ = c.rw.Write(buf)
		}
		return errCloseConn
	}
	c.be.Send(e.response())
	_ = c.be.Flush()
	return errCloseConn
}

func (c *conn) flush() error {
	c.unflushed = 0
	if err := c.be.Flush(); err != nil {
		return errCloseConn
	}
	return nil
}

// maybeFlush writes buffered output once a result has grown large.
func (c *conn) maybeFlush(n int) error {
	c.unflushed += n
	if c.unflushed < flushThreshold {
		return nil
	}
	return c.flush()
}

// readyForQuery reports changed parameters and the transaction status and
// flushes.
func (c *conn) readyForQuery() error {
	if pr, ok := c.session.(ParamReporter); ok {
		params := pr.ChangedParams()
		if len(c.pendingParams) > 0 {
			maps.Copy(c.pendingParams, params)
			params, c.pendingParams = c.pendingParams, nil
		}
		c.reportParams(params)
	}
	c.txStatus = c.session.TxStatus()
	c.be.Send(&pgproto3.ReadyForQuery{TxStatus: byte(c.txStatus)})
	return c.flush()
}

// reportParams sends ParameterStatus for every parameter whose value the
// client does not know yet.
func (c *conn) reportParams(params map[string]string) {
	if len(params) == 0 {
		return // the common case: no statement changed a setting
	}
	for _, name := range sortedKeys(params) {
		value := params[name]
		if old, ok := c.reported[name]; ok && old == value {
			continue
		}
		c.reported[name] = value
		c.be.Send(&pgproto3.ParameterStatus{Name: name, Value: value})
	}
	c.applyTimeZone(params)
}

// applyTimeZone follows a change of the session's TimeZone, which decides
// how timestamptz values are rendered in text. It runs after every statement
// so that "SET TimeZone ...; SELECT ..." renders in the new zone.
func (c *conn) applyTimeZone(params map[string]string) {
	tz, ok := params["TimeZone"]
	if !ok || tz == c.timeZone {
		return
	}
	if loc, err := loadLocation(tz); err == nil {
		c.timeZone, c.codec.loc = tz, loc
	}
}

// readError wraps an error from the socket, to tell it apart from a
// malformed message.
type readError struct{ err error }

func (e *readError) Error() string { return "read: " + e.err.Error() }
func (e *readError) Unwrap() error { return e.err }
