package pgwire

import (
	"bytes"
	"fmt"
)

// copyParser turns the data of a COPY FROM into rows of raw fields. It is fed
// CopyData payloads, which may split lines and tuples anywhere, and emits
// each complete row. A field is nil for NULL, else the field's bytes: text
// with escapes and quotes removed, or a binary value. The fields slice and
// its contents are only valid during the emit call.
type copyParser interface {
	feed(data []byte, emit emitFunc) error
	// finish is called when the client sent CopyDone; a last line without a
	// line ending is a row.
	finish(emit emitFunc) error
	// line is the number of the line (tuple, in binary) being parsed, for
	// error context.
	line() int64
}

type emitFunc func(line int64, fields [][]byte) error

// newCopyParser returns the parser for opts (defaults filled in) and the
// given target columns. A row (a line, or a binary tuple) longer than
// maxRow bytes fails with 54000, so that input without line breaks cannot
// grow the buffer without bound; 0 means no limit.
func newCopyParser(opts CopyOptions, columns []Column, maxRow int) copyParser {
	if opts.Format == CopyBinary {
		return &binaryParser{ncols: len(columns), maxRow: maxRow}
	}
	names := make([]string, len(columns))
	for i, c := range columns {
		names[i] = c.Name
	}
	return &textParser{opts: opts, csv: opts.Format == CopyCSV, names: names, header: opts.Header, maxRow: maxRow}
}

func rowTooLong(line int64, maxRow int) error {
	return &lineError{line: line, err: Errorf(CodeProgramLimitExceeded, "COPY row is longer than the limit of %d bytes", maxRow)}
}

// eolStyle is the line ending of a text or csv COPY. Like PostgreSQL, the
// parser takes it from the first line and requires every line to use it.
type eolStyle int

const (
	eolUnknown eolStyle = iota
	eolNL
	eolCR
	eolCRNL
)

// textParser parses the text and csv formats, following PostgreSQL's
// CopyReadLineText, CopyReadAttributesText and CopyReadAttributesCSV.
type textParser struct {
	opts   CopyOptions // with defaults
	csv    bool
	names  []string // column names, for the field count and HEADER MATCH
	header bool     // the next line is the header
	maxRow int

	pending []byte // input not yet parsed into lines
	lineNo  int64  // physical lines consumed
	eol     eolStyle
	done    bool // saw the end-of-data marker `\.`

	// Reused per row.
	spans  []fieldSpan
	decBuf []byte
	fields [][]byte
}

type fieldSpan struct {
	start, end int // in decBuf
	null       bool
}

// emptyField is the empty, non-NULL field.
var emptyField = []byte{}

// errNeedMore means the buffered input ends inside a line.
var errNeedMore = fmt.Errorf("need more input")

func (p *textParser) line() int64 { return p.lineNo + 1 }

func (p *textParser) feed(data []byte, emit emitFunc) error {
	if p.done {
		return nil
	}
	p.pending = append(p.pending, data...)
	if err := p.parse(false, emit); err != nil {
		return err
	}
	if p.maxRow > 0 && len(p.pending) > p.maxRow {
		return rowTooLong(p.lineNo+1, p.maxRow)
	}
	return nil
}

func (p *textParser) finish(emit emitFunc) error {
	if p.done {
		return nil
	}
	return p.parse(true, emit)
}

func (p *textParser) parse(atEOF bool, emit emitFunc) error {
	pos := 0
	defer func() {
		n := copy(p.pending, p.pending[pos:])
		p.pending = p.pending[:n]
	}()
	for pos < len(p.pending) && !p.done {
		end, next, embedded, err := p.scanLine(p.pending[pos:], atEOF)
		if err == errNeedMore {
			return nil
		}
		if err != nil {
			if _, ok := err.(*lineError); !ok {
				err = &lineError{line: p.lineNo + 1, err: err}
			}
			return err
		}
		line := p.pending[pos : pos+end]
		pos += next
		startLine := p.lineNo + 1
		p.lineNo += 1 + embedded
		if len(line) == 2 && line[0] == '\\' && line[1] == '.' {
			// End-of-data marker; PostgreSQL ignores what follows.
			p.done = true
			return nil
		}
		if err := p.splitFields(line); err != nil {
			return &lineError{line: startLine, err: err}
		}
		if p.header {
			p.header = false
			if p.opts.HeaderMatch {
				if err := p.matchHeader(); err != nil {
					return &lineError{line: startLine, err: err}
				}
			}
			continue
		}
		if err := p.checkFieldCount(); err != nil {
			return &lineError{line: startLine, err: err}
		}
		if err := emit(startLine, p.fields); err != nil {
			return err
		}
	}
	return nil
}

