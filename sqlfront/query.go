package sqlfront

import (
	"context"
	"io"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/minkdb/mink/sqlfront/engine"
	"github.com/minkdb/mink/sqlfront/pgwire"
)

// planQuery plans a statement the engine runs as written: SELECT, VALUES,
// EXPLAIN. Tables are engine views over their buckets (tableRegistry).
func (s *session) planQuery(ctx context.Context, sql string, node *pg.Node, paramOIDs []uint32) (*stmt, error) {
	if node != nil {
		sql = stripPublic(sql, node)
	}
	if err := s.tables.sync(ctx); err != nil {
		return nil, err
	}
	desc, err := s.conn.Describe(ctx, sql)
	if err != nil {
		return nil, err
	}
	st := &stmt{params: resolveParams(paramOIDs, desc.Params), columns: wireColumns(desc.Columns)}
	var prune *prunePlan
	if node != nil {
		prune = s.planPruning(node)
	}
	st.run = func(ctx context.Context, args []any) (pgwire.Result, error) {
		if err := s.checkTx(); err != nil {
			return pgwire.Result{}, err
		}
		if err := s.tables.sync(ctx); err != nil {
			return pgwire.Result{}, err
		}
		// Scans open while the statement runs; the filter stays until the
		// next statement replaces it.
		filter, err := s.pruneFilter(ctx, prune, args)
		if err != nil {
			return pgwire.Result{}, err
		}
		s.tables.partitions = filter
		rows, err := s.conn.Query(ctx, sql, args...)
		if err != nil {
			return pgwire.Result{}, err
		}
		return pgwire.Result{Rows: &engineRows{rows: rows, columns: st.columns}}, nil
	}
	return st, nil
}

// wireColumns describes engine result columns to Postgres clients.
func wireColumns(cols []engine.Column) []pgwire.Column {
	out := make([]pgwire.Column, len(cols))
	for i, c := range cols {
		out[i] = pgwire.Column{Name: c.Name, TypeOID: c.Type.OID(), TypeSize: c.Type.Len(), TypeMod: c.Type.TypMod()}
	}
	return out
}

// engineRows adapts engine rows to pgwire.Rows.
type engineRows struct {
	rows    *engine.Rows
	columns []pgwire.Column
	release func()
}

func (r *engineRows) Columns() []pgwire.Column { return r.columns }

func (r *engineRows) Next(ctx context.Context) ([]any, error) {
	if r.rows.Next() {
		return r.rows.Values(), nil
	}
	if err := r.rows.Err(); err != nil {
		return nil, toWire(err)
	}
	return nil, io.EOF
}

func (r *engineRows) Close() error {
	err := r.rows.Close()
	if r.release != nil {
		r.release()
		r.release = nil
	}
	return err
}
