package sqlfront

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/minkdb/mink/sqlfront/pgcatalog"
	pg "github.com/minkdb/mink/sqlfront/pgtree"
	"github.com/minkdb/mink/sqlfront/translate"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/sqltypes"
	"github.com/minkdb/mink/sqlfront/engine"
	"github.com/minkdb/mink/sqlfront/pgwire"
	"github.com/minkdb/mink/tiering"
)

// planQuery plans a statement the engine runs as written: SELECT, VALUES,
// EXPLAIN. Tables are engine views over their buckets (tableRegistry).
func (s *session) planQuery(ctx context.Context, sql string, node *pg.Node, paramOIDs []uint32) (*stmt, error) {
	if err := s.tables.sync(ctx); err != nil {
		return nil, err
	}
	var desc *engine.Description
	var err error
	var mirror *mirrorPlan
	var mirrorTree *pg.Node
	var quotients map[int]bool
	if node != nil {
		sql, mirrorTree, quotients, desc, err = s.describeRewritten(ctx, sql, node)
		if err == nil && mirrorTree != nil {
			mirror = s.planMirror(ctx, mirrorTree)
		}
	} else {
		desc, err = s.conn.Describe(ctx, sql)
	}
	if err != nil {
		return nil, err
	}
	st := &stmt{params: resolveParams(paramOIDs, desc.Params), columns: wireColumns(desc.Columns)}
	if node != nil {
		translate.ResultTypes(s.env(), node, st.columns)
	}
	for i := range quotients {
		if i < len(st.columns) {
			st.columns[i] = pgwire.NewColumn(st.columns[i].Name, numericOID)
		}
	}
	if len(quotients) == 0 {
		st.arrow = desc.Arrow
	}
	var prune *prunePlan
	var lakePlan *lakeFilterPlan
	if node != nil {
		prune = s.planPruning(node)
		if mirrorTree != nil {
			lakePlan = s.planLakeFilter(mirrorTree, paramOIDs)
		} else {
			lakePlan = s.planLakeFilter(node, paramOIDs)
		}
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
		s.tables.lakeFilters = nil
		text := sql
		if mirror != nil && !mirror.live(s) {
			// A table was dropped since; the name may be a new table's.
			mirror = s.planMirror(ctx, mirrorTree)
		}
		if mirror != nil && mirror.usable(s) {
			if err := mirror.refresh(ctx, s); err == nil {
				text = mirror.sql
			} else if ctx.Err() != nil {
				return pgwire.Result{}, ctx.Err()
			}
		}
		if lakePlan != nil && text == sql && s.f.hasLake(lakePlan.table.id) {
			// The statement scans the table's buckets and lake (lakefilter.go).
			s.tables.lakeFilters = map[catalog.TableID][]tiering.Predicate{lakePlan.table.id: s.lakeFilter(ctx, lakePlan, args)}
		}
		rows, err := s.conn.Query(ctx, text, args...)
		if err != nil {
			return pgwire.Result{}, err
		}
		return pgwire.Result{Rows: &engineRows{rows: rows, columns: st.columns, quotients: quotients}}, nil
	}
	return st, nil
}

// describeRewritten returns the SQL the engine runs for a statement (see
// engineRewriter) and its description. Should the engine not parse the
// deparsed statement, it runs the statement as written instead: DuckDB's
// semantics then, rather than an error PostgreSQL would not give.
//
// tree is the rewritten statement, from which planMirror starts; nil when
// the statement runs as written.
func (s *session) describeRewritten(ctx context.Context, sql string, node *pg.Node) (string, *pg.Node, map[int]bool, *engine.Description, error) {
	asWritten := translate.StripPublic(sql, node)
	rewritten, tree, quotients := translate.Query(s.env(), sql, asWritten, node)
	desc, err := s.conn.Describe(ctx, rewritten)
	if err != nil && rewritten != asWritten {
		// Either the statement is wrong, and the error (its position) is
		// best told about the text the client sent, or DuckDB did not
		// take the deparsed text.
		desc, err = s.conn.Describe(ctx, asWritten)
		rewritten, tree, quotients = asWritten, nil, nil
	}
	return rewritten, tree, quotients, desc, err
}