// scanLine finds the end of the first line of b. end is the length of the
// line's content, next the offset of the following line, embedded the number
// of line breaks inside csv quotes. It returns errNeedMore when b holds no
// complete line and more input may follow.
func (p *textParser) scanLine(b []byte, atEOF bool) (end, next int, embedded int64, err error) {
	inQuote := false
	quote, escape := p.opts.Quote, p.opts.Escape
	for i := 0; i < len(b); i++ {
		c := b[i]
		if p.csv {
			if inQuote {
				switch {
				case c == escape && escape != quote:
					if i+1 >= len(b) {
						if atEOF {
							continue
						}
						return 0, 0, 0, errNeedMore
					}
					if b[i+1] == quote || b[i+1] == escape {
						i++
					}
					continue
				case c == quote:
					if i+1 >= len(b) && !atEOF {
						return 0, 0, 0, errNeedMore
					}
					if escape == quote && i+1 < len(b) && b[i+1] == quote {
						i++ // doubled quote: a literal quote
						continue
					}
					inQuote = false
					continue
				case c == '\n' || c == '\r':
					// A line break inside a quoted value is data; count it
					// as PostgreSQL does, once per line break.
					if c == '\n' || i+1 >= len(b) || b[i+1] != '\n' {
						embedded++
					}
				}
				continue
			}
			if c == quote {
				inQuote = true
				continue
			}
		} else if c == '\\' {
			// A backslash escapes the next byte, even a line break.
			if i+1 >= len(b) {
				if atEOF {
					return len(b), len(b), 0, nil
				}
				return 0, 0, 0, errNeedMore
			}
			i++
			continue
		}
		switch c {
		case '\n':
			switch p.eol {
			case eolUnknown:
				p.eol = eolNL
			case eolCR, eolCRNL:
				return 0, 0, 0, newlineError(p.csv, "literal newline found in data", "newline")
			}
			return i, i + 1, embedded, nil
		case '\r':
			if i+1 >= len(b) && !atEOF {
				return 0, 0, 0, errNeedMore
			}
			crnl := i+1 < len(b) && b[i+1] == '\n'
			switch p.eol {
			case eolUnknown:
				if crnl {
					p.eol = eolCRNL
				} else {
					p.eol = eolCR
				}
			case eolNL:
				return 0, 0, 0, newlineError(p.csv, "literal carriage return found in data", "carriage return")
			case eolCR:
				return i, i + 1, embedded, nil
			}
			if p.eol == eolCRNL {
				if !crnl {
					return 0, 0, 0, newlineError(p.csv, "literal carriage return found in data", "carriage return")
				}
				return i, i + 2, embedded, nil
			}
			return i, i + 1, embedded, nil
		}
	}
	if inQuote {
		if atEOF {
			return 0, 0, 0, &lineError{line: p.lineNo + 1, err: Errorf(CodeBadCopyFileFormat, "unterminated CSV quoted field")}
		}
		return 0, 0, 0, errNeedMore
	}
	if atEOF {
		return len(b), len(b), embedded, nil
	}
	return 0, 0, 0, errNeedMore
}

func newlineError(csv bool, msg, what string) error {
	e := Errorf(CodeBadCopyFileFormat, "%s", msg)
	if csv {
		e.Hint = fmt.Sprintf("Use quoted CSV field to represent %s.", what)
	} else if what == "newline" {
		e.Hint = `Use "\n" to represent newline.`
	} else {
		e.Hint = `Use "\r" to represent carriage return.`
	}
	return e
}

// splitFields splits one line into p.fields.
func (p *textParser) splitFields(line []byte) error {
	p.spans = p.spans[:0]
	p.decBuf = p.decBuf[:0]
	var err error
	if p.csv {
		err = p.splitCSV(line)
	} else {
		p.splitText(line)
	}
	if err != nil {
		return err
	}
	p.fields = p.fields[:0]
	for _, s := range p.spans {
		switch {
		case s.null:
			p.fields = append(p.fields, nil)
		case s.start == s.end:
			p.fields = append(p.fields, emptyField) // not nil: nil is NULL
		default:
			p.fields = append(p.fields, p.decBuf[s.start:s.end:s.end])
		}
	}
	return nil
}

