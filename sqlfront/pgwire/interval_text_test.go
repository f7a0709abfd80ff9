package pgwire

import (
	"testing"

	"github.com/jackc/pgx/v5/pgtype"
)

func TestIntervalText(t *testing.T) {
	for _, c := range []struct {
		iv   pgtype.Interval
		want string
	}{
		{pgtype.Interval{Days: 1, Microseconds: (2*3600+3*60+4)*1e6 + 500000, Valid: true}, "1 day 02:03:04.5"},
		{pgtype.Interval{Months: -1, Days: -2, Microseconds: 1e6, Valid: true}, "-1 mons -2 days +00:00:01"},
		{pgtype.Interval{Months: 14, Days: 3, Valid: true}, "1 year 2 mons 3 days"},
		{pgtype.Interval{Days: -3, Valid: true}, "-3 days"},
		{pgtype.Interval{Valid: true}, "00:00:00"},
		{pgtype.Interval{Microseconds: -90e6, Valid: true}, "-00:01:30"},
	} {
		if got := string(appendInterval(nil, c.iv)); got != c.want {
			t.Errorf("%+v: %q, want %q", c.iv, got, c.want)
		}
	}
}
