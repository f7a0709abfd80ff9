package flightwire

import (
	"context"
	"errors"
	"reflect"
	"testing"
)

// notLeader is the answer of a node that names to as the bucket's leader.
func notLeader(to string) error {
	return NotLeaderStatus("bucket 7 is led elsewhere", Redirect{Bucket: 7, To: to, Leader: 2})
}

func TestFollowRedirects(t *testing.T) {
	errStorage := errors.New("disk on fire")
	unavailable := UnavailableStatus("bucket 7 is opening", 7)
	badRedirect := notLeader("http://n2:1")
	for _, tc := range []struct {
		name string
		max  int
		// nodes answers a call at each address; a missing one is a
		// test failure.
		nodes     map[string]error
		wantCalls []string
		wantAddr  string
		wantErr   error // compared with errors.Is; nil means success
		// wantTo is where the returned error redirects, if it is a
		// redirect.
		wantTo string
	}{
		{
			name:      "no redirect",
			max:       3,
			nodes:     map[string]error{"n1:1": nil},
			wantCalls: []string{"n1:1"},
			wantAddr:  "n1:1",
		},
		{
			name: "chain within the bound",
			max:  3,
			nodes: map[string]error{
				"n1:1": notLeader("grpc+tcp://n2:1"),
				"n2:1": notLeader("grpc+tls://n3:1"),
				"n3:1": notLeader("n4:1"), // a bare host:port is a location too
				"n4:1": nil,
			},
			wantCalls: []string{"n1:1", "n2:1", "n3:1", "n4:1"},
			wantAddr:  "n4:1",
		},
		{
			name: "chain over the bound returns the last redirect",
			max:  2,
			nodes: map[string]error{
				"n1:1": notLeader("grpc+tcp://n2:1"),
				"n2:1": notLeader("grpc+tcp://n3:1"),
				"n3:1": notLeader("grpc+tcp://n4:1"),
				"n4:1": nil,
			},
			wantCalls: []string{"n1:1", "n2:1", "n3:1"},
			wantAddr:  "n3:1",
			wantTo:    "n4:1",
		},
		{
			name:      "no hops allowed",
			max:       0,
			nodes:     map[string]error{"n1:1": notLeader("grpc+tcp://n2:1"), "n2:1": nil},
			wantCalls: []string{"n1:1"},
			wantAddr:  "n1:1",
			wantTo:    "n2:1",
		},
		{
			name:      "redirect to a bad location is not followed",
			max:       3,
			nodes:     map[string]error{"n1:1": badRedirect},
			wantCalls: []string{"n1:1"},
			wantAddr:  "n1:1",
			wantErr:   badRedirect,
		},
		{
			name:      "unavailable is returned at once",
			max:       3,
			nodes:     map[string]error{"n1:1": notLeader("grpc+tcp://n2:1"), "n2:1": unavailable},
			wantCalls: []string{"n1:1", "n2:1"},
			wantAddr:  "n2:1",
			wantErr:   unavailable,
		},
		{
			name:      "another error is returned at once",
			max:       3,
			nodes:     map[string]error{"n1:1": errStorage},
			wantCalls: []string{"n1:1"},
			wantAddr:  "n1:1",
			wantErr:   errStorage,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls, followed []string
			r := Redirects{Max: tc.max, Followed: func(to string) { followed = append(followed, to) }}
			addr, err := r.Follow(context.Background(), "n1:1", func(_ context.Context, addr string) error {
				calls = append(calls, addr)
				answer, ok := tc.nodes[addr]
				if !ok {
					t.Fatalf("call at %s, which is no node", addr)
				}
				return answer
			})
			if !reflect.DeepEqual(calls, tc.wantCalls) {
				t.Errorf("calls at %v, want %v", calls, tc.wantCalls)
			}
			if want := tc.wantCalls[1:]; !reflect.DeepEqual(followed, want) && (len(followed) > 0 || len(want) > 0) {
				t.Errorf("followed %v, want %v", followed, want)
			}
			if addr != tc.wantAddr {
				t.Errorf("last call at %s, want %s", addr, tc.wantAddr)
			}
			switch {
			case tc.wantTo != "":
				if to, ok := RedirectTarget(err); !ok || to != tc.wantTo {
					t.Errorf("error %v: want a redirect to %s", err, tc.wantTo)
				}
			case tc.wantErr == nil:
				if err != nil {
					t.Errorf("error %v, want none", err)
				}
			case !errors.Is(err, tc.wantErr):
				t.Errorf("error %v, want %v", err, tc.wantErr)
			}
		})
	}
}

// TestFollowRedirectsContext: a call that sees its context end answers
// with that, which is no redirect: Follow stops there however many hops
// are left.
func TestFollowRedirectsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var calls []string
	addr, err := Redirects{Max: 100}.Follow(ctx, "n1:1", func(ctx context.Context, addr string) error {
		calls = append(calls, addr)
		if err := ctx.Err(); err != nil {
			return err
		}
		if len(calls) == 2 {
			cancel() // the request is cancelled while the call runs
			<-ctx.Done()
			return ctx.Err()
		}
		return notLeader("grpc+tcp://n" + string(rune('1'+len(calls))) + ":1")
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	if want := []string{"n1:1", "n2:1"}; !reflect.DeepEqual(calls, want) || addr != "n2:1" {
		t.Fatalf("calls at %v ending at %s, want %v ending at n2:1", calls, addr, want)
	}
}

// TestFollowRedirectsMappedErrors: a server that maps statuses to its own
// errors before looking at them says where they redirect with To.
func TestFollowRedirectsMappedErrors(t *testing.T) {
	to := func(err error) (string, bool) {
		var m *movedError
		if errors.As(err, &m) {
			return m.to, true
		}
		return "", false
	}
	var calls []string
	addr, err := Redirects{Max: 3, To: to}.Follow(context.Background(), "a", func(_ context.Context, addr string) error {
		calls = append(calls, addr)
		switch addr {
		case "a":
			return &movedError{to: "b"}
		case "b":
			// A wire redirect is not one here: To decides.
			return notLeader("grpc+tcp://c:1")
		}
		return nil
	})
	if _, ok := RedirectOf(err); !ok || addr != "b" || !reflect.DeepEqual(calls, []string{"a", "b"}) {
		t.Fatalf("calls %v ending at %s with %v; want a, b ending at b with the wire redirect", calls, addr, err)
	}
}

// movedError is a server's own error for a bucket led at to.
type movedError struct{ to string }

func (e *movedError) Error() string { return "moved to " + e.to }
