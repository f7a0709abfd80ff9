package sqlfront

import (
	"context"
	"errors"
	"fmt"
	"slices"

	pg "github.com/minkdb/mink/sqlfront/pgtree"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/sqlfront/pgwire"
)

// TRUNCATE empties tables (catalog.TruncateTable): a table's buckets are
// replaced by new, empty ones, so the statement costs the same for any
// number of rows, and writes that reach the table after it are kept.
// RESTART IDENTITY starts the table's sequences again at 1.
//
// In a transaction block it takes effect at COMMIT, like DROP TABLE
// (ddl_tx.go): the block's earlier writes to the table are discarded; a
// log table reads, in the block, as holding only the block's writes after
// the TRUNCATE, which COMMIT applies after it (so TRUNCATE then INSERT,
// as dbt reloads a seed, works); a primary-key table cannot be read or
// written again before COMMIT (0A000). ROLLBACK, or ROLLBACK TO a
// savepoint before it, keeps the rows.

func (s *session) planTruncate(ts *pg.TruncateStmt) (*stmt, error) {
	var names []string
	for _, r := range ts.Relations {
		name, err := s.relName(r.GetRangeVar())
		if err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	return s.tagWithNotices("TRUNCATE TABLE", func(ctx context.Context) ([]*pgwire.Error, error) {
		inBlock := s.tx.status == pgwire.TxInBlock
		var tables []*tableInfo
		for _, name := range names {
			t, err := s.f.lookupTableByName(name)
			if err == nil && inBlock && s.droppedInTx(name) {
				err = errDroppedInTx(name)
			}
			if err != nil {
				return nil, err
			}
			tables = append(tables, t)
		}
		if inBlock {
			for _, t := range tables {
				s.tx.dropped = append(s.tx.dropped, droppedTable{id: t.id, name: t.name, truncate: true, restart: ts.RestartSeqs,
					pendingAt: len(s.tx.pending)})
			}
			return nil, nil
		}
		for _, t := range tables {
			if err := s.truncateNow(ctx, t.id, t.name, ts.RestartSeqs); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}), nil
}

// truncateNow empties a table at once and waits for its new buckets'
// leaders, so that a write right after it does not wait.
func (s *session) truncateNow(ctx context.Context, id catalog.TableID, name string, restart bool) error {
	out, err := s.f.cfg.Meta.Propose(ctx, catalog.TruncateTable{Table: id, RestartSequences: restart})
	if errors.Is(err, catalog.ErrNotFound) {
		return undefinedTable(name)
	}
	if err != nil {
		return err
	}
	return s.f.waitLeaders(ctx, out.Buckets)
}

// truncatedInTx reports whether the open block truncated the table called
// name.
func (s *session) truncatedInTx(name string) bool {
	for _, d := range s.tx.dropped {
		if d.truncate && d.name == name {
			return true
		}
	}
	return false
}

// truncatedIDInTx is truncatedInTx by table id.
func (s *session) truncatedIDInTx(id catalog.TableID) bool {
	_, truncated := truncatedAt(s.tx.dropped, id)
	return truncated
}

// restartedInTx reports whether the open block truncated table id with
// RESTART IDENTITY.
func (s *session) restartedInTx(id catalog.TableID) bool {
	return slices.ContainsFunc(s.tx.dropped, func(d droppedTable) bool { return d.truncate && d.restart && d.id == id })
}

// errTruncatedInTx is the error for a statement that reads or writes a
// primary-key table its block truncated, or writes a table it truncated
// with RESTART IDENTITY (its sequences restart only at COMMIT).
func errTruncatedInTx(t *tableInfo) error {
	msg := fmt.Sprintf("primary-key table %q was truncated in this transaction block and cannot be read or written again before COMMIT", t.name)
	if !t.isPK() {
		msg = fmt.Sprintf("table %q was truncated with RESTART IDENTITY in this transaction block and cannot be written again before COMMIT", t.name)
	}
	return &pgwire.Error{Code: pgwire.CodeFeatureNotSupported, Message: msg,
		Hint: "COMMIT the block first: mink applies TRUNCATE at COMMIT."}
}
