package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/minkdb/mink/buckets/objstore"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/embedetcd"
)

// Server is one mink node. New starts it; Close stops it and waits for every
// goroutine it started.
type Server struct {
	cfg    Config
	logger *slog.Logger

	lock     *dirLock
	etcd     *embedetcd.Etcd // nil with an external etcd
	client   *clientv3.Client
	store    objstore.Store
	cat      *catalog.Catalog
	liveness *catalog.EtcdLiveness
	election *catalog.EtcdElection
	admin    *http.Server
	adminLn  net.Listener
	metrics  *metrics

	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu struct {
		sync.Mutex
		// nodeEpoch is this node's current epoch (0 while re-registering).
		nodeEpoch uint64
		// coordinatorEpoch is nonzero while this node holds the coordinator
		// lease and is registered as coordinator.
		coordinatorEpoch uint64
		live             bool
	}
	closeOnce sync.Once
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
	s := &Server{cfg: cfg, logger: logger.With("node", cfg.NodeID)}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()

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
	if s.client, err = catalog.Dial(ctx, endpoints, s.logger, cfg.EtcdDialTimeout); err != nil {
		return nil, err
	}

	log := catalog.NewEtcdLog(s.client, cfg.Cluster)
	if s.cat, err = catalog.Open(ctx, log, catalog.Options{
		SnapshotEvery: cfg.MetadataSnapshotEvery,
		Logger:        s.logger,
	}); err != nil {
		return nil, fmt.Errorf("open metadata log: %w", err)
	}
	s.liveness = catalog.NewEtcdLiveness(s.client, cfg.Cluster)
	s.election = catalog.NewEtcdElection(s.client, cfg.Cluster)
	// A dead coordinator must lose the lease as fast as a dead node loses
	// liveness.
	s.election.TTL = cfg.LeaseTTL
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
	s.setLive(true)
	s.logger.Info("node registered", "epoch", epoch, "lease_ttl", cfg.LeaseTTL)

	if err := s.startAdmin(); err != nil {
		session.Close()
		return nil, err
	}
	s.wg.Add(2)
	go func() { defer s.wg.Done(); s.heartbeat(runCtx, session) }()
	go func() { defer s.wg.Done(); s.campaign(runCtx) }()
	return s, nil
}

func (s *Server) addrs() catalog.Addrs {
	return catalog.Addrs{
		PG:     s.cfg.advertised(s.cfg.PGAddr),
		Flight: s.cfg.advertised(s.cfg.FlightAddr),
		Admin:  s.cfg.advertised(s.cfg.AdminAddr),
	}
}

func (s *Server) liveInfo(epoch uint64) catalog.LiveInfo {
	return catalog.LiveInfo{Epoch: epoch, Addrs: s.addrs()}
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
func (s *Server) heartbeat(ctx context.Context, session *catalog.LivenessSession) {
	for {
		select {
		case <-ctx.Done():
			closeCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			session.Revoke(closeCtx)
			cancel()
			return
		case <-session.Lost():
		}
		s.setLive(false)
		s.logger.Warn("liveness lease lost; registering again with a new epoch")
		for {
			if ctx.Err() != nil {
				return
			}
			epoch, err := s.register(ctx)
			if err == nil {
				session, err = s.liveness.KeepAlive(ctx, catalog.NodeID(s.cfg.NodeID), s.liveInfo(epoch), s.cfg.LeaseTTL)
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
		epoch, err := s.registerCoordinator(ctx)
		if err != nil {
			s.logger.Error("register as coordinator failed; resigning", "err", err)
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
		select {
		case <-ctx.Done():
		case <-leadership.Done():
			s.logger.Warn("coordinator lease lost", "coordinator_epoch", epoch)
		}
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

func (s *Server) registerCoordinator(ctx context.Context) (uint64, error) {
	id := catalog.NodeID(s.cfg.NodeID)
	for attempt := 1; ; attempt++ {
		var expect uint64
		s.cat.Read(func(v *catalog.View) { expect = v.Coordinator.Epoch })
		out, err := s.cat.Propose(ctx, catalog.RegisterCoordinator{Node: id, NodeEpoch: s.NodeEpoch(), ExpectEpoch: expect})
		if err == nil {
			return out.Epoch, nil
		}
		if !errors.Is(err, catalog.ErrStaleEpoch) || attempt >= 20 {
			return 0, err
		}
		sleepCtx(ctx, 50*time.Millisecond)
	}
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
		if s.admin != nil {
			shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = s.admin.Shutdown(shutCtx)
			cancel()
		}
		if s.cancel != nil {
			s.cancel()
		}
		s.wg.Wait()
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
