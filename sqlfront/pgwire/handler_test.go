package pgwire

import (
	"context"
	"fmt"
	"io"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"
)

// testHandler is an in-memory Handler that understands a fixed set of
// statements, enough to drive every protocol path with real clients:
//
//	select 1                         one int4 row
//	select * from t                  typed rows of every common type
//	select n from series(N)          N int8 rows, produced lazily
//	select $1::type, $2::type ...    echoes its parameters back
//	begin / commit / rollback        transaction status
//	copy c [(cols)] from stdin [with (...)]   into table c (id int8, name text, score float8)
//	copy c to stdout [with (...)]    table c
//	select * from c                  table c
//	select pg_sleep                  blocks until its ctx is done
//	select * from missing            42P01
//	fail <sqlstate>                  an *Error with that code
//	notice                           a NOTICE, then "DO"
//	set timezone to 'X'              changes TimeZone (ParamReporter)
//	create table x                   "CREATE TABLE"
//	panic                            panics in Execute
//	anything else                    42601 syntax error at position 1
type testHandler struct {
	executions atomic.Int64 // PreparedStatement.Execute calls
	prepares   atomic.Int64
	sessions   atomic.Int64  // open sessions
	sleeping   chan struct{} // receives when pg_sleep starts, if non-nil
	// fuzzing makes pg_sleep fail at once and COPY keep no rows, so that a
	// fuzzer can run for hours.
	fuzzing bool
	// copyDelay delays the start of COPY FROM STDIN (the socket watcher
	// then holds the CopyData the client pipelined).
	copyDelay time.Duration

	mu struct {
		sync.Mutex
		c       [][]any // committed rows of table c
		aborts  []error // causes passed to CopySink.Abort
		commits int
		infos   []SessionInfo
	}
}

var tColumns = []Column{
	NewColumn("id", pgtype.Int8OID),
	NewColumn("name", pgtype.TextOID),
	NewColumn("ok", pgtype.BoolOID),
	NewColumn("score", pgtype.Float8OID),
	NewColumn("ts", pgtype.TimestamptzOID),
	NewColumn("amount", pgtype.NumericOID),
	NewColumn("data", pgtype.ByteaOID),
	NewColumn("day", pgtype.DateOID),
	NewColumn("uid", pgtype.UUIDOID),
	NewColumn("doc", pgtype.JSONOID),
}

func tRows() [][]any {
	return [][]any{
		{int64(1), "alpha", true, 1.5, time.Date(2024, 1, 2, 3, 4, 5, 123456000, time.UTC),
			pgtype.Numeric{Int: big.NewInt(12345), Exp: -2, Valid: true}, []byte{0xde, 0xad, 0xbe, 0xef},
			time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC), [16]byte{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0},
			`{"a": 1}`},
		{int64(2), "bé\ttab", false, -0.25, time.Date(1999, 12, 31, 23, 59, 59, 0, time.UTC),
			Text("-0.50"), []byte{}, time.Date(1999, 12, 31, 0, 0, 0, 0, time.UTC), Text("00000000-0000-0000-0000-000000000001"),
			Text(`[1, 2]`)},
		{int64(3), nil, nil, nil, nil, nil, nil, nil, nil, nil},
	}
}

var cColumns = []Column{
	NewColumn("id", pgtype.Int8OID),
	NewColumn("name", pgtype.TextOID),
	NewColumn("score", pgtype.Float8OID),
}

func (h *testHandler) NewSession(ctx context.Context, info SessionInfo) (Session, error) {
	if info.Database == "nosuchdb" {
		return nil, Errorf(CodeInvalidCatalogName, "database %q does not exist", info.Database)
	}
	h.sessions.Add(1)
	h.mu.Lock()
	h.mu.infos = append(h.mu.infos, info)
	h.mu.Unlock()
	params := map[string]string{}
	if info.User == "plain" {
		params["is_superuser"] = "off" // a role that is not a superuser
	}
	return &testSession{h: h, tx: TxIdle, params: params}, nil
}

