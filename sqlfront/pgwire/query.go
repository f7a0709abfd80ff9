package pgwire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgproto3"
)

// stmtEntry is a prepared statement of the connection: a named one, the
// unnamed one, or a statement of a simple Query.
type stmtEntry struct {
	name      string
	ps        PreparedStatement // nil for an empty query
	paramOIDs []uint32          // as the client is told (0 resolved to text)
	columns   []Column
	// refs counts the holders: the client (while the statement is in
	// conn.stmts, or a simple Query runs it) and every portal made from it.
	// The PreparedStatement is closed when it drops to 0.
	refs int
}

// portal is a bound statement, with the rows of its execution once it ran.
type portal struct {
	name    string
	stmt    *stmtEntry
	params  []any
	formats []int16 // result format per column of stmt.columns

	started bool
	done    bool
	rows    Rows
	columns []Column // rows.Columns()
	tag     string   // Result.Tag
}

// simpleQuery runs a Query message: every statement of the string in turn,
// stopping at the first error, then the synchronisation point and
// ReadyForQuery.
func (c *conn) simpleQuery(query string) error {
	// Like PostgreSQL, a Query message destroys the unnamed statement and
	// portal.
	c.dropPortal("")
	c.dropStatement("")
	ctx := c.beginQuery()
	err := c.runSimple(ctx, query)
	c.endQuery()
	if err != nil {
		return err
	}
	if err := c.syncSession(); err != nil {
		return err
	}
	return c.readyForQuery()
}

func (c *conn) runSimple(ctx context.Context, query string) error {
	stmts, err := c.session.Split(ctx, query)
	if err != nil {
		return c.sendError(ctx, err)
	}
	if len(stmts) == 0 {
		c.be.Send(&pgproto3.EmptyQueryResponse{})
		return nil
	}
	for _, st := range stmts {
		ok, err := c.runSimpleStatement(ctx, query, st, len(stmts) == 1)
		if err != nil {
			return err
		}
		if !ok {
			return nil // the rest of the string is skipped
		}
		if err := ctx.Err(); err != nil {
			return c.sendError(ctx, err)
		}
	}
	return nil
}

// runSimpleStatement prepares and runs one statement of a Query message. ok
// is false when an error was sent.
func (c *conn) runSimpleStatement(ctx context.Context, query string, st Statement, only bool) (ok bool, fatal error) {
	// Positions in this statement's errors count from the start of query.
	if st.Offset > 0 && st.Offset <= len(query) {
		c.errPosShift = int32(utf8.RuneCountInString(query[:st.Offset]))
		defer func() { c.errPosShift = 0 }()
	}
	e, err := c.prepare(ctx, st.SQL, nil)
	if err != nil {
		return false, c.sendError(ctx, err)
	}
	defer e.release()
	if e.ps == nil && !only {
		// An empty statement among others (a comment between two
		// semicolons) produces nothing, as in PostgreSQL.
		return true, nil
	}
	if n := len(e.paramOIDs); n > 0 {
		return false, c.sendError(ctx, Errorf(CodeUndefinedParameter, "there is no parameter $%d", n))
	}
	p := &portal{stmt: e, formats: make([]int16, len(e.columns))}
	e.refs++
	defer p.close()
	ok, fatal = c.execute(ctx, p, 0, true)
	if ok {
		c.afterStatement(nil)
	}
	return ok, fatal
}

// prepare prepares a statement through the session.
func (c *conn) prepare(ctx context.Context, sql string, paramOIDs []uint32) (*stmtEntry, error) {
	if strings.Trim(sql, " \t\r\n\f;") == "" {
		return &stmtEntry{refs: 1}, nil
	}
	ps, err := c.session.Prepare(ctx, sql, paramOIDs)
	if errors.Is(err, ErrEmptyQuery) {
		return &stmtEntry{refs: 1}, nil
	}
	if err != nil {
		return nil, err
	}
	if ps == nil {
		panic(fmt.Sprintf("pgwire: Session.Prepare(%q) returned a nil statement and no error", sql))
	}
	e := &stmtEntry{ps: ps, columns: ps.Columns(), refs: 1}
	for _, oid := range ps.ParamOIDs() {
		if oid == 0 {
			oid = textOID
		}
		e.paramOIDs = append(e.paramOIDs, oid)
	}
	return e, nil
}

