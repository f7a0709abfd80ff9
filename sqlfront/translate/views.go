package translate

import (
	"fmt"

	pg "github.com/minkdb/mink/sqlfront/pgtree"
)

// View is a view as ExpandViews reads it.
type View struct {
	// Query is the view's SELECT, parsed, with the relations it reads
	// under their current names. ExpandViews takes it over: a lookup
	// returns a new tree on every call.
	Query *pg.Node
	// Columns are the view's column names, in order.
	Columns []string
}

// ViewLookup returns the view rv names; ok is false for a relation that is
// no view (the lookup judges its schema and database qualifiers).
type ViewLookup func(rv *pg.RangeVar) (view View, ok bool, err error)

// ErrViewRecursion is returned (wrapped) by ExpandViews for a view that
// reads itself.
type ErrViewRecursion struct{ View string }

func (e *ErrViewRecursion) Error() string {
	return fmt.Sprintf("infinite recursion detected in rules for relation %q", e.View)
}

// maxViewDepth bounds the nesting of views read through views.
const maxViewDepth = 64

// ExpandViews replaces, in place, every relation of node that names a view
// with the view's query, as PostgreSQL's rewriter does: `FROM v AS x(a)`
// becomes `FROM (SELECT c1, c2 FROM (query) AS v(c1, c2)) AS x(a, c2)`. The
// outer SELECT keeps exactly the view's columns, so a `SELECT *` in the
// view's query does not grow the view when its table gains a column. Views
// read through views are expanded too; one that reads itself is an
// *ErrViewRecursion. Names of CTEs in the statement shadow views of the same
// name. It reports whether it replaced anything.
//
// Only relations under *pg.Node wrappers (FROM items, JOIN arms) are
// replaced: the target of an INSERT, UPDATE, DELETE or COPY is the caller's
// to refuse.
func ExpandViews(node *pg.Node, lookup ViewLookup) (bool, error) {
	return expandViews(node, lookup, nil)
}

func expandViews(node *pg.Node, lookup ViewLookup, stack []string) (bool, error) {
	ctes := map[string]bool{}
	pg.Visit(node, func(n *pg.Node) bool {
		if cte := n.GetCommonTableExpr(); cte != nil {
			ctes[cte.Ctename] = true
		}
		return true
	})
	var err error
	changed := false
	pg.Visit(node, func(n *pg.Node) bool {
		if err != nil {
			return false
		}
		rv := n.GetRangeVar()
		if rv == nil || (rv.Schemaname == "" && ctes[rv.Relname]) {
			return true
		}
		view, ok, lerr := lookup(rv)
		if lerr != nil {
			err = lerr
			return false
		}
		if !ok {
			return true
		}
		for _, name := range stack {
			if name == rv.Relname {
				err = &ErrViewRecursion{View: rv.Relname}
				return false
			}
		}
		if len(stack) >= maxViewDepth {
			err = &ErrViewRecursion{View: rv.Relname}
			return false
		}
		if _, err = expandViews(view.Query, lookup, append(stack, rv.Relname)); err != nil {
			return false
		}
		n.Node = &pg.Node_RangeSubselect{RangeSubselect: viewSubselect(rv, view)}
		changed = true
		return false
	})
	return changed, err
}

// viewSubselect is the FROM item that reads view where rv named it.
func viewSubselect(rv *pg.RangeVar, view View) *pg.RangeSubselect {
	inner := &pg.SelectStmt{
		FromClause: []*pg.Node{{Node: &pg.Node_RangeSubselect{RangeSubselect: &pg.RangeSubselect{
			Subquery: view.Query,
			Alias:    &pg.Alias{Aliasname: rv.Relname, Colnames: stringNodes(view.Columns)},
		}}}},
		LimitOption: pg.LimitOption_LIMIT_OPTION_DEFAULT,
		Op:          pg.SetOperation_SETOP_NONE,
	}
	for _, c := range view.Columns {
		inner.TargetList = append(inner.TargetList, &pg.Node{Node: &pg.Node_ResTarget{ResTarget: &pg.ResTarget{
			Val: &pg.Node{Node: &pg.Node_ColumnRef{ColumnRef: &pg.ColumnRef{Fields: pg.Names(rv.Relname, c)}}},
		}}})
	}
	alias := &pg.Alias{Aliasname: rv.Relname}
	cols := view.Columns
	if rv.Alias != nil {
		alias.Aliasname = rv.Alias.Aliasname
		for i, c := range rv.Alias.Colnames {
			if i < len(cols) {
				cols = append(cols[:i:i], append([]string{c.GetString_().GetSval()}, cols[i+1:]...)...)
			}
		}
	}
	alias.Colnames = stringNodes(cols)
	return &pg.RangeSubselect{Subquery: &pg.Node{Node: &pg.Node_SelectStmt{SelectStmt: inner}}, Alias: alias}
}

func stringNodes(names []string) []*pg.Node {
	out := make([]*pg.Node, len(names))
	for i, n := range names {
		out[i] = pg.MakeStrNode(n)
	}
	return out
}
