package sqlfront

import (
	"context"
	"errors"

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
// (ddl_tx.go): the block's earlier writes to the table are discarded, and
// the block cannot read or write the table again before COMMIT (0A000);
// ROLLBACK, or ROLLBACK TO a savepoint before it, keeps the rows.

func (s *session) planTruncate(ts *pg.TruncateStmt) (*stmt, error) {
	var names []string
	for _, r := range ts.Relations {
		name, err := relName(r.GetRangeVar())
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
			if inBlock && s.truncatedInTx(name) {
				continue // truncated twice: once is enough
			}
			tables = append(tables, t)
		}
		if inBlock {
			for _, t := range tables {
				s.tx.dropped = append(s.tx.dropped, droppedTable{id: t.id, name: t.name, truncate: true, restart: ts.RestartSeqs})
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
	for _, d := range s.tx.dropped {
		if d.truncate && d.id == id {
			return true
		}
	}
	return false
}

// errTruncatedInTx is the error for a statement that reads or writes a
// table its block truncated.
func errTruncatedInTx(name string) error {
	return &pgwire.Error{Code: pgwire.CodeFeatureNotSupported,
		Message: "table \"" + name + "\" was truncated in this transaction block and cannot be read or written again before COMMIT",
		Hint:    "COMMIT the block first: mink applies TRUNCATE at COMMIT."}
}
