package pgwire

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"
)

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestPgxStartup(t *testing.T) {
	ts := startServer(t, Config{ServerVersion: "15.4 (mink test)"})
	conn := ts.pgx(t, "application_name=wiretest&timezone=Asia/Kolkata")
	pg := conn.PgConn()
	want := map[string]string{
		"server_version":                "15.4 (mink test)",
		"server_encoding":               "UTF8",
		"client_encoding":               "UTF8",
		"DateStyle":                     "ISO, MDY",
		"integer_datetimes":             "on",
		"standard_conforming_strings":   "on",
		"TimeZone":                      "Asia/Kolkata",
		"IntervalStyle":                 "postgres",
		"application_name":              "wiretest",
		"is_superuser":                  "on",
		"session_authorization":         "mink",
		"default_transaction_read_only": "off",
		"in_hot_standby":                "off",
	}
	for name, value := range want {
		if got := pg.ParameterStatus(name); got != value {
			t.Errorf("ParameterStatus(%s) = %q, want %q", name, got, value)
		}
	}
	if pg.PID() == 0 || len(pg.SecretKey()) != 4 {
		t.Errorf("BackendKeyData pid %d secret %x", pg.PID(), pg.SecretKey())
	}
	// The session saw the startup parameters, and a second connection gets
	// another key.
	ts.h.mu.Lock()
	info := ts.h.mu.infos[0]
	ts.h.mu.Unlock()
	if info.User != "mink" || info.Database != "mink" || info.ApplicationName != "wiretest" ||
		info.Params["timezone"] != "Asia/Kolkata" || info.ProcessID != pg.PID() || info.TLS {
		t.Errorf("SessionInfo = %+v", info)
	}
	other := ts.pgx(t, "")
	if other.PgConn().PID() == pg.PID() || bytes.Equal(other.PgConn().SecretKey(), pg.SecretKey()) {
		t.Errorf("two connections share pid %d / secret %x", pg.PID(), pg.SecretKey())
	}
	// timestamptz text is rendered in the session zone.
	rows, err := conn.Query(testCtx(t), "select * from t", pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatal(err)
	}
	rows.Next()
	if got := string(rows.RawValues()[4]); got != "2024-01-02 08:34:05.123456+05:30" {
		t.Errorf("timestamptz text in Asia/Kolkata = %q", got)
	}
	rows.Close()
}

func TestPgxUnknownDatabase(t *testing.T) {
	ts := startServer(t, Config{})
	_, err := pgx.Connect(testCtx(t), fmt.Sprintf("postgres://mink@%s/nosuchdb?sslmode=disable", ts.addr))
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != CodeInvalidCatalogName || pgErr.Severity != "FATAL" ||
		pgErr.Message != `database "nosuchdb" does not exist` {
		t.Fatalf("connect to unknown database: %v", err)
	}
}

