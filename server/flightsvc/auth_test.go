package flightsvc_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/minkdb/mink/access"
	"github.com/minkdb/mink/auth"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/flightwire"
	"github.com/minkdb/mink/internal/minktest"
	"github.com/minkdb/mink/server"
	"github.com/minkdb/mink/server/flightsvc"
)

const rootPassword = "root pw"

// startSecure starts a node whose superuser mink has rootPassword, and
// returns it with a SQL connection as mink.
func startSecure(t *testing.T) (*minktest.Node, *pgx.Conn) {
	t.Helper()
	pwFile := filepath.Join(t.TempDir(), "superuser")
	if err := os.WriteFile(pwFile, []byte(rootPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n := minktest.Start(t, minktest.Options{Tweak: func(cfg *server.Config) { cfg.SuperuserPasswordFile = pwFile }})
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://mink:%s@%s/mink?sslmode=disable", strings.ReplaceAll(rootPassword, " ", "%20"), n.Config.PGAddr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	return n, conn
}

// login runs the basic-auth handshake with arrow-go's client and returns
// the context that carries the bearer token.
func login(t *testing.T, c flight.Client, user, password string) context.Context {
	t.Helper()
	ctx, err := c.AuthenticateBasicToken(context.Background(), user, password)
	if err != nil {
		t.Fatalf("handshake as %s: %v", user, err)
	}
	return ctx
}

func withHeader(value string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "authorization", value)
}

// The interceptors: only a bearer token from a handshake opens a call on a
// node that requires credentials, and every refusal is Unauthenticated
// with a message that does not say why a token failed.
func TestFlightAuthentication(t *testing.T) {
	n, admin := startSecure(t)
	exec(t, admin,
		"CREATE ROLE alice LOGIN PASSWORD 'alice pw'",
		"CREATE ROLE bob LOGIN PASSWORD 'bob pw'",
		"CREATE ROLE nologin PASSWORD 'x'",
		"CREATE TABLE t (id bigint NOT NULL, v text) WITH (buckets = 1)",
		"GRANT SELECT ON t TO alice, bob")
	c := dialFlight(t, n.Config.FlightAddr)

	if _, err := c.AuthenticateBasicToken(context.Background(), "alice", "wrong"); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("handshake with a wrong password: %v, want Unauthenticated", err)
	}
	for _, user := range []string{"nobody", "nologin"} {
		if _, err := c.AuthenticateBasicToken(context.Background(), user, "x"); status.Code(err) != codes.Unauthenticated || !strings.HasSuffix(status.Convert(err).Message(), "authentication failed") {
			t.Fatalf("handshake as %s: %v, want Unauthenticated: authentication failed", user, err)
		}
	}
	alice := login(t, c, "alice", "alice pw")
	bob := login(t, c, "bob", "bob pw")
	// A token signed with another key, and one past its expiry signed with
	// the cluster's (through a role that logs in, so only the expiry fails).
	forged, err := auth.SignToken(auth.NewKey(), auth.Claims{Role: "mink", Expires: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	md, _ := metadata.FromOutgoingContext(alice)
	aliceToken := md.Get("authorization")[0]
	if !strings.HasPrefix(aliceToken, "Bearer ") {
		t.Fatalf("the handshake answered %q", aliceToken)
	}

	describe := func(ctx context.Context) error {
		var info flightwire.TableInfo
		return flightwire.DoAction(ctx, c, flightwire.ActionDescribeTable, flightwire.DescribeTableRequest{Table: "t"}, &info)
	}
	schema := func(ctx context.Context) error {
		_, err := c.GetSchema(ctx, flightwire.Command{Table: "t"}.Descriptor())
		return err
	}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want codes.Code
	}{
		{"no credentials", context.Background(), codes.Unauthenticated},
		{"basic instead of a token", withHeader("Basic " + base64.StdEncoding.EncodeToString([]byte("alice:alice pw"))), codes.Unauthenticated},
		{"forged token", withHeader("Bearer " + forged), codes.Unauthenticated},
		{"garbage token", withHeader("Bearer mink1.e30.AAAA"), codes.Unauthenticated},
		{"empty bearer", withHeader("Bearer "), codes.Unauthenticated},
		{"alice's token", alice, codes.OK},
		{"lower-case scheme", withHeader("bearer " + strings.TrimPrefix(aliceToken, "Bearer ")), codes.OK},
		{"bob's token", bob, codes.OK},
	} {
		for _, call := range []struct {
			name string
			fn   func(context.Context) error
		}{{"DoAction", describe}, {"GetSchema", schema}} {
			err := call.fn(tc.ctx)
			if got := status.Code(err); got != tc.want {
				t.Errorf("%s, %s: %v, want %v", tc.name, call.name, err, tc.want)
			}
			if tc.want == codes.Unauthenticated && strings.Contains(status.Convert(err).Message(), "signature") {
				t.Errorf("%s, %s: the message says why: %v", tc.name, call.name, err)
			}
		}
	}

	// A client that sends a HandshakeRequest (arrow-rs's
	// FlightClient::handshake) gets the token as the response's payload.
	hs, err := c.Handshake(withHeader("Basic " + base64.StdEncoding.EncodeToString([]byte("alice:alice pw"))))
	if err != nil {
		t.Fatal(err)
	}
	if err := hs.Send(&flight.HandshakeRequest{}); err != nil {
		t.Fatal(err)
	}
	hs.CloseSend()
	resp, err := hs.Recv()
	if err != nil {
		t.Fatalf("handshake with a request: %v", err)
	}
	if err := describe(withHeader("Bearer " + string(resp.Payload))); err != nil {
		t.Fatalf("the token of the response's payload: %v", err)
	}

	// A token stops working when its role loses LOGIN or is dropped.
	exec(t, admin, "ALTER ROLE bob NOLOGIN")
	if err := describe(bob); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("bob's token after NOLOGIN: %v, want Unauthenticated", err)
	}
	exec(t, admin, "REVOKE SELECT ON t FROM alice", "DROP ROLE alice")
	if err := describe(alice); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("alice's token after DROP ROLE: %v, want Unauthenticated", err)
	}
	// Repeated failures from one address are limited.
	var last error
	for range 20 {
		if _, last = c.AuthenticateBasicToken(context.Background(), "mink", "wrong"); last == nil {
			t.Fatal("a wrong password logged in")
		}
	}
	if !strings.Contains(status.Convert(last).Message(), "too many failed logins") {
		t.Fatalf("after 20 failures: %v, want the limiter's refusal", last)
	}
}

