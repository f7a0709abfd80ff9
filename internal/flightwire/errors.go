package flightwire

import (
	"fmt"
	"strconv"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Error details are a google.rpc.ErrorInfo in the status details, with
// Domain "mink" and one of these reasons. Its metadata carries "bucket"
// (decimal id), and for ReasonNotLeader "to" (the leader's Flight location,
// grpc+tcp://host:port) and "leader" (its node id).
const (
	Domain = "mink"

	// ReasonNotLeader comes with codes.FailedPrecondition: another node
	// leads the bucket. Retry at metadata "to".
	ReasonNotLeader = "NOT_LEADER"
	// ReasonUnavailable comes with codes.Unavailable: the bucket is opening
	// here, has no leader yet, or this node is registering again. Retry
	// after a moment.
	ReasonUnavailable = "BUCKET_UNAVAILABLE"
	// ReasonNoSuchBucket comes with codes.NotFound.
	ReasonNoSuchBucket = "NO_SUCH_BUCKET"
	// ReasonNoSuchTable comes with codes.NotFound.
	ReasonNoSuchTable = "NO_SUCH_TABLE"
	// ReasonOutcomeUnknown comes with codes.Unknown: some batches of a
	// DoPut may or may not have been appended (a storage failure that does
	// not say). Do not resend them blindly. Metadata "bucket" for a
	// bucket-addressed DoPut.
	ReasonOutcomeUnknown = "OUTCOME_UNKNOWN"
)

// Redirect is the content of a NotLeader error.
type Redirect struct {
	Bucket uint64
	// To is the leader's Flight location, grpc+tcp://host:port.
	To     string
	Leader uint32
}

// Addr is To as host:port.
func (r Redirect) Addr() (string, error) { return ParseLocation(r.To) }

// NotLeaderStatus is the status of a request for a bucket led elsewhere.
func NotLeaderStatus(msg string, r Redirect) error {
	return withInfo(codes.FailedPrecondition, msg, ReasonNotLeader, map[string]string{
		"bucket": strconv.FormatUint(r.Bucket, 10),
		"to":     r.To,
		"leader": strconv.FormatUint(uint64(r.Leader), 10),
	})
}

// UnavailableStatus is the status of a request for a bucket that is not
// serving yet.
func UnavailableStatus(msg string, bucket uint64) error {
	return withInfo(codes.Unavailable, msg, ReasonUnavailable, bucketMeta(bucket))
}

// OutcomeUnknownStatus is the status of a write whose unacknowledged
// batches may or may not have been appended (bucket 0: a table-addressed
// write).
func OutcomeUnknownStatus(msg string, bucket uint64) error {
	var md map[string]string
	if bucket != 0 {
		md = bucketMeta(bucket)
	}
	return withInfo(codes.Unknown, msg, ReasonOutcomeUnknown, md)
}

// NotFoundStatus is the status of a request for a missing table or bucket
// (reason ReasonNoSuchTable or ReasonNoSuchBucket).
func NotFoundStatus(msg, reason string, bucket uint64) error {
	var md map[string]string
	if bucket != 0 {
		md = bucketMeta(bucket)
	}
	return withInfo(codes.NotFound, msg, reason, md)
}

func bucketMeta(bucket uint64) map[string]string {
	return map[string]string{"bucket": strconv.FormatUint(bucket, 10)}
}

func withInfo(code codes.Code, msg, reason string, md map[string]string) error {
	st, err := status.New(code, msg).WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: Domain, Metadata: md})
	if err != nil {
		panic(fmt.Sprintf("flightwire: status details: %v", err))
	}
	return st.Err()
}

// Info returns the mink ErrorInfo in err's status details, if any.
func Info(err error) (*errdetails.ErrorInfo, bool) {
	st, ok := status.FromError(err)
	if !ok {
		return nil, false
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.Domain == Domain {
			return info, true
		}
	}
	return nil, false
}

// RedirectOf returns the redirect of a NotLeader error.
func RedirectOf(err error) (Redirect, bool) {
	info, ok := Info(err)
	if !ok || info.Reason != ReasonNotLeader || status.Code(err) != codes.FailedPrecondition {
		return Redirect{}, false
	}
	bucket, _ := strconv.ParseUint(info.Metadata["bucket"], 10, 64)
	leader, _ := strconv.ParseUint(info.Metadata["leader"], 10, 32)
	return Redirect{Bucket: bucket, To: info.Metadata["to"], Leader: uint32(leader)}, true
}

// IsUnavailable reports whether err is worth retrying after a pause: the
// bucket is not serving yet (ReasonUnavailable), or gRPC could not reach
// the node (codes.Unavailable without mink details).
func IsUnavailable(err error) bool {
	return status.Code(err) == codes.Unavailable
}

// IsBucketUnavailable reports whether the node answered that the bucket is
// not serving yet (as opposed to not being reachable at all).
func IsBucketUnavailable(err error) bool {
	info, ok := Info(err)
	return ok && info.Reason == ReasonUnavailable
}

// IsOutcomeUnknown reports a write whose outcome the server could not
// tell (ReasonOutcomeUnknown).
func IsOutcomeUnknown(err error) bool {
	info, ok := Info(err)
	return ok && info.Reason == ReasonOutcomeUnknown
}

// RetryableWrite reports whether the batches of a failed bucket-addressed
// DoPut that were not acknowledged were certainly not appended, so that
// sending them again (elsewhere, or later) cannot store them twice: the
// call never reached the server (NotSent), or the server answered
// NotLeader or bucket-Unavailable. A connection that broke during the
// call, a deadline, or ReasonOutcomeUnknown leave the outcome unknown.
func RetryableWrite(err error) bool {
	if NotSent(err) {
		return true
	}
	if _, ok := RedirectOf(err); ok {
		return true
	}
	return IsBucketUnavailable(err)
}

// IsNotFound reports a missing table or bucket.
func IsNotFound(err error) bool {
	return status.Code(err) == codes.NotFound
}

// StatusMessage is err's status message, or err.Error() when err carries
// no status.
func StatusMessage(err error) string {
	if st, ok := status.FromError(err); ok {
		return st.Message()
	}
	return err.Error()
}
