package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// SQLSTATE codes the engine assigns. The names follow PostgreSQL's
// errcodes.txt.
const (
	CodeSyntaxError            = "42601"
	CodeSyntaxOrAccessRule     = "42000"
	CodeUndefinedTable         = "42P01"
	CodeUndefinedColumn        = "42703"
	CodeUndefinedFunction      = "42883"
	CodeUndefinedObject        = "42704"
	CodeUndefinedSchema        = "3F000"
	CodeDuplicateObject        = "42710"
	CodeAmbiguousColumn        = "42702"
	CodeGroupingError          = "42803"
	CodeDatatypeMismatch       = "42804"
	CodeIndeterminateDatatype  = "42P18"
	CodeInsufficientPrivilege  = "42501"
	CodeInvalidTextRepr        = "22P02"
	CodeInvalidDatetimeFormat  = "22007"
	CodeDatetimeFieldOverflow  = "22008"
	CodeNumericValueOutOfRange = "22003"
	CodeDivisionByZero         = "22012"
	CodeInvalidParameterValue  = "22023"
	CodeCardinalityViolation   = "21000"
	CodeNotNullViolation       = "23502"
	CodeForeignKeyViolation    = "23503"
	CodeUniqueViolation        = "23505"
	CodeCheckViolation         = "23514"
	CodeFeatureNotSupported    = "0A000"
	CodeOutOfMemory            = "53200"
	CodeQueryCanceled          = "57014"
	CodeSerializationFailure   = "40001"
	CodeInvalidTransaction     = "25000"
	CodeIOError                = "58030"
	CodeInternalError          = "XX000"
)

// Error is a failed statement, with the PostgreSQL SQLSTATE a client should
// see. Callers in the SQL front end convert it to a wire error.
type Error struct {
	Code    string // SQLSTATE
	Message string // the primary message, PostgreSQL-style where recognised
	Hint    string // e.g. DuckDB's "Did you mean …"
	// Position is the 1-based character offset in the statement text that
	// the error refers to, 0 if unknown (PostgreSQL's ErrorResponse P).
	Position int
	// DuckDBType is DuckDB's exception type ("Catalog", "Binder", …), empty
	// for errors that did not come from DuckDB.
	DuckDBType string
	// Err is the underlying Go error, if any: the context's error for a
	// cancelled statement, or the error a Source returned.
	Err error
}

func (e *Error) Error() string { return e.Message }

// Unwrap returns the underlying Go error, so that errors.Is(err,
// context.Canceled) holds for a cancelled statement.
func (e *Error) Unwrap() error { return e.Err }

// duckdbError is the JSON DuckDB produces for an error when errors_as_json
// is set (every Conn sets it).
type duckdbError struct {
	Type       string `json:"exception_type"`
	Message    string `json:"exception_message"`
	Subtype    string `json:"error_subtype"`
	Position   string `json:"position"`
	Name       string `json:"name"`
	EntryType  string `json:"type"`
	Candidates string `json:"candidates"`
}

// prefixRE matches the "<Type> Error: " prefix DuckDB puts on messages
// that are not JSON (errors raised before errors_as_json applies, and some
// parser errors, which are "Parser Error: {json}").
var prefixRE = regexp.MustCompile(`^([A-Za-z][A-Za-z ]*?) Error: `)

// noColumnRE matches DuckDB's error for an INSERT's target column a table
// does not have.
var noColumnRE = regexp.MustCompile(`^Table "([^"]*)" does not have a column with name "([^"]*)"`)

// noUpdateColumnRE matches DuckDB's error for an UPDATE's SET of a column
// the table does not have.
var noUpdateColumnRE = regexp.MustCompile(`^Referenced update column (.+) not found in table!`)

// insertValuesRE matches DuckDB's error for an INSERT whose rows have
// another number of values than the table columns (m[1]) it writes.
var insertValuesRE = regexp.MustCompile(`^table \S+ has (\d+) columns but (\d+) values were supplied`)

// parseDuckDBError splits DuckDB's error text into its parts.
func parseDuckDBError(text string) duckdbError {
	var de duckdbError
	body := text
	if m := prefixRE.FindStringSubmatch(text); m != nil {
		de.Type = m[1]
		body = text[len(m[0]):]
	}
	if strings.HasPrefix(body, "{") {
		var js duckdbError
		if err := json.Unmarshal([]byte(body), &js); err == nil && js.Message != "" {
			if js.Type == "" {
				js.Type = de.Type
			}
			return js
		}
	}
	de.Message = body
	return de
}

