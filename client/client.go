// Package client is mink's Go client for bulk data over Arrow Flight
// (docs/flight.md).
//
// A Client routes the rows of AppendTable (log tables) and PutTable
// (upserts into primary-key tables) to buckets with the server's hash
// (buckets/routing) and sends each bucket's part straight to the bucket's
// leader. Lookup finds rows of a primary-key table by key at the leaders
// of their buckets. It caches the leader of every bucket, updates the
// cache from NotLeader redirects and retries there, and retries
// Unavailable (a bucket opening or moving, a node restarting) with backoff
// until the call's deadline, or Options.RetryTimeout when the context has
// none. Scan reads every bucket of a table in parallel: a log table's
// rows, a primary-key table's current state, or its changelog.
//
// A write is retried only when nothing of it can have been stored; when
// its outcome is unknown (a connection that broke during the call) the
// error wraps ErrUnknownOutcome. Lookups and scans change nothing and are
// retried after any failure to reach a leader.
//
// The client encodes primary keys itself (docs/format/kv.md), so it
// imports mink's key and row codec (kv/kvcodec), which does not pull in
// the storage engine.
//
// With Options.User and Options.Password the client logs in to each node
// with Flight's basic-auth handshake and sends the bearer token it gets
// with every call (auth.go).
//
// A Client is safe for concurrent use. It keeps one gRPC connection per
// node; Close closes them. Scan starts goroutines that end when its reader
// is drained or released.
package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/minkdb/mink/internal/flightwire"
)

// ErrWrongKind: the call does not apply to this kind of table
// (AppendTable of a primary-key table, PutTable, Lookup or a changelog
// Scan of a log table).
var ErrWrongKind = errors.New("wrong kind of table")

// ErrUnknownOutcome: a write failed in a way that does not say whether its
// rows were stored (the connection broke during the call, or the server's
// storage could not tell). Check before retrying: the rows may be there.
var ErrUnknownOutcome = errors.New("write outcome unknown")

// ErrNoSuchTable: the table does not exist.
var ErrNoSuchTable = errors.New("no such table")

// Options configure a Client. Zero values mean the defaults.
type Options struct {
	// RetryTimeout bounds how long a call keeps retrying unavailable
	// buckets and unreachable nodes when its context has no deadline.
	// Default 30 s.
	RetryTimeout time.Duration
	// ScanParallelism is how many buckets Scan reads at once. Default 8.
	ScanParallelism int
	// MaxRedirects bounds the NotLeader redirects one attempt follows
	// before backing off (the cluster's views are changing). Default 5.
	MaxRedirects int
	// TLS, when set, connects to every node over TLS with this config: for
	// a cluster started with --tls-cert-file, whose locations are
	// grpc+tls://host:port. Set RootCAs to the CA that signed the nodes'
	// certificates (nil: the system roots), and Certificates to present a
	// client certificate. Default: plaintext.
	TLS *tls.Config
	// User and Password log in to a cluster that requires credentials
	// (started with --superuser-password-file): each node connection runs
	// Flight's basic-auth handshake on its first call and sends the bearer
	// token with every call after; it handshakes again when a node refuses
	// an expired token. Without User calls carry no credentials, which
	// only a node in trust mode accepts. The role needs the table
	// privileges of each call (docs/security.md): SELECT to scan and look
	// up, INSERT to append, INSERT and UPDATE to put; a call without them
	// fails with codes.PermissionDenied, one with wrong credentials with
	// codes.Unauthenticated (status.Code(err)).
	User     string
	Password string
}

func (o *Options) fill() {
	if o.RetryTimeout == 0 {
		o.RetryTimeout = 30 * time.Second
	}
	if o.ScanParallelism == 0 {
		o.ScanParallelism = 8
	}
	if o.MaxRedirects == 0 {
		o.MaxRedirects = 5
	}
}

// Client talks to a mink cluster.
type Client struct {
	opts        Options
	dialOptions []grpc.DialOption

	mu struct {
		sync.Mutex
		// nodes are the addresses (host:port) to ask for metadata: the
		// seeds, then every node learnt from the cluster.
		nodes []string
		conns map[string]*grpc.ClientConn
		// leaders caches the leader address of every bucket seen.
		leaders map[uint64]string
		tables  map[string]*tableMeta
		closed  bool
	}
}

// Dial returns a client for the cluster reachable at addrs (host:port,
// grpc+tcp://host:port or grpc+tls://host:port, any nodes of the cluster)
// with default options. A cluster that serves TLS needs DialOptions with
// Options.TLS.
func Dial(ctx context.Context, addrs ...string) (*Client, error) {
	return DialOptions(ctx, Options{}, addrs...)
}

