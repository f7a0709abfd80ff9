package kvcodec

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// goValueOf is row i of arr as the Go value the Go-value codec uses: what
// the array's Value method returns (for extension types, the storage's),
// lists as []any, nil for null. Written independently of the codec, from
// the Arrow arrays.
func goValueOf(t testing.TB, arr arrow.Array, i int) any {
	if ext, ok := arr.(array.ExtensionArray); ok {
		arr = ext.Storage()
	}
	if arr.IsNull(i) {
		return nil
	}
	switch a := arr.(type) {
	case *array.Boolean:
		return a.Value(i)
	case *array.Int8:
		return a.Value(i)
	case *array.Int16:
		return a.Value(i)
	case *array.Int32:
		return a.Value(i)
	case *array.Int64:
		return a.Value(i)
	case *array.Uint8:
		return a.Value(i)
	case *array.Float32:
		return a.Value(i)
	case *array.Float64:
		return a.Value(i)
	case *array.Decimal128:
		return a.Value(i)
	case *array.String:
		return a.Value(i)
	case *array.Binary:
		return a.Value(i)
	case *array.FixedSizeBinary:
		return a.Value(i)
	case *array.Date32:
		return a.Value(i)
	case *array.Time64:
		return a.Value(i)
	case *array.Timestamp:
		return a.Value(i)
	case *array.MonthDayNanoInterval:
		return a.Value(i)
	case *array.List:
		start, end := a.ValueOffsets(i)
		out := make([]any, 0, end-start)
		for j := start; j < end; j++ {
			out = append(out, goValueOf(t, a.ListValues(), int(j)))
		}
		return out
	}
	t.Fatalf("no Go value for %s", arr.DataType())
	return nil
}

// sameGoValue compares two Go values, NaN equal to NaN (the row encoding
// keeps float bits).
func sameGoValue(a, b any) bool {
	switch x := a.(type) {
	case float64:
		if y, ok := b.(float64); ok && math.IsNaN(x) && math.IsNaN(y) {
			return true
		}
	case float32:
		if y, ok := b.(float32); ok && x != x && y != y {
			return true
		}
	case []byte:
		y, ok := b.([]byte)
		return ok && bytes.Equal(x, y)
	}
	return reflect.DeepEqual(a, b)
}

// TestGoValueCodec: for random rows of every stored type, a key built from
// Go values is byte-identical to the key built from the Arrow row (every
// non-list column as a one-column key, and random composite keys), and the
// Go values decoded from the encoded row equal the row's values, for all
// columns and for random selections with repeats.
func TestGoValueCodec(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	rec := randomAllTypes(t, rng, 500)
	defer rec.Release()
	schema := rec.Schema()
	listCol := schema.FieldIndices("ints")[0]

	var keyable []int
	for c := range schema.NumFields() {
		if c != listCol {
			keyable = append(keyable, c)
		}
	}
	var keySets [][]int
	for _, c := range keyable {
		keySets = append(keySets, []int{c})
	}
	for range 20 {
		perm := rng.Perm(len(keyable))[:1+rng.IntN(4)]
		var cols []int
		for _, p := range perm {
			cols = append(cols, keyable[p])
		}
		keySets = append(keySets, cols)
	}
	for _, keyCols := range keySets {
		c, err := NewCodec(schema, keyCols)
		if err != nil {
			t.Fatal(err)
		}
		for i := range int(rec.NumRows()) {
			vals := make([]any, len(keyCols))
			for n, k := range keyCols {
				vals[n] = goValueOf(t, rec.Column(k), i)
			}
			want, werr := c.AppendKey(nil, rec, i)
			got, gerr := c.AppendKeyValues([]byte("prefix"), vals)
			if werr != nil || gerr != nil {
				if !errors.Is(werr, ErrNullKey) || !errors.Is(gerr, ErrNullKey) {
					t.Fatalf("key %v row %d: Arrow error %v, Go-value error %v", keyCols, i, werr, gerr)
				}
				continue
			}
			if !bytes.Equal(got, append([]byte("prefix"), want...)) {
				t.Fatalf("key %v row %d (%v): Go values give %x, the Arrow row %x", keyCols, i, vals, got[6:], want)
			}
		}
	}

	c, err := NewCodec(schema, []int{0})
	if err != nil {
		t.Fatal(err)
	}
	all := make([]int, schema.NumFields())
	for n := range all {
		all[n] = n
	}
	for i := range int(rec.NumRows()) {
		row, err := c.AppendRow(nil, rec, i)
		if err != nil {
			t.Fatal(err)
		}
		sel := all
		if i%2 == 1 {
			sel = make([]int, 1+rng.IntN(6))
			for j := range sel {
				sel[j] = rng.IntN(len(all))
			}
		}
		out := make([]any, len(sel))
		for j := range out {
			out[j] = "stale" // every output is written, nulls included
		}
		if err := c.DecodeValues(row, sel, out); err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
		for j, col := range sel {
			if want := goValueOf(t, rec.Column(col), i); !sameGoValue(out[j], want) {
				t.Fatalf("row %d column %s: decoded %#v, want %#v", i, schema.Field(col).Name, out[j], want)
			}
		}
	}
}

// TestGoValueCodecRejects: wrong Go types, null keys, bad column numbers
// and malformed rows are errors, not panics or wrong keys.
func TestGoValueCodecRejects(t *testing.T) {
	c := testCodec(t) // (id int64, name string) key, then more columns
	if _, err := c.AppendKeyValues(nil, []any{int64(1), "x"}); err != nil {
		t.Fatal(err)
	}
	for _, vals := range [][]any{
		{int32(1), "x"}, // int32 is not an Int64 value
		{int64(1), []byte("x")},
		{int64(1)},
		{int64(1), "x", "y"},
	} {
		if _, err := c.AppendKeyValues(nil, vals); err == nil {
			t.Errorf("key %#v accepted", vals)
		}
	}
	if _, err := c.AppendKeyValues(nil, []any{nil, "x"}); !errors.Is(err, ErrNullKey) {
		t.Errorf("null key: %v", err)
	}
	_, rows := encodeRows(t, c, testRow{id: 42, name: "x", n: ptr(int64(7))})
	row := rows[0]
	out := make([]any, 2)
	if err := c.DecodeValues(row, []int{3, 2}, out); err != nil || out[0] != int64(7) || out[1] != nil {
		t.Fatalf("decode: %v %#v", err, out)
	}
	if err := c.DecodeValues(row, []int{0, 99}, out); err == nil {
		t.Error("column 99 decoded")
	}
	if err := c.DecodeValues(row, []int{0}, out); err == nil {
		t.Error("outputs of the wrong length accepted")
	}
	for cut := 0; cut < len(row); cut++ {
		if err := c.DecodeValues(row[:cut], []int{0, 1}, out); !errors.Is(err, ErrBadRow) {
			t.Errorf("row cut to %d bytes: %v", cut, err)
		}
	}
	if err := c.DecodeValues(append(bytes.Clone(row), 0), []int{0}, out[:1]); !errors.Is(err, ErrBadRow) {
		t.Errorf("trailing byte: %v", err)
	}
}
