// Package minktest starts a single-node mink server inside a test process:
// embedded etcd, a local-directory object store and every listener on free
// loopback ports. End-to-end tests that need the real binary start it
// themselves (cmd/mink); this is for tests that drive the SQL front end with
// real clients and want to be fast.
package minktest

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/minkdb/mink/internal/embedetcd"
	"github.com/minkdb/mink/server"
)

// Node is a running in-process mink server.
type Node struct {
	Server *server.Server
	Config server.Config
	// DSN is a libpq connection string for the node's Postgres listener.
	DSN string
	// URL is the same as a postgres:// URL.
	URL string
}

// Options tweak the node's configuration.
type Options struct {
	DataDir string
	// Verbose logs to stderr instead of discarding.
	Verbose bool
	Tweak   func(*server.Config)
}

// Start starts a node and stops it when the test ends.
func Start(t testing.TB, opts Options) *Node {
	t.Helper()
	n, err := StartNode(opts, t.TempDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Server.Close() })
	return n
}

// StartNode starts a node; tempDir makes a fresh directory. A free port
// can be taken by another process between freeAddr and the node's listen
// (tests of several packages run at once), so a start that fails with
// "address already in use" is tried again on other ports.
func StartNode(opts Options, tempDir func() string) (*Node, error) {
	for attempt := 1; ; attempt++ {
		n, err := startNode(opts, tempDir)
		if err == nil || attempt == 5 || !strings.Contains(err.Error(), "address already in use") {
			return n, err
		}
	}
}

func startNode(opts Options, tempDir func() string) (*Node, error) {
	cfg := server.DefaultConfig()
	cfg.DataDir = opts.DataDir
	if cfg.DataDir == "" {
		cfg.DataDir = tempDir()
	}
	var err error
	if cfg.PGAddr, err = freeAddr(false); err != nil {
		return nil, err
	}
	if cfg.FlightAddr, err = freeAddr(false); err != nil {
		return nil, err
	}
	if cfg.AdminAddr, err = freeAddr(false); err != nil {
		return nil, err
	}
	if cfg.KafkaAddr, err = freeAddr(false); err != nil {
		return nil, err
	}
	if cfg.EmbeddedEtcdAddr, err = freeAddr(true); err != nil {
		return nil, err
	}
	cfg.CoordinatorTick = 200 * time.Millisecond
	cfg.LeaseTTL = 5 * time.Second
	if opts.Tweak != nil {
		opts.Tweak(&cfg)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if opts.Verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv, err := server.New(ctx, cfg, logger)
	if err != nil {
		return nil, err
	}
	host, port, _ := net.SplitHostPort(cfg.PGAddr)
	return &Node{
		Server: srv, Config: cfg,
		DSN: fmt.Sprintf("host=%s port=%s user=mink dbname=mink sslmode=disable", host, port),
		URL: fmt.Sprintf("postgres://mink@%s/mink?sslmode=disable", cfg.PGAddr),
	}, nil
}

// freeAddr returns a free loopback address; with pair, the next port is
// free too (the embedded etcd's peer port).
func freeAddr(pair bool) (string, error) {
	if pair {
		return embedetcd.FreeAddrPair()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	ln.Close()
	return ln.Addr().String(), nil
}

// StartEtcd starts an embedded etcd on free loopback ports
// (embedetcd.StartOnFreePorts) and stops it when the test ends.
func StartEtcd(t testing.TB) *embedetcd.Etcd {
	t.Helper()
	etcd, err := embedetcd.StartOnFreePorts(context.Background(), embedetcd.Config{
		Dir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { etcd.Close() })
	return etcd
}

// RecordBatchOffsets lists the offset of every record of raw, the record
// batches of a Kafka fetch response (magic 2), checking each batch's
// length and CRC-32C.
func RecordBatchOffsets(t testing.TB, raw []byte) []int64 {
	t.Helper()
	var out []int64
	for len(raw) > 0 {
		if len(raw) < 61 {
			t.Fatalf("a batch cut short: %d bytes", len(raw))
		}
		n := 12 + int(binary.BigEndian.Uint32(raw[8:]))
		if n > len(raw) || crc32.Checksum(raw[21:n], crc32.MakeTable(crc32.Castagnoli)) != binary.BigEndian.Uint32(raw[17:]) {
			t.Fatalf("a bad batch of %d bytes in %d", n, len(raw))
		}
		base := int64(binary.BigEndian.Uint64(raw))
		for i := range int64(binary.BigEndian.Uint32(raw[57:])) {
			out = append(out, base+i)
		}
		raw = raw[n:]
	}
	return out
}
