package pgtree

import (
	"fmt"

	pg "github.com/pganalyze/pg_query_go/v6"
	"github.com/pganalyze/pg_query_go/v6/parser"
)

// SyntaxError is the parser's error for SQL it cannot read: a message and
// the 1-based cursor position PostgreSQL reports.
type SyntaxError = parser.Error

// Parse parses a string of zero or more statements.
func Parse(sql string) (*ParseResult, error) {
	return pg.Parse(sql)
}

// ParseExpr parses one SQL expression.
func ParseExpr(expr string) (*Node, error) {
	tree, err := pg.Parse("SELECT " + expr)
	if err != nil {
		return nil, err
	}
	return tree.Stmts[0].Stmt.GetSelectStmt().TargetList[0].GetResTarget().Val, nil
}

// version is the parse tree version the deparser expects.
var version = func() int32 {
	tree, err := pg.Parse("SELECT 1")
	if err != nil {
		panic(fmt.Sprintf("pgtree: pg_query cannot parse SELECT 1: %v", err))
	}
	return tree.Version
}()

// Deparse renders one statement node back to SQL.
func Deparse(stmt *Node) (string, error) {
	return pg.Deparse(&pg.ParseResult{Version: version, Stmts: []*pg.RawStmt{{Stmt: stmt}}})
}

// MakeStrNode returns a String node, as the grammar builds for a name.
func MakeStrNode(s string) *Node {
	return pg.MakeStrNode(s)
}
