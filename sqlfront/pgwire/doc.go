// Package pgwire is mink's PostgreSQL wire protocol (v3.0) server. It owns
// the protocol: startup and parameter statuses, SCRAM-SHA-256
// authentication, TLS, the simple and extended query protocols, text and
// binary value formats, COPY in the text, csv and binary formats, cancel
// requests, message size limits and error reporting. It knows nothing about
// SQL: every statement goes to a Handler, which the SQL layer implements.
// docs/sql-protocol.md describes the behaviour a client sees.
//
// # The handler interface
//
// Handler.NewSession is called once per connection after authentication.
// The Session then sees:
//
//   - Simple Query: Split(query) cuts the string into statements; then, for
//     each statement in turn, Prepare(sql, nil) and Execute(nil). The first
//     error skips the rest of the string. Then Sync(failed) and
//     ReadyForQuery with TxStatus().
//   - Parse: Prepare(sql, paramOIDs). Describe answers from the statement's
//     ParamOIDs and Columns without executing anything.
//   - Bind: no handler call; the server decodes the parameters with the
//     statement's ParamOIDs and the client's formats.
//   - Execute: the portal's first Execute calls PreparedStatement.Execute
//     with the decoded parameters; rows are pulled from Result.Rows, at most
//     the row limit per Execute (PortalSuspended in between), until io.EOF.
//   - Sync: Sync(failed), then ReadyForQuery with TxStatus(). Outside a
//     transaction block this ends the implicit transaction, and every
//     portal is destroyed.
//
// A statement's Result carries a command tag, or Rows, or a COPY request
// (CopyIn, CopyOut). For COPY FROM STDIN the server parses and decodes the
// data and delivers rows to the CopySink in batches (WriteRows), then calls
// Commit only if the whole input parsed and decoded, or Abort otherwise: a
// sink stages rows and makes them visible in Commit, so a COPY with one bad
// row stores none of its rows.
//
// Errors: a handler returns *Error (possibly wrapped) to choose SQLSTATE,
// message, detail, hint and position; any other error is sent as XX000. If
// the call's context was cancelled by a CancelRequest the client gets 57014
// instead, whatever the handler returned. A panic in handler code is
// recovered: it is logged, the client gets FATAL XX000 and only that
// connection closes.
//
// # Values
//
// Parameters and COPY FROM fields are decoded, by the statement's parameter
// types or the COPY's column types, into these Go types (NULL is nil):
//
//	bool                           bool
//	int2, int4, int8               int16, int32, int64
//	float4, float8                 float32, float64
//	numeric                        pgtype.Numeric
//	text, varchar, bpchar, name    string
//	unknown or unspecified (0)     string (text format), []byte (binary)
//	bytea                          []byte
//	date                           time.Time (UTC midnight); pgtype.InfinityModifier for ±infinity
//	timestamp                      time.Time (UTC, no zone meaning); pgtype.InfinityModifier for ±infinity
//	timestamptz                    time.Time (UTC); input without an offset is read in the session TimeZone;
//	                               pgtype.InfinityModifier for ±infinity
//	time                           pgtype.Time
//	interval                       pgtype.Interval
//	uuid                           [16]byte
//	json, jsonb                    string (the JSON text)
//	arrays of the types above      []any of the element type's values (nil: NULL element);
//	                               one dimension only: a multidimensional value is 22P02
//	other types pgtype knows       what its codec's DecodeValue returns
//	types pgtype does not know     string (text format), []byte (binary)
//
// Result values (Rows.Next) may be any Go value that pgtype can encode as the
// column's type, in both formats: the types above (pgtype.InfinityModifier
// included), plus int, int32 for
// int8, float64 for numeric, strings for uuid or numeric, and so on. nil is
// NULL. A value of type Text is taken as already in PostgreSQL's text
// output format. Text columns also accept numbers and bools. The client
// chooses text or binary per column; timestamptz text is rendered in the
// session's TimeZone, like PostgreSQL does. An array column's value is
// []any, each element encoded by its type's rules: text as array_out
// writes it ({a,"b c",NULL}), binary as one dimension with lower bound 1.
//
// # Goroutines and concurrency
//
// Server.Serve runs an accept loop. Each connection has one goroutine that
// runs the protocol, reads the socket between calls and makes every call
// into its Session (so a Session needs no locks). A call that runs longer
// than a few milliseconds gets a second goroutine that reads the socket
// meanwhile, which lets a client disconnect cancel the running query; what
// it reads ahead (pipelined messages) is handed back when the call ends.
// A CancelRequest arrives on a
// separate connection and cancels the context of the target connection's
// running call. Server.Close stops the accept loops, cancels every
// connection (clients get FATAL 57P01) and waits for all goroutines; handler
// calls must therefore return soon after their context is done. Server
// methods are safe to call concurrently.
package pgwire
