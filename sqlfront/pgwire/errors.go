package pgwire

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgproto3"
)

// SQLSTATE codes the server and its handlers use most. The names follow
// PostgreSQL's errcodes.txt.
const (
	CodeSuccessfulCompletion              = "00000"
	CodeWarning                           = "01000"
	CodeConnectionException               = "08000"
	CodeProtocolViolation                 = "08P01"
	CodeFeatureNotSupported               = "0A000"
	CodeInvalidTransactionState           = "25000"
	CodeActiveSQLTransaction              = "25001"
	CodeNoActiveSQLTransaction            = "25P01"
	CodeInFailedSQLTransaction            = "25P02"
	CodeInvalidSQLStatementName           = "26000"
	CodeInvalidAuthorizationSpecification = "28000"
	CodeInvalidPassword                   = "28P01"
	CodeInvalidCursorName                 = "34000"
	CodeInvalidCatalogName                = "3D000"
	CodeInvalidSchemaName                 = "3F000"
	CodeSerializationFailure              = "40001"
	CodeDeadlockDetected                  = "40P01"
	CodeSyntaxError                       = "42601"
	CodeInvalidName                       = "42602"
	CodeInsufficientPrivilege             = "42501"
	CodeUndefinedColumn                   = "42703"
	CodeUndefinedFunction                 = "42883"
	CodeUndefinedTable                    = "42P01"
	CodeUndefinedParameter                = "42P02"
	CodeUndefinedObject                   = "42704"
	CodeDuplicateColumn                   = "42701"
	CodeDuplicateCursor                   = "42P03"
	CodeDuplicatePreparedStatement        = "42P05"
	CodeDuplicateTable                    = "42P07"
	CodeDuplicateSchema                   = "42P06"
	CodeWrongObjectType                   = "42809"
	CodeDuplicateObject                   = "42710"
	CodeAmbiguousColumn                   = "42702"
	CodeDatatypeMismatch                  = "42804"
	CodeInvalidTextRepresentation         = "22P02"
	CodeNullValueNotAllowed               = "22004"
	CodeInvalidBinaryRepresentation       = "22P03"
	CodeBadCopyFileFormat                 = "22P04"
	CodeNumericValueOutOfRange            = "22003"
	CodeInvalidDatetimeFormat             = "22007"
	CodeDatetimeFieldOverflow             = "22008"
	CodeDivisionByZero                    = "22012"
	CodeInvalidParameterValue             = "22023"
	CodeCharacterNotInRepertoire          = "22021"
	CodeStringDataRightTruncation         = "22001"
	CodeNotNullViolation                  = "23502"
	CodeForeignKeyViolation               = "23503"
	CodeUniqueViolation                   = "23505"
	CodeCheckViolation                    = "23514"
	CodeProgramLimitExceeded              = "54000"
	CodeTooManyConnections                = "53300"
	CodeOutOfMemory                       = "53200"
	CodeQueryCanceled                     = "57014"
	CodeAdminShutdown                     = "57P01"
	CodeObjectNotInPrerequisiteState      = "55000"
	CodeInternalError                     = "XX000"
)

// Severities of an Error.
const (
	SeverityError   = "ERROR"
	SeverityFatal   = "FATAL"
	SeverityWarning = "WARNING"
	SeverityNotice  = "NOTICE"
)

// Error is an error the client receives as an ErrorResponse (or, with
// severity NOTICE or WARNING, as a NoticeResponse). A handler returns an
// *Error, possibly wrapped, to choose the SQLSTATE and message; any other
// error reaches the client as XX000 (internal_error) with the error's text.
type Error struct {
	Severity string // SeverityError when empty
	Code     string // SQLSTATE; CodeInternalError when empty
	Message  string
	Detail   string
	Hint     string
	// Position is the 1-based character (not byte) position in the
	// statement text that the error refers to, or 0.
	Position int32
	// Where is the context, such as "COPY t, line 3, column a: \"x\"".
	Where          string
	SchemaName     string
	TableName      string
	ColumnName     string
	DataTypeName   string
	ConstraintName string

	// Err is the underlying cause, for logs; it is not sent to the client.
	Err error
}

// Errorf returns an *Error with severity ERROR.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Severity: SeverityError, Code: code, Message: fmt.Sprintf(format, args...)}
}

func (e *Error) Error() string {
	sev := e.Severity
	if sev == "" {
		sev = SeverityError
	}
	return fmt.Sprintf("%s: %s (SQLSTATE %s)", sev, e.Message, e.Code)
}

func (e *Error) Unwrap() error { return e.Err }

// response converts e to the wire message.
func (e *Error) response() *pgproto3.ErrorResponse {
	sev, code := e.Severity, e.Code
	if sev == "" {
		sev = SeverityError
	}
	if code == "" {
		code = CodeInternalError
	}
	return &pgproto3.ErrorResponse{
		Severity:            sev,
		SeverityUnlocalized: sev,
		Code:                code,
		Message:             e.Message,
		Detail:              e.Detail,
		Hint:                e.Hint,
		Position:            e.Position,
		Where:               e.Where,
		SchemaName:          e.SchemaName,
		TableName:           e.TableName,
		ColumnName:          e.ColumnName,
		DataTypeName:        e.DataTypeName,
		ConstraintName:      e.ConstraintName,
	}
}

// notice converts e to a NoticeResponse.
func (e *Error) notice() *pgproto3.NoticeResponse {
	n := pgproto3.NoticeResponse(*e.response())
	if e.Severity == "" {
		n.Severity, n.SeverityUnlocalized = SeverityNotice, SeverityNotice
	}
	if e.Code == "" {
		n.Code = CodeSuccessfulCompletion
	}
	return &n
}

var (
	// errCanceledByUser is the cancel cause of a query stopped by a
	// CancelRequest.
	errCanceledByUser = errors.New("canceling statement due to user request")
	// errServerClosing is the cancel cause of every connection when
	// Server.Close runs.
	errServerClosing = errors.New("server closing")
	// errClientGone is the cancel cause when the client's socket reached
	// EOF or failed.
	errClientGone = errors.New("client disconnected")
)

// canceled replaces err with PostgreSQL's error for a cancelled call when
// ctx, the context the failing call ran under, was cancelled by a
// CancelRequest or by Server.Close, whatever the handler returned.
func canceled(ctx context.Context, err error) error {
	if ctx.Err() == nil {
		return err
	}
	switch context.Cause(ctx) {
	case errCanceledByUser:
		return &Error{Severity: SeverityError, Code: CodeQueryCanceled, Message: "canceling statement due to user request", Err: err}
	case errServerClosing:
		return &Error{Severity: SeverityFatal, Code: CodeAdminShutdown, Message: "terminating connection due to administrator command", Err: err}
	}
	return err
}

// toError converts an error from a handler, or from the server's own
// processing, into the *Error the client is sent: the *Error it wraps, or
// XX000 with the error's text.
func toError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Severity: SeverityError, Code: CodeInternalError, Message: err.Error(), Err: err}
}
