package kafka

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/minkdb/mink/internal/sqltypes"
)

// recordsOf turns rows [from, to) of a stored batch (widened to the
// table's columns) into Kafka records. appendTime is the batch's append
// time, the timestamp of rows of a table without a timestamp column.
func (sh *shape) recordsOf(rec arrow.RecordBatch, from, to int, appendTime time.Time) []fetchedRecord {
	out := make([]fetchedRecord, 0, to-from)
	for i := from; i < to; i++ {
		out = append(out, sh.recordAt(rec, i, appendTime))
	}
	return out
}

// recordAt is row i of a stored batch as a Kafka record (see recordsOf).
// Its key and value of a Kafka-shaped table alias the batch's buffers.
func (sh *shape) recordAt(rec arrow.RecordBatch, i int, appendTime time.Time) fetchedRecord {
	r := fetchedRecord{timestamp: -1}
	if !appendTime.IsZero() {
		r.timestamp = appendTime.UnixMilli()
	}
	if sh.tsCol >= 0 {
		r.timestamp = timestampAt(rec.Column(sh.tsCol), i, r.timestamp)
	}
	if sh.kafka {
		r.key = bytesAt(rec.Column(0), i)
		r.value = bytesAt(rec.Column(1), i)
		r.headers = headersAt(rec.Column(2), i)
	} else {
		if sh.keyCol >= 0 {
			r.key = keyAt(rec.Column(sh.keyCol), sh.cols[sh.keyCol].Type, i)
		}
		r.value = appendRowJSON(nil, sh.cols, rec, i)
	}
	return r
}

// timestampAt is a record's timestamp (milliseconds) from row i of a
// timestamp column: fallback where it is NULL or infinite.
func timestampAt(a arrow.Array, i int, fallback int64) int64 {
	if c := a.(*array.Timestamp); c.IsValid(i) {
		if v := int64(c.Value(i)); v != math.MaxInt64 && v != -math.MaxInt64 {
			return v / 1000
		}
	}
	return fallback
}

func bytesAt(a arrow.Array, i int) []byte {
	if a.IsNull(i) {
		return nil
	}
	v := a.(*array.Binary).Value(i)
	if v == nil {
		v = []byte{}
	}
	return v
}

func headersAt(a arrow.Array, i int) []kmsg.Header {
	if a.IsNull(i) {
		return nil
	}
	var hs []header
	if err := json.Unmarshal([]byte(a.(array.ExtensionArray).Storage().(*array.String).Value(i)), &hs); err != nil {
		return nil
	}
	out := make([]kmsg.Header, len(hs))
	for j, h := range hs {
		out[j].Key = h.Key
		switch {
		case h.Value != nil:
			out[j].Value = []byte(*h.Value)
		case h.ValueBase64 != nil:
			out[j].Value, _ = base64.StdEncoding.DecodeString(*h.ValueBase64)
		}
	}
	return out
}

// keyAt is a fetched record's key from the "key" column: its bytes, its
// text, or its JSON text.
func keyAt(a arrow.Array, t sqltypes.Type, i int) []byte {
	if a.IsNull(i) {
		return nil
	}
	switch t.Kind() {
	case sqltypes.Bytea:
		return bytesAt(a, i)
	case sqltypes.Text, sqltypes.Varchar, sqltypes.Char:
		return []byte(a.(*array.String).Value(i))
	}
	return appendJSONOf(nil, a, t, i)
}

// appendRowJSON appends row i as a JSON object, the text PostgreSQL's
// row_to_json gives (timestamps with time zone in UTC).
func appendRowJSON(buf []byte, cols []sqltypes.Column, rec arrow.RecordBatch, i int) []byte {
	buf = append(buf, '{')
	for c, col := range cols {
		if c > 0 {
			buf = append(buf, ',')
		}
		buf = appendJSONString(buf, col.Name)
		buf = append(buf, ':')
		buf = appendJSONOf(buf, rec.Column(c), col.Type, i)
	}
	return append(buf, '}')
}

