package sqlfront

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	pg "github.com/minkdb/mink/sqlfront/pgtree"
	"github.com/minkdb/mink/sqlfront/translate"

	"github.com/minkdb/mink/buckets/routing"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/sqltypes"
	"github.com/minkdb/mink/sqlfront/pgwire"
)

// tableOptions are the WITH (…) options of CREATE TABLE, with their checks.
var tableOptions = map[string]func(v string) (string, error){
	"buckets": func(v string) (string, error) {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > catalog.MaxBuckets {
			return "", fmt.Errorf("buckets must be an integer from 1 to %d", catalog.MaxBuckets)
		}
		return strconv.Itoa(n), nil
	},
	"bucket_key": func(v string) (string, error) { return v, nil },
	"tiering": func(v string) (string, error) {
		switch strings.ToLower(v) {
		case "on", "true", "1":
			return "on", nil
		case "off", "false", "0":
			return "off", nil
		}
		return "", fmt.Errorf("tiering must be on or off")
	},
	// max_message_bytes bounds a Kafka record batch produced to the table
	// (the topic config max.message.bytes, docs/kafka.md).
	"max_message_bytes": func(v string) (string, error) {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return "", fmt.Errorf("max_message_bytes must be a positive number of bytes")
		}
		return strconv.Itoa(n), nil
	},
	"tiering_freshness":   checkInterval,
	"log_retention":       checkInterval,
	"partition_retention": checkInterval,
	"lake_snapshot_retention": func(v string) (string, error) {
		if d, err := time.ParseDuration(v); err != nil || d < 0 {
			return "", fmt.Errorf("lake_snapshot_retention must be a duration of at least 0, such as '1h'")
		}
		return v, nil
	},
}

func checkInterval(v string) (string, error) {
	if _, err := time.ParseDuration(v); err != nil {
		return "", fmt.Errorf("want a duration such as '90s', '15m' or '168h'")
	}
	return v, nil
}

func (s *session) lookupTable(rv *pg.RangeVar) (*tableInfo, error) {
	name, err := s.relName(rv)
	if err != nil {
		return nil, err
	}
	if s.tx.status != pgwire.TxIdle && s.droppedInTx(name) {
		return nil, errDroppedInTx(name)
	}
	t, err := s.f.lookupTableByName(name)
	if err == nil && s.tx.status != pgwire.TxIdle && (t.isPK() || s.restartedInTx(t.id)) && s.truncatedInTx(name) {
		return nil, errTruncatedInTx(t)
	}
	return t, err
}

