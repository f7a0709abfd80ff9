package sqlfront

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	pg "github.com/minkdb/mink/sqlfront/pgtree"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/sqltypes"
	"github.com/minkdb/mink/kv/kvcodec"
	"github.com/minkdb/mink/sqlfront/pgwire"
	"github.com/minkdb/mink/sqlfront/translate"
)

// ALTER TABLE … ADD COLUMN. A table's columns only grow at the end
// (catalog.AddColumn), so stored rows are never rewritten: a row stored
// without the column reads as the column's missing value, which is its
// DEFAULT evaluated once by the ALTER (as PostgreSQL stores attmissingval
// for a non-volatile default), or NULL.

// addColumn is one ADD COLUMN of an ALTER TABLE, or one ALTER COLUMN of
// column col.Name: SET/DROP DEFAULT (setDefault), SET/DROP NOT NULL
// (notNull) or TYPE (newType).
type addColumn struct {
	col         catalog.Column
	def         string // the SQL default expression, "" for none
	ifNotExists bool
	setDefault  bool
	defExpr     *pg.Node // SET DEFAULT's expression; nil: DROP DEFAULT
	notNull     *bool    // SET NOT NULL (true) or DROP NOT NULL (false)
	newType     *pg.ColumnDef
	drop        bool // DROP COLUMN [IF EXISTS] (ifNotExists: IF EXISTS)
	cascade     bool // DROP COLUMN … CASCADE
}

// adds reports whether a is an ADD COLUMN.
func (a addColumn) adds() bool {
	return !a.setDefault && a.notNull == nil && a.newType == nil && !a.drop
}

