package sqlfront_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/minkdb/mink/internal/minktest"
)

// A smoke test through pgx: create, insert, query, copy.
func TestSmokePgx(t *testing.T) {
	n := minktest.Start(t, minktest.Options{})
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, n.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE TABLE e (id bigint NOT NULL, v double precision, s text) WITH (buckets = 3, bucket_key = 'id')"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO e VALUES ($1, $2, $3)", int64(1), 1.5, "one"); err != nil {
		t.Fatal(err)
	}
	rows := [][]any{{int64(2), 2.5, "two"}, {int64(3), nil, "three"}}
	nCopied, err := conn.CopyFrom(ctx, pgx.Identifier{"e"}, []string{"id", "v", "s"}, pgx.CopyFromRows(rows))
	if err != nil || nCopied != 2 {
		t.Fatalf("copy: %d %v", nCopied, err)
	}
	var count int64
	var sum float64
	if err := conn.QueryRow(ctx, "SELECT count(*), sum(v) FROM e").Scan(&count, &sum); err != nil {
		t.Fatal(err)
	}
	if count != 3 || sum != 4 {
		t.Fatalf("count %d sum %v", count, sum)
	}
}

// Schema-qualified names reach mink's tables.
func TestPublicSchemaQualified(t *testing.T) {
	n := minktest.Start(t, minktest.Options{})
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, n.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, sql := range []string{
		"CREATE TABLE public.q (a int)",
		"INSERT INTO public.q VALUES (1), (2)",
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	var sum int64
	if err := conn.QueryRow(ctx, `SELECT sum(x.a) FROM public.q x JOIN "public".q y ON x.a = y.a`).Scan(&sum); err != nil || sum != 3 {
		t.Fatalf("sum %d %v", sum, err)
	}
	if _, err := conn.Exec(ctx, "SELECT * FROM other.q"); err == nil {
		t.Fatal("schema other resolved")
	}
}
