package sqlfront_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/minkdb/mink/internal/minktest"
)

var pgcatalogRewrite = flag.Bool("pgcatalog.rewrite", false, "rewrite testdata/pgcatalog/*.txt with the output mink gives now")

// catalogTables are the tables the catalog tests describe: every column
// type, defaults, NOT NULL, a partitioned table, WITH options, names
// that need quoting and a composite primary key.
var catalogTables = []string{
	`CREATE TABLE orders (id bigint NOT NULL, customer text NOT NULL, amount numeric(12,2), ts timestamptz) WITH (buckets = 8)`,
	`CREATE TABLE clicks (user_id bigint, url text, ts timestamptz, dt date) PARTITION BY LIST (dt) WITH (buckets = 4, bucket_key = 'user_id')`,
	`CREATE TABLE types (a smallint, b integer NOT NULL DEFAULT 7, c bigint DEFAULT -1, d real, e double precision DEFAULT 1.5,
		f numeric, g numeric(12,2) DEFAULT 0.5, h text DEFAULT 'x', i varchar(20) DEFAULT 'it''s', j varchar, k char(3),
		l bytea, m date DEFAULT '2024-01-01', n time, o timestamp, p timestamptz, q interval, r uuid, s json, t jsonb,
		u boolean DEFAULT true) WITH (buckets = 2)`,
	`CREATE TABLE "Mixed Case" ("Id" bigint, "select" text) WITH (buckets = 1)`,
	`CREATE TABLE accounts (region text, id bigint, balance numeric(12,2) DEFAULT 0, PRIMARY KEY (region, id)) WITH (buckets = 2)`,
}

func startCatalogNode(t *testing.T) *minktest.Node {
	t.Helper()
	n := minktest.Start(t, minktest.Options{})
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, n.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, ddl := range catalogTables {
		if _, err := conn.Exec(ctx, ddl); err != nil {
			t.Fatalf("%s: %v", ddl, err)
		}
	}
	return n
}

