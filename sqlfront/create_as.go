package sqlfront

import (
	"context"
	"strconv"
	"strings"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/sqltypes"
	pg "github.com/minkdb/mink/sqlfront/pgtree"
	"github.com/minkdb/mink/sqlfront/pgwire"
)

// CREATE TABLE … AS query, SELECT … INTO and CREATE TABLE … (LIKE t).
//
// CREATE TABLE … AS is a CREATE TABLE whose columns are the query's result
// columns, as the query describes them (names as PostgreSQL names them,
// types with their modifiers), followed by INSERT INTO … query. The two
// steps are the statements mink already has, so the table takes the same
// WITH options, privileges and transaction-block behaviour as CREATE
// TABLE, and the rows are written as INSERT … SELECT writes them. PostgreSQL
// creates and fills the table in one transaction; mink's catalog has no
// transactions, so a statement whose rows fail (outside a block) drops the
// table it created again, and inside a block the failure fails the block,
// whose ROLLBACK drops it. A node that crashes between the steps leaves the
// empty table.

// planCreateTableAs plans a CREATE TABLE … AS or SELECT … INTO: query (a
// SELECT or VALUES) into the table into names.
// intoColumns are the columns of the table CREATE TABLE … AS (or SELECT
// … INTO) makes: the query's, under the names into gives them.
func (s *session) intoColumns(ctx context.Context, into *pg.IntoClause, query *pg.Node) ([]sqltypes.Column, error) {
	if query.GetSelectStmt() == nil {
		return nil, unsupported("CREATE TABLE … AS %s is not supported", statementName(query))
	}
	// The query is planned from its own text, where its nodes' positions
	// point.
	_, _, q, err := s.planOwnText(ctx, query)
	if err != nil {
		return nil, err
	}
	if len(into.ColNames) > len(q.columns) {
		return nil, errorf(pgwire.CodeSyntaxError, "too many column names were specified")
	}
	cols := make([]sqltypes.Column, len(q.columns))
	for i, c := range q.columns {
		name := c.Name
		if i < len(into.ColNames) {
			name = into.ColNames[i].GetString_().GetSval()
		}
		typ, ok := sqltypes.FromOID(c.TypeOID, c.TypeMod)
		if !ok {
			return nil, unsupported("column %q of the query has a type a table cannot store (type OID %d)", name, c.TypeOID)
		}
		cols[i] = sqltypes.Column{Name: name, Type: typ}
	}
	return cols, nil
}

func (s *session) planCreateTableAs(ctx context.Context, into *pg.IntoClause, query *pg.Node, ifNotExists bool) (*stmt, error) {
	if into.Rel.Relpersistence == "t" {
		return s.planCreateTempAs(ctx, into, query, ifNotExists)
	}
	cols, err := s.intoColumns(ctx, into, query)
	if err != nil {
		return nil, err
	}
	var def strings.Builder
	def.WriteString("CREATE TABLE t (")
	for i, c := range cols {
		if i > 0 {
			def.WriteString(", ")
		}
		def.WriteString(quoteIdent(c.Name) + " " + c.Type.Name())
	}
	def.WriteString(")")
	tree, err := pg.Parse(def.String())
	if err != nil {
		return nil, err
	}
	cs := tree.Stmts[0].Stmt.GetCreateStmt()
	cs.Relation, cs.Options, cs.IfNotExists = into.Rel, into.Options, ifNotExists
	create, err := s.planCreateTable(ctx, cs)
	if err != nil {
		return nil, err
	}
	return &stmt{run: func(ctx context.Context, _ []any) (pgwire.Result, error) {
		res, err := create.run(ctx, nil)
		if err != nil || len(res.Notices) > 0 || into.SkipData {
			// An error; IF NOT EXISTS of a table that exists (its notice);
			// WITH NO DATA.
			return pgwire.Result{Tag: "CREATE TABLE AS", Notices: res.Notices}, err
		}
		n, err := s.fillCreatedTable(ctx, into.Rel, query)
		if err != nil {
			if s.tx.status != pgwire.TxInBlock {
				if t, lerr := s.lookupTable(into.Rel); lerr == nil {
					_ = s.dropNow(ctx, t.id) // the table goes with its failed rows, as in PostgreSQL
				}
			}
			return pgwire.Result{}, err
		}
		return pgwire.Result{Tag: "SELECT " + strconv.FormatInt(n, 10)}, nil
	}}, nil
}

