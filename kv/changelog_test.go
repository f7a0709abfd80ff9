package kv

import (
	"errors"
	"slices"
	"testing"

	"github.com/minkdb/mink/kv/kvcodec"
)

// TestChanges checks the exact changelog records that a sequence of write
// batches yields, each batch applied before the next.
func TestChanges(t *testing.T) {
	c := testCodec(t)
	type w struct {
		op kvcodec.WriteOp
		id int64
		v  string // "" writes a null v
	}
	type batch struct {
		writes []w
		want   []string // "+I 1/a=x,NULL" …; nil: no records
		dup    int      // index of the write failing with a duplicate key, or -1
	}
	tests := []struct {
		name    string
		batches []batch
	}{
		{"insert update delete", []batch{
			{writes: []w{{kvcodec.OpInsert, 1, "a"}, {kvcodec.OpInsert, 2, "b"}}, want: []string{"+I 1/k=a,NULL", "+I 2/k=b,NULL"}, dup: -1},
			{writes: []w{{kvcodec.OpUpsert, 1, "a2"}}, want: []string{"-U 1/k=a,NULL", "+U 1/k=a2,NULL"}, dup: -1},
			{writes: []w{{kvcodec.OpDelete, 2, ""}}, want: []string{"-D 2/k=b,NULL"}, dup: -1},
			{writes: []w{{kvcodec.OpUpsert, 2, "b2"}}, want: []string{"+I 2/k=b2,NULL"}, dup: -1},
		}},
		{"writes to one key apply in batch order", []batch{
			{writes: []w{{kvcodec.OpUpsert, 1, "a"}, {kvcodec.OpUpsert, 1, "b"}, {kvcodec.OpDelete, 1, ""}, {kvcodec.OpInsert, 1, "c"}, {kvcodec.OpUpdate, 1, "d"}},
				want: []string{"+I 1/k=a,NULL", "-U 1/k=a,NULL", "+U 1/k=b,NULL", "-D 1/k=b,NULL", "+I 1/k=c,NULL", "-U 1/k=c,NULL", "+U 1/k=d,NULL"}, dup: -1},
		}},
		{"duplicate key against the tablet fails the whole batch", []batch{
			{writes: []w{{kvcodec.OpInsert, 1, "a"}}, want: []string{"+I 1/k=a,NULL"}, dup: -1},
			{writes: []w{{kvcodec.OpInsert, 2, "b"}, {kvcodec.OpInsert, 1, "x"}}, dup: 1},
			{writes: []w{{kvcodec.OpInsert, 2, "b"}}, want: []string{"+I 2/k=b,NULL"}, dup: -1},
		}},
		{"duplicate key within a batch", []batch{
			{writes: []w{{kvcodec.OpInsert, 5, "a"}, {kvcodec.OpInsert, 5, "b"}}, dup: 1},
			{writes: []w{{kvcodec.OpInsert, 5, "a"}, {kvcodec.OpDelete, 5, ""}, {kvcodec.OpInsert, 5, "b"}}, want: []string{"+I 5/k=a,NULL", "-D 5/k=a,NULL", "+I 5/k=b,NULL"}, dup: -1},
		}},
		{"no-ops: insert-if-absent on a present key, update and delete of a missing key", []batch{
			{writes: []w{{kvcodec.OpInsertIfAbsent, 1, "a"}, {kvcodec.OpInsertIfAbsent, 1, "b"}, {kvcodec.OpUpdate, 2, "x"}, {kvcodec.OpDelete, 3, ""}}, want: []string{"+I 1/k=a,NULL"}, dup: -1},
			{writes: []w{{kvcodec.OpInsertIfAbsent, 1, "c"}, {kvcodec.OpDelete, 2, ""}}, dup: -1},
			{writes: []w{{kvcodec.OpUpdate, 1, "d"}}, want: []string{"-U 1/k=a,NULL", "+U 1/k=d,NULL"}, dup: -1},
		}},
		{"an upsert to the same row still updates", []batch{
			{writes: []w{{kvcodec.OpUpsert, 1, "a"}, {kvcodec.OpUpsert, 1, "a"}}, want: []string{"+I 1/k=a,NULL", "-U 1/k=a,NULL", "+U 1/k=a,NULL"}, dup: -1},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tab, err := Open(t.TempDir(), testOptions())
			if err != nil {
				t.Fatal(err)
			}
			defer tab.Close()
			var end uint64
			for bi, b := range tt.batches {
				var writes []kvcodec.Write
				for _, x := range b.writes {
					r := testRow{id: x.id, name: "k"}
					if x.v != "" {
						r.v = ptr(x.v)
					}
					keys, rows := encodeRows(t, c, r)
					wr := kvcodec.Write{Op: x.op, Key: keys[0], Row: rows[0]}
					if x.op == kvcodec.OpDelete {
						wr.Row = nil
					}
					writes = append(writes, wr)
				}
				records, err := Changes(tab, writes)
				if b.dup >= 0 {
					var de *DuplicateKeyError
					if !errors.As(err, &de) || !errors.Is(err, ErrDuplicateKey) || de.Write != b.dup {
						t.Fatalf("batch %d: got %v, %v; want a duplicate key error at write %d", bi, records, err, b.dup)
					}
					if records != nil {
						t.Fatalf("batch %d: a failed batch returned records %v", bi, records)
					}
					continue
				}
				if err != nil {
					t.Fatalf("batch %d: %v", bi, err)
				}
				var got []string
				for _, r := range records {
					got = append(got, r.Type.String()+" "+describeRow(t, c, r.Row))
				}
				if !slices.Equal(got, b.want) {
					t.Fatalf("batch %d: got records\n%q\nwant\n%q", bi, got, b.want)
				}
				// The records survive the changelog encoding, and applying
				// them makes the next batch see them.
				if len(records) > 0 {
					payload, err := c.EncodeChanges(records)
					if err != nil {
						t.Fatal(err)
					}
					decoded, err := c.DecodeChanges(payload)
					if err != nil {
						t.Fatal(err)
					}
					for i := range records {
						if decoded[i].Type != records[i].Type || string(decoded[i].Key) != string(records[i].Key) ||
							string(decoded[i].Row) != string(records[i].Row) || decoded[i].Write != -1 {
							t.Fatalf("batch %d record %d: decoded %+v, encoded %+v", bi, i, decoded[i], records[i])
						}
					}
					end += uint64(len(records))
					if err := tab.Apply(decoded, end); err != nil {
						t.Fatal(err)
					}
				}
			}
		})
	}
}