// newDuckDBError maps DuckDB's error text for statement query to an *Error.
func newDuckDBError(query, text string) *Error {
	de := parseDuckDBError(text)
	msg := de.Message
	e := &Error{DuckDBType: de.Type}
	// DuckDB appends "Did you mean …" and, outside JSON mode, the
	// statement with a caret; keep the first line as the message.
	if i := strings.Index(msg, "\nDid you mean"); i >= 0 {
		e.Hint = strings.TrimSpace(msg[i+1:])
		msg = msg[:i]
	}
	if i := strings.Index(msg, "\n\nLINE "); i >= 0 {
		msg = msg[:i]
	}
	msg = strings.TrimSpace(msg)
	if p, err := strconv.Atoi(de.Position); err == nil && p >= 0 && p <= len(query) {
		e.Position = utf8.RuneCountInString(query[:p]) + 1
	}
	e.Code, e.Message = classify(de, msg)
	return e
}

// Raised is the text to pass to the engine's error() for a statement to
// fail with SQLSTATE code and PostgreSQL's message msg: sqlfront's
// rewrites use it for errors PostgreSQL raises that DuckDB would not (the
// error is raised when the engine evaluates the call).
func Raised(code, msg string) string { return "[SQLSTATE " + code + "] " + msg }

var (
	raisedRE   = regexp.MustCompile(`(?s)^\[SQLSTATE ([0-9A-Z]{5})\] (.*)$`)
	quotedRE   = regexp.MustCompile(`"([^"]*)"`)
	withNameRE = regexp.MustCompile(`with name (\S+) does not exist`)
)

// firstQuoted returns the first double-quoted word in s.
func firstQuoted(s string) string {
	if m := quotedRE.FindStringSubmatch(s); m != nil {
		return m[1]
	}
	return ""
}

var convertStringRE = regexp.MustCompile(`^Could not convert string ['"](.*)['"] to (\w+)`)

// numberOutOfRange reports whether msg is DuckDB's failure to convert a
// well-formed number to a numeric type, which can only be because it is out
// of the type's range ('300' to INT8, '1e30' to DECIMAL(38,10)).
func numberOutOfRange(msg string) bool {
	m := convertStringRE.FindStringSubmatch(msg)
	if m == nil {
		return false
	}
	text, target := strings.TrimSpace(m[1]), m[2]
	switch {
	case target == "DECIMAL":
		_, err := strconv.ParseFloat(text, 64)
		return err == nil
	case strings.HasPrefix(target, "INT") || strings.HasPrefix(target, "UINT"):
		_, err := strconv.ParseInt(text, 10, 64)
		return err == nil || errors.Is(err, strconv.ErrRange)
	}
	return false
}

