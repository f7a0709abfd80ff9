package translate

import (
	"testing"
)

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

// Quotients print as PostgreSQL's numeric division prints them (the
// expected texts are PostgreSQL 15's).
func TestQuotientText(t *testing.T) {
	for in, want := range map[string]string{
		"21/6":                   "3.5000000000000000",
		"551.25/6":               "91.8750000000000000",
		"1/3":                    "0.33333333333333333333",
		"-1.5/7":                 "-0.21428571428571428571",
		"1234567.0/3":            "411522.333333333333",
		"0/1":                    "0.00000000000000000000",
		"2/3":                    "0.66666666666666666667",
		"100000000/3":            "33333333.333333333333",
		"0.0001/3":               "0.000033333333333333333333",
		"12.3456789/1":           "12.3456789000000000",
		"-5/2":                   "-2.5000000000000000",
		"99999999999999999999/7": "14285714285714285714",
	} {
		n, ok := QuotientText(in)
		if !ok {
			t.Errorf("QuotientText(%q) failed", in)
			continue
		}
		v, err := n.Value()
		if err != nil || v != want {
			t.Errorf("QuotientText(%q) = %v (%v), want %s", in, v, err, want)
		}
	}
	if _, ok := QuotientText("1/0"); ok {
		t.Error("1/0 divided")
	}
}
