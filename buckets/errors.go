package buckets

import (
	"errors"
	"fmt"

	"github.com/minkdb/mink/catalog"
)

// ErrUnavailable: the bucket has a leader but is not serving yet (it is
// opening, taking over, or has no leader assigned). Retry after a moment.
var ErrUnavailable = errors.New("bucket unavailable")

// ErrRegistering is the error of a node that has no bucket manager: it
// lost its registration and is registering again. It is ErrUnavailable,
// so callers wait for it as for a bucket that is opening.
var ErrRegistering = fmt.Errorf("this node is registering again: %w", ErrUnavailable)

// ErrLeaseInDoubt: this node cannot renew its liveness lease (etcd does
// not answer), so it cannot rule out that another node is taking its
// buckets over. It acknowledges no write until a renewal is granted, and
// serves reads only with a proof that no takeover has begun (Manager,
// "in doubt"). It is ErrUnavailable, and nothing was appended.
var ErrLeaseInDoubt = fmt.Errorf("this node cannot renew its liveness lease (is etcd reachable?), so another node may be taking its buckets over: %w", ErrUnavailable)

// NotLeaderError: another node leads the bucket. To is that node's
// advertised Flight address (empty if unknown); clients retry there.
type NotLeaderError struct {
	Bucket catalog.BucketID
	Leader catalog.NodeID
	To     string
}

func (e *NotLeaderError) Error() string {
	return fmt.Sprintf("bucket %d is led by node %d at %s, not by this node", e.Bucket, e.Leader, e.To)
}

// ErrNotLeader matches any *NotLeaderError with errors.Is.
var ErrNotLeader = errors.New("not the bucket leader")

func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }

// ErrNoSuchBucket: the bucket is not in the view (dropped, or never existed).
var ErrNoSuchBucket = errors.New("no such bucket")

// ErrUnknownOutcome: a write failed in a way that does not say whether it
// was appended (a forwarded write whose connection broke). It must not be
// retried blindly: the rows may be there already.
var ErrUnknownOutcome = errors.New("write outcome unknown")
