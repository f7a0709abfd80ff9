package kafka

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/sqltypes"
)

// shape is how a topic's records map to its table's rows.
type shape struct {
	name string
	cols []sqltypes.Column
	// stored are the columns as stored batches hold them: cols with the
	// dropped ones at their places (catalog TableSpec.SQLColumns).
	stored []sqltypes.Column
	spec   []catalog.Column
	// kafka: the table is Kafka-shaped (key bytea, value bytea, headers
	// jsonb, ts timestamptz, then perhaps added columns): records are
	// stored as they are.
	kafka bool
	// keyCol is the index of a column named "key" (-1: none), filled from
	// a record's key when the value does not give it.
	keyCol int
	// tsCol is the column a fetched record's timestamp comes from (-1:
	// the append time).
	tsCol int
	// partCol is the LIST partition column (-1: unpartitioned).
	partCol int
}

// shapes caches each table's shape, for as long as the table's name and
// columns stay as they were: the metadata log applies records to the live
// view in place, and every change of a table's columns (ADD COLUMN, RENAME
// COLUMN, SET DEFAULT) gives it a new Columns slice (catalog
// apply_altertable.go), so the slice's identity says whether they changed.
type shapes struct {
	mu    sync.Mutex
	cache map[catalog.TableID]shapeEntry
}

type shapeEntry struct {
	table *catalog.Table
	name  string
	cols  []catalog.Column
	shape *shape
}

// current reports whether e was made from t as it is now.
func (e shapeEntry) current(t *catalog.Table) bool {
	return e.table == t && e.name == t.Spec.Name && len(e.cols) == len(t.Spec.Columns) &&
		(len(e.cols) == 0 || &e.cols[0] == &t.Spec.Columns[0])
}

// of returns the shape of t. REQUIRES: the caller reads the view t is of
// (Meta.Read).
func (c *shapes) of(t *catalog.Table) (*shape, error) {
	c.mu.Lock()
	e, ok := c.cache[t.ID]
	c.mu.Unlock()
	if ok && e.current(t) {
		return e.shape, nil
	}
	sh, err := newShape(t)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.cache == nil {
		c.cache = map[catalog.TableID]shapeEntry{}
	}
	if len(c.cache) > 10000 {
		clear(c.cache) // dropped tables' entries
	}
	c.cache[t.ID] = shapeEntry{table: t, name: t.Spec.Name, cols: t.Spec.Columns, shape: sh}
	c.mu.Unlock()
	return sh, nil
}

func newShape(t *catalog.Table) (*shape, error) {
	stored, err := t.Spec.SQLColumns()
	if err != nil {
		return nil, fmt.Errorf("table %q: %w", t.Spec.Name, err)
	}
	cols := sqltypes.Visible(stored)
	sh := &shape{name: t.Spec.Name, cols: cols, stored: stored, spec: t.Spec.Columns, keyCol: -1, tsCol: -1, partCol: -1}
	sh.kafka = len(cols) >= len(kafkaShape)
	for i, c := range kafkaShape {
		typ, err := sqltypes.Parse(c.Type)
		sh.kafka = sh.kafka && err == nil && cols[i].Name == c.Name && cols[i].Type == typ
	}
	for i, c := range cols {
		if c.Name == "key" && sh.keyCol < 0 {
			sh.keyCol = i
		}
		if k := c.Type.Kind(); k == sqltypes.Timestamptz || k == sqltypes.Timestamp {
			if c.Name == "ts" || sh.tsCol < 0 {
				sh.tsCol = i
			}
		}
		if c.Name == t.Spec.PartitionBy {
			sh.partCol = i
		}
	}
	return sh, nil
}

