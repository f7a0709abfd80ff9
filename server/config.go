package server

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/minkdb/mink/tiering"
)

// Config is everything a node needs to start. cmd/mink fills it from flags, a
// config file and the environment; the zero value is not valid, start from
// DefaultConfig.
type Config struct {
	// DataDir holds the node's local state: the directory lock, the embedded
	// etcd's data, caches and KV tablets. It is never the only copy of anything
	// except the embedded etcd (single-node mode).
	DataDir string
	NodeID  uint32
	// Cluster is the key prefix in etcd, so several clusters can share one.
	Cluster string

	// EtcdEndpoints, when set, names an external etcd; otherwise the node
	// starts an embedded one with its client port at EmbeddedEtcdAddr.
	EtcdEndpoints    []string
	EmbeddedEtcdAddr string
	// EtcdUser and EtcdPasswordFile (its first line) log in to an external
	// etcd with authentication enabled; EtcdCAFile verifies an https
	// etcd's certificate, and EtcdCertFile/EtcdKeyFile are this node's
	// client certificate for it. A node without the cluster's etcd
	// credentials cannot join it.
	EtcdUser         string
	EtcdPasswordFile string
	EtcdCAFile       string
	EtcdCertFile     string
	EtcdKeyFile      string
	// EtcdDialTimeout bounds how long an unreachable etcd is retried at start.
	EtcdDialTimeout time.Duration

	// ObjectStore is "file:///abs/path" or "s3://bucket/prefix"; empty means
	// file://<DataDir>/objects.
	ObjectStore string
	S3Endpoint  string
	S3Region    string

	PGAddr     string
	FlightAddr string
	AdminAddr  string
	// Version is the build's version, reported to Flight SQL clients
	// (GetSqlInfo); "" reports "dev".
	Version string
	// FlightSQLIdleTimeout closes a Flight SQL prepared statement left
	// unused this long (server/flightsql, --flight-sql-idle-timeout); 0:
	// 10 minutes.
	FlightSQLIdleTimeout time.Duration
	// KafkaAddr is the Kafka protocol listener (server/kafka); empty: none.
	KafkaAddr string
	// KafkaAutoCreateTopics creates a topic (a Kafka-shaped log table) on
	// the first produce or metadata request that names it.
	KafkaAutoCreateTopics bool
	AdvertiseHost         string

	// SuperuserPasswordFile holds the password of the bootstrap superuser
	// mink (its first line). A node creates the role at its first start and
	// sets the password when the file's changed. With it every listener
	// requires credentials (security.go); without it, and with no
	// --insecure, the node is in trust mode and every listener must be on
	// loopback.
	SuperuserPasswordFile string
	// Insecure allows trust mode (no credentials) on listeners that are not
	// on loopback.
	Insecure bool
	// HBAFile holds pg_hba.conf-style host rules (auth.ParseHBA) for every
	// listener; empty: none.
	HBAFile string
	// TLSCertFile and TLSKeyFile (PEM) enable TLS on every listener
	// (Postgres, Flight, admin, Kafka) and on this node's connections to
	// other nodes, which then present this certificate as their client
	// certificate. Both are read again on SIGHUP (Server.ReloadTLS). Every
	// node of a cluster has TLS on, or every node has it off.
	TLSCertFile string
	TLSKeyFile  string
	// TLSCAFile is the PEM CA bundle that verifies other nodes'
	// certificates when this node dials them (default: the system roots).
	TLSCAFile string
	// TLSClientCAFile, when set, makes every listener ask for a client
	// certificate and verify one that is presented against this PEM CA
	// bundle; a client that presents none is still accepted
	// (tls.VerifyClientCertIfGiven).
	TLSClientCAFile string

	LeaseTTL        time.Duration
	CoordinatorTick time.Duration
	// StoreOutageTimeout: once the object store has kept this node's
	// oldest write waiting this long, the node gives its buckets up (it
	// revokes its liveness lease, so a node that reaches the store takes
	// them over) and registers again when the store answers.
	StoreOutageTimeout time.Duration
	// GCInterval is how often the lease holder collects garbage in the
	// object store; GCDelay is how long an object must have been garbage
	// before it is deleted, so that readers of an older view can finish.
	GCInterval time.Duration
	GCDelay    time.Duration
	// WALSegmentBytes is the size of the WAL's segments on a local
	// directory store (s3stream.Config.WALSegmentBytes); 0 is the default.
	WALSegmentBytes int64
	// KVSnapshotInterval is how often the leader of a primary-key bucket
	// snapshots its KV tablet (if it changed) to the object store.
	KVSnapshotInterval time.Duration
	// MetadataSnapshotEvery is the number of metadata log entries between view
	// snapshots (after which the log is truncated).
	MetadataSnapshotEvery uint64
	// Tiering runs the tiering worker on the coordinator lease holder
	// (tables can still opt out with WITH (tiering = off)).
	Tiering bool
	// TieringFreshness is the default of the table option
	// tiering_freshness: a table with new rows gets a round once this long
	// has passed since its last one.
	TieringFreshness time.Duration
	// LakeCacheDir is the local directory of lake files read by queries
	// (default <DataDir>/lake-cache; earlier cache files are removed at start); LakeCacheBytes
	// bounds its size (default DefaultLakeCacheBytes).
	LakeCacheDir   string
	LakeCacheBytes int64
	// LakeTargetFileSize is the size lake compaction aims for; a run of
	// consecutive lake files of a log table's bucket below it and of
	// similar size is compacted once it has more than LakeCompactFiles
	// files (0: no compaction).
	LakeTargetFileSize int64
	LakeCompactFiles   int
	// DisableSQLMirrors makes every SELECT read the buckets (and the lake)
	// directly instead of the engine's in-memory mirrors of log tables: for
	// diagnosis, tests and benchmarks of the union read.
	DisableSQLMirrors bool
	// SQLMemoryLimit caps the embedded engine's memory in bytes (its buffer
	// pool, which also holds the mirrors of log tables); beyond it the
	// engine spills to <DataDir>/engine-tmp. 0: the engine's default, 80%
	// of physical memory.
	SQLMemoryLimit int64
}

