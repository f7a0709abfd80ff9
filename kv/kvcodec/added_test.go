package kvcodec

import (
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/minkdb/mink/internal/sqltypes"
)

// The added-columns table: created with id bigint (the primary key) and
// name text; then v integer (missing value 7), w text (missing NULL) and
// ok boolean (missing true) were added, in that order.
func addedColumns(t testing.TB) []sqltypes.Column {
	col := func(name, typ string, missing *string) sqltypes.Column {
		ty, err := sqltypes.Parse(typ)
		if err != nil {
			t.Fatal(err)
		}
		return sqltypes.Column{Name: name, Type: ty, Missing: missing}
	}
	return []sqltypes.Column{
		col("id", "bigint", nil), col("name", "text", nil),
		col("v", "integer", ptr("7")), col("w", "text", nil), col("ok", "boolean", ptr("true")),
	}
}

// addedCodec is the codec of the table when it had its first ncols columns.
func addedCodec(t testing.TB, ncols int) *Codec {
	c, err := NewTableCodec(addedColumns(t)[:ncols], 2, []int{0})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// addedBatch returns a batch of the first ncols columns of the table with
// one row per id: name "n<id>", v = 100+id, w "w<id>", ok false.
func addedBatch(t testing.TB, ncols int, ids ...int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, sqltypes.Schema(addedColumns(t)[:ncols]))
	defer b.Release()
	for _, id := range ids {
		b.Field(0).(*array.Int64Builder).Append(id)
		b.Field(1).(*array.StringBuilder).Append("n" + string(rune('0'+id)))
		if ncols > 2 {
			b.Field(2).(*array.Int32Builder).Append(int32(100 + id))
		}
		if ncols > 3 {
			b.Field(3).(*array.StringBuilder).Append("w" + string(rune('0'+id)))
		}
		if ncols > 4 {
			b.Field(4).(*array.BooleanBuilder).Append(false)
		}
	}
	return b.NewRecordBatch()
}

func encodeOne(t testing.TB, c *Codec, rec arrow.RecordBatch, i int) []byte {
	t.Helper()
	row, err := c.AppendRow(nil, rec, i)
	if err != nil {
		t.Fatal(err)
	}
	return row
}

// rowStrings decodes rows with c and formats each column of each row.
func rowStrings(t testing.TB, c *Codec, rows ...[]byte) [][]string {
	t.Helper()
	rec, err := c.DecodeRows(nil, rows)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	if !rec.Schema().Equal(c.Schema()) {
		t.Fatalf("decoded schema %s, want %s", rec.Schema(), c.Schema())
	}
	out := make([][]string, rec.NumRows())
	for r := range out {
		for _, col := range rec.Columns() {
			s := "NULL"
			if col.IsValid(r) {
				s = col.ValueStr(r)
			}
			out[r] = append(out[r], s)
		}
	}
	return out
}

func TestAddedColumnsRows(t *testing.T) {
	full := addedCodec(t, 5)
	for ncols := 2; ncols <= 5; ncols++ {
		rec := addedBatch(t, ncols, 3)
		old := addedCodec(t, ncols)
		row := encodeOne(t, old, rec, 0)
		rec.Release()
		// Rows of the created columns keep format 1; wider ones say
		// their width.
		if ncols == 2 && row[0] != 1 || ncols > 2 && (row[0] != 2 || row[1] != byte(ncols)) {
			t.Fatalf("a row of %d columns starts %x", ncols, row[:2])
		}
		if n, err := full.RowColumns(row); err != nil || n != ncols {
			t.Fatalf("RowColumns of a %d-column row: %d, %v", ncols, n, err)
		}
		want := []string{"3", "n3", "103", "w3", "false"}
		// Written before a column was added: its missing value.
		copy(want[ncols:], []string{"", "", "7", "NULL", "true"}[ncols:])
		got := rowStrings(t, full, row)[0]
		if !equalStrings(got, want) {
			t.Errorf("a row written with %d columns reads as %v, want %v", ncols, got, want)
		}
		vals := make([]any, 4)
		if err := full.DecodeValues(row, []int{4, 2, 3, 0}, vals); err != nil {
			t.Fatal(err)
		}
		wantVals := []any{false, int32(103), "w3", int64(3)}
		switch ncols {
		case 2:
			wantVals = []any{true, int32(7), nil, int64(3)}
		case 3:
			wantVals = []any{true, int32(103), nil, int64(3)}
		case 4:
			wantVals[0] = true
		}
		for i := range vals {
			if vals[i] != wantVals[i] {
				t.Errorf("DecodeValues of a %d-column row: %v, want %v", ncols, vals, wantVals)
				break
			}
		}
		// A codec that predates the row's columns refuses it.
		if ncols > 2 {
			older := addedCodec(t, ncols-1)
			if _, err := older.DecodeRows(nil, [][]byte{row}); !errors.Is(err, ErrNewerColumns) {
				t.Errorf("a %d-column codec decoding a %d-column row: %v, want ErrNewerColumns", ncols-1, ncols, err)
			}
			if err := older.DecodeValues(row, []int{0}, make([]any, 1)); !errors.Is(err, ErrNewerColumns) {
				t.Errorf("DecodeValues: %v, want ErrNewerColumns", err)
			}
		}
	}
}

