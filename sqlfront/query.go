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

// Cursors. DECLARE runs its query as a portal would and keeps the rows'
// stream open in the session; FETCH and MOVE read the next rows of it,
// and CLOSE closes it. psycopg2's named cursors and so Django's
// QuerySet.iterator() use them. Cursors only go forward (as PostgreSQL's
// NO SCROLL cursors); one without WITH HOLD lasts until its transaction
// block ends, one with it until CLOSE or the session's end (a ROLLBACK
// also closes those the block declared).

// cursor is one open cursor of a session.
type cursor struct {
	rows    pgwire.Rows
	columns []pgwire.Column
	hold    bool
	inBlock bool // declared inside the transaction block now open
	done    bool // rows returned io.EOF
}

// The DECLARE options of PostgreSQL's parsenodes.h.
const (
	cursorBinary = 0x0001
	cursorScroll = 0x0002
	cursorHold   = 0x0020
)

// codeDuplicateCursor and codeInvalidCursorName are PostgreSQL's
// duplicate_cursor and invalid_cursor_name.
const (
	codeDuplicateCursor   = "42P03"
	codeInvalidCursorName = "34000"
)

func (s *session) planDeclareCursor(ctx context.Context, dc *pg.DeclareCursorStmt) (*stmt, error) {
	switch {
	case dc.Options&cursorBinary != 0:
		return nil, unsupported("binary cursors are not supported")
	case dc.Options&cursorScroll != 0:
		return nil, unsupported("SCROLL cursors are not supported: cursors only go forward")
	case dc.Query.GetSelectStmt() == nil:
		return nil, unsupported("a cursor's query must be a SELECT")
	}
	// The query is planned from its own text, so that its positions are
	// its own (translation edits the text at them).
	text, err := pg.Deparse(dc.Query)
	if err != nil {
		return nil, toWire(err)
	}
	hold := dc.Options&cursorHold != 0
	return &stmt{run: func(ctx context.Context, params []any) (pgwire.Result, error) {
		if err := s.checkTx(); err != nil {
			return pgwire.Result{}, err
		}
		if !hold && s.tx.status == pgwire.TxIdle {
			return pgwire.Result{}, errorf(pgwire.CodeNoActiveSQLTransaction, "DECLARE CURSOR can only be used in transaction blocks")
		}
		if _, ok := s.cursors[dc.Portalname]; ok {
			return pgwire.Result{}, errorf(codeDuplicateCursor, "cursor %q already exists", dc.Portalname)
		}
		ps, err := s.Prepare(ctx, text, nil)
		if err != nil {
			return pgwire.Result{}, err
		}
		// The rows outlive DECLARE: the engine's query must not end with
		// the statement's context.
		st := ps.(*stmt)
		res, err := st.run(context.WithoutCancel(ctx), nil)
		if err != nil {
			return pgwire.Result{}, err
		}
		if res.Rows == nil {
			return pgwire.Result{}, unsupported("a cursor's query must return rows")
		}
		if s.cursors == nil {
			s.cursors = map[string]*cursor{}
		}
		s.cursors[dc.Portalname] = &cursor{rows: res.Rows, columns: res.Rows.Columns(), hold: hold, inBlock: s.tx.status != pgwire.TxIdle}
		return pgwire.Result{Tag: "DECLARE CURSOR"}, nil
	}}, nil
}

func (s *session) planFetch(fs *pg.FetchStmt) (*stmt, error) {
	n := fs.HowMany
	switch fs.Direction {
	case pg.FetchDirection_FETCH_FORWARD:
	case pg.FetchDirection_FETCH_RELATIVE, pg.FetchDirection_FETCH_ABSOLUTE:
		if n != 1 || fs.Direction == pg.FetchDirection_FETCH_ABSOLUTE {
			return nil, unsupported("FETCH ABSOLUTE, RELATIVE and PRIOR are not supported: cursors only go forward")
		}
	default:
		return nil, errorf(pgwire.CodeObjectNotInPrerequisiteState, "cursor can only scan forward")
	}
	c, ok := s.cursors[fs.Portalname]
	if !ok {
		return nil, errorf(codeInvalidCursorName, "cursor %q does not exist", fs.Portalname)
	}
	st := &stmt{run: func(ctx context.Context, _ []any) (pgwire.Result, error) {
		if err := s.checkTx(); err != nil {
			return pgwire.Result{}, err
		}
		if s.cursors[fs.Portalname] != c {
			return pgwire.Result{}, errorf(codeInvalidCursorName, "cursor %q does not exist", fs.Portalname)
		}
		rows := &cursorRows{c: c, left: n}
		if !fs.Ismove {
			return pgwire.Result{Tag: "FETCH", Rows: rows}, nil
		}
		moved := 0
		for {
			if _, err := rows.Next(ctx); err == io.EOF {
				break
			} else if err != nil {
				return pgwire.Result{}, err
			}
			moved++
		}
		return pgwire.Result{Tag: fmt.Sprintf("MOVE %d", moved)}, nil
	}}
	if !fs.Ismove {
		st.columns = c.columns
	}
	return st, nil
}

func (s *session) planClose(cp *pg.ClosePortalStmt) (*stmt, error) {
	return &stmt{run: func(ctx context.Context, _ []any) (pgwire.Result, error) {
		if err := s.checkTx(); err != nil {
			return pgwire.Result{}, err
		}
		if cp.Portalname == "" { // CLOSE ALL
			s.closeCursors(func(*cursor) bool { return true })
			return pgwire.Result{Tag: "CLOSE CURSOR ALL"}, nil
		}
		c, ok := s.cursors[cp.Portalname]
		if !ok {
			return pgwire.Result{}, errorf(codeInvalidCursorName, "cursor %q does not exist", cp.Portalname)
		}
		s.closeCursors(func(o *cursor) bool { return o == c })
		return pgwire.Result{Tag: "CLOSE CURSOR"}, nil
	}}, nil
}

// closeCursors closes the session's cursors that which selects.
func (s *session) closeCursors(which func(*cursor) bool) {
	for name, c := range s.cursors {
		if which(c) {
			c.rows.Close()
			delete(s.cursors, name)
		}
	}
}

// endCursorsTx closes, as a transaction block ends, the cursors declared
// without WITH HOLD, and after a ROLLBACK those the block declared.
func (s *session) endCursorsTx(committed bool) {
	s.closeCursors(func(c *cursor) bool { return !c.hold || (!committed && c.inBlock) })
	for _, c := range s.cursors {
		c.inBlock = false
	}
}

// cursorRows are the next left rows of a cursor, for one FETCH.
type cursorRows struct {
	c    *cursor
	left int64
}

func (r *cursorRows) Columns() []pgwire.Column { return r.c.columns }

func (r *cursorRows) Next(ctx context.Context) ([]any, error) {
	if r.left <= 0 || r.c.done {
		return nil, io.EOF
	}
	row, err := r.c.rows.Next(ctx)
	if err == io.EOF {
		r.c.done = true
	}
	if err != nil {
		return nil, err
	}
	r.left--
	return row, nil
}

// Close leaves the cursor open: the next FETCH goes on from here.
func (r *cursorRows) Close() error { return nil }