// In trust mode a call without credentials acts as the superuser, and one
// with a token acts as its role.
func TestFlightTrustMode(t *testing.T) {
	n := minktest.Start(t, minktest.Options{})
	admin := connect(t, n)
	exec(t, admin,
		"CREATE ROLE alice LOGIN",
		"CREATE TABLE t (id bigint NOT NULL, v text) WITH (buckets = 1)")
	c := dialFlight(t, n.Config.FlightAddr)
	if _, err := c.GetSchema(context.Background(), flightwire.Command{Table: "t"}.Descriptor()); err != nil {
		t.Fatalf("no credentials in trust mode: %v", err)
	}
	alice := login(t, c, "alice", "any password")
	if _, err := c.GetSchema(alice, flightwire.Command{Table: "t"}.Descriptor()); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("alice without a privilege: %v, want PermissionDenied", err)
	}
	exec(t, admin, "GRANT SELECT ON t TO alice")
	if _, err := c.GetSchema(alice, flightwire.Command{Table: "t"}.Descriptor()); err != nil {
		t.Fatalf("alice with SELECT: %v", err)
	}
}

// privilegeCase is one Flight call made by a role without the privilege it
// needs (refused with PermissionDenied) and by one with exactly that
// privilege (not refused).
type privilegeCase struct {
	method  string // the FlightServiceServer method, "DoAction/<type>" for actions
	name    string
	lacking string // a role without the privilege
	holding string // a role with it; "" when lacking is the only role tried
	call    func(ctx context.Context) error
	// none: the call needs no privilege; lacking must succeed too.
	none bool
}

