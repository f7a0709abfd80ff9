package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/minkdb/mink/buckets/routing"
	"github.com/minkdb/mink/client"
)

// arrowClient is arrow-go's own Flight client, independent of mink's.
func arrowClient(t *testing.T, addr string) flight.Client {
	t.Helper()
	c, err := flight.NewClientWithMiddleware(addr, nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

type bucketLeader struct {
	ID       uint64 `json:"id"`
	Leader   uint32 `json:"leader"`
	Location string `json:"location"`
}

// describe returns the buckets of a table and their leaders, through the
// describe-table action.
func describe(t *testing.T, c flight.Client, table string) []bucketLeader {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"table": table})
	stream, err := c.DoAction(context.Background(), &flight.Action{Type: "describe-table", Body: body})
	if err != nil {
		t.Fatal(err)
	}
	res, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		Buckets []bucketLeader `json:"buckets"`
	}
	if err := json.Unmarshal(res.Body, &info); err != nil {
		t.Fatal(err)
	}
	return info.Buckets
}

// A bucket led by node 2, asked of node 1: NotLeader with node 2's
// address. mink's client, pointed at node 1 and told node 1 leads the
// bucket, follows the redirect without error and without writing twice.
func TestRedirect(t *testing.T) {
	nodes := startCluster(t, 2)
	n1, n2 := nodes[0], nodes[1]
	conn := connect(t, n1)
	exec(t, conn, "CREATE TABLE kv (id bigint NOT NULL, s text) WITH (buckets = 2, bucket_key = 'id')")
	raw1 := arrowClient(t, n1.Config.FlightAddr)
	ctx := context.Background()

	// Wait until each node leads one bucket, open.
	var onNode2 bucketLeader
	var bucketIndex int
	c := dial(t, n1.Config.FlightAddr)
	deadline := time.Now().Add(30 * time.Second)
	for {
		bs := describe(t, raw1, "kv")
		onNode2 = bucketLeader{}
		for i, b := range bs {
			if b.Leader == 2 {
				onNode2, bucketIndex = b, i
			}
		}
		if onNode2.ID != 0 && len(bs) == 2 && bs[0].Leader != bs[1].Leader {
			rec := kvBatch(-1, 0)
			err := c.AppendTable(ctx, "kv", rec)
			rec.Release()
			if err != nil {
				t.Fatal(err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("buckets not spread over both nodes: %+v", bs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if want := "grpc+tcp://" + n2.Config.FlightAddr; onNode2.Location != want {
		t.Fatalf("bucket %d location %q, want %q", onNode2.ID, onNode2.Location, want)
	}

	// arrow-go's client: a bucket-addressed DoPut to node 1 is NotLeader
	// (FailedPrecondition) with a redirect to node 2 in an ErrorInfo.
	rec := kvBatch(0, 10)
	defer rec.Release()
	stream, err := raw1.DoPut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(rec.Schema()))
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"kv", "bucket", itoa(onNode2.ID)}})
	w.Write(rec)
	w.Close()
	stream.CloseSend()
	_, err = stream.Recv()
	checkNotLeader(t, err, onNode2.ID, n2.Config.FlightAddr)

	// So is a DoGet of that bucket (a ticket read to the leader's end).
	ticket, _ := json.Marshal(map[string]any{"v": 1, "bucket": onNode2.ID})
	get, err := raw1.DoGet(ctx, &flight.Ticket{Ticket: ticket})
	if err == nil {
		_, err = get.Recv()
	}
	checkNotLeader(t, err, onNode2.ID, n2.Config.FlightAddr)

	// mink's client, with a stale cache entry pointing at node 1.
	c.SetLeader(onNode2.ID, n1.Config.FlightAddr)
	const rows = 1000
	batch := kvBatch(0, rows)
	defer batch.Release()
	buckets, err := routing.Buckets(batch, []int{0}, 2)
	if err != nil {
		t.Fatal(err)
	}
	toNode2 := 0
	for _, b := range buckets {
		if b == bucketIndex {
			toNode2++
		}
	}
	if toNode2 == 0 {
		t.Fatal("no row routes to node 2's bucket")
	}
	if err := c.AppendTable(ctx, "kv", batch); err != nil {
		t.Fatal(err)
	}
	if got := c.Leader(onNode2.ID); got != n2.Config.FlightAddr {
		t.Fatalf("leader cache of bucket %d after the redirect: %q, want %q", onNode2.ID, got, n2.Config.FlightAddr)
	}
	// A table-addressed DoPut to node 1 is split there, and node 2's part
	// forwarded.
	more := kvBatch(rows, 2*rows)
	defer more.Release()
	results := putTable(t, raw1, "kv", more)
	if len(results) != 1 || string(results[0].AppMetadata) != `{"rows":1000}` {
		t.Fatalf("table put results %v", results)
	}
	// Every row once: nothing was written twice by the redirect.
	checkOnce(t, scanIDs(t, c, "kv", client.ScanOptions{}), -1, 2*rows)
	// Reading through node 2 alone agrees.
	c2 := dial(t, n2.Config.FlightAddr)
	checkOnce(t, scanIDs(t, c2, "kv", client.ScanOptions{}), -1, 2*rows)
}

func checkNotLeader(t *testing.T, err error, bucket uint64, leaderAddr string) {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != codes.FailedPrecondition {
		t.Fatalf("want NotLeader (FailedPrecondition), got %v", err)
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.Reason == "NOT_LEADER" {
			if info.Domain != "mink" || info.Metadata["bucket"] != itoa(bucket) ||
				info.Metadata["to"] != "grpc+tcp://"+leaderAddr || info.Metadata["leader"] != "2" {
				t.Fatalf("redirect details %+v", info)
			}
			return
		}
	}
	t.Fatalf("NotLeader without a redirect: %v", st.Details())
}

func putTable(t *testing.T, c flight.Client, table string, rec arrow.RecordBatch) []*flight.PutResult {
	t.Helper()
	stream, err := c.DoPut(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(rec.Schema()))
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{table}})
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	w.Close()
	stream.CloseSend()
	var out []*flight.PutResult
	for {
		res, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, res)
	}
}

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }
