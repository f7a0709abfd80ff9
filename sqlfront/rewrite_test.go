package sqlfront

import "testing"

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
