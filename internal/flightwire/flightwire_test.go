package flightwire

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestDescriptors(t *testing.T) {
	for _, tc := range []struct {
		name string
		desc *flight.FlightDescriptor
		want Command
		err  bool
	}{
		{"table path", &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"t"}}, Command{Table: "t"}, false},
		{"bucket path", &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"t", "bucket", "12"}}, Command{Table: "t", Bucket: 12}, false},
		{"bad bucket id", &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"t", "bucket", "x"}}, Command{}, true},
		{"bucket 0", &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"t", "bucket", "0"}}, Command{}, true},
		{"schema and table", &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"a", "b"}}, Command{Table: "a.b"}, false},
		{"schema, table and bucket", &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"a", "b", "bucket", "7"}}, Command{Table: "a.b", Bucket: 7}, false},
		{"empty schema", &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"", "b"}}, Command{}, true},
		{"three elements, not a bucket", &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"a", "b", "c"}}, Command{}, true},
		{"five elements", &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"a", "b", "c", "d", "e"}}, Command{}, true},
		{"empty path", &flight.FlightDescriptor{Type: flight.DescriptorPATH}, Command{}, true},
		{"command", &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: []byte(`{"table":"t","partitions":["2024-01-01"],"columns":["b","a"]}`)},
			Command{Table: "t", Partitions: []string{"2024-01-01"}, Columns: []string{"b", "a"}}, false},
		{"bucket command", &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: []byte(`{"bucket":3}`)}, Command{Bucket: 3}, false},
		{"unknown field", &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: []byte(`{"table":"t","colums":["a"]}`)}, Command{}, true},
		{"empty command", &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: []byte(`{}`)}, Command{}, true},
		{"not json", &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: []byte(`t`)}, Command{}, true},
		{"nil", nil, Command{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseDescriptor(tc.desc)
			if (err != nil) != tc.err || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, %v; want %+v, error %v", got, err, tc.want, tc.err)
			}
			if err != nil {
				return
			}
			// Encoding and parsing again gives the same command.
			again, err := ParseDescriptor(got.Descriptor())
			if err != nil || !reflect.DeepEqual(again, got) {
				t.Fatalf("round trip: %+v, %v", again, err)
			}
		})
	}
}

func TestTickets(t *testing.T) {
	to := uint64(100)
	tk := Ticket{Bucket: 7, From: 5, To: &to, Columns: []string{"a"}}
	if got := string(tk.Encode()); got != `{"v":1,"bucket":7,"from":5,"to":100,"columns":["a"]}` {
		t.Fatalf("encoding changed: %s", got)
	}
	back, err := ParseTicket(tk.Encode())
	if err != nil || back.Bucket != 7 || back.From != 5 || *back.To != 100 || back.Columns[0] != "a" || back.V != TicketVersion {
		t.Fatalf("%+v %v", back, err)
	}
	for _, bad := range []string{`{"v":2,"bucket":1}`, `{"v":1}`, `{"v":1,"bucket":1,"from":9,"to":3}`, `x`} {
		if _, err := ParseTicket([]byte(bad)); err == nil {
			t.Fatalf("ticket %s accepted", bad)
		}
	}
	// A ticket without "to" reads to the end.
	if tk, err := ParseTicket([]byte(`{"v":1,"bucket":1}`)); err != nil || tk.To != nil {
		t.Fatalf("%+v %v", tk, err)
	}
}

func TestErrorDetails(t *testing.T) {
	err := NotLeaderStatus("bucket 7 is led by node 2", Redirect{Bucket: 7, To: Location("127.0.0.1:9000"), Leader: 2})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatal(err)
	}
	// Wrapping (as ipc readers do) keeps the details.
	r, ok := RedirectOf(fmt.Errorf("read: %w", err))
	if !ok || r.Bucket != 7 || r.Leader != 2 || r.To != "grpc+tcp://127.0.0.1:9000" {
		t.Fatalf("%+v %v", r, ok)
	}
	if addr, err := r.Addr(); err != nil || addr != "127.0.0.1:9000" {
		t.Fatalf("%q %v", addr, err)
	}
	un := UnavailableStatus("opening", 7)
	if !IsUnavailable(un) || !IsBucketUnavailable(un) {
		t.Fatal("bucket unavailable not recognised")
	}
	transport := status.Error(codes.Unavailable, "connection refused")
	if !IsUnavailable(transport) || IsBucketUnavailable(transport) {
		t.Fatal("a transport error is not the bucket's")
	}
	if _, ok := RedirectOf(un); ok {
		t.Fatal("Unavailable has no redirect")
	}
	if _, ok := RedirectOf(errors.New("x")); ok {
		t.Fatal("plain errors have no redirect")
	}
	// A FailedPrecondition of another domain is not a redirect.
	if _, ok := RedirectOf(status.Error(codes.FailedPrecondition, "x")); ok {
		t.Fatal("redirect without details")
	}
}

// Which failed writes may be sent again: only those that certainly did
// not append anything.
func TestRetryableWrite(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"not leader", NotLeaderStatus("x", Redirect{Bucket: 1, To: Location("h:1")}), true},
		{"bucket unavailable", UnavailableStatus("opening", 1), true},
		{"connection refused before the call", &notSentError{status.Error(codes.Unavailable, "connection refused")}, true},
		{"connection broke during the call", status.Error(codes.Unavailable, "connection reset"), false},
		{"outcome unknown", OutcomeUnknownStatus("x", 1), false},
		{"deadline", status.Error(codes.DeadlineExceeded, "x"), false},
	} {
		if got := RetryableWrite(fmt.Errorf("wrapped: %w", tc.err)); got != tc.want {
			t.Errorf("%s: retryable %v, want %v", tc.name, got, tc.want)
		}
	}
	if !IsOutcomeUnknown(OutcomeUnknownStatus("x", 0)) || IsOutcomeUnknown(UnavailableStatus("x", 1)) {
		t.Fatal("IsOutcomeUnknown")
	}
}

func TestParseLocation(t *testing.T) {
	for in, want := range map[string]string{
		"grpc+tcp://h:1": "h:1", "grpc://h:1": "h:1", "h:1": "h:1", "grpc+tcp://[::1]:5/": "[::1]:5",
		"grpc+tls://h:1": "h:1",
	} {
		if got, err := ParseLocation(in); err != nil || got != want {
			t.Fatalf("%s: %q %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "grpc+unix:///tmp/s", "http://h:1", "host"} {
		if _, err := ParseLocation(bad); err == nil {
			t.Fatalf("%q accepted", bad)
		}
	}
}
