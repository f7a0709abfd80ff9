package sqlfront

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5/pgtype"

	pg "github.com/minkdb/mink/sqlfront/pgtree"
	"github.com/minkdb/mink/sqlfront/translate"

	"github.com/minkdb/mink/buckets/routing"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/sqltypes"
	"github.com/minkdb/mink/sqlfront/pgwire"
)

// lookupPlan is a point lookup: a SELECT of columns of one primary-key
// table whose WHERE fixes every key column by equality with a constant or
// a parameter. It reads the one row from the bucket's tablet without the
// engine.
type lookupPlan struct {
	table *tableInfo
	out   []int // result columns, as table column indexes
	// keys holds, per primary-key column (key order), the constant value
	// or the parameter number (param > 0).
	keys []lookupKey
	// keyCols are the primary key's columns as a schema of their own;
	// bucketKey the bucket key's positions in it.
	keyCols   []sqltypes.Column
	bucketKey []int
	partPos   int // the partition column's position in the key, or -1

	// arrowKey: a key column needs conforming (varchar(n), char(n), json),
	// so the key goes through a one-row Arrow batch and sqltypes.Conform;
	// otherwise it is encoded straight from the Go values.
	arrowKey bool

	// Reused between executions (a statement runs on one goroutine).
	keyBuilders []array.Builder
	keyFields   []arrow.Field
	plainKey    bool // every key column's Arrow type needs no conforming
	vals, phys  []any
	keyBuf      []byte
	routeBuf    []byte
}

func (p *lookupPlan) close() {
	for _, b := range p.keyBuilders {
		b.Release()
	}
	p.keyBuilders = nil
}

type lookupKey struct {
	value any
	param int
}

// planLookup recognizes a point lookup. ok is false when sel is anything
// else; the engine then plans it.
func (s *session) planLookup(ctx context.Context, sel *pg.SelectStmt, paramOIDs []uint32) (*stmt, bool) {
	p, params, ok := s.matchLookup(ctx, sel, paramOIDs)
	if !ok {
		return nil, false
	}
	cols := make([]pgwire.Column, len(p.out))
	for j, i := range p.out {
		c := p.table.cols[i]
		cols[j] = pgwire.Column{Name: c.Name, TypeOID: c.Type.OID(), TypeSize: c.Type.Len(), TypeMod: c.Type.TypMod()}
	}
	translate.ColumnNames(&pg.Node{Node: &pg.Node_SelectStmt{SelectStmt: sel}}, cols)
	st := &stmt{params: params, columns: cols, close: p.close}
	st.run = func(ctx context.Context, args []any) (pgwire.Result, error) {
		if err := s.checkTx(); err != nil {
			return pgwire.Result{}, err
		}
		row, err := s.runLookup(ctx, p, args)
		if err != nil {
			return pgwire.Result{}, err
		}
		var rows [][]any
		if row != nil {
			rows = [][]any{row}
		}
		return pgwire.Result{Rows: pgwire.RowsFromSlice(st.columns, rows)}, nil
	}
	return st, true
}

