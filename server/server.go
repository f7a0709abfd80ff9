package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/minkdb/mink/access"
	"github.com/minkdb/mink/auth"
	"github.com/minkdb/mink/buckets"
	"github.com/minkdb/mink/buckets/s3stream"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/embedetcd"
	"github.com/minkdb/mink/metalog"
	"github.com/minkdb/mink/metalog/etcdlog"
	"github.com/minkdb/mink/objstore"
	"github.com/minkdb/mink/server/flightsql"
	"github.com/minkdb/mink/server/flightsvc"
	"github.com/minkdb/mink/server/kafka"
	"github.com/minkdb/mink/server/kafka/groups"
	"github.com/minkdb/mink/sqlfront"
	"github.com/minkdb/mink/sqlfront/engine"
	"github.com/minkdb/mink/sqlfront/pgwire"
	"github.com/minkdb/mink/tiering"
)

// Server is one mink node. New starts it; Close stops it and waits for every
// goroutine it started.
type Server struct {
	cfg    Config
	logger *slog.Logger

	lock      *dirLock
	etcd      *embedetcd.Etcd // nil with an external etcd
	client    *clientv3.Client
	store     objstore.Store
	cat       *metalog.Catalog
	liveness  *etcdlog.Liveness
	live      *metalog.LiveCache // the live nodes, kept current by a watch
	election  *etcdlog.Election
	admin     *http.Server
	adminLn   net.Listener
	engine    *engine.DB
	front     *sqlfront.Frontend
	remote    *flightsvc.Pool // connections to other nodes' Flight services
	pg        *pgwire.Server
	pgLn      net.Listener
	flight    *flightsvc.Service
	flightSQL *flightsql.Server // Flight SQL on the Flight listener
	// kafka is the Kafka listener, nil without --kafka-addr (set by
	// startKafka; read by the metrics, which may be scraped before).
	kafka   atomic.Pointer[kafka.Server]
	groups  *groups.Coordinator
	metrics *metrics
	tiering *tieringWorker // runs on the coordinator lease holder
	// lakeReader is the SQL front end's reader of tiered rows (set by
	// startSQL; read by the metrics).
	lakeReader atomic.Pointer[tiering.LakeReader]

	// tls is the node's certificate and CA pools (tlsconf.go); nil when
	// every listener is plaintext.
	tls *nodeTLS
	// guard authenticates and authorizes the clients of every listener
	// (security.go).
	guard *access.Guard
	hba   *auth.HBA // --hba-file's rules; nil: none

	cancel context.CancelFunc
	wg     sync.WaitGroup
	// refenced is signalled when the node's storage epoch is fenced.
	refenced chan struct{}
	// storeLost is signalled when the object store has held the node's
	// writes up for StoreOutageTimeout (watchStore).
	storeLost chan struct{}

	mu struct {
		sync.Mutex
		// nodeEpoch is this node's current epoch (0 while re-registering).
		nodeEpoch uint64
		// coordinatorEpoch is nonzero while this node holds the coordinator
		// lease and is registered as coordinator.
		coordinatorEpoch uint64
		live             bool
		// ready: every listener is up (healthz answers ok only then).
		ready bool
		// buckets runs this node epoch's buckets; replaced on re-registration.
		buckets *buckets.Manager
	}
	cache     *s3stream.Cache
	// walMetrics counts the WAL writes of every node epoch this process
	// runs (wal_metrics.go).
	walMetrics s3stream.WALMetrics
	closeOnce  sync.Once
	closeErr  error
}

