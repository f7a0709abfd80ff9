package client_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"

	"github.com/minkdb/mink/client"
	"github.com/minkdb/mink/internal/minktest"
	"github.com/minkdb/mink/server"
)

func connect(t *testing.T, n *minktest.Node) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, n.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	return conn
}

func exec(t *testing.T, conn *pgx.Conn, sqls ...string) {
	t.Helper()
	for _, sql := range sqls {
		if _, err := conn.Exec(context.Background(), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
}

func count(t *testing.T, conn *pgx.Conn, sql string) int64 {
	t.Helper()
	var n int64
	if err := conn.QueryRow(context.Background(), sql).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func dial(t *testing.T, addrs ...string) *client.Client {
	t.Helper()
	c, err := client.Dial(context.Background(), addrs...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

var kvSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// kvBatch has rows id = from…to-1, s = "s<id>".
func kvBatch(from, to int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, kvSchema)
	defer b.Release()
	for id := from; id < to; id++ {
		b.Field(0).(*array.Int64Builder).Append(id)
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("s%d", id))
	}
	return b.NewRecordBatch()
}

// scanIDs reads column id of table through c and returns how often each
// id occurs.
func scanIDs(t *testing.T, c *client.Client, table string, opts client.ScanOptions) map[int64]int {
	t.Helper()
	if opts.Columns == nil {
		opts.Columns = []string{"id"}
	}
	rdr, err := c.Scan(context.Background(), table, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	got := map[int64]int{}
	for rdr.Next() {
		col := rdr.RecordBatch().Column(0).(*array.Int64)
		for i := 0; i < col.Len(); i++ {
			got[col.Value(i)]++
		}
	}
	if err := rdr.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// checkOnce fails unless ids from…to-1 each occur exactly once in got and
// nothing else does.
func checkOnce(t *testing.T, got map[int64]int, from, to int64) {
	t.Helper()
	var bad []string
	for id := from; id < to; id++ {
		if got[id] != 1 {
			bad = append(bad, fmt.Sprintf("id %d ×%d", id, got[id]))
		}
	}
	for id := range got {
		if id < from || id >= to {
			bad = append(bad, fmt.Sprintf("unexpected id %d", id))
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		if len(bad) > 10 {
			bad = append(bad[:10], fmt.Sprintf("… %d more", len(bad)-10))
		}
		t.Fatalf("rows not present exactly once: %v", bad)
	}
}

// startCluster starts n in-process nodes sharing one embedded etcd and one
// local-directory object store, and waits until all are live.
func startCluster(t *testing.T, n int) []*minktest.Node {
	t.Helper()
	etcd := minktest.StartEtcd(t)
	store := "file://" + filepath.Join(t.TempDir(), "objects")
	var nodes []*minktest.Node
	for i := 1; i <= n; i++ {
		nodes = append(nodes, minktest.Start(t, minktest.Options{Tweak: func(cfg *server.Config) {
			cfg.NodeID = uint32(i)
			cfg.EtcdEndpoints = etcd.Endpoints()
			cfg.ObjectStore = store
		}}))
	}
	// Every node must see every other live before tables are created, so
	// that the coordinator spreads their buckets.
	deadline := time.Now().Add(30 * time.Second)
	for _, node := range nodes {
		for {
			st, err := server.NewAdminClient(node.Config.AdminAddr).ClusterStatus(context.Background())
			live := 0
			if err == nil {
				for _, ns := range st.Nodes {
					if ns.Live {
						live++
					}
				}
			}
			if live == n {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d sees %d live nodes, want %d (%v)", node.Config.NodeID, live, n, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nodes
}
