package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/minkdb/mink/server"
)

func newServerCmd() *cobra.Command {
	cfg := server.DefaultConfig()
	cfg.Version = version
	var configFile, logLevel, logFormat string
	var endpoints string
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run a mink node (with no flags: a single node with embedded etcd and a local object store)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if configFile != "" {
				if err := applyConfigFile(cmd.Flags(), configFile); err != nil {
					return usageError{err}
				}
			}
			if endpoints != "" {
				cfg.EtcdEndpoints = splitList(endpoints)
			}
			logger, err := newLogger(logLevel, logFormat)
			if err != nil {
				return usageError{err}
			}
			if err := cfg.Validate(); err != nil {
				return usageError{err}
			}
			return runServer(cmd.Context(), cfg, logger)
		},
	}
	f := cmd.Flags()
	f.StringVar(&configFile, "config", "", "YAML config file with the same keys as the flags (flags win)")
	f.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "local state directory")
	f.Uint32Var(&cfg.NodeID, "node-id", cfg.NodeID, "this node's id (1 or more, unique in the cluster)")
	f.StringVar(&cfg.Cluster, "cluster", cfg.Cluster, "cluster name: the key prefix in etcd")
	f.StringVar(&endpoints, "etcd-endpoints", "", "comma-separated external etcd endpoints (default: start an embedded etcd)")
	f.StringVar(&cfg.EmbeddedEtcdAddr, "embedded-etcd-addr", cfg.EmbeddedEtcdAddr, "client address of the embedded etcd (loopback; its peer port is the next port)")
	f.StringVar(&cfg.EtcdUser, "etcd-user", "", "user to log in to an external etcd with authentication enabled")
	f.StringVar(&cfg.EtcdPasswordFile, "etcd-password-file", "", "password of --etcd-user (first line of the file)")
	f.StringVar(&cfg.EtcdCAFile, "etcd-ca-file", "", "PEM CA bundle that verifies an https etcd's certificate")
	f.StringVar(&cfg.EtcdCertFile, "etcd-cert-file", "", "PEM client certificate for etcd (with --etcd-key-file)")
	f.StringVar(&cfg.EtcdKeyFile, "etcd-key-file", "", "PEM private key of --etcd-cert-file")
	f.DurationVar(&cfg.EtcdDialTimeout, "etcd-dial-timeout", cfg.EtcdDialTimeout, "how long to retry an unreachable etcd at start")
	f.StringVar(&cfg.ObjectStore, "object-store", "", "file:///path or s3://bucket/prefix (default: file://<data-dir>/objects)")
	f.StringVar(&cfg.S3Endpoint, "s3-endpoint", "", "S3 endpoint URL (default: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL or AWS)")
	f.StringVar(&cfg.S3Region, "s3-region", "", "S3 region (default: AWS_REGION, or us-east-1)")
	f.StringVar(&cfg.PGAddr, "pg-addr", cfg.PGAddr, "PostgreSQL wire protocol listen address")
	f.StringVar(&cfg.FlightAddr, "flight-addr", cfg.FlightAddr, "Arrow Flight listen address")
	f.DurationVar(&cfg.FlightSQLIdleTimeout, "flight-sql-idle-timeout", cfg.FlightSQLIdleTimeout, "how long a Flight SQL prepared statement may stay unused before it is closed")
	f.StringVar(&cfg.AdminAddr, "admin-addr", cfg.AdminAddr, "admin HTTP listen address (/healthz, /metrics, admin API)")
	f.StringVar(&cfg.KafkaAddr, "kafka-addr", cfg.KafkaAddr, "Kafka protocol listen address (empty: no Kafka listener)")
	f.BoolVar(&cfg.KafkaAutoCreateTopics, "kafka-auto-create-topics", cfg.KafkaAutoCreateTopics, "create a topic (a Kafka-shaped log table) on its first produce or metadata request")
	f.StringVar(&cfg.SuperuserPasswordFile, "superuser-password-file", "", "password of the superuser mink (first line of the file); every listener then requires credentials")
	f.StringVar(&cfg.HBAFile, "hba-file", "", "pg_hba.conf-style host rules for every listener (docs/hba.md)")
	f.BoolVar(&cfg.Insecure, "insecure", false, "allow trust mode (no --superuser-password-file) on listeners that are not on loopback")
	f.StringVar(&cfg.TLSCertFile, "tls-cert-file", "", "TLS certificate (PEM) of every listener (Postgres, Flight, admin, Kafka) and of connections to other nodes; reloaded on SIGHUP")
	f.StringVar(&cfg.TLSKeyFile, "tls-key-file", "", "TLS private key (PEM) of --tls-cert-file; reloaded on SIGHUP")
	f.StringVar(&cfg.TLSCAFile, "tls-ca-file", "", "PEM CA bundle that verifies other nodes' certificates (default: the system roots)")
	f.StringVar(&cfg.TLSClientCAFile, "tls-client-ca-file", "", "PEM CA bundle: every listener asks for a client certificate and verifies one that is given against it")
	f.StringVar(&cfg.AdvertiseHost, "advertise-host", "", "host other nodes and clients use to reach this node (default: the listen hosts)")
	f.DurationVar(&cfg.LeaseTTL, "lease-ttl", cfg.LeaseTTL, "liveness lease TTL: a node that stops heartbeating is dead after this")
	f.DurationVar(&cfg.StoreOutageTimeout, "store-outage-timeout", cfg.StoreOutageTimeout, "a node whose writes the object store has held up this long gives its buckets up to nodes that reach the store")
	f.DurationVar(&cfg.CoordinatorTick, "coordinator-tick", cfg.CoordinatorTick, "how often the coordinator looks for buckets to fail over")
	f.DurationVar(&cfg.GCInterval, "gc-interval", cfg.GCInterval, "how often the coordinator deletes unreferenced objects")
	f.DurationVar(&cfg.GCDelay, "gc-delay", cfg.GCDelay, "how long an object stays after it became garbage (lets readers finish)")
	f.DurationVar(&cfg.KVSnapshotInterval, "kv-snapshot-interval", cfg.KVSnapshotInterval, "how often the leader of a primary-key bucket snapshots its KV tablet to the object store")
	f.Uint64Var(&cfg.MetadataSnapshotEvery, "metadata-snapshot-every", cfg.MetadataSnapshotEvery, "metadata log entries between view snapshots")
	f.BoolVar(&cfg.Tiering, "tiering", cfg.Tiering, "run the tiering worker (copies tables into the Iceberg lake) on the coordinator")
	f.DurationVar(&cfg.TieringFreshness, "tiering-freshness", cfg.TieringFreshness, "default of the table option tiering_freshness: time between tiering rounds of a table with new rows")
	f.StringVar(&cfg.LakeCacheDir, "lake-cache-dir", "", "local cache of lake files read by queries; its files are removed at start (default: <data-dir>/lake-cache)")
	f.Int64Var(&cfg.LakeCacheBytes, "lake-cache-bytes", server.DefaultLakeCacheBytes, "size bound of --lake-cache-dir in bytes")
	f.Int64Var(&cfg.LakeTargetFileSize, "lake-target-file-size", cfg.LakeTargetFileSize, "lake compaction writes data files up to this size in bytes; larger files are left alone")
	f.IntVar(&cfg.LakeCompactFiles, "lake-compact-files", cfg.LakeCompactFiles, "compact a run of more than this many consecutive lake files of a log table's bucket below --lake-target-file-size and of similar size (0: never)")
	f.Int64Var(&cfg.SQLMemoryLimit, "sql-memory-limit", 0, "memory bound of the SQL engine in bytes, mirrors of log tables included; beyond it the engine spills to <data-dir>/engine-tmp (0: 80% of physical memory)")
	f.BoolVar(&cfg.DisableSQLMirrors, "disable-sql-mirrors", false, "SELECTs read buckets and lake files directly, not the engine's in-memory copies of log tables (diagnosis, benchmarks)")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&logFormat, "log-format", "text", "text or json")
	return cmd
}

