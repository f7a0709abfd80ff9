package flightsvc_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"

	"github.com/minkdb/mink/buckets"
	"github.com/minkdb/mink/kv/kvcodec"
	"github.com/minkdb/mink/server/flightsvc"
)

// hangingServer accepts every action and never answers it.
type hangingServer struct {
	flight.BaseFlightServer
	received chan string
}

func (s *hangingServer) DoAction(a *flight.Action, stream flight.FlightService_DoActionServer) error {
	s.received <- a.Type
	<-stream.Context().Done()
	return stream.Context().Err()
}

// A kv-write that could not be sent (nothing listens) is Unavailable, safe
// to retry; one that reached the server and lost its connection before
// the answer is an unknown outcome, never Unavailable.
func TestWriteKVSentOrNot(t *testing.T) {
	pool := flightsvc.NewPool()
	defer pool.Close()
	ctx := context.Background()
	writes := []kvcodec.Write{{Op: kvcodec.OpUpsert, Key: []byte{1}, Row: []byte{1, 0}}}

	// Nothing listens at this address: the request is never sent.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	_, _, err = pool.WriteKV(ctx, closed, 7, writes)
	if !errors.Is(err, buckets.ErrUnavailable) || errors.Is(err, buckets.ErrUnknownOutcome) {
		t.Fatalf("kv-write to a closed port: want ErrUnavailable, not an unknown outcome: %v", err)
	}

	// The server receives the action, then its connection breaks.
	ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := &hangingServer{received: make(chan string, 1)}
	flight.RegisterFlightServiceServer(srv, hs)
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve(ln)
	}()
	go func() {
		select {
		case <-hs.received:
		case <-time.After(10 * time.Second):
		}
		srv.Stop() // closes the connection under the call
	}()
	_, _, err = pool.WriteKV(ctx, ln.Addr().String(), 7, writes)
	<-served
	if !errors.Is(err, buckets.ErrUnknownOutcome) || errors.Is(err, buckets.ErrUnavailable) {
		t.Fatalf("kv-write whose connection broke after it was sent: want ErrUnknownOutcome only: %v", err)
	}

	// A context that ends while the call runs: unknown too.
	ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv = grpc.NewServer()
	hs = &hangingServer{received: make(chan string, 1)}
	flight.RegisterFlightServiceServer(srv, hs)
	go srv.Serve(ln)
	defer srv.Stop()
	cctx, cancel := context.WithCancel(ctx)
	go func() {
		<-hs.received
		cancel()
	}()
	_, _, err = pool.WriteKV(cctx, ln.Addr().String(), 7, writes)
	if !errors.Is(err, buckets.ErrUnknownOutcome) {
		t.Fatalf("kv-write cancelled while it ran: want ErrUnknownOutcome: %v", err)
	}
}