// TestFormat1Bytes decodes a format-1 row built by hand from
// docs/format/kv.md: the created columns, no column count.
func TestFormat1Bytes(t *testing.T) {
	row := []byte{1, 0b00, 9, 0, 0, 0, 0, 0, 0, 0, 2, 'h', 'i'}
	got := rowStrings(t, addedCodec(t, 5), row)[0]
	if want := []string{"9", "hi", "7", "NULL", "true"}; !equalStrings(got, want) {
		t.Fatalf("format-1 row reads as %v, want %v", got, want)
	}
	// The same row in format 2, and one of 1 column (fewer than created).
	row2 := []byte{2, 2, 0b00, 9, 0, 0, 0, 0, 0, 0, 0, 2, 'h', 'i'}
	if got := rowStrings(t, addedCodec(t, 5), row2)[0]; !equalStrings(got, []string{"9", "hi", "7", "NULL", "true"}) {
		t.Fatalf("format-2 row of the created columns reads as %v", got)
	}
	short := []byte{2, 1, 0b00, 9, 0, 0, 0, 0, 0, 0, 0}
	if _, err := addedCodec(t, 5).DecodeRows(nil, [][]byte{short}); !errors.Is(err, ErrBadRow) {
		t.Fatalf("a row of fewer columns than created: %v, want ErrBadRow", err)
	}
	if _, err := addedCodec(t, 5).DecodeRows(nil, [][]byte{{3, 0}}); !errors.Is(err, ErrBadRow) {
		t.Fatalf("row format 3: %v, want ErrBadRow", err)
	}
}

// TestEqualRows: a stored row equals its re-encoding with more columns
// when those hold the missing values, whatever the formats.
func TestEqualRows(t *testing.T) {
	full := addedCodec(t, 5)
	old := encodeOne(t, addedCodec(t, 2), addedBatch(t, 2, 4), 0) // format 1
	// What the SQL layer does: read the row, re-encode it.
	rec, err := full.DecodeRows(nil, [][]byte{old})
	if err != nil {
		t.Fatal(err)
	}
	reencoded := encodeOne(t, full, rec, 0)
	rec.Release()
	three := encodeOne(t, addedCodec(t, 3), addedBatch(t, 3, 4), 0) // v = 104, not 7
	for _, tt := range []struct {
		name string
		a, b []byte
		want bool
	}{
		{"format 1 vs its 5-column re-encoding", old, reencoded, true},
		{"5-column re-encoding vs format 1", reencoded, old, true},
		{"same bytes", three, three, true},
		{"v=104 vs missing v=7", three, reencoded, false},
		{"v=104 vs format 1", old, three, false},
	} {
		got, err := full.EqualRows(tt.a, tt.b)
		if err != nil || got != tt.want {
			t.Errorf("%s: %v, %v; want %v", tt.name, got, err, tt.want)
		}
	}
	// 3 columns with v = 7: equal to the format-1 row once widened.
	b := array.NewRecordBuilder(memory.DefaultAllocator, sqltypes.Schema(addedColumns(t)[:3]))
	b.Field(0).(*array.Int64Builder).Append(4)
	b.Field(1).(*array.StringBuilder).Append("n4")
	b.Field(2).(*array.Int32Builder).Append(7)
	seven := b.NewRecordBatch()
	b.Release()
	if eq, err := full.EqualRows(old, encodeOne(t, full, seven, 0)); err != nil || !eq {
		t.Errorf("format 1 vs 3 columns holding the missing v: %v, %v", eq, err)
	}
	seven.Release()
	if _, err := addedCodec(t, 3).EqualRows(old, reencoded); !errors.Is(err, ErrNewerColumns) {
		t.Errorf("a 3-column codec comparing a 5-column row: %v, want ErrNewerColumns", err)
	}
}