func (s *session) planCreateTable(ctx context.Context, cs *pg.CreateStmt) (*stmt, error) {
	if cs.Relation.Relpersistence == "t" {
		return s.planCreateTemp(ctx, cs)
	}
	schema, bare, name, err := s.createdName(cs.Relation)
	if err != nil {
		return nil, err
	}
	if len(cs.InhRelations) > 0 {
		return s.planCreatePartition(ctx, name, cs)
	}
	if cs.Partbound != nil {
		return nil, errorf(pgwire.CodeSyntaxError, "FOR VALUES needs PARTITION OF")
	}
	spec := catalog.TableSpec{Name: bare, Schema: schema, Options: map[string]string{}}
	var defaults []string // SQL default expressions, "" for none, by column
	likePKs := 0          // primary keys copied by LIKE … INCLUDING INDEXES
	var decls []declaredConstraint
	for _, elt := range cs.TableElts {
		switch e := elt.Node.(type) {
		case *pg.Node_ColumnDef:
			col, def, pk, colDecls, err := columnOf(e.ColumnDef, name)
			if err != nil {
				return nil, err
			}
			if pk {
				spec.PrimaryKey = append(spec.PrimaryKey, col.Name)
			}
			spec.Columns = append(spec.Columns, col)
			defaults = append(defaults, def)
			decls = append(decls, colDecls...)
		case *pg.Node_Constraint:
			con := e.Constraint
			if d, ok := declaredOf(con, ""); ok {
				decls = append(decls, d)
				continue
			}
			if con.Contype != pg.ConstrType_CONSTR_PRIMARY {
				return nil, unsupported("%s constraints are not supported", constraintName(con.Contype))
			}
			for _, k := range con.Keys {
				spec.PrimaryKey = append(spec.PrimaryKey, k.GetString_().Sval)
			}
		case *pg.Node_TableLikeClause:
			cols, defs, pk, err := s.likeColumns(ctx, e.TableLikeClause)
			if err != nil {
				return nil, err
			}
			spec.Columns, defaults = append(spec.Columns, cols...), append(defaults, defs...)
			if len(pk) > 0 {
				likePKs++
				spec.PrimaryKey = append(spec.PrimaryKey, pk...)
			}
		}
	}
	pkDefs := likePKs
	for _, elt := range cs.TableElts {
		if cd := elt.GetColumnDef(); cd != nil {
			for _, c := range cd.Constraints {
				if c.GetConstraint().Contype == pg.ConstrType_CONSTR_PRIMARY {
					pkDefs++
				}
			}
		} else if con := elt.GetConstraint(); con != nil && con.Contype == pg.ConstrType_CONSTR_PRIMARY {
			pkDefs++
		}
	}
	if pkDefs > 1 {
		return nil, errorf(codeInvalidTableDefinition, "multiple primary keys for table %q are not allowed", name)
	}
	if ps := cs.Partspec; ps != nil {
		if ps.Strategy != pg.PartitionStrategy_PARTITION_STRATEGY_LIST {
			return nil, unsupported("only PARTITION BY LIST is supported")
		}
		if len(ps.PartParams) != 1 || ps.PartParams[0].GetPartitionElem().GetName() == "" {
			return nil, unsupported("PARTITION BY LIST takes exactly one column")
		}
		spec.PartitionBy = ps.PartParams[0].GetPartitionElem().Name
	}
	for _, o := range cs.Options {
		de := o.GetDefElem()
		check, ok := tableOptions[de.Defname]
		if !ok {
			return nil, errorf(pgwire.CodeInvalidParameterValue, "unrecognized parameter %q", de.Defname)
		}
		raw, err := defElemValue(de)
		if err != nil {
			return nil, err
		}
		v, err := check(raw)
		if err != nil {
			return nil, errorf(pgwire.CodeInvalidParameterValue, "invalid value for parameter %q: %v", de.Defname, err)
		}
		spec.Options[de.Defname] = v
	}
	if n, ok := spec.Options["buckets"]; ok {
		spec.Buckets, _ = strconv.Atoi(n)
		delete(spec.Options, "buckets")
	}
	if k, ok := spec.Options["bucket_key"]; ok {
		for _, part := range strings.Split(k, ",") {
			if part = strings.TrimSpace(part); part != "" {
				spec.BucketKey = append(spec.BucketKey, strings.ToLower(part))
			}
		}
		delete(spec.Options, "bucket_key")
	}
	if len(spec.Options) == 0 {
		spec.Options = nil
	}
	if err := checkColumns(spec); err != nil {
		return nil, err
	}
	if err := checkPrimaryKey(&spec); err != nil {
		return nil, err
	}
	colNames := make([]string, len(spec.Columns))
	for i, c := range spec.Columns {
		colNames[i] = c.Name
	}
	return s.tagWithNotices("CREATE TABLE", func(ctx context.Context) ([]*pgwire.Error, error) {
		warnings, err := s.checkDeclared(name, colNames, spec.PrimaryKey, decls)
		if err != nil {
			return nil, err
		}
		inBlock := s.tx.status == pgwire.TxInBlock
		if inBlock {
			if err := s.applyPendingDrop(ctx, name); err != nil {
				return nil, err
			}
		}
		for i, def := range defaults {
			if def == "" {
				continue
			}
			typ, _ := sqltypes.Parse(spec.Columns[i].Type)
			if err := s.conn.Exec(ctx, "SELECT CAST("+def+" AS "+typ.DuckDBType()+")"); err != nil {
				return nil, wrapf(toWire(err), "default of column %q", spec.Columns[i].Name)
			}
		}
		out, err := s.f.cfg.Meta.Propose(ctx, catalog.CreateTable{Spec: spec, Owner: s.ownerRole()})
		if errors.Is(err, catalog.ErrExists) {
			if cs.IfNotExists {
				return []*pgwire.Error{notice(pgwire.CodeDuplicateTable, "relation %q already exists, skipping", bare)}, nil
			}
			return nil, errorf(pgwire.CodeDuplicateTable, "relation %q already exists", bare)
		}
		if err != nil {
			return nil, err
		}
		if inBlock {
			s.tx.undo = append(s.tx.undo, undoDDL{table: out.Table})
		}
		return warnings, s.f.waitLeaders(ctx, out.Buckets)
	}), nil
}

