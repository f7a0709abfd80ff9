package sqlfront

import "testing"

func TestJSONBText(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"b":1,"a":[1,2]}`, `{"a": [1, 2], "b": 1}`},
		{`{"aa":1,"b":2,"a":{"y":null,"x":true}}`, `{"a": {"x": true, "y": null}, "b": 2, "aa": 1}`},
		{`{"k":1,"k":2}`, `{"k": 2}`},
		{`"<&>"`, `"<&>"`},
		{`1.50`, `1.50`},
		{`not json`, `not json`},
	} {
		if got := jsonbText(c.in); got != c.want {
			t.Errorf("jsonbText(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestStrftimeFormat(t *testing.T) {
	for _, c := range []struct {
		in, want string
		ok       bool
	}{
		{"YYYY/MM/DD", "%Y/%m/%d", true},
		{"YYYY-MM-DD HH24:MI:SS.US", "%Y-%m-%d %H:%M:%S.%f", true},
		{`"at" HH12 AM 100%`, "at %I %p 100%%", true},
		{"Month", "", false},
		{"Q", "", false},
	} {
		got, ok := strftimeFormat(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("strftimeFormat(%q) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestOffsetNoSeconds(t *testing.T) {
	for in, want := range map[string]bool{
		"2024-03-01 10:00+01":    true,
		"2024-03-01 10:00 -0530": true,
		"2024-03-01 10:00:00+01": false,
		"2024-03-01":             false,
	} {
		if got := offsetNoSecondsRE.MatchString(in); got != want {
			t.Errorf("%q: match %v, want %v", in, got, want)
		}
	}
}
