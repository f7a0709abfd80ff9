package sqlfront

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/minkdb/mink/sqlfront/engine"
	pg "github.com/pganalyze/pg_query_go/v6"
)

func TestScratchDuck(t *testing.T) {
	db, err := engine.Open(engine.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	c, err := db.Conn(ctx, engine.ConnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	data, _ := os.ReadFile("/tmp/pgcat-work/scratch.sql")
	for _, q := range strings.Split(string(data), ";;\n") {
		q = strings.TrimSpace(q)
		if q == "" {
			continue
		}
		rows, err := c.Query(ctx, q)
		if err != nil {
			fmt.Printf("Q: %s\n  ERR: %v\n", q, err)
			continue
		}
		var cols []string
		for _, col := range rows.Columns() {
			cols = append(cols, col.Name+":"+col.DuckDBType)
		}
		fmt.Printf("Q: %s\n  COLS %v\n", q, cols)
		for rows.Next() {
			fmt.Printf("  %#v\n", rows.Values())
		}
		if err := rows.Err(); err != nil {
			fmt.Printf("  ROWERR: %v\n", err)
		}
		rows.Close()
	}
}

func TestScratchRewrite(t *testing.T) {
	data, _ := os.ReadFile("/tmp/pgcat-work/rw.sql")
	for _, q := range strings.Split(string(data), ";;\n") {
		if strings.TrimSpace(q) == "" {
			continue
		}
		tree, err := pg.Parse(q)
		if err != nil {
			t.Fatal(err)
		}
		n := tree.Stmts[0].Stmt
		rw := newCatalogRewriter(catalogConsts{user: "mink", database: "mink", version: "v", pid: 1})
		rw.rewrite(n)
		text, err := deparse(n)
		fmt.Printf("catalog=%v err=%v rels=%v\n%s\n\n", rw.catalog, rw.err, rw.rels, text)
	}
}

func TestScratchRegister(t *testing.T) {
	db, err := engine.Open(engine.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	c, err := db.Conn(ctx, engine.ConnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	in := &catalogInput{user: "mink", database: "mink"}
	schema, rec := buildRelation("pg_catalog.pg_namespace", in)
	if _, err := c.RegisterRecords(ctx, "pg_catalog.pg_namespace", schema, []arrow.RecordBatch{rec}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`SELECT * FROM "pg_catalog.pg_namespace"`, `SELECT * FROM temp.main."pg_catalog.pg_namespace"`, `SELECT table_schema, table_name FROM information_schema.tables`} {
		rows, err := c.Query(ctx, q)
		if err != nil {
			t.Log(err)
			continue
		}
		for rows.Next() {
			t.Log(rows.Values())
		}
		rows.Close()
	}
}
