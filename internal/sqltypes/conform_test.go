package sqltypes

import (
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func mustParse(t *testing.T, s string) Type {
	t.Helper()
	typ, err := Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return typ
}

func TestCheckText(t *testing.T) {
	for _, tc := range []struct {
		typ, in, want string
		fail          bool
	}{
		{"varchar(3)", "abc", "abc", false},
		{"varchar(3)", "ab", "ab", false},
		{"varchar(3)", "abc  ", "abc", false}, // excess spaces are cut
		{"varchar(3)", "ab   ", "ab ", false}, // to exactly n characters
		{"varchar(3)", "abcd", "", true},      // 22001
		{"varchar(3)", "ab d", "", true},      // a non-space beyond n
		{"varchar(3)", "äöü", "äöü", false},   // characters, not bytes
		{"varchar(2)", "äöü", "", true},
		{"varchar", strings.Repeat("x", 1000), strings.Repeat("x", 1000), false},
		{"char(3)", "a", "a", false},   // stored unpadded
		{"char(3)", "a  ", "a", false}, // trailing spaces removed
		{"char(3)", "abc   ", "abc", false},
		{"char(3)", "abcd", "", true},
		{"char(3)", " a", " a", false}, // leading spaces kept
		{"bpchar", "a   ", "a", false},
		{"text", "a   ", "a   ", false},
	} {
		got, err := mustParse(t, tc.typ).CheckText(tc.in)
		if tc.fail {
			var e *Error
			if !errors.As(err, &e) || e.Code != "22001" {
				t.Errorf("%s.CheckText(%q) = %q, %v; want 22001", tc.typ, tc.in, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s.CheckText(%q) = %q, %v; want %q", tc.typ, tc.in, got, err, tc.want)
		}
	}
	if got := PadChar("ab", 4); got != "ab  " {
		t.Errorf("PadChar = %q", got)
	}
	if got := PadChar("äb", 3); got != "äb " {
		t.Errorf("PadChar counts bytes: %q", got)
	}
}

// duckdbLike builds a batch as DuckDB exports SELECT CAST(… AS DuckDBType())
// with default Arrow settings: uuid and json as plain strings, timestamptz
// labelled with the session's zone.
func duckdbLike(t *testing.T, mem memory.Allocator) arrow.RecordBatch {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "code", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "u", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "j", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "Europe/Berlin"}, Nullable: true},
		{Name: "amount", Type: &arrow.Decimal128Type{Precision: 12, Scale: 2}, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 2}, nil)
	b.Field(1).(*array.StringBuilder).AppendValues([]string{"ann", "bob  "}, nil)
	b.Field(2).(*array.StringBuilder).AppendValues([]string{"x  ", ""}, []bool{true, false})
	b.Field(3).(*array.StringBuilder).AppendValues([]string{"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", ""}, []bool{true, false})
	b.Field(4).(*array.StringBuilder).AppendValues([]string{`{"a": 1}`, `[]`}, nil)
	b.Field(5).(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{0, 1_700_000_000_000_000}, nil)
	b.Field(6).(*array.Decimal128Builder).AppendNull()
	b.Field(6).(*array.Decimal128Builder).AppendNull()
	return b.NewRecordBatch()
}

