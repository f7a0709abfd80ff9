package client_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/minkdb/mink/client"
)

// authNode is fakeNode behind Flight's basic-auth handshake: it accepts
// alice/pw, hands out tokens tok-1, tok-2, …, and refuses every call
// without a token it considers valid.
type authNode struct {
	*fakeNode
	handshakes atomic.Int64
	mu         sync.Mutex
	valid      map[string]bool
}

func (a *authNode) Handshake(stream flight.FlightService_HandshakeServer) error {
	n := a.handshakes.Add(1)
	md, _ := metadata.FromIncomingContext(stream.Context())
	if got := md.Get("authorization"); len(got) != 1 || got[0] != "Basic "+base64.StdEncoding.EncodeToString([]byte("alice:pw")) {
		return status.Error(codes.Unauthenticated, "authentication failed")
	}
	token := fmt.Sprintf("tok-%d", n)
	a.mu.Lock()
	a.valid[token] = true
	a.mu.Unlock()
	return stream.SendHeader(metadata.Pairs("authorization", "Bearer "+token))
}

// expire makes every token handed out so far invalid, as if they expired.
func (a *authNode) expire() {
	a.mu.Lock()
	defer a.mu.Unlock()
	clear(a.valid)
}

func (a *authNode) check(ctx context.Context) error {
	md, _ := metadata.FromIncomingContext(ctx)
	got := md.Get("authorization")
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(got) != 1 || !a.valid[strings.TrimPrefix(got[0], "Bearer ")] {
		return status.Error(codes.Unauthenticated, "invalid or expired bearer token")
	}
	return nil
}

func startAuthFake(t *testing.T, pk bool) *authNode {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := &authNode{fakeNode: &fakeNode{addr: ln.Addr().String(), pk: pk}, valid: map[string]bool{}}
	srv := grpc.NewServer(grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if !strings.HasSuffix(info.FullMethod, "/Handshake") {
			if err := a.check(ss.Context()); err != nil {
				return err
			}
		}
		return handler(srv, ss)
	}))
	flight.RegisterFlightServiceServer(srv, a)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); srv.Serve(ln) }()
	t.Cleanup(func() { srv.Stop(); wg.Wait() })
	return a
}

// With Options.User the client handshakes once per node connection, sends
// the token with every call, and after the node refuses an expired token
// handshakes again and repeats the call: actions (a lookup) and writes
// (an append), each stored once.
func TestClientReauthenticates(t *testing.T) {
	for _, pk := range []bool{false, true} {
		a := startAuthFake(t, pk)
		ctx := context.Background()
		if _, err := client.DialOptions(ctx, client.Options{User: "alice", Password: "wrong"}, a.addr); status.Code(err) != codes.Unauthenticated {
			t.Fatalf("a wrong password: %v, want Unauthenticated", err)
		}
		if _, err := client.Dial(ctx, a.addr); status.Code(err) != codes.Unauthenticated {
			t.Fatalf("no credentials: %v, want Unauthenticated", err)
		}
		a.handshakes.Store(0)
		c, err := client.DialOptions(ctx, client.Options{User: "alice", Password: "pw"}, a.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if !pk {
			rec := kvBatch(0, 10)
			defer rec.Release()
			if err := c.AppendTable(ctx, "kv", rec); err != nil {
				t.Fatal(err)
			}
			a.expire()
			if err := c.AppendTable(ctx, "kv", rec); err != nil {
				t.Fatalf("append after the token expired: %v", err)
			}
			if got := a.rows.Load(); got != 20 {
				t.Fatalf("%d rows stored, want 20 (each append once)", got)
			}
		} else {
			keys := keyBatch(1, 2, 3)
			defer keys.Release()
			for range 2 {
				rows, err := c.Lookup(ctx, "kv", keys)
				if err != nil {
					t.Fatalf("lookup: %v", err)
				}
				if rows.NumRows() != 3 {
					t.Fatalf("lookup found %d rows, want 3", rows.NumRows())
				}
				rows.Release()
				a.expire()
			}
		}
		// One handshake at Dial, one after each expiry that a call met.
		if got := a.handshakes.Load(); got != 2 {
			t.Fatalf("pk=%v: %d handshakes, want 2", pk, got)
		}
	}
}