func (h *testHandler) committed() [][]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([][]any(nil), h.mu.c...)
}

func (h *testHandler) aborts() []error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]error(nil), h.mu.aborts...)
}

type testSession struct {
	h      *testHandler
	tx     TxStatus
	params map[string]string
}

func (s *testSession) Split(ctx context.Context, query string) ([]Statement, error) {
	var out []Statement
	start := 0
	inQuote := false
	for i := 0; i <= len(query); i++ {
		if i < len(query) && query[i] == '\'' {
			inQuote = !inQuote
		}
		if i == len(query) || (query[i] == ';' && !inQuote) {
			text := query[start:i]
			trimmed := strings.TrimLeft(text, " \t\r\n")
			if strings.TrimSpace(trimmed) != "" {
				out = append(out, Statement{SQL: strings.TrimSpace(trimmed), Offset: start + len(text) - len(trimmed)})
			}
			start = i + 1
		}
	}
	return out, nil
}

var (
	paramRE   = regexp.MustCompile(`\$(\d+)(?:::(\w+))?`)
	selectCRE = regexp.MustCompile(`^select ([\w, ]+) from c$`)
	seriesRE  = regexp.MustCompile(`^select n from series\((\d+)\)$`)
	copyInRE  = regexp.MustCompile(`(?i)^copy c(?: \(([\w, ]+)\))? from stdin(?: with \((.*)\)| (.*))?$`)
	copyToRE  = regexp.MustCompile(`(?i)^copy c to stdout(?: with \((.*)\)| (.*))?$`)
	failRE    = regexp.MustCompile(`^fail (\w{5})$`)
	setTZRE   = regexp.MustCompile(`(?i)^set timezone to '([^']*)'$`)
)

var typeOIDs = map[string]uint32{
	"int8": pgtype.Int8OID, "int4": pgtype.Int4OID, "int2": pgtype.Int2OID, "text": pgtype.TextOID,
	"bool": pgtype.BoolOID, "float8": pgtype.Float8OID, "float4": pgtype.Float4OID, "numeric": pgtype.NumericOID,
	"timestamptz": pgtype.TimestamptzOID, "timestamp": pgtype.TimestampOID, "date": pgtype.DateOID,
	"bytea": pgtype.ByteaOID, "uuid": pgtype.UUIDOID, "json": pgtype.JSONOID, "jsonb": pgtype.JSONBOID,
	"interval": pgtype.IntervalOID, "varchar": pgtype.VarcharOID,
}

