package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	duck "github.com/duckdb/duckdb-go-bindings"

	"github.com/minkdb/mink/internal/sqltypes"
)

// Conn is one DuckDB connection, for one SQL session. It runs one statement
// at a time and is not safe for concurrent use, except that release
// functions returned by Register may be called from any goroutine.
//
// A Conn's statements see only the sources registered on it: views are
// temporary views of this DuckDB connection, and each is backed by a
// mink_scan key that only this Conn knows.
//
// Results are streamed: DuckDB computes a query's rows as they are read.
// Starting another statement on the Conn (Exec, Query, Register, …) while
// a result is still being read first reads the rest of it into memory, so
// the older result stays valid; read results to the end, or close them,
// before the next statement to avoid that copy.
type Conn struct {
	db   *DB
	duck duck.Connection

	// active is the streaming result that currently holds the DuckDB
	// connection, nil if none.
	active *resultReader
	closed bool

	mu struct {
		sync.Mutex
		// views maps view names to their registrations.
		views map[string]*registration
		// drops are views released since the last statement; they are
		// dropped before the next one.
		drops []string
		// stmtCtx is the context of the statement being executed; scans
		// read it from DuckDB's threads.
		stmtCtx context.Context
		// sourceErr is the first error a Source returned during the
		// statement.
		sourceErr error
	}
}

// Column describes a result column.
type Column struct {
	Name string
	// Type is how the column is described to PostgreSQL clients.
	Type sqltypes.Type
	// DuckDBType is DuckDB's name of the column's type, e.g.
	// "DECIMAL(12,2)", "INTEGER[]", "STRUCT".
	DuckDBType string
}

// Description is what a statement would return, found without executing
// it.
type Description struct {
	Columns []Column
	// Params are the types DuckDB inferred for the parameters $1, $2, …;
	// an invalid Type (Valid() false) where it could not.
	Params []sqltypes.Type
	// Arrow is the schema of the batches QueryArrow returns for the
	// statement (DuckDB's Arrow layout, see QueryArrow); nil when a
	// column's type is not known before execution.
	Arrow *arrow.Schema
}

// Register makes src readable as the view name in this Conn's statements,
// until release is called (or the Conn closes). Registering another source
// under the same name replaces the view. The caller keeps ownership of src.
//
// Every reference to the view in a statement opens src anew (see Source).
func (c *Conn) Register(ctx context.Context, name string, src Source) (release func(), err error) {
	if err := c.beforeStatement(ctx); err != nil {
		return nil, err
	}
	reg := &registration{key: newKey(), name: name, src: src, schema: src.Schema(), conn: c}
	c.db.mu.Lock()
	c.db.mu.sources[reg.key] = reg
	c.db.mu.Unlock()
	unregister := func() {
		c.db.mu.Lock()
		delete(c.db.mu.sources, reg.key)
		c.db.mu.Unlock()
	}
	// Binding the view's query already calls mink_scan's bind, which finds
	// the registration above.
	c.setStatementContext(ctx)
	defer c.clearStatementContext()
	q := "CREATE OR REPLACE TEMPORARY VIEW " + quoteIdent(name) + " AS SELECT * FROM " + scanFunctionName + "(" + quoteString(reg.key) + ")"
	if err := execSimple(c.duck, q); err != nil {
		unregister()
		return nil, fmt.Errorf("register %q: %w", name, err)
	}
	c.mu.Lock()
	if old := c.mu.views[name]; old != nil {
		c.db.mu.Lock()
		delete(c.db.mu.sources, old.key)
		c.db.mu.Unlock()
	}
	c.mu.views[name] = reg
	c.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			unregister()
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.mu.views[name] == reg {
				delete(c.mu.views, name)
				c.mu.drops = append(c.mu.drops, name)
			}
		})
	}, nil
}