// New validates cfg, takes the data directory lock, connects to (or starts)
// etcd, opens the object store and the metadata log, registers the node with
// a new node epoch, and starts the heartbeat, the coordinator campaign and the
// admin listener. On error everything already started is stopped again.
func New(ctx context.Context, cfg Config, logger *slog.Logger) (_ *Server, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.Default()
	}
	s := &Server{cfg: cfg, logger: logger.With("node", cfg.NodeID), refenced: make(chan struct{}, 1), storeLost: make(chan struct{}, 1)}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()

	// A missing or bad certificate is an input error: report it before
	// anything starts.
	if s.tls, err = loadNodeTLS(&cfg, s.logger); err != nil {
		return nil, err
	}
	if s.hba, err = loadHBA(cfg.HBAFile); err != nil {
		return nil, err
	}
	if cfg.SuperuserPasswordFile != "" {
		if _, err := readSuperuserPassword(cfg.SuperuserPasswordFile); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	if s.lock, err = lockDataDir(cfg.DataDir); err != nil {
		return nil, err
	}

	// Open the object store first: a bad URL is an input error and should be
	// reported before we spend time on etcd.
	storeURL := cfg.ObjectStore
	if storeURL == "" {
		abs, err := filepath.Abs(filepath.Join(cfg.DataDir, "objects"))
		if err != nil {
			return nil, err
		}
		storeURL = "file://" + abs
	}
	if s.store, err = objstore.Open(ctx, storeURL, objstore.Options{S3Endpoint: cfg.S3Endpoint, S3Region: cfg.S3Region}); err != nil {
		return nil, fmt.Errorf("object store: %w", err)
	}

	endpoints := cfg.EtcdEndpoints
	if len(endpoints) == 0 {
		s.etcd, err = embedetcd.Start(ctx, embedetcd.Config{
			Dir:        filepath.Join(cfg.DataDir, "etcd"),
			ClientAddr: cfg.EmbeddedEtcdAddr,
			Name:       fmt.Sprintf("mink-%d", cfg.NodeID),
			Logger:     s.logger,
		})
		if err != nil {
			return nil, fmt.Errorf("start embedded etcd: %w", err)
		}
		endpoints = s.etcd.Endpoints()
		s.logger.Info("embedded etcd started", "endpoints", endpoints)
	}
	creds, err := etcdCredentials(&cfg)
	if err != nil {
		return nil, err
	}
	if s.client, err = etcdlog.DialWith(ctx, endpoints, s.logger, cfg.EtcdDialTimeout, creds); err != nil {
		return nil, err
	}

	log := etcdlog.New(s.client, cfg.Cluster)
	if s.cat, err = metalog.Open(ctx, log, metalog.Options{
		SnapshotEvery: cfg.MetadataSnapshotEvery,
		Logger:        s.logger,
	}); err != nil {
		return nil, fmt.Errorf("open metadata log: %w", err)
	}
	s.tiering = newTieringWorker(s, storeURL)
	s.liveness = etcdlog.NewLiveness(s.client, cfg.Cluster)
	s.election = etcdlog.NewElection(s.client, cfg.Cluster)
	// A dead coordinator must lose the lease as fast as a dead node loses
	// liveness.
	s.election.TTL = cfg.LeaseTTL
	if s.live, err = s.liveness.Watch(ctx); err != nil {
		return nil, fmt.Errorf("watch live nodes: %w", err)
	}
	s.metrics = newMetrics(s)

	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel

	epoch, err := s.register(ctx)
	if err != nil {
		return nil, err
	}
	session, err := s.liveness.KeepAlive(ctx, catalog.NodeID(cfg.NodeID), s.liveInfo(epoch), cfg.LeaseTTL)
	if err != nil {
		return nil, fmt.Errorf("start heartbeat: %w", err)
	}
	if s.cache, err = s3stream.NewCache(filepath.Join(cfg.DataDir, "cache"), 1<<30); err != nil {
		session.Close()
		return nil, err
	}
	if err := s.startBuckets(epoch, session); err != nil {
		session.Close()
		return nil, err
	}
	s.setLive(true)
	s.logger.Info("node registered", "epoch", epoch, "lease_ttl", cfg.LeaseTTL)

	if err := s.startAccess(ctx); err != nil {
		session.Close()
		return nil, err
	}
	if err := s.startAdmin(); err != nil {
		session.Close()
		return nil, err
	}
	if err := s.startSQL(); err != nil {
		session.Close()
		return nil, err
	}
	if err := s.startFlight(); err != nil {
		session.Close()
		return nil, err
	}
	if err := s.startKafka(); err != nil {
		session.Close()
		return nil, err
	}
	s.mu.Lock()
	s.mu.ready = true
	s.mu.Unlock()
	s.wg.Add(3)
	go func() { defer s.wg.Done(); s.heartbeat(runCtx, session) }()
	go func() { defer s.wg.Done(); s.campaign(runCtx) }()
	go func() { defer s.wg.Done(); s.watchStore(runCtx) }()
	return s, nil
}

func (s *Server) addrs() catalog.Addrs {
	return catalog.Addrs{
		PG:     s.cfg.advertised(s.cfg.PGAddr),
		Flight: s.cfg.advertised(s.cfg.FlightAddr),
		Admin:  s.cfg.advertised(s.cfg.AdminAddr),
		Kafka:  s.cfg.advertisedKafka(),
	}
}

