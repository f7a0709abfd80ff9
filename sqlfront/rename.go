package sqlfront

import (
	"context"
	"errors"
	"strings"

	"github.com/minkdb/mink/catalog"
	pg "github.com/minkdb/mink/sqlfront/pgtree"
	"github.com/minkdb/mink/sqlfront/pgwire"
)

// planRenameTable plans ALTER TABLE [IF EXISTS] t RENAME TO u: one
// catalog.RenameTable record, so every node reads the old name or the new
// one, never neither. The table keeps its data, buckets, sequences, grants
// and lake; its Kafka topic and Flight descriptor take the new name. In a
// transaction block the rename takes effect at once, for other sessions
// too, and ROLLBACK renames the table back (ddl_tx.go).
func (s *session) planRenameTable(ctx context.Context, rs *pg.RenameStmt) (*stmt, error) {
	name, err := relName(rs.Relation)
	if err != nil {
		return nil, err
	}
	to := rs.Newname
	if strings.HasSuffix(to, changelogSuffix) {
		return nil, errorf(codeReservedName, "table names ending in %q are reserved for changelogs", changelogSuffix)
	}
	return s.tagWithNotices("ALTER TABLE", func(ctx context.Context) ([]*pgwire.Error, error) {
		t, err := s.lookupTable(rs.Relation)
		if err != nil {
			var we *pgwire.Error
			if rs.MissingOk && errors.As(err, &we) && we.Code == pgwire.CodeUndefinedTable {
				return []*pgwire.Error{notice(pgwire.CodeSuccessfulCompletion, "relation %q does not exist, skipping", name)}, nil
			}
			return nil, err
		}
		if err := s.checkPrivileges(ctx, []tableNeed{{table: t.name, owner: true}}); err != nil {
			return nil, err
		}
		if to == t.name {
			return nil, errorf(pgwire.CodeDuplicateTable, "relation %q already exists", to)
		}
		inBlock := s.tx.status == pgwire.TxInBlock
		if inBlock {
			if err := s.applyPendingDrop(ctx, to); err != nil {
				return nil, err
			}
		}
		if _, err := s.f.cfg.Meta.Propose(ctx, catalog.RenameTable{Table: t.id, Name: to}); err != nil {
			if errors.Is(err, catalog.ErrExists) {
				return nil, errorf(pgwire.CodeDuplicateTable, "relation %q already exists", to)
			}
			return nil, err
		}
		if inBlock {
			s.tx.undo = append(s.tx.undo, undoDDL{table: t.id, renamedFrom: t.name})
		}
		return nil, nil
	}), nil
}