// RegisterArrow registers a one-shot reader as the view name (see
// ReaderSource): a statement that reads the view twice fails. release also
// releases rdr.
func (c *Conn) RegisterArrow(ctx context.Context, name string, rdr array.RecordReader) (release func(), err error) {
	src := &readerSource{rdr: rdr}
	rel, err := c.Register(ctx, name, src)
	if err != nil {
		return nil, err
	}
	return func() { rel(); src.Release() }, nil
}

// RegisterRecords registers batches held in memory as the view name; they
// can be read any number of times. release also releases the batches.
func (c *Conn) RegisterRecords(ctx context.Context, name string, schema *arrow.Schema, batches []arrow.RecordBatch) (release func(), err error) {
	src := RecordsSource(schema, batches)
	rel, err := c.Register(ctx, name, src)
	if err != nil {
		src.Release()
		return nil, err
	}
	return func() { rel(); src.Release() }, nil
}

// Exec runs one or more statements and discards their results.
func (c *Conn) Exec(ctx context.Context, query string, args ...any) error {
	r, err := c.run(ctx, query, args, false)
	if err != nil {
		return err
	}
	r.Release()
	return nil
}

// QueryArrow runs one or more statements (args bind to the last) and
// returns the last one's result as Arrow batches, in DuckDB's default Arrow
// layout: UUID and JSON columns are Strings, HUGEINT is Decimal128(38,0),
// TIMESTAMPTZ carries the session's zone (sqltypes.Conform turns such
// batches into a table's exact schema). Batches hold up to 2048 rows. The
// reader's Next reports the statement's errors through Err as *Error.
func (c *Conn) QueryArrow(ctx context.Context, query string, args ...any) (array.RecordReader, error) {
	return c.run(ctx, query, args, true)
}

// Query runs one or more statements (args bind to the last) and returns the
// last one's rows as Go values for the wire protocol, with column
// descriptions.
func (c *Conn) Query(ctx context.Context, query string, args ...any) (*Rows, error) {
	r, err := c.run(ctx, query, args, true)
	if err != nil {
		return nil, err
	}
	return newRows(r), nil
}

// Describe returns the columns a single statement would return and the
// types of its parameters, without executing it (PostgreSQL's Describe).
// Registered views are bound, so their schemas count, but not read.
func (c *Conn) Describe(ctx context.Context, query string) (*Description, error) {
	if err := c.beforeStatement(ctx); err != nil {
		return nil, err
	}
	stmt, err := c.prepareOne(query)
	if err != nil {
		return nil, err
	}
	defer duck.DestroyPrepare(&stmt)
	d := &Description{}
	n := duck.PreparedStatementColumnCount(stmt)
	types := make([]duck.LogicalType, 0, n)
	names := make([]string, 0, n)
	defer func() {
		for i := range types {
			duck.DestroyLogicalType(&types[i])
		}
	}()
	for i := duck.IdxT(0); i < n; i++ {
		lt := duck.PreparedStatementColumnLogicalType(stmt, i)
		name := duck.PreparedStatementColumnName(stmt, i)
		d.Columns = append(d.Columns, describeColumn(name, lt))
		types, names = append(types, lt), append(names, name)
	}
	var opts duck.ArrowOptions
	duck.ConnectionGetArrowOptions(c.duck, &opts)
	// Columns of types DuckDB cannot tell yet (a parameter's) have no
	// Arrow type: Arrow stays nil then.
	d.Arrow, _ = arrowSchema(opts, types, names)
	duck.DestroyArrowOptions(&opts)
	for i := duck.IdxT(1); i <= duck.NParams(stmt); i++ {
		lt := duck.ParamLogicalType(stmt, i)
		if lt.Ptr == nil {
			d.Params = append(d.Params, sqltypes.Type{})
			continue
		}
		switch duck.GetTypeId(lt) {
		case duck.TypeInvalid, duck.TypeAny, duck.TypeSQLNull:
			d.Params = append(d.Params, sqltypes.Type{})
		default:
			d.Params = append(d.Params, sqltypes.FromDuckDB(typeName(lt)))
		}
		duck.DestroyLogicalType(&lt)
	}
	return d, nil
}

