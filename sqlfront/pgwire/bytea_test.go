package pgwire

import (
	"bytes"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// bytea text input in both of PostgreSQL's formats (the texts and bytes
// are PostgreSQL 15's).
func TestDecodeByteaText(t *testing.T) {
	c := newCodec(time.UTC)
	for in, want := range map[string][]byte{
		`\x0102ff`:    {1, 2, 0xff},
		`\x`:          {},
		`\001\377a`:   {1, 0xff, 'a'},
		`a\\b`:        {'a', '\\', 'b'},
		`plain text`:  []byte("plain text"),
		``:            {},
		`\000\134end`: {0, '\\', 'e', 'n', 'd'},
	} {
		v, err := c.decode(pgtype.ByteaOID, textFormat, []byte(in))
		if err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		if got, _ := v.([]byte); !bytes.Equal(got, want) {
			t.Errorf("%q: %v, want %v", in, v, want)
		}
	}
	for _, in := range []string{`\9`, `a\b`, `\40`, `\400`, `\`, `\xzz`} {
		if _, err := c.decode(pgtype.ByteaOID, textFormat, []byte(in)); err == nil {
			t.Errorf("%q decoded", in)
		} else if e, ok := err.(*Error); !ok || e.Code != CodeInvalidTextRepresentation && e.Code != "22023" {
			t.Errorf("%q: %v, want 22P02", in, err)
		}
	}
}
