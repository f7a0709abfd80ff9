package main

// End-to-end tests of the Iceberg REST catalog (docs/lake.md): another
// engine finds mink's lake tables by name at http://<admin-addr>/iceberg
// and reads exactly the rows SELECT returns, with iceberg-go's REST client
// PyIceberg (test/clients/iceberg_read.py) and Spark
// (test/clients/iceberg_spark.py).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // the S3 lake of TestIcebergRESTCatalogS3
	"github.com/apache/iceberg-go/table"
	"github.com/jackc/pgx/v5"

	"github.com/minkdb/mink/internal/s3test"
	"github.com/minkdb/mink/tiering"
)

// icebergReadColumns are the columns both tables of these tests have; rows
// are compared as "id|v|n" strings, NULL spelled NULL.
var icebergReadColumns = []string{"id", "v", "n"}

// sqlRowStrings is SELECT id, v, n of table through mink, as sorted
// "id|v|n" strings.
func sqlRowStrings(t *testing.T, conn *pgx.Conn, table string) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(), fmt.Sprintf("SELECT id::text, coalesce(v, 'NULL'), coalesce(n::text, 'NULL') FROM %s", table))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id, v, n string
		if err := rows.Scan(&id, &v, &n); err != nil {
			t.Fatal(err)
		}
		out = append(out, id+"|"+v+"|"+n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// arrowRowStrings is the same for record batches read from the lake.
func arrowRowStrings(t *testing.T, recs func(yield func(arrow.RecordBatch, error) bool)) []string {
	t.Helper()
	var out []string
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		cols := make([]arrow.Array, len(icebergReadColumns))
		for i, name := range icebergReadColumns {
			idx := rec.Schema().FieldIndices(name)
			if len(idx) != 1 {
				t.Fatalf("the lake table has no column %q: %s", name, rec.Schema())
			}
			cols[i] = rec.Column(idx[0])
		}
		for r := range int(rec.NumRows()) {
			vals := make([]string, len(cols))
			for i, c := range cols {
				vals[i] = "NULL"
				if c.IsValid(r) {
					vals[i] = c.ValueStr(r)
				}
			}
			out = append(out, strings.Join(vals, "|"))
		}
		rec.Release()
	}
	slices.Sort(out)
	return out
}

// icebergGoRows loads ns.name through the REST catalog at uri with
// iceberg-go and reads it.
func icebergGoRows(t *testing.T, cat *rest.Catalog, name string) (rows []string, tbl *table.Table) {
	t.Helper()
	ctx := context.Background()
	tbl, err := cat.LoadTable(ctx, table.Identifier{"public", name})
	if err != nil {
		t.Fatalf("iceberg-go LoadTable(public.%s): %v", name, err)
	}
	_, recs, err := tbl.Scan().ToArrowRecords(ctx)
	if err != nil {
		t.Fatalf("iceberg-go scan of public.%s: %v", name, err)
	}
	return arrowRowStrings(t, recs), tbl
}

// deleteManifests counts the delete manifests of tbl's current snapshot.
func deleteManifests(t *testing.T, tbl *table.Table) int {
	t.Helper()
	fio, err := tbl.FS(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	manifests, err := tbl.CurrentSnapshot().Manifests(fio)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range manifests {
		if m.ManifestContent() != iceberg.ManifestContentData {
			n++
		}
	}
	return n
}

// sparkAggregate is what test/clients/iceberg_spark.py prints per table.
type sparkAggregate struct {
	Count  int64  `json:"count"`
	SumID  int64  `json:"sum_id"`
	SumN   int64  `json:"sum_n"`
	NullsV int64  `json:"nulls_v"`
	Error  string `json:"error"`
}

// sparkAggregates runs iceberg_spark.py against the catalog at uri.
func sparkAggregates(t *testing.T, uri string, tables ...string) map[string]sparkAggregate {
	t.Helper()
	cache := kafkaClientCache(t)
	python := filepath.Join(cache, "spark-venv", "bin", "python")
	jar := filepath.Join(cache, "jars", "iceberg-spark-runtime-3.5_2.12-1.10.1.jar")
	if out, err := exec.Command(python, "-c", "import pyspark").CombinedOutput(); err != nil {
		t.Fatalf("pyspark is not installed in %s (%v: %s): %s", python, err, out, installHint)
	}
	if _, err := os.Stat(jar); err != nil {
		t.Fatalf("the Iceberg Spark runtime is missing (%v): %s", err, installHint)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, python, "../../test/clients/iceberg_spark.py", uri, jar, strings.Join(tables, ","))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("iceberg_spark.py: %v\n%s", err, stderr.String())
	}
	out := map[string]sparkAggregate{}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("iceberg_spark.py output: %v\n%s", err, stdout.String())
	}
	t.Logf("Spark took %v", time.Since(start).Round(100*time.Millisecond))
	return out
}