func (s *Server) liveInfo(epoch uint64) metalog.LiveInfo {
	return metalog.LiveInfo{Epoch: epoch, Addrs: s.addrs()}
}

// register proposes RegisterNode until this node holds a new epoch. A
// registration races with nodes taking over this node's buckets (they register
// it too, to fence the old epoch); losing such a race just means re-reading
// the epoch and trying again.
func (s *Server) register(ctx context.Context) (uint64, error) {
	id := catalog.NodeID(s.cfg.NodeID)
	for attempt := 1; ; attempt++ {
		var expect uint64
		s.cat.Read(func(v *catalog.View) {
			if n, ok := v.Nodes[id]; ok {
				expect = n.Epoch
			}
		})
		out, err := s.cat.Propose(ctx, catalog.RegisterNode{Node: id, ExpectEpoch: expect, Addrs: s.addrs()})
		if err == nil {
			s.mu.Lock()
			s.mu.nodeEpoch = out.Epoch
			s.mu.Unlock()
			return out.Epoch, nil
		}
		if !errors.Is(err, catalog.ErrStaleEpoch) || attempt >= 20 {
			return 0, fmt.Errorf("register node %d: %w", id, err)
		}
	}
}

// heartbeat keeps the liveness lease. If the lease is lost (the process was
// paused past lease_ttl, or etcd was unreachable), the node may already have
// been declared dead and its buckets taken over: it registers again with a
// fresh epoch, as the spec requires of a node that comes back.
func (s *Server) heartbeat(ctx context.Context, session *metalog.LivenessSession) {
	for {
		select {
		case <-ctx.Done():
			closeCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			session.Revoke(closeCtx)
			cancel()
			return
		case <-session.Lost():
			s.logger.Warn("liveness lease lost; registering again with a new epoch")
		case <-s.refenced:
			s.logger.Warn("this node epoch was fenced; registering again with a new epoch")
			s.revoke(ctx, session)
		case <-s.storeLost:
			// Revoking the lease tells the coordinator at once: it moves
			// the buckets to nodes that reach the store, whose takeover
			// replays what this node's WAL holds.
			s.logger.Warn("giving this node's buckets up: the object store holds its writes up; registering again once the store answers")
			s.revoke(ctx, session)
		}
		s.setLive(false)
		for {
			if ctx.Err() != nil {
				return
			}
			s.stopBuckets(false)
			err := s.storeAnswers(ctx)
			var epoch uint64
			if err == nil {
				epoch, err = s.register(ctx)
			}
			if err == nil {
				session, err = s.liveness.KeepAlive(ctx, catalog.NodeID(s.cfg.NodeID), s.liveInfo(epoch), s.cfg.LeaseTTL)
			}
			if err == nil {
				// Signals of the stopped manager are not for the new one.
				drain(s.refenced)
				drain(s.storeLost)
				err = s.startBuckets(epoch, session)
			}
			if err == nil {
				s.setLive(true)
				s.logger.Info("node registered", "epoch", epoch)
				break
			}
			s.logger.Error("re-register failed; retrying", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}
}

// revoke ends session, waiting at most a lease TTL: a node fenced while
// etcd does not answer (its WAL was found sealed while its lease was in
// doubt) goes on to stop its buckets; its lease expires by itself.
func (s *Server) revoke(ctx context.Context, session *metalog.LivenessSession) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.LeaseTTL)
	defer cancel()
	if err := session.Revoke(ctx); err != nil {
		s.logger.Warn("revoking the liveness lease failed; it expires by itself", "err", err)
	}
}

// drain empties a signal channel of a signal meant for an earlier node
// epoch.
func drain(c chan struct{}) {
	select {
	case <-c:
	default:
	}
}

// storeAnswers is nil if the object store answers a read (a key that does
// not exist is an answer). A node registers only while it does: a node
// that cannot reach the store would lead buckets it cannot write.
func (s *Server) storeAnswers(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := s.store.Get(ctx, "probe/store-answers")
	if err != nil && !errors.Is(err, objstore.ErrNotFound) {
		return fmt.Errorf("the object store does not answer: %w", err)
	}
	return nil
}

