package sqltypes

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func TestJSONBText(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"b":1,"a":[1,2]}`, `{"a": [1, 2], "b": 1}`},
		{`{"aa":1,"b":2,"a":{"y":null,"x":true}}`, `{"a": {"x": true, "y": null}, "b": 2, "aa": 1}`},
		{`{"k":1,"k":2}`, `{"k": 2}`},
		{`"<&>"`, `"<&>"`},
		{`1.50`, `1.50`},
		{`not json`, `not json`},
	} {
		if got := JSONBText(c.in); got != c.want {
			t.Errorf("JSONBText(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}

// Conform stores jsonb normalised and json as written.
func TestConformJSONB(t *testing.T) {
	cols := []Column{{Name: "j", Type: Of(JSON)}, {Name: "b", Type: Of(JSONB)}}
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	sb := array.NewStringBuilder(mem)
	sb.AppendValues([]string{`{"b":1,"a":2}`, ""}, []bool{true, false})
	j := sb.NewArray()
	sb.AppendValues([]string{`{"b":1,"a":2}`, ""}, []bool{true, false})
	b := sb.NewArray()
	sb.Release()
	rec := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "j", Type: arrow.BinaryTypes.String, Nullable: true}, {Name: "b", Type: arrow.BinaryTypes.String, Nullable: true}}, nil), []arrow.Array{j, b}, 2)
	j.Release()
	b.Release()
	defer rec.Release()
	out, err := Conform("t", cols, rec, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	text := func(col int) *array.String {
		return out.Column(col).(array.ExtensionArray).Storage().(*array.String)
	}
	if got := text(0).Value(0); got != `{"b":1,"a":2}` {
		t.Errorf("json %s, want as written", got)
	}
	if got := text(1).Value(0); got != `{"a": 2, "b": 1}` {
		t.Errorf("jsonb %s, want {\"a\": 2, \"b\": 1}", got)
	}
	if !text(1).IsNull(1) {
		t.Error("jsonb NULL lost")
	}
}