// pyIcebergRead is what test/clients/iceberg_read.py prints.
type pyIcebergRead struct {
	Namespaces []string            `json:"namespaces"`
	Tables     map[string][]string `json:"tables"`
	Read       map[string]struct {
		Error            string      `json:"error"`
		MetadataLocation string      `json:"metadata_location"`
		SnapshotID       json.Number `json:"snapshot_id"`
		Columns          []string    `json:"columns"`
		Rows             [][]any     `json:"rows"`
	} `json:"read"`
}

// pyIceberg runs iceberg_read.py against the catalog at uri for the
// tables named, with extra catalog properties.
func pyIceberg(t *testing.T, uri string, tables []string, props ...string) pyIcebergRead {
	t.Helper()
	python := filepath.Join(kafkaClientCache(t), "iceberg-venv", "bin", "python")
	if out, err := exec.Command(python, "-c", "import pyiceberg.catalog.rest").CombinedOutput(); err != nil {
		t.Fatalf("PyIceberg is not installed in %s (%v: %s): %s", python, err, out, installHint)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := append([]string{"../../test/clients/iceberg_read.py", uri, strings.Join(tables, ",")}, props...)
	cmd := exec.CommandContext(ctx, python, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("iceberg_read.py %v: %v\n%s", tables, err, stderr.String())
	}
	var out pyIcebergRead
	dec := json.NewDecoder(&stdout)
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("iceberg_read.py output: %v\n%s", err, stdout.String())
	}
	return out
}

// pyRowStrings turns PyIceberg's rows of table into sorted "id|v|n"
// strings.
func pyRowStrings(t *testing.T, out pyIcebergRead, name string) []string {
	t.Helper()
	r, ok := out.Read[name]
	if !ok || r.Error != "" {
		t.Fatalf("PyIceberg did not read %s: %q", name, r.Error)
	}
	idx := make([]int, len(icebergReadColumns))
	for i, c := range icebergReadColumns {
		if idx[i] = slices.Index(r.Columns, c); idx[i] < 0 {
			t.Fatalf("PyIceberg's %s has no column %q: %v", name, c, r.Columns)
		}
	}
	var rows []string
	for _, row := range r.Rows {
		vals := make([]string, len(idx))
		for i, j := range idx {
			if row[j] == nil {
				vals[i] = "NULL"
			} else {
				vals[i] = fmt.Sprint(row[j])
			}
		}
		rows = append(rows, strings.Join(vals, "|"))
	}
	slices.Sort(rows)
	return rows
}

// rowsDiff describes how got differs from want (sorted lists).
func rowsDiff(got, want []string) string {
	if slices.Equal(got, want) {
		return ""
	}
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("%d rows, want %d; first difference at %d: %q, want %q", len(got), len(want), i, got[i], want[i])
		}
	}
	return fmt.Sprintf("%d rows, want %d", len(got), len(want))
}

