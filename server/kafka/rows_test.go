package kafka

import (
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/sqltypes"
)

// testShape is a table with one column of every type mink stores.
func testShape(t *testing.T, extra ...catalog.Column) *shape {
	t.Helper()
	cols := []catalog.Column{
		{Name: "b", Type: "boolean"}, {Name: "i2", Type: "smallint"}, {Name: "i4", Type: "integer"}, {Name: "i8", Type: "bigint", NotNull: true},
		{Name: "f4", Type: "real"}, {Name: "f8", Type: "double precision"}, {Name: "n", Type: "numeric(10,2)"}, {Name: "nu", Type: "numeric"},
		{Name: "t", Type: "text"}, {Name: "vc", Type: "varchar(5)"}, {Name: "by", Type: "bytea"}, {Name: "d", Type: "date"},
		{Name: "tm", Type: "time"}, {Name: "ts", Type: "timestamp"}, {Name: "tz", Type: "timestamptz"}, {Name: "iv", Type: "interval"},
		{Name: "u", Type: "uuid"}, {Name: "j", Type: "json"}, {Name: "jb", Type: "jsonb"}, {Name: "arr", Type: "integer[]"},
		{Name: "tarr", Type: "text[]"},
	}
	sh, err := newShape(&catalog.Table{Spec: catalog.TableSpec{Name: "all", Columns: append(cols, extra...)}})
	if err != nil {
		t.Fatal(err)
	}
	return sh
}

func produced(values ...string) *producedBatch {
	b := &producedBatch{header: kmsg.RecordBatch{FirstTimestamp: 1700000000000, ProducerID: -1}}
	for _, v := range values {
		b.records = append(b.records, kmsg.Record{Value: []byte(v)})
	}
	return b
}

// A JSON record of every type is stored as the row row_to_json prints
// back, and that text produced again stores the same row.
func TestJSONRowsEveryType(t *testing.T) {
	sh := testShape(t)
	in := `{"b":true,"i2":-2,"i4":40000,"i8":9000000000,"f4":1.5,"f8":"NaN","n":12.345,"nu":0.1,"t":"a \"q\"\n","vc":"abc",` +
		`"by":"\\x00ff","d":"2024-02-29","tm":"13:14:15.5","ts":"2024-01-02 03:04:05.123456","tz":"2024-01-02T03:04:05+02:00",` +
		`"iv":"1 year 2 mons 3 days 04:05:06.5","u":"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11","j":{"z":1, "a":[true,null]},"jb":{"z":1,"a":2},` +
		`"arr":[1,null,3],"tarr":["x","y"]}`
	want := `{"b":true,"i2":-2,"i4":40000,"i8":9000000000,"f4":1.5,"f8":"NaN","n":12.35,"nu":0.1,"t":"a \"q\"\n","vc":"abc",` +
		`"by":"\\x00ff","d":"2024-02-29","tm":"13:14:15.5","ts":"2024-01-02T03:04:05.123456","tz":"2024-01-02T01:04:05+00:00",` +
		`"iv":"1 year 2 mons 3 days 04:05:06.5","u":"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11","j":{"z":1,"a":[true,null]},"jb":{"a": 2, "z": 1},` +
		`"arr":[1,null,3],"tarr":["x","y"]}`
	for round, value := range []string{in, want} {
		rec, err := sh.rowsOf(produced(value), "", time.Now())
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		got := string(sh.recordsOf(rec, 0, 1, time.Time{})[0].value)
		rec.Release()
		if got != want {
			t.Fatalf("round %d:\n got %s\nwant %s", round, got, want)
		}
	}
	// Missing columns are NULL.
	rec, err := sh.rowsOf(produced(`{"i8": 1}`), "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	got := string(sh.recordsOf(rec, 0, 1, time.Time{})[0].value)
	rec.Release()
	if !strings.HasPrefix(got, `{"b":null,"i2":null`) || !strings.Contains(got, `"i8":1,`) {
		t.Fatalf("missing columns: %s", got)
	}
}

func TestJSONRowsRejected(t *testing.T) {
	sh := testShape(t)
	for _, tc := range []struct{ value, says string }{
		{`{"i8": 1, "nope": 2}`, `no column "nope"`},
		{`{"i8": "1"}`, "want a JSON number"},
		{`{"i8": 1.5}`, "not a value of type bigint"},
		{`{"i8": 1, "i2": 40000}`, "not a value of type smallint"},
		{`{"i8": 1, "b": 1}`, "want true or false"},
		{`{"i8": 1, "t": 5}`, "want a JSON string"},
		{`{"i8": 1, "vc": "toolong"}`, "too long"},
		{`{"i8": 1, "d": "2024-13-01"}`, "not a date"},
		{`{"i8": 1, "tz": "yesterday"}`, "not a timestamp"},
		{`{"i8": 1, "u": "nope"}`, "not a uuid"},
		{`{"i8": 1, "iv": "3 fortnights"}`, "not an interval"},
		{`{"i8": 1, "arr": 5}`, "want a JSON array"},
		{`{"i8": 1, "arr": ["x"]}`, "want a JSON number"},
		{`{"i8": 1, "n": 123456789012}`, "not a value of type numeric(10,2)"},
		{`{"i8": 1, "by": "\\xzz"}`, "invalid hexadecimal"},
		{`{}`, "null value in column"},
		{`[1]`, "not a JSON object"},
		{`{"i8": 1} {"i8": 2}`, "not a JSON object"},
		{`nonsense`, "not a JSON object"},
	} {
		_, err := sh.rowsOf(produced(`{"i8": 7}`, tc.value), "", time.Now())
		if err == nil || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), "record 1") {
			t.Errorf("%s: %v, want an error naming record 1 that says %q", tc.value, err, tc.says)
		}
	}
	if _, err := sh.rowsOf(&producedBatch{records: []kmsg.Record{{Value: nil}}}, "", time.Now()); err == nil {
		t.Error("a null value was stored in a table of columns")
	}
}