// rowsOf turns a batch's records into a batch of the table's rows. A
// record that does not fit the table fails the whole batch
// (INVALID_RECORD). partition, for a bucket of a partitioned table, is the
// value every row's partition column must have.
func (sh *shape) rowsOf(b *producedBatch, partition string, now time.Time) (arrow.RecordBatch, error) {
	mem := memory.DefaultAllocator
	builders := make([]array.Builder, len(sh.cols))
	for i, c := range sh.cols {
		builders[i] = array.NewBuilder(mem, c.Type.ArrowType())
	}
	defer func() {
		for _, b := range builders {
			b.Release()
		}
	}()
	logAppend := b.header.Attributes&attrTimestampType != 0
	for i := range b.records {
		r := &b.records[i]
		ts := b.header.FirstTimestamp + r.TimestampDelta64
		if logAppend || ts < 0 {
			ts = now.UnixMilli()
		}
		var err error
		if sh.kafka {
			err = sh.appendKafka(builders, r, ts)
		} else {
			err = sh.appendJSON(builders, r, now)
		}
		if err != nil {
			return nil, batchErrorf(kerr.InvalidRecord, "record %d: %v", i, err)
		}
	}
	arrs := make([]arrow.Array, len(builders))
	for i, b := range builders {
		arrs[i] = b.NewArray()
	}
	rec := array.NewRecordBatch(sqltypes.Schema(sh.cols), arrs, int64(len(b.records)))
	for _, a := range arrs {
		a.Release()
	}
	defer rec.Release()
	if sh.partCol >= 0 {
		col := rec.Column(sh.partCol)
		for i := 0; i < int(rec.NumRows()); i++ {
			if col.IsNull(i) || sqltypes.MissingText(col, i) != partition {
				return nil, batchErrorf(kerr.InvalidRecord, "record %d: column %q is %s, but this partition holds the rows of %q",
					i, sh.cols[sh.partCol].Name, describeValue(col, i), partition)
			}
		}
	}
	out, err := sqltypes.Conform(sh.name, sh.cols, rec, mem)
	if err != nil {
		var nn *sqltypes.NotNullError
		if errors.As(err, &nn) {
			return nil, batchErrorf(kerr.InvalidRecord, "record %d: %v", nn.Index, err)
		}
		return nil, batchErrorf(kerr.InvalidRecord, "%v", err)
	}
	defer out.Release()
	return sqltypes.Pad(out, sh.stored, mem), nil
}

func describeValue(a arrow.Array, i int) string {
	if a.IsNull(i) {
		return "NULL"
	}
	return strconv.Quote(sqltypes.MissingText(a, i))
}

// header is a record header as the headers column stores it.
type header struct {
	Key         string  `json:"key"`
	Value       *string `json:"value,omitempty"`
	ValueBase64 *string `json:"value_base64,omitempty"`
}

func (sh *shape) appendKafka(builders []array.Builder, r *kmsg.Record, ts int64) error {
	appendBytes(builders[0], r.Key)
	appendBytes(builders[1], r.Value)
	if len(r.Headers) == 0 {
		builders[2].AppendNull()
	} else {
		hs := make([]header, len(r.Headers))
		for i, h := range r.Headers {
			hs[i].Key = h.Key
			switch {
			case h.Value == nil:
			case utf8.Valid(h.Value):
				v := string(h.Value)
				hs[i].Value = &v
			default:
				v := base64.StdEncoding.EncodeToString(h.Value)
				hs[i].ValueBase64 = &v
			}
		}
		text, _ := json.Marshal(hs)
		jsonStorage(builders[2]).Append(string(text))
	}
	builders[3].(*array.TimestampBuilder).Append(arrow.Timestamp(ts * 1000))
	for i := len(kafkaShape); i < len(builders); i++ {
		if err := sh.appendDefault(builders[i], i, time.UnixMilli(ts)); err != nil {
			return err
		}
	}
	return nil
}

func appendBytes(b array.Builder, v []byte) {
	if v == nil {
		b.AppendNull()
		return
	}
	b.(*array.BinaryBuilder).Append(v)
}

func jsonStorage(b array.Builder) *array.StringBuilder {
	return b.(*array.ExtensionBuilder).StorageBuilder().(*array.StringBuilder)
}

// appendJSON maps a record whose value is a JSON object to the columns by
// name.
func (sh *shape) appendJSON(builders []array.Builder, r *kmsg.Record, now time.Time) error {
	if r.Value == nil {
		return errors.New("the value is null: this topic's records are JSON objects of the table's columns")
	}
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(r.Value))
	dec.UseNumber()
	if err := dec.Decode(&fields); err != nil || dec.More() {
		return fmt.Errorf("the value is not a JSON object of the table's columns: %s", shorten(r.Value))
	}
	for name := range fields {
		if sh.column(name) < 0 {
			return fmt.Errorf("table %q has no column %q", sh.name, name)
		}
	}
	for i, c := range sh.cols {
		raw, ok := fields[c.Name]
		if !ok && i == sh.keyCol && r.Key != nil {
			if err := appendKey(builders[i], c.Type, r.Key); err != nil {
				return fmt.Errorf("key for column %q: %w", c.Name, err)
			}
			continue
		}
		if !ok {
			if err := sh.appendDefault(builders[i], i, now); err != nil {
				return err
			}
			continue
		}
		if err := appendJSONValue(builders[i], c.Type, raw); err != nil {
			return fmt.Errorf("column %q: %w", c.Name, err)
		}
	}
	return nil
}

