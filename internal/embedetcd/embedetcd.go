// Package embedetcd runs a single-member etcd inside the mink process, for
// `mink server` with no --etcd-endpoints and for tests. It listens on
// loopback only (it has no TLS and no authentication).
//
// Start returns once the member is ready to serve. The etcd server starts its
// own goroutines; Close stops them and waits. etcd's log lines at warn level
// and above go to the configured slog logger.
package embedetcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

const (
	// DefaultClientAddr is the embedded etcd's default client address.
	DefaultClientAddr = "127.0.0.1:2379"
	// DefaultQuotaBytes is the backend quota: etcd refuses writes (alarm
	// NOSPACE) when its database file reaches it. mink compacts etcd's
	// history after each metadata snapshot, so the live data stays small.
	DefaultQuotaBytes = 2 << 30
	// DefaultStartTimeout bounds how long Start waits for the member to be
	// ready.
	DefaultStartTimeout = time.Minute
	// autoCompactionRetention is a backstop for history that mink's own
	// compaction (after each snapshot) does not cover, e.g. liveness keys.
	autoCompactionRetention = "1h"
)

// Config configures the embedded etcd.
type Config struct {
	// Dir is the data directory (created if missing). Required.
	Dir string
	// ClientAddr is host:port of the client listener, loopback only.
	// Default DefaultClientAddr.
	ClientAddr string
	// PeerAddr is host:port of the peer listener, loopback only. Default:
	// the client port + 1 on the same host.
	PeerAddr string
	// Name is the member name. Default "mink".
	Name string
	// Logger receives etcd's warnings and errors. Default slog.Default().
	Logger *slog.Logger
	// QuotaBytes is the backend quota. Default DefaultQuotaBytes.
	QuotaBytes int64
	// StartTimeout bounds the wait for readiness. Default DefaultStartTimeout.
	StartTimeout time.Duration
}

// Etcd is a running embedded etcd member.
type Etcd struct {
	etcd      *embed.Etcd
	endpoints []string
	closeOnce sync.Once
	// closing demotes etcd's log lines to debug during Close, when its
	// listeners report their own closing as errors.
	closing *atomic.Bool
}

// Start starts the member and waits until it serves clients (or ctx ends, or
// StartTimeout passes).
func Start(ctx context.Context, cfg Config) (*Etcd, error) {
	if cfg.Dir == "" {
		return nil, errors.New("embedded etcd: no data directory")
	}
	if cfg.ClientAddr == "" {
		cfg.ClientAddr = DefaultClientAddr
	}
	clientHost, clientPort, err := loopbackHostPort(cfg.ClientAddr)
	if err != nil {
		return nil, fmt.Errorf("embedded etcd client address: %w", err)
	}
	if cfg.PeerAddr == "" {
		cfg.PeerAddr = net.JoinHostPort(clientHost, strconv.Itoa(clientPort+1))
	}
	if _, _, err := loopbackHostPort(cfg.PeerAddr); err != nil {
		return nil, fmt.Errorf("embedded etcd peer address: %w", err)
	}
	if cfg.Name == "" {
		cfg.Name = "mink"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.QuotaBytes == 0 {
		cfg.QuotaBytes = DefaultQuotaBytes
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = DefaultStartTimeout
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded etcd: %w", err)
	}

	clientURL := url.URL{Scheme: "http", Host: cfg.ClientAddr}
	peerURL := url.URL{Scheme: "http", Host: cfg.PeerAddr}
	ec := embed.NewConfig()
	ec.Name = cfg.Name
	ec.Dir = cfg.Dir
	ec.ListenClientUrls = []url.URL{clientURL}
	ec.AdvertiseClientUrls = []url.URL{clientURL}
	ec.ListenPeerUrls = []url.URL{peerURL}
	ec.AdvertisePeerUrls = []url.URL{peerURL}
	ec.InitialCluster = cfg.Name + "=" + peerURL.String()
	ec.QuotaBackendBytes = cfg.QuotaBytes
	ec.AutoCompactionMode = embed.CompactorModePeriodic
	ec.AutoCompactionRetention = autoCompactionRetention
	ec.LogLevel = "warn"
	core := &slogCore{logger: cfg.Logger.With("component", "etcd"), level: zapcore.WarnLevel, closing: new(atomic.Bool)}
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.New(core))

	e, err := startEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("at %s: %w", cfg.ClientAddr, err)
	}
	timer := time.NewTimer(cfg.StartTimeout)
	defer timer.Stop()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedded etcd at %s: %w", cfg.ClientAddr, err)
	case <-timer.C:
		e.Close()
		return nil, fmt.Errorf("embedded etcd at %s not ready after %v", cfg.ClientAddr, cfg.StartTimeout)
	case <-ctx.Done():
		e.Close()
		return nil, fmt.Errorf("embedded etcd at %s: %w", cfg.ClientAddr, ctx.Err())
	}
	return &Etcd{etcd: e, endpoints: []string{clientURL.String()}, closing: core.closing}, nil
}

// loopbackHostPort splits addr and checks that its host is a loopback address.
func loopbackHostPort(addr string) (string, int, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port <= 0 || port > 65534 {
		return "", 0, fmt.Errorf("%q: bad port", addr)
	}
	if host == "localhost" {
		return host, port, nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return "", 0, fmt.Errorf("%q: the embedded etcd listens on loopback only", addr)
	}
	return host, port, nil
}

