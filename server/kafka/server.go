package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/minkdb/mink/access"
	"github.com/minkdb/mink/buckets"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/server/kafka/groups"
	"github.com/minkdb/mink/tiering"
)

// Metadata is what the listener needs from the metadata log;
// *metalog.Catalog implements it.
type Metadata interface {
	Read(fn func(v *catalog.View))
	Propose(ctx context.Context, rec catalog.Record) (catalog.Outcome, error)
}

// GroupHandler answers the consumer-group requests (server/kafka/groups).
type GroupHandler interface {
	Handle(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
}

// Config configures a Server.
type Config struct {
	Node catalog.NodeID
	// Cluster is the cluster's name, reported as the Kafka cluster id.
	Cluster string
	Meta    Metadata
	// Buckets returns the node's current bucket manager (nil while the node
	// registers again).
	Buckets func() *buckets.Manager
	// NodeEpoch is the node's current epoch (0 while it registers again);
	// it makes producer ids unique across restarts.
	NodeEpoch func() uint64
	// Live reports whether a node holds its liveness lease.
	Live func(catalog.NodeID) bool
	// Groups answers the group requests; nil: they are not advertised.
	Groups GroupHandler
	// GroupKeys lists the group requests Groups answers, with the
	// versions to advertise.
	GroupKeys []kmsg.ApiVersionsResponseApiKey
	// AutoCreateTopics creates a Kafka-shaped log table for a topic that a
	// Metadata request (that allows it) or a produce names.
	AutoCreateTopics bool
	// DefaultPartitions is the partition count of auto-created topics and
	// of CreateTopics with -1 partitions. Default 1.
	DefaultPartitions int
	// MaxRequestBytes bounds a request frame; a larger one closes the
	// connection. Default 100 MiB (Kafka's socket.request.max.bytes).
	MaxRequestBytes int
	// MaxInFlight bounds the responses a connection may have waiting (for
	// produces to become durable) before the reader stops reading.
	// Default 16.
	MaxInFlight int
	// Access authenticates connections (SASL, sasl.go) and authorizes
	// their requests (authz.go). Unless it is in trust mode, a connection
	// must authenticate before anything but ApiVersions. nil: no SASL and
	// no checks (tests).
	Access *access.Guard
	// Lake reads the rows of a partition below its stream's start, which
	// retention trimmed once they were tiered (fetch.go, logStart). nil:
	// fetches read the streams only, and the log starts at the stream's
	// start.
	Lake   *tiering.LakeReader
	Logger *slog.Logger
}

// Server is a node's Kafka listener.
type Server struct {
	cfg       Config
	producers *producerIDs
	states    *producerStates
	shapes    shapes
	counters  counters
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup

	mu struct {
		sync.Mutex
		ln     net.Listener
		conns  map[net.Conn]struct{}
		closed bool
	}
}

// New returns a listener; Serve starts it.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Live == nil {
		cfg.Live = func(catalog.NodeID) bool { return true }
	}
	if cfg.NodeEpoch == nil {
		cfg.NodeEpoch = func() uint64 { return 1 }
	}
	if cfg.DefaultPartitions <= 0 {
		cfg.DefaultPartitions = 1
	}
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = 100 << 20
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 16
	}
	s := &Server{cfg: cfg, producers: newProducerIDs(cfg.Node), states: newProducerStates()}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.mu.conns = map[net.Conn]struct{}{}
	return s
}

// Serve accepts connections on ln until Close.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.mu.ln = ln
	s.mu.Unlock()
	for {
		c, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.mu.closed
			s.mu.Unlock()
			if closed {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return fmt.Errorf("kafka listener: %w", err)
		}
		s.mu.Lock()
		if s.mu.closed {
			s.mu.Unlock()
			c.Close()
			return nil
		}
		s.mu.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serveConn(c)
			s.mu.Lock()
			delete(s.mu.conns, c)
			s.mu.Unlock()
		}()
	}
}

// Close stops accepting, closes every connection and waits for them.
func (s *Server) Close() {
	s.mu.Lock()
	s.mu.closed = true
	if s.mu.ln != nil {
		s.mu.ln.Close()
	}
	for c := range s.mu.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}

// request is one parsed request frame.
type request struct {
	key, version int16
	correlation  int32
	clientID     string
	clientHost   string // the connection's remote host
	body         kmsg.Request
}

// reply is a response that may still be waiting for appends to be
// durable: wait, if set, is called by the writer, in order, and returns the
// response (nil: send nothing, for acks=0).
type reply struct {
	correlation int32
	key         int16
	version     int16
	resp        kmsg.Response
	wait        func() kmsg.Response
	// token, if set, is an unframed SASL token to send instead of a
	// response (after a v0 SaslHandshake).
	token []byte
	// close: the reader closes the connection once this reply is written
	// (a failed authentication).
	close bool
}