// watchStore signals storeLost once the object store has kept the node's
// oldest write waiting for StoreOutageTimeout: a leader that keeps etcd
// but loses the store must not keep buckets it cannot write.
func (s *Server) watchStore(ctx context.Context) {
	every := min(s.cfg.StoreOutageTimeout/4, time.Second)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
		m := s.Buckets()
		if m == nil {
			continue
		}
		if d := m.StoreStalled(); d >= s.cfg.StoreOutageTimeout {
			s.logger.Error("the object store has held this node's oldest write up past --store-outage-timeout",
				"waited", d.Round(time.Millisecond), "store_outage_timeout", s.cfg.StoreOutageTimeout)
			select {
			case s.storeLost <- struct{}{}:
			default:
			}
		}
	}
}

// campaign runs for the coordinator lease for the life of the node. While it
// holds the lease, the node is registered as coordinator with a new
// coordinator epoch; the coordinator loops (assignment, failover, rebalance,
// tiering) hang off that epoch.
func (s *Server) campaign(ctx context.Context) {
	for ctx.Err() == nil {
		leadership, err := s.election.Campaign(ctx, catalog.NodeID(s.cfg.NodeID))
		if err != nil {
			if ctx.Err() == nil {
				s.logger.Warn("coordinator campaign failed; retrying", "err", err)
				sleepCtx(ctx, time.Second)
			}
			continue
		}
		epoch, err := s.registerCoordinator(ctx, leadership.Guard())
		if err != nil {
			if errors.Is(err, metalog.ErrGuardFailed) {
				// The lease was lost between Campaign and the proposal
				// (the process was paused): another node may hold it and
				// be registered. Nothing was appended; campaign again.
				s.logger.Warn("coordinator lease lost before registering as coordinator; campaigning again", "err", err)
			} else {
				s.logger.Error("register as coordinator failed; resigning", "err", err)
			}
			resignCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			leadership.Resign(resignCtx)
			cancel()
			sleepCtx(ctx, time.Second)
			continue
		}
		s.mu.Lock()
		s.mu.coordinatorEpoch = epoch
		s.mu.Unlock()
		s.logger.Info("coordinator lease acquired", "coordinator_epoch", epoch)
		leadCtx, stopLead := context.WithCancel(ctx)
		coordDone := make(chan struct{})
		go func() {
			defer close(coordDone)
			s.coordinate(leadCtx, epoch, s.live)
		}()
		select {
		case <-ctx.Done():
		case <-leadership.Done():
			s.logger.Warn("coordinator lease lost", "coordinator_epoch", epoch)
		case <-coordDone:
			// Stale epoch: another node registered as coordinator.
			resignCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			leadership.Resign(resignCtx)
			cancel()
		}
		stopLead()
		<-coordDone
		s.mu.Lock()
		s.mu.coordinatorEpoch = 0
		s.mu.Unlock()
		if ctx.Err() != nil {
			resignCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			leadership.Resign(resignCtx)
			cancel()
		}
	}
}

// registerCoordinator proposes RegisterCoordinator on the condition that
// guard (the coordinator lease this node won) still holds when the record is
// appended, so a node that lost the lease between Campaign and this proposal
// cannot register over the holder (the error then wraps
// metalog.ErrGuardFailed).
func (s *Server) registerCoordinator(ctx context.Context, guard metalog.Guard) (uint64, error) {
	id := catalog.NodeID(s.cfg.NodeID)
	for attempt := 1; ; attempt++ {
		var expect uint64
		s.cat.Read(func(v *catalog.View) { expect = v.Coordinator.Epoch })
		out, err := s.cat.ProposeGuarded(ctx, guard, catalog.RegisterCoordinator{Node: id, NodeEpoch: s.NodeEpoch(), ExpectEpoch: expect})
		if err == nil {
			return out.Epoch, nil
		}
		if !errors.Is(err, catalog.ErrStaleEpoch) || attempt >= 20 {
			return 0, err
		}
		sleepCtx(ctx, 50*time.Millisecond)
	}
}

