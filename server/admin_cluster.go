package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"time"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/plan"
)

// BucketStatus is one bucket in GET /api/v1/tables/{name}/buckets.
type BucketStatus struct {
	Bucket      catalog.BucketID `json:"bucket"`
	Partition   string           `json:"partition,omitempty"`
	Index       int              `json:"index"`
	Leader      catalog.NodeID   `json:"leader"`
	LeaderEpoch uint64           `json:"leader_epoch"`
	// Open: the leader has the bucket's stream open at the leader epoch.
	Open bool `json:"open"`
	// Start is the stream's start offset: rows below it were trimmed by
	// log_retention (TrimStream) and are read from the lake, if tiered.
	Start uint64 `json:"start"`
	// End is the committed end offset (rows in stream objects).
	End uint64 `json:"end"`
	// Error says why the leader does not serve the bucket (a WAL object
	// its recovery needs is corrupt; a primary-key bucket's restore
	// failed). Only the leader knows: filled when the node answering leads
	// the bucket.
	Error string `json:"error,omitempty"`
}

func (s *Server) handleTableBuckets(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	var out []BucketStatus
	found := false
	m := s.Buckets()
	s.cat.Read(func(v *catalog.View) {
		t, ok := v.TableNamed(name)
		if !ok {
			return
		}
		found = true
		partValue := map[catalog.PartitionID]string{}
		for _, p := range t.Partitions {
			partValue[p.ID] = p.Value
		}
		for _, id := range v.BucketsOf(t.ID) {
			b := v.Buckets[id]
			st := BucketStatus{Bucket: id, Partition: partValue[b.Partition], Index: b.Index, Leader: b.Leader, LeaderEpoch: b.LeaderEpoch}
			if stream, ok := v.Streams[catalog.StreamID(id)]; ok {
				st.Open = stream.Open && stream.Node == b.Leader && stream.Epoch == b.LeaderEpoch
				st.Start, st.End = stream.Start, stream.End
			}
			if m != nil && b.Leader == catalog.NodeID(s.cfg.NodeID) {
				if err := m.OpenError(id); err != nil {
					st.Error = err.Error()
				}
			}
			out = append(out, st)
		}
	})
	if !found {
		writeError(w, http.StatusNotFound, fmt.Errorf("table %q does not exist", name))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"table": name, "buckets": out})
}

// RebalanceEvent is one line of the NDJSON stream of POST
// /api/v1/cluster/rebalance.
type RebalanceEvent struct {
	// Type is "plan", "moved", "done" or "error".
	Type  string      `json:"type"`
	Moves []plan.Move `json:"moves,omitempty"`
	Move  *plan.Move  `json:"move,omitempty"`
	Done  int         `json:"done,omitempty"`
	Total int         `json:"total,omitempty"`
	// ElapsedMS is how long the move took, until the new leader had the
	// bucket open.
	ElapsedMS int64  `json:"elapsed_ms,omitempty"`
	Error     string `json:"error,omitempty"`
	// CoordinatorChanged marks an "error" event of a rebalance that stopped
	// because another node took the coordinator lease: run it again.
	CoordinatorChanged bool `json:"coordinator_changed,omitempty"`
	// Replan marks a "plan" event after a move: the cluster changed
	// meanwhile, and Moves are what is left to do now.
	Replan bool `json:"replan,omitempty"`
	// By is the node (the coordinator lease holder) that ran the rebalance.
	By catalog.NodeID `json:"by,omitempty"`
}