// serveConn runs one connection: the reader here, the writer in a
// goroutine. A frame that cannot be parsed, an unknown API key or an
// unsupported version closes the connection (after answering ApiVersions,
// which a client may send at any version).
func (s *Server) serveConn(c net.Conn) {
	s.counters.connections.Add(1)
	defer s.counters.connections.Add(-1)
	replies := make(chan reply, s.cfg.MaxInFlight)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		s.writeReplies(c, replies)
	}()
	ctx, cancel := context.WithCancel(s.ctx)
	defer func() {
		cancel()
		close(replies)
		<-writerDone
		c.Close()
	}()
	log := s.cfg.Logger.With("remote", c.RemoteAddr().String())
	remoteHost, _, _ := net.SplitHostPort(c.RemoteAddr().String())
	ss := &session{conn: c, remote: c.RemoteAddr()}
	var size [4]byte
	for {
		if _, err := io.ReadFull(c, size[:]); err != nil {
			return
		}
		n := int(int32(binary.BigEndian.Uint32(size[:])))
		limit := s.cfg.MaxRequestBytes
		if s.needsAuth(ss) {
			limit = min(limit, maxAuthFrameBytes)
		}
		if ss.rawToken() {
			if n < 0 || n > limit {
				log.Warn("kafka: closing connection: bad SASL token size", "bytes", n, "max", limit)
				s.counters.badRequests.Add(1)
				return
			}
			token := make([]byte, n)
			if _, err := io.ReadFull(c, token); err != nil {
				return
			}
			out, err := s.saslToken(ss, token)
			if err != nil {
				// After a v0 handshake a failure has no answer: the
				// connection closes (the guard logged why).
				return
			}
			select {
			case replies <- reply{token: out}:
			case <-writerDone:
				return
			}
			continue
		}
		if n < 8 || n > limit {
			log.Warn("kafka: closing connection: bad request size", "bytes", n, "max", limit)
			s.counters.badRequests.Add(1)
			return
		}
		frame := make([]byte, n)
		if _, err := io.ReadFull(c, frame); err != nil {
			return
		}
		if key := int16(binary.BigEndian.Uint16(frame)); s.needsAuth(ss) && !allowedBeforeAuth(key) || ss.exchanging() && key != int16(kmsg.SASLAuthenticate) {
			// Kafka closes such a connection without an answer.
			log.Info("kafka: closing connection: request before SASL authentication", "api", kmsg.NameForKey(key))
			s.counters.badRequests.Add(1)
			return
		}
		req, err := parseRequest(frame, s.supported)
		req.clientHost = remoteHost
		if err != nil {
			var unsupported *unsupportedVersionError
			if errors.As(err, &unsupported) && req.key == int16(kmsg.ApiVersions) {
				// KIP-511: answer v0 with the error and our versions, so the
				// client can pick one.
				replies <- reply{correlation: req.correlation, key: req.key, version: 0, resp: s.apiVersionsUnsupported()}
				continue
			}
			log.Warn("kafka: closing connection: bad request", "err", err)
			s.counters.badRequests.Add(1)
			return
		}
		r, err := s.handle(ctx, ss, req)
		if err != nil {
			log.Warn("kafka: closing connection", "api", kmsg.NameForKey(req.key), "version", req.version, "err", err)
			s.counters.badRequests.Add(1)
			return
		}
		select {
		case replies <- r:
		case <-writerDone:
			return
		}
		if r.close {
			return // the deferred close lets the writer send r first
		}
	}
}

// writeReplies writes replies in order until replies is closed or a write
// fails. After a failure it still drains replies, so the reader never
// blocks on a dead connection.
func (s *Server) writeReplies(c net.Conn, replies <-chan reply) {
	var buf []byte
	broken := false
	for r := range replies {
		if r.token != nil {
			if !broken {
				buf = binary.BigEndian.AppendUint32(buf[:0], uint32(len(r.token)))
				buf = append(buf, r.token...)
				if _, err := c.Write(buf); err != nil {
					broken = true
					c.Close()
				}
			}
			continue
		}
		resp := r.resp
		if r.wait != nil {
			resp = r.wait()
		}
		if broken || resp == nil {
			continue
		}
		resp.SetVersion(r.version)
		buf = append(buf[:0], 0, 0, 0, 0)
		buf = binary.BigEndian.AppendUint32(buf, uint32(r.correlation))
		// The response header is flexible with the body, except
		// ApiVersions' (KIP-511).
		if resp.IsFlexible() && r.key != int16(kmsg.ApiVersions) {
			buf = append(buf, 0)
		}
		buf = resp.AppendTo(buf)
		binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
		if _, err := c.Write(buf); err != nil {
			broken = true
			c.Close() // the reader sees the close and stops
		}
	}
}

type unsupportedVersionError struct{ key, version int16 }

func (e *unsupportedVersionError) Error() string {
	return fmt.Sprintf("%s v%d is not supported", kmsg.NameForKey(e.key), e.version)
}