// TestIcebergRESTCatalog: a log table and a primary-key table, written
// with inserts, upserts, updates and deletes over three tiering rounds.
// After each round iceberg-go's REST client and PyIceberg load both tables
// by name from the node's catalog and read exactly the rows SELECT
// returns; both see the same metadata location, and it moves every round.
// Spark then computes the same aggregates as SELECT.
// An untiered table answers NoSuchTable with the hint, writes are refused.
func TestIcebergRESTCatalog(t *testing.T) {
	// Self-contained (one node of its own, no timing it depends on): it
	// runs beside another such test, which keeps make test in its budget.
	t.Parallel()
	dataDir := t.TempDir()
	n := startTieringNode(t, dataDir, "1h")
	conn := connect(t, n.pgURL(), pgx.QueryExecModeSimpleProtocol)
	mustExec(t, conn, "CREATE TABLE events (id bigint NOT NULL, v text, n integer) WITH (buckets = 2)")
	mustExec(t, conn, "CREATE TABLE kv (id bigint PRIMARY KEY, v text, n integer) WITH (buckets = 3)")
	mustExec(t, conn, "CREATE TABLE fresh (id bigint NOT NULL, v text, n integer)")
	mustExec(t, conn, "INSERT INTO fresh VALUES (1, 'not tiered', 1)")
	mustExec(t, conn, "CREATE VIEW recent AS SELECT * FROM events WHERE id > 400")

	uri := "http://" + n.admin + "/iceberg"
	ctx := context.Background()
	cat, err := rest.NewCatalog(ctx, "mink", uri)
	if err != nil {
		t.Fatal(err)
	}
	rounds := [][]string{
		{
			"INSERT INTO events SELECT i, 'e' || i, i % 10 FROM generate_series(1, 400) AS g(i)",
			"INSERT INTO kv SELECT i, 'v' || i, i FROM generate_series(1, 300) AS g(i)",
		},
		{
			"INSERT INTO events SELECT i, NULL, NULL FROM generate_series(401, 450) AS g(i)",
			"INSERT INTO kv SELECT i, 'up' || i, 1000 + i FROM generate_series(250, 400) AS g(i) ON CONFLICT (id) DO UPDATE SET v = excluded.v, n = excluded.n",
			"UPDATE kv SET v = NULL, n = n + 1 WHERE id % 7 = 0",
			"DELETE FROM kv WHERE id % 5 = 0",
		},
		{
			"INSERT INTO events VALUES (451, 'last', 1)",
			"DELETE FROM kv WHERE id < 100",
			"INSERT INTO kv VALUES (5, 'back', NULL)",
		},
	}
	var lastLocation string
	for round, stmts := range rounds {
		for _, s := range stmts {
			mustExec(t, conn, s)
		}
		for _, table := range []string{"events", "kv"} {
			out, errOut, code := runMink(t, 60*time.Second, "tiering", "run", "--table", table, "--wait", "--server", n.admin)
			if code != 0 || !strings.Contains(out, "done") {
				t.Fatalf("round %d: mink tiering run --table %s: exit %d: %s\n%s", round, table, code, errOut, out)
			}
		}
		py := pyIceberg(t, uri, []string{"public.events", "public.kv", "public.fresh", "public.nope", "public.recent"})
		if !slices.Equal(py.Namespaces, []string{"public"}) {
			t.Fatalf("PyIceberg list_namespaces: %v", py.Namespaces)
		}
		if got := strings.Join(py.Tables["public"], " "); got != "public.events public.fresh public.kv" {
			t.Fatalf("PyIceberg list_tables(public): %s", got)
		}
		for _, table := range []string{"events", "kv"} {
			want := sqlRowStrings(t, conn, table)
			goRows, tbl := icebergGoRows(t, cat, table)
			if d := rowsDiff(goRows, want); d != "" {
				t.Fatalf("round %d: iceberg-go read of public.%s: %s", round, table, d)
			}
			if d := rowsDiff(pyRowStrings(t, py, "public."+table), want); d != "" {
				t.Fatalf("round %d: PyIceberg read of public.%s: %s", round, table, d)
			}
			if k := deleteManifests(t, tbl); k != 0 {
				t.Fatalf("round %d: public.%s has %d delete manifests; mink's lake holds only data files", round, table, k)
			}
			pr := py.Read["public."+table]
			if pr.MetadataLocation != tbl.MetadataLocation() || pr.SnapshotID.String() != fmt.Sprint(tbl.CurrentSnapshot().SnapshotID) {
				t.Fatalf("round %d: %s: PyIceberg loaded %s (snapshot %s), iceberg-go %s (snapshot %d)",
					round, table, pr.MetadataLocation, pr.SnapshotID, tbl.MetadataLocation(), tbl.CurrentSnapshot().SnapshotID)
			}
			if table == "events" {
				if !slices.Contains(pr.Columns, tiering.BucketColumn) || !slices.Contains(pr.Columns, tiering.OffsetColumn) {
					t.Fatalf("round %d: the log table's lake columns %v lack %s and %s", round, pr.Columns, tiering.BucketColumn, tiering.OffsetColumn)
				}
				if pr.MetadataLocation == lastLocation {
					t.Fatalf("round %d: the metadata location of events did not move: %s", round, lastLocation)
				}
				lastLocation = pr.MetadataLocation
			}
			t.Logf("round %d: public.%s: %d rows through iceberg-go and PyIceberg, %s", round, table, len(want), pr.MetadataLocation)
		}
		if e := py.Read["public.fresh"].Error; !strings.Contains(e, "NoSuchTableError") || !strings.Contains(e, "mink tiering run --table fresh") {
			t.Fatalf("PyIceberg load_table of the untiered table: %q", e)
		}
		if e := py.Read["public.nope"].Error; !strings.Contains(e, "NoSuchTableError") {
			t.Fatalf("PyIceberg load_table of a missing table: %q", e)
		}
		if e := py.Read["public.recent"].Error; !strings.Contains(e, "NoSuchTableError") || !strings.Contains(e, "public.recent is a SQL view, which has no lake") {
			t.Fatalf("PyIceberg load_table of a SQL view: %q", e)
		}
	}
	// Spark (local mode, Iceberg's Spark runtime) finds both tables through
	// the catalog and computes the same aggregates as SELECT.
	spark := sparkAggregates(t, uri, "public.events", "public.kv", "public.nope")
	for _, table := range []string{"events", "kv"} {
		var want sparkAggregate
		if err := conn.QueryRow(ctx, "SELECT count(*), coalesce(sum(id), 0), coalesce(sum(n), 0), count(*) FILTER (WHERE v IS NULL) FROM "+table).
			Scan(&want.Count, &want.SumID, &want.SumN, &want.NullsV); err != nil {
			t.Fatal(err)
		}
		if got := spark["public."+table]; got != want {
			t.Fatalf("Spark's aggregates of public.%s: %+v, want %+v", table, got, want)
		}
		t.Logf("Spark read public.%s: %+v", table, want)
	}
	if e := spark["public.nope"].Error; !strings.Contains(e, "TABLE_OR_VIEW_NOT_FOUND") {
		t.Fatalf("Spark's read of a missing table: %q", e)
	}

	// Writes are refused with the reason; reads go on.
	sch := iceberg.NewSchema(0, iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true})
	if _, err := cat.CreateTable(ctx, table.Identifier{"public", "other"}, sch); err == nil || !strings.Contains(err.Error(), "mink is the only writer of its lake") {
		t.Fatalf("iceberg-go CreateTable: %v", err)
	}
	if err := cat.DropTable(ctx, table.Identifier{"public", "events"}); err == nil || !strings.Contains(err.Error(), "mink is the only writer of its lake") {
		t.Fatalf("iceberg-go DropTable: %v", err)
	}
	if _, err := cat.LoadTable(ctx, table.Identifier{"public", "fresh"}); !errors.Is(err, icecatalog.ErrNoSuchTable) {
		t.Fatalf("iceberg-go LoadTable(fresh): %v", err)
	}
	if rows, _ := icebergGoRows(t, cat, "events"); len(rows) != 451 {
		t.Fatalf("events after the refused writes: %d rows, want 451", len(rows))
	}
}

