package flightsql

import (
	"context"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"
)

// sqlTypePrefix begins the type URL of every Flight SQL command in an Any.
const sqlTypePrefix = "type.googleapis.com/arrow.flight.protocol.sql."

// sqlActions are the action types of Flight SQL (and of Flight's own
// session and cancel actions, which only Flight SQL clients send).
var sqlActions = map[string]bool{
	flightsql.CreatePreparedStatementActionType:     true,
	flightsql.ClosePreparedStatementActionType:      true,
	flightsql.CreatePreparedSubstraitPlanActionType: true,
	flightsql.CancelQueryActionType:                 true,
	flightsql.BeginSavepointActionType:              true,
	flightsql.BeginTransactionActionType:            true,
	flightsql.EndTransactionActionType:              true,
	flightsql.EndSavepointActionType:                true,
	flight.CancelFlightInfoActionType:               true,
	flight.RenewFlightEndpointActionType:            true,
	flight.SetSessionOptionsActionType:              true,
	flight.GetSessionOptionsActionType:              true,
	flight.CloseSessionActionType:                   true,
}

// router serves one Flight listener for two servers: Flight SQL requests
// go to sql, the rest to other (flightsvc.Service).
type router struct {
	flight.BaseFlightServer
	sql   flight.FlightServer
	other flight.FlightServer
}

// Route returns the handler of the Flight listener: Flight SQL to s, the
// rest to other (flightsvc.Config.Route).
func (s *Server) Route(other flight.FlightServer) flight.FlightServer {
	return &router{sql: flightsql.NewFlightServer(s), other: other}
}

// sqlCommand reports whether b is an Any holding a Flight SQL message, and
// fails with Unimplemented for one of a type this server does not know.
func sqlCommand(b []byte) (bool, error) {
	if len(b) == 0 {
		return false, nil
	}
	var a anypb.Any
	if err := proto.Unmarshal(b, &a); err != nil || !strings.HasPrefix(a.GetTypeUrl(), sqlTypePrefix) {
		return false, nil
	}
	if _, err := protoregistry.GlobalTypes.FindMessageByURL(a.GetTypeUrl()); err != nil {
		return true, status.Errorf(codes.Unimplemented, "Flight SQL command %s is not supported by mink", strings.TrimPrefix(a.GetTypeUrl(), "type.googleapis.com/"))
	}
	return true, nil
}

func descriptorCommand(d *flight.FlightDescriptor) (bool, error) {
	if d == nil || d.Type != flight.DescriptorCMD {
		return false, nil
	}
	return sqlCommand(d.Cmd)
}

func (r *router) Handshake(stream flight.FlightService_HandshakeServer) error {
	return r.other.Handshake(stream)
}

func (r *router) ListFlights(c *flight.Criteria, stream flight.FlightService_ListFlightsServer) error {
	return r.other.ListFlights(c, stream)
}

func (r *router) GetFlightInfo(ctx context.Context, d *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	if ok, err := descriptorCommand(d); err != nil {
		return nil, err
	} else if ok {
		return r.sql.GetFlightInfo(ctx, d)
	}
	return r.other.GetFlightInfo(ctx, d)
}

func (r *router) PollFlightInfo(ctx context.Context, d *flight.FlightDescriptor) (*flight.PollInfo, error) {
	if ok, err := descriptorCommand(d); err != nil {
		return nil, err
	} else if ok {
		return r.sql.PollFlightInfo(ctx, d)
	}
	return r.other.PollFlightInfo(ctx, d)
}

func (r *router) GetSchema(ctx context.Context, d *flight.FlightDescriptor) (*flight.SchemaResult, error) {
	if ok, err := descriptorCommand(d); err != nil {
		return nil, err
	} else if ok {
		return r.sql.GetSchema(ctx, d)
	}
	return r.other.GetSchema(ctx, d)
}

func (r *router) DoGet(t *flight.Ticket, stream flight.FlightService_DoGetServer) error {
	if ok, err := sqlCommand(t.GetTicket()); err != nil {
		return err
	} else if ok {
		return r.sql.DoGet(t, stream)
	}
	return r.other.DoGet(t, stream)
}

// DoPut reads the first message, whose descriptor says who serves the
// stream, and hands the stream on with that message put back.
func (r *router) DoPut(stream flight.FlightService_DoPutServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	peeked := &peekedPut{FlightService_DoPutServer: stream, first: first}
	if ok, err := descriptorCommand(first.GetFlightDescriptor()); err != nil {
		return err
	} else if ok {
		return r.sql.DoPut(peeked)
	}
	return r.other.DoPut(peeked)
}

func (r *router) DoExchange(stream flight.FlightService_DoExchangeServer) error {
	return r.other.DoExchange(stream)
}

func (r *router) DoAction(a *flight.Action, stream flight.FlightService_DoActionServer) error {
	if sqlActions[a.GetType()] {
		return r.sql.DoAction(a, stream)
	}
	return r.other.DoAction(a, stream)
}

// ListActions lists mink's actions, then Flight SQL's.
func (r *router) ListActions(e *flight.Empty, stream flight.FlightService_ListActionsServer) error {
	if err := r.other.ListActions(e, stream); err != nil {
		return err
	}
	return r.sql.ListActions(e, stream)
}

// peekedPut is a DoPut stream whose first message was read already.
type peekedPut struct {
	flight.FlightService_DoPutServer
	first *flight.FlightData
}

func (p *peekedPut) Recv() (*flight.FlightData, error) {
	if p.first != nil {
		m := p.first
		p.first = nil
		return m, nil
	}
	return p.FlightService_DoPutServer.Recv()
}
