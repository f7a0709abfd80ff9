package embedetcd

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testPortPair is the client port of a free pair.
func testPortPair(t *testing.T) int {
	t.Helper()
	addr, err := FreeAddrPair()
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(port)
	return n
}

func TestStartRestartClose(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	var logs bytes.Buffer
	cfg := Config{
		Dir:        dir,
		ClientAddr: fmt.Sprintf("127.0.0.1:%d", testPortPair(t)),
		Name:       "test",
		Logger:     slog.New(slog.NewTextHandler(&logs, nil)),
	}
	e, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.Endpoints(); len(got) != 1 || got[0] != "http://"+cfg.ClientAddr {
		t.Fatalf("Endpoints = %v", got)
	}
	put := func(e *Etcd, key, value string) string {
		client, err := clientv3.New(clientv3.Config{Endpoints: e.Endpoints(), Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		if value != "" {
			if _, err := client.Put(ctx, key, value); err != nil {
				t.Fatal(err)
			}
		}
		resp, err := client.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) == 0 {
			return ""
		}
		return string(resp.Kvs[0].Value)
	}
	if got := put(e, "k", "v"); got != "v" {
		t.Fatalf("get after put = %q", got)
	}
	e.Close()
	e.Close()

	// The data survives a restart in the same directory.
	e, err = Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if got := put(e, "k", ""); got != "v" {
		t.Fatalf("after restart k = %q, want v", got)
	}
	e.Close()
	// Neither info lines nor the listeners' complaints about being closed
	// reach the logger.
	if strings.Contains(logs.String(), "level=INFO") || strings.Contains(logs.String(), "level=ERROR") {
		t.Fatalf("etcd info or shutdown lines were logged:\n%s", logs.String())
	}
}

func TestLoopbackOnly(t *testing.T) {
	ctx := context.Background()
	for _, addr := range []string{"0.0.0.0:2379", "10.1.2.3:2379", ":2379", "example.com:2379"} {
		if _, err := Start(ctx, Config{Dir: t.TempDir(), ClientAddr: addr}); err == nil || !strings.Contains(err.Error(), "loopback") && !strings.Contains(err.Error(), "port") {
			t.Errorf("Start at %s = %v, want a loopback error", addr, err)
		}
	}
	if _, err := Start(ctx, Config{Dir: t.TempDir(), ClientAddr: "127.0.0.1:2379", PeerAddr: "0.0.0.0:2380"}); err == nil {
		t.Error("a non-loopback peer address was accepted")
	}
}

func TestPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = Start(ctx, Config{Dir: t.TempDir(), ClientAddr: ln.Addr().String(), Logger: slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))})
	if err == nil || !strings.Contains(err.Error(), ln.Addr().String()) {
		t.Fatalf("Start on a busy port = %v, want an error naming %s", err, ln.Addr())
	}
}