func (s *testSession) Prepare(ctx context.Context, sql string, paramOIDs []uint32) (PreparedStatement, error) {
	s.h.prepares.Add(1)
	norm := normalizeSQL(sql)
	q := strings.ToLower(norm)
	if strings.HasPrefix(q, "begin ") || strings.HasPrefix(q, "start transaction") {
		q = "begin" // isolation levels and access modes are all the same here
	}
	st := &testStmt{s: s, sql: q, orig: norm}
	if strings.HasPrefix(q, "--") {
		return nil, ErrEmptyQuery
	}
	switch {
	case q == "select 1":
		st.columns = []Column{NewColumn("?column?", pgtype.Int4OID)}
	case q == "select * from t":
		st.columns = tColumns
	case q == "select * from c":
		st.columns = cColumns
	case selectCRE.MatchString(q):
		for _, name := range strings.Split(selectCRE.FindStringSubmatch(q)[1], ",") {
			i := cColumnIndex(name)
			if i < 0 {
				return nil, Errorf(CodeUndefinedColumn, "column %q does not exist", strings.TrimSpace(name))
			}
			st.columns = append(st.columns, cColumns[i])
		}
	case seriesRE.MatchString(q):
		st.columns = []Column{NewColumn("n", pgtype.Int8OID)}
	case strings.HasPrefix(q, "select pg_sleep("):
	case q == "select pg_sleep":
		st.columns = []Column{NewColumn("pg_sleep", pgtype.TextOID)}
	case q == "select * from missing":
		return nil, &Error{Code: CodeUndefinedTable, Message: `relation "missing" does not exist`, Position: 15}
	case strings.HasPrefix(q, "select $"):
		for _, m := range paramRE.FindAllStringSubmatch(q, -1) {
			n, err := strconv.Atoi(m[1])
			if err != nil || n < 1 || n > 100 {
				return nil, Errorf(CodeProgramLimitExceeded, "parameter $%s out of range", m[1])
			}
			for len(st.params) < n {
				st.params = append(st.params, 0)
			}
			oid := uint32(0)
			if n-1 < len(paramOIDs) {
				oid = paramOIDs[n-1]
			}
			if m[2] != "" {
				oid = typeOIDs[m[2]]
			}
			if oid == 0 {
				oid = pgtype.TextOID
			}
			st.params[n-1] = oid
		}
		for i, oid := range st.params {
			st.columns = append(st.columns, NewColumn(fmt.Sprintf("p%d", i+1), oid))
		}
	case q == "begin", q == "commit", q == "rollback", q == "notice", q == "panic", q == "create table x",
		copyInRE.MatchString(q), copyToRE.MatchString(q), failRE.MatchString(q), setTZRE.MatchString(q):
	default:
		word, _, _ := strings.Cut(q, " ")
		return nil, &Error{Code: CodeSyntaxError, Message: fmt.Sprintf("syntax error at or near %q", word), Position: 1}
	}
	if s.tx == TxFailed && q != "rollback" && q != "commit" {
		return nil, Errorf(CodeInFailedSQLTransaction, "current transaction is aborted, commands ignored until end of transaction block")
	}
	return st, nil
}

func (s *testSession) Sync(ctx context.Context, failed bool) error {
	if failed && s.tx == TxInBlock {
		s.tx = TxFailed
	}
	return nil
}

func (s *testSession) TxStatus() TxStatus { return s.tx }

func (s *testSession) Close() { s.h.sessions.Add(-1) }

func (s *testSession) ChangedParams() map[string]string { return s.params }

type testStmt struct {
	s       *testSession
	sql     string // lower-cased
	orig    string
	params  []uint32
	columns []Column
}

func (st *testStmt) origTrimmed() string { return st.orig }

// normalizeSQL drops identifier quotes, a trailing semicolon and extra
// blanks, so that the statements drivers generate (pgx: `copy "c" ( "id" )
// from stdin binary;`, lib/pq: `COPY "c" ("id") FROM STDIN`, psql's \copy)
// match the fixed forms above.
func normalizeSQL(sql string) string {
	s := strings.TrimSpace(sql)
	s = strings.TrimSpace(strings.TrimSuffix(s, ";"))
	s = strings.ReplaceAll(s, `"`, "")
	s = strings.Join(strings.Fields(s), " ")
	s = strings.ReplaceAll(s, "( ", "(")
	s = strings.ReplaceAll(s, " )", ")")
	return s
}

func cColumnIndex(name string) int {
	for i, c := range cColumns {
		if c.Name == strings.ToLower(strings.TrimSpace(name)) {
			return i
		}
	}
	return -1
}

func (st *testStmt) ParamOIDs() []uint32 { return st.params }
func (st *testStmt) Columns() []Column   { return st.columns }
func (st *testStmt) Close()              {}