func (s *session) planAlterTable(ctx context.Context, at *pg.AlterTableStmt) (*stmt, error) {
	if at.Objtype != pg.ObjectType_OBJECT_TABLE {
		return nil, unsupported("ALTER %s is not supported", strings.TrimPrefix(at.Objtype.String(), "OBJECT_"))
	}
	name, err := s.relName(at.Relation)
	if err != nil {
		return nil, err
	}
	var adds []addColumn
	var decls []declaredConstraint // UNIQUE and FOREIGN KEY, not enforced
	for _, c := range at.Cmds {
		cmd := c.GetAlterTableCmd()
		if cmd != nil && cmd.Subtype == pg.AlterTableType_AT_ColumnDefault {
			adds = append(adds, addColumn{col: catalog.Column{Name: cmd.Name}, setDefault: true, defExpr: cmd.Def})
			continue
		}
		if cmd != nil && (cmd.Subtype == pg.AlterTableType_AT_SetNotNull || cmd.Subtype == pg.AlterTableType_AT_DropNotNull) {
			set := cmd.Subtype == pg.AlterTableType_AT_SetNotNull
			adds = append(adds, addColumn{col: catalog.Column{Name: cmd.Name}, notNull: &set})
			continue
		}
		if cmd != nil && cmd.Subtype == pg.AlterTableType_AT_AlterColumnType {
			adds = append(adds, addColumn{col: catalog.Column{Name: cmd.Name}, newType: cmd.Def.GetColumnDef()})
			continue
		}
		if cmd != nil && cmd.Subtype == pg.AlterTableType_AT_DropColumn {
			adds = append(adds, addColumn{col: catalog.Column{Name: cmd.Name}, drop: true, ifNotExists: cmd.MissingOk,
				cascade: cmd.Behavior == pg.DropBehavior_DROP_CASCADE})
			continue
		}
		if cmd != nil && cmd.Subtype == pg.AlterTableType_AT_AddConstraint {
			con := cmd.Def.GetConstraint()
			d, ok := declaredOf(con, "")
			switch {
			case ok:
				decls = append(decls, d)
				continue
			case con.GetContype() == pg.ConstrType_CONSTR_PRIMARY:
				return nil, unsupported("ALTER TABLE … ADD PRIMARY KEY is not supported: a table's primary key is fixed when it is created")
			}
			return nil, unsupported("%s constraints are not supported", constraintName(con.GetContype()))
		}
		if cmd == nil || cmd.Subtype != pg.AlterTableType_AT_AddColumn {
			what := "this form of ALTER TABLE"
			if cmd != nil && alterForms[cmd.Subtype] != "" {
				what = "ALTER TABLE … " + alterForms[cmd.Subtype]
			}
			return nil, &pgwire.Error{Code: pgwire.CodeFeatureNotSupported, Message: what + " is not supported by mink",
				Hint: "ALTER TABLE supports ADD COLUMN, DROP COLUMN, RENAME [COLUMN], ALTER COLUMN … SET/DROP DEFAULT, SET/DROP NOT NULL and TYPE (between text and character varying(n)), and ADD CONSTRAINT … UNIQUE/FOREIGN KEY (not enforced)."}
		}
		cd := cmd.Def.GetColumnDef()
		if cd == nil {
			return nil, unsupported("ALTER TABLE … ADD without a column definition is not supported")
		}
		col, def, pk, colDecls, err := columnOf(cd, name)
		if err != nil {
			return nil, err
		}
		decls = append(decls, colDecls...)
		switch {
		case pk:
			return nil, unsupported("ALTER TABLE cannot add a primary-key column: a table's primary key is fixed when it is created")
		case col.Sequence != "":
			return nil, unsupported("ALTER TABLE cannot add a serial or identity column to existing rows")
		case def != "" && isRowDefault(mustParseExpr(def)):
			return nil, unsupported("ALTER TABLE cannot add a column whose DEFAULT gives each existing row its own value (%s)", def)
		}
		adds = append(adds, addColumn{col: col, def: def, ifNotExists: cmd.MissingOk})
	}
	return s.tagWithNotices("ALTER TABLE", func(ctx context.Context) ([]*pgwire.Error, error) {
		t, err := s.f.lookupTableByName(name)
		if err == nil && s.tx.status == pgwire.TxInBlock && s.droppedInTx(name) {
			err = errDroppedInTx(name)
		}
		if err != nil {
			if at.MissingOk {
				return []*pgwire.Error{notice("00000", "relation %q does not exist, skipping", name)}, nil
			}
			return nil, err
		}
		cols := make([]string, 0, len(t.cols)+len(adds))
		for _, c := range t.cols {
			cols = append(cols, c.Name)
		}
		for _, a := range adds {
			if a.adds() {
				cols = append(cols, a.col.Name)
			}
			if a.drop {
				cols = slices.DeleteFunc(cols, func(c string) bool { return c == a.col.Name })
			}
		}
		notices, err := s.checkDeclared(name, cols, t.spec.PrimaryKey, decls)
		if err != nil {
			return nil, err
		}
		for _, a := range adds {
			add := s.addColumn
			switch {
			case a.setDefault:
				add = s.setColumnDefault
			case a.notNull != nil:
				add = s.setColumnNotNull
			case a.newType != nil:
				add = s.setColumnType
			case a.drop:
				add = s.dropColumn
			}
			n, err := add(ctx, t, a)
			if err != nil {
				return nil, err
			}
			if n != nil {
				notices = append(notices, n)
			}
			if t, err = s.f.lookupTableByName(name); err != nil {
				return nil, err
			}
		}
		return notices, nil
	}), nil
}

// alterForms names the forms of ALTER TABLE users try most, for errors.
var alterForms = map[pg.AlterTableType]string{
	pg.AlterTableType_AT_DropColumn:        "DROP COLUMN",
	pg.AlterTableType_AT_AddConstraint:     "ADD CONSTRAINT",
	pg.AlterTableType_AT_DropConstraint:    "DROP CONSTRAINT",
	pg.AlterTableType_AT_SetRelOptions:     "SET (…)",
	pg.AlterTableType_AT_ChangeOwner:       "OWNER TO",
	pg.AlterTableType_AT_AddIdentity:       "ALTER COLUMN … ADD GENERATED",
	pg.AlterTableType_AT_SetLogged:         "SET LOGGED",
	pg.AlterTableType_AT_SetUnLogged:       "SET UNLOGGED",
	pg.AlterTableType_AT_EnableRowSecurity: "ENABLE ROW LEVEL SECURITY",
}