func TestKafkaShapeAndDefaults(t *testing.T) {
	spec := append(append([]catalog.Column(nil), kafkaShape...),
		catalog.Column{Name: "src", Type: "text", Default: "'kafka'::text", Added: true},
		catalog.Column{Name: "at", Type: "timestamptz", Default: "now()", Added: true})
	sh, err := newShape(&catalog.Table{Spec: catalog.TableSpec{Name: "k", Columns: spec}})
	if err != nil || !sh.kafka {
		t.Fatalf("a table of key, value, headers, ts and more is Kafka-shaped: %v %v", sh.kafka, err)
	}
	now := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	b := &producedBatch{header: kmsg.RecordBatch{FirstTimestamp: 1000}, records: []kmsg.Record{
		{Key: []byte("k"), Value: []byte{0, 1}, TimestampDelta64: 5, Headers: []kmsg.Header{{Key: "a", Value: []byte("x")}, {Key: "n"}, {Key: "bin", Value: []byte{0xff}}}},
		{Value: nil},
	}}
	rec, err := sh.rowsOf(b, "", now)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	if got := rec.Column(4).(*array.String).Value(0); got != "kafka" {
		t.Fatalf("default of src: %q", got)
	}
	if got := rec.Column(3).ValueStr(0); !strings.HasPrefix(got, "1970-01-01T00:00:01.005") {
		t.Fatalf("ts of record 0: %s", got)
	}
	out := sh.recordsOf(rec, 0, 2, time.Time{})
	if string(out[0].key) != "k" || string(out[0].value) != "\x00\x01" || out[0].timestamp != 1005 || len(out[0].headers) != 3 ||
		string(out[0].headers[0].Value) != "x" || out[0].headers[1].Value != nil || string(out[0].headers[2].Value) != "\xff" {
		t.Fatalf("record 0 back: %+v", out[0])
	}
	if out[1].key != nil || out[1].value != nil || out[1].headers != nil {
		t.Fatalf("record 1 back: %+v", out[1])
	}

	// A column with a sequence cannot be filled by a record.
	seq := testShape(t, catalog.Column{Name: "id", Type: "bigint", Sequence: catalog.SequenceSerial})
	if _, err := seq.rowsOf(produced(`{"i8": 1}`), "", now); err == nil || !strings.Contains(err.Error(), "sequence") {
		t.Fatalf("a sequence column left out: %v", err)
	}
	if _, err := seq.rowsOf(produced(`{"i8": 1, "id": 5}`), "", now); err != nil {
		t.Fatalf("a sequence column given: %v", err)
	}
}

