package client

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Authentication (docs/flight.md, "Authentication"): with Options.User
// set, each node connection runs Flight's basic-auth handshake once, on
// its first call, and sends the bearer token it returns with every call
// after. A call the node refuses as Unauthenticated (the token expired,
// after 12 hours) invalidates the token: a unary call or a DoGet/DoAction
// handshakes again and repeats itself; a DoPut fails, and sendBucket
// repeats it once (the server refuses before reading anything, so nothing
// was written).

const handshakeMethod = "/arrow.flight.protocol.FlightService/Handshake"

// bearer is the token of one node connection. It is safe for concurrent
// use.
type bearer struct {
	user, password string

	// handshake serializes handshakes, so that concurrent first calls make
	// one.
	handshake sync.Mutex
	mu        struct {
		sync.Mutex
		header string // "Bearer <token>"; "" before the first handshake
	}
}

func newBearer(user, password string) *bearer { return &bearer{user: user, password: password} }

func (b *bearer) current() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mu.header
}

// invalidate forgets header if it is still the current token.
func (b *bearer) invalidate(header string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mu.header == header {
		b.mu.header = ""
	}
}

// token returns the current token's header, handshaking on cc when there
// is none.
func (b *bearer) token(ctx context.Context, cc *grpc.ClientConn) (string, error) {
	if h := b.current(); h != "" {
		return h, nil
	}
	b.handshake.Lock()
	defer b.handshake.Unlock()
	if h := b.current(); h != "" {
		return h, nil // another call handshook meanwhile
	}
	h, err := basicHandshake(ctx, flight.NewFlightServiceClient(cc), b.user, b.password)
	if err != nil {
		return "", err
	}
	b.mu.Lock()
	b.mu.header = h
	b.mu.Unlock()
	return h, nil
}

// basicHandshake runs Flight's basic-auth handshake and returns the
// authorization header the server answered with ("Bearer <token>"), from
// its headers or trailers.
func basicHandshake(ctx context.Context, fc flight.FlightServiceClient, user, password string) (string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
	stream, err := fc.Handshake(metadata.AppendToOutgoingContext(ctx, "authorization", basic))
	if err != nil {
		return "", fmt.Errorf("handshake as %q: %w", user, err)
	}
	if err := stream.CloseSend(); err != nil {
		return "", fmt.Errorf("handshake as %q: %w", user, err)
	}
	header, herr := stream.Header()
	for {
		if _, err = stream.Recv(); err != nil {
			break
		}
	}
	if !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("handshake as %q: %w", user, err)
	}
	if herr != nil {
		return "", fmt.Errorf("handshake as %q: %w", user, herr)
	}
	for _, h := range append(header.Get("authorization"), stream.Trailer().Get("authorization")...) {
		if scheme, token, _ := strings.Cut(h, " "); strings.EqualFold(scheme, "Bearer") && token != "" {
			return h, nil
		}
	}
	return "", fmt.Errorf("handshake as %q: the server returned no bearer token", user)
}

// authDialOptions are the interceptors that add b's token to every call
// on a connection.
func authDialOptions(b *bearer) []grpc.DialOption {
	unary := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		for attempt := 0; ; attempt++ {
			h, err := b.token(ctx, cc)
			if err != nil {
				return err
			}
			err = invoker(metadata.AppendToOutgoingContext(ctx, "authorization", h), method, req, reply, cc, opts...)
			if status.Code(err) != codes.Unauthenticated || attempt > 0 {
				return err
			}
			b.invalidate(h)
		}
	}
	stream := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		if method == handshakeMethod {
			return streamer(ctx, desc, cc, method, opts...)
		}
		h, err := b.token(ctx, cc)
		if err != nil {
			return nil, err
		}
		s, err := streamer(metadata.AppendToOutgoingContext(ctx, "authorization", h), desc, cc, method, opts...)
		if err != nil {
			return nil, err
		}
		if desc.ClientStreams {
			return &invalidatingStream{ClientStream: s, b: b, header: h}, nil
		}
		return &replayStream{ClientStream: s, b: b, header: h,
			reopen: func(h string) (grpc.ClientStream, error) {
				return streamer(metadata.AppendToOutgoingContext(ctx, "authorization", h), desc, cc, method, opts...)
			},
			token: func() (string, error) { return b.token(ctx, cc) },
		}, nil
	}
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(unary), grpc.WithChainStreamInterceptor(stream)}
}

// invalidatingStream is a client-streaming call (DoPut): Unauthenticated
// invalidates the token it was sent with, and the call fails (its batches
// are not kept to send again).
type invalidatingStream struct {
	grpc.ClientStream
	b      *bearer
	header string
}

func (s *invalidatingStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if status.Code(err) == codes.Unauthenticated {
		s.b.invalidate(s.header)
	}
	return err
}

// replayStream is a call that sends one request (DoGet, DoAction,
// ListFlights): if its first answer is Unauthenticated, the token is
// invalidated and the call opened again with a new one and its request
// sent again, once. gRPC's generated code sends the request and closes
// the sending side before it returns the stream, so the fields are set
// before any RecvMsg.
type replayStream struct {
	grpc.ClientStream
	b      *bearer
	header string
	reopen func(header string) (grpc.ClientStream, error)
	token  func() (string, error)

	req      any
	closed   bool
	received bool
	retried  bool
}

func (s *replayStream) SendMsg(m any) error {
	s.req = m
	return s.ClientStream.SendMsg(m)
}

func (s *replayStream) CloseSend() error {
	s.closed = true
	return s.ClientStream.CloseSend()
}

func (s *replayStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err == nil {
		s.received = true
		return nil
	}
	if s.received || status.Code(err) != codes.Unauthenticated {
		return err
	}
	s.b.invalidate(s.header)
	if s.retried || !s.closed {
		return err
	}
	s.retried = true
	h, terr := s.token()
	if terr != nil {
		return terr
	}
	ns, oerr := s.reopen(h)
	if oerr != nil {
		return oerr
	}
	if s.req != nil {
		if serr := ns.SendMsg(s.req); serr != nil && !errors.Is(serr, io.EOF) {
			return serr
		}
	}
	if cerr := ns.CloseSend(); cerr != nil {
		return cerr
	}
	s.ClientStream, s.header = ns, h
	return s.RecvMsg(m)
}
