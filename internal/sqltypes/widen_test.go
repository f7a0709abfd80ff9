package sqltypes

import (
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestFillArrayRoundTrip: for every storable type, a value's MissingText
// read back by FillArray gives that value, n times (extreme and awkward
// values included), and nil gives nulls.
func TestFillArrayRoundTrip(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	for _, tc := range []struct {
		typ    string
		values string // JSON, as array.FromJSON reads it
	}{
		{"boolean", `[true, false]`},
		{"smallint", `[-32768, 32767, 0]`},
		{"integer", `[-2147483648, 2147483647]`},
		{"bigint", `[-9223372036854775808, 9223372036854775807]`},
		{"real", `[1.5, -0.1, 3.4e38]`},
		{"double precision", `[0.1, -1e308, 5e-324]`},
		{"numeric(12,2)", `["12.50", "-9999999999.99", "0.00"]`},
		{"numeric", `["123456789012345678.123456789012345678", "-1"]`},
		{"text", `["", "a'b\"c\\d", "é, {x}\n"]`},
		{"varchar(9)", `["abc"]`},
		{"char(4)", `["ab"]`},
		{"bytea", `["", "AAEC/w=="]`},
		{"date", `["2024-02-29", "0001-01-01", "9999-12-31"]`},
		{"time", `["12:34:56.789012", "00:00:00"]`},
		{"timestamp", `["2024-01-02T03:04:05.123456", "1900-01-01T00:00:00"]`},
		{"timestamptz", `["2024-01-02T03:04:05.123456Z", "1969-12-31T23:59:59.999999Z"]`},
		{"interval", `[{"months": 14, "days": -3, "nanoseconds": 4000}]`},
		{"uuid", `["a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"]`},
		{"json", `["{\"a\": [1, 2]}"]`},
		{"jsonb", `["{\"a\": \"x\"}"]`},
		{"integer[]", `[[1, null, 3], []]`},
		{"text[]", `[["a,b", "", null]]`},
	} {
		typ, err := Parse(tc.typ)
		if err != nil {
			t.Fatal(err)
		}
		want, _, err := array.FromJSON(mem, typ.ArrowType(), strings.NewReader(tc.values))
		if err != nil {
			t.Fatalf("%s: %v", tc.typ, err)
		}
		for i := 0; i < want.Len(); i++ {
			text := MissingText(want, i)
			for _, n := range []int{0, 1, 3} {
				got, err := FillArray(typ, &text, n, mem)
				if err != nil {
					t.Fatalf("%s: FillArray(%q): %v", tc.typ, text, err)
				}
				if got.Len() != n || !arrow.TypeEqual(got.DataType(), typ.ArrowType()) {
					t.Fatalf("%s: FillArray(%q, %d) has %d values of %s", tc.typ, text, n, got.Len(), got.DataType())
				}
				for j := 0; j < n; j++ {
					if !array.SliceEqual(got, int64(j), int64(j+1), want, int64(i), int64(i+1)) {
						t.Fatalf("%s: value %d %q came back as %q", tc.typ, i, text, MissingText(got, j))
					}
				}
				got.Release()
			}
		}
		want.Release()
		nulls, err := FillArray(typ, nil, 2, mem)
		if err != nil || nulls.NullN() != 2 {
			t.Fatalf("%s: FillArray(nil): %v", tc.typ, err)
		}
		nulls.Release()
	}
}

// TestWiden: a batch stored before two columns were added reads with the
// first column's missing value and NULL for the second; a batch with all
// columns is returned as is; one with more columns than the table is an
// error.
func TestWiden(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	col := func(name, typ string, missing *string) Column {
		tt, err := Parse(typ)
		if err != nil {
			t.Fatal(err)
		}
		return Column{Name: name, Type: tt, Missing: missing}
	}
	seven := "7"
	cols := []Column{col("id", "bigint", nil), col("n", "integer", &seven), col("note", "text", nil)}
	ids, _, _ := array.FromJSON(mem, arrow.PrimitiveTypes.Int64, strings.NewReader(`[1, 2, 3]`))
	defer ids.Release()
	old := array.NewRecordBatch(Schema(cols[:1]), []arrow.Array{ids}, 3)
	defer old.Release()
	got, err := Widen(old, cols, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	if !got.Schema().Equal(Schema(cols)) {
		t.Fatalf("schema %v", got.Schema())
	}
	for i := 0; i < 3; i++ {
		if got.Column(0).ValueStr(i) != ids.ValueStr(i) || got.Column(1).ValueStr(i) != "7" || !got.Column(2).IsNull(i) {
			t.Fatalf("row %d: %v %v %v", i, got.Column(0).ValueStr(i), got.Column(1).ValueStr(i), got.Column(2).ValueStr(i))
		}
	}
	same, err := Widen(got, cols, mem)
	if err != nil || same != got {
		t.Fatalf("a full batch was not returned as is: %v", err)
	}
	same.Release()
	if _, err := Widen(got, cols[:2], mem); err == nil {
		t.Fatal("a batch with more columns than the table was widened")
	}
}

// TestMissingTextOwnsItsBytes: the text of a string value outlives the
// array's buffer (a DuckDB result's is reused once released; a missing
// value read from it held other rows' bytes).
func TestMissingTextOwnsItsBytes(t *testing.T) {
	data := []byte("m")
	offsets := []int32{0, 1}
	a := array.NewStringData(array.NewData(arrow.BinaryTypes.String, 1,
		[]*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(offsets)), memory.NewBufferBytes(data)}, nil, 0, 0))
	defer a.Release()
	text := MissingText(a, 0)
	data[0] = 0xaa
	if text != "m" {
		t.Fatalf("MissingText = %q after its array's buffer changed, want %q", text, "m")
	}
}

