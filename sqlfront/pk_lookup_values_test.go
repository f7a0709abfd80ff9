package sqlfront

import (
	"bytes"
	"math"
	"math/big"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/minkdb/mink/buckets/routing"
	"github.com/minkdb/mink/internal/sqltypes"
	"github.com/minkdb/mink/kv/kvcodec"
	"github.com/minkdb/mink/sqlfront/engine"
)

// randomWireValue is a random value of a column of type typ as pgwire
// decodes it (what a bound parameter or a COPY field becomes). With odd
// set, it is sometimes a value that does not fit the column: out of range,
// of another Go type, infinite.
func randomWireValue(rng *rand.Rand, typ sqltypes.Type, odd bool) any {
	if odd && rng.IntN(4) == 0 {
		return []any{"text", int64(1 << 40), float64(2.5), pgtype.Date{InfinityModifier: pgtype.Infinity, Valid: true}, true}[rng.IntN(5)]
	}
	str := func(n int) string {
		b := make([]byte, rng.IntN(n+1))
		for i := range b {
			b[i] = "ab \x01ü"[rng.IntN(5)]
		}
		return strings.ToValidUTF8(string(b), "x")
	}
	instant := func() time.Time {
		return time.UnixMicro(rng.Int64N(4e15) - 2e15).In(time.FixedZone("x", 3600*(rng.IntN(5)-2)))
	}
	switch typ.Kind() {
	case sqltypes.Bool:
		return rng.IntN(2) == 0
	case sqltypes.Int2:
		if odd && rng.IntN(3) == 0 {
			return int64(rng.Int32N(1<<18) - 1<<17) // mostly out of range
		}
		return []any{int16(rng.Uint32()), int64(rng.Int32N(1<<16) - 1<<15), int32(rng.Int32N(100))}[rng.IntN(3)]
	case sqltypes.Int4:
		if odd && rng.IntN(3) == 0 {
			return int64(rng.Int64N(1<<34) - 1<<33) // mostly out of range
		}
		return []any{int32(rng.Uint32()), int64(int32(rng.Uint32())), int16(rng.Uint32())}[rng.IntN(3)]
	case sqltypes.Int8:
		return []any{int64(rng.Uint64()), int32(rng.Uint32()), int16(rng.Uint32())}[rng.IntN(3)]
	case sqltypes.Float4:
		return []any{float32(rng.NormFloat64()), rng.NormFloat64(), float32(math.NaN()), math.Copysign(0, -1)}[rng.IntN(4)]
	case sqltypes.Float8:
		return []any{rng.NormFloat64() * 1e10, float32(rng.NormFloat64()), math.NaN(), math.Inf(-1), math.Copysign(0, -1)}[rng.IntN(5)]
	case sqltypes.Numeric:
		return pgtype.Numeric{Int: big.NewInt(rng.Int64N(2e7) - 1e7), Exp: -rng.Int32N(5), Valid: true}
	case sqltypes.Text:
		return str(6)
	case sqltypes.Varchar, sqltypes.Char:
		return str(3)
	case sqltypes.Bytea:
		return []byte(str(5))
	case sqltypes.UUID:
		var u [16]byte
		for i := range u {
			u[i] = byte(rng.Uint32())
		}
		return u
	case sqltypes.Date:
		return time.Unix(86400*(rng.Int64N(100000)-50000), 0).UTC()
	case sqltypes.Timestamp, sqltypes.Timestamptz:
		return instant()
	case sqltypes.Time:
		return pgtype.Time{Microseconds: rng.Int64N(86400e6), Valid: true}
	case sqltypes.Interval:
		return pgtype.Interval{Months: rng.Int32N(100) - 50, Days: rng.Int32N(100) - 50, Microseconds: rng.Int64N(1e12) - 5e11, Valid: true}
	case sqltypes.JSON, sqltypes.JSONB:
		return `{"k": "` + str(3) + `"}`
	}
	panic("no random value of " + typ.Name())
}

func parseType(t testing.TB, name string) sqltypes.Type {
	typ, err := sqltypes.Parse(name)
	if err != nil {
		t.Fatal(err)
	}
	return typ
}

// keyTypeNames are the key column types the Go-value lookup path encodes
// (varchar(n), char(n) and json keys take the Arrow path).
var keyTypeNames = []string{"boolean", "smallint", "integer", "bigint", "real", "double precision", "numeric(10,2)",
	"numeric", "text", "bytea", "uuid", "date", "time", "timestamp", "timestamptz", "interval"}