// Every Flight call checks the caller's privileges, and none is left
// unchecked: the cases cover every method of the Flight service and every
// action ListActions advertises.
func TestFlightPrivilegeMatrix(t *testing.T) {
	n, admin := startSecure(t)
	roles := map[string]string{
		"r_none": "", "r_select": "SELECT", "r_insert": "INSERT", "r_update": "UPDATE",
		"r_delete": "DELETE", "r_insup": "INSERT, UPDATE",
	}
	exec(t, admin,
		"CREATE TABLE logs (id bigint NOT NULL, v text) WITH (buckets = 1)",
		"CREATE TABLE plogs (id bigint NOT NULL, dt text) PARTITION BY LIST (dt) WITH (buckets = 1)",
		"CREATE TABLE kvs (k bigint PRIMARY KEY, v text) WITH (buckets = 1)",
		"CREATE TABLE kvw (k bigint PRIMARY KEY, v text) WITH (buckets = 1)",
		"INSERT INTO logs VALUES (1, 'one')",
		"INSERT INTO kvs VALUES (1, 'one')")
	for role, privs := range roles {
		exec(t, admin, fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD 'pw'", role))
		if privs != "" {
			exec(t, admin, fmt.Sprintf("GRANT %s ON logs, plogs, kvs, kvw TO %s", privs, role))
		}
	}
	c := dialFlight(t, n.Config.FlightAddr)
	ctxs := map[string]context.Context{}
	for role := range roles {
		ctxs[role] = login(t, c, role, "pw")
	}
	root := login(t, c, "mink", rootPassword)
	logsBucket := onlyBucket(t, c, root, "logs")
	kvsBucket := onlyBucket(t, c, root, "kvs")
	kvwBucket := onlyBucket(t, c, root, "kvw")

	logRec := func() arrow.RecordBatch {
		return record(t, arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "v", Type: arrow.BinaryTypes.String}}, nil), 2, "x")
	}
	kvRec := func() arrow.RecordBatch {
		return record(t, arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.PrimitiveTypes.Int64}, {Name: "v", Type: arrow.BinaryTypes.String}}, nil), 2, "x")
	}
	put := func(desc *flight.FlightDescriptor, rec func() arrow.RecordBatch) func(context.Context) error {
		return func(ctx context.Context) error {
			r := rec()
			defer r.Release()
			_, err := flightwire.PutBatches(ctx, c, desc, []arrow.RecordBatch{r})
			return err
		}
	}
	get := func(ticket flightwire.Ticket) func(context.Context) error {
		return func(ctx context.Context) error {
			return flightwire.GetStream(ctx, c, ticket.Encode(), nil, func(arrow.RecordBatch, flightwire.BatchMeta) error { return nil })
		}
	}
	action := func(typ string, body any) func(context.Context) error {
		return func(ctx context.Context) error {
			var out json.RawMessage
			return flightwire.DoAction(ctx, c, typ, body, &out)
		}
	}
	kvWrite := func(w flightwire.KVWrite) func(context.Context) error {
		return action(flightwire.ActionKVWrite, flightwire.KVWriteRequest{Bucket: uint64(kvwBucket), Writes: []flightwire.KVWrite{w}})
	}
	key, row := []byte("k"), []byte("r")
	cases := []privilegeCase{
		{method: "GetSchema", name: "logs", lacking: "r_none", holding: "r_insert",
			call: func(ctx context.Context) error {
				_, err := c.GetSchema(ctx, flightwire.Command{Table: "logs"}.Descriptor())
				return err
			}},
		{method: "GetFlightInfo", name: "logs", lacking: "r_none", holding: "r_delete",
			call: func(ctx context.Context) error {
				_, err := c.GetFlightInfo(ctx, flightwire.Command{Table: "logs"}.Descriptor())
				return err
			}},
		{method: "GetFlightInfo", name: "kvs", lacking: "r_none", holding: "r_update",
			call: func(ctx context.Context) error {
				_, err := c.GetFlightInfo(ctx, flightwire.Command{Table: "kvs"}.Descriptor())
				return err
			}},
		{method: "DoGet", name: "log bucket", lacking: "r_insup", holding: "r_select", call: get(flightwire.Ticket{Bucket: uint64(logsBucket)})},
		{method: "DoGet", name: "log bucket from an offset (the lake's union read)", lacking: "r_delete", holding: "r_select", call: get(flightwire.Ticket{Bucket: uint64(logsBucket), From: 1})},
		{method: "DoGet", name: "primary-key state", lacking: "r_update", holding: "r_select", call: get(flightwire.Ticket{Bucket: uint64(kvsBucket)})},
		{method: "DoGet", name: "changelog", lacking: "r_insert", holding: "r_select", call: get(flightwire.Ticket{Bucket: uint64(kvsBucket), Changelog: true})},
		{method: "DoPut", name: "log table", lacking: "r_select", holding: "r_insert", call: put(flightwire.Command{Table: "logs"}.Descriptor(), logRec)},
		{method: "DoPut", name: "log bucket", lacking: "r_update", holding: "r_insert", call: put(flightwire.Command{Bucket: uint64(logsBucket)}.Descriptor(), logRec)},
		{method: "DoPut", name: "primary-key table, INSERT only", lacking: "r_insert", holding: "r_insup", call: put(flightwire.Command{Table: "kvs"}.Descriptor(), kvRec)},
		{method: "DoPut", name: "primary-key bucket, UPDATE only", lacking: "r_update", holding: "r_insup", call: put(flightwire.Command{Bucket: uint64(kvsBucket)}.Descriptor(), kvRec)},
		{method: "ListFlights", name: "lists only tables with a privilege", lacking: "r_none", holding: "r_delete",
			call: func(ctx context.Context) error {
				names, err := listFlights(ctx, c)
				if err == nil && len(names) == 0 {
					return status.Error(codes.PermissionDenied, "listed nothing")
				}
				if err == nil && strings.Join(names, ",") != "kvs,kvw,logs,plogs" {
					return fmt.Errorf("listed %v", names)
				}
				return err
			}},
		{method: "ListActions", name: "any role", lacking: "r_none", none: true,
			call: func(ctx context.Context) error {
				s, err := c.ListActions(ctx, &flight.Empty{})
				for err == nil {
					_, err = s.Recv()
				}
				if errors.Is(err, io.EOF) {
					err = nil
				}
				return err
			}},
		{method: "DoAction/" + flightwire.ActionDescribeTable, lacking: "r_none", holding: "r_insert", call: action(flightwire.ActionDescribeTable, flightwire.DescribeTableRequest{Table: "logs"})},
		{method: "DoAction/" + flightwire.ActionCreatePartition, lacking: "r_select", holding: "r_insert", call: action(flightwire.ActionCreatePartition, flightwire.CreatePartitionRequest{Table: "plogs", Value: "a"})},
		{method: "DoAction/" + flightwire.ActionClusterStatus, lacking: "r_none", none: true, call: action(flightwire.ActionClusterStatus, nil)},
		{method: "DoAction/" + flightwire.ActionBucketEnds, lacking: "r_none", holding: "r_select", call: action(flightwire.ActionBucketEnds, flightwire.BucketEndsRequest{Buckets: []uint64{uint64(logsBucket)}})},
		{method: "DoAction/" + flightwire.ActionLookup, lacking: "r_insup", holding: "r_select", call: action(flightwire.ActionLookup, flightwire.KVLookupRequest{Bucket: uint64(kvsBucket), Keys: [][]byte{key}})},
		{method: "DoAction/" + flightwire.ActionKVWrite, name: "insert", lacking: "r_update", holding: "r_insert", call: kvWrite(flightwire.KVWrite{Op: 0, Key: key, Row: row})},
		{method: "DoAction/" + flightwire.ActionKVWrite, name: "insert-if-absent", lacking: "r_delete", holding: "r_insert", call: kvWrite(flightwire.KVWrite{Op: 1, Key: key, Row: row})},
		{method: "DoAction/" + flightwire.ActionKVWrite, name: "upsert", lacking: "r_insert", holding: "r_insup", call: kvWrite(flightwire.KVWrite{Op: 2, Key: key, Row: row})},
		{method: "DoAction/" + flightwire.ActionKVWrite, name: "upsert of a row read", lacking: "r_insert", holding: "r_update", call: kvWrite(flightwire.KVWrite{Op: 2, Key: key, Row: row, CheckRow: true, IfRow: row})},
		{method: "DoAction/" + flightwire.ActionKVWrite, name: "upsert of an absent key", lacking: "r_update", holding: "r_insert", call: kvWrite(flightwire.KVWrite{Op: 2, Key: key, Row: row, CheckRow: true})},
		{method: "DoAction/" + flightwire.ActionKVWrite, name: "update", lacking: "r_insert", holding: "r_update", call: kvWrite(flightwire.KVWrite{Op: 3, Key: key, Row: row})},
		{method: "DoAction/" + flightwire.ActionKVWrite, name: "delete", lacking: "r_insup", holding: "r_delete", call: kvWrite(flightwire.KVWrite{Op: 4, Key: key})},
		{method: "Handshake", name: "authenticates itself", lacking: "r_none", none: true,
			call: func(context.Context) error {
				_, err := c.AuthenticateBasicToken(context.Background(), "r_none", "pw")
				return err
			}},
		{method: "DoExchange", name: "unimplemented", lacking: "r_none", none: true,
			call: func(ctx context.Context) error {
				s, err := c.DoExchange(ctx)
				if err == nil {
					_, err = s.Recv()
				}
				if status.Code(err) == codes.Unimplemented {
					err = nil
				}
				return err
			}},
		{method: "PollFlightInfo", name: "unimplemented", lacking: "r_none", none: true,
			call: func(ctx context.Context) error {
				_, err := c.PollFlightInfo(ctx, flightwire.Command{Table: "logs"}.Descriptor())
				if status.Code(err) == codes.Unimplemented {
					err = nil
				}
				return err
			}},
	}

	covered := map[string]bool{}
	for _, tc := range cases {
		covered[tc.method] = true
		name := tc.method + " " + tc.name
		err := tc.call(ctxs[tc.lacking])
		switch {
		case tc.none && err != nil:
			t.Errorf("%s as %s: %v, want success", name, tc.lacking, err)
		case !tc.none && status.Code(err) != codes.PermissionDenied:
			t.Errorf("%s as %s: %v, want PermissionDenied", name, tc.lacking, err)
		case !tc.none && tc.method != "ListFlights" && !strings.HasPrefix(status.Convert(err).Message(), "permission denied for table "):
			t.Errorf("%s as %s: the message is %q", name, tc.lacking, status.Convert(err).Message())
		}
		if tc.method != "Handshake" {
			// Without credentials every call is refused before it runs.
			if err := tc.call(context.Background()); status.Code(err) != codes.Unauthenticated {
				t.Errorf("%s without a token: %v, want Unauthenticated", name, err)
			}
		}
		if tc.holding == "" {
			continue
		}
		if err := tc.call(ctxs[tc.holding]); status.Code(err) == codes.PermissionDenied || status.Code(err) == codes.Unauthenticated {
			t.Errorf("%s as %s: %v, want it allowed", name, tc.holding, err)
		}
	}
	// A read forwarded by another node for a SQL statement needs any
	// privilege on the table (privileges.go); a forwarded write needs what
	// the write needs; a role without any is refused either way.
	var clusterKey []byte
	n.Server.Catalog().Read(func(v *catalog.View) { clusterKey = v.ClusterKey })
	forwarded := func(role string) context.Context {
		tok, err := auth.SignToken(clusterKey, auth.Claims{Role: role, Expires: time.Now().Add(time.Minute), Forwarded: true, Node: 2})
		if err != nil {
			t.Fatal(err)
		}
		return withHeader("Bearer " + tok)
	}
	readLog := get(flightwire.Ticket{Bucket: uint64(logsBucket)})
	lookup := action(flightwire.ActionLookup, flightwire.KVLookupRequest{Bucket: uint64(kvsBucket), Keys: [][]byte{key}})
	for _, tc := range []struct {
		name string
		role string
		call func(context.Context) error
		want codes.Code
	}{
		{"forwarded DoGet, INSERT only", "r_insert", readLog, codes.OK},
		{"forwarded DoGet, DELETE only", "r_delete", readLog, codes.OK},
		{"forwarded lookup, UPDATE only", "r_update", lookup, codes.OK},
		{"forwarded DoGet, no privilege", "r_none", readLog, codes.PermissionDenied},
		{"forwarded DoPut, SELECT only", "r_select", put(flightwire.Command{Bucket: uint64(logsBucket)}.Descriptor(), logRec), codes.PermissionDenied},
		{"forwarded kv-write delete, INSERT only", "r_insert", kvWrite(flightwire.KVWrite{Op: 4, Key: key}), codes.PermissionDenied},
	} {
		if err := tc.call(forwarded(tc.role)); status.Code(err) != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}

	// Every method of the service and every action has a case.
	svc := reflect.TypeOf((*flight.FlightServer)(nil)).Elem()
	for i := 0; i < svc.NumMethod(); i++ {
		if m := svc.Method(i).Name; m != "DoAction" && !strings.HasPrefix(m, "mustEmbed") && !covered[m] {
			t.Errorf("the Flight method %s has no privilege case", m)
		}
	}
	s, err := c.ListActions(root, &flight.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	for {
		a, err := s.Recv()
		if err != nil {
			break
		}
		if !covered["DoAction/"+a.Type] && !flightSQLActions[a.Type] {
			t.Errorf("the action %s has no privilege case", a.Type)
		}
	}
}

