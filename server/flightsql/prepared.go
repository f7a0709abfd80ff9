package flightsql

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	pb "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/minkdb/mink/access"
	"github.com/minkdb/mink/sqlfront"
)

// prepared is an open prepared statement: a session of its own, the
// statement, and the parameter rows last bound to it (DoPut).
type prepared struct {
	handle string
	id     access.Identity
	sql    string

	// busy counts calls using the statement; last is when the last one
	// ended (UnixNano). The janitor closes only statements not busy.
	busy atomic.Int32
	last atomic.Int64

	// mu is held by a call using the statement, by a DoGet until its
	// stream ends. It guards the fields below.
	mu     sync.Mutex
	sess   *sqlfront.ArrowSession
	stmt   *sqlfront.ArrowStatement
	params [][]any
	closed bool
}

func (p *prepared) idleSince(now time.Time) time.Duration {
	if p.busy.Load() > 0 {
		return 0
	}
	return now.Sub(time.Unix(0, p.last.Load()))
}

// release ends a call that acquire began.
func (p *prepared) release() {
	p.last.Store(time.Now().UnixNano())
	p.busy.Add(-1)
	p.mu.Unlock()
}

func (p *prepared) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	p.stmt.Close()
	p.sess.Close()
}

// acquire returns the caller's prepared statement of handle, locked;
// release unlocks it. Another role's handle is as unknown as a closed one.
func (s *Server) acquire(ctx context.Context, handle []byte) (*prepared, error) {
	id := s.identity(ctx)
	s.mu.Lock()
	p := s.mu.prepared[string(handle)]
	if p != nil {
		p.busy.Add(1)
	}
	s.mu.Unlock()
	if p == nil || p.id.Role != id.Role {
		if p != nil {
			p.busy.Add(-1)
		}
		return nil, status.Error(codes.NotFound, "no such prepared statement: it was closed, or idle for too long, or made by another role")
	}
	p.mu.Lock()
	if p.closed {
		p.busy.Add(-1)
		p.mu.Unlock()
		return nil, status.Error(codes.NotFound, "no such prepared statement: it was closed")
	}
	return p, nil
}

// CreatePreparedStatement prepares a statement in a session of its own
// and returns its result and parameter schemas.
func (s *Server) CreatePreparedStatement(ctx context.Context, req flightsql.ActionCreatePreparedStatementRequest) (flightsql.ActionCreatePreparedStatementResult, error) {
	var out flightsql.ActionCreatePreparedStatementResult
	if err := noTransactions(req.GetTransactionId()); err != nil {
		return out, err
	}
	sess, id, err := s.session(ctx)
	if err != nil {
		return out, err
	}
	stmt, err := sess.Prepare(ctx, req.GetQuery(), nil)
	if err != nil {
		sess.Close()
		return out, toStatus(err)
	}
	p := &prepared{handle: newHandle(), id: id, sql: req.GetQuery(), sess: sess, stmt: stmt}
	p.last.Store(time.Now().UnixNano())
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		p.close()
		return out, status.Error(codes.Unavailable, "the node is shutting down")
	}
	s.mu.prepared[p.handle] = p
	s.mu.Unlock()
	out.Handle = []byte(p.handle)
	out.DatasetSchema = stmt.Schema()
	if out.DatasetSchema == nil {
		out.DatasetSchema = emptySchema
	}
	out.ParameterSchema = stmt.ParamSchema()
	return out, nil
}

// ClosePreparedStatement closes a prepared statement (after a call still
// using it ends).
func (s *Server) ClosePreparedStatement(ctx context.Context, req flightsql.ActionClosePreparedStatementRequest) error {
	p, err := s.acquire(ctx, req.GetPreparedStatementHandle())
	if err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.mu.prepared, p.handle)
	s.mu.Unlock()
	p.release()
	p.close()
	return nil
}

// bind reads the parameter batches of a DoPut: each row is one execution's
// parameters. A batch whose column types differ from the statement's
// parameter types prepares the statement again for the batch's types, as
// a Postgres client's Parse with parameter types would.
//
// REQUIRES: p.mu held.
func (p *prepared) bind(ctx context.Context, rdr flight.MessageReader) ([][]any, error) {
	schema := rdr.Schema()
	if schema == nil || schema.NumFields() == 0 {
		for rdr.Next() {
		}
		return nil, nil
	}
	want := p.stmt.ParamSchema()
	if schema.NumFields() != want.NumFields() {
		return nil, status.Errorf(codes.InvalidArgument, "the statement has %d parameters, the parameter batch %d columns", want.NumFields(), schema.NumFields())
	}
	same := true
	for i, f := range schema.Fields() {
		if !arrow.TypeEqual(f.Type, want.Field(i).Type) && f.Type.ID() != arrow.NULL {
			same = false
		}
	}
	if !same {
		stmt, err := p.sess.Prepare(ctx, p.sql, sqlfront.ArrowParamTypes(schema))
		if err != nil {
			return nil, toStatus(err)
		}
		p.stmt.Close()
		p.stmt = stmt
	}
	var rows [][]any
	for rdr.Next() {
		rec := rdr.RecordBatch()
		for r := 0; r < int(rec.NumRows()); r++ {
			rows = append(rows, sqlfront.ArrowParams(rec, r))
		}
	}
	if err := rdr.Err(); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "read the parameter batches: %v", err)
	}
	return rows, nil
}

