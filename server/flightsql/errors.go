package flightsql

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/minkdb/mink/internal/flightwire"
	"github.com/minkdb/mink/sqlfront/pgwire"
)

// toStatus turns a statement's error into the gRPC status a Flight SQL
// client gets. A SQL error keeps its SQLSTATE: in the message ("ERROR:
// … (SQLSTATE 42P01)", as the Postgres front end words it) and in an
// errdetails.ErrorInfo (domain "mink", reason "SQLSTATE_<code>", metadata
// "sqlstate" and, when there are any, "detail", "hint", "position").
// Statuses pass through.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	var we *pgwire.Error
	if !errors.As(err, &we) {
		switch {
		case errors.Is(err, context.Canceled):
			return status.Error(codes.Canceled, err.Error())
		case errors.Is(err, context.DeadlineExceeded):
			return status.Error(codes.DeadlineExceeded, err.Error())
		}
		return status.Error(codes.Internal, err.Error())
	}
	md := map[string]string{"sqlstate": we.Code}
	if we.Detail != "" {
		md["detail"] = we.Detail
	}
	if we.Hint != "" {
		md["hint"] = we.Hint
	}
	if we.Position > 0 {
		md["position"] = strconv.Itoa(int(we.Position))
	}
	msg := err.Error()
	st, derr := status.New(sqlstateCode(we.Code), msg).WithDetails(&errdetails.ErrorInfo{
		Reason: "SQLSTATE_" + we.Code, Domain: flightwire.Domain, Metadata: md,
	})
	if derr != nil {
		return status.Error(sqlstateCode(we.Code), msg)
	}
	return st.Err()
}

// sqlstateCode is the gRPC code for a SQLSTATE, so that clients that only
// look at the code (ADBC maps it to its status codes) tell the common
// cases apart.
func sqlstateCode(code string) codes.Code {
	switch code {
	case pgwire.CodeInsufficientPrivilege:
		return codes.PermissionDenied
	case pgwire.CodeUndefinedTable, "3F000", "42704", "3D000":
		return codes.NotFound
	case pgwire.CodeDuplicateTable, "23505", "42710", "42P06":
		return codes.AlreadyExists
	case pgwire.CodeFeatureNotSupported:
		return codes.Unimplemented
	case pgwire.CodeQueryCanceled:
		return codes.Canceled
	case "57P03":
		return codes.Unavailable
	case pgwire.CodeInternalError:
		return codes.Internal
	}
	switch {
	case strings.HasPrefix(code, "40"):
		return codes.Aborted
	case strings.HasPrefix(code, "53"):
		return codes.ResourceExhausted
	case strings.HasPrefix(code, "28"):
		return codes.Unauthenticated
	}
	return codes.InvalidArgument
}
