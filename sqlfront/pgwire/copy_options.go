package pgwire

import (
	"context"
	"fmt"
	"strings"
)

// CopyFormat is the data format of a COPY.
type CopyFormat int

const (
	CopyText   CopyFormat = iota // PostgreSQL's text format: tab-separated, backslash escapes, \N for NULL
	CopyCSV                      // comma-separated values with quoting
	CopyBinary                   // PGCOPY binary format
)

func (f CopyFormat) String() string {
	switch f {
	case CopyText:
		return "text"
	case CopyCSV:
		return "csv"
	case CopyBinary:
		return "binary"
	}
	return fmt.Sprintf("CopyFormat(%d)", int(f))
}

// CopyOptions are the options of a COPY statement. The zero value is the text
// format with its defaults. Build it with Set, one call per option of the
// statement, then call Validate (the server validates again before it starts
// the COPY).
type CopyOptions struct {
	Format CopyFormat
	// Delimiter separates columns: tab in text, ',' in csv when 0.
	Delimiter byte
	// Null is the string that stands for NULL: `\N` in text and the
	// unquoted empty string in csv when NullSet is false.
	Null    string
	NullSet bool
	// Header: COPY FROM skips the first line; COPY TO writes the column
	// names. HeaderMatch (HEADER MATCH) makes COPY FROM check that the first
	// line names the columns, in order.
	Header      bool
	HeaderMatch bool
	// Quote and Escape are the csv quote character ('"' when 0) and the
	// character that escapes a quote inside a quoted value (Quote when 0).
	Quote  byte
	Escape byte

	seen map[string]bool // options already given, to reject repeats
}

// Set applies one option of a COPY statement's option list, by its
// PostgreSQL name (FORMAT, DELIMITER, NULL, HEADER, QUOTE, ESCAPE; ENCODING
// 'UTF8' and FREEZE are accepted and ignored). value is the option's argument
// as written, or "" when the option has none (HEADER alone means true).
// pg_query turns the legacy syntax (WITH CSV HEADER, BINARY) into the same
// option names. Errors are *Error with PostgreSQL's SQLSTATE.
func (o *CopyOptions) Set(name, value string) error {
	name = strings.ToLower(name)
	if o.seen == nil {
		o.seen = make(map[string]bool)
	}
	if o.seen[name] {
		return Errorf(CodeSyntaxError, "conflicting or redundant options")
	}
	o.seen[name] = true
	switch name {
	case "format":
		switch strings.ToLower(value) {
		case "text":
			o.Format = CopyText
		case "csv":
			o.Format = CopyCSV
		case "binary":
			o.Format = CopyBinary
		default:
			return Errorf(CodeInvalidParameterValue, "COPY format %q not recognized", value)
		}
	case "delimiter":
		if len(value) != 1 {
			return Errorf(CodeFeatureNotSupported, "COPY delimiter must be a single one-byte character")
		}
		o.Delimiter = value[0]
	case "null":
		o.Null, o.NullSet = value, true
	case "header":
		switch strings.ToLower(value) {
		case "", "true", "on", "1":
			o.Header = true
		case "false", "off", "0":
			o.Header = false
		case "match":
			o.Header, o.HeaderMatch = true, true
		default:
			return Errorf(CodeInvalidParameterValue, "header requires a Boolean value or \"match\"")
		}
	case "quote":
		if len(value) != 1 {
			return Errorf(CodeFeatureNotSupported, "COPY quote must be a single one-byte character")
		}
		o.Quote = value[0]
	case "escape":
		if len(value) != 1 {
			return Errorf(CodeFeatureNotSupported, "COPY escape must be a single one-byte character")
		}
		o.Escape = value[0]
	case "encoding":
		if e := strings.ToUpper(strings.ReplaceAll(value, "-", "")); e != "UTF8" && e != "UNICODE" {
			return Errorf(CodeFeatureNotSupported, "COPY encoding %q is not supported: only UTF8", value)
		}
	case "freeze":
	case "oids":
		return Errorf(CodeFeatureNotSupported, "COPY with OIDS is not supported")
	case "force_quote", "force_not_null", "force_null", "on_error", "default", "log_verbosity", "reject_limit":
		return Errorf(CodeFeatureNotSupported, "COPY option %s is not supported", strings.ToUpper(name))
	default:
		return Errorf(CodeSyntaxError, "option %q not recognized", name)
	}
	return nil
}

