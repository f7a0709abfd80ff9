package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// TestErrorCodes runs statements that fail in DuckDB and checks the
// SQLSTATE (and for some the PostgreSQL-style message and position).
func TestErrorCodes(t *testing.T) {
	c := ordersConn(t)
	for _, tc := range []struct {
		sql, code, msg string
		pos            int
	}{
		{sql: "SELECT * FROM nosuch", code: CodeUndefinedTable, msg: `relation "nosuch" does not exist`, pos: 15},
		{sql: "SELECT * FROM public.nosuch", code: CodeUndefinedTable},
		{sql: "SELECT nosuch FROM orders", code: CodeUndefinedColumn, msg: `column "nosuch" does not exist`, pos: 8},
		{sql: "SELECT nosuch", code: CodeUndefinedColumn, msg: `column "nosuch" does not exist`},
		{sql: "CREATE TEMP TABLE tw (a INTEGER); INSERT INTO tw (nosuch) VALUES (1)", code: CodeUndefinedColumn, msg: `column "nosuch" of relation "tw" does not exist`},
		{sql: "CREATE TEMP TABLE tu (a INTEGER); UPDATE tu SET nosuch = 1", code: CodeUndefinedColumn, msg: `column "nosuch" does not exist`},
		{sql: "CREATE TEMP TABLE tv (a INTEGER); INSERT INTO tv VALUES (1, 2)", code: CodeSyntaxError, msg: "INSERT has more expressions than target columns"},
		{sql: "CREATE TEMP TABLE tx (a INTEGER, b INTEGER); INSERT INTO tx VALUES (1)", code: CodeSyntaxError, msg: "INSERT has more target columns than expressions"},
		{sql: "SELECT o.nosuch FROM orders o", code: CodeUndefinedColumn},
		{sql: "SELECT x.id FROM orders o", code: CodeUndefinedTable},
		{sql: "SELECT nofunc(1)", code: CodeUndefinedFunction, msg: "function nofunc does not exist"},
		{sql: "SELECT lower(1, 2, 3)", code: CodeUndefinedFunction},
		{sql: "SELECT customer, count(*) FROM orders", code: CodeGroupingError},
		{sql: "SELEC 1", code: CodeSyntaxError, msg: `syntax error at or near "SELEC"`, pos: 1},
		{sql: "SELECT (1", code: CodeSyntaxError},
		{sql: "SELECT 'abc'::INTEGER", code: CodeInvalidTextRepr},
		{sql: "SELECT 'x'::UUID", code: CodeInvalidTextRepr},
		{sql: "SELECT '{'::JSON", code: CodeInvalidTextRepr},
		{sql: "SELECT 12345.678::DECIMAL(5,2)", code: CodeNumericValueOutOfRange},
		{sql: "SELECT 2147483647::INTEGER + 1", code: CodeNumericValueOutOfRange},
		{sql: "SELECT 300::TINYINT", code: CodeNumericValueOutOfRange},
		{sql: "SELECT '300'::TINYINT", code: CodeNumericValueOutOfRange},
		{sql: "SELECT '99999999999999999999'::BIGINT", code: CodeNumericValueOutOfRange},
		{sql: "SELECT '1e30'::DECIMAL(38,10)", code: CodeNumericValueOutOfRange},
		{sql: "SELECT CAST(1e30 AS DECIMAL(38,10))", code: CodeNumericValueOutOfRange},
		{sql: "SELECT 'x1'::DECIMAL(38,10)", code: CodeInvalidTextRepr},
		{sql: "SELECT sum(id * 9223372036854775807) FROM orders", code: CodeNumericValueOutOfRange},
		{sql: "SELECT '2020-13-45'::DATE", code: CodeDatetimeFieldOverflow},
		{sql: "SELECT 'x'::TIMESTAMP", code: CodeInvalidDatetimeFormat},
		{sql: "SELECT CASE WHEN x = 0 THEN error('division by zero') ELSE 1 / x END FROM (VALUES (0)) t(x)", code: CodeDivisionByZero, msg: "division by zero"},
		{sql: "SELECT (SELECT id FROM orders)", code: CodeCardinalityViolation},
		{sql: "CREATE TEMP TABLE nn (a INTEGER NOT NULL); INSERT INTO nn VALUES (NULL)", code: CodeNotNullViolation},
		{sql: "CREATE TEMP TABLE uq (a INTEGER PRIMARY KEY); INSERT INTO uq VALUES (1), (1)", code: CodeUniqueViolation},
		{sql: "CREATE TEMP TABLE ck (a INTEGER CHECK (a > 0)); INSERT INTO ck VALUES (-1)", code: CodeCheckViolation},
		{sql: "SELECT 1 AS x ORDER BY 1 USING <", code: CodeFeatureNotSupported},
		{sql: "SELECT 1 FOR UPDATE", code: CodeFeatureNotSupported},
		{sql: "SELECT * FROM read_csv('/etc/passwd')", code: CodeInsufficientPrivilege},
		{sql: "INSTALL httpfs", code: CodeInsufficientPrivilege},
	} {
		rows, err := c.Query(context.Background(), tc.sql)
		if err == nil {
			for rows.Next() {
			}
			err = rows.Err()
			rows.Close()
		}
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%s: error %v, want *Error %s", tc.sql, err, tc.code)
			continue
		}
		if e.Code != tc.code {
			t.Errorf("%s: %s %q (DuckDB %s), want %s", tc.sql, e.Code, e.Message, e.DuckDBType, tc.code)
		}
		if tc.msg != "" && e.Message != tc.msg {
			t.Errorf("%s: message %q, want %q", tc.sql, e.Message, tc.msg)
		}
		if tc.pos != 0 && e.Position != tc.pos {
			t.Errorf("%s: position %d, want %d", tc.sql, e.Position, tc.pos)
		}
	}
	// The connection is still usable.
	expectRows(t, c, "SELECT count(*) FROM orders", "5")
}

