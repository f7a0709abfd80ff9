package engine

import (
	"context"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/minkdb/mink/internal/sqltypes"
)

// allTypes has a column of every type a mink table can have.
var allTypes = []struct{ name, typ string }{
	{"b", "boolean"}, {"i2", "smallint"}, {"i4", "integer"}, {"i8", "bigint"},
	{"f4", "real"}, {"f8", "double precision"}, {"n", "numeric(12,2)"}, {"nu", "numeric"},
	{"t", "text"}, {"vc", "varchar(5)"}, {"ch", "char(3)"}, {"by", "bytea"},
	{"d", "date"}, {"tm", "time"}, {"ts", "timestamp"}, {"tz", "timestamptz"},
	{"iv", "interval"}, {"u", "uuid"}, {"j", "json"}, {"jb", "jsonb"},
}

// allTypesRows: typical values, extremes, and a row of NULLs.
const allTypesRows = `[
{"b": true, "i2": -32768, "i4": 2147483647, "i8": -9223372036854775808, "f4": 1.5, "f8": -2.25e300,
 "n": "9999999999.99", "nu": "123456789012345678.0123456789", "t": "héllo ✓", "vc": "abcde", "ch": "ab",
 "by": "AP8=", "d": "2024-02-29", "tm": "23:59:59.999999", "ts": "2024-02-29 12:34:56.789012",
 "tz": "2024-02-29T12:34:56.789012Z", "iv": {"months": 14, "days": -3, "nanoseconds": 3723000001000},
 "u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "j": "{\"a\": [1, 2.5, null]}", "jb": "{\"k\": \"v\"}"},
{"b": false, "i2": 32767, "i4": -2147483648, "i8": 9223372036854775807, "f4": -0.25, "f8": 5e-324,
 "n": "-0.01", "nu": "-0.0000000001", "t": "", "vc": "", "ch": "",
 "by": "", "d": "1900-01-01", "tm": "00:00:00", "ts": "1900-01-01 00:00:00",
 "tz": "1969-12-31T23:59:59.999999Z", "iv": {"months": 0, "days": 0, "nanoseconds": 0},
 "u": "00000000-0000-0000-0000-000000000000", "j": "null", "jb": "[]"},
{"b": null, "i2": null, "i4": null, "i8": null, "f4": null, "f8": null, "n": null, "nu": null, "t": null,
 "vc": null, "ch": null, "by": null, "d": null, "tm": null, "ts": null, "tz": null, "iv": null, "u": null,
 "j": null, "jb": null}
]`

func allTypesTable(t testing.TB) ([]sqltypes.Column, arrow.RecordBatch) {
	t.Helper()
	cols := make([]sqltypes.Column, len(allTypes))
	for i, c := range allTypes {
		cols[i] = sqltypes.Column{Name: c.name, Type: mustType(t, c.typ)}
	}
	return cols, fromJSON(t, sqltypes.Schema(cols), allTypesRows)
}

// checkConformsTo checks that DuckDB's output batches, conformed to cols,
// equal want.
func checkConformsTo(t *testing.T, what string, cols []sqltypes.Column, recs []arrow.RecordBatch, want arrow.RecordBatch) {
	t.Helper()
	if len(recs) != 1 {
		t.Fatalf("%s: %d batches, want 1", what, len(recs))
	}
	got, err := sqltypes.Conform("t", cols, recs[0], memory.DefaultAllocator)
	if err != nil {
		t.Fatalf("%s: Conform: %v", what, err)
	}
	defer got.Release()
	if !got.Schema().Equal(want.Schema()) {
		t.Errorf("%s: schema\n%s\nwant\n%s", what, got.Schema(), want.Schema())
	}
	for i, c := range cols {
		if !array.Equal(got.Column(i), want.Column(i)) {
			t.Errorf("%s: column %s (%s): got %v, want %v", what, c.Name, c.Type, got.Column(i), want.Column(i))
		}
	}
}

// TestTypeRoundTrip feeds a batch with every mink type to DuckDB and reads
// it back: the Arrow output conforms to exactly the input, and so does the
// output of casting every value to text and back with the type's
// DuckDBType (the path INSERT … VALUES takes).
func TestTypeRoundTrip(t *testing.T) {
	c := openConn(t, openDB(t, Options{}))
	cols, rec := allTypesTable(t)
	register(t, c, "t", rec)

	_, recs := readAll(t, c, "SELECT * FROM t")
	checkConformsTo(t, "SELECT *", cols, recs, rec)

	casts := make([]string, len(cols))
	for i, col := range cols {
		casts[i] = "CAST(CAST(" + quoteIdent(col.Name) + " AS VARCHAR) AS " + col.Type.DuckDBType() + ") AS " + quoteIdent(col.Name)
	}
	_, recs = readAll(t, c, "SELECT "+strings.Join(casts, ", ")+" FROM t")
	checkConformsTo(t, "text casts", cols, recs, rec)

	// DuckDB reads each column as the type's DuckDBType, and the result is
	// described to clients with the type's OID and typmod (varchar(n),
	// char(n) and jsonb have no DuckDB counterpart and come back as text
	// and json).
	d, err := c.Describe(context.Background(), "SELECT * FROM t")
	if err != nil {
		t.Fatal(err)
	}
	for i, col := range d.Columns {
		want := sqltypes.FromDuckDB(cols[i].Type.DuckDBType())
		if col.Type != want || col.Name != cols[i].Name {
			t.Errorf("column %s: described as %s %s (DuckDB %s), want %s", cols[i].Name, col.Name, col.Type, col.DuckDBType, want)
		}
		if got := sqltypes.FromDuckDB(col.DuckDBType); got != want {
			t.Errorf("column %s: DuckDB type %s, want %s", cols[i].Name, col.DuckDBType, cols[i].Type.DuckDBType())
		}
	}
}

