package plan

import (
	"fmt"
	"testing"
	"time"

	"github.com/minkdb/mink/catalog"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// objects returns committed objects of n entries each, written at the
// given times.
func objects(stream catalog.StreamID, start, n uint64, at ...time.Time) []catalog.StreamObject {
	var out []catalog.StreamObject
	for i, a := range at {
		s := start + uint64(i)*n
		out = append(out, catalog.StreamObject{Key: fmt.Sprintf("streams/%d/%d", stream, s), Start: s, End: s + n, Size: 1, At: a})
	}
	return out
}

func describeTrims(trims []catalog.TrimStream) string {
	s := ""
	for _, tr := range trims {
		s += fmt.Sprintf("%d→%d@%d ", tr.Stream, tr.Start, tr.CoordinatorEpoch)
	}
	return s
}

func TestTrims(t *testing.T) {
	logSpec := func(name string, opts map[string]string, pk bool) catalog.CreateTable {
		spec := catalog.TableSpec{Name: name, Columns: []catalog.Column{{Name: "a", Type: "bigint"}}, Buckets: 1, Options: opts}
		if pk {
			spec.PrimaryKey = []string{"a"}
		}
		return catalog.CreateTable{Spec: spec}
	}
	old := []time.Time{t0.Add(-3 * time.Hour), t0.Add(-2 * time.Hour), t0.Add(-30 * time.Minute)}
	recs := []catalog.Record{
		catalog.RegisterNode{Node: 1}, catalog.RegisterCoordinator{Node: 1, NodeEpoch: 1},
		logSpec("tiered", map[string]string{"log_retention": "1h"}, false),                     // table 1, bucket 2
		logSpec("untiered", map[string]string{"log_retention": "1h", "tiering": "off"}, false), // table 3, bucket 4
		logSpec("pk", map[string]string{"log_retention": "1h"}, true),                          // table 5, bucket 6
		logSpec("keep", nil, false), // table 7, bucket 8
	}
	for _, b := range []catalog.BucketID{2, 4, 6, 8} {
		recs = append(recs,
			catalog.LeadBucket{Bucket: b, Node: 1, CoordinatorEpoch: 1},
			catalog.OpenStream{Stream: catalog.StreamID(b), Epoch: 1, Node: 1, NodeEpoch: 1},
			catalog.CommitStreamObjects{Stream: catalog.StreamID(b), Epoch: 1, Objects: objects(catalog.StreamID(b), 0, 10, old...)})
	}
	v := applyAll(t, recs...)
	// Nothing tiered yet: only the table with tiering off is trimmed, by age
	// alone, to the end of its last object older than an hour.
	if got, want := describeTrims(Trims(v, t0, 1)), "4→20@1 "; got != want {
		t.Fatalf("before tiering: %s, want %s", got, want)
	}
	// Tiered to 15: the tiered table trims to 10 (the boundary at or below
	// 15); tiered to 30, age limits it to 20.
	catalog.Apply(v, v.Index+1, catalog.CommitTieringRound{Table: 1, CoordinatorEpoch: 1, Offsets: map[catalog.BucketID]uint64{2: 15}, LakeSequence: 1, At: t0})
	if got, want := describeTrims(Trims(v, t0, 1)), "2→10@1 4→20@1 "; got != want {
		t.Fatalf("tiered to 15: %s, want %s", got, want)
	}
	catalog.Apply(v, v.Index+1, catalog.CommitTieringRound{Table: 1, CoordinatorEpoch: 1, Offsets: map[catalog.BucketID]uint64{2: 30}, LakeSequence: 2, At: t0})
	trims := Trims(v, t0, 1)
	if got, want := describeTrims(trims), "2→20@1 4→20@1 "; got != want {
		t.Fatalf("tiered to 30: %s, want %s", got, want)
	}
	// The plan is accepted by the state machine, and once applied there is
	// nothing left to trim until time passes.
	for _, tr := range trims {
		if out := catalog.Apply(v, v.Index+1, tr); out.Err != nil {
			t.Fatalf("%+v: %v", tr, out.Err)
		}
	}
	if got := describeTrims(Trims(v, t0, 1)); got != "" {
		t.Fatalf("after applying the plan: %s", got)
	}
	if got, want := describeTrims(Trims(v, t0.Add(time.Hour), 1)), "2→30@1 4→30@1 "; got != want {
		t.Fatalf("an hour later: %s, want %s", got, want)
	}
}

func TestPartitionDrops(t *testing.T) {
	part := func(name, colType string) catalog.CreateTable {
		return catalog.CreateTable{Spec: catalog.TableSpec{Name: name, Columns: []catalog.Column{{Name: "p", Type: colType}, {Name: "v", Type: "text"}},
			PartitionBy: "p", Buckets: 1, Options: map[string]string{"partition_retention": "48h"}}}
	}
	v := applyAll(t,
		catalog.RegisterNode{Node: 1}, catalog.RegisterCoordinator{Node: 1, NodeEpoch: 1},
		part("days", "date"), // table 1
		catalog.CreatePartition{Table: 1, Value: "2026-02-26"}, // 2, bucket 3: ended 02-27 00:00, 60h before 03-01 12:00: expired
		catalog.CreatePartition{Table: 1, Value: "2026-02-27"}, // 4, bucket 5: ended 02-28 00:00, 36h ago: kept
		catalog.CreatePartition{Table: 1, Value: "2026-02-28"}, // 6, bucket 7: ends 03-01 00:00: 12h, kept
		catalog.CreatePartition{Table: 1, Value: "garbage"},    // 8, bucket 9: not a date: never expires
		part("regions", "text"),                                // table 10
		catalog.CreatePartition{Table: 10, Value: "eu"},        // 11, bucket 12: last write 3 days ago
		catalog.CreatePartition{Table: 10, Value: "us"},        // 13, bucket 14: a recent write
		catalog.CreatePartition{Table: 10, Value: "asia"},      // 15, bucket 16: never written
		catalog.LeadBucket{Bucket: 12, Node: 1, CoordinatorEpoch: 1},
		catalog.OpenStream{Stream: 12, Epoch: 1, Node: 1, NodeEpoch: 1},
		catalog.CommitStreamObjects{Stream: 12, Epoch: 1, Objects: objects(12, 0, 5, t0.Add(-80*time.Hour), t0.Add(-72*time.Hour))},
		catalog.LeadBucket{Bucket: 14, Node: 1, CoordinatorEpoch: 1},
		catalog.OpenStream{Stream: 14, Epoch: 1, Node: 1, NodeEpoch: 1},
		catalog.CommitStreamObjects{Stream: 14, Epoch: 1, Objects: objects(14, 0, 5, t0.Add(-80*time.Hour), t0.Add(-time.Hour))},
	)
	got := ""
	for _, d := range PartitionDrops(v, t0) {
		got += fmt.Sprintf("%d/%d ", d.Table, d.Partition)
	}
	if want := "1/2 10/11 "; got != want {
		t.Fatalf("expired partitions: %s, want %s", got, want)
	}
}

func TestPartitionEnd(t *testing.T) {
	for _, c := range []struct {
		typ, value string
		want       time.Time
		ok         bool
	}{
		{"date", "2026-02-28", time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), true},
		{"timestamp", "2026-02-28 10:30:00", time.Date(2026, 2, 28, 10, 30, 0, 0, time.UTC), true},
		{"timestamptz", "2026-02-28 10:30:00+02", time.Date(2026, 2, 28, 8, 30, 0, 0, time.UTC), true},
		{"date", "yesterday", time.Time{}, false},
		{"text", "2026-02-28", time.Time{}, false},
	} {
		got, ok := partitionEnd(c.typ, c.value)
		if ok != c.ok || (ok && !got.Equal(c.want)) {
			t.Errorf("partitionEnd(%s, %q) = %v, %v; want %v, %v", c.typ, c.value, got, ok, c.want, c.ok)
		}
	}
}

