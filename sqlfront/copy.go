package sqlfront

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	pg "github.com/minkdb/mink/sqlfront/pgtree"
	"github.com/minkdb/mink/sqlfront/translate"

	"github.com/minkdb/mink/access"
	"github.com/minkdb/mink/internal/sqltypes"
	"github.com/minkdb/mink/sqlfront/pgwire"
)

// copyStageRows is how many COPY rows are turned into one Arrow batch.
const copyStageRows = 64 << 10

func (s *session) planCopy(ctx context.Context, cs *pg.CopyStmt) (*stmt, error) {
	if cs.Filename != "" || cs.IsProgram {
		return nil, &pgwire.Error{Code: pgwire.CodeInsufficientPrivilege, Message: "COPY to or from a server file or program is not allowed",
			Hint: "Use COPY … FROM STDIN / TO STDOUT, or psql's \\copy."}
	}
	opts, err := copyOptions(cs)
	if err != nil {
		return nil, err
	}
	if cs.Query != nil {
		if cs.IsFrom {
			return nil, errorf(pgwire.CodeSyntaxError, "COPY FROM needs a table")
		}
		text, err := translate.Deparse(cs.Query)
		if err != nil {
			return nil, err
		}
		return s.planCopyOut(ctx, text, opts)
	}
	table, err := s.lookupTable(cs.Relation)
	if err != nil {
		return nil, err
	}
	targets := make([]int, 0, len(table.cols))
	if len(cs.Attlist) == 0 {
		for i := range table.cols {
			targets = append(targets, i)
		}
	} else {
		for _, a := range cs.Attlist {
			name := a.GetString_().Sval
			i, ok := table.colIdx[name]
			if !ok {
				return nil, errorf(pgwire.CodeUndefinedColumn, "column %q of relation %q does not exist", name, table.name)
			}
			targets = append(targets, i)
		}
	}
	if !cs.IsFrom {
		names := make([]string, len(targets))
		for j, i := range targets {
			names[j] = quoteIdent(table.cols[i].Name)
		}
		return s.planCopyOut(ctx, "SELECT "+strings.Join(names, ", ")+" FROM "+quoteIdent(table.name), opts)
	}
	if cs.WhereClause != nil {
		return nil, unsupported("COPY FROM … WHERE is not supported")
	}
	cols := make([]pgwire.Column, len(targets))
	for j, i := range targets {
		c := table.cols[i]
		cols[j] = pgwire.Column{Name: c.Name, TypeOID: c.Type.OID(), TypeSize: c.Type.Len(), TypeMod: c.Type.TypMod()}
	}
	return &stmt{run: func(ctx context.Context, _ []any) (pgwire.Result, error) {
		if err := s.checkTx(); err != nil {
			return pgwire.Result{}, err
		}
		// Columns not in the list get their DEFAULT: one evaluation for
		// the statement (constants, the current time), or a generator
		// called for each row (gen_random_uuid()).
		fill := make([]any, len(table.cols))
		for i, c := range table.spec.Columns {
			if c.Default != "" && !containsInt(targets, i) {
				if gen := rowDefault(c.Default); gen != nil {
					fill[i] = gen
					continue
				}
				v, err := s.constantValue(ctx, table.name, c.Default, table.cols[i].Type)
				if err != nil {
					return pgwire.Result{}, wrapf(toWire(err), "default of column %q", c.Name)
				}
				fill[i] = v
			}
		}
		sink := &copySink{s: s, table: table, targets: targets, fill: fill}
		return pgwire.Result{CopyIn: &pgwire.CopyIn{Table: table.name, Columns: cols, Options: opts, Sink: sink}}, nil
	}}, nil
}

