package flightsql

import "testing"

func TestLike(t *testing.T) {
	for _, tc := range []struct {
		s, pattern string
		want       bool
	}{
		{"users", "users", true},
		{"users", "user", false},
		{"users", "us%", true},
		{"users", "%ers", true},
		{"users", "%", true},
		{"", "%", true},
		{"users", "u_ers", true},
		{"users", "u_rs", false},
		{"us_rs", `us\_rs`, true},
		{"usxrs", `us\_rs`, false},
		{"a%b", `a\%b`, true},
		{"axb", `a\%b`, false},
		{"public", "pub%c", true},
		{"ünï", "_n_", true},
	} {
		if got := like(tc.s, tc.pattern); got != tc.want {
			t.Errorf("like(%q, %q) = %v, want %v", tc.s, tc.pattern, got, tc.want)
		}
	}
}