func mustParseExpr(def string) *pg.Node {
	n, err := pg.ParseExpr(def)
	if err != nil {
		return &pg.Node{}
	}
	return n
}

// addColumn adds one column to t; a notice if IF NOT EXISTS skipped it.
func (s *session) addColumn(ctx context.Context, t *tableInfo, a addColumn) (*pgwire.Error, error) {
	col := a.col
	if _, ok := t.colIdx[col.Name]; ok {
		if a.ifNotExists {
			return notice(pgwire.CodeDuplicateColumn, "column %q of relation %q already exists, skipping", col.Name, t.name), nil
		}
		return nil, errorf(pgwire.CodeDuplicateColumn, "column %q of relation %q already exists", col.Name, t.name)
	}
	if t.isPK() && col.Name == kvcodec.ChangeTypeColumn {
		return nil, errorf(codeReservedName, "column name %q is reserved in primary-key tables (it is the change type of the table's changelog)", col.Name)
	}
	typ, err := sqltypes.Parse(col.Type)
	if err != nil {
		return nil, err
	}
	if a.def != "" {
		missing, err := s.missingValue(ctx, a.def, typ)
		if err != nil {
			return nil, wrapf(toWire(err), "default of column %q", col.Name)
		}
		col.Missing = missing
	}
	if col.NotNull && col.Missing == nil {
		// Existing rows would hold NULL: refused unless there are none.
		empty, err := s.tableEmpty(ctx, t)
		if err != nil {
			return nil, err
		}
		if !empty {
			return nil, errorf(pgwire.CodeNotNullViolation, "column %q of relation %q contains null values", col.Name, t.name)
		}
	}
	_, err = s.f.cfg.Meta.Propose(ctx, catalog.AddColumn{Table: t.id, Column: col})
	switch {
	case errors.Is(err, catalog.ErrNotFound):
		return nil, undefinedTable(t.name)
	case errors.Is(err, catalog.ErrInvalid) && !a.ifNotExists:
		// Another session added a column of that name meanwhile.
		return nil, errorf(pgwire.CodeDuplicateColumn, "column %q of relation %q already exists", col.Name, t.name)
	case errors.Is(err, catalog.ErrInvalid):
		return notice(pgwire.CodeDuplicateColumn, "column %q of relation %q already exists, skipping", col.Name, t.name), nil
	case err == nil && s.tx.status == pgwire.TxInBlock:
		// ROLLBACK drops it again; the rows written meanwhile keep its
		// bytes in a dropped column's place.
		s.tx.undo = append(s.tx.undo, undoDDL{table: t.id, revert: catalog.DropColumn{Table: t.id, Column: col.Name}})
	}
	return nil, err
}

// setColumnDefault sets or drops the DEFAULT of column a.col.Name of t.
func (s *session) setColumnDefault(ctx context.Context, t *tableInfo, a addColumn) (*pgwire.Error, error) {
	i, ok := t.colIdx[a.col.Name]
	if !ok {
		return nil, errorf(pgwire.CodeUndefinedColumn, "column %q of relation %q does not exist", a.col.Name, t.name)
	}
	if t.spec.Columns[i].Sequence != "" {
		return nil, unsupported("the DEFAULT of column %q cannot be changed: it takes its values from a sequence (serial or identity)", a.col.Name)
	}
	def := ""
	if a.defExpr != nil {
		var err error
		if def, err = constantExpr(a.defExpr, t.cols[i].Type); err != nil {
			return nil, err
		}
		if err := s.conn.Exec(ctx, "SELECT CAST("+def+" AS "+t.cols[i].Type.DuckDBType()+")"); err != nil {
			return nil, wrapf(toWire(err), "default of column %q", a.col.Name)
		}
	}
	_, err := s.f.cfg.Meta.Propose(ctx, catalog.SetColumnDefault{Table: t.id, Column: a.col.Name, Default: def})
	if errors.Is(err, catalog.ErrNotFound) {
		return nil, undefinedTable(t.name)
	}
	return nil, err
}