func (st *testStmt) Execute(ctx context.Context, params []any) (Result, error) {
	h := st.s.h
	h.executions.Add(1)
	q := st.sql
	switch {
	case q == "select 1":
		return Result{Rows: RowsFromSlice(st.columns, [][]any{{int32(1)}})}, nil
	case q == "select * from t":
		return Result{Rows: RowsFromSlice(tColumns, tRows())}, nil
	case q == "select * from c":
		return Result{Rows: RowsFromSlice(cColumns, h.committed())}, nil
	case selectCRE.MatchString(q):
		var rows [][]any
		for _, full := range h.committed() {
			row := make([]any, len(st.columns))
			for i, c := range st.columns {
				row[i] = full[cColumnIndex(c.Name)]
			}
			rows = append(rows, row)
		}
		return Result{Rows: RowsFromSlice(st.columns, rows)}, nil
	case seriesRE.MatchString(q):
		n, _ := strconv.ParseInt(seriesRE.FindStringSubmatch(q)[1], 10, 64)
		return Result{Rows: &seriesRows{n: n, columns: st.columns}}, nil
	case strings.HasPrefix(q, "select pg_sleep(") && strings.HasSuffix(q, ")"):
		// select pg_sleep(N): N milliseconds, or until cancelled.
		ms, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(q, "select pg_sleep("), ")"))
		if err != nil || h.fuzzing {
			return Result{}, Errorf(CodeFeatureNotSupported, "bad sleep")
		}
		select {
		case <-time.After(time.Duration(ms) * time.Millisecond):
			return Result{Tag: "SELECT 0"}, nil
		case <-ctx.Done():
			return Result{}, ctx.Err()
		}
	case q == "select pg_sleep":
		if h.fuzzing {
			return Result{}, Errorf(CodeFeatureNotSupported, "no sleeping while fuzzing")
		}
		if h.sleeping != nil {
			h.sleeping <- struct{}{}
		}
		<-ctx.Done()
		return Result{}, ctx.Err()
	case strings.HasPrefix(q, "select $"):
		return Result{Rows: RowsFromSlice(st.columns, [][]any{params})}, nil
	case q == "begin":
		if st.s.tx != TxIdle {
			return Result{Tag: "BEGIN", Notices: []*Error{{Severity: SeverityWarning, Code: CodeActiveSQLTransaction, Message: "there is already a transaction in progress"}}}, nil
		}
		st.s.tx = TxInBlock
		return Result{Tag: "BEGIN"}, nil
	case q == "commit":
		tag := "COMMIT"
		if st.s.tx == TxFailed {
			tag = "ROLLBACK"
		}
		st.s.tx = TxIdle
		return Result{Tag: tag}, nil
	case q == "rollback":
		st.s.tx = TxIdle
		return Result{Tag: "ROLLBACK"}, nil
	case q == "notice":
		return Result{Tag: "DO", Notices: []*Error{{Message: "hello from the handler"}}}, nil
	case q == "panic":
		panic("test handler panic")
	case q == "create table x":
		return Result{Tag: "CREATE TABLE"}, nil
	case failRE.MatchString(q):
		code := failRE.FindStringSubmatch(q)[1]
		return Result{}, &Error{Code: strings.ToUpper(code), Message: "failed on purpose", Detail: "some detail", Hint: "some hint", Position: 1}
	case setTZRE.MatchString(q):
		st.s.params["TimeZone"] = setTZRE.FindStringSubmatch(st.origTrimmed())[1]
		return Result{Tag: "SET"}, nil
	case copyInRE.MatchString(q):
		m := copyInRE.FindStringSubmatch(st.origTrimmed())
		columns := cColumns
		if m[1] != "" {
			columns = nil
			for _, name := range strings.Split(m[1], ",") {
				if i := cColumnIndex(name); i >= 0 {
					columns = append(columns, cColumns[i])
				}
			}
		}
		opts, err := parseTestCopyOptions(m[2], m[3])
		if err != nil {
			return Result{}, err
		}
		time.Sleep(h.copyDelay)
		return Result{CopyIn: &CopyIn{Table: "c", Columns: columns, Options: opts, BatchRows: 2,
			Sink: &testSink{h: h, columns: columns}}}, nil
	case copyToRE.MatchString(q):
		m := copyToRE.FindStringSubmatch(st.origTrimmed())
		opts, err := parseTestCopyOptions(m[1], m[2])
		if err != nil {
			return Result{}, err
		}
		return Result{CopyOut: &CopyOut{Options: opts, Rows: RowsFromSlice(cColumns, h.committed())}}, nil
	}
	return Result{}, fmt.Errorf("test handler cannot execute %q", q)
}