// prepareOne prepares query, which must be a single statement.
func (c *Conn) prepareOne(query string) (duck.PreparedStatement, error) {
	var ext duck.ExtractedStatements
	defer duck.DestroyExtracted(&ext)
	n := duck.ExtractStatements(c.duck, query, &ext)
	if n == 0 {
		if msg := duck.ExtractStatementsError(ext); msg != "" {
			return duck.PreparedStatement{}, newDuckDBError(query, msg)
		}
		return duck.PreparedStatement{}, &Error{Code: CodeSyntaxError, Message: "empty query"}
	}
	if n > 1 {
		return duck.PreparedStatement{}, &Error{Code: CodeSyntaxError, Message: "cannot insert multiple commands into a prepared statement"}
	}
	var stmt duck.PreparedStatement
	if duck.PrepareExtractedStatement(c.duck, ext, 0, &stmt) == duck.StateError {
		msg := duck.PrepareError(stmt)
		duck.DestroyPrepare(&stmt)
		return duck.PreparedStatement{}, newDuckDBError(query, msg)
	}
	return stmt, nil
}

// SetTimeZone sets the session's TimeZone (see ConnOptions.TimeZone).
// Unknown zones are an error (22023).
func (c *Conn) SetTimeZone(ctx context.Context, zone string) error {
	if err := c.beforeStatement(ctx); err != nil {
		return err
	}
	if err := execSimple(c.duck, "SET TimeZone = "+quoteString(zone)); err != nil {
		var e *Error
		if errors.As(err, &e) {
			e.Code = CodeInvalidParameterValue
		}
		return err
	}
	return nil
}

// Close closes the connection. Results still being read end with ErrClosed;
// registered views disappear.
func (c *Conn) Close() error {
	if c.closed {
		return nil
	}
	if c.active != nil {
		c.active.abort(ErrClosed)
	}
	c.closed = true
	c.mu.Lock()
	for _, reg := range c.mu.views {
		c.db.mu.Lock()
		delete(c.db.mu.sources, reg.key)
		c.db.mu.Unlock()
	}
	c.mu.views = nil
	c.mu.Unlock()
	duck.Disconnect(&c.duck)
	c.db.forgetConn(c)
	return nil
}

// beforeStatement makes the connection ready for a new statement: the
// active result is buffered and released views are dropped.
func (c *Conn) beforeStatement(ctx context.Context) error {
	if c.closed {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return canceled(ctx)
	}
	if c.active != nil {
		c.active.buffer()
	}
	c.mu.Lock()
	drops := c.mu.drops
	c.mu.drops = nil
	c.mu.sourceErr = nil
	c.mu.Unlock()
	for _, name := range drops {
		if err := execSimple(c.duck, "DROP VIEW IF EXISTS "+quoteIdent(name)); err != nil {
			return fmt.Errorf("drop released view %q: %w", name, err)
		}
	}
	return nil
}

func (c *Conn) setStatementContext(ctx context.Context) {
	c.mu.Lock()
	c.mu.stmtCtx = ctx
	c.mu.Unlock()
}

func (c *Conn) clearStatementContext() {
	c.mu.Lock()
	c.mu.stmtCtx = nil
	c.mu.Unlock()
}

// statementContext returns the running statement's context, for scans;
// nil if no statement runs.
func (c *Conn) statementContext() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.stmtCtx
}

// noteSourceError records the first error of a source during a statement,
// so that the statement fails with it rather than with DuckDB's text.
func (c *Conn) noteSourceError(name string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.sourceErr == nil {
		c.mu.sourceErr = fmt.Errorf("read %s: %w", name, err)
	}
}