// flightSQLActions are the actions of Flight SQL, which the node's Flight
// listener also serves (server/flightsql): they prepare and run statements,
// whose privileges the SQL session checks (server/flightsql's TestRoles).
var flightSQLActions = map[string]bool{
	flightsql.CreatePreparedStatementActionType: true, flightsql.ClosePreparedStatementActionType: true,
	flightsql.CreatePreparedSubstraitPlanActionType: true, flightsql.CancelQueryActionType: true,
	flightsql.BeginSavepointActionType: true, flightsql.BeginTransactionActionType: true,
	flightsql.EndSavepointActionType: true, flightsql.EndTransactionActionType: true,
	flight.CancelFlightInfoActionType: true, flight.RenewFlightEndpointActionType: true,
}

// onlyBucket returns the one bucket of a table, once it serves reads.
func onlyBucket(t *testing.T, c flight.Client, ctx context.Context, table string) uint64 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := c.GetFlightInfo(ctx, flightwire.Command{Table: table}.Descriptor())
		if err != nil {
			t.Fatal(err)
		}
		if len(info.Endpoint) != 1 {
			t.Fatalf("%s has %d buckets, want 1", table, len(info.Endpoint))
		}
		var meta flightwire.EndpointMeta
		if err := json.Unmarshal(info.Endpoint[0].AppMetadata, &meta); err != nil {
			t.Fatal(err)
		}
		t2, _ := flightwire.ParseTicket(info.Endpoint[0].Ticket.Ticket)
		err = flightwire.GetStream(ctx, c, t2.Encode(), nil, func(arrow.RecordBatch, flightwire.BatchMeta) error { return nil })
		if err == nil {
			return meta.Bucket
		}
		if time.Now().After(deadline) {
			t.Fatalf("bucket %d of %s does not serve: %v", meta.Bucket, table, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func listFlights(ctx context.Context, c flight.Client) ([]string, error) {
	s, err := c.ListFlights(ctx, &flight.Criteria{})
	if err != nil {
		return nil, err
	}
	var names []string
	for {
		info, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		names = append(names, info.FlightDescriptor.Path...)
	}
	sort.Strings(names)
	return names, nil
}

// record returns a batch of (int64, string) rows 0..n-1 of schema.
func record(t *testing.T, schema *arrow.Schema, n int, text string) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i := 0; i < n; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(100 + i))
		b.Field(1).(*array.StringBuilder).Append(text)
	}
	return b.NewRecordBatch()
}