// startSQL starts the embedded engine and the Postgres wire listener.
func (s *Server) startSQL() error {
	var err error
	s.engine, err = engine.Open(engine.Options{TempDir: filepath.Join(s.cfg.DataDir, "engine-tmp"), MemoryLimit: s.cfg.SQLMemoryLimit})
	if err != nil {
		return fmt.Errorf("start the SQL engine: %w", err)
	}
	s.remote = flightsvc.NewPool()
	// SQL's reads and writes of buckets on other nodes carry a forwarding
	// token of the session's role from the first statement on.
	s.remote.SetForwarder(s.guard)
	if s.tls != nil {
		s.remote = flightsvc.NewTLSPool(s.tls.clientConfig())
	}
	lake, err := s.newLakeReader()
	if err != nil {
		return err
	}
	s.lakeReader.Store(lake)
	s.front = sqlfront.New(sqlfront.Config{Meta: s.cat, Buckets: s.Buckets, Engine: s.engine, Remote: s.remote, Logger: s.logger, Lake: lake, Access: s.guard})
	if s.cfg.DisableSQLMirrors {
		s.front.SetMirrors(false)
	}
	pgcfg := pgwire.Config{Handler: s.front, Logger: s.logger}
	pgcfg.Auth = pgAuth{s.guard}
	if s.tls != nil {
		pgcfg.TLSConfig = s.tls.serverConfig()
	}
	s.pg, err = pgwire.NewServer(pgcfg)
	if err != nil {
		return err
	}
	if s.pgLn, err = net.Listen("tcp", s.cfg.PGAddr); err != nil {
		return fmt.Errorf("listen for Postgres wire on %s: %w", s.cfg.PGAddr, err)
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.pg.Serve(s.pgLn); err != nil && !errors.Is(err, pgwire.ErrServerClosed) {
			s.logger.Error("Postgres listener stopped", "err", err)
		}
	}()
	s.logger.Info("Postgres wire listening", "addr", s.pgLn.Addr().String(), "tls", s.tls != nil)
	return nil
}

// startFlight starts the Arrow Flight listener (server/flightsvc).
func (s *Server) startFlight() error {
	ln, err := net.Listen("tcp", s.cfg.FlightAddr)
	if err != nil {
		return fmt.Errorf("listen for Arrow Flight on %s: %w", s.cfg.FlightAddr, err)
	}
	fcfg := flightsvc.Config{
		Node: catalog.NodeID(s.cfg.NodeID), Meta: s.cat, Buckets: s.Buckets, Live: s.live.IsLive, Logger: s.logger,
		Pool:   s.remote, // one set of connections to the other nodes, shared with SQL
		Access: s.guard,
		Lake:   s.lakeReader.Load(),
	}
	if s.tls != nil {
		fcfg.TLS = s.tls.serverConfig()
	}
	s.flightSQL = flightsql.New(flightsql.Config{Front: s.front, Meta: s.cat, Access: s.guard, Logger: s.logger, IdleTimeout: s.cfg.FlightSQLIdleTimeout, Version: s.cfg.Version})
	fcfg.Route = s.flightSQL.Route
	s.flight = flightsvc.New(fcfg)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.flight.Serve(ln); err != nil {
			s.logger.Error("Flight listener stopped", "err", err)
		}
	}()
	s.logger.Info("Arrow Flight listening", "addr", ln.Addr().String(), "tls", s.tls != nil)
	return nil
}

// startKafka starts the Kafka protocol listener (server/kafka), unless
// --kafka-addr is empty.
func (s *Server) startKafka() error {
	if s.cfg.KafkaAddr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", s.cfg.KafkaAddr)
	if err != nil {
		return fmt.Errorf("listen for Kafka on %s: %w", s.cfg.KafkaAddr, err)
	}
	if s.tls != nil {
		// Kafka's security.protocol=SSL: TLS from the first byte.
		ln = tls.NewListener(ln, s.tls.serverConfig())
	}
	// The groups are coordinated by the coordinator lease holder, so that
	// every node names the same one.
	s.groups = groups.New(groups.Config{
		Node: catalog.NodeID(s.cfg.NodeID), Meta: s.cat, Logger: s.logger,
		Coordinator: func() (node catalog.NodeID, addr string, ok bool) {
			s.cat.Read(func(v *catalog.View) {
				node = v.Coordinator.Node
				if n, found := v.Nodes[node]; found {
					addr = n.Addrs.Kafka
				}
			})
			return node, addr, node != 0 && addr != "" && s.live.IsLive(node)
		},
	})
	k := kafka.New(kafka.Config{
		Node: catalog.NodeID(s.cfg.NodeID), Cluster: s.cfg.Cluster, Meta: s.cat, Buckets: s.Buckets,
		NodeEpoch: s.NodeEpoch, Live: s.live.IsLive, AutoCreateTopics: s.cfg.KafkaAutoCreateTopics, Logger: s.logger,
		Groups: s.groups, GroupKeys: groups.Versions(), Access: s.guard, Lake: s.lakeReader.Load(),
	})
	s.kafka.Store(k)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := k.Serve(ln); err != nil {
			s.logger.Error("Kafka listener stopped", "err", err)
		}
	}()
	s.logger.Info("Kafka listening", "addr", ln.Addr().String(), "tls", s.tls != nil)
	return nil
}

