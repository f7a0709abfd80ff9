package flightsvc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/minkdb/mink/access"
	"github.com/minkdb/mink/buckets"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/flightwire"
)

// Transport moves bucket data between nodes. The SQL front end uses it for
// buckets led elsewhere; Pool implements it over Flight.
//
// Errors are the buckets package's: *buckets.NotLeaderError (the bucket
// moved on; To is the new leader's host:port), buckets.ErrUnavailable
// (opening, or the node cannot be reached: retry after a moment) and
// buckets.ErrNoSuchBucket. Both methods follow up to maxRedirects redirects
// themselves before returning a NotLeaderError.
type Transport interface {
	// ReadBucket returns every acknowledged batch of the bucket led at
	// addr (host:port), with their row offsets, in their stored form
	// (every stored column, the dropped ones included: Ticket.Stored).
	// The caller releases them.
	ReadBucket(ctx context.Context, addr string, bucket catalog.BucketID) ([]buckets.Batch, error)
	// AppendBucket appends rec, which must have the table's schema, to the
	// bucket led at addr, and returns once it is durable.
	AppendBucket(ctx context.Context, addr string, bucket catalog.BucketID, rec arrow.RecordBatch) error
}

var _ Transport = (*Pool)(nil)

// maxRedirects bounds how many NotLeader redirects one call follows; more
// means the view is changing under it, and the caller should back off.
const maxRedirects = 3

// redirects follows the redirects of one call to another node, as
// fromStatus maps them: a *buckets.NotLeaderError names the leader's
// host:port (a redirect to a bad location maps to ErrUnavailable, and is
// not followed).
var redirects = flightwire.Redirects{Max: maxRedirects, To: notLeaderTo}

// notLeaderTo returns the address a *buckets.NotLeaderError names.
func notLeaderTo(err error) (string, bool) {
	var nle *buckets.NotLeaderError
	if !errors.As(err, &nle) {
		return "", false
	}
	return nle.To, true
}

// Pool keeps one gRPC connection per node address (gRPC multiplexes
// concurrent calls over it). It is safe for concurrent use.
//
// Every call acts for the identity in its context (access.FromContext: the
// caller of a Flight call, or a SQL statement's role): it carries
// "authorization: Bearer <token>" with a short-lived token the forwarder
// (the node's Guard, SetForwarder) makes for that role, and the node that
// receives it checks that role's privileges. A call whose context has no
// identity carries no token, which a node that requires credentials
// refuses: the pool never acts for a role it was not told of.
type Pool struct {
	// dialOptions are flightwire's and the token interceptors, with TLS
	// credentials when the nodes' Flight listeners serve TLS (NewTLSPool).
	dialOptions []grpc.DialOption
	forwarder   atomic.Pointer[Forwarder]
	mu          struct {
		sync.Mutex
		conns  map[string]*grpc.ClientConn
		closed bool
	}
}

// Forwarder makes the tokens with which a node forwards a request for a
// role (*access.Guard).
type Forwarder interface {
	ForwardToken(id access.Identity) (string, error)
}

// NewPool returns an empty pool of plaintext connections.
func NewPool() *Pool {
	p := &Pool{}
	p.dialOptions = append(flightwire.DialOptions(),
		grpc.WithChainUnaryInterceptor(p.unaryToken), grpc.WithChainStreamInterceptor(p.streamToken))
	p.mu.conns = map[string]*grpc.ClientConn{}
	return p
}

// SetForwarder sets what makes the pool's tokens. Until it is set, calls
// carry none.
func (p *Pool) SetForwarder(f Forwarder) { p.forwarder.Store(&f) }

// withToken returns ctx with the outgoing authorization header for the
// identity in ctx, if there is one and a forwarder.
func (p *Pool) withToken(ctx context.Context) (context.Context, error) {
	f := p.forwarder.Load()
	id, ok := access.FromContext(ctx)
	if f == nil || !ok {
		return ctx, nil
	}
	token, err := (*f).ForwardToken(id)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "forward a request for role %q: %v", id.Name, err)
	}
	return metadata.AppendToOutgoingContext(ctx, authHeader, bearerPrefix+" "+token), nil
}

