package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/minkdb/mink/catalog"
)

// ClusterStatus is the body of GET /api/v1/cluster/status, documented in
// docs/admin-api.md. Field names are part of the admin API: add, never rename.
type ClusterStatus struct {
	Nodes       []NodeStatus      `json:"nodes"`
	Coordinator CoordinatorStatus `json:"coordinator"`
	// AppliedIndex is the metadata log index the answering node has applied.
	AppliedIndex uint64 `json:"applied_index"`
	// AnsweredBy is the node that produced this status.
	AnsweredBy uint32 `json:"answered_by"`
}

// NodeStatus is one registered node.
type NodeStatus struct {
	ID         uint32        `json:"id"`
	Epoch      uint64        `json:"epoch"`
	Live       bool          `json:"live"`
	Addrs      catalog.Addrs `json:"addrs"`
	BucketsLed int           `json:"buckets_led"`
}

// CoordinatorStatus is the registered coordinator and the current holder of
// the coordinator lease. They differ briefly while a new holder registers.
type CoordinatorStatus struct {
	Node        uint32 `json:"node"`
	Epoch       uint64 `json:"epoch"`
	LeaseHolder uint32 `json:"lease_holder"`
}

func (s *Server) startAdmin() error {
	ln, err := net.Listen("tcp", s.cfg.AdminAddr)
	if err != nil {
		return fmt.Errorf("admin listener on %s: %w", s.cfg.AdminAddr, err)
	}
	s.adminLn = ln
	s.admin = &http.Server{Handler: s.adminHandler(), ReadHeaderTimeout: 10 * time.Second,
		// net/http's own errors (failed TLS handshakes: a client without
		// the CA, plain HTTP to HTTPS) go to the node's log.
		ErrorLog: slog.NewLogLogger(s.logger.Handler(), slog.LevelInfo)}
	serve := func() error { return s.admin.Serve(ln) }
	if s.tls != nil {
		// HTTPS only: a plain HTTP request is answered 400 by net/http.
		s.admin.TLSConfig = s.tls.serverConfig()
		serve = func() error { return s.admin.ServeTLS(ln, "", "") }
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := serve(); err != nil && err != http.ErrServerClosed {
			s.logger.Error("admin listener stopped", "err", err)
		}
	}()
	s.logger.Info("admin listening", "addr", ln.Addr().String(), "tls", s.tls != nil)
	return nil
}

// adminHandler routes the admin API. /healthz and /metrics are open to
// anyone who reaches the port (load balancers and Prometheus); /iceberg/
// (the lake's Iceberg REST catalog, admin_iceberg.go) answers any role
// that logs in; everything else, unknown paths included, answers only a
// superuser (admin_auth.go).
func (s *Server) adminHandler() http.Handler {
	superuser := http.NewServeMux()
	superuser.HandleFunc("GET /api/v1/cluster/status", s.handleClusterStatus)
	superuser.HandleFunc("POST /api/v1/cluster/rebalance", s.handleRebalance)
	superuser.HandleFunc("GET /api/v1/tables/{name}/buckets", s.handleTableBuckets)
	superuser.HandleFunc("GET /api/v1/tiering/status", s.handleTieringStatus)
	superuser.HandleFunc("POST /api/v1/tiering/run", s.handleTieringRun)
	superuser.HandleFunc("/debug/pprof/", pprof.Index)
	superuser.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	superuser.HandleFunc("/debug/pprof/profile", pprof.Profile)
	superuser.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	superuser.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.handleHealthz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics.registry, promhttp.HandlerOpts{}))
	mux.Handle("/iceberg/", s.icebergHandler())
	mux.Handle("/", s.requireSuperuser(superuser))
	return mux
}

// handleHealthz answers 200 while the node holds its liveness lease, 503
// otherwise (for example right after the lease was lost and the node is
// registering again).
func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	live, ready, epoch := s.mu.live, s.mu.ready, s.mu.nodeEpoch
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	status := "ok"
	switch {
	case !ready:
		status = "starting"
		w.WriteHeader(http.StatusServiceUnavailable)
	case !live:
		status = "not live"
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"status": status, "node": s.cfg.NodeID, "epoch": epoch})
}

func (s *Server) handleClusterStatus(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	st, err := s.ClusterStatus(ctx)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(st)
}

// ClusterStatus combines the view (nodes, epochs, leaders) with liveness and
// the coordinator lease, both read from etcd.
func (s *Server) ClusterStatus(ctx context.Context) (ClusterStatus, error) {
	live, err := s.liveness.LiveNodes(ctx)
	if err != nil {
		return ClusterStatus{}, fmt.Errorf("read live nodes: %w", err)
	}
	holder, _, err := s.election.Leader(ctx)
	if err != nil {
		return ClusterStatus{}, fmt.Errorf("read coordinator lease: %w", err)
	}
	st := ClusterStatus{Nodes: []NodeStatus{}, AnsweredBy: s.cfg.NodeID}
	s.cat.Read(func(v *catalog.View) {
		st.AppliedIndex = v.Index
		led := map[catalog.NodeID]int{}
		for _, b := range v.Buckets {
			if b.Leader != 0 {
				led[b.Leader]++
			}
		}
		for id, n := range v.Nodes {
			_, isLive := live[id]
			st.Nodes = append(st.Nodes, NodeStatus{
				ID: uint32(id), Epoch: n.Epoch, Live: isLive, Addrs: n.Addrs, BucketsLed: led[id],
			})
		}
		st.Coordinator = CoordinatorStatus{Node: uint32(v.Coordinator.Node), Epoch: v.Coordinator.Epoch}
	})
	st.Coordinator.LeaseHolder = uint32(holder)
	sort.Slice(st.Nodes, func(i, j int) bool { return st.Nodes[i].ID < st.Nodes[j].ID })
	return st, nil
}

func writeError(w http.ResponseWriter, code int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
}

// metrics are the node's Prometheus metrics, on their own registry so that
// two servers in one test process do not collide.
type metrics struct {
	registry *prometheus.Registry
}

func newMetrics(s *Server) *metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "mink_node_epoch", Help: "The node's current epoch (0 while re-registering).",
		}, func() float64 { return float64(s.NodeEpoch()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "mink_node_live", Help: "1 while the node holds its liveness lease.",
		}, func() float64 {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.mu.live {
				return 1
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "mink_coordinator_epoch", Help: "The coordinator epoch while this node holds the coordinator lease, else 0.",
		}, func() float64 {
			s.mu.Lock()
			defer s.mu.Unlock()
			return float64(s.mu.coordinatorEpoch)
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "mink_metadata_applied_index", Help: "The last metadata log index applied to this node's view.",
		}, func() float64 { return float64(s.cat.AppliedIndex()) }),
		tieringCollector{s},
		lakeReadCollector{s},
		kafkaCollector{s},
		walCollector{s},
	)
	return &metrics{registry: reg}
}