// TestRowValues checks the Go values Query returns for every type, and
// that a NULL row is all nil.
func TestRowValues(t *testing.T) {
	c := openConn(t, openDB(t, Options{}))
	_, rec := allTypesTable(t)
	register(t, c, "t", rec)
	rows, err := c.Query(context.Background(), "SELECT * FROM t")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got [][]any
	for rows.Next() {
		got = append(got, append([]any(nil), rows.Values()...))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("%d rows", len(got))
	}
	want := []any{
		true, int16(-32768), int32(2147483647), int64(-9223372036854775808), float32(1.5), -2.25e300,
		pgtype.Numeric{Int: big.NewInt(999999999999), Exp: -2, Valid: true},
		pgtype.Numeric{Int: mustBig("1234567890123456780123456789"), Exp: -10, Valid: true},
		"héllo ✓", "abcde", "ab", []byte{0, 0xff},
		time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC),
		pgtype.Time{Microseconds: 86399999999, Valid: true},
		time.Date(2024, 2, 29, 12, 34, 56, 789012000, time.UTC),
		time.Date(2024, 2, 29, 12, 34, 56, 789012000, time.UTC),
		pgtype.Interval{Months: 14, Days: -3, Microseconds: 3723000001, Valid: true},
		"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", `{"a": [1, 2.5, null]}`, `{"k": "v"}`,
	}
	for i, w := range want {
		if !reflect.DeepEqual(got[0][i], w) {
			t.Errorf("column %s: %#v, want %#v", allTypes[i].name, got[0][i], w)
		}
	}
	for i, v := range got[2] {
		if v != nil {
			t.Errorf("NULL row: column %s = %#v", allTypes[i].name, v)
		}
	}
}

func mustBig(s string) *big.Int {
	n, ok := new(big.Int).SetString(s, 10)
	if !ok {
		panic(s)
	}
	return n
}