const textOID = 25

// release drops a reference; the statement is closed with the last one.
func (e *stmtEntry) release() {
	e.refs--
	switch {
	case e.refs < 0:
		panic(fmt.Sprintf("pgwire: statement %q released %d times too often", e.name, -e.refs))
	case e.refs == 0 && e.ps != nil:
		e.ps.Close()
	}
}

// close ends a portal: its rows are closed and its statement released.
func (p *portal) close() {
	if p.rows != nil {
		p.rows.Close()
		p.rows = nil
	}
	p.stmt.release()
}

// dropStatement removes a client's prepared statement, if it exists.
func (c *conn) dropStatement(name string) {
	e, ok := c.stmts[name]
	if !ok {
		return
	}
	delete(c.stmts, name)
	e.release()
}

// dropPortal removes a portal, if it exists.
func (c *conn) dropPortal(name string) {
	p, ok := c.portals[name]
	if !ok {
		return
	}
	delete(c.portals, name)
	p.close()
}

// afterStatement follows a change of TimeZone at once and keeps the changed
// settings for the ParameterStatus messages sent before ReadyForQuery (a
// session may return a change only once). It also notices the end of a
// transaction block: PostgreSQL destroys the portals of a transaction at
// COMMIT or ROLLBACK. current, the portal that ran the statement, survives.
func (c *conn) afterStatement(current *portal) {
	if pr, ok := c.session.(ParamReporter); ok {
		if params := pr.ChangedParams(); len(params) > 0 {
			c.applyTimeZone(params)
			if c.pendingParams == nil {
				c.pendingParams = map[string]string{}
			}
			maps.Copy(c.pendingParams, params)
		}
	}
	st := c.session.TxStatus()
	if c.txStatus != TxIdle && st == TxIdle {
		for name, p := range c.portals {
			if p != current {
				c.dropPortal(name)
			}
		}
	}
	c.txStatus = st
}

// syncSession runs the session's synchronisation point; outside a
// transaction block it ends the implicit transaction, and with it every
// portal.
func (c *conn) syncSession() error {
	ctx := c.beginQuery()
	err := c.session.Sync(ctx, c.failed)
	c.endQuery()
	c.failed = false
	if err != nil {
		if fatal := c.sendError(ctx, err); fatal != nil {
			return fatal
		}
		c.failed = false
	}
	if c.session.TxStatus() == TxIdle {
		for name := range c.portals {
			c.dropPortal(name)
		}
	}
	return nil
}

