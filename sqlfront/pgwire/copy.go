package pgwire

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5/pgproto3"
)

const defaultCopyBatchRows = 1024

// copyIn runs the COPY FROM STDIN sub-protocol: CopyInResponse, then
// CopyData until CopyDone or CopyFail. Rows reach the sink in batches; the
// sink's Commit runs only when the whole input parsed. On the first bad row
// the client gets the error at once and, as in PostgreSQL, the CopyData it
// still sends is dropped by the main loop.
func (c *conn) copyIn(ctx context.Context, req *CopyIn) (ok bool, fatal error) {
	if req.Sink == nil {
		return false, c.sendError(ctx, Errorf(CodeInternalError, "COPY FROM STDIN without a sink"))
	}
	// Exactly one of Commit and Abort reaches the sink, even when handler
	// code panics below.
	settled := false
	abort := func(cause error) {
		settled = true
		req.Sink.Abort(context.WithoutCancel(ctx), cause)
	}
	defer func() {
		if !settled {
			abort(errors.New("COPY aborted by an internal error"))
		}
	}()
	if err := req.Options.Validate(); err != nil {
		abort(err)
		return false, c.sendError(ctx, err)
	}
	opts := req.Options.withDefaults()
	format := textFormat
	if opts.Format == CopyBinary {
		format = binaryFormat
	}
	colFormats := make([]uint16, len(req.Columns))
	for i := range colFormats {
		colFormats[i] = uint16(format)
	}
	c.be.Send(&pgproto3.CopyInResponse{OverallFormat: byte(format), ColumnFormatCodes: colFormats})
	if err := c.flush(); err != nil {
		abort(err)
		return false, err
	}

	batchRows := req.BatchRows
	if batchRows <= 0 {
		batchRows = defaultCopyBatchRows
	}
	parser := newCopyParser(opts, req.Columns, c.srv.cfg.MaxMessageSize)
	batch := &CopyBatch{}
	var total int64
	writeBatch := func() error {
		if len(batch.Rows) == 0 {
			return nil
		}
		total += int64(len(batch.Rows))
		b := batch
		batch = &CopyBatch{Rows: make([][]any, 0, len(b.Rows)), Lines: make([]int64, 0, len(b.Lines))}
		return req.Sink.WriteRows(ctx, b)
	}
	emit := func(line int64, fields [][]byte) error {
		row := make([]any, len(fields))
		for i, f := range fields {
			v, err := c.codec.decode(req.Columns[i].TypeOID, format, f)
			if err != nil {
				le := &lineError{line: line, column: req.Columns[i].Name, value: f, err: err}
				if format == binaryFormat {
					le.value, le.noValue = nil, true // PostgreSQL quotes no binary value
				}
				return le
			}
			row[i] = v
		}
		batch.Rows = append(batch.Rows, row)
		batch.Lines = append(batch.Lines, line)
		if len(batch.Rows) >= batchRows {
			return writeBatch()
		}
		return nil
	}
	fail := func(err error) (bool, error) {
		e := copyError(ctx, req.Table, err)
		abort(e)
		return false, c.sendError(ctx, e)
	}

	for {
		msg, err := c.be.Receive()
		if err != nil {
			abort(err)
			c.receiveFailed(err)
			return false, errCloseConn
		}
		switch m := msg.(type) {
		case *pgproto3.CopyData:
			if err := ctx.Err(); err != nil {
				return fail(err)
			}
			if err := parser.feed(m.Data, emit); err != nil {
				return fail(err)
			}
		case *pgproto3.CopyDone:
			if err := parser.finish(emit); err != nil {
				return fail(err)
			}
			if err := writeBatch(); err != nil {
				return fail(err)
			}
			if err := ctx.Err(); err != nil {
				return fail(err)
			}
			settled = true
			if err := req.Sink.Commit(ctx, total); err != nil {
				return false, c.sendError(ctx, err)
			}
			c.be.Send(&pgproto3.CommandComplete{CommandTag: fmt.Appendf(nil, "COPY %d", total)})
			return true, nil
		case *pgproto3.CopyFail:
			return fail(Errorf(CodeQueryCanceled, "COPY from stdin failed: %s", m.Message))
		case *pgproto3.Flush, *pgproto3.Sync:
			// PostgreSQL ignores these during COPY IN.
		default:
			return fail(Errorf(CodeProtocolViolation, "unexpected message type %T during COPY from stdin", msg))
		}
	}
}

// copyError gives an error of COPY FROM its "COPY t, line N" context.
func copyError(ctx context.Context, table string, err error) *Error {
	var le *lineError
	if !errors.As(err, &le) {
		return toError(canceled(ctx, err))
	}
	e := *toError(canceled(ctx, le.err))
	if e.Code == CodeQueryCanceled || e.Code == CodeAdminShutdown {
		return &e
	}
	where := "COPY"
	if table != "" {
		where += " " + table
	}
	where += fmt.Sprintf(", line %d", le.line)
	if le.column != "" {
		if le.noValue {
			where += ", column " + le.column
		} else if le.value == nil {
			where += fmt.Sprintf(", column %s: null input", le.column)
		} else {
			v := string(le.value)
			if len(v) > 100 {
				v = v[:100] + "..."
			}
			where += fmt.Sprintf(", column %s: %q", le.column, v)
		}
	}
	if e.Where != "" {
		where = e.Where + "\n" + where
	}
	e.Where = where
	return &e
}

// copyOut runs COPY TO STDOUT: CopyOutResponse, one CopyData per row,
// CopyDone and "COPY n".
func (c *conn) copyOut(ctx context.Context, req *CopyOut) (ok bool, fatal error) {
	if req.Rows == nil {
		return false, c.sendError(ctx, Errorf(CodeInternalError, "COPY TO STDOUT without rows"))
	}
	defer req.Rows.Close()
	if err := req.Options.Validate(); err != nil {
		return false, c.sendError(ctx, err)
	}
	w := &copyWriter{opts: req.Options.withDefaults(), columns: req.Rows.Columns(), codec: c.codec}
	format := textFormat
	if w.opts.Format == CopyBinary {
		format = binaryFormat
	}
	colFormats := make([]uint16, len(w.columns))
	for i := range colFormats {
		colFormats[i] = uint16(format)
	}
	c.be.Send(&pgproto3.CopyOutResponse{OverallFormat: byte(format), ColumnFormatCodes: colFormats})
	if h := w.header(); len(h) > 0 {
		c.be.Send(&pgproto3.CopyData{Data: h})
	}
	var n int64
	var buf []byte
	for {
		row, err := req.Rows.Next(ctx)
		if err == io.EOF {
			break
		}
		if err == nil {
			buf, err = w.appendRow(buf[:0], row)
		}
		if err != nil {
			return false, c.sendError(ctx, err)
		}
		c.be.Send(&pgproto3.CopyData{Data: buf})
		n++
		if err := c.maybeFlush(len(buf) + 5); err != nil {
			return false, err
		}
	}
	if t := w.trailer(); len(t) > 0 {
		c.be.Send(&pgproto3.CopyData{Data: t})
	}
	c.be.Send(&pgproto3.CopyDone{})
	c.be.Send(&pgproto3.CommandComplete{CommandTag: fmt.Appendf(nil, "COPY %d", n)})
	return true, nil
}