// columnOf reads a column definition of CREATE TABLE or ALTER TABLE … ADD
// COLUMN of table: the column, its SQL default expression ("" for none),
// whether it declares itself the primary key, and its UNIQUE and
// REFERENCES constraints (declared, not enforced: checkDeclared).
func columnOf(cd *pg.ColumnDef, table string) (col catalog.Column, def string, pk bool, decls []declaredConstraint, err error) {
	serial := serialTypes[typeNameOf(cd.TypeName)]
	var typ sqltypes.Type
	if serial != "" && len(cd.TypeName.ArrayBounds) == 0 {
		typ, err = sqltypes.Parse(serial)
	} else {
		typ, err = translate.TypeOf(cd.TypeName)
	}
	if err != nil {
		return col, "", false, nil, err
	}
	col = catalog.Column{Name: cd.Colname, Type: typ.Name(), NotNull: cd.IsNotNull}
	if serial != "" {
		col.Sequence, col.NotNull = catalog.SequenceSerial, true
	}
	for i, c := range cd.Constraints {
		con := c.GetConstraint()
		if col.Sequence != "" && (con.Contype == pg.ConstrType_CONSTR_DEFAULT || con.Contype == pg.ConstrType_CONSTR_IDENTITY) {
			return col, "", false, nil, errorf(pgwire.CodeSyntaxError, "multiple default values specified for column %q of table %q", cd.Colname, table)
		}
		switch con.Contype {
		case pg.ConstrType_CONSTR_IDENTITY:
			if def != "" {
				return col, "", false, nil, errorf(pgwire.CodeSyntaxError, "both default and identity specified for column %q of table %q", cd.Colname, table)
			}
			if catalog.SequenceMax(col.Type) == 0 {
				return col, "", false, nil, errorf(pgwire.CodeInvalidParameterValue, "identity column type must be smallint, integer, or bigint")
			}
			if len(con.Options) > 0 {
				return col, "", false, nil, unsupported("identity sequence options (START WITH, INCREMENT BY, …) are not supported")
			}
			col.Sequence, col.NotNull = catalog.SequenceByDefault, true
			if con.GeneratedWhen == "a" {
				col.Sequence = catalog.SequenceAlways
			}
		case pg.ConstrType_CONSTR_NOTNULL:
			col.NotNull = true
		case pg.ConstrType_CONSTR_NULL:
		case pg.ConstrType_CONSTR_DEFAULT:
			if def, err = constantExpr(con.RawExpr, typ); err != nil {
				return col, "", false, nil, err
			}
			col.Default = def
		case pg.ConstrType_CONSTR_PRIMARY:
			pk = true
		case pg.ConstrType_CONSTR_UNIQUE, pg.ConstrType_CONSTR_FOREIGN:
			d, _ := declaredOf(con, cd.Colname)
			decls = append(decls, d)
		case pg.ConstrType_CONSTR_ATTR_DEFERRABLE, pg.ConstrType_CONSTR_ATTR_NOT_DEFERRABLE,
			pg.ConstrType_CONSTR_ATTR_DEFERRED, pg.ConstrType_CONSTR_ATTR_IMMEDIATE:
			// The parser gives a column constraint's DEFERRABLE and
			// INITIALLY … as constraints of their own, after it. They
			// mean nothing for one that is not enforced; the primary key
			// is checked at once, always.
			if !slices.ContainsFunc(cd.Constraints[:i], func(n *pg.Node) bool {
				t := n.GetConstraint().GetContype()
				return t == pg.ConstrType_CONSTR_UNIQUE || t == pg.ConstrType_CONSTR_FOREIGN
			}) {
				return col, "", false, nil, unsupported("DEFERRABLE is supported only on UNIQUE and REFERENCES constraints, which mink does not enforce")
			}
		default:
			return col, "", false, nil, unsupported("%s constraints are not supported", constraintName(con.Contype))
		}
	}
	return col, def, pk, decls, nil
}

// checkColumns reports what PostgreSQL would: duplicate columns, and key or
// partition columns that do not exist.
func checkColumns(spec catalog.TableSpec) error {
	if len(spec.Columns) == 0 {
		return unsupported("tables need at least one column")
	}
	seen := map[string]bool{}
	for _, c := range spec.Columns {
		if seen[c.Name] {
			return errorf(pgwire.CodeDuplicateColumn, "column %q specified more than once", c.Name)
		}
		seen[c.Name] = true
	}
	for _, k := range spec.BucketKey {
		if !seen[k] {
			return errorf(pgwire.CodeUndefinedColumn, "bucket_key column %q does not exist", k)
		}
	}
	if spec.PartitionBy != "" && !seen[spec.PartitionBy] {
		return errorf(pgwire.CodeUndefinedColumn, "column %q named in partition key does not exist", spec.PartitionBy)
	}
	return nil
}

// serialTypes maps PostgreSQL's serial pseudo-types to the integer type of
// their column.
var serialTypes = map[string]string{
	"smallserial": "smallint", "serial2": "smallint",
	"serial": "integer", "serial4": "integer",
	"bigserial": "bigint", "serial8": "bigint",
}

// typeNameOf is the unqualified, lower-case name of a type.
func typeNameOf(tn *pg.TypeName) string {
	if tn == nil || len(tn.Names) == 0 {
		return ""
	}
	return strings.ToLower(tn.Names[len(tn.Names)-1].GetString_().GetSval())
}

