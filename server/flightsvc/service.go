package flightsvc

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/minkdb/mink/access"
	"github.com/minkdb/mink/buckets"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/flightwire"
	"github.com/minkdb/mink/tiering"
)

// Metadata is what the service needs from the metadata log;
// *metalog.Catalog implements it.
type Metadata interface {
	Read(fn func(v *catalog.View))
	Propose(ctx context.Context, rec catalog.Record) (catalog.Outcome, error)
	AppliedIndex() uint64
	// Sync returns once the view holds every entry appended before the
	// call (metalog.Catalog.Sync).
	Sync(ctx context.Context) error
}

// Config configures a Service.
type Config struct {
	Node catalog.NodeID
	Meta Metadata
	// Buckets returns the node's current bucket manager (nil while the node
	// registers again).
	Buckets func() *buckets.Manager
	// Live reports whether a node holds its liveness lease (cluster-status).
	Live func(catalog.NodeID) bool
	// Pool carries forwarded writes and bucket-ends queries to other nodes.
	// Default: a new Pool, closed by Close.
	Pool *Pool
	// ForwardWait bounds how long a table-addressed DoPut keeps retrying a
	// part whose bucket is opening or moving. Default 30 s.
	ForwardWait time.Duration
	// BucketWait bounds how long a table-addressed DoPut waits for a bucket
	// of this node that is opening. Default 30 s.
	BucketWait time.Duration
	Logger     *slog.Logger
	// TLS, when set, makes the listener serve gRPC over TLS with this
	// config, and FlightInfo locations grpc+tls://host:port. Every node of
	// a cluster serves TLS or none does, so the location of another
	// node's bucket has this node's scheme.
	TLS *tls.Config
	// Lake reads the rows of log-table buckets below their streams' start
	// (trimmed by retention after tiering). Nil: such rows are not served.
	Lake *tiering.LakeReader
	// Access authenticates every call (Handshake, bearer tokens) and
	// checks the caller's table privileges (auth.go, privileges.go). It
	// also makes the tokens with which the Pool forwards requests for the
	// caller. Nil: no authentication and no privilege checks (tests).
	Access *access.Guard
	// Route, when set, is given the Service and returns the handler that
	// serves the listener's RPCs in its place: server/flightsql's router,
	// which takes the Flight SQL commands and passes everything else to
	// the Service. The interceptors above authenticate every RPC either
	// way.
	Route func(flight.FlightServer) flight.FlightServer
}

// Service is the Flight service of one node.
type Service struct {
	flight.BaseFlightServer
	cfg      Config
	ownsPool bool
	grpc     *grpc.Server
	alloc    memory.Allocator

	closeOnce sync.Once
}

// New returns a service; Serve starts it.
func New(cfg Config) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ForwardWait == 0 {
		cfg.ForwardWait = 30 * time.Second
	}
	if cfg.BucketWait == 0 {
		cfg.BucketWait = 30 * time.Second
	}
	if cfg.Live == nil {
		cfg.Live = func(catalog.NodeID) bool { return true }
	}
	s := &Service{cfg: cfg, alloc: memory.DefaultAllocator}
	if s.cfg.Pool == nil {
		s.cfg.Pool = NewPool()
		s.ownsPool = true
	}
	// DoGet messages hold at most maxRowsPerMessage rows, far below the
	// message limit for ordinary rows; DoPut batches are the clients' choice.
	opts := flightwire.ServerOptions()
	opts = append(opts, grpc.UnaryInterceptor(s.unaryAuth), grpc.StreamInterceptor(s.streamAuth))
	if cfg.Access != nil {
		s.cfg.Pool.SetForwarder(cfg.Access)
	}
	if cfg.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(cfg.TLS)))
	}
	s.grpc = grpc.NewServer(opts...)
	var handler flight.FlightServer = s
	if cfg.Route != nil {
		handler = cfg.Route(s)
	}
	flight.RegisterFlightServiceServer(s.grpc, handler)
	return s
}