// Endpoints returns the client URLs, for clientv3.Config.Endpoints.
func (e *Etcd) Endpoints() []string { return e.endpoints }

// Err delivers an error if the member fails after Start.
func (e *Etcd) Err() <-chan error { return e.etcd.Err() }

// Close stops the member and waits for its goroutines.
func (e *Etcd) Close() error {
	e.closeOnce.Do(func() {
		e.closing.Store(true)
		e.etcd.Close()
		<-e.etcd.Server.StopNotify()
	})
	return nil
}

// ZapLogger returns a zap logger that writes entries at level and above to
// logger (zap debug and info map to slog's; warn to Warn; error and above to
// Error).
func ZapLogger(logger *slog.Logger, level zapcore.Level) *zap.Logger {
	return zap.New(&slogCore{logger: logger, level: level, closing: new(atomic.Bool)})
}

// slogCore is a zapcore.Core writing to a slog.Logger.
type slogCore struct {
	logger *slog.Logger
	level  zapcore.Level
	fields []zapcore.Field
	// closing, when set, demotes every entry to debug.
	closing *atomic.Bool
}

func (c *slogCore) Enabled(l zapcore.Level) bool { return l >= c.level }

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	return &slogCore{logger: c.logger, level: c.level, fields: append(append([]zapcore.Field(nil), c.fields...), fields...), closing: c.closing}
}

func (c *slogCore) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(ent.Level) {
		return ce.AddCore(ent, c)
	}
	return ce
}

func (c *slogCore) Write(ent zapcore.Entry, fields []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range c.fields {
		f.AddTo(enc)
	}
	for _, f := range fields {
		f.AddTo(enc)
	}
	attrs := make([]any, 0, 2*len(enc.Fields)+2)
	if ent.LoggerName != "" {
		attrs = append(attrs, "logger", ent.LoggerName)
	}
	for _, k := range slices.Sorted(maps.Keys(enc.Fields)) {
		attrs = append(attrs, k, enc.Fields[k])
	}
	switch {
	case ent.Level < zapcore.InfoLevel || c.closing.Load():
		c.logger.Debug(ent.Message, attrs...)
	case ent.Level < zapcore.WarnLevel:
		c.logger.Info(ent.Message, attrs...)
	case ent.Level < zapcore.ErrorLevel:
		c.logger.Warn(ent.Message, attrs...)
	default:
		c.logger.Error(ent.Message, attrs...)
	}
	return nil
}

func (c *slogCore) Sync() error { return nil }

// StartOnFreePorts is Start with cfg.ClientAddr a free loopback port whose
// next port (the peer port) is free too, for tests that run several etcds
// at once. A port another process takes between the check and the listen
// is tried again on other ports, up to five times.
func StartOnFreePorts(ctx context.Context, cfg Config) (*Etcd, error) {
	for attempt := 1; ; attempt++ {
		addr, err := FreeAddrPair()
		if err != nil {
			return nil, err
		}
		cfg.ClientAddr = addr
		e, err := Start(ctx, cfg)
		if err == nil || attempt == 5 || !strings.Contains(err.Error(), "address already in use") {
			return e, err
		}
	}
}

// FreeAddrPair returns 127.0.0.1:p with ports p and p+1 free just now: a
// client address for an embedded etcd (its peer port is the next one).
func FreeAddrPair() (string, error) {
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln2, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port+1))
		ln.Close()
		if err == nil {
			ln2.Close()
			return fmt.Sprintf("127.0.0.1:%d", port), nil
		}
	}
	return "", errors.New("embedded etcd: no free pair of loopback ports")
}

// walSegmentBytes is the size etcd preallocates for each write-ahead log
// segment (wal.SegmentSizeBytes).
const walSegmentBytes = 64 << 20

// startEtcd is embed.StartEtcd, with a check that the data directory's
// file system can hold etcd's first WAL segment, and the panics etcd
// raises on a directory it cannot write returned as errors.
func startEtcd(ec *embed.Config) (e *embed.Etcd, err error) {
	if free, ok := freeBytes(ec.Dir); ok && free < walSegmentBytes {
		if _, statErr := os.Stat(filepath.Join(ec.Dir, "member", "wal")); statErr != nil {
			return nil, fmt.Errorf("%s has %d MiB free, and etcd preallocates %d MiB for its write-ahead log: free some space or use a larger disk",
				ec.Dir, free>>20, walSegmentBytes>>20)
		}
	}
	defer func() {
		if r := recover(); r != nil {
			e, err = nil, fmt.Errorf("etcd could not start on %s: %v (see the log above for the cause)", ec.Dir, r)
		}
	}()
	return embed.StartEtcd(ec)
}

// freeBytes is the space available to this process on the file system
// holding dir (or its nearest existing parent).
func freeBytes(dir string) (uint64, bool) {
	for d := dir; ; d = filepath.Dir(d) {
		var st syscall.Statfs_t
		if err := syscall.Statfs(d, &st); err == nil {
			return st.Bavail * uint64(st.Bsize), true
		}
		if d == filepath.Dir(d) {
			return 0, false
		}
	}
}