// TestClassify covers DuckDB errors that are hard to provoke.
func TestClassify(t *testing.T) {
	for _, tc := range []struct{ text, code string }{
		{`{"exception_type":"Out of Memory","exception_message":"could not allocate block of size 256.0 KiB (1.0 GiB/1.0 GiB used)"}`, CodeOutOfMemory},
		{`{"exception_type":"Divide by Zero","exception_message":"Division by zero!"}`, CodeDivisionByZero},
		{`{"exception_type":"INTERRUPT","exception_message":"Interrupted!"}`, CodeQueryCanceled},
		{`{"exception_type":"TransactionContext","exception_message":"Catalog write-write conflict on create with \"t\""}`, CodeSerializationFailure},
		{`{"exception_type":"INTERNAL","exception_message":"Attempted to access index 3 within vector of size 3"}`, CodeInternalError},
		{`Parser Error: {"exception_type":"Parser","exception_message":"syntax error at end of input","position":"8"}`, CodeSyntaxError},
		{`Catalog Error: Table with name x does not exist!`, CodeUndefinedTable},
		{`Something odd happened`, CodeInternalError},
	} {
		if got := newDuckDBError("SELECT 1", tc.text); got.Code != tc.code {
			t.Errorf("%s: %s (%q), want %s", tc.text, got.Code, got.Message, tc.code)
		}
	}
}

func TestOutOfMemory(t *testing.T) {
	c := openConn(t, openDB(t, Options{MemoryLimit: 64 << 20}))
	_, err := c.Query(context.Background(), "SELECT count(*) FROM (SELECT DISTINCT (range * 7)::VARCHAR || repeat('x', 100) FROM range(5000000))")
	if sqlState(err) != CodeOutOfMemory {
		t.Errorf("over the memory limit without a temp dir: %v (%s)", err, sqlState(err))
	}
	expectRows(t, c, "SELECT 1", "1")
}

// TestCancel: cancelling a statement's context interrupts DuckDB promptly.
func TestCancel(t *testing.T) {
	c := openConn(t, openDB(t, Options{}))
	const bigJoin = "SELECT count(*) FROM range(1000000000) a, range(1000000000) b WHERE a.range + b.range = -1"
	for _, how := range []string{"Query", "QueryArrow", "Exec"} {
		ctx, cancel := context.WithCancel(context.Background())
		timer := time.AfterFunc(100*time.Millisecond, cancel)
		start := time.Now()
		var err error
		switch how {
		case "Query":
			var rows *Rows
			if rows, err = c.Query(ctx, bigJoin); err == nil {
				for rows.Next() {
				}
				err = rows.Err()
				rows.Close()
			}
		case "QueryArrow":
			var rdr array.RecordReader
			if rdr, err = c.QueryArrow(ctx, bigJoin); err == nil {
				for rdr.Next() {
				}
				err = rdr.Err()
				rdr.Release()
			}
		case "Exec":
			err = c.Exec(ctx, "CREATE TEMP TABLE j AS "+bigJoin)
		}
		elapsed := time.Since(start)
		timer.Stop()
		cancel()
		if !errors.Is(err, context.Canceled) || sqlState(err) != CodeQueryCanceled {
			t.Errorf("%s: err %v (%s), want context.Canceled and 57014", how, err, sqlState(err))
		}
		if elapsed > 2*time.Second {
			t.Errorf("%s: cancellation took %v", how, elapsed)
		}
		t.Logf("%s: cancelled after %v", how, elapsed)
		expectRows(t, c, "SELECT 42", "42")
	}
}