func TestRetiredCloses(t *testing.T) {
	v := applyAll(t,
		catalog.RegisterNode{Node: 1}, catalog.RegisterNode{Node: 2}, catalog.RegisterCoordinator{Node: 1, NodeEpoch: 1},
		table("a", 2), // table 1, buckets 2, 3
		catalog.LeadBucket{Bucket: 2, Node: 1, CoordinatorEpoch: 1},
		catalog.LeadBucket{Bucket: 3, Node: 2, CoordinatorEpoch: 1},
		catalog.OpenStream{Stream: 2, Epoch: 1, Node: 1, NodeEpoch: 1},
		catalog.OpenStream{Stream: 3, Epoch: 1, Node: 2, NodeEpoch: 1},
		catalog.DropTable{Table: 1},
	)
	live := func(n catalog.NodeID) bool { return n == 1 }
	got := RetiredCloses(v, live)
	if len(got) != 1 || got[0].Stream != 3 || got[0].Epoch != 1 {
		t.Fatalf("closes with node 2 dead: %+v, want stream 3 only", got)
	}
	// Node 1 restarts (new node epoch): its old incarnation will never
	// close stream 2.
	catalog.Apply(v, v.Index+1, catalog.RegisterNode{Node: 1, ExpectEpoch: 1})
	if got := RetiredCloses(v, live); len(got) != 2 {
		t.Fatalf("closes after node 1 re-registered: %+v, want streams 2 and 3", got)
	}
	for _, c := range RetiredCloses(v, live) {
		if out := catalog.Apply(v, v.Index+1, c); out.Err != nil {
			t.Fatal(out.Err)
		}
	}
	if len(v.Streams) != 0 {
		t.Fatalf("streams left after closing the retired ones: %v", v.Streams)
	}
}

