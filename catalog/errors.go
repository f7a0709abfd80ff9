package catalog

import (
	"errors"
	"fmt"
)

// Rejection reasons. The state machine rejects a record by returning an error
// in Outcome.Err that wraps exactly one of these (errors.Is works); the message
// names the record, the values compared and why they did not match.
var (
	// ErrStaleEpoch: a node, coordinator or leader epoch carried by the record
	// is not the current one. The proposer acted on an old view or has been
	// replaced; it must re-read the view before trying again.
	ErrStaleEpoch = errors.New("stale epoch")
	// ErrFenced: a stream was opened or committed at an epoch below the
	// stream's (or re-opened at an epoch that was already closed). The
	// proposer's ownership of the stream is over; retrying cannot succeed.
	ErrFenced = errors.New("fenced")
	// ErrHeldBy: the stream is open on another node. The rejection is a
	// *HeldByError naming the holder.
	ErrHeldBy = errors.New("held by another node")
	// ErrExists: a table name or partition value is taken.
	ErrExists = errors.New("already exists")
	// ErrNotFound: a table, partition, bucket, stream or node the record names
	// is not in the view.
	ErrNotFound = errors.New("not found")
	// ErrGap: stream objects do not continue the stream's committed offsets
	// (a gap or an overlap).
	ErrGap = errors.New("offsets do not continue the stream")
	// ErrSequenceExhausted: a sequence has fewer values left below its
	// column type's maximum than AllocateSequence asked for.
	ErrSequenceExhausted = errors.New("sequence exhausted")
	// ErrInvalid: the record is malformed or asks for something that no view
	// could accept (a zero id, an empty object list, an offset moving
	// backwards). It points at a bug in the proposer.
	ErrInvalid = errors.New("invalid record")
	// ErrInUse: a role to drop still owns or holds privileges on a table
	// (or is the bootstrap superuser).
	ErrInUse = errors.New("in use")
)

// HeldByError is the rejection of an OpenStream for a stream that is open on
// another node (or on the same node under an older node epoch). It names the
// holder so that the caller can decide, with liveness, whether to wait for it
// or to take over from it. errors.Is(err, ErrHeldBy) is true.
type HeldByError struct {
	Stream    StreamID
	Node      NodeID
	NodeEpoch uint64
	// Epoch is the stream epoch the holder opened the stream at. A node taking
	// over from a dead holder commits the holder's data and closes the stream
	// at this epoch.
	Epoch uint64
}

func (e *HeldByError) Error() string {
	return fmt.Sprintf("%v: stream %d is open on node %d (node epoch %d) at epoch %d",
		ErrHeldBy, e.Stream, e.Node, e.NodeEpoch, e.Epoch)
}

// Is makes errors.Is(err, ErrHeldBy) true.
func (e *HeldByError) Is(target error) bool { return target == ErrHeldBy }