// missingValue evaluates a column's DEFAULT once, as the value of the rows
// stored before the column existed; nil if it is NULL.
func (s *session) missingValue(ctx context.Context, def string, typ sqltypes.Type) (*string, error) {
	rec, err := s.evalConstants(ctx, "default", typ, []string{def}, nil)
	if err != nil {
		return nil, err
	}
	defer rec.Release()
	if rec.Column(0).IsNull(0) {
		return nil, nil
	}
	text := sqltypes.MissingText(rec.Column(0), 0)
	return &text, nil
}

// tableEmpty reports whether t has no rows (as this session sees it).
func (s *session) tableEmpty(ctx context.Context, t *tableInfo) (bool, error) {
	found, err := s.anyRow(ctx, t, "true")
	return !found, err
}

// ALTER TABLE … ALTER COLUMN … SET/DROP NOT NULL and … TYPE. Each is one
// metadata record (catalog.SetColumnNotNull, catalog.SetColumnType), and
// neither rewrites stored rows: SET NOT NULL and a narrower
// character varying(n) first check the stored rows (23502, 22001), and a
// type change is allowed only between types stored alike (text and
// character varying(n)). PostgreSQL locks the table for the check; mink
// checks again once the record is applied, and takes it back if a write
// that raced the check stored a row it refuses. A write that took its
// view before the record and is acknowledged after the second check is
// not caught (docs/sql.md says so). In a transaction block
// the change takes effect at once and ROLLBACK takes it back.

// setColumnNotNull sets or drops the NOT NULL of column a.col.Name of t.
func (s *session) setColumnNotNull(ctx context.Context, t *tableInfo, a addColumn) (*pgwire.Error, error) {
	i, ok := t.colIdx[a.col.Name]
	if !ok {
		return nil, errorf(pgwire.CodeUndefinedColumn, "column %q of relation %q does not exist", a.col.Name, t.name)
	}
	set := *a.notNull
	if !set && t.isPK() && slices.Contains(t.spec.PrimaryKey, a.col.Name) {
		return nil, errorf(codeInvalidTableDefinition, "column %q is in a primary key", a.col.Name)
	}
	if t.cols[i].NotNull == set {
		return nil, nil
	}
	check := func() error {
		if !set {
			return nil
		}
		found, err := s.anyRow(ctx, t, quoteIdent(a.col.Name)+" IS NULL")
		if err == nil && found {
			err = errorf(pgwire.CodeNotNullViolation, "column %q of relation %q contains null values", a.col.Name, t.name)
		}
		return err
	}
	return nil, s.alterColumn(ctx, t, check,
		catalog.SetColumnNotNull{Table: t.id, Column: a.col.Name, NotNull: set},
		catalog.SetColumnNotNull{Table: t.id, Column: a.col.Name, NotNull: !set})
}