// Primary-key streams are trimmed by default (no log_retention) up to the
// oldest retained KV snapshot, never without one, with tiering on never
// past the tiered offset, and with log_retention only by age as well.
func TestTrimsPrimaryKey(t *testing.T) {
	pkSpec := func(name string, opts map[string]string) catalog.CreateTable {
		return catalog.CreateTable{Spec: catalog.TableSpec{Name: name, Columns: []catalog.Column{{Name: "a", Type: "bigint"}},
			PrimaryKey: []string{"a"}, Buckets: 1, Options: opts}}
	}
	at := []time.Time{t0.Add(-3 * time.Hour), t0.Add(-2 * time.Hour), t0.Add(-30 * time.Minute), t0.Add(-10 * time.Minute)}
	recs := []catalog.Record{
		catalog.RegisterNode{Node: 1}, catalog.RegisterCoordinator{Node: 1, NodeEpoch: 1},
		pkSpec("tiered", nil),                                                      // table 1, bucket 2
		pkSpec("raw", map[string]string{"tiering": "off"}),                         // table 3, bucket 4
		pkSpec("aged", map[string]string{"tiering": "off", "log_retention": "1h"}), // table 5, bucket 6
	}
	for _, b := range []catalog.BucketID{2, 4, 6} {
		recs = append(recs,
			catalog.LeadBucket{Bucket: b, Node: 1, CoordinatorEpoch: 1},
			catalog.OpenStream{Stream: catalog.StreamID(b), Epoch: 1, Node: 1, NodeEpoch: 1},
			catalog.CommitStreamObjects{Stream: catalog.StreamID(b), Epoch: 1, Objects: objects(catalog.StreamID(b), 0, 10, at...)})
	}
	v := applyAll(t, recs...)
	snap := func(b catalog.BucketID, id, offset uint64) {
		t.Helper()
		r := catalog.CommitKVSnapshot{Bucket: b, LeaderEpoch: 1, SnapshotID: id, LogOffset: offset, Manifest: fmt.Sprintf("kv/%d/%d", b, id)}
		if out := catalog.Apply(v, v.Index+1, r); out.Err != nil {
			t.Fatalf("%+v: %v", r, out.Err)
		}
	}
	apply := func(trims []catalog.TrimStream) {
		t.Helper()
		for _, tr := range trims {
			if out := catalog.Apply(v, v.Index+1, tr); out.Err != nil {
				t.Fatalf("the state machine rejected the plan's %+v: %v", tr, out.Err)
			}
		}
	}
	// No KV snapshot: the changelog is the state; nothing is trimmed.
	if got := describeTrims(Trims(v, t0, 1)); got != "" {
		t.Fatalf("without snapshots: %s, want nothing", got)
	}
	snap(2, 1, 25)
	snap(2, 2, 35)
	snap(4, 1, 35)
	snap(4, 2, 38)
	snap(6, 1, 35)
	snap(6, 2, 38)
	// Bucket 2 is not tiered yet; bucket 4 trims to 30 (the boundary at or
	// below its oldest snapshot, 35); bucket 6 keeps the last hour (20).
	if got, want := describeTrims(Trims(v, t0, 1)), "4→30@1 6→20@1 "; got != want {
		t.Fatalf("with snapshots: %s, want %s", got, want)
	}
	// Tiered to 15, bucket 2 trims to 10; tiered to 40, its oldest snapshot
	// (25) bounds it to 20.
	catalog.Apply(v, v.Index+1, catalog.CommitTieringRound{Table: 1, CoordinatorEpoch: 1, Offsets: map[catalog.BucketID]uint64{2: 15}, LakeSequence: 1, At: t0})
	if got, want := describeTrims(Trims(v, t0, 1)), "2→10@1 4→30@1 6→20@1 "; got != want {
		t.Fatalf("tiered to 15: %s, want %s", got, want)
	}
	catalog.Apply(v, v.Index+1, catalog.CommitTieringRound{Table: 1, CoordinatorEpoch: 1, Offsets: map[catalog.BucketID]uint64{2: 40}, LakeSequence: 2, At: t0})
	trims := Trims(v, t0, 1)
	if got, want := describeTrims(trims), "2→20@1 4→30@1 6→20@1 "; got != want {
		t.Fatalf("tiered to 40: %s, want %s", got, want)
	}
	apply(trims)
	if got := describeTrims(Trims(v, t0, 1)); got != "" {
		t.Fatalf("after applying the plan: %s", got)
	}
	// An hour later bucket 6's objects up to 30 are old enough.
	if got, want := describeTrims(Trims(v, t0.Add(time.Hour), 1)), "6→30@1 "; got != want {
		t.Fatalf("an hour later: %s, want %s", got, want)
	}
	// New snapshots push the oldest out of retention and the bound moves up:
	// bucket 4's snapshots at 40 allow a trim to its committed end.
	snap(4, 3, 40)
	snap(4, 4, 40)
	trims = Trims(v, t0, 1)
	if got, want := describeTrims(trims), "4→40@1 "; got != want {
		t.Fatalf("after new snapshots: %s, want %s", got, want)
	}
	apply(trims)
}