// TestCatalogPsql runs psql's describe commands and compares their output
// with testdata/pgcatalog/psql.txt.
func TestCatalogPsql(t *testing.T) {
	bin, err := exec.LookPath("psql")
	if err != nil {
		t.Fatal("psql not found in PATH: run scripts/install-test-deps.sh (or `make test-deps`) to install it")
	}
	n := startCatalogNode(t)
	path := filepath.Join("testdata", "pgcatalog", "psql.txt")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The file is a header, then commands ("> \\d t") each followed by
	// the output psql prints for it (stdout and stderr).
	var header, out strings.Builder
	type example struct{ command, want string }
	var examples []example
	for _, line := range strings.SplitAfter(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "> "):
			examples = append(examples, example{command: strings.TrimSuffix(line[2:], "\n")})
		case len(examples) == 0:
			header.WriteString(line)
		default:
			examples[len(examples)-1].want += line
		}
	}
	out.WriteString(header.String())
	for _, ex := range examples {
		cmd := exec.Command(bin, "-X", "-c", ex.command, n.DSN)
		cmd.Env = append(os.Environ(), "PAGER=", "PSQL_PAGER=", "PGTZ=UTC")
		got, _ := cmd.CombinedOutput()
		out.WriteString("> " + ex.command + "\n")
		out.Write(got)
		if !*pgcatalogRewrite && string(got) != ex.want {
			t.Errorf("psql -c %q:\n%s\nwant:\n%s", ex.command, got, ex.want)
		}
	}
	if *pgcatalogRewrite {
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCatalogPgx reads the catalogs through pgx (extended protocol, binary
// results) as drivers and tools do.
func TestCatalogPgx(t *testing.T) {
	n := startCatalogNode(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, n.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	rows := func(sql string, args ...any) [][]any {
		t.Helper()
		r, err := conn.Query(ctx, sql, args...)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		var out [][]any
		for r.Next() {
			vals, err := r.Values()
			if err != nil {
				t.Fatalf("%s: %v", sql, err)
			}
			out = append(out, vals)
		}
		if err := r.Err(); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return out
	}
	check := func(sql string, want [][]any, args ...any) {
		t.Helper()
		if got := rows(sql, args...); !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %#v\nwant %#v", sql, got, want)
		}
	}

	check(`SELECT current_database(), current_schema(), current_user, session_user`,
		[][]any{{"mink", "public", "mink", "mink"}})
	var version string
	if err := conn.QueryRow(ctx, "SELECT version()").Scan(&version); err != nil || !strings.HasPrefix(version, "PostgreSQL 15") {
		t.Errorf("version() = %q, %v; want PostgreSQL 15…", version, err)
	}
	var pid int32
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil || uint32(pid) != conn.PgConn().PID() {
		t.Errorf("pg_backend_pid() = %d, %v; want %d", pid, err, conn.PgConn().PID())
	}

	// pg_type: OIDs are described as oid and scan into uint32.
	check(`SELECT oid, typname, typlen, typarray, typtype FROM pg_catalog.pg_type WHERE typname IN ('int4', 'text', 'numeric', 'timestamptz') ORDER BY oid`,
		[][]any{{uint32(23), "int4", int16(4), uint32(1007), "b"}, {uint32(25), "text", int16(-1), uint32(1009), "b"},
			{uint32(1184), "timestamptz", int16(8), uint32(1185), "b"}, {uint32(1700), "numeric", int16(-1), uint32(1231), "b"}})
	check(`SELECT typname FROM pg_type WHERE oid = $1`, [][]any{{"jsonb"}}, uint32(3802))
	check(`SELECT $1::text::regtype::oid`, [][]any{{uint32(1043)}}, "character varying")
	if typ, err := conn.LoadType(ctx, "_int4"); err != nil || typ.OID != 1007 {
		t.Errorf("LoadType(_int4) = %+v, %v", typ, err)
	}

	// pg_class and pg_namespace list the user's tables in public.
	check(`SELECT c.relname, c.relkind, c.relnatts, c.reloptions FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'public' ORDER BY c.relname`,
		[][]any{{"Mixed Case", "r", int16(2), []any{"buckets=1"}},
			{"accounts", "r", int16(3), []any{"buckets=2", "bucket_key=region,id"}}, {"accounts_pkey", "i", int16(2), nil},
			{"clicks", "p", int16(4), []any{"buckets=4", "bucket_key=user_id"}},
			{"orders", "r", int16(4), []any{"buckets=8"}}, {"types", "r", int16(21), []any{"buckets=2"}}})
	check(`SELECT 'orders'::regclass::oid = c.oid, c.oid::regclass::text FROM pg_class c WHERE c.relname = 'orders'`,
		[][]any{{true, "orders"}})
	check(`SELECT oid::regclass::text FROM pg_class WHERE relname = 'Mixed Case'`, [][]any{{`"Mixed Case"`}})

	// pg_attribute, with format_type and the defaults in pg_attrdef.
	check(`SELECT a.attnum, a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), a.attnotnull, pg_get_expr(d.adbin, d.adrelid)
		FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
		WHERE a.attrelid = 'types'::regclass AND a.attnum IN (2, 3, 5, 7, 8, 9, 11, 13, 16) ORDER BY a.attnum`,
		[][]any{
			{int16(2), "b", "integer", true, "7"},
			{int16(3), "c", "bigint", false, "'-1'::integer"},
			{int16(5), "e", "double precision", false, "1.5"},
			{int16(7), "g", "numeric(12,2)", false, "0.5"},
			{int16(8), "h", "text", false, "'x'::text"},
			{int16(9), "i", "character varying(20)", false, "'it''s'::character varying"},
			{int16(11), "k", "character(3)", false, nil},
			{int16(13), "m", "date", false, "'2024-01-01'::date"},
			{int16(16), "p", "timestamp with time zone", false, nil},
		})

	// information_schema.
	check(`SELECT table_catalog, table_schema, table_name, table_type FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name`,
		[][]any{{"mink", "public", "Mixed Case", "BASE TABLE"}, {"mink", "public", "accounts", "BASE TABLE"}, {"mink", "public", "clicks", "BASE TABLE"},
			{"mink", "public", "orders", "BASE TABLE"}, {"mink", "public", "types", "BASE TABLE"}})
	check(`SELECT column_name, ordinal_position, data_type, character_maximum_length, numeric_precision, numeric_scale, is_nullable, udt_name
		FROM information_schema.columns WHERE table_schema = 'public' AND table_name = 'orders' ORDER BY ordinal_position`,
		[][]any{{"id", int32(1), "bigint", nil, int32(64), int32(0), "NO", "int8"},
			{"customer", int32(2), "text", nil, nil, nil, "NO", "text"},
			{"amount", int32(3), "numeric", nil, int32(12), int32(2), "YES", "numeric"},
			{"ts", int32(4), "timestamp with time zone", nil, nil, nil, "YES", "timestamptz"}})
	check(`SELECT schema_name FROM information_schema.schemata ORDER BY 1`,
		[][]any{{"information_schema"}, {"pg_catalog"}, {"public"}})

	// Queries tools send: Grafana's table list, DBeaver's keywords, pgx's
	// LoadType of a table's row type.
	check(`SELECT quote_ident(table_name) FROM information_schema.tables WHERE table_schema IN (SELECT CASE WHEN trim(s[i]) = '"$user"' THEN user ELSE trim(s[i]) END FROM generate_series(array_lower(string_to_array(current_setting('search_path'),','),1), array_upper(string_to_array(current_setting('search_path'),','),1)) as i, string_to_array(current_setting('search_path'),',') s) ORDER BY 1`,
		[][]any{{`"Mixed Case"`}, {"accounts"}, {"clicks"}, {"orders"}, {"types"}})
	check(`SELECT count(*) > 400, count(*) FILTER (WHERE catcode = 'R') FROM pg_catalog.pg_get_keywords()`, [][]any{{true, int64(77)}})
	check(`SELECT t.typtype, t.typrelid = c.oid, c.reltype = t.oid FROM pg_type t JOIN pg_class c ON c.relname = t.typname WHERE t.typname = 'orders'`,
		[][]any{{"c", true, true}})
	if _, err := conn.Exec(ctx, `SET application_name = 'catalog test'`); err != nil {
		t.Fatal(err)
	}
	check(`SELECT current_setting('application_name'), (SELECT setting FROM pg_settings WHERE name = 'application_name')`,
		[][]any{{"catalog test", "catalog test"}})

	// psql's tab completion: LIKE escapes with a backslash.
	check(`SELECT c.relname, n.nspname FROM pg_catalog.pg_class c, pg_catalog.pg_namespace n WHERE c.relnamespace = n.oid AND c.relkind IN ('r', 'S', 'v', 'm', 'f', 'p') AND (c.relname) LIKE 'pg\_cl%' AND n.nspname = 'pg_catalog'
	LIMIT 1000`, [][]any{{"pg_class", "pg_catalog"}})
	check(`SELECT c.relname, NULL::pg_catalog.text FROM pg_catalog.pg_class c WHERE c.relkind IN ('r', 'S', 'v', 'm', 'f', 'p') AND (c.relname) LIKE 'ord%' AND pg_catalog.pg_table_is_visible(c.oid) AND c.relnamespace <> (SELECT oid FROM pg_catalog.pg_namespace WHERE nspname = 'pg_catalog')
	UNION ALL
	SELECT NULL::pg_catalog.text, n.nspname FROM pg_catalog.pg_namespace n WHERE n.nspname LIKE 'ord%' AND n.nspname NOT LIKE E'pg\\_%'
	LIMIT 1000`, [][]any{{"orders", nil}})
	check(`SELECT a.attname, NULL::pg_catalog.text FROM pg_catalog.pg_attribute a, pg_catalog.pg_class c WHERE c.oid = a.attrelid and a.attnum > 0 and not a.attisdropped AND (a.attname) LIKE 'cu%' AND c.relname = 'orders' AND pg_catalog.pg_table_is_visible(c.oid)
	LIMIT 1000`, [][]any{{"customer", nil}})
	check(`SELECT pg_catalog.lower(name) FROM pg_catalog.pg_settings  WHERE context IN ('user', 'superuser')    AND pg_catalog.lower(name) LIKE pg_catalog.lower('search\_%')
	LIMIT 1000`, [][]any{{"search_path"}})

	// Primary keys: the constraint and its index (accounts); tables
	// without a key have neither.
	check(`SELECT count(*) FROM pg_index`, [][]any{{int64(1)}})
	check(`SELECT indexrelid FROM pg_catalog.pg_index WHERE indrelid = $1`, nil, uint32(16385))
	check(`SELECT c.conname, c.contype, r.relname, c.conkey, i.relname, pg_get_constraintdef(c.oid), pg_get_constraintdef(c.oid, true)
		FROM pg_constraint c JOIN pg_class r ON r.oid = c.conrelid JOIN pg_class i ON i.oid = c.conindid`,
		[][]any{{"accounts_pkey", "p", "accounts", []any{int16(1), int16(2)}, "accounts_pkey", "PRIMARY KEY (region, id)", "PRIMARY KEY (region, id)"}})
	check(`SELECT x.indisprimary, x.indisunique, x.indnatts, pg_get_indexdef(x.indexrelid), pg_get_indexdef(x.indexrelid, 2, true), c.relam
		FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid WHERE x.indrelid = 'accounts'::regclass`,
		[][]any{{true, true, int16(2), "CREATE UNIQUE INDEX accounts_pkey ON public.accounts USING btree (region, id)", "id", uint32(403)}})
	check(`SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'`,
		[][]any{{"accounts_pkey", "CREATE UNIQUE INDEX accounts_pkey ON public.accounts USING btree (region, id)"}})
	check(`SELECT tc.constraint_name, tc.table_name, tc.constraint_type, k.column_name, k.ordinal_position
		FROM information_schema.table_constraints tc JOIN information_schema.key_column_usage k USING (constraint_schema, constraint_name)
		WHERE tc.constraint_type = 'PRIMARY KEY' ORDER BY k.ordinal_position`,
		[][]any{{"accounts_pkey", "accounts", "PRIMARY KEY", "region", int32(1)}, {"accounts_pkey", "accounts", "PRIMARY KEY", "id", int32(2)}})
	check(`SELECT table_name, column_name, constraint_name FROM information_schema.constraint_column_usage ORDER BY column_name`,
		[][]any{{"accounts", "id", "accounts_pkey"}, {"accounts", "region", "accounts_pkey"}})
	check(`SELECT relhasindex FROM pg_class WHERE relname IN ('accounts', 'orders') ORDER BY relname`, [][]any{{true}, {false}})

	// DDL shows at once, in the same session.
	if _, err := conn.Exec(ctx, `CREATE TABLE later (x int)`); err != nil {
		t.Fatal(err)
	}
	check(`SELECT count(*) FROM pg_tables WHERE tablename = 'later'`, [][]any{{int64(1)}})
	if _, err := conn.Exec(ctx, `DROP TABLE later`); err != nil {
		t.Fatal(err)
	}
	check(`SELECT count(*) FROM information_schema.tables WHERE table_name = 'later'`, [][]any{{int64(0)}})

	// A catalog relation mink does not emulate is an undefined table.
	_, err = conn.Exec(ctx, `SELECT * FROM pg_catalog.pg_nosuch`)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42P01" {
		t.Errorf("pg_catalog.pg_nosuch: %v, want 42P01", err)
	}
}

// TestCatalogJDBC runs pgjdbc's DatabaseMetaData calls (getTables,
// getColumns, getSchemas, …) with testdata/pgcatalog/JdbcMetadata.java and
// compares the result sets with testdata/pgcatalog/jdbc.txt.
func TestCatalogJDBC(t *testing.T) {
	java, err := exec.LookPath("java")
	if err != nil {
		t.Fatal("java not found in PATH: run scripts/install-test-deps.sh to install a JDK and pgjdbc")
	}
	const jar = "/usr/share/java/postgresql.jar"
	if _, err := os.Stat(jar); err != nil {
		t.Fatalf("%s: %v: run scripts/install-test-deps.sh to install pgjdbc (libpostgresql-jdbc-java)", jar, err)
	}
	n := startCatalogNode(t)
	url := "jdbc:postgresql://" + n.Config.PGAddr + "/mink?user=mink"
	cmd := exec.Command(java, "-cp", jar, filepath.Join("testdata", "pgcatalog", "JdbcMetadata.java"), url)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	got, err := cmd.Output()
	if err != nil {
		t.Fatalf("java JdbcMetadata.java: %v\n%s\n%s", err, got, stderr.String())
	}
	path := filepath.Join("testdata", "pgcatalog", "jdbc.txt")
	if *pgcatalogRewrite {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("pgjdbc metadata differs from %s:\n%s", path, got)
	}
}