// wireColumns describes engine result columns to Postgres clients.
func wireColumns(cols []engine.Column) []pgwire.Column {
	out := make([]pgwire.Column, len(cols))
	for i, c := range cols {
		out[i] = pgwire.Column{Name: c.Name, TypeOID: c.Type.OID(), TypeSize: c.Type.Len(), TypeMod: c.Type.TypMod()}
	}
	return out
}

// bpcharOID is character(n)'s type OID. char(n) values are stored without
// their trailing blanks (so comparisons and length ignore them, as in
// PostgreSQL) and padded to n when a char(n) column is returned.
const bpcharOID = 1042

// bpcharArrayOID is character(n)[]'s type OID; its elements are padded too.
const bpcharArrayOID = 1014

// jsonbOID is jsonb's type OID. The engine computes jsonb values (j -> 'k')
// as JSON text in its own layout; they are printed as PostgreSQL prints
// jsonb.
const jsonbOID = 3802

// numericOID is numeric's type OID.
const numericOID = 1700

// timeOID is time's type OID.
const timeOID = 1083

// timeText prints a time of day as PostgreSQL does: seconds with their
// fraction only as far as it is not zero (12:34:56.789, 00:00:00).
func timeText(us int64) string {
	sec, frac := us/1_000_000, us%1_000_000
	out := fmt.Sprintf("%02d:%02d:%02d", sec/3600, sec/60%60, sec%60)
	if frac != 0 {
		out += strings.TrimRight(fmt.Sprintf(".%06d", frac), "0")
	}
	return out
}

// engineRows adapts engine rows to pgwire.Rows.
type engineRows struct {
	rows    *engine.Rows
	columns []pgwire.Column
	// quotients are the columns the engine computes as quotient text
	// (numeric.go).
	quotients map[int]bool
	release   func()
}

func (r *engineRows) Columns() []pgwire.Column { return r.columns }

func (r *engineRows) Next(ctx context.Context) ([]any, error) {
	if r.rows.Next() {
		vals := r.rows.Values()
		for i, c := range r.columns {
			if t, ok := vals[i].(pgtype.Time); ok && c.TypeOID == timeOID && t.Valid {
				vals[i] = pgwire.Text(timeText(t.Microseconds))
				continue
			}
			if elems, ok := vals[i].([]any); ok && c.TypeOID == bpcharArrayOID && c.TypeMod > 4 {
				// char(n)[] elements are printed blank-padded, as scalars.
				for j, e := range elems {
					if s, ok := e.(string); ok {
						elems[j] = sqltypes.PadChar(s, int(c.TypeMod-4))
					}
				}
				continue
			}
			s, ok := vals[i].(string)
			if !ok {
				continue
			}
			switch {
			case r.quotients[i]:
				n, ok := translate.QuotientText(s)
				if !ok {
					return nil, errorf(pgwire.CodeInternalError, "quotient column %d: unexpected engine value %q", i+1, s)
				}
				vals[i] = n
			case c.TypeOID == bpcharOID && c.TypeMod > 4:
				vals[i] = sqltypes.PadChar(s, int(c.TypeMod-4))
			case c.TypeOID == jsonbOID:
				vals[i] = sqltypes.JSONBText(s)
			}
		}
		return vals, nil
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

// sessionEnv is the session as a translation reads it.
type sessionEnv struct{ s *session }

func (s *session) env() translate.Env { return sessionEnv{s} }

func (e sessionEnv) Table(rv *pg.RangeVar) ([]sqltypes.Column, uint32, bool) {
	if t, ok := e.s.tempRel(rv); ok {
		return t.Columns, 0, true
	}
	ti, err := e.s.lookupTable(rv)
	if err != nil {
		return nil, 0, false
	}
	return ti.cols, pgcatalog.TableOID(ti.id), true
}

func (e sessionEnv) PrimaryKey(rv *pg.RangeVar) []string {
	ti, err := e.s.lookupTable(rv)
	if err != nil {
		return nil
	}
	return ti.spec.PrimaryKey
}

func (e sessionEnv) User() string { return e.s.identity.Name }

func (e sessionEnv) DateStyle() string { return e.s.settings.values["datestyle"] }