// TestChangesWriteIndex checks ChangeRecord.Write, which RETURNING uses.
func TestChangesWriteIndex(t *testing.T) {
	c := testCodec(t)
	tab, err := Open(t.TempDir(), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()
	keys, rows := encodeRows(t, c, testRow{id: 1, name: "a"}, testRow{id: 2, name: "b"})
	records, err := Changes(tab, []kvcodec.Write{
		{Op: kvcodec.OpDelete, Key: keys[1]},
		{Op: kvcodec.OpInsert, Key: keys[0], Row: rows[0]},
		{Op: kvcodec.OpUpsert, Key: keys[0], Row: rows[0]},
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, r := range records {
		got = append(got, r.Write)
	}
	if want := []int{1, 2, 2}; !slices.Equal(got, want) {
		t.Fatalf("write indexes %v, want %v", got, want)
	}
}

// TestChangesConditional checks CheckRow, the optimistic read-modify-write
// that UPDATE and ON CONFLICT DO UPDATE use.
func TestChangesConditional(t *testing.T) {
	c := testCodec(t)
	tab, err := Open(t.TempDir(), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Close()
	keys, rows := encodeRows(t, c, testRow{id: 1, name: "a", v: ptr("old")}, testRow{id: 1, name: "a", v: ptr("new")})
	var log memLog
	write(t, c, tab, &log, []kvcodec.Write{{Op: kvcodec.OpInsert, Key: keys[0], Row: rows[0]}})

	tests := []struct {
		name     string
		writes   []kvcodec.Write
		conflict int // -1: none
		records  int
	}{
		{"the row read is current", []kvcodec.Write{{Op: kvcodec.OpUpdate, Key: keys[0], Row: rows[1], CheckRow: true, IfRow: rows[0]}}, -1, 2},
		{"the row changed", []kvcodec.Write{{Op: kvcodec.OpUpdate, Key: keys[0], Row: rows[1], CheckRow: true, IfRow: rows[1]}}, 0, 0},
		{"the row was absent when read", []kvcodec.Write{{Op: kvcodec.OpUpsert, Key: keys[0], Row: rows[1], CheckRow: true}}, 0, 0},
		{"a delete conditional on the current row", []kvcodec.Write{{Op: kvcodec.OpDelete, Key: keys[0], CheckRow: true, IfRow: rows[0]}}, -1, 1},
		{"checked after the batch's earlier writes", []kvcodec.Write{
			{Op: kvcodec.OpUpdate, Key: keys[0], Row: rows[1]},
			{Op: kvcodec.OpDelete, Key: keys[0], CheckRow: true, IfRow: rows[1]},
			{Op: kvcodec.OpInsert, Key: keys[0], Row: rows[0], CheckRow: true},
		}, -1, 4},
		{"a conflict fails the whole batch", []kvcodec.Write{
			{Op: kvcodec.OpUpdate, Key: keys[0], Row: rows[1]},
			{Op: kvcodec.OpDelete, Key: keys[0], CheckRow: true, IfRow: rows[0]},
		}, 1, 0},
	}
	for _, tt := range tests {
		records, err := Changes(tab, tt.writes)
		var ce *ConflictError
		switch {
		case tt.conflict >= 0 && (!errors.As(err, &ce) || !errors.Is(err, ErrConflict) || ce.Write != tt.conflict || records != nil):
			t.Errorf("%s: %v, %v; want a conflict at write %d", tt.name, records, err, tt.conflict)
		case tt.conflict < 0 && (err != nil || len(records) != tt.records):
			t.Errorf("%s: %d records, %v; want %d records", tt.name, len(records), err, tt.records)
		}
	}
}

// TestCodecWrites: Codec.Writes encodes a statement's batch as Changes
// takes it.
func TestCodecWrites(t *testing.T) {
	c := testCodec(t)
	rows := []testRow{{id: 1, name: "a"}, {id: 2, name: "b", v: ptr("x")}}
	keys, encoded := encodeRows(t, c, rows...)
	rec, err := c.DecodeRows(nil, encoded)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	for _, op := range []kvcodec.WriteOp{kvcodec.OpUpsert, kvcodec.OpDelete} {
		writes, err := c.Writes(op, rec)
		if err != nil {
			t.Fatal(err)
		}
		for i, w := range writes {
			wantRow := encoded[i]
			if op == kvcodec.OpDelete {
				wantRow = nil
			}
			if w.Op != op || string(w.Key) != string(keys[i]) || string(w.Row) != string(wantRow) {
				t.Fatalf("%s write %d: %+v", op, i, w)
			}
		}
	}
}