// appendJSONOf appends element i of a, of SQL type t, as row_to_json
// prints it.
func appendJSONOf(buf []byte, a arrow.Array, t sqltypes.Type, i int) []byte {
	if a.IsNull(i) {
		return append(buf, "null"...)
	}
	switch t.Kind() {
	case sqltypes.Bool:
		return strconv.AppendBool(buf, a.(*array.Boolean).Value(i))
	case sqltypes.Int2:
		return strconv.AppendInt(buf, int64(a.(*array.Int16).Value(i)), 10)
	case sqltypes.Int4:
		return strconv.AppendInt(buf, int64(a.(*array.Int32).Value(i)), 10)
	case sqltypes.Int8:
		return strconv.AppendInt(buf, a.(*array.Int64).Value(i), 10)
	case sqltypes.Float4:
		return appendJSONFloat(buf, float64(a.(*array.Float32).Value(i)), 32)
	case sqltypes.Float8:
		return appendJSONFloat(buf, a.(*array.Float64).Value(i), 64)
	case sqltypes.Numeric:
		d := a.(*array.Decimal128)
		s := d.Value(i).ToString(d.DataType().(*arrow.Decimal128Type).Scale)
		if t.Precision() == 0 && strings.Contains(s, ".") {
			s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
		}
		return append(buf, s...)
	case sqltypes.Text, sqltypes.Varchar, sqltypes.Char:
		return appendJSONString(buf, a.(*array.String).Value(i))
	case sqltypes.Bytea:
		return appendJSONString(buf, `\x`+hex.EncodeToString(a.(*array.Binary).Value(i)))
	case sqltypes.Date:
		return appendJSONString(buf, a.(*array.Date32).Value(i).ToTime().Format(time.DateOnly))
	case sqltypes.Time:
		micros := int64(a.(*array.Time64).Value(i))
		t := time.Unix(0, micros*1000).UTC()
		return appendJSONString(buf, t.Format("15:04:05.999999"))
	case sqltypes.Timestamp, sqltypes.Timestamptz:
		v := int64(a.(*array.Timestamp).Value(i))
		switch v {
		case math.MaxInt64:
			return appendJSONString(buf, "infinity")
		case -math.MaxInt64:
			return appendJSONString(buf, "-infinity")
		}
		ts := time.UnixMicro(v).UTC()
		if t.Kind() == sqltypes.Timestamp {
			return appendJSONString(buf, ts.Format("2006-01-02T15:04:05.999999"))
		}
		return appendJSONString(buf, ts.Format("2006-01-02T15:04:05.999999")+"+00:00")
	case sqltypes.Interval:
		return appendJSONString(buf, intervalText(a.(*array.MonthDayNanoInterval).Value(i)))
	case sqltypes.UUID:
		return appendJSONString(buf, a.ValueStr(i))
	case sqltypes.JSON, sqltypes.JSONB:
		return append(buf, a.(array.ExtensionArray).Storage().(*array.String).Value(i)...)
	case sqltypes.Array:
		l := a.(*array.List)
		start, end := l.ValueOffsets(i)
		buf = append(buf, '[')
		for j := start; j < end; j++ {
			if j > start {
				buf = append(buf, ',')
			}
			buf = appendJSONOf(buf, l.ListValues(), t.Elem(), int(j))
		}
		return append(buf, ']')
	}
	return appendJSONString(buf, a.ValueStr(i))
}

func appendJSONFloat(buf []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(buf, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(buf, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(buf, `"-Infinity"`...)
	}
	return strconv.AppendFloat(buf, f, 'g', -1, bits)
}

// appendJSONString appends s as a JSON string, escaping as PostgreSQL's
// JSON output does (no HTML escapes).
func appendJSONString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			buf = append(buf, '\\', '"')
		case '\\':
			buf = append(buf, '\\', '\\')
		case '\n':
			buf = append(buf, '\\', 'n')
		case '\r':
			buf = append(buf, '\\', 'r')
		case '\t':
			buf = append(buf, '\\', 't')
		case '\b':
			buf = append(buf, '\\', 'b')
		case '\f':
			buf = append(buf, '\\', 'f')
		default:
			if c < 0x20 {
				buf = append(buf, `\u00`...)
				buf = append(buf, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&15])
			} else {
				buf = append(buf, c)
			}
		}
	}
	return append(buf, '"')
}

// intervalText prints an interval in PostgreSQL's default style:
// "1 year 2 mons 3 days 04:05:06.5".
func intervalText(iv arrow.MonthDayNanoInterval) string {
	var parts []string
	unit := func(n int64, one, many string) {
		if n == 0 {
			return
		}
		name := many
		if n == 1 || n == -1 {
			name = one
		}
		parts = append(parts, strconv.FormatInt(n, 10)+" "+name)
	}
	unit(int64(iv.Months/12), "year", "years")
	unit(int64(iv.Months%12), "mon", "mons")
	unit(int64(iv.Days), "day", "days")
	if iv.Nanoseconds != 0 || len(parts) == 0 {
		n := iv.Nanoseconds
		sign := ""
		if n < 0 {
			sign, n = "-", -n
		}
		micros := n / 1000
		h, m, sec, frac := micros/3600e6, micros/60e6%60, micros/1e6%60, micros%1e6
		text := sign + twoDigits(h) + ":" + twoDigits(m) + ":" + twoDigits(sec)
		if frac != 0 {
			text += strings.TrimRight("."+strconv.FormatInt(frac+1e6, 10)[1:], "0")
		}
		parts = append(parts, text)
	}
	return strings.Join(parts, " ")
}

func twoDigits(n int64) string {
	if n < 10 {
		return "0" + strconv.FormatInt(n, 10)
	}
	return strconv.FormatInt(n, 10)
}