// matchLookup checks the shape of sel and returns the plan and the
// parameter types.
func (s *session) matchLookup(ctx context.Context, sel *pg.SelectStmt, paramOIDs []uint32) (*lookupPlan, []uint32, bool) {
	if sel == nil || sel.Op != pg.SetOperation_SETOP_NONE || sel.WithClause != nil || len(sel.DistinctClause) > 0 ||
		len(sel.GroupClause) > 0 || sel.HavingClause != nil || len(sel.WindowClause) > 0 || sel.IntoClause != nil ||
		len(sel.LockingClause) > 0 || len(sel.ValuesLists) > 0 || sel.LimitCount != nil || sel.LimitOffset != nil ||
		len(sel.SortClause) > 0 || len(sel.FromClause) != 1 || sel.WhereClause == nil {
		return nil, nil, false
	}
	rv := sel.FromClause[0].GetRangeVar()
	if rv == nil || !rv.Inh || rv.Catalogname != "" || (rv.Schemaname != "" && rv.Schemaname != "public") {
		return nil, nil, false
	}
	if len(s.tx.pending) > 0 || s.truncatedInTx(rv.Relname) {
		return nil, nil, false // the engine sees the block's writes (and errors)
	}
	table, err := s.f.lookupTableByName(rv.Relname)
	if err != nil || !table.isPK() {
		return nil, nil, false
	}
	alias := table.name
	if rv.Alias != nil {
		if len(rv.Alias.Colnames) > 0 {
			return nil, nil, false
		}
		alias = rv.Alias.Aliasname
	}
	// column resolves a column reference to a table column.
	column := func(n *pg.Node) (int, bool, bool) { // index, star, ok
		cr := n.GetColumnRef()
		if cr == nil || len(cr.Fields) == 0 || len(cr.Fields) > 2 {
			return 0, false, false
		}
		if len(cr.Fields) == 2 && cr.Fields[0].GetString_().GetSval() != alias {
			return 0, false, false
		}
		last := cr.Fields[len(cr.Fields)-1]
		if last.GetAStar() != nil {
			return 0, true, true
		}
		name := last.GetString_().GetSval()
		i, ok := table.colIdx[name]
		return i, false, ok
	}
	p := &lookupPlan{table: table, partPos: -1}
	for _, t := range sel.TargetList {
		rt := t.GetResTarget()
		if rt == nil || len(rt.Indirection) > 0 {
			return nil, nil, false
		}
		i, star, ok := column(rt.Val)
		if !ok {
			return nil, nil, false
		}
		if star {
			if rt.Name != "" {
				return nil, nil, false
			}
			for i := range table.cols {
				p.out = append(p.out, i)
			}
			continue
		}
		p.out = append(p.out, i)
	}
	params, maxParam, ok := s.matchKeyWhere(ctx, p, sel.WhereClause, alias, paramOIDs)
	if !ok {
		return nil, nil, false
	}
	for _, oid := range params {
		if oid == 0 {
			return nil, nil, false // a parameter the WHERE does not use
		}
	}
	if len(params) != maxParam && maxParam > 0 {
		return nil, nil, false
	}
	return p, params, true
}

// matchKeyWhere fills p.keys (and the key's columns) from where, a
// conjunction of key column = constant or parameter fixing every column
// of p.table's primary key once; qualifier is the table's alias or name. It
// returns the parameter types with the key parameters typed as their
// columns, and the highest parameter number the WHERE uses.
func (s *session) matchKeyWhere(ctx context.Context, p *lookupPlan, where *pg.Node, qualifier string, paramOIDs []uint32) ([]uint32, int, bool) {
	table := p.table
	// A conjunction of key = value, each key column once.
	conds, all := whereConds(where, func(cr *pg.ColumnRef) (int, bool) { return tableColumn(cr, qualifier, table) })
	if !all {
		return nil, 0, false
	}
	pk := table.pkCols()
	p.keys = make([]lookupKey, len(pk))
	set := make([]bool, len(pk))
	params := append([]uint32(nil), paramOIDs...)
	maxParam := 0
	for _, c := range conds {
		if c.op != condEq {
			return nil, 0, false
		}
		i, r := c.col, c.values[0]
		k := -1
		for j, c := range pk {
			if c == i {
				k = j
			}
		}
		if k < 0 || set[k] {
			return nil, 0, false
		}
		set[k] = true
		typ := table.cols[i].Type
		if pr := r.GetParamRef(); pr != nil {
			n := int(pr.Number)
			for len(params) < n {
				params = append(params, 0)
			}
			if params[n-1] != 0 && params[n-1] != typ.OID() {
				return nil, 0, false
			}
			params[n-1] = typ.OID()
			p.keys[k] = lookupKey{param: n}
			maxParam = max(maxParam, n)
			continue
		}
		v, ok := constantKey(r, typ)
		if !ok {
			// Other types: the engine reads the constant once, as INSERT
			// would read it into the column.
			if v, ok = s.readConstant(ctx, r, typ); !ok {
				return nil, 0, false
			}
		}
		p.keys[k] = lookupKey{value: v}
	}
	for _, ok := range set {
		if !ok {
			return nil, 0, false
		}
	}
	for j, i := range pk {
		p.keyCols = append(p.keyCols, table.cols[i])
		if i == table.partCol {
			p.partPos = j
		}
		switch table.cols[i].Type.Kind() {
		case sqltypes.Varchar, sqltypes.Char, sqltypes.JSON, sqltypes.JSONB:
			p.arrowKey = true
		}
	}
	p.vals = make([]any, len(pk))
	p.phys = make([]any, len(pk))
	for _, b := range table.keyCols {
		for j, i := range pk {
			if i == b {
				p.bucketKey = append(p.bucketKey, j)
			}
		}
	}
	return params, maxParam, true
}

