package ipcbatch

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// schemas covers flat, nested and nullable columns, and schema metadata.
func schemas() []*arrow.Schema {
	md := arrow.NewMetadata([]string{"k"}, []string{"v"})
	return []*arrow.Schema{
		arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "v", Type: arrow.BinaryTypes.String, Nullable: true}}, nil),
		arrow.NewSchema([]arrow.Field{
			{Name: "a", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
			{Name: "s", Type: arrow.StructOf(arrow.Field{Name: "x", Type: arrow.FixedWidthTypes.Boolean, Nullable: true}), Nullable: true},
			{Name: "t", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
		}, &md),
	}
}

// batch returns a batch of schema with rows random rows.
func batch(t testing.TB, schema *arrow.Schema, rows int, rng *rand.Rand) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for range rows {
		for i, f := range b.Fields() {
			if schema.Field(i).Nullable && rng.IntN(4) == 0 {
				f.AppendNull()
				continue
			}
			switch f := f.(type) {
			case *array.Int64Builder:
				f.Append(rng.Int64())
			case *array.StringBuilder:
				f.Append(fmt.Sprint(rng.IntN(1000)))
			case *array.ListBuilder:
				f.Append(true)
				for range rng.IntN(3) {
					f.ValueBuilder().(*array.Int32Builder).Append(rng.Int32())
				}
			case *array.StructBuilder:
				f.Append(true)
				f.FieldBuilder(0).(*array.BooleanBuilder).Append(rng.IntN(2) == 0)
			case *array.TimestampBuilder:
				f.Append(arrow.Timestamp(rng.Int64N(1 << 50)))
			default:
				t.Fatalf("no values for %T", f)
			}
		}
	}
	return b.NewRecordBatch()
}

func writerBytes(t *testing.T, rec arrow.RecordBatch) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(rec.Schema()))
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// An Encoder writes the bytes an ipc.Writer writes, and a Decoder reads
// back the batch, for batches of each schema in turn (the caches serve
// the second and later batches).
func TestRoundTrip(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	var enc Encoder
	var dec Decoder
	for round := range 3 {
		for si, schema := range schemas() {
			for _, rows := range []int{0, 1, 7, 300} {
				rec := batch(t, schema, rows, rng)
				got, err := enc.Encode([]byte("prefix"), rec, nil)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.HasPrefix(got, []byte("prefix")) {
					t.Fatal("Encode did not append to dst")
				}
				got = got[len("prefix"):]
				if want := writerBytes(t, rec); !bytes.Equal(got, want) {
					t.Fatalf("round %d, schema %d, %d rows: %d bytes, an ipc.Writer writes %d", round, si, rows, len(got), len(want))
				}
				back, err := dec.Decode(got)
				if err != nil {
					t.Fatal(err)
				}
				if !array.RecordEqual(back, rec) || !back.Schema().Metadata().Equal(schema.Metadata()) {
					t.Fatalf("round %d, schema %d, %d rows: decoded\n%v\nwrote\n%v", round, si, rows, back, rec)
				}
				// The batch does not refer to the payload.
				for i := range got {
					got[i] = 0xee
				}
				if !array.RecordEqual(back, rec) {
					t.Fatal("the decoded batch changed with the payload")
				}
				back.Release()
				rec.Release()
			}
		}
	}
}

// Encode with a schema of other metadata writes that schema; with other
// columns, it refuses.
func TestEncodeSchema(t *testing.T) {
	rec := batch(t, schemas()[0], 3, rand.New(rand.NewPCG(1, 2)))
	defer rec.Release()
	md := arrow.NewMetadata([]string{"when"}, []string{"now"})
	withMD := arrow.NewSchema(rec.Schema().Fields(), &md)
	var enc Encoder
	var dec Decoder
	payload, err := enc.Encode(nil, rec, withMD)
	if err != nil {
		t.Fatal(err)
	}
	back, err := dec.Decode(payload)
	if err != nil {
		t.Fatal(err)
	}
	defer back.Release()
	if v := back.Schema().Metadata().Values(); len(v) != 1 || v[0] != "now" {
		t.Fatalf("metadata %v, want [now]", back.Schema().Metadata())
	}
	if _, err := enc.Encode(nil, rec, schemas()[1]); err == nil {
		t.Fatal("Encode took a schema of other columns")
	}
}

