package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/tiering"
)

// TieringStatus is GET /api/v1/tiering/status, answered by the coordinator
// lease holder (other nodes forward it).
type TieringStatus struct {
	// By is the lease holder that answered, at CoordinatorEpoch.
	By               catalog.NodeID `json:"by"`
	CoordinatorEpoch uint64         `json:"coordinator_epoch"`
	Tables           []TableTiering `json:"tables"`
}

// TableTiering is one table in TieringStatus.
type TableTiering struct {
	Table   string          `json:"table"`
	ID      catalog.TableID `json:"id"`
	Enabled bool            `json:"enabled"`
	// Reason says why tiering is off for the table, when it is.
	Reason    string `json:"reason,omitempty"`
	Freshness string `json:"freshness"`
	// Tiered and End sum the buckets' tiered offsets and committed stream
	// ends; LagRows = End - Tiered.
	Tiered  uint64 `json:"tiered_rows"`
	End     uint64 `json:"end_rows"`
	LagRows uint64 `json:"lag_rows"`
	// LagSeconds bounds how old the oldest untiered row is: the time since
	// the last recorded round (or since the worker first saw the table
	// behind), 0 when nothing is untiered.
	LagSeconds     float64         `json:"lag_seconds"`
	LakeSnapshotID int64           `json:"lake_snapshot_id,omitempty"`
	LakeSequence   uint64          `json:"lake_sequence,omitempty"`
	RecordedAt     *time.Time      `json:"recorded_at,omitempty"`
	Running        bool            `json:"running"`
	LastRound      *RoundSummary   `json:"last_round,omitempty"`
	LastError      string          `json:"last_error,omitempty"`
	LastErrorAt    *time.Time      `json:"last_error_at,omitempty"`
	Buckets        []BucketTiering `json:"buckets"`
}

// BucketTiering is one bucket of a TableTiering.
type BucketTiering struct {
	Bucket    catalog.BucketID `json:"bucket"`
	Partition string           `json:"partition,omitempty"`
	Tiered    uint64           `json:"tiered"`
	End       uint64           `json:"end"`
}