func runServer(ctx context.Context, cfg server.Config, logger *slog.Logger) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	// SIGHUP reloads the TLS certificate and key (and no longer ends the
	// process).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	srv, err := server.New(ctx, cfg, logger)
	if err != nil {
		return err
	}
	logger.Info("mink server ready", "node", cfg.NodeID, "epoch", srv.NodeEpoch(), "admin", srv.AdminAddr(), "data_dir", cfg.DataDir)
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-hup:
			if err := srv.ReloadTLS(); errors.Is(err, server.ErrNoTLS) {
				logger.Info("SIGHUP: nothing to reload", "reason", err)
			}
		}
	}
	logger.Info("shutting down")
	if err := srv.Close(); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	logger.Info("stopped")
	return nil
}

// applyConfigFile sets every flag named in the YAML file that was not given
// on the command line, so flags always win over the file.
func applyConfigFile(flags *pflag.FlagSet, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	var kv map[string]any
	if err := yaml.Unmarshal(data, &kv); err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		name := strings.ReplaceAll(key, "_", "-")
		fl := flags.Lookup(name)
		if fl == nil || name == "config" {
			return fmt.Errorf("config file %s: unknown key %q", path, key)
		}
		if fl.Changed {
			continue
		}
		var text string
		switch v := kv[key].(type) {
		case []any:
			parts := make([]string, len(v))
			for i, p := range v {
				parts[i] = fmt.Sprint(p)
			}
			text = strings.Join(parts, ",")
		case float64:
			text = fmt.Sprintf("%.0f", v)
		default:
			text = fmt.Sprint(v)
		}
		if err := flags.Set(name, text); err != nil {
			return fmt.Errorf("config file %s: %s: %w", path, key, err)
		}
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func newLogger(level, format string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}