// TestWidenAndPadDropped: a dropped column keeps its place in the stored
// batches: Pad writes NULL there and Widen leaves it out, for batches
// stored before the drop (which hold its values) and after.
func TestWidenAndPadDropped(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	col := func(name, typ string, dropped bool) Column {
		tt, err := Parse(typ)
		if err != nil {
			t.Fatal(err)
		}
		return Column{Name: name, Type: tt, Dropped: dropped}
	}
	stored := []Column{col("id", "bigint", false), col("gone", "text", true), col("n", "integer", false), col("added", "text", false)}
	fromJSON := func(dt arrow.DataType, js string) arrow.Array {
		a, _, err := array.FromJSON(mem, dt, strings.NewReader(js))
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	ids, gone, ns := fromJSON(arrow.PrimitiveTypes.Int64, `[1, 2]`), fromJSON(arrow.BinaryTypes.String, `["a", "b"]`), fromJSON(arrow.PrimitiveTypes.Int32, `[10, null]`)
	defer ids.Release()
	defer gone.Release()
	defer ns.Release()
	before := array.NewRecordBatch(Schema([]Column{col("id", "bigint", false), col("gone", "text", false), col("n", "integer", false)}),
		[]arrow.Array{ids, gone, ns}, 2)
	defer before.Release()
	got, err := Widen(before, stored, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	if !got.Schema().Equal(Schema(Visible(stored))) || got.NumCols() != 3 {
		t.Fatalf("schema %v, want the visible columns", got.Schema())
	}
	if got.Column(0).ValueStr(1) != "2" || got.Column(1).ValueStr(0) != "10" || !got.Column(1).IsNull(1) || !got.Column(2).IsNull(0) {
		t.Fatalf("widened rows: %v", got)
	}

	padded := Pad(got, stored, mem)
	defer padded.Release()
	if padded.NumCols() != 4 || !padded.Column(1).IsNull(0) || !padded.Column(1).IsNull(1) || padded.Schema().Field(1).Name != "gone" ||
		padded.Column(2).ValueStr(0) != "10" || !padded.Column(3).IsNull(1) {
		t.Fatalf("padded: %v", padded)
	}
	again, err := Widen(padded, stored, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Release()
	if !array.RecordEqual(again, got) {
		t.Fatalf("padded then widened: %v, want %v", again, got)
	}
	// A batch of the first visible column only: the dropped place after it
	// is not stored.
	short := array.NewRecordBatch(Schema(stored[:1]), []arrow.Array{ids}, 2)
	defer short.Release()
	if p := Pad(short, stored, mem); p.NumCols() != 1 {
		t.Fatalf("a one-column batch padded to %d columns", p.NumCols())
	} else {
		p.Release()
	}
	if p := Pad(short, stored[:1], mem); p != short {
		t.Fatal("a batch of a table without dropped columns was not returned as is")
	} else {
		p.Release()
	}
}