func (s *Server) handleTieringStatus(w http.ResponseWriter, r *http.Request) {
	epoch := s.tiering.epoch()
	if epoch == 0 {
		s.forwardToCoordinator(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(s.tieringStatus(epoch, time.Now()))
}

func (s *Server) tieringStatus(epoch uint64, now time.Time) TieringStatus {
	out := TieringStatus{By: catalog.NodeID(s.cfg.NodeID), CoordinatorEpoch: epoch, Tables: []TableTiering{}}
	wk := s.tiering
	s.cat.Read(func(v *catalog.View) {
		wk.mu.Lock()
		defer wk.mu.Unlock()
		for _, t := range v.Tables {
			p := wk.policy(t.Spec)
			tt := TableTiering{Table: v.TopicName(t), ID: t.ID, Enabled: p.enabled, Reason: p.reason, Freshness: p.freshness.String(),
				LakeSnapshotID: t.Tiering.LakeSnapshotID, LakeSequence: t.Tiering.LakeSequence, Buckets: []BucketTiering{}}
			if !t.Tiering.At.IsZero() {
				at := t.Tiering.At
				tt.RecordedAt = &at
			}
			partValue := map[catalog.PartitionID]string{}
			for _, part := range t.Partitions {
				partValue[part.ID] = part.Value
			}
			for _, id := range v.BucketsOf(t.ID) {
				bt := BucketTiering{Bucket: id, Partition: partValue[v.Buckets[id].Partition], Tiered: t.Tiering.Offsets[id]}
				if st := v.Streams[catalog.StreamID(id)]; st != nil {
					bt.End = st.End
				}
				tt.Tiered += bt.Tiered
				tt.End += max(bt.End, bt.Tiered)
				tt.Buckets = append(tt.Buckets, bt)
			}
			tt.LagRows = tt.End - tt.Tiered
			st := wk.mu.tables[t.ID]
			if st != nil {
				tt.Running, tt.LastRound, tt.LastError = st.running, st.lastRound, st.lastErr
				if st.lastErr != "" {
					at := st.lastErrAt.UTC()
					tt.LastErrorAt = &at
				}
			}
			if tt.LagRows > 0 {
				// After TRUNCATE no offset is recorded: the last round's
				// time dates rows that are gone.
				since := t.Tiering.At
				if len(t.Tiering.Offsets) == 0 {
					since = time.Time{}
				}
				if since.IsZero() && st != nil {
					since = st.behindSince
				}
				if !since.IsZero() {
					tt.LagSeconds = now.Sub(since).Seconds()
				}
			}
			out.Tables = append(out.Tables, tt)
		}
	})
	slices.SortFunc(out.Tables, func(a, b TableTiering) int {
		switch {
		case a.Table < b.Table:
			return -1
		case a.Table > b.Table:
			return 1
		}
		return 0
	})
	return out
}

// TieringRunEvent is one line of the NDJSON stream of POST
// /api/v1/tiering/run.
type TieringRunEvent struct {
	// Type is "queued" (without wait), "progress" (Progress holds a step
	// of the round), "done" (Result) or "error".
	Type     string            `json:"type"`
	Table    string            `json:"table,omitempty"`
	Progress *tiering.Progress `json:"progress,omitempty"`
	Result   *RoundSummary     `json:"result,omitempty"`
	// LagRows is what is left untiered after the round (rows committed
	// while it ran).
	LagRows uint64         `json:"lag_rows"`
	Error   string         `json:"error,omitempty"`
	By      catalog.NodeID `json:"by,omitempty"`
}

// runSettle is how long a waited run lets the buckets' leaders flush before
// it freezes the round's end offsets: a round tiers committed stream data,
// and leaders commit acknowledged writes every second.
const runSettle = 1200 * time.Millisecond

func (s *Server) handleTieringRun(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("table")
	wait := r.URL.Query().Get("wait") == "1" || r.URL.Query().Get("wait") == "true"
	if name == "" {
		writeError(w, http.StatusBadRequest, errors.New("table is required"))
		return
	}
	var (
		id     catalog.TableID
		policy tablePolicy
		found  bool
	)
	s.cat.Read(func(v *catalog.View) {
		if t, ok := v.TableNamed(name); ok {
			id, policy, found = t.ID, s.tiering.policy(t.Spec), true
		}
	})
	if !found {
		writeError(w, http.StatusNotFound, fmt.Errorf("table %q does not exist", name))
		return
	}
	if !policy.enabled {
		writeError(w, http.StatusConflict, fmt.Errorf("table %q is not tiered: %s", name, policy.reason))
		return
	}
	epoch := s.tiering.epoch()
	if epoch == 0 {
		s.forwardToCoordinator(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	flusher, _ := w.(http.Flusher)
	emit := func(ev TieringRunEvent) {
		ev.By, ev.Table = catalog.NodeID(s.cfg.NodeID), name
		_ = enc.Encode(ev)
		if flusher != nil {
			flusher.Flush()
		}
	}
	if !wait {
		s.tiering.request(id)
		emit(TieringRunEvent{Type: "queued"})
		return
	}
	if err := sleepCtxErr(r.Context(), runSettle); err != nil {
		return
	}
	res, err := s.tiering.round(r.Context(), id, epoch, func(p tiering.Progress) {
		emit(TieringRunEvent{Type: "progress", Progress: &p})
	})
	if err != nil {
		emit(TieringRunEvent{Type: "error", Error: err.Error()})
		return
	}
	var lag uint64
	s.cat.Read(func(v *catalog.View) {
		if t := v.Tables[id]; t != nil {
			for _, b := range v.BucketsOf(id) {
				if st := v.Streams[catalog.StreamID(b)]; st != nil && st.End > t.Tiering.Offsets[b] {
					lag += st.End - t.Tiering.Offsets[b]
				}
			}
		}
	})
	emit(TieringRunEvent{Type: "done", LagRows: lag, Result: roundSummary(res, 0)})
}

func sleepCtxErr(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
