package kv

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/kv/kvcodec"
	"github.com/minkdb/mink/objstore"
)

var verbose = flag.Bool("kv.verbose", false, "log the tablet's lines (pebble, restore) to stderr")

func testLogger() *slog.Logger {
	if *verbose {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func testOptions() Options {
	return Options{Logger: testLogger(), CacheSize: 8 << 20, MemTableSize: 4 << 20}
}

// The model tests' table: id bigint, name text (the primary key is (id,
// name)), v text, n bigint; v and n nullable.
var testSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "name", Type: arrow.BinaryTypes.String},
	{Name: "v", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
}, nil)

func testCodec(t testing.TB) *kvcodec.Codec {
	c, err := kvcodec.NewCodec(testSchema, []int{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// testRow is a row of testSchema; nil pointers are nulls.
type testRow struct {
	id   int64
	name string
	v    *string
	n    *int64
}

func ptr[T any](v T) *T { return &v }

// encodeRows returns the keys and encoded rows of rows.
func encodeRows(t testing.TB, c *kvcodec.Codec, rows ...testRow) (keys, encoded [][]byte) {
	b := array.NewRecordBuilder(memory.DefaultAllocator, testSchema)
	defer b.Release()
	for _, r := range rows {
		b.Field(0).(*array.Int64Builder).Append(r.id)
		b.Field(1).(*array.StringBuilder).Append(r.name)
		if r.v == nil {
			b.Field(2).AppendNull()
		} else {
			b.Field(2).(*array.StringBuilder).Append(*r.v)
		}
		if r.n == nil {
			b.Field(3).AppendNull()
		} else {
			b.Field(3).(*array.Int64Builder).Append(*r.n)
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	for i := range rows {
		k, err := c.AppendKey(nil, rec, i)
		if err != nil {
			t.Fatal(err)
		}
		v, err := c.AppendRow(nil, rec, i)
		if err != nil {
			t.Fatal(err)
		}
		keys, encoded = append(keys, k), append(encoded, v)
	}
	return keys, encoded
}

// describeRow formats an encoded testSchema row as "id/name=v,n".
func describeRow(t testing.TB, c *kvcodec.Codec, row []byte) string {
	rec, err := c.DecodeRows(nil, [][]byte{row})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d/%s=", rec.Column(0).(*array.Int64).Value(0), rec.Column(1).(*array.String).Value(0))
	for i, col := range rec.Columns()[2:] {
		if i > 0 {
			sb.WriteByte(',')
		}
		if col.IsNull(0) {
			sb.WriteString("NULL")
		} else {
			sb.WriteString(col.ValueStr(0))
		}
	}
	return sb.String()
}

// logEntry is one entry of an in-memory changelog stream.
type logEntry struct {
	offset  uint64
	count   uint32
	payload []byte
}

func (e logEntry) end() uint64 { return e.offset + uint64(e.count) }

// memLog is an in-memory stream of changelog entries: what s3stream keeps
// for a bucket, reduced to what a replay reads.
type memLog struct {
	entries []logEntry
	end     uint64
}

// append adds an entry of records and returns its end offset.
func (l *memLog) append(t testing.TB, c *kvcodec.Codec, records []kvcodec.ChangeRecord) uint64 {
	payload, err := c.EncodeChanges(records)
	if err != nil {
		t.Fatal(err)
	}
	l.entries = append(l.entries, logEntry{offset: l.end, count: uint32(len(records)), payload: payload})
	l.end += uint64(len(records))
	return l.end
}

// replay applies the entries from offset on to tab. The entry holding
// offset (if offset is inside one) is applied whole, to exercise Apply's
// overlap rule.
func (l *memLog) replay(t testing.TB, c *kvcodec.Codec, tab *Tablet, from uint64) {
	for _, e := range l.entries {
		if e.end() <= from {
			continue
		}
		if e.offset < from {
			// Apply skips the records before from.
			records, err := c.DecodeChanges(e.payload)
			if err != nil {
				t.Fatalf("decode entry at %d: %v", e.offset, err)
			}
			if err := tab.Apply(records, e.end()); err != nil {
				t.Fatalf("replay entry at %d: %v", e.offset, err)
			}
			continue
		}
		if err := tab.ApplyEntry(c, e.offset, e.count, e.payload); err != nil {
			t.Fatalf("replay entry at %d: %v", e.offset, err)
		}
	}
}

// stateAt is the state the changelog defines at offset: every key's row
// after records [0, offset).
func (l *memLog) stateAt(t testing.TB, c *kvcodec.Codec, offset uint64) map[string]string {
	state := map[string]string{}
	for _, e := range l.entries {
		if e.offset >= offset {
			break
		}
		records, err := c.DecodeChanges(e.payload)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range records {
			if e.offset+uint64(i) >= offset {
				break
			}
			switch r.Type {
			case kvcodec.Insert, kvcodec.UpdateAfter:
				state[string(r.Key)] = string(r.Row)
			case kvcodec.Delete:
				delete(state, string(r.Key))
			}
		}
	}
	return state
}

// tabletState reads every row of tab.
func tabletState(t testing.TB, tab *Tablet) map[string]string {
	r, err := tab.NewReader()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	state := map[string]string{}
	var last []byte
	if err := r.Scan(nil, nil, func(key, row []byte) error {
		if last != nil && string(last) >= string(key) {
			t.Fatalf("scan out of order: %x then %x", last, key)
		}
		last = slices.Clone(key)
		state[string(key)] = string(row)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return state
}

// diffStates describes how got differs from want, or "" if they are equal.
func diffStates(t testing.TB, c *kvcodec.Codec, got, want map[string]string) string {
	if maps.Equal(got, want) {
		return ""
	}
	var lines []string
	for k, w := range want {
		g, ok := got[k]
		switch {
		case !ok:
			lines = append(lines, fmt.Sprintf("missing %s", describeRow(t, c, []byte(w))))
		case g != w:
			lines = append(lines, fmt.Sprintf("got %s, want %s", describeRow(t, c, []byte(g)), describeRow(t, c, []byte(w))))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			lines = append(lines, fmt.Sprintf("extra %s", describeRow(t, c, []byte(g))))
		}
	}
	slices.Sort(lines)
	if len(lines) > 20 {
		lines = append(lines[:20], fmt.Sprintf("… %d more", len(lines)-20))
	}
	return strings.Join(lines, "\n")
}

// metaView is a catalog view with one primary-key table of one bucket, led
// by node 1; snapshots are committed through the real state machine.
type metaView struct {
	t      testing.TB
	view   *catalog.View
	bucket catalog.BucketID
	epoch  uint64 // the bucket's leader epoch
}

func newMetaView(t testing.TB) *metaView {
	m := &metaView{t: t, view: catalog.NewView()}
	m.mustApply(catalog.RegisterNode{Node: 1})
	m.mustApply(catalog.RegisterCoordinator{Node: 1, NodeEpoch: 1})
	out := m.mustApply(catalog.CreateTable{Spec: catalog.TableSpec{
		Name: "t",
		Columns: []catalog.Column{
			{Name: "id", Type: "bigint", NotNull: true}, {Name: "name", Type: "text", NotNull: true},
			{Name: "v", Type: "text"}, {Name: "n", Type: "bigint"},
		},
		PrimaryKey: []string{"id", "name"},
		Buckets:    1,
	}})
	m.bucket = out.Buckets[0]
	m.lead()
	return m
}

func (m *metaView) apply(rec catalog.Record) catalog.Outcome {
	return catalog.Apply(m.view, m.view.Index+1, rec)
}

func (m *metaView) mustApply(rec catalog.Record) catalog.Outcome {
	m.t.Helper()
	out := m.apply(rec)
	if out.Err != nil {
		m.t.Fatalf("apply %T: %v", rec, out.Err)
	}
	return out
}

// lead gives the bucket a new leader epoch, as a failover or a restart does.
func (m *metaView) lead() {
	out := m.mustApply(catalog.LeadBucket{Bucket: m.bucket, Node: 1, CoordinatorEpoch: m.view.Coordinator.Epoch})
	m.epoch = out.Epoch
}

func (m *metaView) retained() []catalog.KVSnapshot {
	return slices.Clone(m.view.Buckets[m.bucket].Snapshots)
}

// snapshot takes a snapshot of tab at the current epoch and commits it; it
// returns the commit's error (a rejection).
func (m *metaView) snapshot(ctx context.Context, tab *Tablet, store objstore.Store) (SnapshotResult, error) {
	res, err := tab.Snapshot(ctx, store, SnapshotOptions{Bucket: m.bucket, LeaderEpoch: m.epoch, Retained: m.retained()})
	if err != nil {
		return res, err
	}
	return res, m.apply(res.Record).Err
}

// collect deletes the bucket's snapshot garbage and returns the keys.
func (m *metaView) collect(ctx context.Context, store objstore.Store) []string {
	m.t.Helper()
	garbage, err := Garbage(ctx, store, m.bucket, m.retained())
	if err != nil {
		m.t.Fatal(err)
	}
	for _, k := range garbage {
		if err := store.Delete(ctx, k); err != nil {
			m.t.Fatal(err)
		}
	}
	return garbage
}

// restore restores the bucket's tablet into a fresh directory under root
// and replays l after the snapshot.
func (m *metaView) restore(ctx context.Context, store objstore.Store, root string, gen *int, l *memLog, snaps []catalog.KVSnapshot) (*Tablet, RestoreResult) {
	m.t.Helper()
	*gen++
	tab, res, err := Restore(ctx, store, filepath.Join(root, fmt.Sprintf("tablet-%d", *gen)), RestoreOptions{
		Bucket: m.bucket, Snapshots: snaps, Tablet: testOptions(),
	})
	if err != nil {
		m.t.Fatalf("restore: %v", err)
	}
	l.replay(m.t, testCodecNoT(), tab, res.LogOffset)
	return tab, res
}

var sharedCodec *kvcodec.Codec

func testCodecNoT() *kvcodec.Codec {
	if sharedCodec == nil {
		c, err := kvcodec.NewCodec(testSchema, []int{0, 1})
		if err != nil {
			panic(err)
		}
		sharedCodec = c
	}
	return sharedCodec
}