// DoPutPreparedStatementQuery binds parameters for the next executions of
// a prepared query.
func (s *Server) DoPutPreparedStatementQuery(ctx context.Context, cmd flightsql.PreparedStatementQuery, rdr flight.MessageReader, _ flight.MetadataWriter) ([]byte, error) {
	p, err := s.acquire(ctx, cmd.GetPreparedStatementHandle())
	if err != nil {
		return nil, err
	}
	defer p.release()
	rows, err := p.bind(ctx, rdr)
	if err != nil {
		return nil, err
	}
	p.params = rows
	return cmd.GetPreparedStatementHandle(), nil
}

// queryParams are the parameters of one execution of a prepared query.
//
// REQUIRES: p.mu held.
func (p *prepared) queryParams() ([]any, error) {
	n := p.stmt.ParamSchema().NumFields()
	switch {
	case len(p.params) > 1:
		return nil, status.Errorf(codes.InvalidArgument, "a prepared query runs with one row of parameters; %d rows are bound", len(p.params))
	case len(p.params) == 1:
		return p.params[0], nil
	case n > 0:
		return nil, status.Errorf(codes.InvalidArgument, "the statement has %d parameters: bind them (DoPut) before executing it", n)
	}
	return nil, nil
}

// GetFlightInfoPreparedStatement returns a prepared query's schema and a
// ticket that runs it with the bound parameters. A statement without rows
// runs here (see GetFlightInfoStatement).
func (s *Server) GetFlightInfoPreparedStatement(ctx context.Context, cmd flightsql.PreparedStatementQuery, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	p, err := s.acquire(ctx, cmd.GetPreparedStatementHandle())
	if err != nil {
		return nil, err
	}
	defer p.release()
	if p.stmt.Schema() == nil {
		if _, err := p.update(ctx); err != nil {
			return nil, err
		}
		ticket, err := statementTicket{Ran: true}.encode()
		if err != nil {
			return nil, err
		}
		return s.flightInfo(desc, nil, ticket), nil
	}
	var ticket anypb.Any
	if err := ticket.MarshalFrom(&pb.CommandPreparedStatementQuery{PreparedStatementHandle: []byte(p.handle)}); err != nil {
		return nil, status.Errorf(codes.Internal, "encode ticket: %v", err)
	}
	b, err := proto.Marshal(&ticket)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "encode ticket: %v", err)
	}
	return s.flightInfo(desc, p.stmt.Schema(), b), nil
}

// GetSchemaPreparedStatement returns a prepared statement's result schema.
func (s *Server) GetSchemaPreparedStatement(ctx context.Context, cmd flightsql.PreparedStatementQuery, _ *flight.FlightDescriptor) (*flight.SchemaResult, error) {
	p, err := s.acquire(ctx, cmd.GetPreparedStatementHandle())
	if err != nil {
		return nil, err
	}
	defer p.release()
	schema := p.stmt.Schema()
	if schema == nil {
		schema = emptySchema
	}
	return &flight.SchemaResult{Schema: flight.SerializeSchema(schema, s.alloc)}, nil
}

// DoGetPreparedStatement runs a prepared query with its bound parameters
// and streams the result. The statement stays in use until the stream
// ends.
func (s *Server) DoGetPreparedStatement(ctx context.Context, cmd flightsql.PreparedStatementQuery) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	p, err := s.acquire(ctx, cmd.GetPreparedStatementHandle())
	if err != nil {
		return nil, nil, err
	}
	params, err := p.queryParams()
	if err != nil {
		p.release()
		return nil, nil, err
	}
	res, err := p.stmt.Execute(ctx, params)
	if err != nil {
		p.release()
		return nil, nil, toStatus(err)
	}
	if res.Rows == nil {
		p.release()
		return emptyStream()
	}
	return res.Rows.Schema(), s.stream(ctx, res.Rows, p.release), nil
}

// DoPutPreparedStatementUpdate runs a prepared statement once per row of
// the parameter batches (once if it has no parameters) and returns the
// rows affected in all. Every execution commits on its own: a failure
// leaves the earlier ones in place.
func (s *Server) DoPutPreparedStatementUpdate(ctx context.Context, cmd flightsql.PreparedStatementUpdate, rdr flight.MessageReader) (int64, error) {
	p, err := s.acquire(ctx, cmd.GetPreparedStatementHandle())
	if err != nil {
		return 0, err
	}
	defer p.release()
	rows, err := p.bind(ctx, rdr)
	if err != nil {
		return 0, err
	}
	if rows != nil {
		p.params = rows
	}
	return p.update(ctx)
}

// update runs the statement once per bound row for its effect.
//
// REQUIRES: p.mu held.
func (p *prepared) update(ctx context.Context) (int64, error) {
	runs := p.params
	if len(runs) == 0 {
		if n := p.stmt.ParamSchema().NumFields(); n > 0 {
			return 0, status.Errorf(codes.InvalidArgument, "the statement has %d parameters: bind them (DoPut) before executing it", n)
		}
		runs = [][]any{nil}
	}
	var total int64
	for i, params := range runs {
		res, err := p.stmt.Execute(ctx, params)
		var n int64
		if err == nil {
			n, err = sqlfront.Drain(res)
		}
		if err != nil {
			if len(runs) > 1 {
				err = fmt.Errorf("parameter row %d of %d (the rows before it were applied): %w", i+1, len(runs), err)
			}
			return total, toStatus(err)
		}
		total += n
	}
	return total, nil
}