func (p *Pool) unaryToken(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	ctx, err := p.withToken(ctx)
	if err != nil {
		return err
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (p *Pool) streamToken(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	ctx, err := p.withToken(ctx)
	if err != nil {
		return nil, err
	}
	return streamer(ctx, desc, cc, method, opts...)
}

// NewTLSPool returns an empty pool whose connections use TLS with cfg: it
// verifies each node's certificate against cfg.RootCAs and the host the
// node is dialled at, and presents cfg's client certificate when the node
// asks for one.
func NewTLSPool(cfg *tls.Config) *Pool {
	p := NewPool()
	p.dialOptions = append(p.dialOptions, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	return p
}

// client returns a Flight client for addr, connecting lazily.
func (p *Pool) client(addr string) (flight.FlightServiceClient, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.closed {
		return nil, errors.New("flight pool closed")
	}
	cc, ok := p.mu.conns[addr]
	if !ok {
		var err error
		// grpc.NewClient does no I/O: it connects on first use.
		if cc, err = grpc.NewClient(addr, p.dialOptions...); err != nil {
			return nil, fmt.Errorf("flight client for %s: %w", addr, err)
		}
		p.mu.conns[addr] = cc
	}
	return flight.NewFlightServiceClient(cc), nil
}

// Close closes every connection.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.closed = true
	var errs []error
	for addr, cc := range p.mu.conns {
		errs = append(errs, cc.Close())
		delete(p.mu.conns, addr)
	}
	return errors.Join(errs...)
}

// AppendBucket implements Transport.
func (p *Pool) AppendBucket(ctx context.Context, addr string, bucket catalog.BucketID, rec arrow.RecordBatch) error {
	recs := []arrow.RecordBatch{rec}
	_, err := redirects.Follow(ctx, addr, func(ctx context.Context, addr string) error {
		n, err := p.putBucket(ctx, addr, bucket, recs)
		recs = recs[n:]
		return err
	})
	return err
}

// putBucket writes recs to bucket at addr in one bucket-addressed DoPut.
// It returns how many of them are durable (a prefix) and the error, mapped
// by fromStatus.
func (p *Pool) putBucket(ctx context.Context, addr string, bucket catalog.BucketID, recs []arrow.RecordBatch) (int, error) {
	c, err := p.client(addr)
	if err != nil {
		return 0, err
	}
	acks, err := flightwire.PutBatches(ctx, c, flightwire.Command{Bucket: uint64(bucket)}.Descriptor(), recs)
	if err == nil && len(acks) != len(recs) {
		err = fmt.Errorf("bucket %d at %s: %d batches sent, %d acknowledged", bucket, addr, len(recs), len(acks))
	}
	n := min(len(acks), len(recs))
	if err != nil && !flightwire.RetryableWrite(err) && (flightwire.IsUnavailable(err) || flightwire.IsOutcomeUnknown(err)) {
		// The connection failed during the call, or the leader could not
		// tell: the unacknowledged batches may have been appended.
		// Retrying could write them twice, so the caller must not retry.
		return n, fmt.Errorf("bucket %d at %s: %w: %s", bucket, addr, buckets.ErrUnknownOutcome, flightwire.StatusMessage(err))
	}
	return n, fromStatus(addr, bucket, err)
}

// ReadBucket implements Transport.
func (p *Pool) ReadBucket(ctx context.Context, addr string, bucket catalog.BucketID) ([]buckets.Batch, error) {
	return p.ReadBucketFrom(ctx, addr, bucket, 0)
}

// ReadBucketFrom is ReadBucket from offset from on: the batches
// overlapping [from, end); the first may start before from. The union read
// of a tiered table reads only the stream above its tiered offset.
func (p *Pool) ReadBucketFrom(ctx context.Context, addr string, bucket catalog.BucketID, from uint64) ([]buckets.Batch, error) {
	return p.readBatches(ctx, addr, bucket, flightwire.Ticket{Bucket: uint64(bucket), From: from, Stored: true})
}

// readBatches reads the batches of a resumable ticket (a log bucket's rows,
// a primary-key bucket's changelog) at the leader of bucket, first tried
// at addr, with their offsets. The caller releases them.
func (p *Pool) readBatches(ctx context.Context, addr string, bucket catalog.BucketID, t flightwire.Ticket) ([]buckets.Batch, error) {
	var out []buckets.Batch
	_, err := redirects.Follow(ctx, addr, func(ctx context.Context, addr string) error {
		c, err := p.client(addr)
		if err != nil {
			return err
		}
		err = flightwire.GetStream(ctx, c, t.Encode(), nil, func(rec arrow.RecordBatch, meta flightwire.BatchMeta) error {
			rec.Retain()
			out = append(out, buckets.Batch{Offset: meta.Offset, Record: rec})
			// A retry after a redirect resumes after the rows received.
			t.From = meta.Offset + uint64(rec.NumRows())
			return nil
		})
		return fromStatus(addr, bucket, err)
	})
	if err != nil {
		buckets.ReleaseBatches(out)
		return nil, err
	}
	return out, nil
}

// BucketEnds asks the node at addr for the acknowledged ends of the
// buckets it leads among ids.
func (p *Pool) BucketEnds(ctx context.Context, addr string, ids []uint64) (map[uint64]uint64, error) {
	c, err := p.client(addr)
	if err != nil {
		return nil, err
	}
	var out flightwire.BucketEnds
	if err := flightwire.DoAction(ctx, c, flightwire.ActionBucketEnds, flightwire.BucketEndsRequest{Buckets: ids}, &out); err != nil {
		return nil, err
	}
	return out.Ends, nil
}
