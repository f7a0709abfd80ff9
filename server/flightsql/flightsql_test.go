package flightsql_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	pb "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/minkdb/mink/internal/flightwire"
	"github.com/minkdb/mink/internal/minktest"
	"github.com/minkdb/mink/server"
)

func dial(t *testing.T, n *minktest.Node) *flightsql.Client {
	t.Helper()
	c, err := flightsql.NewClient(n.Config.FlightAddr, nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func update(t *testing.T, ctx context.Context, c *flightsql.Client, sql string) int64 {
	t.Helper()
	n, err := c.ExecuteUpdate(ctx, sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// fetch reads every endpoint of info; rows are the values' ValueStr,
// copied out of the batches.
func fetch(ctx context.Context, c *flightsql.Client, info *flight.FlightInfo) (*arrow.Schema, [][]string, error) {
	var schema *arrow.Schema
	var rows [][]string
	for _, ep := range info.Endpoint {
		r, err := c.DoGet(ctx, ep.Ticket)
		if err != nil {
			return nil, rows, err
		}
		schema = r.Schema()
		for r.Next() {
			rec := r.RecordBatch()
			for i := 0; i < int(rec.NumRows()); i++ {
				var row []string
				for j := 0; j < int(rec.NumCols()); j++ {
					row = append(row, strings.Clone(rec.Column(j).ValueStr(i)))
				}
				rows = append(rows, row)
			}
		}
		err = r.Err()
		r.Release()
		if err != nil {
			return schema, rows, err
		}
	}
	return schema, rows, nil
}

func query(t *testing.T, ctx context.Context, c *flightsql.Client, sql string) (*arrow.Schema, [][]string) {
	t.Helper()
	info, err := c.Execute(ctx, sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	infoSchema, err := flight.DeserializeSchema(info.Schema, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	schema, rows, err := fetch(ctx, c, info)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	if !schema.Equal(infoSchema) {
		t.Fatalf("%s: FlightInfo schema %v, stream schema %v", sql, infoSchema, schema)
	}
	return schema, rows
}

func mustExecute(t *testing.T, ctx context.Context, c *flightsql.Client, sql string) *flight.FlightInfo {
	t.Helper()
	info, err := c.Execute(ctx, sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return info
}

func wantRows(t *testing.T, what string, got, want [][]string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: rows %q, want %q", what, got, want)
	}
}

// sqlstate returns the SQLSTATE in a status's ErrorInfo, and checks that
// the message carries it too.
func sqlstate(t *testing.T, err error) (codes.Code, string) {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok {
		t.Fatalf("not a gRPC status: %v", err)
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.Domain == flightwire.Domain {
			code := info.Metadata["sqlstate"]
			if !strings.Contains(st.Message(), "(SQLSTATE "+code+")") {
				t.Fatalf("message %q does not name SQLSTATE %s", st.Message(), code)
			}
			if info.Reason != "SQLSTATE_"+code {
				t.Fatalf("reason %q for SQLSTATE %s", info.Reason, code)
			}
			return st.Code(), code
		}
	}
	t.Fatalf("no ErrorInfo in %v", err)
	return 0, ""
}

func TestStatements(t *testing.T) {
	n := minktest.Start(t, minktest.Options{})
	c := dial(t, n)
	ctx := context.Background()
	if got := update(t, ctx, c, "CREATE TABLE e (id bigint NOT NULL, v double precision, s text) WITH (buckets = 2, bucket_key = 'id')"); got != 0 {
		t.Fatalf("CREATE TABLE: %d rows", got)
	}
	if got := update(t, ctx, c, "INSERT INTO e VALUES (1, 1.5, 'one'), (2, NULL, 'two'), (3, 3.5, 'three')"); got != 3 {
		t.Fatalf("INSERT: %d rows, want 3", got)
	}
	schema, rows := query(t, ctx, c, "SELECT id, v, s, id * 2 AS twice FROM e ORDER BY id")
	wantRows(t, "SELECT", rows, [][]string{{"1", "1.5", "one", "2"}, {"2", "(null)", "two", "4"}, {"3", "3.5", "three", "6"}})
	want := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "v", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "twice", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	if !schema.Equal(want) {
		t.Fatalf("schema %v, want %v", schema, want)
	}

	// A statement without rows sent as a query (as ADBC does) runs once.
	if _, rows := query(t, ctx, c, "INSERT INTO e VALUES (4, 4.5, 'four')"); len(rows) != 0 {
		t.Fatalf("INSERT as a query: rows %v", rows)
	}
	_, rows = query(t, ctx, c, "SELECT count(*) FROM e")
	wantRows(t, "count", rows, [][]string{{"4"}})

	// Large results stream in many batches.
	_, rows = query(t, ctx, c, "SELECT i FROM range(100000) t(i)")
	if len(rows) != 100000 || rows[99999][0] != "99999" {
		t.Fatalf("range: %d rows", len(rows))
	}

	// A primary-key table: point lookups are answered without the engine
	// (the rows are materialised into Arrow), UPDATE and DELETE count rows.
	update(t, ctx, c, "CREATE TABLE kv (k bigint PRIMARY KEY, v text) WITH (buckets = 1)")
	update(t, ctx, c, "INSERT INTO kv VALUES (1, 'a'), (2, 'b')")
	_, rows = query(t, ctx, c, "SELECT k, v FROM kv WHERE k = 2")
	wantRows(t, "lookup", rows, [][]string{{"2", "b"}})
	if got := update(t, ctx, c, "UPDATE kv SET v = 'B' WHERE k >= 2"); got != 1 {
		t.Fatalf("UPDATE: %d rows", got)
	}
	if got := update(t, ctx, c, "DELETE FROM kv WHERE k = 1"); got != 1 {
		t.Fatalf("DELETE: %d rows", got)
	}
	_, rows = query(t, ctx, c, "SELECT k, v FROM kv ORDER BY k")
	wantRows(t, "kv after", rows, [][]string{{"2", "B"}})

	// mink's own descriptors keep working on the same listener.
	fc, err := flight.NewClientWithMiddleware(n.Config.FlightAddr, nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	info, err := fc.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"e"}})
	if err != nil || len(info.Endpoint) != 2 {
		t.Fatalf("table descriptor: %v %v", info, err)
	}
}

func TestPreparedStatements(t *testing.T) {
	n := minktest.Start(t, minktest.Options{})
	c := dial(t, n)
	ctx := context.Background()
	update(t, ctx, c, "CREATE TABLE p (id bigint NOT NULL, s text) WITH (buckets = 1)")

	ins, err := c.Prepare(ctx, "INSERT INTO p VALUES ($1, $2)")
	if err != nil {
		t.Fatal(err)
	}
	if ps := ins.ParameterSchema(); ps.NumFields() != 2 || ps.Field(0).Type.ID() != arrow.INT64 || ps.Field(1).Type.ID() != arrow.STRING {
		t.Fatalf("parameter schema %v", ps)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, ins.ParameterSchema())
	for i, s := range []string{"one", "two", "three"} {
		b.Field(0).(*array.Int64Builder).Append(int64(i + 1))
		b.Field(1).(*array.StringBuilder).Append(s)
	}
	params := b.NewRecordBatch()
	b.Release()
	ins.SetParameters(params)
	params.Release()
	if got, err := ins.ExecuteUpdate(ctx); err != nil || got != 3 {
		t.Fatalf("prepared INSERT of 3 rows: %d, %v", got, err)
	}
	if err := ins.Close(ctx); err != nil {
		t.Fatal(err)
	}

	sel, err := c.Prepare(ctx, "SELECT s FROM p WHERE id >= $1 ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer sel.Close(ctx)
	if ds := sel.DatasetSchema(); ds.NumFields() != 1 || ds.Field(0).Name != "s" {
		t.Fatalf("dataset schema %v", ds)
	}
	// The client binds int32 where the statement inferred bigint: the
	// statement is prepared again for the batch's types.
	for _, tc := range []struct {
		from int32
		want [][]string
	}{{2, [][]string{{"two"}, {"three"}}}, {3, [][]string{{"three"}}}} {
		pschema := arrow.NewSchema([]arrow.Field{{Name: "$1", Type: arrow.PrimitiveTypes.Int32}}, nil)
		b := array.NewRecordBuilder(memory.DefaultAllocator, pschema)
		b.Field(0).(*array.Int32Builder).Append(tc.from)
		rec := b.NewRecordBatch()
		b.Release()
		sel.SetParameters(rec)
		rec.Release()
		info, err := sel.Execute(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, rows, err := fetch(ctx, c, info)
		if err != nil {
			t.Fatal(err)
		}
		wantRows(t, fmt.Sprintf("id >= %d", tc.from), rows, tc.want)
	}

	// A closed statement is gone.
	stale, err := c.Prepare(ctx, "SELECT 1")
	if err != nil {
		t.Fatal(err)
	}
	handle := stale.Handle()
	if err := stale.Close(ctx); err != nil {
		t.Fatal(err)
	}
	cmd, _ := anypb.New(&pb.CommandPreparedStatementQuery{PreparedStatementHandle: handle})
	body, _ := proto.Marshal(cmd)
	if _, err := c.Client.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: body}); status.Code(err) != codes.NotFound {
		t.Fatalf("closed prepared statement: %v, want NotFound", err)
	}
}

// A prepared statement left idle is closed.
func TestPreparedIdleTimeout(t *testing.T) {
	n := minktest.Start(t, minktest.Options{Tweak: func(cfg *server.Config) { cfg.FlightSQLIdleTimeout = 200 * time.Millisecond }})
	c := dial(t, n)
	ctx := context.Background()
	p, err := c.Prepare(ctx, "SELECT 42")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := p.Execute(ctx); err != nil {
		t.Fatal(err)
	} else if _, rows, err := fetch(ctx, c, info); err != nil || fmt.Sprint(rows) != "[[42]]" {
		t.Fatalf("fresh: %v %v", rows, err)
	}
	time.Sleep(time.Second)
	if _, err := p.Execute(ctx); status.Code(err) != codes.NotFound {
		t.Fatalf("after the idle timeout: %v, want NotFound", err)
	}
}

func TestMetadata(t *testing.T) {
	n := minktest.Start(t, minktest.Options{})
	c := dial(t, n)
	ctx := context.Background()
	update(t, ctx, c, "CREATE TABLE logs (id bigint NOT NULL, msg text) WITH (buckets = 1)")
	update(t, ctx, c, "CREATE TABLE users (org int, name text, age int, PRIMARY KEY (org, name)) WITH (buckets = 1)")
	update(t, ctx, c, "CREATE VIEW adults AS SELECT name, age FROM users WHERE age >= 18")
	update(t, ctx, c, "INSERT INTO users VALUES (1, 'ann', 30), (1, 'bo', 9)")
	_, rows := query(t, ctx, c, "SELECT name, age FROM adults")
	wantRows(t, "view", rows, [][]string{{"ann", "30"}})

	read := func(info *flight.FlightInfo, err error) [][]string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		_, rows, err := fetch(ctx, c, info)
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}
	wantRows(t, "catalogs", read(c.GetCatalogs(ctx)), [][]string{{"mink"}})
	wantRows(t, "schemas", read(c.GetDBSchemas(ctx, &flightsql.GetDBSchemasOpts{})), [][]string{{"mink", "public"}})
	nomatch := "x%"
	wantRows(t, "schemas x%", read(c.GetDBSchemas(ctx, &flightsql.GetDBSchemasOpts{DbSchemaFilterPattern: &nomatch})), nil)
	wantRows(t, "table types", read(c.GetTableTypes(ctx)), [][]string{{"TABLE"}, {"VIEW"}})
	wantRows(t, "tables", read(c.GetTables(ctx, &flightsql.GetTablesOpts{})),
		[][]string{{"mink", "public", "adults", "VIEW"}, {"mink", "public", "logs", "TABLE"}, {"mink", "public", "users", "TABLE"}})
	wantRows(t, "views", read(c.GetTables(ctx, &flightsql.GetTablesOpts{TableTypes: []string{"VIEW"}})),
		[][]string{{"mink", "public", "adults", "VIEW"}})
	pattern := "us_r%"
	info, err := c.GetTables(ctx, &flightsql.GetTablesOpts{TableNameFilterPattern: &pattern, IncludeSchema: true})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.DoGet(ctx, info.Endpoint[0].Ticket)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Next() || r.RecordBatch().NumRows() != 1 {
		t.Fatalf("tables us_r%%: %v", r.Err())
	}
	rec := r.RecordBatch()
	if name := rec.Column(2).ValueStr(0); name != "users" {
		t.Fatalf("table %q", name)
	}
	ts, err := flight.DeserializeSchema(rec.Column(4).(*array.Binary).Value(0), memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	var cols []string
	for _, f := range ts.Fields() {
		cols = append(cols, f.Name+" "+f.Type.String())
	}
	if got := strings.Join(cols, ", "); got != "org int32, name utf8, age int32" {
		t.Fatalf("users schema: %s", got)
	}
	r.Release()

	wantRows(t, "primary keys", read(c.GetPrimaryKeys(ctx, flightsql.TableRef{Table: "users"})),
		[][]string{{"mink", "public", "users", "org", "1", "(null)"}, {"mink", "public", "users", "name", "2", "(null)"}})
	wantRows(t, "log table keys", read(c.GetPrimaryKeys(ctx, flightsql.TableRef{Table: "logs"})), nil)

	// A schema of one's own: listed, its relations under it, filters by
	// schema pattern, and primary keys of its table of the same name.
	update(t, ctx, c, "CREATE SCHEMA staging")
	update(t, ctx, c, "CREATE TABLE staging.users (id bigint PRIMARY KEY, name text) WITH (buckets = 1)")
	wantRows(t, "schemas with staging", read(c.GetDBSchemas(ctx, &flightsql.GetDBSchemasOpts{})), [][]string{{"mink", "public"}, {"mink", "staging"}})
	staging := "stag%"
	wantRows(t, "schemas stag%", read(c.GetDBSchemas(ctx, &flightsql.GetDBSchemasOpts{DbSchemaFilterPattern: &staging})), [][]string{{"mink", "staging"}})
	wantRows(t, "tables with staging", read(c.GetTables(ctx, &flightsql.GetTablesOpts{})),
		[][]string{{"mink", "public", "adults", "VIEW"}, {"mink", "public", "logs", "TABLE"}, {"mink", "public", "users", "TABLE"}, {"mink", "staging", "users", "TABLE"}})
	wantRows(t, "tables of stag%", read(c.GetTables(ctx, &flightsql.GetTablesOpts{DbSchemaFilterPattern: &staging})),
		[][]string{{"mink", "staging", "users", "TABLE"}})
	stagingName := "staging"
	wantRows(t, "staging.users keys", read(c.GetPrimaryKeys(ctx, flightsql.TableRef{DBSchema: &stagingName, Table: "users"})),
		[][]string{{"mink", "staging", "users", "id", "1", "(null)"}})
	_, rows = query(t, ctx, c, "SELECT count(*) FROM staging.users")
	wantRows(t, "a query of staging.users", rows, [][]string{{"0"}})

	info, err = c.GetSqlInfo(ctx, []flightsql.SqlInfo{flightsql.SqlInfoFlightSqlServerName, flightsql.SqlInfoFlightSqlServerReadOnly, flightsql.SqlInfoIdentifierQuoteChar})
	if err != nil {
		t.Fatal(err)
	}
	wantRows(t, "sql info", read(info, nil), [][]string{{"0", `[0,"mink"]`}, {"3", `[1,false]`}, {"504", `[0,"\""]`}})
}

func TestErrors(t *testing.T) {
	n := minktest.Start(t, minktest.Options{})
	c := dial(t, n)
	ctx := context.Background()

	_, err := c.Execute(ctx, "SELECT * FROM nosuch")
	if code, state := sqlstate(t, err); code != codes.NotFound || state != "42P01" {
		t.Fatalf("missing table: %v %s (%v)", code, state, err)
	}
	_, err = c.ExecuteUpdate(ctx, "INSERT INTO nosuch VALUES (1)")
	if _, state := sqlstate(t, err); state != "42P01" {
		t.Fatalf("insert into a missing table: %s", state)
	}
	_, err = c.Execute(ctx, "SELEC 1")
	if code, state := sqlstate(t, err); code != codes.InvalidArgument || state != "42601" {
		t.Fatalf("syntax error: %v %s", code, state)
	}
	_, err = c.Prepare(ctx, "SELECT nosuch FROM (SELECT 1 AS a) t")
	if _, state := sqlstate(t, err); state != "42703" {
		t.Fatalf("prepare with a missing column: %s", state)
	}

	// A query that fails part-way: batches first, then the error.
	info, err := c.Execute(ctx, "SELECT (CASE WHEN i < 9000000 THEN i::text ELSE 'x' END)::integer AS n FROM range(10000000) t(i)")
	if err != nil {
		t.Fatal(err)
	}
	_, rows, err := fetch(ctx, c, info)
	if len(rows) == 0 {
		t.Fatalf("no rows before the error: %v", err)
	}
	if _, state := sqlstate(t, err); state != "22P02" {
		t.Fatalf("mid-stream: %s after %d rows", state, len(rows))
	}

	// A client that stops reading part-way: the server's reader ends
	// (goleak checks at the end) and the node serves the next query.
	info, err = c.Execute(ctx, "SELECT i FROM range(50000000) t(i)")
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	r, err := c.DoGet(cctx, info.Endpoint[0].Ticket)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Next() {
		t.Fatalf("no first batch: %v", r.Err())
	}
	cancel()
	for r.Next() {
	}
	if status.Code(r.Err()) != codes.Canceled {
		t.Fatalf("cancelled DoGet: %v, want Canceled", r.Err())
	}
	r.Release()
	_, rows, err = fetch(ctx, c, mustExecute(t, ctx, c, "SELECT 1"))
	if err != nil || fmt.Sprint(rows) != "[[1]]" {
		t.Fatalf("after a cancelled DoGet: %v %v", rows, err)
	}

	// Unsupported commands say so.
	_, err = c.GetExportedKeys(ctx, flightsql.TableRef{Table: "t"})
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("GetExportedKeys: %v, want Unimplemented", err)
	}
	if _, err := c.BeginTransaction(ctx); status.Code(err) != codes.Unimplemented {
		t.Fatalf("BeginTransaction: %v, want Unimplemented", err)
	}
	unknown, _ := proto.Marshal(&anypb.Any{TypeUrl: "type.googleapis.com/arrow.flight.protocol.sql.CommandFromTheFuture"})
	_, err = c.Client.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: unknown})
	if status.Code(err) != codes.Unimplemented || !strings.Contains(err.Error(), "CommandFromTheFuture") {
		t.Fatalf("unknown command: %v, want Unimplemented", err)
	}
}

// Statements run as the caller's role: a role without a privilege gets
// 42501, and sees only the tables it may read.
func TestRoles(t *testing.T) {
	pwFile := filepath.Join(t.TempDir(), "superuser")
	if err := os.WriteFile(pwFile, []byte("root pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n := minktest.Start(t, minktest.Options{Tweak: func(cfg *server.Config) { cfg.SuperuserPasswordFile = pwFile }})
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, "postgres://mink:root%20pw@"+n.Config.PGAddr+"/mink?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	for _, sql := range []string{
		"CREATE ROLE alice LOGIN PASSWORD 'alice pw'",
		"CREATE TABLE open (id bigint NOT NULL) WITH (buckets = 1)",
		"CREATE TABLE secret (id bigint NOT NULL) WITH (buckets = 1)",
		"INSERT INTO open VALUES (7)",
		"GRANT SELECT ON open TO alice",
	} {
		if _, err := admin.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	c := dial(t, n)
	if _, err := c.Execute(ctx, "SELECT 1"); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("no credentials: %v, want Unauthenticated", err)
	}
	alice, err := c.Client.AuthenticateBasicToken(ctx, "alice", "alice pw")
	if err != nil {
		t.Fatal(err)
	}
	_, rows := query(t, alice, c, "SELECT id FROM open")
	wantRows(t, "alice reads open", rows, [][]string{{"7"}})
	_, err = c.Execute(alice, "SELECT * FROM secret")
	if code, state := sqlstate(t, err); code != codes.PermissionDenied || state != "42501" {
		t.Fatalf("alice reads secret: %v %s", code, state)
	}
	_, err = c.ExecuteUpdate(alice, "INSERT INTO open VALUES (8)")
	if _, state := sqlstate(t, err); state != "42501" {
		t.Fatalf("alice inserts: %s", state)
	}
	info, err := c.GetTables(alice, &flightsql.GetTablesOpts{})
	if err != nil {
		t.Fatal(err)
	}
	_, rows, err = fetch(alice, c, info)
	if err != nil {
		t.Fatal(err)
	}
	wantRows(t, "alice's tables", rows, [][]string{{"mink", "public", "open", "TABLE"}})

	// Another role cannot use alice's prepared statement.
	p, err := c.Prepare(alice, "SELECT id FROM open")
	if err != nil {
		t.Fatal(err)
	}
	root, err := c.Client.AuthenticateBasicToken(ctx, "mink", "root pw")
	if err != nil {
		t.Fatal(err)
	}
	cmd, _ := anypb.New(&pb.CommandPreparedStatementQuery{PreparedStatementHandle: p.Handle()})
	body, _ := proto.Marshal(cmd)
	if _, err := c.Client.GetFlightInfo(root, &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: body}); status.Code(err) != codes.NotFound {
		t.Fatalf("another role's prepared statement: %v, want NotFound", err)
	}
	if err := p.Close(alice); err != nil {
		t.Fatal(err)
	}
}

// Column types: a query the engine runs gives DuckDB's Arrow types; rows
// mink makes itself (RETURNING, a point lookup) are converted from rows,
// text for the types without a direct Arrow form. Both say the same
// values.
func TestTypes(t *testing.T) {
	n := minktest.Start(t, minktest.Options{})
	c := dial(t, n)
	ctx := context.Background()
	update(t, ctx, c, "CREATE TABLE ty (k bigint PRIMARY KEY, b boolean, i int, n numeric(10,2), d date, ts timestamptz, u uuid, a int[]) WITH (buckets = 1)")
	schema, rows := query(t, ctx, c, "INSERT INTO ty VALUES (1, true, 7, 12.50, '2024-03-01', '2024-03-01 12:00:00+00', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{1,2}') RETURNING *")
	types := func(s *arrow.Schema) string {
		var out []string
		for _, f := range s.Fields() {
			out = append(out, f.Name+":"+f.Type.String())
		}
		return strings.Join(out, " ")
	}
	if got, want := types(schema), "k:int64 b:bool i:int32 n:decimal(10, 2) d:date32 ts:timestamp[us, tz=UTC] u:utf8 a:utf8"; got != want {
		t.Fatalf("RETURNING schema\n%s, want\n%s", got, want)
	}
	wantRows(t, "RETURNING", rows, [][]string{{"1", "true", "7", "12.5", "2024-03-01", "2024-03-01T12:00:00Z", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "{1,2}"}})

	schema, rows = query(t, ctx, c, "SELECT k, b, i, n, d, u, a FROM ty ORDER BY k")
	if got, want := types(schema), "k:int64 b:bool i:int32 n:decimal(10, 2) d:date32 u:utf8 a:list<l: int32, nullable>"; got != want {
		t.Fatalf("query schema\n%s, want\n%s", got, want)
	}
	wantRows(t, "query", rows, [][]string{{"1", "true", "7", "12.5", "2024-03-01", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "[1,2]"}}) // arrow-go prints decimal(10,2) 12.50 as 12.5
}