// setColumnType changes the type of column a.col.Name of t.
func (s *session) setColumnType(ctx context.Context, t *tableInfo, a addColumn) (*pgwire.Error, error) {
	name := a.col.Name
	i, ok := t.colIdx[name]
	if !ok {
		return nil, errorf(pgwire.CodeUndefinedColumn, "column %q of relation %q does not exist", name, t.name)
	}
	cd := a.newType
	if cd == nil || cd.TypeName == nil {
		return nil, unsupported("ALTER COLUMN … TYPE without a type is not supported")
	}
	typ, err := translate.TypeOf(cd.TypeName)
	if err != nil {
		return nil, err
	}
	if cd.CollClause != nil {
		return nil, unsupported("COLLATE is not supported")
	}
	old := t.cols[i].Type
	if cd.RawDefault != nil && !usingColumn(cd.RawDefault, name) {
		return nil, unsupported("ALTER COLUMN … TYPE … USING an expression is not supported: mink does not rewrite stored rows (USING %s or %s::%s only)", name, name, typ.Name())
	}
	if typ.Name() == old.Name() {
		return nil, nil
	}
	if !storedAlike(old, typ) {
		return nil, &pgwire.Error{Code: pgwire.CodeFeatureNotSupported,
			Message: fmt.Sprintf("ALTER COLUMN … TYPE from %s to %s is not supported by mink", old.Name(), typ.Name()),
			Detail:  "mink does not rewrite stored rows, so a column's type changes only between types stored alike: text and character varying(n).",
			Hint:    "Create a table with the new type and fill it with INSERT … SELECT (or CREATE TABLE … AS SELECT with a cast)."}
	}
	if depends := s.viewsNaming(t, name); len(depends) > 0 {
		return nil, &pgwire.Error{Code: pgwire.CodeFeatureNotSupported,
			Message: "cannot alter type of a column used by a view or rule",
			Detail:  depends[0], Hint: "Drop the views, change the type, and create them again."}
	}
	check := func() error {
		if typ.Length() == 0 || (old.Length() != 0 && old.Length() <= typ.Length()) {
			return nil
		}
		found, err := s.anyRow(ctx, t, "length("+quoteIdent(name)+") > "+strconv.Itoa(typ.Length()))
		if err == nil && found {
			err = errorf(pgwire.CodeStringDataRightTruncation, "value too long for type %s", typ.Name())
		}
		return err
	}
	return nil, s.alterColumn(ctx, t, check,
		catalog.SetColumnType{Table: t.id, Column: name, Type: typ.Name()},
		catalog.SetColumnType{Table: t.id, Column: name, Type: t.spec.Columns[i].Type})
}

// dropColumn drops column a.col.Name of t (ALTER TABLE … DROP COLUMN):
// one DropColumn record. Stored rows keep their bytes; the column leaves
// every read and later rows hold NULL in its place (catalog
// TableSpec.StoredColumns). In a block ROLLBACK restores it
// (RestoreColumn).
func (s *session) dropColumn(ctx context.Context, t *tableInfo, a addColumn) (*pgwire.Error, error) {
	name := a.col.Name
	i, ok := t.colIdx[name]
	switch {
	case !ok && a.ifNotExists:
		return notice("00000", "column %q of relation %q does not exist, skipping", name, t.name), nil
	case !ok:
		return nil, errorf(pgwire.CodeUndefinedColumn, "column %q of relation %q does not exist", name, t.name)
	case slices.Contains(t.spec.PrimaryKey, name):
		return nil, &pgwire.Error{Code: pgwire.CodeFeatureNotSupported, Message: fmt.Sprintf("cannot drop column %q of relation %q: it is part of the primary key", name, t.name),
			Hint: "A table's primary key is fixed when it is created."}
	case t.spec.PartitionBy == name:
		return nil, errorf(codeInvalidTableDefinition, "cannot drop column %q because it is part of the partition key of relation %q", name, t.name)
	case slices.Contains(t.spec.BucketKey, name):
		return nil, &pgwire.Error{Code: pgwire.CodeFeatureNotSupported, Message: fmt.Sprintf("cannot drop column %q of relation %q: it is part of the bucket key", name, t.name),
			Hint: "A table's bucket key is fixed when it is created."}
	case len(t.cols) == 1:
		return nil, unsupported("cannot drop column %q: it is the only column of relation %q, and mink tables have at least one", name, t.name)
	}
	depends := s.viewsNaming(t, name)
	if len(depends) > 0 && !a.cascade {
		return nil, &pgwire.Error{Code: codeDependentObjects,
			Message: fmt.Sprintf("cannot drop column %s of table %s because other objects depend on it", name, t.name),
			Detail:  strings.Join(depends, "\n"),
			Hint:    "Use DROP ... CASCADE to drop the dependent objects too."}
	}
	var dropped *pgwire.Error
	if len(depends) > 0 {
		// CASCADE: the views that name the column, and the views that
		// read those, go first (at once, also in a block).
		var views []catalog.TableID
		var undo []undoDDL
		var cascades []string
		s.f.cfg.Meta.Read(func(v *catalog.View) {
			var naming []catalog.TableID
			for _, id := range v.ViewsReading(t.id) {
				if queryMentions(v.Views[id].Spec.Query, name) {
					naming = append(naming, id)
				}
			}
			views, _, _ = cascadeViews(v, "view", naming, true)
			for _, id := range views {
				cascades = append(cascades, "drop cascades to view "+v.Views[id].Spec.Name)
			}
			undo = s.dropUndo(v, views)
		})
		if len(views) > 0 { // none when another session dropped them meanwhile
			if _, err := s.f.cfg.Meta.Propose(ctx, catalog.DropView{Views: views}); err != nil {
				return nil, dropViewError(err)
			}
			s.tx.undo = append(s.tx.undo, undo...)
			dropped = notice(pgwire.CodeSuccessfulCompletion, "%s", cascades[0])
			if len(cascades) > 1 {
				dropped = notice(pgwire.CodeSuccessfulCompletion, "drop cascades to %d other objects", len(cascades))
				dropped.Detail = strings.Join(cascades, "\n")
			}
		}
	}
	// The column's stored position, which RestoreColumn names.
	pos := i
	for _, d := range t.spec.Dropped {
		if d.Position <= pos {
			pos++
		}
	}
	rec := catalog.DropColumn{Table: t.id, Column: name}
	return dropped, s.alterColumn(ctx, t, func() error { return nil }, rec, catalog.RestoreColumn{Table: t.id, Position: pos})
}