// slowSource never ends until its context is done.
type slowSource struct{ opened chan struct{} }

var slowSchema = arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int64}}, nil)

func (s *slowSource) Schema() *arrow.Schema { return slowSchema }

func (s *slowSource) Open(ctx context.Context, _ []int) (array.RecordReader, error) {
	close(s.opened)
	return &slowReader{ctx: ctx, refs: 1}, nil
}

type slowReader struct {
	ctx  context.Context
	refs int
	err  error
}

func (r *slowReader) Retain()                        { r.refs++ }
func (r *slowReader) Release()                       { r.refs-- }
func (r *slowReader) Schema() *arrow.Schema          { return slowSchema }
func (r *slowReader) RecordBatch() arrow.RecordBatch { return nil }
func (r *slowReader) Record() arrow.RecordBatch      { return nil }
func (r *slowReader) Err() error                     { return r.err }
func (r *slowReader) Next() bool {
	<-r.ctx.Done()
	r.err = r.ctx.Err()
	return false
}

// TestCancelSource: a source gets the statement's context and is cancelled
// with it.
func TestCancelSource(t *testing.T) {
	c := openConn(t, openDB(t, Options{}))
	src := &slowSource{opened: make(chan struct{})}
	rel, err := c.Register(context.Background(), "slow", src)
	if err != nil {
		t.Fatal(err)
	}
	defer rel()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-src.opened
		time.Sleep(50 * time.Millisecond)
		cancel()
	}()
	start := time.Now()
	rows, err := c.Query(ctx, "SELECT count(*) FROM slow")
	if err == nil {
		rows.Next()
		err = rows.Err()
		rows.Close()
	}
	if !errors.Is(err, context.Canceled) || sqlState(err) != CodeQueryCanceled || time.Since(start) > 2*time.Second {
		t.Errorf("err %v (%s) after %v", err, sqlState(err), time.Since(start))
	}
}

// failingSource fails to open, or fails while reading.
type failingSource struct {
	err      error
	failOpen bool
}

func (s *failingSource) Schema() *arrow.Schema { return slowSchema }

func (s *failingSource) Open(context.Context, []int) (array.RecordReader, error) {
	if s.failOpen {
		return nil, s.err
	}
	return &errReader{err: s.err}, nil
}

type errReader struct{ err error }

func (r *errReader) Retain()                        {}
func (r *errReader) Release()                       {}
func (r *errReader) Schema() *arrow.Schema          { return slowSchema }
func (r *errReader) RecordBatch() arrow.RecordBatch { return nil }
func (r *errReader) Record() arrow.RecordBatch      { return nil }
func (r *errReader) Err() error                     { return r.err }
func (r *errReader) Next() bool                     { return false }

// TestSourceErrors: a source's error fails the statement and reaches the
// caller unchanged, wrapped with the view's name.
func TestSourceErrors(t *testing.T) {
	c := openConn(t, openDB(t, Options{}))
	errUnavailable := errors.New("bucket 3 is unavailable")
	for _, tc := range []struct {
		src  *failingSource
		code string
	}{
		{&failingSource{err: errUnavailable, failOpen: true}, ""},
		{&failingSource{err: errUnavailable}, ""},
		{&failingSource{err: &Error{Code: "55000", Message: "bucket 3 is opening", Err: errUnavailable}}, "55000"},
	} {
		rel, err := c.Register(context.Background(), "t", tc.src)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := c.Query(context.Background(), "SELECT * FROM t")
		if err == nil {
			rows.Next()
			err = rows.Err()
			rows.Close()
		}
		rel()
		if !errors.Is(err, errUnavailable) || sqlState(err) != tc.code {
			t.Errorf("open failing %v: err %v (%s), want %v and %s", tc.src.failOpen, err, sqlState(err), errUnavailable, tc.code)
		}
		expectRows(t, c, "SELECT 1", "1")
	}
}

// TestCancelMidStream: a result being streamed stops with 57014 when its
// context is cancelled between rows; successful statements with a
// cancellable context leave no goroutine behind (TestMain checks).
func TestCancelMidStream(t *testing.T) {
	c := openConn(t, openDB(t, Options{}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	expectRowsCtx := func() {
		rows, err := c.Query(ctx, "SELECT 1")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
		}
		rows.Close()
	}
	expectRowsCtx()
	rows, err := c.Query(ctx, "SELECT range FROM range(100000000)")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		if n++; n == 5000 {
			cancel()
		}
	}
	if !errors.Is(rows.Err(), context.Canceled) || sqlState(rows.Err()) != CodeQueryCanceled {
		t.Errorf("after %d rows: %v", n, rows.Err())
	}
	if n > 100000 {
		t.Errorf("read %d rows after cancelling at 5000", n)
	}
	expectRows(t, c, "SELECT 1", "1")
}