func (sh *shape) column(name string) int {
	for i, c := range sh.cols {
		if c.Name == name {
			return i
		}
	}
	return -1
}

// appendKey fills a "key" column from a record's key: the bytes for
// bytea, the text for text types, else the key parsed as JSON.
func appendKey(b array.Builder, t sqltypes.Type, key []byte) error {
	switch t.Kind() {
	case sqltypes.Bytea:
		b.(*array.BinaryBuilder).Append(key)
		return nil
	case sqltypes.Text, sqltypes.Varchar, sqltypes.Char:
		if !utf8.Valid(key) {
			return errors.New("not UTF-8 text")
		}
		b.(*array.StringBuilder).Append(string(key))
		return nil
	}
	return appendJSONValue(b, t, key)
}

// appendDefault fills column i of a record that does not give it: NULL,
// or the column's default when it is a constant or the current time.
func (sh *shape) appendDefault(b array.Builder, i int, now time.Time) error {
	c := sh.spec[i]
	if c.Sequence != "" {
		return fmt.Errorf("column %q takes its values from a sequence, which Kafka records cannot draw on: give it in the record", c.Name)
	}
	def := strings.TrimSpace(c.Default)
	if def == "" {
		b.AppendNull()
		return nil
	}
	if cast := strings.LastIndex(def, "::"); cast > 0 && !strings.Contains(def[cast:], "'") {
		def = strings.TrimSpace(def[:cast])
	}
	switch strings.ToLower(def) {
	case "null":
		b.AppendNull()
		return nil
	case "now()", "current_timestamp", "localtimestamp", "transaction_timestamp()", "statement_timestamp()", "clock_timestamp()":
		text, _ := json.Marshal(now.UTC().Format(time.RFC3339Nano))
		return appendJSONValue(b, sh.cols[i].Type, text)
	case "current_date":
		text, _ := json.Marshal(now.UTC().Format(time.DateOnly))
		return appendJSONValue(b, sh.cols[i].Type, text)
	case "true", "false":
		return appendJSONValue(b, sh.cols[i].Type, []byte(strings.ToLower(def)))
	}
	if len(def) >= 2 && def[0] == '\'' && def[len(def)-1] == '\'' {
		text, _ := json.Marshal(strings.ReplaceAll(def[1:len(def)-1], "''", "'"))
		if k := sh.cols[i].Type.Kind(); k == sqltypes.JSON || k == sqltypes.JSONB {
			text = []byte(strings.ReplaceAll(def[1:len(def)-1], "''", "'"))
		}
		return appendJSONValue(b, sh.cols[i].Type, text)
	}
	if _, err := strconv.ParseFloat(strings.Trim(def, "()"), 64); err == nil {
		return appendJSONValue(b, sh.cols[i].Type, []byte(strings.Trim(def, "()")))
	}
	return fmt.Errorf("column %q has the default %s, which the Kafka listener does not evaluate: give it in the record", c.Name, c.Default)
}

func shorten(b []byte) string {
	if len(b) > 64 {
		return strconv.Quote(string(b[:64])) + "…"
	}
	return strconv.Quote(string(b))
}