// alterColumn checks t's stored rows with check, proposes rec, checks
// again (a write that raced the first check on another node), and
// proposes undo if that check fails. In a block, ROLLBACK proposes undo.
func (s *session) alterColumn(ctx context.Context, t *tableInfo, check func() error, rec, undo catalog.Record) error {
	if err := check(); err != nil {
		return err
	}
	_, err := s.f.cfg.Meta.Propose(ctx, rec)
	switch {
	case errors.Is(err, catalog.ErrNotFound):
		if _, terr := s.f.lookupTableByName(t.name); terr != nil {
			return terr
		}
		return errorf(pgwire.CodeUndefinedColumn, "column of relation %q does not exist", t.name)
	case errors.Is(err, catalog.ErrInvalid):
		return errorf(codeInvalidTableDefinition, "%v", err)
	case err != nil:
		return err
	}
	if err := check(); err != nil {
		if _, uerr := s.f.cfg.Meta.Propose(ctx, undo); uerr != nil {
			s.f.cfg.Logger.Warn("alter column: could not take the change back", "table", t.name, "err", uerr)
		}
		return err
	}
	if s.tx.status == pgwire.TxInBlock {
		s.tx.undo = append(s.tx.undo, undoDDL{table: t.id, revert: undo})
	}
	return nil
}

// anyRow reports whether a row of t (as this session sees it, stored
// rows and the block's own) satisfies the SQL condition cond.
func (s *session) anyRow(ctx context.Context, t *tableInfo, cond string) (bool, error) {
	if err := s.tables.sync(ctx); err != nil {
		return false, err
	}
	rdr, err := s.conn.QueryArrow(ctx, "SELECT 1 FROM "+quoteIdent(t.name)+" WHERE "+cond+" LIMIT 1")
	if err != nil {
		return false, toWire(err)
	}
	defer rdr.Release()
	for rdr.Next() {
		if rdr.RecordBatch().NumRows() > 0 {
			return true, nil
		}
	}
	return false, toWire(rdr.Err())
}

// storedAlike reports whether values of type a are stored as values of
// type b are, everywhere (stream batches, KV rows, the lake).
func storedAlike(a, b sqltypes.Type) bool {
	str := func(t sqltypes.Type) bool { return t.Kind() == sqltypes.Text || t.Kind() == sqltypes.Varchar }
	return str(a) && str(b)
}

// usingColumn reports whether a USING expression is the column itself or
// a cast of it (Django sends USING "c"::varchar(n)).
func usingColumn(n *pg.Node, col string) bool {
	if tc := n.GetTypeCast(); tc != nil {
		n = tc.Arg
	}
	ref := n.GetColumnRef()
	if ref == nil || len(ref.Fields) != 1 {
		return false
	}
	return ref.Fields[0].GetString_().GetSval() == col
}