// DialOptions is Dial with options. It asks the first reachable node for
// the cluster's members, which become further addresses to fall back on.
func DialOptions(ctx context.Context, opts Options, addrs ...string) (*Client, error) {
	opts.fill()
	if len(addrs) == 0 {
		return nil, errors.New("mink client: no address to dial")
	}
	c := &Client{opts: opts, dialOptions: flightwire.DialOptions()}
	if opts.TLS != nil {
		c.dialOptions = append(c.dialOptions, grpc.WithTransportCredentials(credentials.NewTLS(opts.TLS)))
	}
	c.mu.conns = map[string]*grpc.ClientConn{}
	c.mu.leaders = map[uint64]string{}
	c.mu.tables = map[string]*tableMeta{}
	for _, a := range addrs {
		addr, err := flightwire.ParseLocation(a)
		if err != nil {
			return nil, fmt.Errorf("mink client: %w", err)
		}
		c.mu.nodes = append(c.mu.nodes, addr)
	}
	var st flightwire.ClusterStatus
	err := c.anyNode(ctx, func(fc flight.FlightServiceClient) error {
		return flightwire.DoAction(ctx, fc, flightwire.ActionClusterStatus, nil, &st)
	})
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("mink client: %w", err)
	}
	for _, n := range st.Nodes {
		if addr, err := flightwire.ParseLocation(n.Location); err == nil && n.Location != "" {
			c.addNode(addr)
		}
	}
	return c, nil
}

// Close closes the client's connections. Calls in progress fail.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.closed = true
	var errs []error
	for addr, cc := range c.mu.conns {
		errs = append(errs, cc.Close())
		delete(c.mu.conns, addr)
	}
	return errors.Join(errs...)
}

func (c *Client) addNode(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.mu.nodes {
		if n == addr {
			return
		}
	}
	c.mu.nodes = append(c.mu.nodes, addr)
}

// flightClient returns a Flight client for addr (host:port), connecting
// lazily.
func (c *Client) flightClient(addr string) (flight.FlightServiceClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return nil, errors.New("mink client: closed")
	}
	cc, ok := c.mu.conns[addr]
	if !ok {
		opts := c.dialOptions
		if c.opts.User != "" {
			// One token per node connection (auth.go).
			opts = append(opts[:len(opts):len(opts)], authDialOptions(newBearer(c.opts.User, c.opts.Password))...)
		}
		var err error
		if cc, err = grpc.NewClient(addr, opts...); err != nil {
			return nil, fmt.Errorf("connect to %s: %w", addr, err)
		}
		c.mu.conns[addr] = cc
	}
	return flight.NewFlightServiceClient(cc), nil
}

// anyNode runs fn against the known nodes in turn until one answers with
// anything but Unavailable (the node cannot be reached), retrying the
// round with backoff until the deadline.
func (c *Client) anyNode(ctx context.Context, fn func(flight.FlightServiceClient) error) error {
	r := c.newRetry(ctx)
	for {
		c.mu.Lock()
		nodes := append([]string(nil), c.mu.nodes...)
		c.mu.Unlock()
		var err error
		for _, addr := range nodes {
			var fc flight.FlightServiceClient
			if fc, err = c.flightClient(addr); err != nil {
				return err
			}
			if err = fn(fc); err == nil || !flightwire.IsUnavailable(err) {
				return err
			}
		}
		if werr := r.wait(err); werr != nil {
			return werr
		}
	}
}

// leader returns the cached leader address of a bucket, "" if unknown.
func (c *Client) leader(bucket uint64) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.leaders[bucket]
}

func (c *Client) setLeader(bucket uint64, addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.leaders[bucket] = addr
}

// forgetLeader drops a cached leader that could not be reached, unless
// the cache has moved on already.
func (c *Client) forgetLeader(bucket uint64, addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.leaders[bucket] == addr {
		delete(c.mu.leaders, bucket)
	}
}

// retry paces the retries of one call.
type retry struct {
	ctx      context.Context
	deadline time.Time
	backoff  time.Duration
}

func (c *Client) newRetry(ctx context.Context) *retry {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(c.opts.RetryTimeout)
	}
	return &retry{ctx: ctx, deadline: deadline, backoff: 10 * time.Millisecond}
}

// wait sleeps before the next attempt, or returns lastErr when the
// deadline would pass first.
func (r *retry) wait(lastErr error) error {
	if time.Now().Add(r.backoff).After(r.deadline) {
		return fmt.Errorf("gave up retrying: %w", lastErr)
	}
	t := time.NewTimer(r.backoff)
	defer t.Stop()
	select {
	case <-r.ctx.Done():
		return r.ctx.Err()
	case <-t.C:
	}
	r.backoff = min(2*r.backoff, time.Second)
	return nil
}