// startBuckets starts the bucket manager for node epoch epoch, serving
// while session's lease holds.
func (s *Server) startBuckets(epoch uint64, session *metalog.LivenessSession) error {
	stream := s3stream.Config{Cache: s.cache, WALSegmentBytes: s.cfg.WALSegmentBytes, WALMetrics: &s.walMetrics}
	if strings.HasPrefix(s.cfg.ObjectStore, "s3://") {
		stream.BatchWindow = s3stream.DefaultS3BatchWindow
	} else {
		// On a local directory the WAL is written into segments and
		// commits in groups (s3stream segment.go); GroupCommitBytes is
		// for a WAL kept as objects there (WALSegmentBytes < 0).
		stream.GroupCommitBytes = s3stream.DefaultGroupCommitBytes
	}
	m, err := buckets.NewManager(buckets.Config{
		Node: catalog.NodeID(s.cfg.NodeID), NodeEpoch: epoch, Meta: s.cat, Store: s.store,
		Live: s.live.IsLive, LeaseHeld: session.Held, Stream: stream, Logger: s.logger,
		DataDir: s.cfg.DataDir, KVSnapshotInterval: s.cfg.KVSnapshotInterval, KVLake: s.kvLakeRows,
		OnFenced: func(error) {
			select {
			case s.refenced <- struct{}{}:
			default:
			}
		},
	})
	if err != nil {
		return fmt.Errorf("start buckets: %w", err)
	}
	s.mu.Lock()
	s.mu.buckets = m
	s.mu.Unlock()
	return nil
}

// stopBuckets stops the bucket manager; clean closes the buckets first.
func (s *Server) stopBuckets(clean bool) {
	s.mu.Lock()
	m := s.mu.buckets
	s.mu.buckets = nil
	s.mu.Unlock()
	if m == nil {
		return
	}
	if clean {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := m.CloseBuckets(ctx); err != nil {
			s.logger.Warn("closing buckets at shutdown failed; the next start recovers them from the WAL", "err", err)
		}
		cancel()
	}
	m.Close()
}

// SQLFrontend is the node's SQL front end (a pgwire.Handler).
func (s *Server) SQLFrontend() pgwire.Handler { return s.front }

// Catalog is the node's metadata catalog.
func (s *Server) Catalog() *metalog.Catalog { return s.cat }

// Buckets is the current bucket manager, or nil while re-registering.
func (s *Server) Buckets() *buckets.Manager {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.buckets
}

// NodeEpoch is the node's current epoch.
func (s *Server) NodeEpoch() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.nodeEpoch
}

func (s *Server) setLive(live bool) {
	s.mu.Lock()
	s.mu.live = live
	s.mu.Unlock()
}

// AdminAddr is the address the admin listener is bound to.
func (s *Server) AdminAddr() string { return s.adminLn.Addr().String() }

// Close stops the node: the admin listener, the heartbeat (revoking the lease
// so that other nodes see this one leave at once), the coordinator lease, the
// metadata log, etcd and the directory lock, in that order.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		if s.pg != nil {
			s.pg.Close() // cancels running queries, tells clients 57P01
		}
		if s.flight != nil {
			s.flight.Close(5 * time.Second)
		}
		if s.flightSQL != nil {
			s.flightSQL.Close()
		}
		if k := s.kafka.Load(); k != nil {
			k.Close()
		}
		if s.groups != nil {
			s.groups.Close()
		}
		if s.engine != nil {
			s.engine.Close()
		}
		if s.remote != nil {
			s.remote.Close()
		}
		if s.admin != nil {
			shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = s.admin.Shutdown(shutCtx)
			cancel()
		}
		// Hand buckets over cleanly (flush, commit, close their streams) while
		// the heartbeat still runs, so that a restart takes the renewal path
		// and other nodes need no failover.
		s.stopBuckets(true)
		if s.cancel != nil {
			s.cancel()
		}
		s.wg.Wait()
		if s.live != nil {
			s.live.Close()
		}
		if s.cat != nil {
			s.closeErr = errors.Join(s.closeErr, s.cat.Close())
		}
		if s.client != nil {
			s.closeErr = errors.Join(s.closeErr, s.client.Close())
		}
		if s.etcd != nil {
			s.etcd.Close()
		}
		if s.store != nil {
			s.closeErr = errors.Join(s.closeErr, s.store.Close())
		}
		s.lock.release()
	})
	return s.closeErr
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