// A table whose partitions expire by their last write keeps each stream's
// newest object through trims (log_retention, or a primary-key table's
// snapshot rule): its write time is what dates the partition, and a
// partition whose stream was trimmed empty would never expire.
func TestTrimsKeepsPartitionLastWrite(t *testing.T) {
	spec := func(name string, pk bool, opts map[string]string) catalog.CreateTable {
		s := catalog.TableSpec{Name: name, Columns: []catalog.Column{{Name: "p", Type: "text"}, {Name: "a", Type: "bigint"}},
			PartitionBy: "p", Buckets: 1, Options: opts}
		if pk {
			s.PrimaryKey = []string{"p", "a"}
		}
		return catalog.CreateTable{Spec: s}
	}
	at := []time.Time{t0.Add(-80 * time.Hour), t0.Add(-72 * time.Hour), t0.Add(-60 * time.Hour)}
	recs := []catalog.Record{
		catalog.RegisterNode{Node: 1}, catalog.RegisterCoordinator{Node: 1, NodeEpoch: 1},
		spec("logs", false, map[string]string{"tiering": "off", "log_retention": "1h", "partition_retention": "48h"}), // table 1
		catalog.CreatePartition{Table: 1, Value: "eu"},                                                                // partition 2, bucket 3
		spec("kv", true, map[string]string{"tiering": "off", "partition_retention": "48h"}),                           // table 4
		catalog.CreatePartition{Table: 4, Value: "eu"},                                                                // partition 5, bucket 6
	}
	for _, b := range []catalog.BucketID{3, 6} {
		recs = append(recs,
			catalog.LeadBucket{Bucket: b, Node: 1, CoordinatorEpoch: 1},
			catalog.OpenStream{Stream: catalog.StreamID(b), Epoch: 1, Node: 1, NodeEpoch: 1},
			catalog.CommitStreamObjects{Stream: catalog.StreamID(b), Epoch: 1, Objects: objects(catalog.StreamID(b), 0, 10, at...)})
	}
	recs = append(recs,
		catalog.CommitKVSnapshot{Bucket: 6, LeaderEpoch: 1, SnapshotID: 1, LogOffset: 30, Manifest: "kv/6/1"},
		catalog.CommitKVSnapshot{Bucket: 6, LeaderEpoch: 1, SnapshotID: 2, LogOffset: 30, Manifest: "kv/6/2"})
	v := applyAll(t, recs...)
	trims := Trims(v, t0, 1)
	if got, want := describeTrims(trims), "3→20@1 6→20@1 "; got != want {
		t.Fatalf("trims: %s, want %s (the newest object stays)", got, want)
	}
	for _, tr := range trims {
		if out := catalog.Apply(v, v.Index+1, tr); out.Err != nil {
			t.Fatal(out.Err)
		}
	}
	got := ""
	for _, d := range PartitionDrops(v, t0) {
		got += fmt.Sprintf("%d/%d ", d.Table, d.Partition)
	}
	if want := "1/2 4/5 "; got != want {
		t.Fatalf("expired partitions after the trims: %s, want %s", got, want)
	}
}

