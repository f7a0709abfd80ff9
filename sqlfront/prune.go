package sqlfront

import (
	"context"
	"slices"
	"strings"

	pg "github.com/minkdb/mink/sqlfront/pgtree"

	"github.com/minkdb/mink/catalog"
)

// Partition pruning. A SELECT over one partitioned table whose WHERE clause
// fixes the partition column with = or IN reads only those partitions. The
// rule is deliberately narrow — one table in FROM, top-level AND conjuncts,
// constants or parameters — because a wrong prune silently drops rows.

// partitionFilter is the pruning a statement allows: the values of the
// partition column it can match, by table.
type partitionFilter map[catalog.TableID]map[string]bool

// prunePlan is what planning found: the table and the expressions whose
// values are the partitions to read.
type prunePlan struct {
	table *tableInfo
	exprs []*pg.Node // constants or parameters
}

// planPruning inspects a SELECT; nil means read every partition.
func (s *session) planPruning(node *pg.Node) *prunePlan {
	sel := node.GetSelectStmt()
	if sel == nil || sel.Op != pg.SetOperation_SETOP_NONE || sel.WithClause != nil || len(sel.FromClause) != 1 || sel.WhereClause == nil {
		return nil
	}
	rv := sel.FromClause[0].GetRangeVar()
	if rv == nil || len(pg.RangeVars(node)) != 1 {
		// Another scan of the table (a subquery) must see every partition.
		return nil
	}
	name, err := s.relName(rv)
	if err != nil {
		return nil
	}
	table, err := s.f.lookupTableByName(name)
	if err != nil || table.partCol < 0 {
		return nil
	}
	qualifier := name
	if rv.Alias != nil {
		qualifier = rv.Alias.Aliasname
	}
	isValue := func(n *pg.Node) bool {
		return n.GetParamRef() != nil || isConstant(n)
	}
	conds, _ := whereConds(sel.WhereClause, func(cr *pg.ColumnRef) (int, bool) {
		return tableColumn(cr, qualifier, table)
	})
	for _, c := range conds {
		if c.col != table.partCol {
			continue
		}
		switch c.op {
		case condEq:
			if isValue(c.values[0]) {
				return &prunePlan{table: table, exprs: c.values}
			}
		case condIn:
			if !slices.ContainsFunc(c.values, func(n *pg.Node) bool { return !isValue(n) }) {
				return &prunePlan{table: table, exprs: c.values}
			}
		}
	}
	return nil
}

// filter evaluates the plan's values with the statement's arguments.
func (s *session) pruneFilter(ctx context.Context, p *prunePlan, args []any) (partitionFilter, error) {
	if p == nil {
		return nil, nil
	}
	typ := p.table.cols[p.table.partCol].Type
	values := map[string]bool{}
	for _, e := range p.exprs {
		lit, err := deparseExpr(e)
		if err != nil {
			return nil, err
		}
		var v string
		if pr := e.GetParamRef(); pr != nil {
			if int(pr.Number) > len(args) || args[pr.Number-1] == nil {
				continue // = NULL matches no row
			}
			v, err = s.canonicalPartitionValueArg(ctx, typ, args[pr.Number-1])
		} else {
			if strings.EqualFold(lit, "NULL") {
				continue
			}
			v, err = s.canonicalPartitionValue(ctx, lit, typ)
		}
		if err != nil {
			return nil, err
		}
		values[v] = true
	}
	return partitionFilter{p.table.id: values}, nil
}
