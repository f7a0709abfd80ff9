package engine

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	duck "github.com/duckdb/duckdb-go-bindings"
	"github.com/jackc/pgx/v5/pgtype"
)

// bindList binds an array parameter ([]any of element values, as pgwire
// decodes text[], int4[], …) as the text of a DuckDB list, ["a", NULL],
// which DuckDB casts to the parameter's list type. Elements are written
// double-quoted with " and \ escaped, in the text form DuckDB reads for the
// list's element type.
func bindList(stmt duck.PreparedStatement, idx duck.IdxT, elems []any) (duck.State, error) {
	child := duck.TypeVarchar
	if lt := duck.ParamLogicalType(stmt, idx); duck.GetTypeId(lt) == duck.TypeList {
		ct := duck.ListTypeChildType(lt)
		child = duck.GetTypeId(ct)
		duck.DestroyLogicalType(&ct)
		duck.DestroyLogicalType(&lt)
	} else {
		duck.DestroyLogicalType(&lt)
	}
	var b strings.Builder
	b.WriteByte('[')
	for i, e := range elems {
		if i > 0 {
			b.WriteString(", ")
		}
		s, null, err := listElementText(e, child)
		if err != nil {
			return duck.StateError, &Error{Code: CodeFeatureNotSupported, Message: fmt.Sprintf("parameter $%d: %v", idx, err)}
		}
		if null {
			b.WriteString("NULL")
			continue
		}
		b.WriteByte('"')
		for j := 0; j < len(s); j++ {
			if s[j] == '"' || s[j] == '\\' {
				b.WriteByte('\\')
			}
			b.WriteByte(s[j])
		}
		b.WriteByte('"')
	}
	b.WriteByte(']')
	return duck.BindVarchar(stmt, idx, b.String()), nil
}

// listElementText is an element's text for DuckDB's VARCHAR → LIST cast.
func listElementText(v any, child duck.Type) (string, bool, error) {
	switch v := v.(type) {
	case nil:
		return "", true, nil
	case string:
		return v, false, nil
	case bool:
		return strconv.FormatBool(v), false, nil
	case int16:
		return strconv.FormatInt(int64(v), 10), false, nil
	case int32:
		return strconv.FormatInt(int64(v), 10), false, nil
	case int64:
		return strconv.FormatInt(v, 10), false, nil
	case int:
		return strconv.Itoa(v), false, nil
	case float32:
		return strconv.FormatFloat(float64(v), 'g', -1, 32), false, nil
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64), false, nil
	case []byte:
		var b strings.Builder
		for _, c := range v {
			fmt.Fprintf(&b, `\x%02X`, c)
		}
		return b.String(), false, nil
	case [16]byte:
		return fmt.Sprintf("%x-%x-%x-%x-%x", v[0:4], v[4:6], v[6:8], v[8:10], v[10:16]), false, nil
	case time.Time:
		u := v.UTC()
		switch child {
		case duck.TypeDate:
			return u.Format("2006-01-02"), false, nil
		case duck.TypeTimestamp, duck.TypeTimestampS, duck.TypeTimestampMS, duck.TypeTimestampNS:
			return u.Format("2006-01-02 15:04:05.999999"), false, nil
		}
		return u.Format("2006-01-02 15:04:05.999999") + "+00", false, nil
	case pgtype.Numeric:
		if !v.Valid {
			return "", true, nil
		}
		text, err := v.MarshalJSON()
		return strings.Trim(string(text), `"`), false, err
	case pgtype.Time:
		us := v.Microseconds
		return fmt.Sprintf("%02d:%02d:%02d.%06d", us/3_600_000_000, us/60_000_000%60, us/1_000_000%60, us%1_000_000), false, nil
	case pgtype.Interval:
		return fmt.Sprintf("%d months %d days %d microseconds", v.Months, v.Days, v.Microseconds), false, nil
	case fmt.Stringer:
		return v.String(), false, nil
	}
	return "", false, fmt.Errorf("array elements of Go type %T are not supported", v)
}
