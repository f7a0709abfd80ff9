package pgwire

import (
	"context"
	"errors"
	"io"
	"net"
)

// Handler creates the SQL side of a connection. The server calls NewSession
// once per connection, after authentication succeeded and before the client
// sees ReadyForQuery. Handler methods are called concurrently from many
// connections' goroutines.
type Handler interface {
	// NewSession starts the SQL session of one connection. Returning an
	// *Error rejects the connection with it as a FATAL error; use
	// CodeInvalidCatalogName (3D000) for an unknown database. ctx is
	// cancelled when the connection closes, so a session may keep it for
	// background work tied to the connection's lifetime.
	NewSession(ctx context.Context, info SessionInfo) (Session, error)
}

// SessionInfo describes the connection a session belongs to.
type SessionInfo struct {
	User            string
	Database        string // the startup "database" parameter, defaulting to User
	ApplicationName string
	// Params holds every startup parameter the client sent, names
	// lower-cased (setting names are case-insensitive), with the
	// "-c name=value" and "--name=value" switches of the "options"
	// parameter expanded into their own entries (psql's PGOPTIONS,
	// pgjdbc's options=). Settings such as timezone, datestyle,
	// extra_float_digits or search_path arrive here.
	Params     map[string]string
	RemoteAddr net.Addr
	ProcessID  uint32 // the process id reported in BackendKeyData
	TLS        bool   // the connection negotiated TLS
}

// Session is the SQL layer's half of one connection. The server calls a
// session's methods from a single goroutine, one call at a time, so a session
// needs no locking of its own; the PreparedStatement and Rows values it hands
// out are used from that same goroutine.
//
// Every ctx passed to a session is cancelled when the client sends a
// CancelRequest for this connection, when the client disconnects, and when
// the server closes. A call that blocks must return soon after its ctx is
// done; the error it returns then is replaced by 57014 (query_canceled) for a
// cancel request, or 57P01 (admin_shutdown) when the server is closing.
type Session interface {
	// Split cuts the string of a simple-protocol Query message into its
	// statements, without executing anything. It returns no statements for
	// a string that holds only whitespace, comments and semicolons; the
	// client then gets EmptyQueryResponse. A syntax error anywhere fails the
	// whole string before any statement runs, as in PostgreSQL.
	//
	// The server then calls Prepare and Execute for each statement in turn,
	// so a statement may refer to a table that an earlier statement of the
	// same string creates.
	Split(ctx context.Context, query string) ([]Statement, error)

	// Prepare parses and analyses one statement. It is called for every
	// Parse message of the extended protocol and for every statement of a
	// simple Query (with paramOIDs nil). paramOIDs holds the parameter types
	// the client specified; it may be shorter than the number of
	// parameters, and 0 means "unspecified, infer it". Prepare never
	// executes the statement: Describe is answered from the returned
	// statement alone. Return ErrEmptyQuery for a statement that is only
	// comments; the server then answers Execute with EmptyQueryResponse.
	Prepare(ctx context.Context, sql string, paramOIDs []uint32) (PreparedStatement, error)

	// Sync marks a synchronisation point: a Sync message of the extended
	// protocol, or the end of a simple Query message. failed reports whether
	// an error was sent to the client since the previous Sync, including
	// errors the server raised itself (bad Bind parameters, COPY data that
	// did not parse, a protocol violation). Outside a transaction block
	// this ends PostgreSQL's implicit transaction: commit, or roll back when
	// failed. Inside a block, failed must put the block into the failed
	// state (TxFailed), as PostgreSQL does. An error returned here is sent to
	// the client before ReadyForQuery.
	Sync(ctx context.Context, failed bool) error

	// TxStatus reports the transaction state for ReadyForQuery. The server
	// also asks after every executed statement: a change from TxInBlock or
	// TxFailed to TxIdle means the transaction block ended, and every
	// portal is then destroyed, as PostgreSQL does at COMMIT or ROLLBACK.
	TxStatus() TxStatus

	// Close releases the session. It is called exactly once, after every
	// PreparedStatement and Rows of the session has been closed, when the
	// connection ends for any reason.
	Close()
}

// ParamReporter is an optional interface of a Session whose settings the
// client can change (SET TimeZone, SET application_name). The server calls
// ChangedParams before every ReadyForQuery, including the first, and sends a
// ParameterStatus message for every entry whose value differs from what the
// client was last told, so returning every reportable setting each time is
// fine. The server itself reports the parameters listed in
// docs/sql-protocol.md; returning one of them overrides it (for example
// is_superuser). A "TimeZone" entry (a zone name or an offset like "+02")
// also sets the zone in which timestamptz values are rendered in text; the
// server looks at it after every statement, so "SET TimeZone ...; SELECT
// ..." in one string renders in the new zone.
type ParamReporter interface {
	ChangedParams() map[string]string
}

// Statement is one statement of a simple-protocol query string.
type Statement struct {
	SQL string
	// Offset is the byte offset of SQL within the query string. The server
	// adds it to the Position of an *Error raised by this statement, so the
	// position the client sees counts from the start of the whole string.
	Offset int
}