// A damaged or truncated payload is an error, never a panic or a batch,
// and the Decoder reads good payloads after it.
func TestDecodeDamaged(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	schema := schemas()[0]
	rec := batch(t, schema, 5, rng)
	defer rec.Release()
	var enc Encoder
	var dec Decoder
	good, err := enc.Encode(nil, rec, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 3, 8, 20, len(good) / 2, len(good) - 9} {
		if b, err := dec.Decode(good[:n]); err == nil {
			b.Release()
			t.Errorf("%d of %d bytes decoded", n, len(good))
		}
	}
	// Flipped bytes in the record batch message may decode to other
	// values, but must not panic or break the Decoder.
	schemaLen := len(good) - len(mustSplit(t, good))
	for range 200 {
		bad := bytes.Clone(good)
		bad[schemaLen+rng.IntN(len(bad)-schemaLen)] ^= byte(1 + rng.IntN(255))
		if b, err := dec.Decode(bad); err == nil {
			b.Release()
		}
	}
	back, err := dec.Decode(good)
	if err != nil {
		t.Fatal(err)
	}
	defer back.Release()
	if !array.RecordEqual(back, rec) {
		t.Fatal("after damaged payloads, a good one decodes wrong")
	}
}

func mustSplit(t *testing.T, payload []byte) []byte {
	t.Helper()
	_, rest, err := splitSchema(payload)
	if err != nil {
		t.Fatal(err)
	}
	return rest
}

// Many goroutines encode and decode at once (run with -race).
func TestConcurrent(t *testing.T) {
	var enc Encoder
	var dec Decoder
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 0))
			for i := range 200 {
				schema := schemas()[i%2]
				rec := batch(t, schema, 1+rng.IntN(5), rng)
				payload, err := enc.Encode(nil, rec, nil)
				if err == nil {
					var back arrow.RecordBatch
					if back, err = dec.Decode(payload); err == nil {
						if !array.RecordEqual(back, rec) {
							err = fmt.Errorf("goroutine %d batch %d decoded wrong", g, i)
						}
						back.Release()
					}
				}
				rec.Release()
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// Streams whose first message is not a schema, or with dictionaries, are
// read with an ipc.Reader of their own.
func TestDictionaryFallsBack(t *testing.T) {
	dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}
	schema := arrow.NewSchema([]arrow.Field{{Name: "d", Type: dt}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	db := b.Field(0).(*array.BinaryDictionaryBuilder)
	for _, s := range []string{"a", "b", "a"} {
		if err := db.AppendString(s); err != nil {
			t.Fatal(err)
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	var enc Encoder
	var dec Decoder
	for range 2 {
		payload, err := enc.Encode(nil, rec, nil)
		if err != nil {
			t.Fatal(err)
		}
		back, err := dec.Decode(payload)
		if err != nil {
			t.Fatal(err)
		}
		if !array.RecordEqual(back, rec) {
			t.Fatalf("decoded %v, wrote %v", back, rec)
		}
		back.Release()
	}
}

func BenchmarkEncodeOneRow(b *testing.B) {
	rec := batch(b, schemas()[0], 1, rand.New(rand.NewPCG(1, 1)))
	defer rec.Release()
	b.Run("ipc.Writer", func(b *testing.B) {
		for b.Loop() {
			var buf bytes.Buffer
			w := ipc.NewWriter(&buf, ipc.WithSchema(rec.Schema()))
			_ = w.Write(rec)
			_ = w.Close()
		}
	})
	b.Run("Encoder", func(b *testing.B) {
		var enc Encoder
		for b.Loop() {
			_, _ = enc.Encode(nil, rec, nil)
		}
	})
}

func BenchmarkDecodeOneRow(b *testing.B) {
	rec := batch(b, schemas()[0], 1, rand.New(rand.NewPCG(1, 1)))
	defer rec.Release()
	var enc Encoder
	payload, _ := enc.Encode(nil, rec, nil)
	b.Run("ipc.Reader", func(b *testing.B) {
		for b.Loop() {
			r, _ := ReadOne(payload)
			r.Release()
		}
	})
	b.Run("Decoder", func(b *testing.B) {
		var dec Decoder
		for b.Loop() {
			r, _ := dec.Decode(payload)
			r.Release()
		}
	})
}