// TestPgxQueryModes reads every column type of t and echoes every parameter
// type, in each of pgx's execution modes: cached statements use binary
// results and parameters, the simple protocol and QueryExecModeExec use text.
func TestPgxQueryModes(t *testing.T) {
	ts := startServer(t, Config{})
	conn := ts.pgx(t, "")
	ctx := testCtx(t)
	modes := map[string]pgx.QueryExecMode{
		"cache_statement": pgx.QueryExecModeCacheStatement,
		"cache_describe":  pgx.QueryExecModeCacheDescribe,
		"describe_exec":   pgx.QueryExecModeDescribeExec,
		"exec":            pgx.QueryExecModeExec,
		"simple":          pgx.QueryExecModeSimpleProtocol,
	}
	for name, mode := range modes {
		t.Run(name, func(t *testing.T) {
			rows, err := conn.Query(ctx, "select * from t", mode)
			if err != nil {
				t.Fatal(err)
			}
			type row struct {
				id     int64
				name   *string
				ok     *bool
				score  *float64
				ts     *time.Time
				amount pgtype.Numeric
				data   []byte
				day    *time.Time
				uid    pgtype.UUID
				docRaw any
			}
			var got []row
			for rows.Next() {
				var r row
				if err := rows.Scan(&r.id, &r.name, &r.ok, &r.score, &r.ts, &r.amount, &r.data, &r.day, &r.uid, &r.docRaw); err != nil {
					t.Fatalf("scan row %d: %v", len(got)+1, err)
				}
				got = append(got, r)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if tag := rows.CommandTag().String(); tag != "SELECT 3" {
				t.Errorf("tag %q", tag)
			}
			if len(got) != 3 {
				t.Fatalf("%d rows", len(got))
			}
			r := got[0]
			amount, _ := r.amount.Value()
			if r.id != 1 || *r.name != "alpha" || !*r.ok || *r.score != 1.5 ||
				!r.ts.Equal(time.Date(2024, 1, 2, 3, 4, 5, 123456000, time.UTC)) || amount != "123.45" ||
				!bytes.Equal(r.data, []byte{0xde, 0xad, 0xbe, 0xef}) || r.day.Format(time.DateOnly) != "2024-01-02" ||
				fmt.Sprintf("%x", r.uid.Bytes) != "123456789abcdef0123456789abcdef0" || fmt.Sprint(r.docRaw) != "map[a:1]" {
				t.Errorf("row 1 = %+v (amount %v, doc %v)", r, amount, r.docRaw)
			}
			r = got[1]
			amount, _ = r.amount.Value()
			if *r.name != "bé\ttab" || *r.ok || *r.score != -0.25 || amount != "-0.50" || len(r.data) != 0 || r.data == nil ||
				r.uid.Bytes[15] != 1 || fmt.Sprint(r.docRaw) != "[1 2]" {
				t.Errorf("row 2 = %+v", r)
			}
			r = got[2]
			if r.name != nil || r.ok != nil || r.score != nil || r.ts != nil || r.amount.Valid || r.data != nil || r.day != nil || r.uid.Valid || r.docRaw != nil {
				t.Errorf("row 3 should be NULLs: %+v", r)
			}

			if mode == pgx.QueryExecModeSimpleProtocol {
				return // pgx interpolates parameters into the SQL text itself
			}
			// Parameters of every type go in and come back out.
			ts := time.Date(2023, 5, 6, 7, 8, 9, 10000, time.UTC)
			in := []any{int64(-5), "x'y\"z", true, 3.25, ts, pgtype.Numeric{Int: big.NewInt(-31415), Exp: -4, Valid: true},
				[]byte{0, 1, 255}, pgtype.Date{Time: time.Date(2020, 2, 29, 0, 0, 0, 0, time.UTC), Valid: true},
				pgtype.UUID{Bytes: [16]byte{1, 2, 3}, Valid: true}, `{"k": "v"}`, nil}
			var (
				outInt   int64
				outText  string
				outBool  bool
				outF     float64
				outTS    time.Time
				outNum   pgtype.Numeric
				outBytes []byte
				outDate  pgtype.Date
				outUUID  pgtype.UUID
				outJSON  map[string]any
				outNull  *string
			)
			err = conn.QueryRow(ctx, "select $1::int8, $2::text, $3::bool, $4::float8, $5::timestamptz, $6::numeric, $7::bytea, $8::date, $9::uuid, $10::jsonb, $11::text",
				append([]any{mode}, in...)...).
				Scan(&outInt, &outText, &outBool, &outF, &outTS, &outNum, &outBytes, &outDate, &outUUID, &outJSON, &outNull)
			if err != nil {
				t.Fatal(err)
			}
			num, _ := outNum.Value()
			if outInt != -5 || outText != "x'y\"z" || !outBool || outF != 3.25 || !outTS.Equal(ts) || num != "-3.1415" ||
				!bytes.Equal(outBytes, []byte{0, 1, 255}) || outDate.Time.Format(time.DateOnly) != "2020-02-29" ||
				outUUID.Bytes != [16]byte{1, 2, 3} || outJSON["k"] != "v" || outNull != nil {
				t.Errorf("echo: %v %q %v %v %v %v %x %v %x %v %v", outInt, outText, outBool, outF, outTS, num, outBytes, outDate.Time, outUUID.Bytes, outJSON, outNull)
			}
		})
	}
}

func TestPgxPreparedAndBatch(t *testing.T) {
	ts := startServer(t, Config{})
	conn := ts.pgx(t, "")
	ctx := testCtx(t)
	sd, err := conn.Prepare(ctx, "sq", "select $1::int8, $2::text")
	if err != nil {
		t.Fatal(err)
	}
	if len(sd.ParamOIDs) != 2 || sd.ParamOIDs[0] != pgtype.Int8OID || len(sd.Fields) != 2 || sd.Fields[1].Name != "p2" {
		t.Fatalf("statement description %+v", sd)
	}
	for i := range 3 {
		var n int64
		var s string
		if err := conn.QueryRow(ctx, "sq", i, fmt.Sprint("v", i)).Scan(&n, &s); err != nil || n != int64(i) || s != fmt.Sprint("v", i) {
			t.Fatalf("prepared run %d: %d %q %v", i, n, s, err)
		}
	}
	// A batch is one Sync for many statements; an error in the middle
	// discards the rest.
	b := &pgx.Batch{}
	b.Queue("select 1")
	b.Queue("select n from series(3)")
	b.Queue("fail 42P01")
	b.Queue("select 1")
	br := conn.SendBatch(ctx, b)
	var one int32
	if err := br.QueryRow().Scan(&one); err != nil || one != 1 {
		t.Fatalf("batch 1: %v", err)
	}
	rows, _ := br.Query()
	ns, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil || len(ns) != 3 {
		t.Fatalf("batch 2: %v %v", ns, err)
	}
	_, err = br.Exec()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != CodeUndefinedTable {
		t.Fatalf("batch 3: %v", err)
	}
	br.Close()
	// The connection is fine afterwards.
	if err := conn.QueryRow(ctx, "select 1").Scan(&one); err != nil {
		t.Fatal(err)
	}
}

func TestPgxErrors(t *testing.T) {
	ts := startServer(t, Config{})
	conn := ts.pgx(t, "")
	ctx := testCtx(t)
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeSimpleProtocol} {
		_, err := conn.Exec(ctx, "select * from missing", mode)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "42P01" || pgErr.Message != `relation "missing" does not exist` || pgErr.Position != 15 {
			t.Errorf("mode %v: %#v", mode, err)
		}
		_, err = conn.Exec(ctx, "fail 23505", mode)
		if !errors.As(err, &pgErr) || pgErr.Code != "23505" || pgErr.Detail != "some detail" || pgErr.Hint != "some hint" {
			t.Errorf("mode %v: %#v", mode, err)
		}
		_, err = conn.Exec(ctx, "select $1::int8", "not a number")
		if err == nil {
			t.Error("a string for an int8 parameter was accepted")
		}
	}
	// Errors that are not *Error reach the client as XX000.
	_, err := conn.Exec(ctx, "select $1::int8", pgx.QueryExecModeExec, "12x")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "22P02" || pgErr.Where != "unnamed portal parameter $1 = '12x'" {
		t.Errorf("bad text parameter: %#v", err)
	}
	var one int32
	if err := conn.QueryRow(ctx, "select 1").Scan(&one); err != nil {
		t.Fatal(err)
	}
}