func constraintName(t pg.ConstrType) string {
	return strings.TrimPrefix(t.String(), "CONSTR_")
}

// constantExpr renders a DEFAULT expression as SQL: a constant, an
// expression of constants and the current time or date (now(),
// CURRENT_TIMESTAMP, CURRENT_DATE, LOCALTIMESTAMP, transaction_timestamp(),
// which one statement evaluates once), or gen_random_uuid() (a new value
// per row; see isRowDefault). A string literal is read the way INSERT
// reads it into a column of type typ (typedLiteral), so that the stored
// default means what PostgreSQL would take it to mean.
func constantExpr(n *pg.Node, typ sqltypes.Type) (string, error) {
	if isRowDefault(n) {
		return deparseExpr(n)
	}
	if !isConstant(n) && !isStatementConstant(n) {
		return "", unsupported("DEFAULT must be a constant, an expression of the current time or date (now(), CURRENT_TIMESTAMP, CURRENT_DATE), or gen_random_uuid()")
	}
	if lit, cast, ok := translate.StringLiteral(n); ok {
		if !cast.Valid() {
			cast = typ
		}
		replaced, err := translate.TypedLiteral(lit, cast)
		if err != nil {
			return "", err
		}
		if replaced != nil {
			n = replaced
		}
	}
	return deparseExpr(n)
}

// statementTimeFuncs are the functions of the statement's (or
// transaction's) time that a DEFAULT may use.
var statementTimeFuncs = map[string]bool{"now": true, "transaction_timestamp": true}

// isStatementConstant reports whether n is built from constants and the
// current time or date: one value for every row of a statement.
func isStatementConstant(n *pg.Node) bool {
	switch e := n.Node.(type) {
	case *pg.Node_AConst:
		return true
	case *pg.Node_SqlvalueFunction:
		switch e.SqlvalueFunction.Op {
		case pg.SQLValueFunctionOp_SVFOP_CURRENT_DATE, pg.SQLValueFunctionOp_SVFOP_CURRENT_TIMESTAMP,
			pg.SQLValueFunctionOp_SVFOP_CURRENT_TIMESTAMP_N, pg.SQLValueFunctionOp_SVFOP_LOCALTIMESTAMP,
			pg.SQLValueFunctionOp_SVFOP_LOCALTIMESTAMP_N:
			return true
		}
	case *pg.Node_FuncCall:
		schema, name := pg.FuncName(e.FuncCall)
		return (schema == "" || schema == "pg_catalog") && statementTimeFuncs[name] && len(e.FuncCall.Args) == 0
	case *pg.Node_TypeCast:
		return isStatementConstant(e.TypeCast.Arg)
	case *pg.Node_AExpr:
		if e.AExpr.Kind == pg.A_Expr_Kind_AEXPR_OP {
			return (e.AExpr.Lexpr == nil || isStatementConstant(e.AExpr.Lexpr)) && isStatementConstant(e.AExpr.Rexpr)
		}
	}
	return false
}

// isRowDefault reports whether n is gen_random_uuid(), the one DEFAULT
// that gives every row its own value.
func isRowDefault(n *pg.Node) bool {
	fc := n.GetFuncCall()
	if fc == nil || len(fc.Args) > 0 {
		return false
	}
	schema, name := pg.FuncName(fc)
	return (schema == "" || schema == "pg_catalog") && name == "gen_random_uuid"
}

// rowDefault returns the Go generator of a per-row DEFAULT (COPY fills
// its rows in Go), or nil if def is not one.
func rowDefault(def string) func() any {
	n, err := pg.ParseExpr(def)
	if err != nil || !isRowDefault(n) {
		return nil
	}
	return func() any {
		var u [16]byte
		_, _ = rand.Read(u[:])  // crypto/rand.Read never fails
		u[6] = u[6]&0x0f | 0x40 // version 4
		u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
		return u
	}
}

func isConstant(n *pg.Node) bool {
	switch e := n.Node.(type) {
	case *pg.Node_AConst:
		return true
	case *pg.Node_TypeCast:
		return isConstant(e.TypeCast.Arg)
	case *pg.Node_AExpr:
		// -1, 1 + 1, '1 day'::interval * 2: operators on constants.
		if e.AExpr.Kind == pg.A_Expr_Kind_AEXPR_OP {
			return (e.AExpr.Lexpr == nil || isConstant(e.AExpr.Lexpr)) && isConstant(e.AExpr.Rexpr)
		}
	}
	return false
}