// TestLookupKeyValues: for random key values of every key type (some that
// fit no row), and random composite keys, the point lookup's Go-value path
// finds the same thing as the Arrow path it replaces: both or neither
// reject the value, and the KV key and the routing key are byte-identical.
func TestLookupKeyValues(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 2))
	var keySets [][]sqltypes.Column
	for _, name := range keyTypeNames {
		keySets = append(keySets, []sqltypes.Column{{Name: "k", Type: parseType(t, name)}})
	}
	for range 30 {
		var cols []sqltypes.Column
		for j := range 1 + rng.IntN(3) {
			cols = append(cols, sqltypes.Column{Name: "k" + string(rune('a'+j)), Type: parseType(t, keyTypeNames[rng.IntN(len(keyTypeNames))])})
		}
		keySets = append(keySets, cols)
	}
	for _, cols := range keySets {
		keyIdx := make([]int, len(cols))
		for j := range keyIdx {
			keyIdx[j] = j
		}
		codec, err := kvcodec.NewCodec(sqltypes.Schema(cols), keyIdx)
		if err != nil {
			t.Fatal(err)
		}
		p := &lookupPlan{table: &tableInfo{name: "t"}, keyCols: cols}
		defer p.close()
		for range 300 {
			vals := make([]any, len(cols))
			for j, c := range cols {
				vals[j] = randomWireValue(rng, c.Type, true)
			}
			phys := make([]any, len(cols))
			gotOK := storedKeyValues(cols, vals, phys)
			rec, wantOK := keyRecord(p, vals)
			if gotOK != wantOK {
				t.Fatalf("%v %#v: Go-value path ok %v, Arrow path ok %v", cols, vals, gotOK, wantOK)
			}
			if !wantOK {
				continue
			}
			wantKey, err := codec.AppendKeyOf(nil, rec.Columns(), 0)
			if err != nil {
				t.Fatal(err)
			}
			gotKey, err := codec.AppendKeyValues(nil, phys)
			if err != nil || !bytes.Equal(gotKey, wantKey) {
				t.Fatalf("%v %#v: Go-value key %x %v, Arrow key %x", cols, vals, gotKey, err, wantKey)
			}
			wantRoute, werr := routing.RowKey(nil, rec, keyIdx, 0)
			var gotRoute []byte
			var gerr error
			for j, c := range cols {
				if gotRoute, gerr = routing.AppendValue(gotRoute, c.Type.ArrowType(), phys[j]); gerr != nil {
					break
				}
			}
			if (werr == nil) != (gerr == nil) {
				t.Fatalf("%v %#v: Go-value routing error %v, Arrow %v", cols, vals, gerr, werr)
			}
			if werr == nil && !bytes.Equal(gotRoute, wantRoute) {
				t.Fatalf("%v %#v: Go-value routing key %x, Arrow %x", cols, vals, gotRoute, wantRoute)
			}
			rec.Release()
		}
	}
}

// TestLookupRowValues: rows of every storable column type, nulls included,
// decoded by the point lookup's Go-value path (kv.DecodeValues, wireValue)
// equal what the Arrow path gives (a decoded record batch and
// engine.GoValue, the values the engine's rows give), for all columns and
// for random selections of them.
func TestLookupRowValues(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 3))
	names := append([]string{"bigint"}, keyTypeNames...)
	names = append(names, "varchar(4)", "char(3)", "json", "jsonb")
	table := &tableInfo{name: "t", partCol: -1}
	for j, name := range names {
		table.cols = append(table.cols, sqltypes.Column{Name: "c" + string(rune('a'+j)), Type: parseType(t, name)})
	}
	var rows [][]any
	targets := make([]int, len(table.cols))
	for j := range targets {
		targets[j] = j
	}
	for i := range 300 {
		row := make([]any, len(table.cols))
		row[0] = int64(i)
		for j := 1; j < len(row); j++ {
			if rng.IntN(5) > 0 {
				row[j] = randomWireValue(rng, table.cols[j].Type, false)
			}
		}
		rows = append(rows, row)
	}
	rec, err := rowsToRecord(table, targets, nil, rows)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	codec, err := kvcodec.NewCodec(rec.Schema(), []int{0})
	if err != nil {
		t.Fatal(err)
	}
	rb := codec.NewRowBuilder(memory.DefaultAllocator)
	defer rb.Release()
	for i := range len(rows) {
		row, err := codec.AppendRow(nil, rec, i)
		if err != nil {
			t.Fatal(err)
		}
		if err := rb.Append(row); err != nil {
			t.Fatal(err)
		}
		decoded := rb.NewRecordBatch()
		sel := targets
		if i%2 == 1 {
			sel = make([]int, 1+rng.IntN(5))
			for j := range sel {
				sel[j] = rng.IntN(len(targets))
			}
		}
		out := make([]any, len(sel))
		if err := codec.DecodeValues(row, sel, out); err != nil {
			t.Fatal(err)
		}
		for j, c := range sel {
			typ := table.cols[c].Type
			got := wireValue(typ, out[j])
			want := engine.GoValue(decoded.Column(c), 0, typ)
			if !reflect.DeepEqual(got, want) && !(isNaN(got) && isNaN(want)) {
				t.Fatalf("row %d column %s (%s): Go-value path %#v, Arrow path %#v", i, table.cols[c].Name, typ.Name(), got, want)
			}
		}
		decoded.Release()
	}
}

func isNaN(v any) bool {
	switch f := v.(type) {
	case float32:
		return f != f
	case float64:
		return math.IsNaN(f)
	}
	return false
}
