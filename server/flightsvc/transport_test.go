package flightsvc_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/minkdb/mink/buckets"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/minktest"
	"github.com/minkdb/mink/server"
	"github.com/minkdb/mink/server/flightsvc"
)

// startPair starts two nodes sharing an embedded etcd and an object store,
// and waits until both see each other live.
func startPair(t *testing.T) (*minktest.Node, *minktest.Node) {
	t.Helper()
	etcd := minktest.StartEtcd(t)
	store := "file://" + filepath.Join(t.TempDir(), "objects")
	var nodes []*minktest.Node
	for id := uint32(1); id <= 2; id++ {
		nodes = append(nodes, minktest.Start(t, minktest.Options{Tweak: func(cfg *server.Config) {
			cfg.NodeID, cfg.EtcdEndpoints, cfg.ObjectStore = id, etcd.Endpoints(), store
		}}))
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range nodes {
		for {
			st, err := server.NewAdminClient(n.Config.AdminAddr).ClusterStatus(context.Background())
			if err == nil && len(st.Nodes) == 2 && st.Nodes[0].Live && st.Nodes[1].Live {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("nodes not both live: %+v %v", st, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nodes[0], nodes[1]
}

// bucketOn waits until the table's buckets are spread and returns one led
// by node 2.
func bucketOn(t *testing.T, c flight.Client, table string, node uint32) catalog.BucketID {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := c.GetFlightInfo(context.Background(), &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{table}})
		if err != nil {
			t.Fatal(err)
		}
		for _, ep := range info.Endpoint {
			var meta struct {
				Bucket uint64 `json:"bucket"`
				Leader uint32 `json:"leader"`
			}
			json.Unmarshal(ep.AppMetadata, &meta)
			if meta.Leader == node {
				return catalog.BucketID(meta.Bucket)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no bucket of %s on node %d", table, node)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The node-to-node transport: asked at the wrong node, it follows the
// redirect for writes and reads, and maps errors to the buckets package's.
func TestTransport(t *testing.T) {
	n1, _ := startPair(t)
	conn := connect(t, n1)
	exec(t, conn, "CREATE TABLE events (id bigint NOT NULL, name text, v double precision) WITH (buckets = 2)")
	raw := dialFlight(t, n1.Config.FlightAddr)
	id := bucketOn(t, raw, "events", 2)

	pool := flightsvc.NewPool()
	defer pool.Close()
	var tr flightsvc.Transport = pool
	ctx := context.Background()
	a := eventsBatch([]int64{1, 2, 3}, []string{"a", "b", "c"})
	b := eventsBatch([]int64{4, 5}, []string{"d", "e"})
	defer a.Release()
	defer b.Release()
	// Node 2 may still be opening the bucket.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := tr.AppendBucket(ctx, n1.Config.FlightAddr, id, a)
		if err == nil {
			break
		}
		if !errors.Is(err, buckets.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := tr.AppendBucket(ctx, n1.Config.FlightAddr, id, b); err != nil {
		t.Fatal(err)
	}
	got, err := tr.ReadBucket(ctx, n1.Config.FlightAddr, id)
	if err != nil {
		t.Fatal(err)
	}
	defer buckets.ReleaseBatches(got)
	var desc []string
	for _, batch := range got {
		desc = append(desc, fmt.Sprintf("%d:%v", batch.Offset, batch.Record.Column(0).(*array.Int64).Int64Values()))
	}
	if fmt.Sprint(desc) != "[0:[1 2 3] 3:[4 5]]" {
		t.Fatalf("batches %v", desc)
	}

	if err := tr.AppendBucket(ctx, n1.Config.FlightAddr, 999999, a); !errors.Is(err, buckets.ErrNoSuchBucket) {
		t.Fatalf("unknown bucket: %v", err)
	}
	if _, err := tr.ReadBucket(ctx, "127.0.0.1:1", id); !errors.Is(err, buckets.ErrUnavailable) {
		t.Fatalf("unreachable node: %v", err)
	}

	// Once the rows are committed to stream objects, node 1 serves a
	// ticket for them itself, from the object store.
	to := uint64(5)
	ticket, _ := json.Marshal(map[string]any{"v": 1, "bucket": id, "to": to, "columns": []string{"id"}})
	deadline = time.Now().Add(30 * time.Second)
	for {
		rows, err := readEndpoint(ctx, raw, &flight.FlightEndpoint{Ticket: &flight.Ticket{Ticket: ticket}})
		if err == nil {
			if fmt.Sprint(rows) != "[1 2 3 4 5]" {
				t.Fatalf("committed rows from node 1: %v", rows)
			}
			break
		}
		if status.Code(err) != codes.FailedPrecondition || time.Now().After(deadline) {
			t.Fatalf("committed read at node 1: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
