package sqlfront

import (
	"context"
	"maps"
	"slices"

	pg "github.com/minkdb/mink/sqlfront/pgtree"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/sqlfront/pgwire"
)

// Savepoints. A transaction block buffers its writes (pending log-table
// batches, the primary-key overlay of pk_tx.go) and its settings changes
// until COMMIT, so a savepoint is a copy of that buffered state, and
// ROLLBACK TO puts the copy back. Nothing reaches a bucket before COMMIT,
// so there is nothing to undo anywhere else.

// codeInvalidSavepoint is invalid_savepoint_specification.
const codeInvalidSavepoint = "3B001"

// savepoint is the block's buffered state when SAVEPOINT name ran.
type savepoint struct {
	name     string
	pending  int // len(tx.pending)
	kv       map[catalog.BucketID]txBucketState
	tables   map[catalog.BucketID]*tableInfo
	settings map[string]string // every setting's value
	local    map[string]string // settings.tx.session
	undo     int               // len(tx.undo)
	dropped  int               // len(tx.dropped)
	temp     int               // the temporary tables' undo position
}

// txBucketState is a copy of a txBucket's overlay. The rows themselves are
// never modified in place, so the maps are copied, not the rows.
type txBucketState struct {
	b        *txBucket
	overlay  map[string][]byte
	read     map[string][]byte
	inserted map[string]bool
	order    []string
}

func (s *session) takeSavepoint(name string) savepoint {
	sp := savepoint{name: name, pending: len(s.tx.pending), settings: maps.Clone(s.settings.values), local: maps.Clone(s.settings.tx.session),
		undo: len(s.tx.undo), dropped: len(s.tx.dropped), temp: s.temps.Savepoint()}
	s.tx.kv.mu.Lock()
	defer s.tx.kv.mu.Unlock()
	sp.tables = maps.Clone(s.tx.kv.tables)
	sp.kv = make(map[catalog.BucketID]txBucketState, len(s.tx.kv.buckets))
	for id, b := range s.tx.kv.buckets {
		b.mu.Lock()
		sp.kv[id] = txBucketState{b: b, overlay: maps.Clone(b.overlay), read: maps.Clone(b.read), inserted: maps.Clone(b.inserted), order: slices.Clone(b.order)}
		b.mu.Unlock()
	}
	return sp
}

// rollbackTo restores the block's buffered state to sp.
func (s *session) rollbackTo(ctx context.Context, sp savepoint) {
	for _, w := range s.tx.pending[sp.pending:] {
		for _, r := range w.records {
			r.Release()
		}
	}
	clear(s.tx.pending[sp.pending:])
	s.tx.pending = s.tx.pending[:sp.pending]

	s.tx.kv.mu.Lock()
	s.tx.kv.tables = maps.Clone(sp.tables)
	s.tx.kv.buckets = make(map[catalog.BucketID]*txBucket, len(sp.kv))
	for id, st := range sp.kv {
		b := st.b
		b.mu.Lock()
		b.overlay, b.read, b.inserted, b.order = maps.Clone(st.overlay), maps.Clone(st.read), maps.Clone(st.inserted), slices.Clone(st.order)
		b.mu.Unlock()
		s.tx.kv.buckets[id] = b
	}
	if len(sp.kv) == 0 {
		s.tx.kv.buckets, s.tx.kv.tables = nil, nil
	}
	s.tx.kv.mu.Unlock()

	for name, cur := range s.settings.values {
		if was, ok := sp.settings[name]; ok && was != cur {
			// The value was valid when it was set (see endSettingsTx).
			_ = s.applySetting(ctx, name, was)
		}
	}
	s.settings.tx.session = maps.Clone(sp.local)

	s.rollbackDDL(ctx, min(sp.undo, len(s.tx.undo)))
	if err := s.temps.RollbackTo(ctx, sp.temp); err != nil {
		s.f.cfg.Logger.Warn("temporary tables: ROLLBACK TO SAVEPOINT", "err", err)
	}
	s.tx.dropped = s.tx.dropped[:min(sp.dropped, len(s.tx.dropped))]
}

// findSavepoint is the index of the newest savepoint called name, or a
// 3B001 error.
func (s *session) findSavepoint(name string) (int, error) {
	for i := len(s.tx.savepoints) - 1; i >= 0; i-- {
		if s.tx.savepoints[i].name == name {
			return i, nil
		}
	}
	return 0, errorf(codeInvalidSavepoint, "savepoint %q does not exist", name)
}

// planSavepoint plans SAVEPOINT, RELEASE [SAVEPOINT] and ROLLBACK TO
// [SAVEPOINT].
func (s *session) planSavepoint(t *pg.TransactionStmt) (*stmt, error) {
	name := t.SavepointName
	notInBlock := func(what string) error {
		return errorf(pgwire.CodeNoActiveSQLTransaction, "%s can only be used in transaction blocks", what)
	}
	switch t.Kind {
	case pg.TransactionStmtKind_TRANS_STMT_SAVEPOINT:
		return &stmt{run: func(ctx context.Context, _ []any) (pgwire.Result, error) {
			if err := s.checkTx(); err != nil {
				return pgwire.Result{}, err
			}
			if s.tx.status != pgwire.TxInBlock {
				return pgwire.Result{}, notInBlock("SAVEPOINT")
			}
			s.tx.savepoints = append(s.tx.savepoints, s.takeSavepoint(name))
			return pgwire.Result{Tag: "SAVEPOINT"}, nil
		}}, nil
	case pg.TransactionStmtKind_TRANS_STMT_RELEASE:
		return &stmt{run: func(ctx context.Context, _ []any) (pgwire.Result, error) {
			if err := s.checkTx(); err != nil {
				return pgwire.Result{}, err
			}
			if s.tx.status != pgwire.TxInBlock {
				return pgwire.Result{}, notInBlock("RELEASE SAVEPOINT")
			}
			i, err := s.findSavepoint(name)
			if err != nil {
				return pgwire.Result{}, err
			}
			s.tx.savepoints = s.tx.savepoints[:i]
			return pgwire.Result{Tag: "RELEASE"}, nil
		}}, nil
	case pg.TransactionStmtKind_TRANS_STMT_ROLLBACK_TO:
		return &stmt{allowInFailedTx: true, run: func(ctx context.Context, _ []any) (pgwire.Result, error) {
			if s.tx.status == pgwire.TxIdle {
				return pgwire.Result{}, notInBlock("ROLLBACK TO SAVEPOINT")
			}
			i, err := s.findSavepoint(name)
			if err != nil {
				return pgwire.Result{}, err
			}
			s.rollbackTo(ctx, s.tx.savepoints[i])
			s.tx.savepoints = s.tx.savepoints[:i+1]
			s.tx.status = pgwire.TxInBlock
			return pgwire.Result{Tag: "ROLLBACK"}, nil
		}}, nil
	}
	return nil, unsupported("two-phase commit is not supported by mink")
}