// parseTestCopyOptions reads "format csv, header, delimiter ';'" (the
// parenthesised list) or the legacy "csv header" / "binary".
func parseTestCopyOptions(list, legacy string) (CopyOptions, error) {
	var opts CopyOptions
	if legacy != "" {
		for _, w := range strings.Fields(legacy) {
			name, value := w, ""
			if w == "csv" || w == "binary" {
				name, value = "format", w
			}
			if err := opts.Set(name, value); err != nil {
				return opts, err
			}
		}
	}
	if list != "" {
		for _, item := range strings.Split(list, ",") {
			name, value, _ := strings.Cut(strings.TrimSpace(item), " ")
			value = strings.Trim(strings.TrimSpace(value), "'")
			value = strings.ReplaceAll(value, `\t`, "\t")
			if err := opts.Set(name, value); err != nil {
				return opts, err
			}
		}
	}
	return opts, opts.Validate()
}

// testSink stages rows and appends them to table c on Commit.
type testSink struct {
	h       *testHandler
	columns []Column
	staged  [][]any
}

func (s *testSink) WriteRows(ctx context.Context, b *CopyBatch) error {
	if len(b.Rows) != len(b.Lines) {
		panic("batch rows and lines differ")
	}
	for i, row := range b.Rows {
		full := make([]any, len(cColumns))
		for j, c := range s.columns {
			for k, cc := range cColumns {
				if cc.Name == c.Name {
					full[k] = row[j]
				}
			}
		}
		if full[0] == nil {
			return &Error{Code: CodeNotNullViolation, Message: `null value in column "id" of relation "c" violates not-null constraint`,
				Where: fmt.Sprintf("COPY c, line %d", b.Lines[i])}
		}
		s.staged = append(s.staged, full)
	}
	return nil
}

func (s *testSink) Commit(ctx context.Context, rows int64) error {
	if int(rows) != len(s.staged) {
		return fmt.Errorf("commit of %d rows, staged %d", rows, len(s.staged))
	}
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	if !s.h.fuzzing {
		s.h.mu.c = append(s.h.mu.c, s.staged...)
	}
	s.h.mu.commits++
	return nil
}

func (s *testSink) Abort(ctx context.Context, cause error) {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	if !s.h.fuzzing {
		s.h.mu.aborts = append(s.h.mu.aborts, cause)
	}
}

// seriesRows yields 1..n lazily.
type seriesRows struct {
	n, next int64
	columns []Column
	closed  bool
}

func (r *seriesRows) Columns() []Column { return r.columns }

func (r *seriesRows) Next(ctx context.Context) ([]any, error) {
	if r.closed {
		panic("Next after Close")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if r.next >= r.n {
		return nil, io.EOF
	}
	r.next++
	return []any{r.next}, nil
}

func (r *seriesRows) Close() error { r.closed = true; return nil }

// A session's own parameter values are in the startup report: a client
// is told is_superuser once, with the session's value, not "on" first.
func TestStartupReportsSessionParams(t *testing.T) {
	ts := startServer(t, Config{})
	c := dialRaw(t, ts.addr)
	c.send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30, Parameters: map[string]string{"user": "plain", "database": "mink"}})
	var got []string
	for _, m := range c.receiveUntil("ReadyForQuery") {
		if ps, ok := m.(*pgproto3.ParameterStatus); ok && ps.Name == "is_superuser" {
			got = append(got, ps.Value)
		}
	}
	if len(got) != 1 || got[0] != "off" {
		t.Fatalf("is_superuser reported as %q, want once \"off\"", got)
	}
}