func (s *Server) handleRebalance(w http.ResponseWriter, r *http.Request) {
	dryRun := r.URL.Query().Get("dry_run") == "1" || r.URL.Query().Get("dry_run") == "true"
	s.mu.Lock()
	epoch := s.mu.coordinatorEpoch
	s.mu.Unlock()
	if epoch == 0 {
		s.forwardToCoordinator(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	flusher, _ := w.(http.Flusher)
	emit := func(ev RebalanceEvent) {
		ev.By = catalog.NodeID(s.cfg.NodeID)
		_ = enc.Encode(ev)
		if flusher != nil {
			flusher.Flush()
		}
	}
	if err := s.rebalance(r.Context(), epoch, dryRun, emit); err != nil {
		emit(RebalanceEvent{Type: "error", Error: err.Error(), CoordinatorChanged: errors.Is(err, catalog.ErrStaleEpoch)})
	}
}

// rebalance plans and, unless dryRun, carries out the moves one LeadBucket
// at a time, waiting for each bucket to open on its new leader. Every plan
// is made from a view caught up with the metadata log's head, and the plan
// is made again after each move: the view a coordinator that just took the
// lease holds may lag the log, and failovers move buckets while a
// rebalance runs, so a plan made once can end outside the band. When the
// plan changes, the new one is emitted as a "plan" event with Replan set.
func (s *Server) rebalance(ctx context.Context, epoch uint64, dryRun bool, emit func(RebalanceEvent)) error {
	return runRebalance(ctx, rebalanceSteps{
		plan: func(ctx context.Context) ([]plan.Move, error) { return s.rebalancePlan(ctx, epoch) },
		move: func(ctx context.Context, m plan.Move) error {
			out, err := s.cat.Propose(ctx, catalog.LeadBucket{Bucket: m.Bucket, Node: m.To, CoordinatorEpoch: epoch})
			if err != nil {
				return fmt.Errorf("move bucket %d to node %d: %w", m.Bucket, m.To, err)
			}
			return s.waitOpen(ctx, m.Bucket, m.To, out.Epoch)
		},
	}, dryRun, emit)
}

// rebalanceSteps are what a rebalance does: plan from the current state,
// and move one bucket (until it is open on its new leader).
type rebalanceSteps struct {
	plan func(ctx context.Context) ([]plan.Move, error)
	move func(ctx context.Context, m plan.Move) error
}

// runRebalance is the rebalance loop: plan, make the first move, plan
// again, until the plan is empty.
func runRebalance(ctx context.Context, steps rebalanceSteps, dryRun bool, emit func(RebalanceEvent)) error {
	moves, err := steps.plan(ctx)
	if err != nil {
		return err
	}
	emit(RebalanceEvent{Type: "plan", Moves: moves, Total: len(moves)})
	if dryRun {
		emit(RebalanceEvent{Type: "done", Total: len(moves)})
		return nil
	}
	// Each move narrows the spread of a stable view; the bound stops a
	// rebalance that concurrent changes keep from converging.
	limit := 2*len(moves) + 8
	done := 0
	for len(moves) > 0 {
		if done == limit {
			return fmt.Errorf("rebalance did not converge after %d moves: the cluster kept changing; run it again", done)
		}
		m := moves[0]
		start := time.Now()
		if err := steps.move(ctx, m); err != nil {
			return err
		}
		done++
		next, err := steps.plan(ctx)
		if err != nil {
			return err
		}
		emit(RebalanceEvent{Type: "moved", Move: &m, Done: done, Total: done + len(next), ElapsedMS: time.Since(start).Milliseconds()})
		if !slices.Equal(next, moves[1:]) && len(next) > 0 {
			emit(RebalanceEvent{Type: "plan", Moves: next, Total: done + len(next), Replan: true})
		}
		moves = next
	}
	emit(RebalanceEvent{Type: "done", Total: done})
	return nil
}

// rebalancePlan is plan.Rebalance of the live nodes, on a view that holds
// every metadata record appended before the call. It fails with
// catalog.ErrStaleEpoch once another node has taken the coordinator lease
// since the rebalance began at epoch: a rebalance stops with its
// coordinator, rather than report a plan it may no longer carry out.
func (s *Server) rebalancePlan(ctx context.Context, epoch uint64) ([]plan.Move, error) {
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.cat.Sync(sctx); err != nil {
		return nil, fmt.Errorf("catch up with the metadata log before planning: %w", err)
	}
	var live []catalog.NodeID
	for id := range s.live.Nodes() {
		live = append(live, id)
	}
	sort.Slice(live, func(i, j int) bool { return live[i] < live[j] })
	var (
		moves []plan.Move
		stale error
	)
	s.cat.Read(func(v *catalog.View) {
		if v.Coordinator.Epoch != epoch {
			stale = fmt.Errorf("the rebalance stopped: it runs at coordinator epoch %d, current is %d (node %d): %w",
				epoch, v.Coordinator.Epoch, v.Coordinator.Node, catalog.ErrStaleEpoch)
			return
		}
		moves = plan.Rebalance(v, live)
	})
	return moves, stale
}

// waitOpen waits until node has bucket's stream open at leaderEpoch.
func (s *Server) waitOpen(ctx context.Context, bucket catalog.BucketID, node catalog.NodeID, leaderEpoch uint64) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		changed := s.cat.Changed()
		open, moved := false, false
		s.cat.Read(func(v *catalog.View) {
			if b, ok := v.Buckets[bucket]; !ok || b.LeaderEpoch != leaderEpoch {
				moved = true // dropped, or moved again by someone else
				return
			}
			st := v.Streams[catalog.StreamID(bucket)]
			open = st != nil && st.Open && st.Node == node && st.Epoch == leaderEpoch
		})
		if open || moved {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("bucket %d did not open on node %d: %w", bucket, node, ctx.Err())
		case <-changed:
		}
	}
}

// forwardToCoordinator sends a coordinator action to the lease holder and
// streams its answer back. The request carries a forwarding token of its
// caller (not the caller's credentials), so the lease holder checks the
// same role; its 401 or 403 comes back as it is.
func (s *Server) forwardToCoordinator(w http.ResponseWriter, r *http.Request) {
	holder, ok, err := s.election.Leader(r.Context())
	if err != nil || !ok {
		writeError(w, http.StatusServiceUnavailable, errors.Join(errors.New("no node holds the coordinator lease right now; retry"), err))
		return
	}
	var addr string
	s.cat.Read(func(v *catalog.View) {
		if n, ok := v.Nodes[holder]; ok {
			addr = n.Addrs.Admin
		}
	})
	if holder == catalog.NodeID(s.cfg.NodeID) || addr == "" {
		writeError(w, http.StatusServiceUnavailable, fmt.Errorf("node %d holds the coordinator lease but is not registered as coordinator yet; retry", holder))
		return
	}
	if r.Header.Get("X-Mink-Forwarded") != "" {
		writeError(w, http.StatusServiceUnavailable, fmt.Errorf("forwarding loop: node %d is not the coordinator either", s.cfg.NodeID))
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, s.adminScheme()+"://"+addr+r.URL.RequestURI(), r.Body)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	req.Header.Set("X-Mink-Forwarded", fmt.Sprint(s.cfg.NodeID))
	if err := s.setForwardAuth(req, r); err != nil {
		writeError(w, http.StatusServiceUnavailable, err)
		return
	}
	resp, err := s.peerHTTP().Do(req) // https, verifying the peer, with TLS on
	if err != nil {
		writeError(w, http.StatusBadGateway, fmt.Errorf("forward to coordinator node %d at %s: %w", holder, addr, err))
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	flusher, _ := w.(http.Flusher)
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			w.Write(line)
			if flusher != nil {
				flusher.Flush()
			}
		}
		if err == io.EOF {
			return
		}
		if err != nil {
			return
		}
	}
}
