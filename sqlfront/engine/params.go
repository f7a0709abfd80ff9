package engine

import (
	"fmt"
	"math"
	"time"

	duck "github.com/duckdb/duckdb-go-bindings"
	"github.com/jackc/pgx/v5/pgtype"
)

// bindArgs binds args to the parameters $1, $2, … of stmt. Accepted
// values: nil; bool; signed and unsigned integers; float32, float64;
// string; []byte; time.Time (bound as the parameter's inferred type when
// that is DATE, TIME or TIMESTAMP — the wall clock in UTC — else as an
// instant, TIMESTAMPTZ); [16]byte (a uuid); the pgtype values pgwire
// decodes parameters into (Numeric, Date, Time, Timestamp, Timestamptz,
// Interval, UUID); []any of those, an array, bound as a list (bindList);
// and any fmt.Stringer, bound as text for DuckDB to cast.
func bindArgs(stmt duck.PreparedStatement, args []any) error {
	if want := int(duck.NParams(stmt)); len(args) != want {
		return &Error{Code: "08P01", Message: fmt.Sprintf("bind message supplies %d parameters, but prepared statement requires %d", len(args), want)}
	}
	for i, a := range args {
		idx := duck.IdxT(i + 1)
		if err := bindArg(stmt, idx, a); err != nil {
			return err
		}
	}
	return nil
}

func bindArg(stmt duck.PreparedStatement, idx duck.IdxT, a any) error {
	var state duck.State
	switch v := a.(type) {
	case nil:
		state = duck.BindNull(stmt, idx)
	case bool:
		state = duck.BindBoolean(stmt, idx, v)
	case int:
		state = duck.BindInt64(stmt, idx, int64(v))
	case int8:
		state = duck.BindInt8(stmt, idx, v)
	case int16:
		state = duck.BindInt16(stmt, idx, v)
	case int32:
		state = duck.BindInt32(stmt, idx, v)
	case int64:
		state = duck.BindInt64(stmt, idx, v)
	case uint:
		state = duck.BindUInt64(stmt, idx, uint64(v))
	case uint8:
		state = duck.BindUInt8(stmt, idx, v)
	case uint16:
		state = duck.BindUInt16(stmt, idx, v)
	case uint32:
		state = duck.BindUInt32(stmt, idx, v)
	case uint64:
		state = duck.BindUInt64(stmt, idx, v)
	case float32:
		state = duck.BindFloat(stmt, idx, v)
	case float64:
		state = duck.BindDouble(stmt, idx, v)
	case string:
		state = duck.BindVarchar(stmt, idx, v)
	case []byte:
		state = duck.BindBlob(stmt, idx, v)
	case [16]byte:
		state = bindUUID(stmt, idx, v)
	case time.Time:
		state = bindTime(stmt, idx, v)
	case pgtype.UUID:
		if !v.Valid {
			state = duck.BindNull(stmt, idx)
		} else {
			state = bindUUID(stmt, idx, v.Bytes)
		}
	case pgtype.Numeric:
		if !v.Valid {
			state = duck.BindNull(stmt, idx)
			break
		}
		text, err := v.MarshalJSON()
		if err != nil {
			return &Error{Code: CodeInvalidTextRepr, Message: fmt.Sprintf("parameter $%d: %v", idx, err)}
		}
		// NaN and ±Infinity come out quoted; DuckDB reads them as DOUBLE.
		s := string(text)
		if len(s) > 1 && s[0] == '"' {
			s = s[1 : len(s)-1]
		}
		state = duck.BindVarchar(stmt, idx, s)
	case pgtype.Date:
		switch {
		case !v.Valid:
			state = duck.BindNull(stmt, idx)
		case v.InfinityModifier == pgtype.Infinity:
			state = duck.BindDate(stmt, idx, duck.NewDate(math.MaxInt32))
		case v.InfinityModifier == pgtype.NegativeInfinity:
			state = duck.BindDate(stmt, idx, duck.NewDate(-math.MaxInt32))
		default:
			// A date, whatever type the engine inferred: as a timestamp
			// PostgreSQL's last date (5874897-12-31) overflows.
			state = duck.BindDate(stmt, idx, duck.NewDate(epochDays(v.Time)))
		}
	case pgtype.Time:
		if !v.Valid {
			state = duck.BindNull(stmt, idx)
		} else {
			state = duck.BindTime(stmt, idx, duck.NewTime(v.Microseconds))
		}
	case pgtype.Timestamp:
		state = bindInfinite(stmt, idx, v.Valid, v.InfinityModifier, v.Time, false)
	case pgtype.Timestamptz:
		state = bindInfinite(stmt, idx, v.Valid, v.InfinityModifier, v.Time, true)
	case pgtype.Interval:
		if !v.Valid {
			state = duck.BindNull(stmt, idx)
		} else {
			state = duck.BindInterval(stmt, idx, duck.NewInterval(v.Months, v.Days, v.Microseconds))
		}
	case []any:
		var err error
		if state, err = bindList(stmt, idx, v); err != nil {
			return err
		}
	case fmt.Stringer:
		state = duck.BindVarchar(stmt, idx, v.String())
	default:
		return &Error{Code: CodeFeatureNotSupported, Message: fmt.Sprintf("parameter $%d: values of Go type %T are not supported", idx, a)}
	}
	if state == duck.StateError {
		return &Error{Code: CodeDatatypeMismatch, Message: fmt.Sprintf("parameter $%d: cannot bind %T value to %s", idx, a, typeNames[duck.ParamType(stmt, idx)])}
	}
	return nil
}

