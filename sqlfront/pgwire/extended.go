package pgwire

import (
	"fmt"

	"github.com/jackc/pgx/v5/pgproto3"
)

// The extended query protocol. Every handler here sends its response
// without flushing; output goes out at Sync, Flush, or when a result grows
// large. An error makes the connection discard messages until Sync.

// extError sends an error of the extended protocol and starts discarding
// messages until Sync.
func (c *conn) extError(err error) error {
	c.ignoreTillSync = true
	return c.reportError(toError(err))
}

func (c *conn) handleParse(m *pgproto3.Parse) error {
	if m.Name != "" {
		if _, exists := c.stmts[m.Name]; exists {
			return c.extError(Errorf(CodeDuplicatePreparedStatement, "prepared statement %q already exists", m.Name))
		}
	}
	ctx := c.beginQuery()
	e, err := c.prepare(ctx, m.Query, m.ParameterOIDs)
	c.endQuery()
	if err != nil {
		return c.extError(canceled(ctx, err))
	}
	c.dropStatement(m.Name) // the unnamed statement is replaced
	e.name = m.Name
	c.stmts[m.Name] = e
	c.be.Send(&pgproto3.ParseComplete{})
	return nil
}

func (c *conn) handleBind(m *pgproto3.Bind) error {
	e, ok := c.stmts[m.PreparedStatement]
	if !ok {
		return c.extError(noStatement(m.PreparedStatement))
	}
	if m.DestinationPortal != "" {
		if _, exists := c.portals[m.DestinationPortal]; exists {
			return c.extError(Errorf(CodeDuplicateCursor, "portal %q already exists", m.DestinationPortal))
		}
	}
	nparams := len(e.paramOIDs)
	if len(m.Parameters) != nparams {
		return c.extError(Errorf(CodeProtocolViolation, "bind message supplies %d parameters, but prepared statement %q requires %d",
			len(m.Parameters), m.PreparedStatement, nparams))
	}
	paramFormats, err := expandFormats(m.ParameterFormatCodes, nparams)
	if err != nil {
		return c.extError(Errorf(CodeProtocolViolation, "bind message has %d parameter formats but %d parameters", len(m.ParameterFormatCodes), nparams))
	}
	resultFormats, err := expandFormats(m.ResultFormatCodes, len(e.columns))
	if err != nil {
		return c.extError(Errorf(CodeProtocolViolation, "bind message has %d result formats but query has %d columns", len(m.ResultFormatCodes), len(e.columns)))
	}
	for _, f := range append(paramFormats, resultFormats...) {
		if f != textFormat && f != binaryFormat {
			return c.extError(Errorf(CodeProtocolViolation, "unsupported format code: %d", f))
		}
	}
	params := make([]any, nparams)
	for i, raw := range m.Parameters {
		v, err := c.codec.decode(e.paramOIDs[i], paramFormats[i], raw)
		if err != nil {
			return c.extError(paramError(err, m.DestinationPortal, i, paramFormats[i], raw))
		}
		params[i] = v
	}
	c.dropPortal(m.DestinationPortal) // the unnamed portal is replaced
	e.refs++
	c.portals[m.DestinationPortal] = &portal{name: m.DestinationPortal, stmt: e, params: params, formats: resultFormats}
	c.be.Send(&pgproto3.BindComplete{})
	return nil
}

// expandFormats applies the 0-1-N rule of Bind's format codes: none means
// all text, one applies to all, else one per item.
func expandFormats(codes []int16, n int) ([]int16, error) {
	out := make([]int16, n)
	switch len(codes) {
	case 0:
	case 1:
		for i := range out {
			out[i] = codes[0]
		}
	case n:
		copy(out, codes)
	default:
		return nil, fmt.Errorf("%d format codes for %d items", len(codes), n)
	}
	return out, nil
}

// paramError gives a parameter's decoding error PostgreSQL's context.
func paramError(err error, portalName string, i int, format int16, raw []byte) error {
	e := *toError(err)
	if format == binaryFormat {
		e.Message = fmt.Sprintf("incorrect binary data format in bind parameter %d", i+1)
		return &e
	}
	name := "unnamed portal"
	if portalName != "" {
		name = fmt.Sprintf("portal %q", portalName)
	}
	value := string(raw)
	if len(value) > 64 {
		value = value[:64] + "..."
	}
	e.Where = fmt.Sprintf("%s parameter $%d = '%s'", name, i+1, value)
	return &e
}

func noStatement(name string) *Error {
	if name == "" {
		return Errorf(CodeInvalidSQLStatementName, "unnamed prepared statement does not exist")
	}
	return Errorf(CodeInvalidSQLStatementName, "prepared statement %q does not exist", name)
}

func noPortal(name string) *Error {
	if name == "" {
		return Errorf(CodeInvalidCursorName, "portal \"\" does not exist")
	}
	return Errorf(CodeInvalidCursorName, "portal %q does not exist", name)
}

func (c *conn) handleDescribe(m *pgproto3.Describe) error {
	switch m.ObjectType {
	case 'S':
		e, ok := c.stmts[m.Name]
		if !ok {
			return c.extError(noStatement(m.Name))
		}
		c.be.Send(&pgproto3.ParameterDescription{ParameterOIDs: e.paramOIDs})
		if e.columns == nil {
			c.be.Send(&pgproto3.NoData{})
		} else {
			c.be.Send(rowDescription(e.columns, nil))
		}
	case 'P':
		p, ok := c.portals[m.Name]
		if !ok {
			return c.extError(noPortal(m.Name))
		}
		if p.stmt.columns == nil {
			c.be.Send(&pgproto3.NoData{})
		} else {
			c.be.Send(rowDescription(p.stmt.columns, p.formats))
		}
	default:
		return c.extError(Errorf(CodeProtocolViolation, "invalid DESCRIBE message subtype %d", m.ObjectType))
	}
	return nil
}

func (c *conn) handleExecute(m *pgproto3.Execute) error {
	p, ok := c.portals[m.Portal]
	if !ok {
		return c.extError(noPortal(m.Portal))
	}
	ctx := c.beginQuery()
	ok, fatal := c.execute(ctx, p, int64(m.MaxRows), false)
	c.endQuery()
	if fatal != nil {
		return fatal
	}
	if !ok {
		c.ignoreTillSync = true
		return nil
	}
	c.afterStatement(p)
	return nil
}

func (c *conn) handleClose(m *pgproto3.Close) error {
	switch m.ObjectType {
	case 'S':
		c.dropStatement(m.Name)
	case 'P':
		c.dropPortal(m.Name)
	default:
		return c.extError(Errorf(CodeProtocolViolation, "invalid CLOSE message subtype %d", m.ObjectType))
	}
	c.be.Send(&pgproto3.CloseComplete{})
	return nil
}

func (c *conn) handleSync() error {
	c.ignoreTillSync = false
	if err := c.syncSession(); err != nil {
		return err
	}
	return c.readyForQuery()
}
