package sqltypes

import "fmt"

// SQLSTATE codes this package returns.
const (
	codeSyntaxError           = "42601"
	codeUndefinedObject       = "42704"
	codeInvalidParameterValue = "22023"
	codeFeatureNotSupported   = "0A000"
	codeStringDataRightTrunc  = "22001"
	codeNotNullViolation      = "23502"
	codeInvalidTextRepr       = "22P02"
	codeDatatypeMismatch      = "42804"
)

// Error is an error with the PostgreSQL SQLSTATE a client should see. Callers
// in the SQL front end turn it into a wire error.
type Error struct {
	Code    string // SQLSTATE, e.g. "42704"
	Message string // PostgreSQL-style message, lower case, no trailing period
}

func (e *Error) Error() string { return e.Message }

func errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}
