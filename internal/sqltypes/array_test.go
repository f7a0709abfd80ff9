package sqltypes

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

func strs(vs ...any) []*string {
	out := make([]*string, len(vs))
	for i, v := range vs {
		if s, ok := v.(string); ok {
			out[i] = &s
		}
	}
	return out
}

func TestParseArrayText(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []*string
	}{
		{`{}`, strs()},
		{` { } `, strs()},
		{`{a}`, strs("a")},
		{`{a,b}`, strs("a", "b")},
		{`{ a , b c ,d}`, strs("a", "b c", "d")},
		{`{NULL,null,"NULL",\NULL}`, strs(nil, nil, "NULL", "NULL")},
		{`{"",""}`, strs("", "")},
		{`{"a\"b","c\\d","e,f","{g}"}`, strs(`a"b`, `c\d`, "e,f", "{g}")},
		{`{a\,b,c\ }`, strs("a,b", "c ")},
		{`{"  x  "}`, strs("  x  ")},
		{"{\\x01}", strs("x01")},
		{`{1,2,3}`, strs("1", "2", "3")},
	} {
		got, err := ParseArrayText(tc.in)
		if err != nil {
			t.Errorf("ParseArrayText(%q): %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseArrayText(%q) = %v, want %v", tc.in, show(got), show(tc.want))
		}
	}
	for _, in := range []string{``, `a`, `{`, `{a`, `{a,}`, `{,a}`, `{a}x`, `{"a}`, `{a"b"}`, `{{1,2},{3,4}}`, `[0:1]={a,b}`, `{a,,b}`, `{a b"}`, `{\`} {
		_, err := ParseArrayText(in)
		var e *Error
		if !errors.As(err, &e) || e.Code != "22P02" {
			t.Errorf("ParseArrayText(%q) = %v, want 22P02", in, err)
		}
	}
}

func show(v []*string) []any {
	out := make([]any, len(v))
	for i, s := range v {
		if s != nil {
			out[i] = *s
		}
	}
	return out
}

// TestArrayTextRoundTrip: random elements (quotes, backslashes, commas,
// braces, white space, "NULL", empty strings, SQL NULLs) written with
// AppendArrayElement parse back to themselves.
func TestArrayTextRoundTrip(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	alphabet := []string{"a", "Z", "0", " ", "\t", "\n", `"`, `\`, ",", "{", "}", "NULL", "null", "é", "'", "[", "]"}
	for n := 0; n < 2000; n++ {
		elems := make([]*string, rng.IntN(5))
		buf := []byte{'{'}
		for i := range elems {
			if i > 0 {
				buf = append(buf, ',')
			}
			if rng.IntN(6) == 0 {
				buf = append(buf, "NULL"...)
				continue
			}
			var s string
			for k := rng.IntN(4); k > 0; k-- {
				s += alphabet[rng.IntN(len(alphabet))]
			}
			elems[i] = &s
			buf = AppendArrayElement(buf, s)
		}
		buf = append(buf, '}')
		got, err := ParseArrayText(string(buf))
		if err != nil {
			t.Fatalf("seed %d: ParseArrayText(%q): %v", seed, buf, err)
		}
		if !reflect.DeepEqual(show(got), show(elems)) {
			t.Fatalf("seed %d: %q parsed as %q, want %q", seed, buf, show(got), show(elems))
		}
	}
}

func TestArrayOIDs(t *testing.T) {
	if e, ok := ArrayElemOID(1009); !ok || e != OIDText {
		t.Errorf("ArrayElemOID(1009) = %d, %v", e, ok)
	}
	if e, ok := ArrayElemOID(1185); !ok || e != OIDTimestamptz {
		t.Errorf("ArrayElemOID(1185) = %d, %v", e, ok)
	}
	if _, ok := ArrayElemOID(25); ok {
		t.Errorf("ArrayElemOID(25) is an array")
	}
	if a, ok := ArrayOIDOf(OIDInt8); !ok || a != 1016 {
		t.Errorf("ArrayOIDOf(int8) = %d, %v", a, ok)
	}
}