// PreparedStatement is a statement prepared by Session.Prepare. The server
// keeps it while the client's prepared statement or any portal made from it
// exists, and then calls Close once.
type PreparedStatement interface {
	// ParamOIDs returns the type of every parameter ($1, $2, ...), in order,
	// with unspecified client types resolved. An OID of 0 is reported to the
	// client as text (25), and the parameter arrives as a string.
	ParamOIDs() []uint32

	// Columns describes the rows the statement returns, or nil when it
	// returns none (INSERT without RETURNING, DDL, COPY); an empty non-nil
	// slice means rows without columns ("SELECT"). It answers Describe, so
	// it must be known without executing the statement.
	Columns() []Column

	// Execute runs the statement once with decoded parameters (see the
	// package documentation for the Go type of each parameter type). It is
	// called at most once per portal, on the portal's first Execute
	// message; a portal that the client fetches in pieces (row limits) keeps
	// pulling from the Result's Rows.
	Execute(ctx context.Context, params []any) (Result, error)

	Close()
}

// Result is what one execution of a statement produced. At most one of Rows,
// CopyIn and CopyOut is set.
type Result struct {
	// Tag is the command tag, such as "CREATE TABLE", "INSERT 0 3",
	// "BEGIN". When Rows is set, the server appends the number of rows it
	// sent, so Tag is "SELECT" (the default when empty) or, for INSERT ...
	// RETURNING, "INSERT 0". Tags of COPY results are made by the server.
	Tag string

	// Rows streams the statement's result rows. The server closes it when
	// the portal is done or destroyed.
	Rows Rows

	// CopyIn asks the server to run COPY FROM STDIN.
	CopyIn *CopyIn

	// CopyOut asks the server to run COPY TO STDOUT.
	CopyOut *CopyOut

	// Notices are sent to the client as NoticeResponse messages before the
	// command completes (use Severity "NOTICE" or "WARNING").
	Notices []*Error
}

// Rows is a forward-only stream of result rows. Inside a transaction block
// a client may hold several named portals and fetch from them in turns, so
// several Rows of one session can be open at once.
type Rows interface {
	// Columns describes every row. In the simple protocol it is sent as
	// RowDescription; in the extended protocol it must agree in length with
	// the statement's Columns, which the client already received.
	Columns() []Column

	// Next returns the next row, one value per column, or io.EOF after the
	// last row. The slice is only read until the next call to Next, so it
	// may be reused. Values are Go values of the kinds listed in the package
	// documentation, nil for NULL, or Text for a value already rendered in
	// PostgreSQL's text output format.
	Next(ctx context.Context) ([]any, error)

	// Close releases the stream; it may be called before io.EOF.
	Close() error
}

// Text is a value already rendered in PostgreSQL's text output format for its
// column's type. The server sends it as is to a client that asked for text,
// and converts it with the type's codec for a client that asked for binary.
type Text string

// TxStatus is the transaction state reported in ReadyForQuery.
type TxStatus byte

const (
	TxIdle    TxStatus = 'I' // not in a transaction block
	TxInBlock TxStatus = 'T' // in a transaction block
	TxFailed  TxStatus = 'E' // in a failed transaction block; statements are rejected until ROLLBACK
)

// Column describes one result column, as sent in RowDescription.
type Column struct {
	Name    string
	TypeOID uint32 // the pgtype.*OID constants name the standard types
	// TypeSize is pg_type.typlen: the size in bytes of a fixed-size type,
	// -1 for a variable-size one. NewColumn fills it in.
	TypeSize int16
	// TypeMod is the type modifier, e.g. for numeric(12,2) it is
	// ((12 << 16) | 2) + 4; -1 for none (0 is sent as -1 too).
	TypeMod int32
	// TableOID and ColumnAttr identify the source table column when the
	// column is a plain reference to one, else 0. Some clients (pgjdbc's
	// ResultSetMetaData) use them.
	TableOID   uint32
	ColumnAttr int16
}

// NewColumn returns a column of the named type with TypeSize filled in and no
// type modifier.
func NewColumn(name string, typeOID uint32) Column {
	return Column{Name: name, TypeOID: typeOID, TypeSize: typeSize(typeOID), TypeMod: -1}
}

// ErrEmptyQuery is returned by Session.Prepare for a statement that holds no
// command (only comments or semicolons).
var ErrEmptyQuery = errors.New("pgwire: empty query")

// sliceRows is the Rows of RowsFromSlice.
type sliceRows struct {
	columns []Column
	rows    [][]any
	next    int
}

// RowsFromSlice returns Rows that yields the given rows, for small results
// such as SHOW or catalog queries.
func RowsFromSlice(columns []Column, rows [][]any) Rows {
	return &sliceRows{columns: columns, rows: rows}
}

func (r *sliceRows) Columns() []Column { return r.columns }

func (r *sliceRows) Next(ctx context.Context) ([]any, error) {
	if r.next >= len(r.rows) {
		return nil, io.EOF
	}
	row := r.rows[r.next]
	r.next++
	return row, nil
}

func (r *sliceRows) Close() error { return nil }