func TestPgxTransactions(t *testing.T) {
	ts := startServer(t, Config{})
	conn := ts.pgx(t, "")
	ctx := testCtx(t)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st := conn.PgConn().TxStatus(); st != 'T' {
		t.Fatalf("status in block %c", st)
	}
	if _, err := tx.Exec(ctx, "fail 40001"); err == nil {
		t.Fatal("no error")
	}
	if st := conn.PgConn().TxStatus(); st != 'E' {
		t.Fatalf("status after error %c", st)
	}
	_, err = tx.Exec(ctx, "select 1")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != CodeInFailedSQLTransaction {
		t.Fatalf("in failed block: %v", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if st := conn.PgConn().TxStatus(); st != 'I' {
		t.Fatalf("status after rollback %c", st)
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "create table x")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestPgxCopyFrom(t *testing.T) {
	ts := startServer(t, Config{})
	conn := ts.pgx(t, "")
	ctx := testCtx(t)
	const n = 20000
	rows := make([][]any, n)
	for i := range rows {
		var name any = fmt.Sprintf("name %d\t\\ \"q\"", i)
		if i%7 == 0 {
			name = nil
		}
		rows[i] = []any{int64(i), name, float64(i) / 4}
	}
	count, err := conn.CopyFrom(ctx, pgx.Identifier{"c"}, []string{"id", "name", "score"}, pgx.CopyFromRows(rows))
	if err != nil {
		t.Fatal(err)
	}
	if count != n {
		t.Fatalf("CopyFrom reported %d rows", count)
	}
	got := ts.h.committed()
	if len(got) != n {
		t.Fatalf("%d rows stored", len(got))
	}
	for i, r := range got {
		if r[0] != rows[i][0] || r[1] != rows[i][1] || r[2] != rows[i][2] {
			t.Fatalf("row %d stored as %#v, sent %#v", i, r, rows[i])
		}
	}
	// One bad row (a NULL id, which the sink rejects) stores none of the
	// rows of that COPY.
	bad := [][]any{{int64(1), "a", 1.0}, {int64(2), "b", 2.0}, {int64(3), "c", 3.0}, {nil, "d", 4.0}, {int64(5), "e", 5.0}}
	_, err = conn.CopyFrom(ctx, pgx.Identifier{"c"}, []string{"id", "name", "score"}, pgx.CopyFromRows(bad))
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != CodeNotNullViolation || pgErr.Where != "COPY c, line 4" {
		t.Fatalf("CopyFrom with a NULL id: %#v", err)
	}
	if len(ts.h.committed()) != n {
		t.Fatalf("failed COPY stored rows: %d", len(ts.h.committed())-n)
	}
	// The connection is usable after the failed COPY.
	var one int32
	if err := conn.QueryRow(ctx, "select 1").Scan(&one); err != nil {
		t.Fatal(err)
	}
	// Column subset: pgx names the columns; the others stay NULL.
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"c"}, []string{"score", "id"}, pgx.CopyFromRows([][]any{{9.5, int64(99)}})); err != nil {
		t.Fatal(err)
	}
	last := ts.h.committed()[n]
	if last[0] != int64(99) || last[1] != nil || last[2] != 9.5 {
		t.Fatalf("column-subset row %#v", last)
	}
}

func TestPgxCopyTo(t *testing.T) {
	ts := startServer(t, Config{})
	conn := ts.pgx(t, "")
	ctx := testCtx(t)
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"c"}, []string{"id", "name", "score"},
		pgx.CopyFromRows([][]any{{int64(1), "a,b", 0.5}, {int64(2), nil, nil}})); err != nil {
		t.Fatal(err)
	}
	for opts, want := range map[string]string{
		"":                          "1\ta,b\t0.5\n2\t\\N\t\\N\n",
		"with (format csv, header)": "id,name,score\n1,\"a,b\",0.5\n2,,\n",
		"with (format binary)": string(binaryHeader()) +
			"\x00\x03\x00\x00\x00\x08\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x03a,b\x00\x00\x00\x08\x3f\xe0\x00\x00\x00\x00\x00\x00" +
			"\x00\x03\x00\x00\x00\x08\x00\x00\x00\x00\x00\x00\x00\x02\xff\xff\xff\xff\xff\xff\xff\xff" + "\xff\xff",
	} {
		var buf bytes.Buffer
		tag, err := conn.PgConn().CopyTo(ctx, &buf, strings.TrimSpace("copy c to stdout "+opts))
		if err != nil {
			t.Fatalf("%s: %v", opts, err)
		}
		if tag.String() != "COPY 2" || buf.String() != want {
			t.Errorf("copy to %s: tag %q\n got %q\nwant %q", opts, tag, buf.String(), want)
		}
	}
}