func (p *textParser) splitText(line []byte) {
	delim, null := p.opts.Delimiter, p.opts.Null
	i := 0
	for {
		rawStart, start := i, len(p.decBuf)
		for i < len(line) && line[i] != delim {
			c := line[i]
			i++
			if c != '\\' {
				p.decBuf = append(p.decBuf, c)
				continue
			}
			if i >= len(line) {
				break // a trailing backslash is dropped
			}
			c = line[i]
			i++
			switch c {
			case 'b':
				c = '\b'
			case 'f':
				c = '\f'
			case 'n':
				c = '\n'
			case 'r':
				c = '\r'
			case 't':
				c = '\t'
			case 'v':
				c = '\v'
			case '0', '1', '2', '3', '4', '5', '6', '7':
				v := int(c - '0')
				for n := 1; n < 3 && i < len(line) && line[i] >= '0' && line[i] <= '7'; n++ {
					v = v<<3 + int(line[i]-'0')
					i++
				}
				c = byte(v)
			case 'x':
				if i < len(line) && isHex(line[i]) {
					v := hexVal(line[i])
					i++
					if i < len(line) && isHex(line[i]) {
						v = v<<4 + hexVal(line[i])
						i++
					}
					c = v
				}
			}
			p.decBuf = append(p.decBuf, c)
		}
		raw := line[rawStart:i]
		p.spans = append(p.spans, fieldSpan{start: start, end: len(p.decBuf), null: string(raw) == null})
		if i >= len(line) {
			return
		}
		i++ // the delimiter
	}
}

func (p *textParser) splitCSV(line []byte) error {
	delim, quote, escape, null := p.opts.Delimiter, p.opts.Quote, p.opts.Escape, p.opts.Null
	i := 0
	for {
		rawStart, start := i, len(p.decBuf)
		sawQuote, inQuote := false, false
		for i < len(line) {
			c := line[i]
			if !inQuote {
				if c == delim {
					break
				}
				i++
				if c == quote {
					inQuote, sawQuote = true, true
					continue
				}
				p.decBuf = append(p.decBuf, c)
				continue
			}
			i++
			if c == escape && i < len(line) && (line[i] == escape || line[i] == quote) {
				p.decBuf = append(p.decBuf, line[i])
				i++
				continue
			}
			if c == quote {
				inQuote = false
				continue
			}
			p.decBuf = append(p.decBuf, c)
		}
		if inQuote {
			return Errorf(CodeBadCopyFileFormat, "unterminated CSV quoted field")
		}
		raw := line[rawStart:i]
		p.spans = append(p.spans, fieldSpan{start: start, end: len(p.decBuf), null: !sawQuote && string(raw) == null})
		if i >= len(line) {
			return nil
		}
		i++ // the delimiter
	}
}

func (p *textParser) checkFieldCount() error {
	switch {
	case len(p.names) == 0:
		if len(p.fields) == 1 && len(p.fields[0]) == 0 {
			p.fields = p.fields[:0]
			return nil
		}
		return Errorf(CodeBadCopyFileFormat, "extra data after last expected column")
	case len(p.fields) < len(p.names):
		return Errorf(CodeBadCopyFileFormat, "missing data for column %q", p.names[len(p.fields)])
	case len(p.fields) > len(p.names):
		return Errorf(CodeBadCopyFileFormat, "extra data after last expected column")
	}
	return nil
}

func (p *textParser) matchHeader() error {
	if len(p.fields) != len(p.names) {
		return Errorf(CodeBadCopyFileFormat, "wrong number of fields in header line: got %d, expected %d", len(p.fields), len(p.names))
	}
	for i, f := range p.fields {
		if f == nil {
			return Errorf(CodeBadCopyFileFormat, "column name mismatch in header line field %d: got null value (%q), expected %q", i+1, p.opts.Null, p.names[i])
		}
		if string(f) != p.names[i] {
			return Errorf(CodeBadCopyFileFormat, "column name mismatch in header line field %d: got %q, expected %q", i+1, string(f), p.names[i])
		}
	}
	return nil
}

