package translate

import "testing"

func TestQuoteEngineKeywords(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`SELECT at, columns FROM t WHERE at > 1`, `SELECT "at", "columns" FROM t WHERE "at" > 1`},
		{`SELECT t.at AT TIME ZONE 'UTC' FROM t`, `SELECT t."at" AT TIME ZONE 'UTC' FROM t`},
		{`SELECT now() at local`, `SELECT now() at local`},
		{`SELECT map(['a'], [1]), COLUMNS(*) FROM t`, `SELECT map(['a'], [1]), COLUMNS(*) FROM t`},
		{`SELECT 'at map' AS "at", E'it''s \' map', $tag$ at $tag$, $1 FROM t -- at`, `SELECT 'at map' AS "at", E'it''s \' map', $tag$ at $tag$, $1 FROM t -- at`},
		{`SELECT "MAP", show FROM t /* show */`, `SELECT "MAP", "show" FROM t /* show */`},
		{`SELECT x1at, at1, _at FROM t`, `SELECT x1at, at1, _at FROM t`},
	} {
		if got := quoteEngineKeywords(c.in); got != c.want {
			t.Errorf("quoteEngineKeywords(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
	}
}
