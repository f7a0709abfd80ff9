package sqlfront

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/minkdb/mink/access"
	"github.com/minkdb/mink/buckets"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/kv/kvcodec"
	"github.com/minkdb/mink/sqlfront/engine"
	"github.com/minkdb/mink/sqlfront/pgwire"
	"github.com/minkdb/mink/tiering"
)

// Metadata is what the front end needs from the metadata log;
// *metalog.Catalog implements it.
type Metadata interface {
	Propose(ctx context.Context, rec catalog.Record) (catalog.Outcome, error)
	Read(fn func(v *catalog.View))
	Changed() <-chan struct{}
	AppliedIndex() uint64
	// Sync returns once the view holds every entry appended before the
	// call (metalog.Catalog.Sync).
	Sync(ctx context.Context) error
}

// Remote is the node-to-node transport: reads and writes of buckets led by
// other nodes. server/flightsvc.Pool implements it. Errors are the buckets
// package's (NotLeaderError, ErrUnavailable), which callers retry.
type Remote interface {
	ReadBucket(ctx context.Context, addr string, bucket catalog.BucketID) ([]buckets.Batch, error)
	AppendBucket(ctx context.Context, addr string, bucket catalog.BucketID, rec arrow.RecordBatch) error
	// Primary-key buckets (flightsvc.Pool's KV methods; sqlfront/pk.go).
	WriteKV(ctx context.Context, addr string, bucket catalog.BucketID, writes []kvcodec.Write) ([]kvcodec.ChangeRecord, uint64, error)
	GetKV(ctx context.Context, addr string, bucket catalog.BucketID, key []byte) ([]byte, bool, error)
	ScanKV(ctx context.Context, addr string, bucket catalog.BucketID) ([]arrow.RecordBatch, error)
	ReadChangelog(ctx context.Context, addr string, bucket catalog.BucketID) ([]buckets.Batch, error)
}

// Config configures a Frontend.
type Config struct {
	Meta Metadata
	// Buckets returns the node's current bucket manager (nil while the node
	// registers again).
	Buckets func() *buckets.Manager
	Engine  *engine.DB
	// Remote reaches buckets led by other nodes (Arrow Flight); nil on a
	// single node, where such a bucket is an error (57P03).
	Remote Remote
	Logger *slog.Logger
	// Database is the one database name clients may connect to. Default
	// "mink".
	Database string
	// BucketWait bounds how long a statement waits for a bucket that is
	// opening or moving before failing with 57P03. Default 30 s.
	BucketWait time.Duration
	// Lake reads tiered rows of log tables (the union read, lake.go); nil:
	// a table with tiered rows cannot be read.
	Lake *tiering.LakeReader
	// Access resolves a connection's user to its role (package access);
	// nil: every session acts as the bootstrap superuser (tests).
	Access *access.Guard
}

// Frontend is the SQL side of the Postgres wire protocol.
type Frontend struct {
	cfg Config
	// bucketScans counts bucket reads by queries (pruning shows here).
	bucketScans atomic.Uint64
	// seqs caches the values of serial and identity columns (sequence.go).
	seqs sequences
}

var _ pgwire.Handler = (*Frontend)(nil)

// New returns a front end.
func New(cfg Config) *Frontend {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Database == "" {
		cfg.Database = "mink"
	}
	if cfg.BucketWait == 0 {
		cfg.BucketWait = 30 * time.Second
	}
	return &Frontend{cfg: cfg}
}

// NewSession implements pgwire.Handler.
func (f *Frontend) NewSession(ctx context.Context, info pgwire.SessionInfo) (pgwire.Session, error) {
	if info.Database != f.cfg.Database {
		return nil, errorf(pgwire.CodeInvalidCatalogName, "database %q does not exist", info.Database)
	}
	conn, err := f.cfg.Engine.Conn(ctx, engine.ConnOptions{TimeZone: sessionTimeZone(info)})
	if err != nil {
		return nil, toWire(err)
	}
	s := newSession(f, conn, info)
	if s.identity, err = f.identity(info.User); err != nil {
		conn.Close()
		return nil, err
	}
	if err := s.applyStartupParams(ctx); err != nil {
		conn.Close()
		return nil, toWire(err)
	}
	return s, nil
}

// identity is the role a session of user acts as: its role, or in trust
// mode the bootstrap superuser for a name that is no role.
func (f *Frontend) identity(user string) (access.Identity, error) {
	if f.cfg.Access == nil {
		return access.Identity{Role: catalog.BootstrapRole, Name: user}, nil
	}
	id, reason, err := f.cfg.Access.Resolve(user)
	if err != nil {
		return access.Identity{}, errorf(pgwire.CodeInvalidAuthorizationSpecification, "%s", reason)
	}
	return id, nil
}

// BucketScans is the number of bucket reads queries have made, a measure
// of partition pruning.
func (f *Frontend) BucketScans() uint64 { return f.bucketScans.Load() }