// Validate checks the options against each other, like PostgreSQL's
// ProcessCopyOptions. It does not fill in defaults; the server does that
// when it runs the COPY.
func (o CopyOptions) Validate() error {
	if o.Format == CopyBinary {
		switch {
		case o.Delimiter != 0:
			return Errorf(CodeSyntaxError, "cannot specify DELIMITER in BINARY mode")
		case o.NullSet:
			return Errorf(CodeSyntaxError, "cannot specify NULL in BINARY mode")
		case o.Header:
			return Errorf(CodeFeatureNotSupported, "cannot specify HEADER in BINARY mode")
		}
	}
	if o.Format != CopyCSV {
		if o.Quote != 0 {
			return Errorf(CodeFeatureNotSupported, "COPY QUOTE requires CSV mode")
		}
		if o.Escape != 0 {
			return Errorf(CodeFeatureNotSupported, "COPY ESCAPE requires CSV mode")
		}
	}
	if o.Format == CopyBinary {
		return nil
	}
	d := o.withDefaults()
	if d.Delimiter == '\r' || d.Delimiter == '\n' {
		return Errorf(CodeInvalidParameterValue, "COPY delimiter cannot be newline or carriage return")
	}
	if strings.ContainsAny(d.Null, "\r\n") {
		return Errorf(CodeInvalidParameterValue, "COPY null representation cannot use newline or carriage return")
	}
	if d.Format == CopyText && strings.IndexByte(`\.abcdefghijklmnopqrstuvwxyz0123456789`, d.Delimiter) >= 0 {
		return Errorf(CodeInvalidParameterValue, "COPY delimiter cannot be %q", string(d.Delimiter))
	}
	if d.Format == CopyCSV {
		if d.Delimiter == d.Quote {
			return Errorf(CodeInvalidParameterValue, "COPY delimiter and quote must be different")
		}
		if strings.IndexByte(d.Null, d.Delimiter) >= 0 {
			return Errorf(CodeInvalidParameterValue, "COPY delimiter character must not appear in the NULL specification")
		}
		if strings.IndexByte(d.Null, d.Quote) >= 0 {
			return Errorf(CodeFeatureNotSupported, "CSV quote character must not appear in the NULL specification")
		}
	} else if strings.IndexByte(d.Null, d.Delimiter) >= 0 {
		return Errorf(CodeInvalidParameterValue, "COPY delimiter character must not appear in the NULL specification")
	}
	return nil
}

// withDefaults fills in the format's defaults for unset options.
func (o CopyOptions) withDefaults() CopyOptions {
	switch o.Format {
	case CopyText:
		if o.Delimiter == 0 {
			o.Delimiter = '\t'
		}
		if !o.NullSet {
			o.Null = `\N`
		}
	case CopyCSV:
		if o.Delimiter == 0 {
			o.Delimiter = ','
		}
		if o.Quote == 0 {
			o.Quote = '"'
		}
		if o.Escape == 0 {
			o.Escape = o.Quote
		}
	}
	return o
}

// CopyIn asks the server to receive COPY FROM STDIN data. The server sends
// CopyInResponse, parses the client's data in the requested format, decodes
// each field with its column's type, and hands the rows to Sink in batches.
type CopyIn struct {
	// Table names the target in error context ("COPY t, line 3").
	Table string
	// Columns are the target columns in the order the data has them (the
	// COPY column list, or all columns). TypeOID decides how a field is
	// decoded (see the package documentation); Name is used by HEADER
	// MATCH.
	Columns []Column
	Options CopyOptions
	// BatchRows is the most rows passed to one WriteRows call; 0 means
	// 1024.
	BatchRows int
	Sink      CopySink
}

// CopySink receives the rows of a COPY FROM STDIN.
//
// Contract: zero or more WriteRows calls, in input order, then exactly one
// of Commit or Abort, last. Commit is called only after the whole input has
// been received and every row parsed and decoded without error, and after
// every WriteRows returned nil; the COPY succeeds only if Commit returns nil.
// Abort is called instead when anything failed: a row that does not parse
// (the client gets 22P02 or 22P04 with "COPY t, line N" as context), a
// WriteRows error, CopyFail from the client (57014), a cancel request, or a
// disconnect. A sink must therefore stage rows and make them visible only in
// Commit, so that a COPY with one bad row stores none of its rows.
type CopySink interface {
	// WriteRows stages a batch of rows. The batch and its slices belong to
	// the sink after the call. Returning an error fails the COPY; the sink
	// may set Where on an *Error, using batch.Lines, to point at a row
	// ("COPY t, line 3").
	WriteRows(ctx context.Context, batch *CopyBatch) error
	// Commit makes the staged rows durable and visible. rows is the total
	// number of rows passed to WriteRows. If Commit fails, the sink itself
	// discards the staged rows; Abort is not called.
	Commit(ctx context.Context, rows int64) error
	// Abort discards the staged rows. cause is the error the client is
	// sent. ctx is not cancelled by the cancel request that caused the
	// abort, so cleanup I/O can run.
	Abort(ctx context.Context, cause error)
}

// CopyBatch is a batch of decoded COPY FROM rows.
type CopyBatch struct {
	// Rows holds one []any per row with one value per column: nil for
	// NULL, else the Go value of the column's type.
	Rows [][]any
	// Lines holds the input line number of each row, as PostgreSQL counts
	// them for error context: physical lines from 1, the header included,
	// so a csv value with an embedded newline advances the count. In binary
	// format it is the tuple number.
	Lines []int64
}

// CopyOut asks the server to send Rows to the client as COPY TO STDOUT data.
type CopyOut struct {
	Options CopyOptions
	Rows    Rows // its Columns name the header line and type the values
}
