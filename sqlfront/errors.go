package sqlfront

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/minkdb/mink/buckets"
	"github.com/minkdb/mink/buckets/s3stream"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/sqltypes"
	"github.com/minkdb/mink/sqlfront/engine"
	pg "github.com/minkdb/mink/sqlfront/pgtree"
	"github.com/minkdb/mink/sqlfront/pgwire"
)

// Additional SQLSTATEs mink uses.
const (
	// codeUnavailable: a bucket is not being served right now (opening,
	// failing over). Transient; clients may retry.
	codeUnavailable = "57P03"
	// codeInvalidObjectDefinition: a partition that does not fit its
	// parent (PostgreSQL's invalid_object_definition).
	codeInvalidObjectDefinition = "42P17"
)

func errorf(code, format string, args ...any) *pgwire.Error {
	return pgwire.Errorf(code, format, args...)
}

// toWire converts any error of the SQL layer into the *pgwire.Error the
// client sees, choosing the SQLSTATE PostgreSQL would use.
func toWire(err error) error {
	if err == nil {
		return nil
	}
	var we *pgwire.Error
	if errors.As(err, &we) {
		return we
	}
	var pe *pg.SyntaxError
	if errors.As(err, &pe) {
		code := pgwire.CodeSyntaxError
		switch {
		case strings.HasPrefix(pe.Message, "role name ") && strings.HasSuffix(pe.Message, " is reserved"):
			code = codeReservedName // the grammar refuses "public" and "none" as role names
		case pe.Message == "CREATE SCHEMA IF NOT EXISTS cannot include schema elements":
			code = pgwire.CodeFeatureNotSupported // the grammar's, as PostgreSQL's
		}
		return &pgwire.Error{Code: code, Message: pe.Message, Position: int32(pe.Cursorpos)}
	}
	var ee *engine.Error
	if errors.As(err, &ee) {
		code, msg, detail := postgresError(ee.Code, ee.Message)
		hint := ee.Hint
		if code == pgwire.CodeUndefinedFunction && strings.HasPrefix(ee.Message, "No function matches") {
			msg, hint = noMatchingFunction(msg)
		}
		if code == pgwire.CodeUndefinedTable {
			// The engine suggests from its own catalog, which holds
			// internal relations ("duckdb_constraints", "pg_views"):
			// PostgreSQL gives no hint here.
			hint = ""
		}
		return &pgwire.Error{Code: code, Message: msg, Detail: detail, Hint: hint, Position: int32(ee.Position), Err: err}
	}
	var ne *sqltypes.NotNullError
	if errors.As(err, &ne) {
		// Timestamptz values show in UTC here; paths that know the
		// session's zone convert with it themselves (notNullWire).
		return notNullWire(ne, time.UTC)
	}
	var te *sqltypes.Error
	if errors.As(err, &te) {
		return &pgwire.Error{Code: te.Code, Message: te.Message, Err: err}
	}
	switch {
	case errors.Is(err, context.Canceled):
		return &pgwire.Error{Code: pgwire.CodeQueryCanceled, Message: "canceling statement due to user request", Err: err}
	case errors.Is(err, context.DeadlineExceeded):
		return &pgwire.Error{Code: pgwire.CodeQueryCanceled, Message: "canceling statement due to statement timeout", Err: err}
	case errors.Is(err, buckets.ErrUnknownOutcome), errors.Is(err, s3stream.ErrUnknownOutcome):
		return &pgwire.Error{Code: "40003", Message: err.Error(),
			Hint: "The write may or may not have been stored; check before retrying.", Err: err}
	case errors.Is(err, s3stream.ErrCorrupt):
		// A stream object or WAL object that does not decode: the error
		// names it. Its rows are never served in part or guessed.
		return &pgwire.Error{Code: codeDataCorrupted, Message: err.Error(),
			Hint: "A stored object of the table is damaged; other tables are not affected. Restore the object from a backup.", Err: err}
	case errors.Is(err, buckets.ErrUnavailable), errors.Is(err, buckets.ErrNotLeader):
		return &pgwire.Error{Code: codeUnavailable, Message: err.Error(), Hint: "The bucket is moving between nodes or opening; retry shortly.", Err: err}
	case errors.Is(err, buckets.ErrNoSuchBucket):
		// The bucket's table or partition was dropped (DROP TABLE,
		// partition_retention) while the statement ran.
		return &pgwire.Error{Code: "40001", Message: err.Error() + " (its table or partition was dropped while the statement ran)",
			Hint: "Retry the statement.", Err: err}
	case errors.Is(err, catalog.ErrExists):
		return &pgwire.Error{Code: pgwire.CodeDuplicateTable, Message: err.Error(), Err: err}
	case errors.Is(err, catalog.ErrNotFound):
		return &pgwire.Error{Code: pgwire.CodeUndefinedTable, Message: err.Error(), Err: err}
	}
	return &pgwire.Error{Code: pgwire.CodeInternalError, Message: err.Error(), Err: err}
}