// lineError is a parse error at a line of COPY input; the COPY driver turns it
// into an *Error with "COPY t, line N" as context.
type lineError struct {
	line   int64
	column string // "" when the error is not about one column
	value  []byte // the column's raw value, quoted in the context
	// noValue leaves the value out of the context (binary format).
	noValue bool
	err     error
}

func (e *lineError) Error() string { return fmt.Sprintf("line %d: %v", e.line, e.err) }
func (e *lineError) Unwrap() error { return e.err }

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func hexVal(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

// copyWriter renders COPY TO rows in a format.
type copyWriter struct {
	opts    CopyOptions // with defaults
	columns []Column
	codec   *codec
}

// header returns what precedes the first row: the binary signature, or the
// header line of column names.
func (w *copyWriter) header() []byte {
	switch {
	case w.opts.Format == CopyBinary:
		return binaryHeader()
	case !w.opts.Header:
		return nil
	}
	var buf []byte
	for i, c := range w.columns {
		if i > 0 {
			buf = append(buf, w.opts.Delimiter)
		}
		if w.opts.Format == CopyCSV {
			buf = w.appendCSV(buf, []byte(c.Name))
		} else {
			buf = appendTextEscaped(buf, []byte(c.Name), w.opts.Delimiter)
		}
	}
	return append(buf, '\n')
}

// trailer returns what follows the last row.
func (w *copyWriter) trailer() []byte {
	if w.opts.Format == CopyBinary {
		return []byte{0xff, 0xff}
	}
	return nil
}

// appendRow appends one row in the COPY format.
func (w *copyWriter) appendRow(buf []byte, row []any) ([]byte, error) {
	if len(row) != len(w.columns) {
		return buf, fmt.Errorf("row has %d values, want %d columns", len(row), len(w.columns))
	}
	if w.opts.Format == CopyBinary {
		return w.appendBinaryRow(buf, row)
	}
	var scratch [64]byte
	for i, v := range row {
		if i > 0 {
			buf = append(buf, w.opts.Delimiter)
		}
		val, null, err := w.codec.encode(scratch[:0], w.columns[i].TypeOID, textFormat, v)
		if err != nil {
			return buf, fmt.Errorf("column %q: %w", w.columns[i].Name, err)
		}
		switch {
		case null && w.opts.Format == CopyCSV:
			buf = append(buf, w.opts.Null...)
		case null:
			buf = append(buf, w.opts.Null...)
		case w.opts.Format == CopyCSV:
			buf = w.appendCSV(buf, val)
		default:
			buf = appendTextEscaped(buf, val, w.opts.Delimiter)
		}
	}
	return append(buf, '\n'), nil
}

// appendTextEscaped escapes a value for the text format, as PostgreSQL's
// CopyAttributeOutText does.
func appendTextEscaped(buf, val []byte, delim byte) []byte {
	for _, c := range val {
		switch c {
		case '\\':
			buf = append(buf, '\\', '\\')
		case '\b':
			buf = append(buf, '\\', 'b')
		case '\f':
			buf = append(buf, '\\', 'f')
		case '\n':
			buf = append(buf, '\\', 'n')
		case '\r':
			buf = append(buf, '\\', 'r')
		case '\t':
			buf = append(buf, '\\', 't')
		case '\v':
			buf = append(buf, '\\', 'v')
		default:
			if c == delim {
				buf = append(buf, '\\')
			}
			buf = append(buf, c)
		}
	}
	return buf
}

// appendCSV quotes a value for csv when it must be: when it contains the
// delimiter, the quote, the escape or a line break, equals the NULL string,
// or is `\.` (which would read back as the end-of-data marker).
func (w *copyWriter) appendCSV(buf, val []byte) []byte {
	q, esc := w.opts.Quote, w.opts.Escape
	need := string(val) == w.opts.Null || string(val) == `\.` ||
		bytes.IndexByte(val, w.opts.Delimiter) >= 0 || bytes.IndexByte(val, q) >= 0 ||
		bytes.IndexByte(val, esc) >= 0 || bytes.ContainsAny(val, "\r\n")
	if !need {
		return append(buf, val...)
	}
	buf = append(buf, q)
	for _, c := range val {
		if c == q || c == esc {
			buf = append(buf, esc)
		}
		buf = append(buf, c)
	}
	return append(buf, q)
}