// Serve serves Flight on ln until Close. It returns nil after Close.
func (s *Service) Serve(ln net.Listener) error {
	err := s.grpc.Serve(ln)
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// Close stops accepting RPCs, lets running ones finish for up to timeout
// (then cancels them), and closes the Pool if the service made it.
func (s *Service) Close(timeout time.Duration) {
	s.closeOnce.Do(func() {
		done := make(chan struct{})
		go func() {
			s.grpc.GracefulStop()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(timeout):
			s.grpc.Stop()
			<-done
		}
		if s.ownsPool {
			s.cfg.Pool.Close()
		}
	})
}

// location is the Flight location URI of a node's Flight address.
func (s *Service) location(addr string) string {
	if s.cfg.TLS != nil {
		return flightwire.TLSLocation(addr)
	}
	return flightwire.Location(addr)
}

// Pool is the service's connection pool to other nodes.
func (s *Service) Pool() *Pool { return s.cfg.Pool }

// ListFlights lists every table the caller holds a privilege on: its
// descriptor and schema, without endpoints (GetFlightInfo has those). A
// nonempty criteria expression is a table name prefix.
func (s *Service) ListFlights(c *flight.Criteria, stream flight.FlightService_ListFlightsServer) error {
	prefix := string(c.GetExpression())
	type named struct {
		t    *catalog.Table
		name string
	}
	var tables []named
	s.cfg.Meta.Read(func(v *catalog.View) {
		for _, t := range v.Tables {
			if name := v.TopicName(t); strings.HasPrefix(name, prefix) && s.visible(stream.Context(), v, t) {
				tables = append(tables, named{t, name})
			}
		}
	})
	sort.Slice(tables, func(i, j int) bool { return tables[i].name < tables[j].name })
	for _, ct := range tables {
		t, err := newTable(ct.t, ct.name)
		if err != nil {
			return toStatus(err)
		}
		info := &flight.FlightInfo{
			Schema:           flight.SerializeSchema(t.schema, s.alloc),
			FlightDescriptor: flightwire.Command{Table: t.name}.Descriptor(),
			TotalRecords:     -1,
			TotalBytes:       -1,
		}
		if err := stream.Send(info); err != nil {
			return err
		}
	}
	return nil
}

// GetSchema returns the (projected) schema of a table. It needs a
// privilege on the table.
func (s *Service) GetSchema(ctx context.Context, d *flight.FlightDescriptor) (*flight.SchemaResult, error) {
	cmd, err := flightwire.ParseDescriptor(d)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	r, err := s.resolve(cmd)
	if err != nil {
		return nil, err
	}
	if err := s.authorize(ctx, r.table.id, anyOf(anyPrivilege)); err != nil {
		return nil, err
	}
	_, schema, err := r.table.projection(cmd.Columns)
	if err != nil {
		return nil, err
	}
	return &flight.SchemaResult{Schema: flight.SerializeSchema(schema, s.alloc)}, nil
}

// GetFlightInfo returns the (projected) schema of a table and one
// endpoint per bucket: a ticket for the bucket's rows up to its current
// end, at the leader's location. It needs a privilege on the table; the
// tickets need SELECT.
func (s *Service) GetFlightInfo(ctx context.Context, d *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	cmd, err := flightwire.ParseDescriptor(d)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	r, err := s.resolve(cmd)
	if err != nil {
		return nil, err
	}
	if err := s.authorize(ctx, r.table.id, anyOf(anyPrivilege)); err != nil {
		return nil, err
	}
	_, schema, err := r.table.projection(cmd.Columns)
	if err != nil {
		return nil, err
	}
	if r.table.primaryKey() {
		// One endpoint per bucket: its current state, at its leader.
		info := &flight.FlightInfo{Schema: flight.SerializeSchema(schema, s.alloc), FlightDescriptor: d, TotalRecords: -1, TotalBytes: -1}
		for _, b := range r.buckets {
			t := flightwire.Ticket{Bucket: uint64(b.id), Columns: cmd.Columns}
			meta, _ := json.Marshal(flightwire.EndpointMeta{Bucket: uint64(b.id), Partition: b.partition, Leader: uint32(b.leader)})
			ep := &flight.FlightEndpoint{Ticket: &flight.Ticket{Ticket: t.Encode()}, AppMetadata: meta}
			if b.addr != "" {
				ep.Location = []*flight.Location{{Uri: s.location(b.addr)}}
			}
			info.Endpoint = append(info.Endpoint, ep)
		}
		return info, nil
	}
	ends := s.bucketEnds(ctx, r.buckets)
	info := &flight.FlightInfo{
		Schema:           flight.SerializeSchema(schema, s.alloc),
		FlightDescriptor: d,
		TotalRecords:     0,
		TotalBytes:       -1,
	}
	for _, b := range r.buckets {
		t := flightwire.Ticket{Bucket: uint64(b.id), Columns: cmd.Columns}
		if _, lakeEnd := s.lakeSplit(r.table.id, b.id); lakeEnd > 0 {
			// The rows retention trimmed from the stream, from the lake.
			lt := flightwire.Ticket{Bucket: uint64(b.id), Columns: cmd.Columns, To: &lakeEnd}
			meta, _ := json.Marshal(flightwire.EndpointMeta{Bucket: uint64(b.id), Partition: b.partition, Leader: uint32(b.leader), Lake: true})
			info.Endpoint = append(info.Endpoint, &flight.FlightEndpoint{Ticket: &flight.Ticket{Ticket: lt.Encode()}, AppMetadata: meta})
			t.From = lakeEnd
		}
		if end, ok := ends[b.id]; ok {
			t.To = &end
			if info.TotalRecords >= 0 {
				info.TotalRecords += int64(end)
			}
		} else {
			info.TotalRecords = -1
		}
		meta, _ := json.Marshal(flightwire.EndpointMeta{Bucket: uint64(b.id), Partition: b.partition, Leader: uint32(b.leader)})
		ep := &flight.FlightEndpoint{Ticket: &flight.Ticket{Ticket: t.Encode()}, AppMetadata: meta}
		if b.addr != "" {
			ep.Location = []*flight.Location{{Uri: s.location(b.addr)}}
		}
		info.Endpoint = append(info.Endpoint, ep)
	}
	return info, nil
}

// bucketEnds returns the acknowledged ends of the buckets, asking their
// leaders (this node, or the others through one bucket-ends action each,
// in parallel). A bucket whose end is unknown (opening, leader
// unreachable) is left out; its ticket then reads to the end at DoGet time.
func (s *Service) bucketEnds(ctx context.Context, refs []bucketRef) map[catalog.BucketID]uint64 {
	ends := map[catalog.BucketID]uint64{}
	remote := map[string][]uint64{}
	m := s.cfg.Buckets()
	for _, b := range refs {
		if b.leader == s.cfg.Node {
			if m == nil {
				continue
			}
			if lb, err := m.Bucket(b.id); err == nil {
				ends[b.id] = lb.End()
			}
			continue
		}
		if b.addr != "" {
			remote[b.addr] = append(remote[b.addr], uint64(b.id))
		}
	}
	if len(remote) == 0 {
		return ends
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for addr, ids := range remote {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := s.cfg.Pool.BucketEnds(ctx, addr, ids)
			if err != nil {
				s.cfg.Logger.Debug("bucket-ends failed; tickets read to the end", "addr", addr, "err", err)
				return
			}
			mu.Lock()
			for id, end := range got {
				ends[catalog.BucketID(id)] = end
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return ends
}