func TestPartitionColumnChecked(t *testing.T) {
	sh, err := newShape(&catalog.Table{Spec: catalog.TableSpec{Name: "p", PartitionBy: "dt",
		Columns: []catalog.Column{{Name: "id", Type: "bigint"}, {Name: "dt", Type: "date"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sh.rowsOf(produced(`{"id": 1, "dt": "2024-01-01"}`), "2024-01-01", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := sh.rowsOf(produced(`{"id": 1, "dt": "2024-01-02"}`), "2024-01-01", time.Now()); err == nil || !strings.Contains(err.Error(), `holds the rows of "2024-01-01"`) {
		t.Fatalf("a row of another partition: %v", err)
	}
}

func TestIntervals(t *testing.T) {
	for _, s := range []string{"00:00:00", "1 day", "-00:00:01", "1 year 2 mons 3 days 04:05:06.5", "2 years", "-3 days 01:00:00", "00:00:00.000001"} {
		iv, err := parseInterval(s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if got := intervalText(iv); got != s {
			t.Fatalf("%s printed back as %s", s, got)
		}
	}
	iv, err := parseInterval("90 seconds")
	if err != nil || intervalText(iv) != "00:01:30" {
		t.Fatalf("90 seconds: %v %v", intervalText(iv), err)
	}
	_ = sqltypes.Interval
}

// TestShapesFollowTableChanges: the metadata log changes a view's tables
// in place; a cached shape is made again after ADD COLUMN, RENAME COLUMN
// and RENAME TO, and reused while nothing changed.
func TestShapesFollowTableChanges(t *testing.T) {
	v := catalog.NewView()
	index := v.Index
	apply := func(rec catalog.Record) {
		t.Helper()
		index++
		if out := catalog.Apply(v, index, rec); out.Err != nil {
			t.Fatalf("%T: %v", rec, out.Err)
		}
	}
	apply(catalog.CreateTable{Spec: catalog.TableSpec{Name: "ev", Buckets: 1, Columns: []catalog.Column{{Name: "id", Type: "bigint"}, {Name: "v", Type: "text"}}}})
	tbl, ok := v.TableNamed("ev")
	if !ok {
		t.Fatal("no table ev")
	}
	var c shapes
	names := func() string {
		t.Helper()
		sh, err := c.of(tbl)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, col := range sh.cols {
			out = append(out, col.Name)
		}
		return sh.name + "(" + strings.Join(out, ",") + ")"
	}
	first, _ := c.of(tbl)
	if again, _ := c.of(tbl); again != first {
		t.Error("the shape of an unchanged table was made again")
	}
	for _, step := range []struct {
		rec  catalog.Record
		want string
	}{
		{nil, "ev(id,v)"},
		{catalog.RenameColumn{Table: tbl.ID, From: "v", To: "label"}, "ev(id,label)"},
		{catalog.AddColumn{Table: tbl.ID, Column: catalog.Column{Name: "n", Type: "integer"}}, "ev(id,label,n)"},
		{catalog.RenameTable{Table: tbl.ID, Name: "ev2"}, "ev2(id,label,n)"},
	} {
		if step.rec != nil {
			apply(step.rec)
		}
		if got := names(); got != step.want {
			t.Errorf("after %T: shape %s, want %s", step.rec, got, step.want)
		}
	}
}