func TestTrimPoint(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	st := &catalog.Stream{Start: 10, End: 40, Objects: []catalog.StreamObject{
		{Key: "a", Start: 10, End: 20, At: t0.Add(1 * time.Minute)},
		{Key: "b", Start: 20, End: 30, At: t0.Add(2 * time.Minute)},
		{Key: "c", Start: 30, End: 40, At: t0.Add(3 * time.Minute)},
	}}
	for _, c := range []struct {
		limit     uint64
		olderThan time.Time
		want      uint64
	}{
		{40, time.Time{}, 40},               // no age condition: up to the limit
		{39, time.Time{}, 30},               // rounded down to a boundary
		{15, time.Time{}, 10},               // nothing below the limit
		{40, t0.Add(2 * time.Minute), 20},   // "b" is not older than the cutoff
		{40, t0.Add(2*time.Minute + 1), 30}, // "b" is
		{25, t0.Add(time.Hour), 20},         // the limit wins over age
		{40, t0, 10},                        // nothing old enough
	} {
		if got := TrimPoint(st, c.limit, c.olderThan); got != c.want {
			t.Errorf("TrimPoint(limit %d, older than %v) = %d, want %d", c.limit, c.olderThan, got, c.want)
		}
	}
	// An object of unknown age stops an age-based trim.
	st.Objects[1].At = time.Time{}
	if got := TrimPoint(st, 40, t0.Add(time.Hour)); got != 20 {
		t.Errorf("with an object of unknown age: %d, want 20", got)
	}
	if got := TrimPoint(&catalog.Stream{Start: 5, End: 5}, 100, time.Time{}); got != 5 {
		t.Errorf("empty stream: %d, want 5", got)
	}
}