// DefaultConfig is `mink server` with no flags: node 1, data in ./mink-data,
// embedded etcd, local-directory object store, loopback listeners.
func DefaultConfig() Config {
	return Config{
		DataDir:               "./mink-data",
		NodeID:                1,
		Cluster:               "mink",
		EmbeddedEtcdAddr:      "127.0.0.1:2379",
		EtcdDialTimeout:       30 * time.Second,
		PGAddr:                "127.0.0.1:5433",
		FlightAddr:            "127.0.0.1:8815",
		FlightSQLIdleTimeout:  10 * time.Minute,
		AdminAddr:             "127.0.0.1:9480",
		KafkaAddr:             "127.0.0.1:9092",
		LeaseTTL:              30 * time.Second,
		CoordinatorTick:       5 * time.Second,
		StoreOutageTimeout:    time.Minute,
		GCInterval:            time.Minute,
		GCDelay:               5 * time.Minute,
		KVSnapshotInterval:    5 * time.Minute,
		MetadataSnapshotEvery: 1000,
		Tiering:               true,
		TieringFreshness:      time.Minute,
		LakeTargetFileSize:    tiering.DefaultTargetFileSize,
		LakeCompactFiles:      tiering.DefaultCompactMinFiles,
	}
}

// Validate reports the first thing wrong with c, as a one-line error.
func (c *Config) Validate() error {
	if c.DataDir == "" {
		return fmt.Errorf("--data-dir must not be empty")
	}
	if c.NodeID == 0 {
		return fmt.Errorf("--node-id must be at least 1")
	}
	if c.Cluster == "" {
		return fmt.Errorf("cluster name must not be empty")
	}
	addrs := map[string]string{"--pg-addr": c.PGAddr, "--flight-addr": c.FlightAddr, "--admin-addr": c.AdminAddr}
	if c.KafkaAddr != "" {
		addrs["--kafka-addr"] = c.KafkaAddr
	}
	for name, addr := range addrs {
		if _, _, err := splitHostPort(addr); err != nil {
			return fmt.Errorf("%s %q: %v", name, addr, err)
		}
	}
	if len(c.EtcdEndpoints) == 0 {
		host, _, err := splitHostPort(c.EmbeddedEtcdAddr)
		if err != nil {
			return fmt.Errorf("--embedded-etcd-addr %q: %v", c.EmbeddedEtcdAddr, err)
		}
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return fmt.Errorf("--embedded-etcd-addr %q: the embedded etcd listens on loopback only", c.EmbeddedEtcdAddr)
		}
	}
	if err := c.checkTrust(); err != nil {
		return err
	}
	if err := c.checkEtcdCredentials(); err != nil {
		return err
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return fmt.Errorf("--tls-cert-file and --tls-key-file go together")
	}
	if c.TLSCertFile == "" && (c.TLSCAFile != "" || c.TLSClientCAFile != "") {
		return fmt.Errorf("--tls-ca-file and --tls-client-ca-file need --tls-cert-file and --tls-key-file")
	}
	if c.LeaseTTL < time.Second {
		return fmt.Errorf("--lease-ttl %v: must be at least 1s", c.LeaseTTL)
	}
	if c.CoordinatorTick <= 0 {
		return fmt.Errorf("--coordinator-tick %v: must be positive", c.CoordinatorTick)
	}
	if c.StoreOutageTimeout < time.Second {
		return fmt.Errorf("--store-outage-timeout %v: must be at least 1s", c.StoreOutageTimeout)
	}
	if c.GCInterval <= 0 || c.GCDelay < 0 {
		return fmt.Errorf("--gc-interval must be positive and --gc-delay not negative")
	}
	if c.SQLMemoryLimit < 0 {
		return fmt.Errorf("--sql-memory-limit %d: must not be negative", c.SQLMemoryLimit)
	}
	if c.KVSnapshotInterval <= 0 {
		return fmt.Errorf("--kv-snapshot-interval %v: must be positive", c.KVSnapshotInterval)
	}
	if c.TieringFreshness <= 0 {
		return fmt.Errorf("--tiering-freshness %v: must be positive", c.TieringFreshness)
	}
	if c.LakeTargetFileSize <= 0 || c.LakeCompactFiles < 0 {
		return fmt.Errorf("--lake-target-file-size must be positive and --lake-compact-files not negative")
	}
	if c.EtcdDialTimeout <= 0 {
		return fmt.Errorf("--etcd-dial-timeout %v: must be positive", c.EtcdDialTimeout)
	}
	return nil
}

func splitHostPort(addr string) (string, int, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad port %q", portText)
	}
	return host, port, nil
}

// advertised returns addr with its host replaced by AdvertiseHost when set,
// which is what other nodes and clients are told to dial.
func (c *Config) advertised(addr string) string {
	if c.AdvertiseHost == "" {
		return addr
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return net.JoinHostPort(c.AdvertiseHost, port)
}

// advertisedKafka is the Kafka address clients are told to dial, "" when
// the node runs no Kafka listener.
func (c *Config) advertisedKafka() string {
	if c.KafkaAddr == "" {
		return ""
	}
	return c.advertised(c.KafkaAddr)
}