func TestAddedColumnsChangelog(t *testing.T) {
	old, full := addedCodec(t, 2), addedCodec(t, 5)
	rec := addedBatch(t, 2, 1, 2)
	defer rec.Release()
	writes, err := old.Writes(OpUpsert, rec)
	if err != nil {
		t.Fatal(err)
	}
	// An entry written before v, w and ok were added.
	payload, err := old.EncodeChanges([]ChangeRecord{
		{Type: Insert, Key: writes[0].Key, Row: writes[0].Row},
		{Type: Delete, Key: writes[1].Key, Row: writes[1].Row},
	})
	if err != nil {
		t.Fatal(err)
	}
	records, err := full.DecodeChanges(payload)
	if err != nil {
		t.Fatal(err)
	}
	if len(records) != 2 || records[0].Type != Insert || records[1].Type != Delete || string(records[1].Key) != string(writes[1].Key) {
		t.Fatalf("decoded %v", records)
	}
	got := rowStrings(t, full, records[0].Row, records[1].Row)
	if want := []string{"1", "n1", "7", "NULL", "true"}; !equalStrings(got[0], want) {
		t.Errorf("record 0 reads as %v, want %v", got[0], want)
	}
	stored, err := DecodeChangesBatch(payload)
	if err != nil {
		t.Fatal(err)
	}
	defer stored.Release()
	wide, err := full.WidenChanges(nil, stored)
	if err != nil {
		t.Fatal(err)
	}
	defer wide.Release()
	if !wide.Schema().Equal(full.ChangelogSchema()) || wide.NumRows() != 2 {
		t.Fatalf("widened batch %s", wide)
	}
	if v := wide.Column(3).(*array.Int32); v.Value(0) != 7 || v.Value(1) != 7 || wide.Column(4).NullN() != 2 ||
		!wide.Column(5).(*array.Boolean).Value(1) || wide.Column(0).(*array.String).Value(1) != "-D" {
		t.Errorf("widened batch %v", wide)
	}

	// A newer entry read by an older codec: ErrNewerColumns, not garbage.
	newRec := addedBatch(t, 5, 3)
	defer newRec.Release()
	w5, err := full.Writes(OpUpsert, newRec)
	if err != nil {
		t.Fatal(err)
	}
	payload5, err := full.EncodeChanges([]ChangeRecord{{Type: Insert, Key: w5[0].Key, Row: w5[0].Row}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := addedCodec(t, 3).DecodeChanges(payload5); !errors.Is(err, ErrNewerColumns) {
		t.Errorf("a 3-column codec decoding a 5-column entry: %v, want ErrNewerColumns", err)
	}
	stored5, err := DecodeChangesBatch(payload5)
	if err != nil {
		t.Fatal(err)
	}
	defer stored5.Release()
	if _, err := old.WidenChanges(nil, stored5); !errors.Is(err, ErrNewerColumns) {
		t.Errorf("WidenChanges of a wider entry: %v, want ErrNewerColumns", err)
	}
	// A newer batch handed to an older codec's Writes is refused the same way.
	if _, err := old.Writes(OpUpsert, newRec); !errors.Is(err, ErrNewerColumns) {
		t.Errorf("Writes of a wider batch: %v, want ErrNewerColumns", err)
	}
}

func TestNewTableCodecErrors(t *testing.T) {
	cols := addedColumns(t)
	if _, err := NewTableCodec(cols, 2, []int{2}); err == nil {
		t.Error("an added column as the primary key was accepted")
	}
	if _, err := NewTableCodec(cols, 0, []int{0}); err == nil {
		t.Error("0 created columns were accepted")
	}
	bad := append([]sqltypes.Column{}, cols...)
	bad[2].Missing = ptr("seven")
	if _, err := NewTableCodec(bad, 2, []int{0}); err == nil {
		t.Error("a missing value that is not an integer was accepted")
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