// constantKey is the Go value of a constant compared with a key column of
// type typ, for the types whose constants need no engine to read: integers
// and text.
func constantKey(n *pg.Node, typ sqltypes.Type) (any, bool) {
	c := n.GetAConst()
	if c == nil || c.Isnull {
		return nil, false
	}
	switch typ.Kind() {
	case sqltypes.Int2, sqltypes.Int4, sqltypes.Int8:
		switch v := c.Val.(type) {
		case *pg.A_Const_Ival:
			return int64(v.Ival.Ival), true
		case *pg.A_Const_Sval:
			// '42', as drivers that interpolate parameters send them.
			if !translate.IntegerInput(v.Sval.Sval) {
				return nil, false
			}
			i, err := strconv.ParseInt(strings.TrimSpace(v.Sval.Sval), 10, 64)
			return i, err == nil
		}
	case sqltypes.Text, sqltypes.Varchar:
		if sv, ok := c.Val.(*pg.A_Const_Sval); ok {
			return sv.Sval.Sval, true
		}
	}
	return nil, false
}

// readConstant evaluates a string literal (perhaps cast to typ) as a value
// of typ, the way INSERT reads it; false if it is something else or does
// not convert (the engine then plans the query and reports what is wrong).
func (s *session) readConstant(ctx context.Context, n *pg.Node, typ sqltypes.Type) (any, bool) {
	// Only string literals: PostgreSQL reads an untyped one as the key
	// column's type, so the value is exactly what the comparison uses. A
	// number compared with another type (id = 1.5) compares in a wider
	// type, which the engine does.
	lit, cast, ok := translate.StringLiteral(n)
	if !ok || (cast.Valid() && cast != typ) {
		return nil, false
	}
	replaced, err := translate.TypedLiteral(lit, typ)
	if err != nil {
		return nil, false
	}
	if replaced != nil {
		n = replaced
	}
	text, err := deparseExpr(n)
	if err != nil {
		return nil, false
	}
	v, err := s.constantValue(ctx, "lookup", text, typ)
	if err != nil || v == nil {
		return nil, false
	}
	return v, true
}

// runLookup reads the row of the key; nil when there is none.
func (s *session) runLookup(ctx context.Context, p *lookupPlan, args []any) ([]any, error) {
	b, key, ok, err := s.lookupTarget(ctx, p, args)
	if err != nil || !ok {
		return nil, err
	}
	codec := b.Codec()
	row, found, err := b.Get(ctx, key)
	if err != nil || !found {
		return nil, err
	}
	out := make([]any, len(p.out))
	if err := codec.DecodeValues(row, p.out, out); err != nil {
		return nil, err
	}
	for j, i := range p.out {
		out[j] = wireValue(p.table.cols[i].Type, out[j])
	}
	return out, nil
}