// deparseExpr renders an expression node back to SQL.
func deparseExpr(n *pg.Node) (string, error) {
	sel := &pg.SelectStmt{TargetList: []*pg.Node{{Node: &pg.Node_ResTarget{ResTarget: &pg.ResTarget{Val: n}}}}}
	text, err := translate.Deparse(&pg.Node{Node: &pg.Node_SelectStmt{SelectStmt: sel}})
	if err != nil {
		return "", err
	}
	return strings.TrimPrefix(text, "SELECT "), nil
}

func defElemValue(de *pg.DefElem) (string, error) {
	if de.Arg == nil {
		return "on", nil
	}
	switch a := de.Arg.Node.(type) {
	case *pg.Node_String_:
		return a.String_.Sval, nil
	case *pg.Node_Integer:
		return strconv.Itoa(int(a.Integer.Ival)), nil
	case *pg.Node_Float:
		return a.Float.Fval, nil
	case *pg.Node_Boolean:
		return strconv.FormatBool(a.Boolean.Boolval), nil
	case *pg.Node_TypeName:
		return a.TypeName.Names[len(a.TypeName.Names)-1].GetString_().Sval, nil
	}
	return "", errorf(pgwire.CodeSyntaxError, "invalid value for option %q", de.Defname)
}

// waitLeaders waits until every bucket has a leader, so that a write right
// after CREATE TABLE does not wait on assignment.
func (f *Frontend) waitLeaders(ctx context.Context, ids []catalog.BucketID) error {
	deadline := time.Now().Add(f.cfg.BucketWait)
	for {
		changed := f.cfg.Meta.Changed()
		missing := 0
		f.cfg.Meta.Read(func(v *catalog.View) {
			for _, id := range ids {
				if b, ok := v.Buckets[id]; ok && b.Leader == 0 {
					missing++
				}
			}
		})
		if missing == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return errorf(codeUnavailable, "%d buckets have no leader yet: is a coordinator running?", missing)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// planCreatePartition handles CREATE TABLE name PARTITION OF parent FOR
// VALUES IN (value). The partition is named by its value; name is only
// checked not to clash.
func (s *session) planCreatePartition(ctx context.Context, name string, cs *pg.CreateStmt) (*stmt, error) {
	if len(cs.InhRelations) != 1 {
		return nil, unsupported("inheritance is not supported")
	}
	parent, err := s.lookupTable(cs.InhRelations[0].GetRangeVar())
	if err != nil {
		return nil, err
	}
	if parent.partCol < 0 {
		return nil, errorf(codeInvalidObjectDefinition, "%q is not partitioned", parent.name)
	}
	pb := cs.Partbound
	if pb == nil || pb.Strategy != "l" || len(pb.Listdatums) != 1 {
		return nil, unsupported("a partition needs FOR VALUES IN (one value)")
	}
	lit, err := deparseExpr(pb.Listdatums[0])
	if err != nil {
		return nil, err
	}
	col := parent.cols[parent.partCol]
	return s.tagOnly("CREATE TABLE", func(ctx context.Context) error {
		value, err := s.canonicalPartitionValue(ctx, lit, col.Type)
		if err != nil {
			return err
		}
		out, err := s.f.cfg.Meta.Propose(ctx, catalog.CreatePartition{Table: parent.id, Value: value})
		if errors.Is(err, catalog.ErrExists) {
			if cs.IfNotExists {
				return nil
			}
			// PostgreSQL names the partition it overlaps; mink's partitions
			// are known by their value.
			return errorf(codeInvalidObjectDefinition, "partition %q would overlap the partition of %q for value %s", name, parent.name, lit)
		}
		if err != nil {
			return err
		}
		return s.f.waitLeaders(ctx, out.Buckets)
	}), nil
}

// canonicalPartitionValue evaluates a literal as the partition column's type
// and returns its canonical text, the same text rows with that value get.
func (s *session) canonicalPartitionValue(ctx context.Context, lit string, typ sqltypes.Type) (string, error) {
	return s.partitionValueOf(ctx, typ, lit)
}

// canonicalPartitionValueArg is canonicalPartitionValue for a parameter.
func (s *session) canonicalPartitionValueArg(ctx context.Context, typ sqltypes.Type, arg any) (string, error) {
	return s.partitionValueOf(ctx, typ, "$1", arg)
}

func (s *session) partitionValueOf(ctx context.Context, typ sqltypes.Type, expr string, args ...any) (string, error) {
	rec, err := s.evalConstants(ctx, "partition", typ, []string{expr}, args)
	if err != nil {
		return "", err
	}
	defer rec.Release()
	return routing.PartitionValue(rec.Column(0), 0)
}

func (s *session) planDrop(d *pg.DropStmt) (*stmt, error) {
	if d.RemoveType == pg.ObjectType_OBJECT_VIEW {
		return s.planDropView(d)
	}
	if d.RemoveType == pg.ObjectType_OBJECT_INDEX {
		return s.planDropIndex(d)
	}
	if d.RemoveType == pg.ObjectType_OBJECT_SCHEMA {
		return s.planDropSchema(d)
	}
	if d.RemoveType != pg.ObjectType_OBJECT_TABLE {
		return nil, unsupported("DROP %s is not supported", strings.TrimPrefix(d.RemoveType.String(), "OBJECT_"))
	}
	var names []string
	var skipped []*pgwire.Error
	for _, obj := range d.Objects {
		name, err := s.relName(rangeVarOfName(obj))
		var we *pgwire.Error
		if d.MissingOk && errors.As(err, &we) && we.Code == pgwire.CodeInvalidSchemaName {
			skipped = append(skipped, notice(pgwire.CodeSuccessfulCompletion, "%s, skipping", we.Message))
			continue
		}
		if err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	return s.tagWithNotices("DROP TABLE", func(ctx context.Context) ([]*pgwire.Error, error) {
		inBlock := s.tx.status == pgwire.TxInBlock
		var ids []catalog.TableID
		var tables []*tableInfo
		notices := slices.Clone(skipped)
		for _, name := range names {
			if s.isView(&pg.RangeVar{Relname: name}) {
				return nil, &pgwire.Error{Code: pgwire.CodeWrongObjectType, Message: fmt.Sprintf("%q is not a table", name),
					Hint: "Use DROP VIEW to remove a view."}
			}
			t, err := s.f.lookupTableByName(name)
			if err == nil && inBlock && s.droppedInTx(name) {
				err = errDroppedInTx(name)
			}
			if err != nil {
				if d.MissingOk {
					notices = append(notices, notice("00000", "table %q does not exist, skipping", name))
					continue
				}
				return nil, errorf(pgwire.CodeUndefinedTable, "table %q does not exist", name)
			}
			ids = append(ids, t.id)
			tables = append(tables, t)
		}
		// Views that read the tables: 2BP01, or with CASCADE dropped first
		// (at once, also in a block: see views.go).
		var views []catalog.TableID
		var undo []undoDDL
		var err error
		s.f.cfg.Meta.Read(func(v *catalog.View) {
			var more []*pgwire.Error
			views, more, err = cascadeViews(v, "table", ids, d.Behavior == pg.DropBehavior_DROP_CASCADE)
			notices = append(notices, more...)
			if err == nil && len(views) > 0 {
				undo = s.dropUndo(v, views)
			}
		})
		if err != nil {
			return nil, err
		}
		if len(views) > 0 {
			if _, err := s.f.cfg.Meta.Propose(ctx, catalog.DropView{Views: views}); err != nil {
				return nil, dropViewError(err)
			}
			s.tx.undo = append(s.tx.undo, undo...)
		}
		if inBlock {
			for _, t := range tables {
				if err := s.dropInTx(ctx, t); err != nil {
					return nil, err
				}
			}
			return notices, nil
		}
		for _, id := range ids {
			if _, err := s.f.cfg.Meta.Propose(ctx, catalog.DropTable{Table: id}); err != nil && !errors.Is(err, catalog.ErrNotFound) {
				return nil, dropViewError(err)
			}
		}
		return notices, nil
	}), nil
}

// tagWithNotices is a statement that returns a command tag and, perhaps,
// notices (PostgreSQL's "…, skipping" of IF [NOT] EXISTS).
func (s *session) tagWithNotices(tag string, fn func(ctx context.Context) ([]*pgwire.Error, error)) *stmt {
	return &stmt{run: func(ctx context.Context, _ []any) (pgwire.Result, error) {
		if err := s.checkTx(); err != nil {
			return pgwire.Result{}, err
		}
		notices, err := fn(ctx)
		if err != nil {
			return pgwire.Result{}, err
		}
		return pgwire.Result{Tag: tag, Notices: notices}, nil
	}}
}

func notice(code, format string, args ...any) *pgwire.Error {
	return &pgwire.Error{Severity: "NOTICE", Code: code, Message: fmt.Sprintf(format, args...)}
}

// Declared constraints. mink enforces NOT NULL and the primary key (one row
// per key, 23505), and has no secondary indexes: it cannot find a duplicate
// of another set of columns, or the row a foreign key references, without
// reading the whole table at every write. ORMs' migrations (Django's,
// Rails', SQLAlchemy's create_all) declare UNIQUE and FOREIGN KEY
// constraints on nearly every table, and warehouses (Redshift, Snowflake,
// BigQuery) accept them as informational, so mink does too: a UNIQUE or
// FOREIGN KEY constraint is checked as PostgreSQL checks its definition
// (the columns and the referenced table exist), accepted with a WARNING
// that it is not enforced, and not recorded (pg_constraint lists primary
// keys only). A UNIQUE constraint on all of a primary key's columns (or
// more) holds anyway, and is accepted without a warning. CHECK and EXCLUDE
// constraints stay 0A000: their point is the check.

// declaredConstraint is a UNIQUE or FOREIGN KEY constraint of a CREATE TABLE
// or an ALTER TABLE … ADD CONSTRAINT, with its columns resolved.
type declaredConstraint struct {
	con     *pg.Constraint
	columns []string // the constrained columns of the table
}

// declaredOf returns con as a declared constraint, with column as its
// column when it is a column constraint ("" for a table constraint), and
// false when con is not UNIQUE or FOREIGN KEY.
func declaredOf(con *pg.Constraint, column string) (declaredConstraint, bool) {
	var cols []*pg.Node
	switch con.Contype {
	case pg.ConstrType_CONSTR_UNIQUE:
		cols = con.Keys
	case pg.ConstrType_CONSTR_FOREIGN:
		cols = con.FkAttrs
	default:
		return declaredConstraint{}, false
	}
	d := declaredConstraint{con: con}
	if column != "" {
		d.columns = []string{column}
	}
	for _, c := range cols {
		d.columns = append(d.columns, c.GetString_().GetSval())
	}
	return d, true
}

// checkDeclared checks declared constraints of table, whose columns are
// cols and primary key pk, as PostgreSQL checks their definitions, and
// returns the warnings that say they are not enforced. A foreign key of
// table that references table itself is resolved with cols and pk (CREATE
// TABLE's table is not in the catalog yet).
func (s *session) checkDeclared(table string, cols []string, pk []string, decls []declaredConstraint) ([]*pgwire.Error, error) {
	has := func(cols []string, name string) bool { return slices.Contains(cols, name) }
	var warnings []*pgwire.Error
	for _, d := range decls {
		con := d.con
		if con.Contype == pg.ConstrType_CONSTR_UNIQUE {
			if con.NullsNotDistinct || len(con.Including) > 0 {
				return nil, unsupported("UNIQUE NULLS NOT DISTINCT and INCLUDE are not supported")
			}
			for _, c := range d.columns {
				if !has(cols, c) {
					return nil, errorf(pgwire.CodeUndefinedColumn, "column %q named in key does not exist", c)
				}
			}
			if len(pk) > 0 && !slices.ContainsFunc(pk, func(k string) bool { return !has(d.columns, k) }) {
				continue // the primary key makes it hold
			}
			name := cmp.Or(con.Conname, table+"_"+strings.Join(d.columns, "_")+"_key")
			warnings = append(warnings, warning("unique constraint %q is not enforced: mink enforces only primary keys", name))
			continue
		}
		for _, c := range d.columns {
			if !has(cols, c) {
				return nil, errorf(pgwire.CodeUndefinedColumn, "column %q referenced in foreign key constraint does not exist", c)
			}
		}
		refName, err := s.relName(con.Pktable)
		if err != nil {
			return nil, err
		}
		refCols, refPK := cols, pk
		if refName != table {
			ref, err := s.lookupTable(con.Pktable)
			if err != nil {
				return nil, err
			}
			refCols, refPK = nil, ref.spec.PrimaryKey
			for _, c := range ref.cols {
				refCols = append(refCols, c.Name)
			}
		}
		var refs []string
		for _, c := range con.PkAttrs {
			refs = append(refs, c.GetString_().GetSval())
		}
		if len(refs) == 0 {
			if len(refPK) == 0 {
				return nil, errorf(pgwire.CodeUndefinedObject, "there is no primary key for referenced table %q", refName)
			}
			refs = refPK
		}
		for _, c := range refs {
			if !has(refCols, c) {
				return nil, errorf(pgwire.CodeUndefinedColumn, "column %q referenced in foreign key constraint does not exist", c)
			}
		}
		if len(refs) != len(d.columns) {
			return nil, errorf(codeInvalidForeignKey, "number of referencing and referenced columns for foreign key disagree")
		}
		name := cmp.Or(con.Conname, table+"_"+strings.Join(d.columns, "_")+"_fkey")
		warnings = append(warnings, warning("foreign key constraint %q is not enforced: mink has no foreign keys", name))
	}
	return warnings, nil
}

func warning(format string, args ...any) *pgwire.Error {
	return &pgwire.Error{Severity: "WARNING", Code: pgwire.CodeWarning, Message: fmt.Sprintf(format, args...)}
}

// planCreateIndex plans CREATE INDEX. mink has no secondary indexes (a
// query reads a table's buckets, its engine copy or its lake files, pruned
// by partition and by file statistics, and a primary-key lookup reads the
// KV tablet), so an index would only be a faster path to the same rows:
// CREATE INDEX checks the table and its columns as PostgreSQL does, creates
// nothing, and says so in a NOTICE. CREATE UNIQUE INDEX is a unique
// constraint, declared and not enforced (see Declared constraints), with a
// WARNING. Neither is recorded, so DROP INDEX finds no index (42704).
func (s *session) planCreateIndex(is *pg.IndexStmt) (*stmt, error) {
	var cols []string
	for _, p := range is.IndexParams {
		if name := p.GetIndexElem().GetName(); name != "" {
			cols = append(cols, name)
		}
	}
	return s.tagWithNotices("CREATE INDEX", func(ctx context.Context) ([]*pgwire.Error, error) {
		if s.isView(is.Relation) {
			return nil, &pgwire.Error{Code: pgwire.CodeWrongObjectType, Message: fmt.Sprintf("cannot create index on relation %q", is.Relation.Relname),
				Detail: "This operation is not supported for views."}
		}
		t, err := s.lookupTable(is.Relation)
		if err != nil {
			return nil, err
		}
		for _, c := range cols {
			if _, ok := t.colIdx[c]; !ok {
				return nil, errorf(pgwire.CodeUndefinedColumn, "column %q does not exist", c)
			}
		}
		name := is.Idxname
		if name == "" {
			name = t.name + "_" + strings.Join(cols, "_") + "_idx"
		}
		if is.Unique {
			if len(t.spec.PrimaryKey) > 0 && is.WhereClause == nil && !slices.ContainsFunc(t.spec.PrimaryKey, func(k string) bool { return !slices.Contains(cols, k) }) {
				return []*pgwire.Error{notice("00000", "index %q is not created: the primary key %q makes its rows unique", name, t.pkeyName())}, nil
			}
			return []*pgwire.Error{warning("unique index %q is not created, and its uniqueness is not enforced: mink has no secondary indexes and enforces only primary keys", name)}, nil
		}
		return []*pgwire.Error{notice("00000", "index %q is not created: mink has no secondary indexes", name)}, nil
	}), nil
}

// planDropIndex plans DROP INDEX. CREATE INDEX records nothing, so the
// only indexes are the primary keys' (pg_index lists them), which their
// constraint needs (2BP01, as in PostgreSQL); any other name is no index
// (42704; IF EXISTS: a notice, which is what ORMs' reverse migrations get).
func (s *session) planDropIndex(d *pg.DropStmt) (*stmt, error) {
	return s.tagWithNotices("DROP INDEX", func(ctx context.Context) ([]*pgwire.Error, error) {
		var notices []*pgwire.Error
		for _, obj := range d.Objects {
			rv := rangeVarOfName(obj)
			name, err := s.relName(rv)
			if err != nil {
				return nil, err
			}
			var owner string
			s.f.cfg.Meta.Read(func(v *catalog.View) {
				for _, t := range v.Tables {
					if len(t.Spec.PrimaryKey) > 0 && t.Spec.Name+"_pkey" == name {
						owner = t.Spec.Name
					}
				}
			})
			switch {
			case owner != "":
				return nil, &pgwire.Error{Code: codeDependentObjects, Message: fmt.Sprintf("cannot drop index %s because constraint %s on table %s requires it", name, name, owner),
					Hint: fmt.Sprintf("You can drop constraint %s on table %s instead.", name, owner)}
			case !d.MissingOk:
				return nil, errorf(pgwire.CodeUndefinedObject, "index %q does not exist", name)
			}
			notices = append(notices, notice("00000", "index %q does not exist, skipping", name))
		}
		return notices, nil
	}), nil
}

// planSetConstraints plans SET CONSTRAINTS. The constraints mink enforces
// (NOT NULL, the primary key) are checked at once, always, as PostgreSQL
// checks a constraint that is not DEFERRABLE, and the ones it accepts as
// declared are never checked: SET CONSTRAINTS ALL changes nothing (Django
// sends it around fixtures and tests). Named constraints are not recorded
// (42704), as PostgreSQL says for a name it does not know.
func (s *session) planSetConstraints(cs *pg.ConstraintsSetStmt) (*stmt, error) {
	for _, c := range cs.Constraints {
		return nil, errorf(pgwire.CodeUndefinedObject, "constraint %q does not exist", c.GetRangeVar().GetRelname())
	}
	return s.tagWithNotices("SET CONSTRAINTS", func(ctx context.Context) ([]*pgwire.Error, error) {
		if s.tx.status == pgwire.TxIdle {
			w := warning("SET CONSTRAINTS can only be used in transaction blocks")
			w.Code = pgwire.CodeNoActiveSQLTransaction
			return []*pgwire.Error{w}, nil
		}
		return nil, nil
	}), nil
}
