package sqlfront

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/pganalyze/pg_query_go/v6/parser"

	"github.com/minkdb/mink/buckets"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/sqltypes"
	"github.com/minkdb/mink/sqlfront/engine"
	"github.com/minkdb/mink/sqlfront/pgwire"
)

// Additional SQLSTATEs mink uses.
const (
	// codeUnavailable: a bucket is not being served right now (opening,
	// failing over). Transient; clients may retry.
	codeUnavailable = "57P03"
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
	var pe *parser.Error
	if errors.As(err, &pe) {
		return &pgwire.Error{Code: pgwire.CodeSyntaxError, Message: pe.Message, Position: int32(pe.Cursorpos)}
	}
	var ee *engine.Error
	if errors.As(err, &ee) {
		return &pgwire.Error{Code: ee.Code, Message: postgresMessage(ee.Code, ee.Message), Hint: ee.Hint, Position: int32(ee.Position), Err: err}
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
	case errors.Is(err, buckets.ErrUnavailable), errors.Is(err, buckets.ErrNotLeader):
		return &pgwire.Error{Code: codeUnavailable, Message: err.Error(), Hint: "The bucket is moving between nodes or opening; retry shortly.", Err: err}
	case errors.Is(err, catalog.ErrExists):
		return &pgwire.Error{Code: pgwire.CodeDuplicateTable, Message: err.Error(), Err: err}
	case errors.Is(err, catalog.ErrNotFound):
		return &pgwire.Error{Code: pgwire.CodeUndefinedTable, Message: err.Error(), Err: err}
	}
	return &pgwire.Error{Code: pgwire.CodeInternalError, Message: err.Error(), Err: err}
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