// lookupTarget is where the key a plan's values give lives: its bucket as
// the session sees it (a block's own writes too) and the encoded key; ok
// is false when no row can have the key (a NULL, a value its column cannot
// hold, a partition that does not exist).
func (s *session) lookupTarget(ctx context.Context, p *lookupPlan, args []any) (kvBucket, []byte, bool, error) {
	vals := p.vals
	for j, k := range p.keys {
		if k.param > 0 {
			if k.param > len(args) {
				return nil, nil, false, errorf(pgwire.CodeProtocolViolation, "bind message supplies %d parameters, but prepared statement requires %d", len(args), k.param)
			}
			vals[j] = args[k.param-1]
		} else {
			vals[j] = k.value
		}
		if vals[j] == nil {
			return nil, nil, false, nil // key = NULL matches nothing
		}
	}
	// The key's columns as their Arrow types' Go values (kv's and routing's
	// Go values), or as a one-row batch when they need conforming.
	var keyRec arrow.RecordBatch
	var part string
	route := p.routeBuf[:0]
	var err error
	if p.arrowKey {
		var ok bool
		if keyRec, ok = keyRecord(p, vals); !ok {
			return nil, nil, false, nil // no value of the column's type equals it
		}
		defer keyRec.Release()
		if p.partPos >= 0 {
			if part, err = routing.PartitionValue(keyRec.Column(p.partPos), 0); err != nil {
				return nil, nil, false, err
			}
		}
		if route, err = routing.RowKey(route, keyRec, p.bucketKey, 0); err != nil {
			return nil, nil, false, fmt.Errorf("route key: %w", err)
		}
	} else {
		if !storedKeyValues(p.keyCols, vals, p.phys) {
			return nil, nil, false, nil // no value of the column's type equals it
		}
		if p.partPos >= 0 {
			if part, err = routing.PartitionValueOf(p.keyCols[p.partPos].Type.ArrowType(), p.phys[p.partPos]); err != nil {
				return nil, nil, false, err
			}
		}
		for _, j := range p.bucketKey {
			if route, err = routing.AppendValue(route, p.keyCols[j].Type.ArrowType(), p.phys[j]); err != nil {
				return nil, nil, false, fmt.Errorf("route key: column %q: %w", p.keyCols[j].Name, err)
			}
		}
	}
	p.routeBuf = route
	id, ok, err := s.lookupBucket(ctx, p, part, route)
	if err != nil || !ok {
		return nil, nil, false, err
	}
	b, err := s.kvBucket(ctx, id, p.table) // a block's own writes too
	if err != nil {
		return nil, nil, false, err
	}
	codec := b.Codec()
	var key []byte
	if keyRec != nil {
		key, err = codec.AppendKeyOf(p.keyBuf[:0], keyRec.Columns(), 0)
	} else {
		key, err = codec.AppendKeyValues(p.keyBuf[:0], p.phys)
	}
	if err != nil {
		return nil, nil, false, err
	}
	p.keyBuf = key
	return b, key, true, nil
}

