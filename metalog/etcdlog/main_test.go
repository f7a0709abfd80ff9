package etcdlog

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"github.com/minkdb/mink/internal/embedetcd"
	"github.com/minkdb/mink/metalog/metalogtest"
)

// The etcd tests share one embedded etcd, started on first use; each test
// works under a cluster prefix of its own (testCluster). TestMain stops it
// before checking for leaked goroutines.
var shared struct {
	once sync.Once
	etcd *embedetcd.Etcd
	dir  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.etcd != nil {
		shared.etcd.Close()
		os.RemoveAll(shared.dir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// sharedEndpoints returns the endpoints of the shared embedded etcd.
func sharedEndpoints(t testing.TB) []string {
	t.Helper()
	shared.once.Do(func() {
		shared.dir, shared.err = os.MkdirTemp("", "mink-etcdlog-")
		if shared.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		shared.etcd, shared.err = embedetcd.StartOnFreePorts(ctx, embedetcd.Config{
			Dir:    filepath.Join(shared.dir, "etcd"),
			Logger: metalogtest.Logger(),
		})
	})
	if shared.err != nil {
		t.Fatalf("start embedded etcd: %v", shared.err)
	}
	return shared.etcd.Endpoints()
}

// testClient returns a client of the shared etcd, closed at the end of t.
func testClient(t testing.TB) *clientv3.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := Dial(ctx, sharedEndpoints(t), metalogtest.Logger(), 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return client
}

var clusterSeq atomic.Int64

// testCluster returns a cluster name no other test uses.
func testCluster(t testing.TB) string {
	return fmt.Sprintf("test-%d-%d", os.Getpid(), clusterSeq.Add(1))
}