// TestIcebergRESTCatalogS3: a node with a superuser password whose lake is
// in S3 (versitygw). The catalog requires a token (OAuth client
// credentials, as PyIceberg's credential= sends them); a role lists only
// the tables it may SELECT and is refused the others with the reason. PyIceberg, given its own S3 keys, takes the
// endpoint and region from the table config and reads the rows from S3.
func TestIcebergRESTCatalogS3(t *testing.T) {
	// Self-contained (one node of its own, no timing it depends on): it
	// runs beside another such test, which keeps make test in its budget.
	t.Parallel()
	s3 := s3test.Start(t)
	const password = "lake pw"
	pwFile := writePasswordFile(t, password)
	n := newNode(t, nodeOpts{leaseTTL: "3s", extra: []string{"--superuser-password-file", pwFile,
		"--object-store", s3.URL("lake"), "--s3-endpoint", s3.Endpoint, "--coordinator-tick", "200ms", "--tiering-freshness", "1h"}})
	n.env = []string{"AWS_ACCESS_KEY_ID=" + s3.AccessKey, "AWS_SECRET_ACCESS_KEY=" + s3.SecretKey, "AWS_REGION=" + s3.Region}
	n.start()
	n.waitHealthy()
	ctx := context.Background()
	var conn *pgx.Conn
	waitFor(t, 30*time.Second, "mink logs in", func() bool {
		var err error
		conn, err = n.login(ctx, "mink", password)
		return err == nil
	})
	defer conn.Close(ctx)
	mustExec(t, conn, "CREATE TABLE shared (id bigint NOT NULL, v text, n integer)")
	mustExec(t, conn, "CREATE TABLE secret (id bigint NOT NULL, v text, n integer)")
	mustExec(t, conn, "INSERT INTO shared SELECT i, 's' || i, i FROM generate_series(1, 250) AS g(i)")
	mustExec(t, conn, "INSERT INTO secret VALUES (1, 'x', 1)")
	mustExec(t, conn, "CREATE ROLE reader LOGIN PASSWORD 'reader pw'")
	mustExec(t, conn, "GRANT SELECT ON shared TO reader")
	for _, table := range []string{"shared", "secret"} {
		out, errOut, code := runMinkEnv(t, nil, "tiering", "run", "--table", table, "--wait", "--server", n.admin, "--password-file", pwFile)
		if code != 0 || !strings.Contains(out, "done") {
			t.Fatalf("mink tiering run --table %s: exit %d: %s\n%s", table, code, errOut, out)
		}
	}
	uri := "http://" + n.admin + "/iceberg"
	keys := []string{"s3.access-key-id=" + s3.AccessKey, "s3.secret-access-key=" + s3.SecretKey}

	py := pyIceberg(t, uri, []string{"public.shared", "public.secret"}, append(keys, "credential=reader:reader pw")...)
	if got := strings.Join(py.Tables["public"], " "); got != "public.shared" {
		t.Fatalf("reader's list_tables(public): %q, want only public.shared", got)
	}
	want := sqlRowStrings(t, conn, "shared")
	if d := rowsDiff(pyRowStrings(t, py, "public.shared"), want); d != "" {
		t.Fatalf("reader's PyIceberg read of public.shared from S3: %s", d)
	}
	if loc := py.Read["public.shared"].MetadataLocation; !strings.HasPrefix(loc, "s3://") {
		t.Fatalf("metadata location %q is not in S3", loc)
	}
	if e := py.Read["public.secret"].Error; !strings.Contains(e, "ForbiddenError") || !strings.Contains(e, `permission denied for table secret: role "reader" needs SELECT`) {
		t.Fatalf("reader's load_table of a table it may not read: %q", e)
	}
	// The superuser reads both.
	py = pyIceberg(t, uri, []string{"public.secret"}, append(keys, "credential=mink:"+password)...)
	if d := rowsDiff(pyRowStrings(t, py, "public.secret"), []string{"1|x|1"}); d != "" {
		t.Fatalf("mink's PyIceberg read of public.secret: %s", d)
	}

	// Without credentials, or with a wrong password, the catalog refuses.
	cmd := exec.Command(filepath.Join(kafkaClientCache(t), "iceberg-venv", "bin", "python"), "../../test/clients/iceberg_read.py", uri, "public.shared")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "401") && !strings.Contains(string(out), "Unauthorized") && !strings.Contains(string(out), "NotAuthorized") {
		t.Fatalf("PyIceberg without credentials: %v\n%s", err, out)
	}
	if _, err := rest.NewCatalog(ctx, "mink", uri, rest.WithCredential("reader:wrong")); err == nil {
		t.Fatal("iceberg-go with a wrong password opened the catalog")
	}
	// iceberg-go with the reader's credential reads the same rows.
	cat, err := rest.NewCatalog(ctx, "mink", uri, rest.WithCredential("reader:reader pw"),
		rest.WithAdditionalProps(iceberg.Properties{"s3.access-key-id": s3.AccessKey, "s3.secret-access-key": s3.SecretKey}))
	if err != nil {
		t.Fatal(err)
	}
	if rows, _ := icebergGoRows(t, cat, "shared"); rowsDiff(rows, want) != "" {
		t.Fatalf("reader's iceberg-go read of public.shared from S3: %s", rowsDiff(rows, want))
	}
}