// fillCreatedTable runs INSERT INTO rel query and returns how many rows it
// wrote.
func (s *session) fillCreatedTable(ctx context.Context, rel *pg.RangeVar, query *pg.Node) (int64, error) {
	ins := &pg.InsertStmt{Relation: rel, SelectStmt: query, Override: pg.OverridingKind_OVERRIDING_NOT_SET}
	text, err := pg.Deparse(&pg.Node{Node: &pg.Node_InsertStmt{InsertStmt: ins}})
	if err != nil {
		return 0, err
	}
	st, err := s.planInsert(ctx, text, ins, nil)
	if err != nil {
		return 0, err
	}
	defer st.Close()
	res, err := st.run(ctx, nil)
	if err != nil {
		return 0, err
	}
	// "INSERT 0 n"
	fields := strings.Fields(res.Tag)
	return strconv.ParseInt(fields[len(fields)-1], 10, 64)
}

// PostgreSQL's CREATE_TABLE_LIKE_* options (parsenodes.h), the bits of
// TableLikeClause.Options mink reads.
const (
	likeDefaults = 1 << 3
	likeIdentity = 1 << 5
	likeIndexes  = 1 << 6
)

// likeColumns returns the columns CREATE TABLE … (LIKE t [INCLUDING …])
// copies from t, as PostgreSQL copies them: names, types and NOT NULL
// always; defaults with INCLUDING DEFAULTS, identity with INCLUDING
// IDENTITY (a sequence of the new table's own), the primary key with
// INCLUDING INDEXES. WITH options, partitioning and the bucket key are
// not copied. defs are the columns' SQL defaults ("" for none).
func (s *session) likeColumns(ctx context.Context, like *pg.TableLikeClause) (cols []catalog.Column, defs []string, pk []string, err error) {
	t, err := s.lookupTable(like.Relation)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := s.checkPrivileges(ctx, []tableNeed{{table: t.name, priv: catalog.PrivSelect}}); err != nil {
		return nil, nil, nil, err
	}
	for _, c := range t.spec.Columns {
		col := catalog.Column{Name: c.Name, Type: c.Type, NotNull: c.NotNull}
		def := ""
		switch c.Sequence {
		case catalog.SequenceSerial:
			if like.Options&likeDefaults != 0 {
				return nil, nil, nil, unsupported("LIKE %s INCLUDING DEFAULTS copies the serial column %q, whose sequence PostgreSQL would share between the tables: mink cannot", t.name, c.Name)
			}
		case catalog.SequenceAlways, catalog.SequenceByDefault:
			if like.Options&likeIdentity != 0 {
				col.Sequence = c.Sequence
			}
		case "":
			if like.Options&likeDefaults != 0 {
				def = c.Default
				col.Default = c.Default
			}
		}
		cols, defs = append(cols, col), append(defs, def)
	}
	if like.Options&likeIndexes != 0 {
		pk = t.spec.PrimaryKey
	}
	return cols, defs, pk, nil
}

// planOwnText plans a query of CREATE TABLE … AS or CREATE VIEW from its
// own deparsed text, where its nodes' positions point, and returns the
// text, the statement parsed from it and the (closed) plan, which
// describes the result columns. A parameter in it is 42P02.
func (s *session) planOwnText(ctx context.Context, query *pg.Node) (string, *pg.Node, *stmt, error) {
	text, err := pg.Deparse(query)
	if err != nil {
		return "", nil, nil, err
	}
	parsed, err := pg.Parse(text)
	if err != nil {
		return "", nil, nil, err
	}
	node := parsed.Stmts[0].Stmt
	q, err := s.plan(ctx, text, node, nil)
	if err != nil {
		return "", nil, nil, err
	}
	q.Close()
	if len(q.params) > 0 {
		return "", nil, nil, errorf(pgwire.CodeUndefinedParameter, "there is no parameter $1")
	}
	return text, node, q, nil
}
