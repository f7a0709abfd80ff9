package flightsql

import (
	"context"
	"encoding/json"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/minkdb/mink/sqlfront"
)

// statementTicket is the handle inside a statement query's
// TicketStatementQuery. Tickets are stateless: DoGet plans SQL again, as
// the caller, on whichever node gets it. Ran marks a statement without
// rows that GetFlightInfo already executed: its ticket reads nothing.
type statementTicket struct {
	SQL string `json:"sql,omitempty"`
	Ran bool   `json:"ran,omitempty"`
}

func (t statementTicket) encode() ([]byte, error) {
	handle, err := json.Marshal(t)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "encode ticket: %v", err)
	}
	return flightsql.CreateStatementQueryTicket(handle)
}

// emptySchema is the schema of a statement that returns no rows.
var emptySchema = arrow.NewSchema(nil, nil)

// flightInfo is the FlightInfo of a statement: its schema and one
// endpoint, on this same service (no location), reading ticket.
func (s *Server) flightInfo(desc *flight.FlightDescriptor, schema *arrow.Schema, ticket []byte) *flight.FlightInfo {
	if schema == nil {
		schema = emptySchema
	}
	return &flight.FlightInfo{
		Schema:           flight.SerializeSchema(schema, s.alloc),
		FlightDescriptor: desc,
		Endpoint:         []*flight.FlightEndpoint{{Ticket: &flight.Ticket{Ticket: ticket}}},
		TotalRecords:     -1,
		TotalBytes:       -1,
	}
}

func noTransactions(txn []byte) error {
	if len(txn) > 0 {
		return status.Error(codes.Unimplemented, "Flight SQL transactions are not supported by mink: every statement commits on its own")
	}
	return nil
}

// GetFlightInfoStatement plans a query and returns its schema and a
// ticket that runs it. A statement that returns no rows (DDL, DML without
// RETURNING: clients such as ADBC run every statement as a query) runs
// here, and its ticket reads an empty result.
func (s *Server) GetFlightInfoStatement(ctx context.Context, cmd flightsql.StatementQuery, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	if err := noTransactions(cmd.GetTransactionId()); err != nil {
		return nil, err
	}
	sess, _, err := s.session(ctx)
	if err != nil {
		return nil, err
	}
	defer sess.Close()
	p, err := sess.Prepare(ctx, cmd.GetQuery(), nil)
	if err != nil {
		return nil, toStatus(err)
	}
	defer p.Close()
	t := statementTicket{SQL: cmd.GetQuery()}
	if p.Schema() == nil {
		res, err := p.Execute(ctx, nil)
		if err == nil {
			_, err = sqlfront.Drain(res)
		}
		if err != nil {
			return nil, toStatus(err)
		}
		t = statementTicket{Ran: true}
	}
	ticket, err := t.encode()
	if err != nil {
		return nil, err
	}
	return s.flightInfo(desc, p.Schema(), ticket), nil
}

// GetSchemaStatement plans a query and returns its schema.
func (s *Server) GetSchemaStatement(ctx context.Context, cmd flightsql.StatementQuery, _ *flight.FlightDescriptor) (*flight.SchemaResult, error) {
	if err := noTransactions(cmd.GetTransactionId()); err != nil {
		return nil, err
	}
	sess, _, err := s.session(ctx)
	if err != nil {
		return nil, err
	}
	defer sess.Close()
	p, err := sess.Prepare(ctx, cmd.GetQuery(), nil)
	if err != nil {
		return nil, toStatus(err)
	}
	defer p.Close()
	schema := p.Schema()
	if schema == nil {
		schema = emptySchema
	}
	return &flight.SchemaResult{Schema: flight.SerializeSchema(schema, s.alloc)}, nil
}

// DoGetStatement runs the ticket's query in a new session and streams its
// batches as the engine makes them.
func (s *Server) DoGetStatement(ctx context.Context, ticket flightsql.StatementQueryTicket) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	var t statementTicket
	if err := json.Unmarshal(ticket.GetStatementHandle(), &t); err != nil {
		return nil, nil, status.Errorf(codes.InvalidArgument, "statement ticket: %v", err)
	}
	if t.Ran {
		return emptyStream()
	}
	sess, _, err := s.session(ctx)
	if err != nil {
		return nil, nil, err
	}
	p, err := sess.Prepare(ctx, t.SQL, nil)
	if err != nil {
		sess.Close()
		return nil, nil, toStatus(err)
	}
	res, err := p.Execute(ctx, nil)
	if err != nil {
		p.Close()
		sess.Close()
		return nil, nil, toStatus(err)
	}
	if res.Rows == nil {
		p.Close()
		sess.Close()
		return emptyStream()
	}
	return res.Rows.Schema(), s.stream(ctx, res.Rows, func() { p.Close(); sess.Close() }), nil
}

// DoPutCommandStatementUpdate runs a statement for its effect and returns
// the rows it affected (INSERT, UPDATE, DELETE; 0 for DDL).
func (s *Server) DoPutCommandStatementUpdate(ctx context.Context, cmd flightsql.StatementUpdate) (int64, error) {
	if err := noTransactions(cmd.GetTransactionId()); err != nil {
		return 0, err
	}
	sess, _, err := s.session(ctx)
	if err != nil {
		return 0, err
	}
	defer sess.Close()
	p, err := sess.Prepare(ctx, cmd.GetQuery(), nil)
	if err != nil {
		return 0, toStatus(err)
	}
	defer p.Close()
	res, err := p.Execute(ctx, nil)
	if err != nil {
		return 0, toStatus(err)
	}
	n, err := sqlfront.Drain(res)
	if err != nil {
		return 0, toStatus(err)
	}
	return n, nil
}

func emptyStream() (*arrow.Schema, <-chan flight.StreamChunk, error) {
	ch := make(chan flight.StreamChunk)
	close(ch)
	return emptySchema, ch, nil
}

// stream sends rdr's batches on the returned channel, then an error chunk
// if the result failed part-way, and calls done once rdr is released. The
// goroutine ends when the result does or ctx is done (the engine stops the
// statement then).
func (s *Server) stream(ctx context.Context, rdr array.RecordReader, done func()) <-chan flight.StreamChunk {
	ch := make(chan flight.StreamChunk, 1)
	go func() {
		defer close(ch)
		defer done()
		defer rdr.Release()
		for rdr.Next() {
			rec := rdr.RecordBatch()
			rec.Retain()
			select {
			case ch <- flight.StreamChunk{Data: rec}:
			case <-ctx.Done():
				rec.Release()
				return
			}
		}
		if err := rdr.Err(); err != nil {
			select {
			case ch <- flight.StreamChunk{Err: toStatus(err)}:
			case <-ctx.Done():
			}
		}
	}()
	return ch
}