// execute runs portal p: it executes the statement on first use, then sends
// up to maxRows rows (0: all). ok is false when an error was sent; fatal is
// set when the connection must close. simple selects the simple protocol's
// RowDescription before the rows.
func (c *conn) execute(ctx context.Context, p *portal, maxRows int64, simple bool) (ok bool, fatal error) {
	if p.stmt.ps == nil {
		c.be.Send(&pgproto3.EmptyQueryResponse{})
		return true, nil
	}
	if p.done {
		// Executing a finished portal again returns no more rows.
		if p.rows != nil || p.columns != nil {
			c.be.Send(&pgproto3.CommandComplete{CommandTag: []byte(p.tag + " 0")})
		} else {
			c.be.Send(&pgproto3.CommandComplete{CommandTag: []byte(p.tag)})
		}
		return true, nil
	}
	if !p.started {
		p.started = true
		res, err := p.stmt.ps.Execute(ctx, p.params)
		if err != nil {
			p.done = true
			return false, c.sendError(ctx, err)
		}
		for _, n := range res.Notices {
			c.be.Send(n.notice())
		}
		switch {
		case res.CopyIn != nil:
			p.done = true
			return c.copyIn(ctx, res.CopyIn)
		case res.CopyOut != nil:
			p.done = true
			return c.copyOut(ctx, res.CopyOut)
		case res.Rows == nil:
			p.done, p.tag = true, res.Tag
			c.be.Send(&pgproto3.CommandComplete{CommandTag: []byte(res.Tag)})
			return true, nil
		}
		p.rows, p.tag = res.Rows, res.Tag
		if p.tag == "" {
			p.tag = "SELECT"
		}
		p.columns = p.rows.Columns()
		if simple {
			p.formats = make([]int16, len(p.columns))
			c.be.Send(rowDescription(p.columns, p.formats))
		} else if len(p.columns) != len(p.formats) {
			p.done = true
			return false, c.sendError(ctx, Errorf(CodeInternalError,
				"statement returned %d columns but was described with %d", len(p.columns), len(p.formats)))
		}
	}
	var sent int64
	for maxRows <= 0 || sent < maxRows {
		row, err := p.rows.Next(ctx)
		if err == io.EOF {
			p.done = true
			p.rows.Close()
			p.rows = nil
			c.tagBuf = strconv.AppendInt(append(append(c.tagBuf[:0], p.tag...), ' '), sent, 10)
			c.cmdComplete.CommandTag = c.tagBuf
			c.be.Send(&c.cmdComplete)
			return true, nil
		}
		if err == nil {
			err = c.sendDataRow(p.columns, p.formats, row)
		}
		if err != nil {
			p.done = true
			p.rows.Close()
			p.rows = nil
			if errors.Is(err, errCloseConn) {
				return false, err
			}
			return false, c.sendError(ctx, err)
		}
		sent++
	}
	c.be.Send(&pgproto3.PortalSuspended{})
	return true, nil
}

// sendDataRow encodes and sends one row.
func (c *conn) sendDataRow(columns []Column, formats []int16, row []any) error {
	if len(row) != len(columns) {
		return Errorf(CodeInternalError, "row has %d values but the result has %d columns", len(row), len(columns))
	}
	buf := c.rowBuf[:0]
	offsets := c.rowOffsets[:0]
	for i, v := range row {
		start := len(buf)
		out, null, err := c.codec.encode(buf, columns[i].TypeOID, formats[i], v)
		if err != nil {
			return &Error{Code: CodeInternalError, Message: fmt.Sprintf("cannot encode column %q: %v", columns[i].Name, err), Err: err}
		}
		if null {
			offsets = append(offsets, -1, -1)
			continue
		}
		buf = out
		offsets = append(offsets, start, len(buf))
	}
	values := c.rowValues[:0]
	for i := 0; i < len(offsets); i += 2 {
		if offsets[i] < 0 {
			values = append(values, nil)
		} else {
			values = append(values, buf[offsets[i]:offsets[i+1]])
		}
	}
	c.dataRow.Values = values
	c.be.Send(&c.dataRow)
	c.rowBuf, c.rowOffsets, c.rowValues = buf, offsets, values
	if len(buf) > 1<<20 {
		c.rowBuf = nil // do not keep a huge row's buffer
	}
	return c.maybeFlush(len(buf) + 4*len(row) + 7)
}

func rowDescription(columns []Column, formats []int16) *pgproto3.RowDescription {
	fields := make([]pgproto3.FieldDescription, len(columns))
	for i, col := range columns {
		size := col.TypeSize
		if size == 0 {
			size = typeSize(col.TypeOID)
		}
		mod := col.TypeMod
		if mod == 0 {
			mod = -1 // a zero Column has no modifier
		}
		fields[i] = pgproto3.FieldDescription{
			Name:                 []byte(col.Name),
			TableOID:             col.TableOID,
			TableAttributeNumber: uint16(col.ColumnAttr),
			DataTypeOID:          col.TypeOID,
			DataTypeSize:         size,
			TypeModifier:         mod,
		}
		if formats != nil {
			fields[i].Format = formats[i]
		}
	}
	return &pgproto3.RowDescription{Fields: fields}
}