// TestResultTypes checks the description and values of DuckDB result types
// that tables cannot hold.
func TestResultTypes(t *testing.T) {
	c := openConn(t, openDB(t, Options{}))
	rows, err := c.Query(context.Background(), `SELECT
		42::HUGEINT AS h, 18446744073709551615::UBIGINT AS ub, 7::UTINYINT AS ut, 7::TINYINT AS ti,
		[1, NULL, 3] AS li, ['a', 'b'] AS ls, [[1], [2, 3]] AS nested,
		{'x': 1, 'a': 'y'} AS st, MAP {'k': 1} AS mp, 'b'::ENUM('a', 'b') AS en,
		TIMESTAMP_NS '2024-01-01 00:00:00.123456789' AS tns, 'infinity'::TIMESTAMP AS inf,
		'-infinity'::DATE AS ninf, NULL AS nul, 5 / 2 AS intdiv`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	wantTypes := []string{"numeric", "numeric", "smallint", "smallint", "integer[]", "text[]", "json",
		"json", "json", "text", "timestamp without time zone", "timestamp without time zone", "date", "integer", "integer"}
	for i, col := range rows.Columns() {
		if col.Type.Name() != wantTypes[i] {
			t.Errorf("column %s (DuckDB %s) described as %s, want %s", col.Name, col.DuckDBType, col.Type, wantTypes[i])
		}
	}
	if !rows.Next() {
		t.Fatal(rows.Err())
	}
	want := []any{
		pgtype.Numeric{Int: big.NewInt(42), Exp: 0, Valid: true},
		pgtype.Numeric{Int: mustBig("18446744073709551615"), Valid: true},
		int16(7), int16(7),
		[]any{int32(1), nil, int32(3)}, []any{"a", "b"}, "[[1],[2,3]]",
		`{"x":1,"a":"y"}`, `{"k":1}`, "b",
		time.Date(2024, 1, 1, 0, 0, 0, 123456789, time.UTC),
		pgtype.Timestamp{InfinityModifier: pgtype.Infinity, Valid: true},
		pgtype.Date{InfinityModifier: pgtype.NegativeInfinity, Valid: true},
		nil, int32(2),
	}
	for i, w := range want {
		if got := rows.Values()[i]; !reflect.DeepEqual(got, w) {
			t.Errorf("column %s: %#v, want %#v", rows.Columns()[i].Name, got, w)
		}
	}
}

// TestTimeZone: the session zone governs how DuckDB reads zone-less
// timestamptz literals and converts instants to dates, while timestamptz
// values stay instants.
func TestTimeZone(t *testing.T) {
	db := openDB(t, Options{})
	ctx := context.Background()
	c, err := db.Conn(ctx, ConnOptions{TimeZone: "Asia/Kolkata"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cols, rec := allTypesTable(t)
	register(t, c, "t", rec)
	expectRows(t, c, "SELECT current_setting('TimeZone')", "Asia/Kolkata")
	// 2024-02-29T12:34:56Z is 18:04:56 in Kolkata.
	expectRows(t, c, "SELECT hour(tz), minute(tz) FROM t WHERE i2 = -32768", "18|4")
	rows := query(t, c, "SELECT TIMESTAMPTZ '2024-01-01 05:30:00' = TIMESTAMPTZ '2024-01-01 00:00:00+00'")
	if rows[0] != "true" {
		t.Errorf("zone-less literal not read in the session zone: %v", rows)
	}
	// Arrow output is labelled with the session zone but holds the same
	// instants, and conforms back to the stored type.
	schema, recs := readAll(t, c, "SELECT * FROM t")
	if tz := schema.Field(15).Type.(*arrow.TimestampType).TimeZone; tz != "Asia/Kolkata" {
		t.Errorf("timestamptz zone label %q", tz)
	}
	checkConformsTo(t, "Kolkata session", cols, recs, rec)

	if err := c.SetTimeZone(ctx, "No/Such_Zone"); sqlState(err) != CodeInvalidParameterValue {
		t.Errorf("unknown zone: %v (%s)", err, sqlState(err))
	}
	if err := c.SetTimeZone(ctx, "UTC"); err != nil {
		t.Fatal(err)
	}
	expectRows(t, c, "SELECT hour(tz) FROM t WHERE i2 = -32768", "12")
}

// TestParams binds Go and pgtype values to parameters.
func TestParams(t *testing.T) {
	c := openConn(t, openDB(t, Options{}))
	ts := time.Date(2024, 5, 6, 7, 8, 9, 123456000, time.UTC)
	uuid := [16]byte{0xa0, 0xee, 0xbc, 0x99, 0x9c, 0x0b, 0x4e, 0xf8, 0xbb, 0x6d, 0x6b, 0xb9, 0xbd, 0x38, 0x0a, 0x11}
	got := queryValues(t, c, `SELECT $1::INTEGER + 1, $2 || 'x', $3::DOUBLE, $4::UUID, $5::BLOB, $6::BOOLEAN,
		$7::TIMESTAMPTZ, $8::TIMESTAMP, $9::DATE, $10::DECIMAL(10,3), $11::INTERVAL, $12::INTEGER IS NULL, $13::TIME`,
		41, "a", 1.5, uuid, []byte{1, 2}, true, ts,
		pgtype.Timestamp{Time: ts, Valid: true},
		pgtype.Date{Time: time.Date(2024, 5, 6, 0, 0, 0, 0, time.UTC), Valid: true},
		pgtype.Numeric{Int: big.NewInt(12345), Exp: -2, Valid: true},
		pgtype.Interval{Months: 1, Days: 2, Microseconds: 3, Valid: true},
		nil,
		pgtype.Time{Microseconds: 3_600_000_001, Valid: true})
	want := []any{int32(42), "ax", 1.5, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", []byte{1, 2}, true,
		ts, ts, time.Date(2024, 5, 6, 0, 0, 0, 0, time.UTC),
		pgtype.Numeric{Int: big.NewInt(123450), Exp: -3, Valid: true},
		pgtype.Interval{Months: 1, Days: 2, Microseconds: 3, Valid: true}, true,
		pgtype.Time{Microseconds: 3_600_000_001, Valid: true}}
	if len(got) != 1 || !reflect.DeepEqual(got[0], want) {
		t.Errorf("got  %#v\nwant %#v", got, want)
	}
	_, err := c.Query(context.Background(), "SELECT $1::INTEGER", 1, 2)
	if sqlState(err) != "08P01" {
		t.Errorf("too many parameters: %v", err)
	}
	_, err = c.Query(context.Background(), "SELECT $1::INTEGER", struct{}{})
	if sqlState(err) != CodeFeatureNotSupported {
		t.Errorf("unsupported Go type: %v", err)
	}
}

func queryValues(t testing.TB, c *Conn, sql string, args ...any) [][]any {
	t.Helper()
	rows, err := c.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		out = append(out, append([]any(nil), rows.Values()...))
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return out
}
