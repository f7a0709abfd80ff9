package sqlfront

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/kv"
	"github.com/minkdb/mink/sqlfront/pgwire"
)

// pkPending is an INSERT into a primary-key table buffered in a
// transaction block: its evaluated rows and how to treat existing keys.
// Buffered writes are applied at COMMIT, in statement order, each bucket
// write atomic on its own (docs/sql.md, "Transactions").
type pkPending struct {
	plan *conflictPlan
	args []any
	// writes, for an UPDATE or DELETE, are its conditional writes, computed
	// when it ran: COMMIT applies them only if the rows are unchanged.
	writes []bucketWrites
}

// bucketWrites are writes to one bucket.
type bucketWrites struct {
	id     catalog.BucketID
	writes []kv.Write
}

// writePK inserts rows into a primary-key table now, or buffers them
// until COMMIT inside a transaction block. It returns the rows written
// (for RETURNING; release it) and their count. Inside a block these are
// the rows proposed: what existing keys do to them is known at COMMIT.
func (s *session) writePK(ctx context.Context, table *tableInfo, batches []arrow.RecordBatch, plan *conflictPlan, args []any) (arrow.RecordBatch, int64, error) {
	if s.tx.status != pgwire.TxInBlock {
		return s.insertPK(ctx, table, batches, plan, args)
	}
	w := &pendingWrite{table: table, pk: &pkPending{plan: plan, args: args}}
	var n int64
	for _, b := range batches {
		if b.NumRows() > 0 {
			b.Retain()
			w.records = append(w.records, b)
			n += b.NumRows()
		}
	}
	s.tx.pending = append(s.tx.pending, w)
	all, err := concatBatches(table.schema, w.records)
	return all, n, err
}

// applyPK applies a buffered primary-key write at COMMIT.
func (s *session) applyPK(ctx context.Context, w *pendingWrite) error {
	if w.pk.writes != nil {
		for _, bw := range w.pk.writes {
			b, err := s.f.kvBucket(ctx, bw.id)
			if err != nil {
				return err
			}
			_, _, err = b.Write(ctx, bw.writes)
			var ce *kv.ConflictError
			if errors.As(err, &ce) {
				return &pgwire.Error{Code: pgwire.CodeSerializationFailure, Message: "could not serialize access due to concurrent update",
					Detail: fmt.Sprintf("A row of %q that an UPDATE or DELETE of this transaction read was changed by another session before COMMIT.", w.table.name),
					Hint:   "Retry the transaction."}
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	applied, _, err := s.insertPK(ctx, w.table, w.records, w.pk.plan, w.pk.args)
	if err != nil {
		return err
	}
	applied.Release()
	return nil
}
