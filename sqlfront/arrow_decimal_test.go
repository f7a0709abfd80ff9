package sqlfront

import (
	"math/big"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"
)

func TestDecimalOf(t *testing.T) {
	for _, tc := range []struct {
		v         any
		p, s      int32
		want      string
		wantValid bool
	}{
		{pgtype.Numeric{Int: big.NewInt(1250), Exp: -2, Valid: true}, 10, 2, "12.5", true},
		{pgtype.Numeric{Int: big.NewInt(125), Exp: -1, Valid: true}, 10, 2, "12.5", true},
		{pgtype.Numeric{Int: big.NewInt(3), Exp: 2, Valid: true}, 10, 2, "300", true},
		{pgtype.Numeric{Int: big.NewInt(-7), Exp: 0, Valid: true}, 4, 2, "-7", true},
		{pgtype.Numeric{Int: big.NewInt(123456), Exp: 0, Valid: true}, 4, 2, "", false}, // does not fit numeric(4,2)
		{pgtype.Numeric{NaN: true, Valid: true}, 10, 2, "", false},
		{"3.25", 10, 2, "3.25", true},
		{"x", 10, 2, "", false},
		{1.5, 10, 2, "", false},
	} {
		d, ok := decimalOf(tc.v, tc.p, tc.s)
		if ok != tc.wantValid {
			t.Errorf("decimalOf(%v, %d, %d): ok %v", tc.v, tc.p, tc.s, ok)
			continue
		}
		if ok {
			if got := new(big.Float).SetRat(new(big.Rat).SetFrac(d.BigInt(), new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(tc.s)), nil))).Text('f', -1); got != tc.want {
				t.Errorf("decimalOf(%v, %d, %d) = %s, want %s", tc.v, tc.p, tc.s, got, tc.want)
			}
		}
	}
}