func bindUUID(stmt duck.PreparedStatement, idx duck.IdxT, b [16]byte) duck.State {
	s := fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
	return duck.BindVarchar(stmt, idx, s)
}

// bindTime binds t as the parameter's inferred date/time type.
func bindTime(stmt duck.PreparedStatement, idx duck.IdxT, t time.Time) duck.State {
	switch duck.ParamType(stmt, idx) {
	case duck.TypeDate:
		return duck.BindDate(stmt, idx, duck.NewDate(epochDays(t)))
	case duck.TypeTime:
		utc := t.UTC()
		micros := int64(utc.Hour())*3_600_000_000 + int64(utc.Minute())*60_000_000 + int64(utc.Second())*1_000_000 + int64(utc.Nanosecond()/1000)
		return duck.BindTime(stmt, idx, duck.NewTime(micros))
	case duck.TypeTimestamp, duck.TypeTimestampS, duck.TypeTimestampMS, duck.TypeTimestampNS:
		return duck.BindTimestamp(stmt, idx, duck.NewTimestamp(t.UnixMicro()))
	}
	return duck.BindTimestampTZ(stmt, idx, duck.NewTimestamp(t.UnixMicro()))
}

// epochDays is t's date in UTC as days since 1970-01-01.
func epochDays(t time.Time) int32 {
	utc := t.UTC()
	days := time.Date(utc.Year(), utc.Month(), utc.Day(), 0, 0, 0, 0, time.UTC).Unix() / 86400
	return int32(days)
}

// DuckDB's ±infinity timestamps.
const (
	infinityMicros    = math.MaxInt64
	negInfinityMicros = -math.MaxInt64
)

func bindInfinite(stmt duck.PreparedStatement, idx duck.IdxT, valid bool, inf pgtype.InfinityModifier, t time.Time, tz bool) duck.State {
	var micros int64
	switch {
	case !valid:
		return duck.BindNull(stmt, idx)
	case inf == pgtype.Infinity:
		micros = infinityMicros
	case inf == pgtype.NegativeInfinity:
		micros = negInfinityMicros
	default:
		if tz {
			return duck.BindTimestampTZ(stmt, idx, duck.NewTimestamp(t.UnixMicro()))
		}
		switch duck.ParamType(stmt, idx) {
		case duck.TypeDate, duck.TypeTime:
			return bindTime(stmt, idx, t)
		}
		return duck.BindTimestamp(stmt, idx, duck.NewTimestamp(t.UnixMicro()))
	}
	if tz {
		return duck.BindTimestampTZ(stmt, idx, duck.NewTimestamp(micros))
	}
	return duck.BindTimestamp(stmt, idx, duck.NewTimestamp(micros))
}
