package flightsvc

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/minkdb/mink/access"
	"github.com/minkdb/mink/buckets"
	"github.com/minkdb/mink/buckets/s3stream"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/flightwire"
	"github.com/minkdb/mink/internal/sqltypes"
	"github.com/minkdb/mink/tiering"
)

// bucketStatus turns an error about bucket id into the gRPC status a client
// acts on: NotLeader (FailedPrecondition with a redirect), Unavailable, or
// NotFound; anything else goes through toStatus.
func bucketStatus(id catalog.BucketID, err error) error {
	var nle *buckets.NotLeaderError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &nle):
		if nle.To == "" {
			return flightwire.UnavailableStatus(fmt.Sprintf("%v (the leader advertises no Flight address yet)", err), uint64(id))
		}
		return flightwire.NotLeaderStatus(err.Error(), flightwire.Redirect{
			Bucket: uint64(nle.Bucket), To: flightwire.Location(nle.To), Leader: uint32(nle.Leader),
		})
	case errors.Is(err, s3stream.ErrCorrupt):
		// Before Unavailable: a bucket whose recovery found a corrupt
		// WAL object is both, and retrying does not mend it.
		return toStatus(err)
	case errors.Is(err, buckets.ErrUnavailable):
		return flightwire.UnavailableStatus(err.Error(), uint64(id))
	case errors.Is(err, buckets.ErrNoSuchBucket):
		return flightwire.NotFoundStatus(err.Error(), flightwire.ReasonNoSuchBucket, uint64(id))
	}
	return toStatus(err)
}

// toStatus turns an error into a gRPC status. Errors that are statuses
// already pass through.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	var (
		sqlErr  *sqltypes.Error
		fileErr *tiering.LakeFileError
	)
	switch {
	case errors.As(err, &fileErr), errors.Is(err, tiering.ErrLakeIncomplete), errors.Is(err, s3stream.ErrCorrupt):
		// A lake file that is missing or corrupt, a lake without rows it
		// should hold, a stream or WAL object that does not decode: the
		// rows cannot be served (SQL answers XX001 for the same).
		return status.Error(codes.DataLoss, err.Error())
	case errors.As(err, &sqlErr):
		st, derr := status.New(codes.InvalidArgument, err.Error()).WithDetails(&errdetails.ErrorInfo{
			Reason: "SQLSTATE_" + sqlErr.Code, Domain: flightwire.Domain, Metadata: map[string]string{"sqlstate": sqlErr.Code},
		})
		if derr != nil {
			return status.Error(codes.InvalidArgument, err.Error())
		}
		return st.Err()
	case errors.Is(err, access.ErrPermission):
		return permissionStatus(err)
	case errors.Is(err, s3stream.ErrUnknownOutcome), errors.Is(err, buckets.ErrUnknownOutcome):
		return flightwire.OutcomeUnknownStatus(err.Error(), 0)
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, buckets.ErrUnavailable):
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, buckets.ErrWrongKind):
		return status.Error(codes.InvalidArgument, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

// fromStatus turns a status from another node back into the buckets
// errors the caller acts on: *buckets.NotLeaderError (To is host:port),
// buckets.ErrUnavailable (also when the node cannot be reached) and
// buckets.ErrNoSuchBucket; PermissionDenied and Unauthenticated stay
// statuses of their code. Other errors are returned as they are.
func fromStatus(addr string, id catalog.BucketID, err error) error {
	if err == nil {
		return nil
	}
	if r, ok := flightwire.RedirectOf(err); ok {
		to, perr := r.Addr()
		if perr != nil {
			return fmt.Errorf("bucket %d: node %s redirected to a bad location: %w: %v", id, addr, buckets.ErrUnavailable, perr)
		}
		return &buckets.NotLeaderError{Bucket: id, Leader: catalog.NodeID(r.Leader), To: to}
	}
	switch code := status.Code(err); {
	case code == codes.PermissionDenied || code == codes.Unauthenticated:
		// The node refused the role this node acted for: the same refusal,
		// naming who refused.
		return status.Errorf(code, "%s (refused by node %s, the leader of bucket %d)", flightwire.StatusMessage(err), addr, id)
	case flightwire.IsUnavailable(err):
		return fmt.Errorf("bucket %d at %s: %w: %s", id, addr, buckets.ErrUnavailable, flightwire.StatusMessage(err))
	case flightwire.IsNotFound(err):
		if info, ok := flightwire.Info(err); ok && info.Reason == flightwire.ReasonNoSuchBucket {
			return fmt.Errorf("bucket %d at %s: %w", id, addr, buckets.ErrNoSuchBucket)
		}
	case code == codes.DataLoss:
		// Damaged data at the leader: not retried, XX001 in SQL.
		return fmt.Errorf("bucket %d at %s: %w: %s", id, addr, s3stream.ErrCorrupt, flightwire.StatusMessage(err))
	}
	return fmt.Errorf("bucket %d at %s: %w", id, addr, err)
}