// notNullWire is PostgreSQL's error for Conform's NOT NULL violation, with
// the failing row in the detail and timestamptz values in loc.
func notNullWire(ne *sqltypes.NotNullError, loc *time.Location) *pgwire.Error {
	e := notNullViolation(ne.Table, ne.Column, ne.Columns, ne.Row, 0, loc)
	e.Err = ne
	return e
}

func unsupported(format string, args ...any) *pgwire.Error {
	return errorf(pgwire.CodeFeatureNotSupported, format, args...)
}

func undefinedTable(name string) *pgwire.Error {
	return errorf(pgwire.CodeUndefinedTable, "relation %q does not exist", name)
}

func wrapf(err error, format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, err)...)
}

var conversionError = regexp.MustCompile(`^Could not convert string '(.*)' to ([A-Z0-9_]+)`)

// duckTypeNames are PostgreSQL's names for DuckDB's type names in messages.
var duckTypeNames = map[string]string{
	"INT16": "smallint", "SMALLINT": "smallint", "INT32": "integer", "INTEGER": "integer", "INT64": "bigint", "BIGINT": "bigint",
	"FLOAT": "real", "DOUBLE": "double precision", "BOOL": "boolean", "BOOLEAN": "boolean", "DATE": "date",
	"TIMESTAMP": "timestamp without time zone", "TIMESTAMP WITH TIME ZONE": "timestamp with time zone",
	"UUID": "uuid", "INTERVAL": "interval", "TIME": "time without time zone", "DECIMAL": "numeric", "BLOB": "bytea",
}

// DuckDB's out-of-range messages, and the suffix it adds to errors of casts
// in an INSERT's evaluation query.
var (
	castOutOfRange   = regexp.MustCompile(`^Type \w+ with value (.*) can't be cast because the value is out of range for the destination type (\w+)`)
	integerOverflow  = regexp.MustCompile(`^Overflow (?:in \w+ of|on \w+\() ?(INT16|INT32|INT64)?`)
	decimalOverflow  = regexp.MustCompile(`^(?:Could not cast value .* to|Casting value ".*" to type|Could not convert string .* to) DECIMAL\((\d+),(\d+)\)`)
	stringOutOfRange = regexp.MustCompile(`^Could not convert string ['"](.*)['"] to (INT16|INT32|INT64)`)
	castSourceSuffix = regexp.MustCompile(` when casting from source column \w+$`)
)