// recordingNode is a Flight server that records the authorization header
// of every DoAction.
type recordingNode struct {
	flight.BaseFlightServer
	headers chan []string
}

func (r *recordingNode) DoAction(a *flight.Action, stream flight.FlightService_DoActionServer) error {
	md, _ := metadata.FromIncomingContext(stream.Context())
	r.headers <- md.Get("authorization")
	return stream.Send(&flight.Result{Body: []byte(`{"ends": {}}`)})
}

type fakeForwarder struct{}

func (fakeForwarder) ForwardToken(id access.Identity) (string, error) { return "fwd-" + id.Name, nil }

// The pool sends a forwarding token for the identity of the call's
// context, and none when the context has no identity.
func TestPoolForwardsIdentity(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordingNode{headers: make(chan []string, 4)}
	srv := grpc.NewServer()
	flight.RegisterFlightServiceServer(srv, rec)
	go srv.Serve(ln)
	defer srv.Stop()
	p := flightsvc.NewPool()
	defer p.Close()
	ctx := context.Background()
	alice := access.NewContext(ctx, access.Identity{Role: 7, Name: "alice"})
	if _, err := p.BucketEnds(alice, ln.Addr().String(), []uint64{1}); err != nil {
		t.Fatal(err)
	}
	if got := <-rec.headers; len(got) != 0 {
		t.Fatalf("before SetForwarder: %q, want no token", got)
	}
	p.SetForwarder(fakeForwarder{})
	for _, tc := range []struct {
		ctx  context.Context
		want string
	}{{alice, "Bearer fwd-alice"}, {ctx, ""}} {
		if _, err := p.BucketEnds(tc.ctx, ln.Addr().String(), []uint64{1}); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(<-rec.headers, ","); got != tc.want {
			t.Fatalf("authorization %q, want %q", got, tc.want)
		}
	}
}