// parseRequest parses a frame: the request header (v1, or v2 for flexible
// versions) and the body. The returned request has its key, version and
// correlation id also when err is set, as far as they were read.
func parseRequest(frame []byte, supported func(key, version int16) bool) (request, error) {
	var req request
	req.key = int16(binary.BigEndian.Uint16(frame[0:]))
	req.version = int16(binary.BigEndian.Uint16(frame[2:]))
	req.correlation = int32(binary.BigEndian.Uint32(frame[4:]))
	rest := frame[8:]
	if len(rest) < 2 {
		return req, fmt.Errorf("request header: no client id")
	}
	idLen := int(int16(binary.BigEndian.Uint16(rest)))
	rest = rest[2:]
	if idLen > 0 {
		if idLen > len(rest) {
			return req, fmt.Errorf("request header: client id longer than the frame")
		}
		req.clientID = string(rest[:idLen])
		rest = rest[idLen:]
	}
	body := kmsg.RequestForKey(req.key)
	if body == nil {
		return req, fmt.Errorf("unknown API key %d", req.key)
	}
	if !supported(req.key, req.version) {
		return req, &unsupportedVersionError{key: req.key, version: req.version}
	}
	body.SetVersion(req.version)
	if body.IsFlexible() {
		var err error
		if rest, err = skipTags(rest); err != nil {
			return req, fmt.Errorf("request header: %w", err)
		}
	}
	if err := body.ReadFrom(rest); err != nil {
		return req, fmt.Errorf("%s v%d: %w", kmsg.NameForKey(req.key), req.version, err)
	}
	req.body = body
	return req, nil
}

// skipTags skips a tagged-fields section: an unsigned varint count, then
// per field an unsigned varint tag, an unsigned varint size and the bytes.
func skipTags(b []byte) ([]byte, error) {
	count, n := binary.Uvarint(b)
	if n <= 0 {
		return nil, fmt.Errorf("bad tagged fields")
	}
	b = b[n:]
	for ; count > 0; count-- {
		if _, n = binary.Uvarint(b); n <= 0 {
			return nil, fmt.Errorf("bad tagged field")
		}
		b = b[n:]
		size, n := binary.Uvarint(b)
		if n <= 0 || size > uint64(len(b)-n) {
			return nil, fmt.Errorf("bad tagged field")
		}
		b = b[n+int(size):]
	}
	return b, nil
}

// handle answers one request of the connection of ss. An error closes the
// connection.
func (s *Server) handle(ctx context.Context, ss *session, req request) (reply, error) {
	r := reply{correlation: req.correlation, key: req.key, version: req.version}
	if req.key >= 0 && req.key < maxAPIKey {
		s.counters.requests[req.key].Add(1)
	}
	var resp kmsg.Response
	var err error
	switch body := req.body.(type) {
	case *kmsg.ApiVersionsRequest:
		resp = s.apiVersions(body)
	case *kmsg.SASLHandshakeRequest:
		resp, r.close = s.saslHandshake(ss, body)
	case *kmsg.SASLAuthenticateRequest:
		resp, r.close = s.saslAuthenticate(ss, body)
	case *kmsg.MetadataRequest:
		resp = s.metadata(ctx, ss, body)
	case *kmsg.ProduceRequest:
		wait := s.produce(ctx, ss, body)
		if body.Acks == 0 {
			// No response; still wait for the appends, in order, so that
			// the connection's memory stays bounded.
			r.wait = func() kmsg.Response { wait(); return nil }
		} else {
			r.wait = wait
		}
		return r, nil
	case *kmsg.FetchRequest:
		resp = s.fetch(ctx, ss, body)
	case *kmsg.ListOffsetsRequest:
		resp = s.listOffsets(ctx, ss, body)
	case *kmsg.OffsetForLeaderEpochRequest:
		resp = s.offsetForLeaderEpoch(ctx, ss, body)
	case *kmsg.InitProducerIDRequest:
		resp = s.initProducerID(body)
	case *kmsg.CreateTopicsRequest:
		resp = s.createTopics(ctx, ss, body)
	case *kmsg.DeleteTopicsRequest:
		resp = s.deleteTopics(ctx, ss, body)
	case *kmsg.DescribeClusterRequest:
		resp = s.describeCluster(body)
	case *kmsg.DescribeConfigsRequest:
		resp = s.describeConfigs(ss, body)
	default:
		if s.cfg.Groups == nil || !s.groupKey(req.key) {
			return r, fmt.Errorf("%s is not served", kmsg.NameForKey(req.key))
		}
		if resp, err = s.groupRequest(groups.ContextWithClient(ctx, req.clientID, req.clientHost), ss, req.body); err != nil {
			return r, err
		}
	}
	r.resp = resp
	return r, nil
}

func (s *Server) groupKey(key int16) bool {
	for _, k := range s.cfg.GroupKeys {
		if k.ApiKey == key {
			return true
		}
	}
	return false
}
