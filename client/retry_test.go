package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/minkdb/mink/client"
	"github.com/minkdb/mink/internal/flightwire"
	"github.com/minkdb/mink/internal/minktest"
	"github.com/minkdb/mink/kv/kvcodec"
	"github.com/minkdb/mink/server"
)

// fakeNode is a Flight server that leads the one bucket (id 7) of table
// kv and answers Unavailable to the first unavailable DoPuts, like a node
// whose bucket is opening.
type fakeNode struct {
	flight.BaseFlightServer
	addr        string
	unavailable int64 // DoPuts to refuse; -1: all
	// broken makes DoPut take the rows and then fail like a connection
	// that broke before the acknowledgement.
	broken   bool
	attempts atomic.Int64
	rows     atomic.Int64
	// pk makes kv a primary-key table (id bigint PRIMARY KEY, s text);
	// lookups answer every key with the row (id, "found"), after failing
	// the first lookupFails like a connection that broke.
	pk          bool
	lookupFails int64
	lookups     atomic.Int64
}

func startFake(t *testing.T, unavailable int64) *fakeNode {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeNode{addr: ln.Addr().String(), unavailable: unavailable}
	srv := grpc.NewServer()
	flight.RegisterFlightServiceServer(srv, f)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); srv.Serve(ln) }()
	t.Cleanup(func() { srv.Stop(); wg.Wait() })
	return f
}

func (f *fakeNode) DoAction(a *flight.Action, stream flight.FlightService_DoActionServer) error {
	var out any
	switch a.Type {
	case flightwire.ActionClusterStatus:
		out = flightwire.ClusterStatus{}
	case flightwire.ActionDescribeTable:
		info := flightwire.TableInfo{ID: 1, Name: "kv", BucketKey: []string{"id"}, BucketCount: 1,
			Columns: []flightwire.Column{{Name: "id", Type: "bigint", NotNull: true}, {Name: "s", Type: "text"}},
			Buckets: []flightwire.BucketInfo{{ID: 7, Leader: 1, Location: flightwire.Location(f.addr)}}}
		if f.pk {
			info.PrimaryKey = []string{"id"}
		}
		out = info
	case flightwire.ActionLookup:
		if f.lookups.Add(1) <= f.lookupFails {
			return status.Error(codes.Unavailable, "connection reset by peer")
		}
		var req flightwire.KVLookupRequest
		if err := json.Unmarshal(a.Body, &req); err != nil {
			return status.Error(codes.InvalidArgument, err.Error())
		}
		rows, err := fakeRows(len(req.Keys))
		if err != nil {
			return status.Error(codes.Internal, err.Error())
		}
		out = flightwire.KVLookupResult{Rows: rows}
	default:
		return status.Error(codes.InvalidArgument, a.Type)
	}
	body, _ := json.Marshal(out)
	return stream.Send(&flight.Result{Body: body})
}