// postgresError rewrites the engine's errors that clients and people
// recognise in PostgreSQL's wording, and picks PostgreSQL's SQLSTATE where
// DuckDB's differs.
func postgresError(code, msg string) (newCode, message, detail string) {
	msg = castSourceSuffix.ReplaceAllString(msg, "")
	switch code {
	case pgwire.CodeNumericValueOutOfRange:
		if m := decimalOverflow.FindStringSubmatch(msg); m != nil {
			p, _ := strconv.Atoi(m[1])
			sc, _ := strconv.Atoi(m[2])
			return code, "numeric field overflow", fmt.Sprintf("A field with precision %d, scale %d must round to an absolute value less than 10^%d.", p, sc, p-sc)
		}
		if m := stringOutOfRange.FindStringSubmatch(msg); m != nil {
			return code, fmt.Sprintf("value %q is out of range for type %s", m[1], duckTypeNames[m[2]]), ""
		}
		if m := castOutOfRange.FindStringSubmatch(msg); m != nil {
			switch t := duckTypeNames[m[2]]; m[2] {
			case "INT16", "INT32", "INT64":
				return code, t + " out of range", ""
			case "FLOAT", "DOUBLE":
				return code, fmt.Sprintf("%q is out of range for type %s", m[1], t), ""
			}
		}
		if m := integerOverflow.FindStringSubmatch(msg); m != nil {
			t := duckTypeNames[m[1]]
			if t == "" {
				t = "bigint" // abs(), negation: DuckDB does not name the type
			}
			return code, t + " out of range", ""
		}
	case pgwire.CodeInvalidTextRepresentation:
		message = postgresMessage(code, msg)
		if strings.HasPrefix(message, "invalid input syntax for type interval") {
			code = "22007" // PostgreSQL's code for bad interval text
		}
		return code, message, ""
	}
	return code, postgresMessage(code, msg), ""
}

var noFunctionMatch = regexp.MustCompile(`^No function matches the given name and argument types '([^(]+)\((.*)\)'`)

// noMatchingFunction words DuckDB's "No function matches … Candidate
// functions: …" (a list of DuckDB signatures over many lines) the way
// PostgreSQL does: "function f(integer) does not exist" or "operator does
// not exist: date + bigint", with PostgreSQL's hint.
func noMatchingFunction(msg string) (message, hint string) {
	m := noFunctionMatch.FindStringSubmatch(msg)
	if m == nil {
		first, _, _ := strings.Cut(msg, "\n")
		return first, ""
	}
	name := m[1]
	var args []string
	depth, start := 0, 0
	for i, r := range m[2] {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				args = append(args, m[2][start:i])
				start = i + 1
			}
		}
	}
	if strings.TrimSpace(m[2]) != "" {
		args = append(args, m[2][start:])
	}
	for i, a := range args {
		a = strings.TrimSpace(a)
		switch {
		case a == "INTEGER_LITERAL":
			a = "integer"
		case a == "STRING_LITERAL":
			a = "unknown"
		case a == "VARCHAR":
			a = "text"
		case duckTypeNames[a] != "":
			a = duckTypeNames[a]
		default:
			a = strings.ToLower(a)
		}
		args[i] = a
	}
	isOperator := strings.Trim(name, "+-*/<>=~!@#%^&|`?") == ""
	switch {
	case isOperator && len(args) == 2:
		return fmt.Sprintf("operator does not exist: %s %s %s", args[0], name, args[1]),
			"No operator matches the given name and argument types. You might need to add explicit type casts."
	case isOperator && len(args) == 1:
		return fmt.Sprintf("operator does not exist: %s %s", name, args[0]),
			"No operator matches the given name and argument type. You might need to add an explicit type cast."
	}
	return fmt.Sprintf("function %s(%s) does not exist", name, strings.Join(args, ", ")),
		"No function matches the given name and argument types. You might need to add explicit type casts."
}

// postgresMessage rewrites the engine's messages that clients and people
// recognise in PostgreSQL's wording.
func postgresMessage(code, msg string) string {
	if code == pgwire.CodeInvalidTextRepresentation {
		if m := conversionError.FindStringSubmatch(msg); m != nil {
			t := duckTypeNames[m[2]]
			if t == "" {
				t = strings.ToLower(m[2])
			}
			return fmt.Sprintf("invalid input syntax for type %s: %q", t, m[1])
		}
	}
	return msg
}