// copyOptions are the options of a COPY statement.
func copyOptions(cs *pg.CopyStmt) (pgwire.CopyOptions, error) {
	var opts pgwire.CopyOptions
	for _, o := range cs.Options {
		de := o.GetDefElem()
		v := ""
		if de.Arg != nil {
			var err error
			if de.Arg.GetList() != nil || de.Arg.GetAStar() != nil {
				return opts, unsupported("COPY option %s with a column list is not supported", de.Defname)
			}
			if v, err = defElemValue(de); err != nil {
				return opts, err
			}
		}
		if err := opts.Set(de.Defname, v); err != nil {
			return opts, err
		}
	}
	return opts, nil
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func (s *session) planCopyOut(ctx context.Context, query string, opts pgwire.CopyOptions) (*stmt, error) {
	q, err := s.planQuery(ctx, query, nil, nil)
	if err != nil {
		return nil, err
	}
	return &stmt{run: func(ctx context.Context, args []any) (pgwire.Result, error) {
		res, err := q.run(ctx, nil)
		if err != nil {
			return res, err
		}
		return pgwire.Result{CopyOut: &pgwire.CopyOut{Options: opts, Rows: res.Rows}}, nil
	}}, nil
}

// copySink stages COPY rows as Arrow batches and writes them at Commit, so a
// COPY with one bad row stores none of its rows.
type copySink struct {
	s       *session
	table   *tableInfo
	targets []int
	// fill holds, by table column, the value of columns not in the
	// COPY's column list (their DEFAULT, or nil).
	fill   []any
	rows   [][]any
	lines  []int64
	staged []arrow.RecordBatch
}

func (c *copySink) WriteRows(ctx context.Context, batch *pgwire.CopyBatch) error {
	c.rows = append(c.rows, batch.Rows...)
	c.lines = append(c.lines, batch.Lines...)
	if len(c.rows) >= copyStageRows {
		return c.stage(ctx)
	}
	return nil
}

func (c *copySink) stage(ctx context.Context) error {
	if len(c.rows) == 0 {
		return nil
	}
	fill, copied := c.fill, false
	for i, col := range c.table.spec.Columns {
		if col.Sequence == "" || containsInt(c.targets, i) {
			continue
		}
		// A serial or identity column left out takes its sequence's next
		// values, one per row.
		vals, err := c.s.takeValues(ctx, c.table, col.Name, len(c.rows))
		if err != nil {
			return toWire(err)
		}
		if !copied {
			fill, copied = append([]any(nil), c.fill...), true
		}
		k := 0
		fill[i] = func() any { k++; return vals[k-1] }
	}
	rec, err := rowsToRecord(c.table, c.targets, fill, c.rows)
	if err != nil {
		var re *rowError
		if errors.As(err, &re) {
			re.err.Where = fmt.Sprintf("COPY %s, line %d, column %s", c.table.name, c.lines[re.row], re.col)
			return re.err
		}
		var ne *sqltypes.NotNullError
		if errors.As(err, &ne) {
			we := notNullWire(ne, c.s.sessionLocation())
			we.Where = fmt.Sprintf("COPY %s, line %d", c.table.name, c.lines[ne.Index])
			return we
		}
		return toWire(err)
	}
	c.staged = append(c.staged, rec)
	c.rows, c.lines = c.rows[:0], c.lines[:0]
	return nil
}

func (c *copySink) Commit(ctx context.Context, rows int64) error {
	defer c.release()
	// pgwire calls the sink with its connection's context, not the one
	// stmt.Execute gave the statement: writes to buckets on other nodes act
	// for the session's role only if it is put back here.
	ctx = access.NewContext(ctx, c.s.identity)
	if err := c.stage(ctx); err != nil {
		return err
	}
	if c.table.isPK() {
		// A duplicate key fails the COPY (23505), as in PostgreSQL.
		plan := &conflictPlan{action: pg.OnConflictAction_ONCONFLICT_NONE}
		applied, _, err := c.s.writePK(ctx, c.table, c.staged, plan, nil)
		if err != nil {
			return toWire(err)
		}
		applied.Release()
		return nil
	}
	if err := c.s.write(ctx, c.table, c.staged); err != nil {
		return toWire(err)
	}
	return nil
}

func (c *copySink) Abort(ctx context.Context, cause error) { c.release() }

func (c *copySink) release() {
	releaseAll(c.staged)
	c.staged, c.rows, c.lines = nil, nil, nil
}