func (f *fakeNode) DoPut(stream flight.FlightService_DoPutServer) error {
	n := f.attempts.Add(1)
	rdr, err := flight.NewRecordReader(stream)
	if err != nil {
		return err
	}
	defer rdr.Release()
	if f.unavailable < 0 || n <= f.unavailable {
		return flightwire.UnavailableStatus("bucket 7 is opening on this node", 7)
	}
	for rdr.Next() {
		f.rows.Add(rdr.RecordBatch().NumRows())
		if f.broken {
			return status.Error(codes.Unavailable, "connection reset by peer")
		}
		body, _ := json.Marshal(flightwire.PutAck{Bucket: 7, Rows: rdr.RecordBatch().NumRows()})
		if err := stream.Send(&flight.PutResult{AppMetadata: body}); err != nil {
			return err
		}
	}
	if err := rdr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// The client retries Unavailable with backoff until the bucket serves.
func TestRetryUnavailable(t *testing.T) {
	f := startFake(t, 3)
	c := dial(t, f.addr)
	rec := kvBatch(0, 10)
	defer rec.Release()
	start := time.Now()
	if err := c.AppendTable(context.Background(), "kv", rec); err != nil {
		t.Fatal(err)
	}
	if got := f.attempts.Load(); got != 4 {
		t.Fatalf("%d DoPut attempts, want 3 refused and 1 accepted", got)
	}
	if got := f.rows.Load(); got != 10 {
		t.Fatalf("%d rows written, want 10", got)
	}
	// Backoff 10, 20, 40 ms between the attempts.
	if elapsed := time.Since(start); elapsed < 70*time.Millisecond {
		t.Fatalf("retried without backing off: %v", elapsed)
	}
}

// A bucket that never opens: the client gives up at the call's deadline
// and says why.
func TestRetryUnavailableDeadline(t *testing.T) {
	f := startFake(t, -1)
	c := dial(t, f.addr)
	rec := kvBatch(0, 10)
	defer rec.Release()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := c.AppendTable(ctx, "kv", rec)
	if err == nil || !strings.Contains(err.Error(), "opening") {
		t.Fatalf("want the Unavailable error, got %v", err)
	}
	if elapsed := time.Since(start); elapsed > 2*time.Second {
		t.Fatalf("gave up after %v, the deadline was 300 ms", elapsed)
	}
	if f.attempts.Load() < 3 || f.rows.Load() != 0 {
		t.Fatalf("%d attempts, %d rows", f.attempts.Load(), f.rows.Load())
	}
}

// A connection that breaks after the server took the rows: the client
// cannot know whether they were stored, says so, and does not send them
// again.
func TestUnknownOutcomeNotRetried(t *testing.T) {
	f := startFake(t, 0)
	f.broken = true
	c := dial(t, f.addr)
	rec := kvBatch(0, 10)
	defer rec.Release()
	err := c.AppendTable(context.Background(), "kv", rec)
	if !errors.Is(err, client.ErrUnknownOutcome) {
		t.Fatalf("want ErrUnknownOutcome, got %v", err)
	}
	if f.attempts.Load() != 1 || f.rows.Load() != 10 {
		t.Fatalf("%d attempts, %d rows: the write was sent again", f.attempts.Load(), f.rows.Load())
	}
}

// A node restarts while a client writes: the client retries the refused
// connections and the buckets' Unavailable while they reopen, and every
// row is there once.
func TestRetryAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	n, err := minktest.StartNode(minktest.Options{DataDir: dir}, t.TempDir)
	if err != nil {
		t.Fatal(err)
	}
	conn := connect(t, n)
	exec(t, conn, "CREATE TABLE kv (id bigint NOT NULL, s text) WITH (buckets = 4, bucket_key = 'id')")
	c := dial(t, n.Config.FlightAddr)
	ctx := context.Background()
	rec := kvBatch(0, 1000)
	if err := c.AppendTable(ctx, "kv", rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	conn.Close(ctx)
	if err := n.Server.Close(); err != nil {
		t.Fatal(err)
	}
	const down = 300 * time.Millisecond
	restarted := make(chan *minktest.Node, 1)
	go func() {
		time.Sleep(down)
		n2, err := minktest.StartNode(minktest.Options{DataDir: dir, Tweak: func(cfg *server.Config) {
			cfg.PGAddr, cfg.FlightAddr, cfg.AdminAddr = n.Config.PGAddr, n.Config.FlightAddr, n.Config.AdminAddr
			cfg.EmbeddedEtcdAddr = n.Config.EmbeddedEtcdAddr
		}}, t.TempDir)
		if err != nil {
			t.Error(err)
		}
		restarted <- n2
	}()
	start := time.Now()
	rec = kvBatch(1000, 2000)
	defer rec.Release()
	err = c.AppendTable(ctx, "kv", rec)
	n2 := <-restarted
	if n2 == nil {
		t.FailNow()
	}
	t.Cleanup(func() { n2.Server.Close() })
	if err != nil {
		t.Fatal(err)
	}
	if elapsed := time.Since(start); elapsed < down {
		t.Fatalf("append done after %v, before the node was back", elapsed)
	}
	checkOnce(t, scanIDs(t, c, "kv", client.ScanOptions{}), 0, 2000)
}

var _ = ipc.WithSchema

// fakeRows encodes n rows (i, "found") of the fake primary-key table.
func fakeRows(n int) ([][]byte, error) {
	codec, err := kvcodec.NewCodec(arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil), []int{0})
	if err != nil {
		return nil, err
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, codec.Schema())
	defer b.Release()
	for i := 0; i < n; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.StringBuilder).Append("found")
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	out := make([][]byte, n)
	for i := range out {
		if out[i], err = codec.AppendRow(nil, rec, i); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// An upsert whose connection breaks after the server took the rows is an
// unknown outcome, not sent again; a lookup whose connection breaks is
// retried (it changes nothing).
func TestPrimaryKeyUnknownOutcome(t *testing.T) {
	f := startFake(t, 0)
	f.pk, f.broken, f.lookupFails = true, true, 2
	c := dial(t, f.addr)
	rec := kvBatch(0, 10)
	defer rec.Release()
	err := c.PutTable(context.Background(), "kv", rec)
	if !errors.Is(err, client.ErrUnknownOutcome) {
		t.Fatalf("want ErrUnknownOutcome, got %v", err)
	}
	if f.attempts.Load() != 1 || f.rows.Load() != 10 {
		t.Fatalf("%d attempts, %d rows: the upsert was sent again", f.attempts.Load(), f.rows.Load())
	}
	keys := keyBatch(5, 6)
	defer keys.Release()
	rows, err := c.Lookup(context.Background(), "kv", keys)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Release()
	if rows.NumRows() != 2 || f.lookups.Load() != 3 {
		t.Fatalf("%d rows after %d lookups, want 2 rows after 2 broken lookups and 1 answered", rows.NumRows(), f.lookups.Load())
	}
}

// A node restarts while a client upserts and looks up: both retry while
// the node is down and its primary-key buckets restore their state, and
// the state afterwards is every acknowledged upsert.
func TestPrimaryKeyAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	n, err := minktest.StartNode(minktest.Options{DataDir: dir}, t.TempDir)
	if err != nil {
		t.Fatal(err)
	}
	conn := connect(t, n)
	exec(t, conn, "CREATE TABLE pk (id bigint PRIMARY KEY, s text) WITH (buckets = 4)")
	c := dial(t, n.Config.FlightAddr)
	ctx := context.Background()
	rec := pkBatch(ids(0, 1000), "a")
	if err := c.PutTable(ctx, "pk", rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	conn.Close(ctx)
	if err := n.Server.Close(); err != nil {
		t.Fatal(err)
	}
	const down = 300 * time.Millisecond
	restarted := make(chan *minktest.Node, 1)
	go func() {
		time.Sleep(down)
		n2, err := minktest.StartNode(minktest.Options{DataDir: dir, Tweak: func(cfg *server.Config) {
			cfg.PGAddr, cfg.FlightAddr, cfg.AdminAddr = n.Config.PGAddr, n.Config.FlightAddr, n.Config.AdminAddr
			cfg.EmbeddedEtcdAddr = n.Config.EmbeddedEtcdAddr
		}}, t.TempDir)
		if err != nil {
			t.Error(err)
		}
		restarted <- n2
	}()
	start := time.Now()
	keys := keyBatch(1, 999, 5000)
	defer keys.Release()
	rows, lookupErr := c.Lookup(ctx, "pk", keys)
	rec = pkBatch(ids(500, 1500), "b")
	defer rec.Release()
	err = c.PutTable(ctx, "pk", rec)
	n2 := <-restarted
	if n2 == nil {
		t.FailNow()
	}
	t.Cleanup(func() { n2.Server.Close() })
	if lookupErr != nil {
		t.Fatal(lookupErr)
	}
	got := fmt.Sprint(rowsText(rows))
	rows.Release()
	if got != "[1=a1 999=a999]" {
		t.Fatalf("lookup across the restart: %s", got)
	}
	if err != nil {
		t.Fatal(err)
	}
	if elapsed := time.Since(start); elapsed < down {
		t.Fatalf("done after %v, before the node was back", elapsed)
	}
	model := map[int64]string{}
	for id := int64(0); id < 1500; id++ {
		model[id] = fmt.Sprintf("a%d", id)
		if id >= 500 {
			model[id] = fmt.Sprintf("b%d", id)
		}
	}
	if got := state(t, c, "pk"); !maps.Equal(got, model) {
		t.Fatalf("state after the restart: %d rows, want %d", len(got), len(model))
	}
}