// failure builds the error of a failed statement from DuckDB's error text.
func (c *Conn) failure(ctx context.Context, query, duckText string) error {
	if ctx.Err() != nil {
		return canceled(ctx)
	}
	c.mu.Lock()
	srcErr := c.mu.sourceErr
	c.mu.Unlock()
	if srcErr != nil {
		// Not DuckDB's error: the caller knows the source's errors
		// (buckets.ErrUnavailable, …) and maps them itself.
		return srcErr
	}
	return newDuckDBError(query, duckText)
}

// canceled is the error of a statement whose context is done.
func canceled(ctx context.Context) *Error {
	msg := "canceling statement due to user request"
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		msg = "canceling statement due to statement timeout"
	}
	return &Error{Code: CodeQueryCanceled, Message: msg, Err: ctx.Err()}
}

// run executes the statements in query; args bind to the last, whose
// result is returned, streaming or not.
func (c *Conn) run(ctx context.Context, query string, args []any, stream bool) (*resultReader, error) {
	if err := c.beforeStatement(ctx); err != nil {
		return nil, err
	}
	var ext duck.ExtractedStatements
	defer duck.DestroyExtracted(&ext)
	n := duck.ExtractStatements(c.duck, query, &ext)
	if n == 0 {
		if msg := duck.ExtractStatementsError(ext); msg != "" {
			return nil, newDuckDBError(query, msg)
		}
		return nil, &Error{Code: CodeSyntaxError, Message: "empty query"}
	}
	c.setStatementContext(ctx)
	intr := startInterrupter(ctx, c.duck)
	fail := func(err error) (*resultReader, error) {
		intr.stop()
		c.clearStatementContext()
		return nil, err
	}
	for i := duck.IdxT(0); i < n; i++ {
		last := i == n-1
		var stmt duck.PreparedStatement
		if duck.PrepareExtractedStatement(c.duck, ext, i, &stmt) == duck.StateError {
			msg := duck.PrepareError(stmt)
			duck.DestroyPrepare(&stmt)
			return fail(c.failure(ctx, query, msg))
		}
		if last {
			if err := bindArgs(stmt, args); err != nil {
				duck.DestroyPrepare(&stmt)
				return fail(err)
			}
		}
		var res duck.Result
		var state duck.State
		if last && stream {
			state = duck.ExecutePreparedStreaming(stmt, &res)
		} else {
			state = duck.ExecutePrepared(stmt, &res)
		}
		if state == duck.StateError {
			err := c.failure(ctx, query, duck.ResultError(&res))
			duck.DestroyResult(&res)
			duck.DestroyPrepare(&stmt)
			return fail(err)
		}
		if !last {
			duck.DestroyResult(&res)
			duck.DestroyPrepare(&stmt)
			continue
		}
		r, err := newResultReader(c, ctx, query, stmt, res, intr)
		if err != nil {
			return fail(err)
		}
		c.active = r
		return r, nil
	}
	panic("unreachable: no statements after a non-empty extraction")
}

// interrupter interrupts a DuckDB connection when a context is done, until
// stopped. DuckDB clears a pending interrupt when a statement (or a phase
// of one) starts, so it interrupts repeatedly.
type interrupter struct {
	quit chan struct{}
	done chan struct{}
}

const interruptInterval = 10 * time.Millisecond

// startInterrupter starts the interrupter goroutine; stop ends it and waits
// for it.
func startInterrupter(ctx context.Context, conn duck.Connection) *interrupter {
	if ctx.Done() == nil {
		return nil
	}
	i := &interrupter{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(i.done)
		select {
		case <-ctx.Done():
		case <-i.quit:
			return
		}
		t := time.NewTicker(interruptInterval)
		defer t.Stop()
		for {
			duck.Interrupt(conn)
			select {
			case <-i.quit:
				return
			case <-t.C:
			}
		}
	}()
	return i
}

func (i *interrupter) stop() {
	if i == nil {
		return
	}
	close(i.quit)
	<-i.done
}