// storedKeyValues converts key values as pgwire decodes them (or as
// constants read) into the Go values of the key columns' Arrow types,
// which kv and routing encode: what appendValue would append to a builder
// of the column. False if a value does not fit its column, so no row can
// have it. The columns are of the types that need no conforming (not
// varchar(n), char(n) or json).
func storedKeyValues(cols []sqltypes.Column, vals, out []any) bool {
	for j, c := range cols {
		v := vals[j]
		var ok bool
		switch c.Type.Kind() {
		case sqltypes.Bool:
			out[j], ok = v.(bool)
		case sqltypes.Int2:
			var x int64
			if x, ok = asInt(v); ok && x >= -1<<15 && x < 1<<15 {
				out[j] = int16(x)
			} else {
				ok = false
			}
		case sqltypes.Int4:
			var x int64
			if x, ok = asInt(v); ok && x >= -1<<31 && x < 1<<31 {
				out[j] = int32(x)
			} else {
				ok = false
			}
		case sqltypes.Int8:
			var x int64
			x, ok = asInt(v)
			out[j] = x
		case sqltypes.Float4:
			switch x := v.(type) {
			case float32:
				out[j], ok = x, true
			case float64:
				out[j], ok = float32(x), true
			}
		case sqltypes.Float8:
			switch x := v.(type) {
			case float64:
				out[j], ok = x, true
			case float32:
				out[j], ok = float64(x), true
			}
		case sqltypes.Numeric:
			if n, isNum := v.(pgtype.Numeric); isNum {
				dt := c.Type.ArrowType().(*arrow.Decimal128Type)
				d, err := numericToDecimal(n, dt.Precision, dt.Scale)
				out[j], ok = d, err == nil
			}
		case sqltypes.Text:
			switch x := v.(type) {
			case string:
				out[j], ok = x, true
			case []byte:
				out[j], ok = string(x), true
			}
		case sqltypes.Bytea:
			switch x := v.(type) {
			case []byte:
				out[j], ok = x, true
			case string:
				out[j], ok = []byte(x), true
			}
		case sqltypes.UUID:
			if x, isUUID := v.([16]byte); isUUID {
				out[j], ok = x[:], true
			}
		case sqltypes.Date:
			if x, isTime := v.(time.Time); isTime {
				out[j], ok = arrow.Date32FromTime(x), true
			} else if sign := infinity(v); sign != 0 {
				out[j], ok = arrow.Date32(sign*date32Infinity), true
			}
		case sqltypes.Timestamp, sqltypes.Timestamptz:
			if x, isTime := v.(time.Time); isTime {
				out[j], ok = arrow.Timestamp(x.UnixMicro()), true
			} else if sign := infinity(v); sign != 0 {
				out[j], ok = arrow.Timestamp(int64(sign)*timestampInfinity), true
			}
		case sqltypes.Time:
			if x, isTime := v.(pgtype.Time); isTime {
				out[j], ok = arrow.Time64(x.Microseconds), true
			}
		case sqltypes.Interval:
			if x, isIv := v.(pgtype.Interval); isIv {
				out[j], ok = arrow.MonthDayNanoInterval{Months: x.Months, Days: x.Days, Nanoseconds: x.Microseconds * 1000}, true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// wireValue turns a stored column value, as kv decodes it (the Go value of
// the column's Arrow type), into the Go value the engine's rows give for a
// column of type t (engine.GoValue), which pgwire sends.
func wireValue(t sqltypes.Type, v any) any {
	switch x := v.(type) {
	case nil, bool, int16, int32, int64, float32, float64, string:
		return v
	case []byte:
		if t.Kind() == sqltypes.UUID && len(x) == 16 {
			return [16]byte(x)
		}
		return x
	case decimal128.Num:
		dt := t.ArrowType().(*arrow.Decimal128Type)
		return pgtype.Numeric{Int: x.BigInt(), Exp: -dt.Scale, Valid: true}
	case arrow.Date32:
		switch x {
		case math.MaxInt32:
			return pgtype.Date{InfinityModifier: pgtype.Infinity, Valid: true}
		case -math.MaxInt32:
			return pgtype.Date{InfinityModifier: pgtype.NegativeInfinity, Valid: true}
		}
		return time.Unix(int64(x)*86400, 0).UTC()
	case arrow.Time64:
		return pgtype.Time{Microseconds: int64(x), Valid: true}
	case arrow.Timestamp:
		if x == math.MaxInt64 || x == -math.MaxInt64 {
			inf := pgtype.Infinity
			if x < 0 {
				inf = pgtype.NegativeInfinity
			}
			if t.Kind() == sqltypes.Timestamptz {
				return pgtype.Timestamptz{InfinityModifier: inf, Valid: true}
			}
			return pgtype.Timestamp{InfinityModifier: inf, Valid: true}
		}
		return time.UnixMicro(int64(x)).UTC()
	case arrow.MonthDayNanoInterval:
		return pgtype.Interval{Months: x.Months, Days: x.Days, Microseconds: x.Nanoseconds / 1000, Valid: true}
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = wireValue(t.Elem(), e)
		}
		return out
	}
	return v
}

// keyRecord builds a one-row batch of the key columns; false if a value
// does not fit its column (so no row can have it).
func keyRecord(p *lookupPlan, vals []any) (arrow.RecordBatch, bool) {
	mem := memory.DefaultAllocator
	if p.keyBuilders == nil {
		p.plainKey = true
		for _, c := range p.keyCols {
			dt := c.Type.ArrowType()
			switch c.Type.Kind() {
			case sqltypes.UUID:
				dt = &arrow.FixedSizeBinaryType{ByteWidth: 16}
			case sqltypes.JSON, sqltypes.JSONB:
				dt = arrow.BinaryTypes.String
			}
			switch c.Type.Kind() {
			case sqltypes.Int2, sqltypes.Int4, sqltypes.Int8, sqltypes.Text:
			default:
				p.plainKey = false
			}
			p.keyFields = append(p.keyFields, arrow.Field{Name: c.Name, Type: dt, Nullable: true})
			p.keyBuilders = append(p.keyBuilders, array.NewBuilder(mem, dt))
		}
	}
	cols := make([]arrow.Array, len(p.keyCols))
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	ok := true
	for j, c := range p.keyCols {
		if err := appendValue(p.keyBuilders[j], c.Type, vals[j]); err != nil {
			ok = false
		}
		cols[j] = p.keyBuilders[j].NewArray()
	}
	if !ok {
		return nil, false
	}
	rec := array.NewRecordBatch(arrow.NewSchema(p.keyFields, nil), cols, 1)
	if p.plainKey {
		return rec, true
	}
	defer rec.Release()
	conformed, err := sqltypes.Conform(p.table.name, p.keyCols, rec, mem)
	if err != nil {
		return nil, false
	}
	return conformed, true
}

// lookupBucket is the bucket holding the key, given its partition value
// (partitioned tables) and its routing key; false if its partition does
// not exist.
func (s *session) lookupBucket(ctx context.Context, p *lookupPlan, part string, route []byte) (catalog.BucketID, bool, error) {
	var ids []catalog.BucketID
	exists := false
	s.f.cfg.Meta.Read(func(v *catalog.View) { _, exists = v.Tables[p.table.id] })
	if !exists {
		// Dropped since the statement was prepared: a table of the same
		// name and definition takes its place, as a re-planned statement
		// would read it.
		t, err := s.f.lookupTableByName(p.table.name)
		if err != nil {
			return 0, false, err
		}
		if !sameDefinition(t.spec, p.table.spec) {
			return 0, false, unsupported("cached plan must not change result type")
		}
		p.table = t
	}
	if p.partPos < 0 {
		s.f.cfg.Meta.Read(func(v *catalog.View) {
			if t, ok := v.Tables[p.table.id]; ok {
				ids = t.Buckets
			}
		})
	} else {
		s.f.cfg.Meta.Read(func(v *catalog.View) {
			if t, ok := v.Tables[p.table.id]; ok {
				for _, pt := range t.Partitions {
					if pt.Value == part {
						ids = pt.Buckets
					}
				}
			}
		})
	}
	if len(ids) == 0 {
		if p.partPos < 0 {
			return 0, false, undefinedTable(p.table.name)
		}
		return 0, false, nil
	}
	return ids[routing.Bucket(route, len(ids))], true, nil
}

// sameDefinition reports whether two tables have the same columns, key,
// partitioning and bucket key, so that a point-lookup plan made for one
// serves the other.
func sameDefinition(a, b catalog.TableSpec) bool {
	return reflect.DeepEqual(a.Columns, b.Columns) && reflect.DeepEqual(a.PrimaryKey, b.PrimaryKey) &&
		a.PartitionBy == b.PartitionBy && reflect.DeepEqual(a.BucketKey, b.BucketKey)
}