// appendJSONValue appends a JSON value to a builder of t's Arrow type. The
// JSON type must fit the column: a string for text, dates, times, uuids,
// intervals and bytea ("\x…" hex, or the text's bytes), a number for
// numbers, a boolean for boolean, an array for arrays, anything for json.
func appendJSONValue(b array.Builder, t sqltypes.Type, raw json.RawMessage) error {
	raw = bytes.TrimSpace(raw)
	if string(raw) == "null" {
		b.AppendNull()
		return nil
	}
	if len(raw) == 0 {
		return errors.New("no value")
	}
	str := func() (string, error) {
		var s string
		if raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
			return "", fmt.Errorf("want a JSON string for type %s, got %s", t.Name(), shorten(raw))
		}
		return s, nil
	}
	num := func() (string, error) {
		if raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
			return "", fmt.Errorf("want a JSON number for type %s, got %s", t.Name(), shorten(raw))
		}
		return string(raw), nil
	}
	switch t.Kind() {
	case sqltypes.Bool:
		switch string(raw) {
		case "true":
			b.(*array.BooleanBuilder).Append(true)
		case "false":
			b.(*array.BooleanBuilder).Append(false)
		default:
			return fmt.Errorf("want true or false for type boolean, got %s", shorten(raw))
		}
	case sqltypes.Int2, sqltypes.Int4, sqltypes.Int8:
		s, err := num()
		if err != nil {
			return err
		}
		bits := map[sqltypes.Kind]int{sqltypes.Int2: 16, sqltypes.Int4: 32, sqltypes.Int8: 64}[t.Kind()]
		v, err := strconv.ParseInt(s, 10, bits)
		if err != nil {
			return fmt.Errorf("%s is not a value of type %s", s, t.Name())
		}
		switch bb := b.(type) {
		case *array.Int16Builder:
			bb.Append(int16(v))
		case *array.Int32Builder:
			bb.Append(int32(v))
		case *array.Int64Builder:
			bb.Append(v)
		}
	case sqltypes.Float4, sqltypes.Float8:
		var v float64
		if raw[0] == '"' {
			s, _ := str()
			switch s {
			case "NaN":
				v = math.NaN()
			case "Infinity":
				v = math.Inf(1)
			case "-Infinity":
				v = math.Inf(-1)
			default:
				return fmt.Errorf("want a JSON number for type %s, got %s", t.Name(), shorten(raw))
			}
		} else {
			s, err := num()
			if err != nil {
				return err
			}
			if v, err = strconv.ParseFloat(s, 64); err != nil {
				return fmt.Errorf("%s is not a value of type %s", s, t.Name())
			}
		}
		if bb, ok := b.(*array.Float32Builder); ok {
			bb.Append(float32(v))
		} else {
			b.(*array.Float64Builder).Append(v)
		}
	case sqltypes.Numeric:
		s, err := num()
		if err != nil {
			return err
		}
		dt := b.Type().(*arrow.Decimal128Type)
		v, err := decimal128.FromString(s, dt.Precision, dt.Scale)
		if err != nil {
			return fmt.Errorf("%s is not a value of type %s", s, t.Name())
		}
		b.(*array.Decimal128Builder).Append(v)
	case sqltypes.Text, sqltypes.Varchar, sqltypes.Char:
		s, err := str()
		if err != nil {
			return err
		}
		if s, err = t.CheckText(s); err != nil {
			return err
		}
		b.(*array.StringBuilder).Append(s)
	case sqltypes.Bytea:
		s, err := str()
		if err != nil {
			return err
		}
		if strings.HasPrefix(s, `\x`) {
			v, err := hex.DecodeString(s[2:])
			if err != nil {
				return fmt.Errorf("invalid hexadecimal bytea %s", shorten(raw))
			}
			b.(*array.BinaryBuilder).Append(v)
		} else {
			b.(*array.BinaryBuilder).Append([]byte(s))
		}
	case sqltypes.Date:
		s, err := str()
		if err != nil {
			return err
		}
		d, err := time.Parse(time.DateOnly, s)
		if err != nil {
			return fmt.Errorf("%q is not a date (YYYY-MM-DD)", s)
		}
		b.(*array.Date32Builder).Append(arrow.Date32FromTime(d))
	case sqltypes.Time:
		s, err := str()
		if err != nil {
			return err
		}
		d, err := time.Parse("15:04:05.999999999", s)
		if err != nil {
			return fmt.Errorf("%q is not a time (HH:MM:SS[.ffffff])", s)
		}
		micros := int64(d.Hour())*3600e6 + int64(d.Minute())*60e6 + int64(d.Second())*1e6 + int64(d.Nanosecond()/1000)
		b.(*array.Time64Builder).Append(arrow.Time64(micros))
	case sqltypes.Timestamp, sqltypes.Timestamptz:
		s, err := str()
		if err != nil {
			return err
		}
		ts, zoned, err := parseTimestamp(s)
		if err != nil {
			return err
		}
		if t.Kind() == sqltypes.Timestamp && zoned {
			// timestamp without time zone keeps the wall clock, as
			// PostgreSQL's input does.
			ts = time.Date(ts.Year(), ts.Month(), ts.Day(), ts.Hour(), ts.Minute(), ts.Second(), ts.Nanosecond(), time.UTC)
		}
		b.(*array.TimestampBuilder).Append(arrow.Timestamp(ts.UnixMicro()))
	case sqltypes.Interval:
		s, err := str()
		if err != nil {
			return err
		}
		iv, err := parseInterval(s)
		if err != nil {
			return err
		}
		b.(*array.MonthDayNanoIntervalBuilder).Append(iv)
	case sqltypes.UUID:
		s, err := str()
		if err != nil {
			return err
		}
		if err := b.AppendValueFromString(s); err != nil {
			return fmt.Errorf("%q is not a uuid", s)
		}
	case sqltypes.JSON, sqltypes.JSONB:
		var compact bytes.Buffer
		if err := json.Compact(&compact, raw); err != nil {
			return fmt.Errorf("invalid JSON %s", shorten(raw))
		}
		jsonStorage(b).Append(compact.String())
	case sqltypes.Array:
		if raw[0] != '[' {
			return fmt.Errorf("want a JSON array for type %s, got %s", t.Name(), shorten(raw))
		}
		var elems []json.RawMessage
		if err := json.Unmarshal(raw, &elems); err != nil {
			return fmt.Errorf("invalid JSON array %s", shorten(raw))
		}
		lb := b.(*array.ListBuilder)
		lb.Append(true)
		for _, e := range elems {
			if err := appendJSONValue(lb.ValueBuilder(), t.Elem(), e); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("type %s cannot be given in a Kafka record", t.Name())
	}
	return nil
}