func TestConform(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cols := []Column{
		{Name: "id", Type: Of(Int8), NotNull: true},
		{Name: "name", Type: mustParse(t, "varchar(3)")},
		{Name: "code", Type: mustParse(t, "char(2)")},
		{Name: "u", Type: Of(UUID)},
		{Name: "j", Type: Of(JSONB)},
		{Name: "ts", Type: Of(Timestamptz)},
		{Name: "amount", Type: mustParse(t, "numeric(12,2)")},
	}
	rec := duckdbLike(t, mem)
	defer rec.Release()
	out, err := Conform("t", cols, rec, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	if !out.Schema().Equal(Schema(cols)) {
		t.Fatalf("schema %s, want %s", out.Schema(), Schema(cols))
	}
	if got := out.Column(1).(*array.String).Value(1); got != "bob" {
		t.Errorf("varchar(3) 'bob  ' stored as %q", got)
	}
	if got := out.Column(2).(*array.String).Value(0); got != "x" {
		t.Errorf("char(2) 'x  ' stored as %q", got)
	}
	if !out.Column(2).IsNull(1) {
		t.Errorf("char(2) null lost")
	}
	u := out.Column(3).(*extensions.UUIDArray)
	if u.Value(0).String() != "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11" || !u.IsNull(1) {
		t.Errorf("uuid column = %v", u)
	}
	if got := out.Column(4).(array.ExtensionArray).Storage().(*array.String).Value(0); got != `{"a": 1}` {
		t.Errorf("json = %q", got)
	}
	if got := out.Column(5).(*array.Timestamp).Value(1); got != 1_700_000_000_000_000 {
		t.Errorf("timestamptz instant changed: %d", got)
	}
}

func TestConformErrors(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rec := duckdbLike(t, mem)
	defer rec.Release()
	base := []Column{
		{Name: "id", Type: Of(Int8)},
		{Name: "name", Type: Of(Text)},
		{Name: "code", Type: Of(Text)},
		{Name: "u", Type: Of(UUID)},
		{Name: "j", Type: Of(JSON)},
		{Name: "ts", Type: Of(Timestamptz)},
		{Name: "amount", Type: mustParse(t, "numeric(12,2)")},
	}
	for _, tc := range []struct {
		what string
		col  int
		to   Column
		code string
	}{
		{"null in NOT NULL", 2, Column{Name: "code", Type: Of(Text), NotNull: true}, "23502"},
		{"too long for varchar(2)", 1, Column{Name: "name", Type: mustParse(t, "varchar(2)")}, "22001"},
		{"wrong type", 0, Column{Name: "id", Type: Of(Int4)}, "42804"},
		{"wrong decimal scale", 6, Column{Name: "amount", Type: mustParse(t, "numeric(12,3)")}, "42804"},
		{"timestamptz into timestamp", 5, Column{Name: "ts", Type: Of(Timestamp)}, "42804"},
		{"text into uuid", 1, Column{Name: "name", Type: Of(UUID)}, "22P02"},
	} {
		cols := append([]Column(nil), base...)
		cols[tc.col] = tc.to
		out, err := Conform("t", cols, rec, mem)
		var e *Error
		if !errors.As(err, &e) || e.Code != tc.code {
			if out != nil {
				out.Release()
			}
			t.Errorf("%s: err %v, want %s", tc.what, err, tc.code)
		}
	}
	if _, err := Conform("t", base[:3], rec, mem); err == nil {
		t.Errorf("column count mismatch accepted")
	}
	// A nil allocator means the default one.
	cols := append([]Column(nil), base...)
	cols[1] = Column{Name: "name", Type: mustParse(t, "char(5)")}
	out, err := Conform("t", cols, rec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := out.Column(1).(*array.String).Value(1); got != "bob" {
		t.Errorf("char(5) 'bob  ' stored as %q", got)
	}
	out.Release()
}

// TestConformArrays: lists as DuckDB exports them (child field "l", uuid
// elements as text, varchar(n) elements with trailing spaces) become the
// table's list<item: elem> with conformed elements; an element too long is
// 22001, and a non-list source is 42804.
func TestConformArrays(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cols := []Column{
		{Name: "tags", Type: mustParse(t, "varchar(3)[]")},
		{Name: "ids", Type: mustParse(t, "uuid[]")},
	}
	lt := arrow.ListOfField(arrow.Field{Name: "l", Type: arrow.BinaryTypes.String, Nullable: true})
	build := func(rows [][]*string) arrow.Array {
		b := array.NewListBuilderWithField(mem, lt.ElemField())
		defer b.Release()
		vb := b.ValueBuilder().(*array.StringBuilder)
		for _, r := range rows {
			if r == nil {
				b.AppendNull()
				continue
			}
			b.Append(true)
			for _, v := range r {
				if v == nil {
					vb.AppendNull()
				} else {
					vb.Append(*v)
				}
			}
		}
		return b.NewArray()
	}
	str := func(s string) *string { return &s }
	tags := build([][]*string{{str("a"), str("bob  "), nil}, nil, {}})
	defer tags.Release()
	ids := build([][]*string{{str("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11")}, {nil}, nil})
	defer ids.Release()
	schema := arrow.NewSchema([]arrow.Field{{Name: "tags", Type: lt, Nullable: true}, {Name: "ids", Type: lt, Nullable: true}}, nil)
	rec := array.NewRecordBatch(schema, []arrow.Array{tags, ids}, 3)
	defer rec.Release()
	out, err := Conform("t", cols, rec, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	if !out.Schema().Equal(Schema(cols)) {
		t.Fatalf("schema %s, want %s", out.Schema(), Schema(cols))
	}
	if got, want := out.Column(0).String(), `[["a" "bob" (null)] (null) []]`; got != want {
		t.Errorf("tags = %s, want %s", got, want)
	}
	idl := out.Column(1).(*array.List)
	u := idl.ListValues().(*extensions.UUIDArray)
	if u.Value(0).String() != "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11" || !u.IsNull(1) || !idl.IsNull(2) {
		t.Errorf("uuid[] = %v", idl)
	}

	long := build([][]*string{{str("abcd")}})
	defer long.Release()
	rec2 := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "tags", Type: lt, Nullable: true}}, nil), []arrow.Array{long}, 1)
	defer rec2.Release()
	var e *Error
	if _, err := Conform("t", cols[:1], rec2, mem); !errors.As(err, &e) || e.Code != "22001" {
		t.Errorf("varchar(3)[] with 'abcd': %v, want 22001", err)
	}
	rec3 := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "tags", Type: arrow.BinaryTypes.String, Nullable: true}}, nil), []arrow.Array{rec.Column(0).(*array.List).ListValues()}, 3)
	defer rec3.Release()
	if _, err := Conform("t", cols[:1], rec3, mem); !errors.As(err, &e) || e.Code != "42804" {
		t.Errorf("text into varchar(3)[]: %v, want 42804", err)
	}
}