// classify picks a SQLSTATE for a DuckDB error and, where PostgreSQL words
// the same error differently and clients or users may match on it, a
// PostgreSQL-style message.
func classify(de duckdbError, msg string) (code, message string) {
	if m := raisedRE.FindStringSubmatch(msg); m != nil {
		return m[1], m[2]
	}
	lower := strings.ToLower(msg)
	name := de.Name
	if name == "" {
		if m := withNameRE.FindStringSubmatch(msg); m != nil {
			name = m[1]
		} else {
			name = firstQuoted(msg)
		}
	}
	// DuckDB quotes a qualified name it could not find ("foo.bar"); the
	// messages below quote it once, as PostgreSQL does.
	if len(name) >= 2 && name[0] == '"' && name[len(name)-1] == '"' {
		name = name[1 : len(name)-1]
	}
	switch de.Type {
	case "Parser", "Catalog", "Binder", "Invalid Input":
		if strings.Contains(lower, "not supported") || strings.Contains(lower, "not implemented") || strings.Contains(lower, "unimplemented") {
			return CodeFeatureNotSupported, msg
		}
	}
	switch de.Type {
	case "Parser", "Syntax":
		return CodeSyntaxError, msg
	case "Catalog":
		switch {
		case strings.HasPrefix(msg, "Table with name") || strings.HasPrefix(msg, "View with name") ||
			(de.Subtype == "MISSING_ENTRY" && (de.EntryType == "Table" || de.EntryType == "View")):
			return CodeUndefinedTable, fmt.Sprintf(`relation "%s" does not exist`, name)
		case strings.Contains(msg, "Function with name"):
			return CodeUndefinedFunction, fmt.Sprintf("function %s does not exist", name)
		case strings.HasPrefix(msg, "Schema with name") || strings.HasPrefix(msg, "Catalog with name"):
			return CodeUndefinedSchema, fmt.Sprintf(`schema "%s" does not exist`, name)
		case strings.HasPrefix(msg, "Type with name"):
			return CodeUndefinedObject, fmt.Sprintf(`type "%s" does not exist`, name)
		case strings.Contains(lower, "already exists"):
			return CodeDuplicateObject, msg
		}
		return CodeUndefinedObject, msg
	case "Binder":
		if m := noColumnRE.FindStringSubmatch(msg); m != nil {
			return CodeUndefinedColumn, fmt.Sprintf("column %q of relation %q does not exist", m[2], m[1])
		}
		if m := noUpdateColumnRE.FindStringSubmatch(msg); m != nil {
			return CodeUndefinedColumn, fmt.Sprintf("column %q does not exist", m[1])
		}
		if m := insertValuesRE.FindStringSubmatch(msg); m != nil {
			cols, _ := strconv.Atoi(m[1])
			vals, _ := strconv.Atoi(m[2])
			if vals > cols {
				return CodeSyntaxError, "INSERT has more expressions than target columns"
			}
			return CodeSyntaxError, "INSERT has more target columns than expressions"
		}
		switch {
		case de.Subtype == "COLUMN_NOT_FOUND" || strings.HasPrefix(msg, "Referenced column") ||
			strings.Contains(msg, "does not have a column named"):
			return CodeUndefinedColumn, fmt.Sprintf("column %q does not exist", name)
		case strings.HasPrefix(msg, "Referenced table"):
			return CodeUndefinedTable, fmt.Sprintf("missing FROM-clause entry for table %q", name)
		case de.Subtype == "NO_MATCHING_FUNCTION" || strings.HasPrefix(msg, "No function matches") ||
			strings.HasPrefix(msg, "Could not choose a best candidate function"):
			return CodeUndefinedFunction, msg
		case strings.HasPrefix(msg, "Ambiguous reference"):
			return CodeAmbiguousColumn, msg
		case strings.Contains(msg, "must appear in the GROUP BY clause"):
			return CodeGroupingError, msg
		case strings.HasPrefix(msg, "Cannot compare values") || strings.HasPrefix(msg, "Cannot mix values") ||
			strings.Contains(msg, "implicitly cast"):
			return CodeDatatypeMismatch, msg
		case strings.Contains(lower, "could not determine type"):
			return CodeIndeterminateDatatype, msg
		}
		return CodeSyntaxOrAccessRule, msg
	case "Conversion":
		switch {
		case strings.Contains(lower, "date field value out of range") || strings.Contains(lower, "time field value out of range"):
			return CodeDatetimeFieldOverflow, msg
		case strings.Contains(lower, "out of range") || strings.HasPrefix(msg, "Could not cast value"):
			return CodeNumericValueOutOfRange, msg
		case numberOutOfRange(msg):
			return CodeNumericValueOutOfRange, msg
		case strings.Contains(lower, "field format") || strings.Contains(lower, "date format") ||
			strings.Contains(lower, "timestamp format") || strings.Contains(lower, "time format"):
			return CodeInvalidDatetimeFormat, msg
		}
		return CodeInvalidTextRepr, msg
	case "Out of Range", "Decimal":
		return CodeNumericValueOutOfRange, msg
	case "Divide by Zero":
		return CodeDivisionByZero, "division by zero"
	case "Invalid Input":
		switch {
		case strings.Contains(lower, "division by zero") || strings.Contains(lower, "divide by zero"):
			return CodeDivisionByZero, "division by zero"
		case strings.HasPrefix(msg, "More than one row returned by a subquery"):
			return CodeCardinalityViolation, "more than one row returned by a subquery used as an expression"
		}
		return CodeInvalidParameterValue, msg
	case "Constraint":
		switch {
		case strings.Contains(msg, "NOT NULL constraint"):
			return CodeNotNullViolation, msg
		case strings.Contains(lower, "duplicate key") || strings.Contains(lower, "unique constraint") ||
			strings.Contains(lower, "primary key constraint"):
			return CodeUniqueViolation, msg
		case strings.Contains(lower, "foreign key"):
			return CodeForeignKeyViolation, msg
		case strings.Contains(lower, "check constraint"):
			return CodeCheckViolation, msg
		}
		return CodeCheckViolation, msg
	case "Mismatch Type", "Invalid type":
		return CodeDatatypeMismatch, msg
	case "Not implemented", "Missing Extension", "Extension Autoloading":
		return CodeFeatureNotSupported, msg
	case "Out of Memory":
		return CodeOutOfMemory, msg
	case "Permission":
		return CodeInsufficientPrivilege, msg
	case "INTERRUPT":
		return CodeQueryCanceled, "canceling statement due to user request"
	case "TransactionContext", "Transaction":
		if strings.Contains(lower, "conflict") {
			return CodeSerializationFailure, msg
		}
		return CodeInvalidTransaction, msg
	case "Parameter Not Resolved":
		return CodeIndeterminateDatatype, msg
	case "Parameter Not Allowed":
		return CodeSyntaxError, msg
	case "IO":
		return CodeIOError, msg
	}
	if strings.Contains(lower, "division by zero") {
		return CodeDivisionByZero, "division by zero"
	}
	return CodeInternalError, msg
}