// parseTimestamp reads an ISO 8601 timestamp ("T" or a space between date
// and time), with an optional zone (Z, ±hh, ±hh:mm); zoned says whether it
// had one. Without a zone it is UTC.
func parseTimestamp(s string) (t time.Time, zoned bool, err error) {
	for _, layout := range []string{
		"2006-01-02T15:04:05.999999999Z07:00", "2006-01-02 15:04:05.999999999Z07:00",
		"2006-01-02T15:04:05.999999999Z07", "2006-01-02 15:04:05.999999999Z07",
	} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, true, nil
		}
	}
	for _, layout := range []string{"2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999", time.DateOnly} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, false, nil
		}
	}
	return time.Time{}, false, fmt.Errorf("%q is not a timestamp (YYYY-MM-DDTHH:MM:SS[.ffffff][±hh:mm])", s)
}

// parseInterval reads an interval as PostgreSQL prints one ("1 year 2 mons
// 3 days 04:05:06.5", "-00:00:01") or with the units spelled out ("90
// seconds", "2 hours").
func parseInterval(s string) (arrow.MonthDayNanoInterval, error) {
	var iv arrow.MonthDayNanoInterval
	bad := fmt.Errorf("%q is not an interval (as PostgreSQL prints one, e.g. \"1 day 02:00:00\")", s)
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return iv, bad
	}
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		if strings.Contains(f, ":") {
			neg := strings.HasPrefix(f, "-")
			f = strings.TrimLeft(f, "+-")
			parts := strings.Split(f, ":")
			if len(parts) < 2 || len(parts) > 3 {
				return iv, bad
			}
			h, err1 := strconv.ParseInt(parts[0], 10, 64)
			m, err2 := strconv.ParseInt(parts[1], 10, 64)
			var sec float64
			var err3 error
			if len(parts) == 3 {
				sec, err3 = strconv.ParseFloat(parts[2], 64)
			}
			if err1 != nil || err2 != nil || err3 != nil {
				return iv, bad
			}
			nanos := h*3600e9 + m*60e9 + int64(math.Round(sec*1e9))
			if neg {
				nanos = -nanos
			}
			iv.Nanoseconds += nanos
			continue
		}
		if i+1 >= len(fields) {
			return iv, bad
		}
		n, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return iv, bad
		}
		unit := strings.TrimSuffix(strings.ToLower(fields[i+1]), "s")
		i++
		switch unit {
		case "year":
			iv.Months += int32(n * 12)
		case "mon", "month":
			iv.Months += int32(n)
		case "day":
			iv.Days += int32(n)
		case "hour":
			iv.Nanoseconds += int64(n * 3600e9)
		case "min", "minute":
			iv.Nanoseconds += int64(n * 60e9)
		case "sec", "second":
			iv.Nanoseconds += int64(n * 1e9)
		default:
			return iv, bad
		}
	}
	return iv, nil
}