func TestPgxCancel(t *testing.T) {
	h := &testHandler{sleeping: make(chan struct{}, 1)}
	ts := startServer(t, Config{Handler: h})
	ctx := testCtx(t)
	cfg, err := pgx.ParseConfig(ts.url("", ""))
	if err != nil {
		t.Fatal(err)
	}
	// Ask pgx to send a CancelRequest when a query's context ends (its
	// default only sets a socket deadline).
	cfg.BuildContextWatcherHandler = func(pg *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: pg, DeadlineDelay: 10 * time.Second}
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	// An explicit CancelRequest from another goroutine.
	done := make(chan error, 1)
	go func() {
		_, err := conn.Exec(ctx, "select pg_sleep")
		done <- err
	}()
	<-h.sleeping
	if err := conn.PgConn().CancelRequest(ctx); err != nil {
		t.Fatal(err)
	}
	err = <-done
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != CodeQueryCanceled || pgErr.Message != "canceling statement due to user request" {
		t.Fatalf("canceled query: %#v", err)
	}
	var one int32
	if err := conn.QueryRow(ctx, "select 1").Scan(&one); err != nil {
		t.Fatalf("after cancel: %v", err)
	}

	// pgx sends a CancelRequest when the query's context ends.
	qctx, cancel := context.WithCancel(ctx)
	go func() { <-h.sleeping; cancel() }()
	_, err = conn.Exec(qctx, "select pg_sleep", pgx.QueryExecModeSimpleProtocol)
	if err == nil {
		t.Fatal("canceled query succeeded")
	}
	if !errors.Is(err, context.Canceled) && !(errors.As(err, &pgErr) && pgErr.Code == CodeQueryCanceled) {
		t.Fatalf("context-canceled query: %v", err)
	}
	if conn.IsClosed() {
		t.Fatal("pgx closed the connection: the cancel did not stop the query")
	}
	if err := conn.QueryRow(ctx, "select 1").Scan(&one); err != nil {
		t.Fatalf("after context cancel: %v", err)
	}

	// A CancelRequest with the wrong secret does nothing.
	go func() {
		_, err := conn.Exec(ctx, "select pg_sleep")
		done <- err
	}()
	<-h.sleeping
	raw := dialRaw(t, ts.addr)
	raw.send(&pgproto3.CancelRequest{ProcessID: conn.PgConn().PID(), SecretKey: []byte{1, 2, 3, 4}})
	select {
	case err := <-done:
		t.Fatalf("query ended after a cancel with a wrong secret: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := conn.PgConn().CancelRequest(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.As(err, &pgErr) || pgErr.Code != CodeQueryCanceled {
		t.Fatalf("second cancel: %v", err)
	}
}

// TestPgxProtocol32 connects with a client that asks for protocol 3.2 (longer
// cancel keys): the server negotiates 3.0 and everything, cancel included,
// works as usual.
func TestPgxProtocol32(t *testing.T) {
	ts := startServer(t, Config{})
	conn := ts.pgx(t, "max_protocol_version=3.2")
	ctx := testCtx(t)
	var one int32
	if err := conn.QueryRow(ctx, "select 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("query over negotiated protocol: %v", err)
	}
	if len(conn.PgConn().SecretKey()) != 4 {
		t.Fatalf("secret key of %d bytes", len(conn.PgConn().SecretKey()))
	}
	// A client that requires 3.2 gives up.
	if _, err := pgx.Connect(ctx, ts.url("", "min_protocol_version=3.2")); err == nil {
		t.Fatal("min_protocol_version=3.2 connected to a 3.0 server")
	}
}
