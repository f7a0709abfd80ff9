package catalog_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minkdb/mink/auth"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/catalog/catalogtest"

	"github.com/cockroachdb/datadriven"
)

// TestStateMachine runs the scripts in testdata/statemachine. Commands:
//
//	apply
//	<one record per line, in the syntax of catalogtest.ParseRecord>
//	----
//	<index>: ok [epoch=… table=… partition=… buckets=[…] end=… start=… role=…]
//	<index>: rejected <sentinel>: <message>
//
//	view
//	----
//	<a compact dump of the view, see catalogtest.DumpView>
//
// Every record is also applied, through an EncodeRecord/DecodeRecord round
// trip, to a second view that is itself round-tripped through
// EncodeView/DecodeView; both must agree. After every record the harness
// checks the view's invariants and that a rejection changed nothing but
// View.Index. Run with -rewrite to update the expected output.
func TestStateMachine(t *testing.T) {
	datadriven.Walk(t, "testdata/statemachine", func(t *testing.T, path string) {
		v := catalog.NewView()
		shadow := catalog.NewView()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "apply":
				var out strings.Builder
				for _, line := range strings.Split(d.Input, "\n") {
					line = strings.TrimSpace(line)
					if line == "" || strings.HasPrefix(line, "#") {
						continue
					}
					rec, err := catalogtest.ParseRecord(line)
					if err != nil {
						d.Fatalf(t, "%s: %v", line, err)
					}
					o := applyChecked(t, v, rec)
					fmt.Fprintf(&out, "%d: %s\n", o.Index, formatOutcome(t, rec, o))

					data, err := catalog.EncodeRecord(rec)
					if err != nil {
						d.Fatalf(t, "%s: encode: %v", line, err)
					}
					decoded, err := catalog.DecodeRecord(data)
					if err != nil {
						d.Fatalf(t, "%s: decode: %v", line, err)
					}
					shadow = roundTripView(t, shadow)
					so := applyChecked(t, shadow, decoded)
					if got, want := formatOutcome(t, decoded, so), formatOutcome(t, rec, o); got != want {
						d.Fatalf(t, "%s: decoded record applied as %q, the record as %q", line, got, want)
					}
				}
				if !bytes.Equal(mustEncodeView(t, v), mustEncodeView(t, shadow)) {
					d.Fatalf(t, "the view and its round-tripped shadow differ:\n%s\n%s", catalogtest.DumpView(v), catalogtest.DumpView(shadow))
				}
				return out.String()
			case "view":
				return catalogtest.DumpView(v)
			default:
				d.Fatalf(t, "unknown command %q", d.Cmd)
				return ""
			}
		})
	})
}

// applyChecked applies rec at the next index and checks what must hold after
// every record: the invariants, and an unchanged view after a rejection.
func applyChecked(t testing.TB, v *catalog.View, rec catalog.Record) catalog.Outcome {
	t.Helper()
	before := mustEncodeView(t, v)
	o := catalog.Apply(v, v.Index+1, rec)
	if o.Index != v.Index {
		t.Fatalf("outcome index %d, view index %d", o.Index, v.Index)
	}
	if err := catalog.CheckInvariants(v); err != nil {
		t.Fatalf("after %T %+v (outcome %+v): %v\n%s", rec, rec, o, err, catalogtest.DumpView(v))
	}
	if o.Err != nil {
		v.Index--
		after := mustEncodeView(t, v)
		v.Index++
		if !bytes.Equal(before, after) {
			t.Fatalf("rejected %T %+v (%v) changed the view:\nbefore %s\nafter  %s", rec, rec, o.Err, before, after)
		}
	}
	return o
}

func mustEncodeView(t testing.TB, v *catalog.View) []byte {
	t.Helper()
	data, err := catalog.EncodeView(v)
	if err != nil {
		t.Fatalf("encode view: %v", err)
	}
	return data
}

// roundTripView returns DecodeView(EncodeView(v)) after checking that it
// equals v.
func roundTripView(t testing.TB, v *catalog.View) *catalog.View {
	t.Helper()
	data := mustEncodeView(t, v)
	decoded, err := catalog.DecodeView(data)
	if err != nil {
		t.Fatalf("decode view: %v\n%s", err, data)
	}
	if !reflect.DeepEqual(decoded, v) {
		t.Fatalf("view changed in an encoding round trip:\nbefore %s\nafter  %s", catalogtest.DumpView(v), catalogtest.DumpView(decoded))
	}
	if again := mustEncodeView(t, decoded); !bytes.Equal(again, data) {
		t.Fatalf("view encoding is not stable:\n%s\n%s", data, again)
	}
	return decoded
}

var sentinels = []struct {
	name string
	err  error
}{
	{"ErrStaleEpoch", catalog.ErrStaleEpoch},
	{"ErrFenced", catalog.ErrFenced},
	{"ErrHeldBy", catalog.ErrHeldBy},
	{"ErrExists", catalog.ErrExists},
	{"ErrNotFound", catalog.ErrNotFound},
	{"ErrGap", catalog.ErrGap},
	{"ErrInvalid", catalog.ErrInvalid},
	{"ErrSequenceExhausted", catalog.ErrSequenceExhausted},
	{"ErrInUse", catalog.ErrInUse},
}

// formatOutcome renders o for the scripts. It fails the test when a rejection
// does not wrap exactly one sentinel, when ErrHeldBy is not a *HeldByError
// naming the stream, or when an accepted outcome sets a field its kind does
// not return.
func formatOutcome(t testing.TB, rec catalog.Record, o catalog.Outcome) string {
	t.Helper()
	if o.Err != nil {
		if o.Epoch != 0 || o.Table != 0 || o.Partition != 0 || o.Buckets != nil || o.End != 0 || o.SequenceStart != 0 || o.Role != 0 {
			t.Fatalf("rejected outcome with results: %+v", o)
		}
		var names []string
		for _, s := range sentinels {
			if errors.Is(o.Err, s.err) {
				names = append(names, s.name)
			}
		}
		if len(names) != 1 {
			t.Fatalf("rejection %q wraps sentinels %v, want exactly one", o.Err, names)
		}
		if names[0] == "ErrHeldBy" {
			var held *catalog.HeldByError
			open, _ := rec.(catalog.OpenStream)
			if !errors.As(o.Err, &held) || held.Stream != open.Stream || held.Node == 0 || held.NodeEpoch == 0 || held.Epoch == 0 {
				t.Fatalf("ErrHeldBy rejection %q does not name the holder of stream %d", o.Err, open.Stream)
			}
		}
		return fmt.Sprintf("rejected %s: %v", names[0], o.Err)
	}
	s := "ok"
	want := catalog.Outcome{Index: o.Index}
	switch rec.Kind() {
	case catalog.KindRegisterNode, catalog.KindRegisterCoordinator, catalog.KindLeadBucket:
		s += fmt.Sprintf(" epoch=%d", o.Epoch)
		want.Epoch = o.Epoch
	case catalog.KindCreateTable:
		s += fmt.Sprintf(" table=%d", o.Table)
		want.Table = o.Table
		if o.Buckets != nil {
			s += " buckets=" + formatBucketIDs(o.Buckets)
			want.Buckets = o.Buckets
		}
	case catalog.KindCreateView:
		s += fmt.Sprintf(" view=%d", o.Table)
		want.Table = o.Table
	case catalog.KindCreateSchema:
		s += fmt.Sprintf(" schema=%d", o.Schema)
		want.Schema = o.Schema
	case catalog.KindTruncateTable:
		if o.Buckets != nil {
			s += " buckets=" + formatBucketIDs(o.Buckets)
			want.Buckets = o.Buckets
		}
	case catalog.KindCreatePartition:
		s += fmt.Sprintf(" partition=%d buckets=%s", o.Partition, formatBucketIDs(o.Buckets))
		want.Partition, want.Buckets = o.Partition, o.Buckets
	case catalog.KindOpenStream:
		s += fmt.Sprintf(" epoch=%d end=%d", o.Epoch, o.End)
		want.Epoch, want.End = o.Epoch, o.End
	case catalog.KindCommitStreamObjects:
		s += fmt.Sprintf(" end=%d", o.End)
		want.End = o.End
	case catalog.KindAllocateSequence:
		s += fmt.Sprintf(" start=%d", o.SequenceStart)
		want.SequenceStart = o.SequenceStart
	case catalog.KindCreateRole, catalog.KindAlterRole:
		s += fmt.Sprintf(" role=%d", o.Role)
		want.Role = o.Role
	}
	if !reflect.DeepEqual(o, want) {
		t.Fatalf("%v outcome %+v sets fields its kind does not return", rec.Kind(), o)
	}
	return s
}

// formatBucketIDs prints ids, a long run of consecutive ids as [first..last].
func formatBucketIDs(ids []catalog.BucketID) string {
	if n := len(ids); n > 8 && uint64(ids[n-1]-ids[0]) == uint64(n-1) && slices.IsSorted(ids) {
		return fmt.Sprintf("[%d..%d]", ids[0], ids[n-1])
	}
	return fmt.Sprint(ids)
}

var seedFlag = flag.Uint64("statemachine.seed", 0, "seed of the randomised state machine tests (0: pick one)")

func testSeed(t *testing.T) uint64 {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -statemachine.seed=%d)", seed, seed)
	return seed
}

// TestStateMachineDeterminism applies random histories twice: to one view as
// Go values, and to another as decoded records, that other view being
// replaced now and then by its Clone or by its decoded snapshot. Outcomes and
// views must be identical at every step, invariants must hold, and rejections
// must leave the view unchanged.
func TestStateMachineDeterminism(t *testing.T) {
	seed := testSeed(t)
	accepted := map[catalog.Kind]int{}
	rejected := map[catalog.Kind]int{}
	runs, steps := 25, 600
	if testing.Short() {
		runs = 5
	}
	for run := range runs {
		rng := rand.New(rand.NewPCG(seed, uint64(run)))
		a, b := catalog.NewView(), catalog.NewView()
		for range steps {
			rec := randomRecord(rng, a)
			oa := applyChecked(t, a, rec)

			// What cannot be encoded cannot be in the log; Apply must reject
			// it too, in case a record reaches it without an encoding.
			decoded := rec
			if data, err := catalog.EncodeRecord(rec); err != nil {
				if !errors.Is(err, catalog.ErrInvalid) || !errors.Is(oa.Err, catalog.ErrInvalid) {
					t.Fatalf("seed %d run %d: encode %+v: %v; apply: %v", seed, run, rec, err, oa.Err)
				}
			} else if decoded, err = catalog.DecodeRecord(data); err != nil {
				t.Fatalf("seed %d run %d: decode %+v: %v", seed, run, rec, err)
			}
			switch rng.IntN(10) {
			case 0:
				b = b.Clone()
			case 1:
				b = roundTripView(t, b)
			}
			ob := applyChecked(t, b, decoded)
			if fa, fb := fmt.Sprintf("%+v", oa), fmt.Sprintf("%+v", ob); fa != fb {
				t.Fatalf("seed %d run %d: %T %+v: outcome %s, from decoded record %s", seed, run, rec, rec, fa, fb)
			}
			if oa.Err == nil {
				accepted[rec.Kind()]++
			} else {
				rejected[rec.Kind()]++
			}
		}
		ea, eb := mustEncodeView(t, a), mustEncodeView(t, b)
		if !bytes.Equal(ea, eb) {
			t.Fatalf("seed %d run %d: views differ:\n%s\n%s", seed, run, ea, eb)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("seed %d run %d: views encode equal but differ:\n%#v\n%#v", seed, run, a, b)
		}
		roundTripView(t, a)
	}
	// Guard the generator: a history that never gets a record of some kind
	// accepted (or rejected) tests nothing about it.
	for k := catalog.KindRegisterNode; k <= catalog.MaxKnownKind; k++ {
		t.Logf("%-20v accepted %5d rejected %5d", k, accepted[k], rejected[k])
		if !testing.Short() && (accepted[k] == 0 || rejected[k] == 0) {
			t.Errorf("seed %d: %v accepted %d times, rejected %d times; the generator needs both", seed, k, accepted[k], rejected[k])
		}
	}
}

// randomRecord returns a record that is plausible for v: most are built from
// v's current state so that a good share are accepted, the rest are off by a
// little (a stale epoch, a gap, an unknown id).
func randomRecord(rng *rand.Rand, v *catalog.View) catalog.Record {
	likely := func() bool { return rng.IntN(8) != 0 }
	node := catalog.NodeID(1 + rng.IntN(4))
	nodeEpoch := func(n catalog.NodeID) uint64 {
		if cur := v.Nodes[n]; cur != nil && likely() {
			return cur.Epoch
		}
		return uint64(rng.IntN(4))
	}
	pickBucket := func() (catalog.BucketID, *catalog.Bucket) {
		ids := slices.Sorted(maps.Keys(v.Buckets))
		if len(ids) == 0 || !likely() {
			id := catalog.BucketID(rng.Uint64N(v.NextID + 2))
			return id, v.Buckets[id]
		}
		id := ids[rng.IntN(len(ids))]
		return id, v.Buckets[id]
	}
	pickTable := func() (catalog.TableID, *catalog.Table) {
		ids := slices.Sorted(maps.Keys(v.Tables))
		if len(ids) == 0 || !likely() {
			id := catalog.TableID(rng.Uint64N(v.NextID + 2))
			return id, v.Tables[id]
		}
		id := ids[rng.IntN(len(ids))]
		return id, v.Tables[id]
	}
	pickStream := func() (catalog.StreamID, *catalog.Stream) {
		ids := slices.Sorted(maps.Keys(v.Streams))
		if len(ids) == 0 || !likely() {
			id := catalog.StreamID(rng.Uint64N(v.NextID + 2))
			return id, v.Streams[id]
		}
		id := ids[rng.IntN(len(ids))]
		return id, v.Streams[id]
	}
	// pickRelation is mostly a view, sometimes a table or an unknown id.
	pickRelation := func() catalog.TableID {
		ids := slices.Sorted(maps.Keys(v.Views))
		if len(ids) == 0 || rng.IntN(4) == 0 {
			id, _ := pickTable()
			return id
		}
		return ids[rng.IntN(len(ids))]
	}
	coordEpoch := func() uint64 {
		if likely() {
			return v.Coordinator.Epoch
		}
		return uint64(rng.IntN(3))
	}
	pickRole := func() catalog.RoleID {
		ids := slices.Sorted(maps.Keys(v.Roles))
		if len(ids) == 0 || !likely() {
			return catalog.RoleID(rng.IntN(3)) + catalog.FirstRoleID - 1
		}
		return ids[rng.IntN(len(ids))]
	}
	// pickSchema is public half the time, else mostly an existing schema.
	pickSchema := func() catalog.SchemaID {
		ids := slices.Sorted(maps.Keys(v.Schemas))
		switch {
		case rng.IntN(2) == 0:
			return catalog.PublicSchema
		case len(ids) == 0 || !likely():
			return catalog.SchemaID(rng.Uint64N(v.NextID + 2))
		}
		return ids[rng.IntN(len(ids))]
	}
	schemaName := func() string {
		return []string{"s0", "s1", "s2", "s3", "public", "pg_x", "", "information_schema"}[rng.IntN(8)]
	}
	var rec catalog.Record
	switch catalog.Kind(1 + rng.IntN(int(catalog.MaxKnownKind))) {
	case catalog.KindCreateSchema:
		r := catalog.CreateSchema{Name: schemaName()}
		if rng.IntN(2) == 0 {
			r.Owner = pickRole()
		}
		rec = r
	case catalog.KindDropSchema:
		rec = catalog.DropSchema{Schema: pickSchema(), Cascade: rng.IntN(2) == 0}
	case catalog.KindRenameSchema:
		rec = catalog.RenameSchema{Schema: pickSchema(), Name: schemaName()}
	case catalog.KindSetRelationSchema:
		rec = catalog.SetRelationSchema{Relation: pickRelation(), Schema: pickSchema()}
	case catalog.KindRegisterNode:
		r := catalog.RegisterNode{Node: node, ExpectEpoch: nodeEpoch(node)}
		if rng.IntN(2) == 0 {
			r.Addrs = catalog.Addrs{PG: fmt.Sprintf("10.0.0.%d:5433", node), Flight: fmt.Sprintf("10.0.0.%d:8815", rng.IntN(9))}
		}
		rec = r
	case catalog.KindRegisterCoordinator:
		rec = catalog.RegisterCoordinator{Node: node, NodeEpoch: nodeEpoch(node), ExpectEpoch: coordEpoch()}
	case catalog.KindCreateTable:
		pool := []catalog.Column{{Name: "id", Type: "bigint", NotNull: true}, {Name: "v", Type: "text", Default: "'x'"},
			{Name: "dt", Type: "date"}, {Name: "n", Type: "numeric(12,2)"}, {Name: "s", Type: "smallint", Sequence: catalog.SequenceSerial}}
		if rng.IntN(3) == 0 {
			pool[0].Sequence = catalog.SequenceAlways
		}
		spec := catalog.TableSpec{Name: fmt.Sprintf("t%d", rng.IntN(6)), Buckets: rng.IntN(4), Schema: pickSchema()}
		for _, c := range pool {
			if c.Name == "id" || rng.IntN(2) == 0 {
				spec.Columns = append(spec.Columns, c)
			}
		}
		if rng.IntN(2) == 0 {
			spec.PrimaryKey = []string{"id"}
		}
		if rng.IntN(2) == 0 {
			spec.PartitionBy = "dt"
			if spec.PrimaryKey != nil && rng.IntN(4) != 0 {
				spec.PrimaryKey = append(spec.PrimaryKey, "dt")
			}
		}
		switch rng.IntN(12) {
		case 0:
			spec.Buckets = catalog.MaxBuckets + 1
		case 1:
			spec.Columns = append(spec.Columns, spec.Columns[0])
		case 2:
			spec.BucketKey = []string{"v"}
		case 3:
			spec.Options = map[string]string{"partition_retention": "7d"}
		case 4:
			spec.Columns[0].Name = "\xff"
		}
		r := catalog.CreateTable{Spec: spec}
		if rng.IntN(2) == 0 {
			r.Owner = pickRole()
		}
		rec = r
	case catalog.KindDropTable:
		if rng.IntN(3) == 0 { // drops are rare, or nothing would be left
			id, _ := pickTable()
			rec = catalog.DropTable{Table: id}
		} else {
			rec = catalog.DropTable{Table: catalog.TableID(v.NextID + 5)}
		}
	case catalog.KindCreatePartition:
		id, _ := pickTable()
		rec = catalog.CreatePartition{Table: id, Value: fmt.Sprintf("2025-01-%02d", 1+rng.IntN(4))}
	case catalog.KindDropPartition:
		id, t := pickTable()
		r := catalog.DropPartition{Table: id, Partition: catalog.PartitionID(rng.Uint64N(v.NextID + 1))}
		if t != nil && len(t.Partitions) > 0 && rng.IntN(3) == 0 {
			pids := slices.Sorted(maps.Keys(t.Partitions))
			r.Partition = pids[rng.IntN(len(pids))]
		}
		rec = r
	case catalog.KindLeadBucket:
		id, b := pickBucket()
		r := catalog.LeadBucket{Bucket: id, Node: node}
		if b != nil && b.Leader != 0 && rng.IntN(2) == 0 {
			r.Node = b.Leader
			r.ExpectLeaderEpoch = b.LeaderEpoch
			if !likely() {
				r.ExpectLeaderEpoch = uint64(rng.IntN(3))
			}
			r.NodeEpoch = nodeEpoch(r.Node)
		} else {
			r.CoordinatorEpoch = coordEpoch()
		}
		rec = r
	case catalog.KindOpenStream:
		id, b := pickBucket()
		r := catalog.OpenStream{Stream: catalog.StreamID(id), Node: node, Epoch: uint64(1 + rng.IntN(3))}
		if b != nil && likely() {
			r.Node, r.Epoch = b.Leader, b.LeaderEpoch
		}
		if s := v.Streams[r.Stream]; s != nil && rng.IntN(6) == 0 {
			r.Node, r.Epoch = s.Node, s.Epoch
		}
		r.NodeEpoch = nodeEpoch(r.Node)
		rec = r
	case catalog.KindCloseStream:
		id, s := pickStream()
		r := catalog.CloseStream{Stream: id, Epoch: uint64(rng.IntN(4))}
		if s != nil && likely() {
			r.Epoch = s.Epoch
		}
		rec = r
	case catalog.KindCommitStreamObjects:
		id, s := pickStream()
		r := catalog.CommitStreamObjects{Stream: id, Epoch: uint64(rng.IntN(4))}
		var start uint64
		if s != nil {
			start = s.End
			if likely() {
				r.Epoch = s.Epoch
			}
		}
		switch rng.IntN(10) {
		case 0:
			start += 1 + uint64(rng.IntN(3)) // a gap
		case 1:
			if s != nil && len(s.Objects) > 0 { // a retry of a commit
				r.Objects = slices.Clone(s.Objects[len(s.Objects)-1:])
			}
		}
		if r.Objects == nil {
			for range rng.IntN(4) {
				end := start + 1 + uint64(rng.IntN(20))
				r.Objects = append(r.Objects, catalog.StreamObject{Key: fmt.Sprintf("s%d/%d-%d", id, start, end), Start: start, End: end, Size: int64(end - start)})
				start = end
			}
		}
		rec = r
	case catalog.KindCommitWALTrim:
		r := catalog.CommitWALTrim{Node: node, NodeEpoch: uint64(1 + rng.IntN(3)), TrimSeq: uint64(rng.IntN(5))}
		if w := (catalog.WALID{Node: r.Node, Epoch: r.NodeEpoch}); likely() {
			r.TrimSeq = v.WALTrims[w] + uint64(rng.IntN(3))
		}
		r.By, r.ByEpoch = node, uint64(rng.IntN(3))
		if n := v.Nodes[node]; n != nil && likely() {
			r.ByEpoch = n.Epoch
			if likely() {
				r.NodeEpoch = 1 + uint64(rng.IntN(int(n.Epoch)))
			}
		}
		rec = r
	case catalog.KindCommitKVSnapshot:
		id, b := pickBucket()
		r := catalog.CommitKVSnapshot{Bucket: id, LeaderEpoch: uint64(rng.IntN(3)), SnapshotID: uint64(rng.IntN(8)), LogOffset: uint64(rng.IntN(50))}
		if b != nil && likely() {
			r.LeaderEpoch = b.LeaderEpoch
			if n := len(b.Snapshots); n > 0 {
				r.LogOffset = b.Snapshots[n-1].LogOffset + uint64(rng.IntN(10))
				r.SnapshotID = b.Snapshots[n-1].ID + uint64(rng.IntN(3))
			}
		}
		r.Manifest = fmt.Sprintf("kv/%d/%d/%d", r.Bucket, r.SnapshotID, r.LogOffset%2)
		rec = r
	case catalog.KindCommitTieringRound:
		id, t := pickTable()
		r := catalog.CommitTieringRound{Table: id, CoordinatorEpoch: coordEpoch(), Offsets: map[catalog.BucketID]uint64{},
			At: time.Unix(1700000000+int64(rng.IntN(1000)), 0).In(time.FixedZone("x", 3600))}
		if t != nil {
			r.LakeSnapshotID = rng.Int64N(3) - 1
			r.LakeSequence = t.Tiering.LakeSequence + uint64(rng.IntN(3))
			for _, bid := range v.BucketsOf(id) {
				if rng.IntN(2) == 0 {
					r.Offsets[bid] = t.Tiering.Offsets[bid] + uint64(rng.IntN(10))
					if !likely() {
						r.Offsets[bid] = uint64(rng.IntN(5))
					}
				}
			}
		}
		if rng.IntN(10) == 0 {
			r.Offsets[catalog.BucketID(rng.Uint64N(v.NextID+2))] = 1
		}
		rec = r
	case catalog.KindAllocateSequence:
		id, t := pickTable()
		r := catalog.AllocateSequence{Table: id, Column: "id", Count: uint64(1 + rng.IntN(20000))}
		if t != nil {
			r.Epoch = t.SequenceEpoch
			if !likely() {
				r.Epoch++
			}
		}
		if rng.IntN(2) == 0 {
			r.Column = "s" // smallint: exhausted after a few
		}
		if !likely() {
			r.Column = "v"
		}
		if t != nil && rng.IntN(10) == 0 {
			r.Count = 0
		}
		rec = r
	case catalog.KindSetColumnDefault:
		id, _ := pickTable()
		r := catalog.SetColumnDefault{Table: id, Column: "v", Default: fmt.Sprintf("'%d'", rng.IntN(10))}
		if rng.IntN(3) == 0 {
			r.Default = ""
		}
		if !likely() {
			r.Column = "nosuch"
		}
		rec = r
	case catalog.KindTruncateTable:
		id, _ := pickTable()
		rec = catalog.TruncateTable{Table: id, RestartSequences: rng.IntN(2) == 0}
	case catalog.KindAddColumn:
		id, t := pickTable()
		r := catalog.AddColumn{Table: id, Column: catalog.Column{Name: fmt.Sprintf("c%d", rng.IntN(4)), Type: "integer"}}
		if t != nil && rng.IntN(2) == 0 {
			missing := fmt.Sprint(rng.IntN(100))
			r.Column.Missing = &missing
		}
		if !likely() {
			r.Column.Name = "id" // every generated table has it
		}
		rec = r
	case catalog.KindTrimStream:
		id, s := pickStream()
		r := catalog.TrimStream{Stream: id, CoordinatorEpoch: coordEpoch(), Start: uint64(rng.IntN(30))}
		if s != nil && likely() {
			r.Start = s.End
			if len(s.Objects) > 0 && rng.IntN(2) == 0 {
				r.Start = s.Objects[rng.IntN(len(s.Objects))].Start
			}
		}
		rec = r
	case catalog.KindCommitGroupOffsets:
		r := catalog.CommitGroupOffsets{Group: fmt.Sprintf("g%d", rng.IntN(3)), CoordinatorEpoch: coordEpoch()}
		for range 1 + rng.IntN(3) {
			o := catalog.GroupOffset{Topic: fmt.Sprintf("t%d", rng.IntN(6)), Partition: int32(rng.IntN(5)),
				Offset: rng.Int64N(100), LeaderEpoch: int32(rng.IntN(3)) - 1}
			var topics []*catalog.Table
			for _, id := range slices.Sorted(maps.Keys(v.Tables)) {
				if t := v.Tables[id]; len(t.Spec.PrimaryKey) == 0 && catalog.TopicPartitions(t) > 0 {
					topics = append(topics, t)
				}
			}
			if len(topics) > 0 && likely() {
				t := topics[rng.IntN(len(topics))]
				o.Topic = t.Spec.Name
				if n := catalog.TopicPartitions(t); n > 0 && likely() {
					o.Partition = int32(rng.IntN(n))
				}
			}
			switch rng.IntN(20) {
			case 0:
				o.Offset = -1
			case 1:
				o.Metadata = strings.Repeat("m", catalog.MaxGroupOffsetMetadata+1)
			case 2:
				o.Metadata = "meta"
			}
			r.Offsets = append(r.Offsets, o)
		}
		if rng.IntN(20) == 0 {
			r.Group = ""
		}
		rec = r
	case catalog.KindDeleteGroupOffsets:
		r := catalog.DeleteGroupOffsets{Group: fmt.Sprintf("g%d", rng.IntN(3)), CoordinatorEpoch: coordEpoch(), All: rng.IntN(4) == 0}
		if g := v.Groups[r.Group]; g != nil && (!r.All || rng.IntN(10) == 0) {
			for _, topic := range slices.Sorted(maps.Keys(g.Offsets)) {
				for _, p := range slices.Sorted(maps.Keys(g.Offsets[topic])) {
					if rng.IntN(2) == 0 {
						r.Partitions = append(r.Partitions, catalog.GroupPartition{Topic: topic, Partition: p})
					}
				}
			}
		}
		if !r.All && rng.IntN(4) == 0 {
			r.Partitions = append(r.Partitions, catalog.GroupPartition{Topic: "t9", Partition: 1})
		}
		rec = r
	case catalog.KindCompactStreamObjects:
		id, s := pickStream()
		r := catalog.CompactStreamObjects{Stream: id, Epoch: uint64(rng.IntN(4))}
		if s != nil && len(s.Objects) >= 2 {
			if likely() {
				r.Epoch = s.Epoch
			}
			i := rng.IntN(len(s.Objects) - 1)
			n := 2 + rng.IntN(len(s.Objects)-i-1)
			r.Replaces = append(r.Replaces, s.Objects[i:i+n]...)
			if !likely() && len(r.Replaces) > 2 {
				r.Replaces = r.Replaces[1:]
				r.Replaces[0].Start++
			}
			r.With = catalog.StreamObject{Key: fmt.Sprintf("c%d/%d", id, rng.IntN(1000)), Start: s.Objects[i].Start,
				End: s.Objects[i+n-1].End, Size: 7}
		}
		rec = r
	case catalog.KindCreateRole:
		r := catalog.CreateRole{Name: fmt.Sprintf("r%d", rng.IntN(6)), Login: rng.IntN(2) == 0, Superuser: rng.IntN(4) == 0}
		switch rng.IntN(8) {
		case 0:
			r.Name = []string{"", "public", "pg_x"}[rng.IntN(3)]
		case 1:
			r.Verifier = "not a verifier"
		case 2, 3:
			r.Verifier = testVerifier
		}
		rec = r
	case catalog.KindAlterRole:
		r := catalog.AlterRole{Role: pickRole()}
		switch rng.IntN(5) {
		case 0:
			r.Name = fmt.Sprintf("r%d", rng.IntN(8))
		case 1:
			b := rng.IntN(2) == 0
			r.Login = &b
		case 2:
			b := rng.IntN(2) == 0
			r.Superuser = &b
		case 3:
			pw := []string{"", testVerifier, "bad"}[rng.IntN(3)]
			r.Verifier = &pw
		}
		rec = r
	case catalog.KindDropRole:
		rec = catalog.DropRole{Role: pickRole()}
	case catalog.KindGrantRole:
		rec = catalog.GrantRole{Role: pickRole(), Member: pickRole(), Revoke: rng.IntN(3) == 0}
	case catalog.KindGrantTable:
		r := catalog.GrantTable{Grantee: pickRole(), Privileges: catalog.Privileges(rng.IntN(int(catalog.PrivAll) + 2)), Revoke: rng.IntN(3) == 0}
		if rng.IntN(4) == 0 {
			r.Grantee = catalog.Public
		}
		for range rng.IntN(3) {
			id, _ := pickTable()
			if rng.IntN(3) == 0 {
				id = pickRelation()
			}
			r.Tables = append(r.Tables, id)
		}
		rec = r
	case catalog.KindSetTableOwner:
		id, _ := pickTable()
		rec = catalog.SetTableOwner{Table: id, Owner: pickRole()}
	case catalog.KindRenameTable:
		id, _ := pickTable()
		rec = catalog.RenameTable{Table: id, Name: fmt.Sprintf("t%d", rng.IntN(6))}
	case catalog.KindCreateView:
		// Names collide with tables' (t%d) and with other views'.
		spec := catalog.ViewSpec{Name: fmt.Sprintf("%s%d", []string{"t", "v", "v"}[rng.IntN(3)], rng.IntN(6)), Query: "select 1", Schema: pickSchema()}
		for i := range 1 + rng.IntN(3) {
			spec.Columns = append(spec.Columns, catalog.ViewColumn{Name: fmt.Sprintf("c%d", i), Type: []string{"int", "text"}[rng.IntN(2)]})
		}
		for range rng.IntN(3) {
			id := pickRelation()
			spec.Relations = append(spec.Relations, catalog.ViewRelation{Name: fmt.Sprintf("r%d", id), ID: id})
		}
		switch rng.IntN(10) {
		case 0:
			spec.Query = ""
		case 1:
			spec.Columns = append(spec.Columns, spec.Columns[0])
		}
		r := catalog.CreateView{Spec: spec, Replace: rng.IntN(2) == 0}
		if rng.IntN(2) == 0 {
			r.Owner = pickRole()
		}
		rec = r
	case catalog.KindDropView:
		var r catalog.DropView
		for range rng.IntN(3) {
			r.Views = append(r.Views, pickRelation())
		}
		rec = r
	case catalog.KindRenameColumn:
		id, _ := pickTable()
		names := []string{"id", "v", "dt", "x", ""}
		rec = catalog.RenameColumn{Table: id, From: names[rng.IntN(4)], To: names[rng.IntN(5)]}
	case catalog.KindSetColumnNotNull:
		id, _ := pickTable()
		rec = catalog.SetColumnNotNull{Table: id, Column: []string{"id", "v", "dt", "x"}[rng.IntN(4)], NotNull: rng.IntN(2) == 0}
	case catalog.KindSetColumnType:
		id, _ := pickTable()
		rec = catalog.SetColumnType{Table: id, Column: []string{"id", "v", "dt", "x"}[rng.IntN(4)], Type: []string{"text", "varchar(9)", ""}[rng.IntN(3)]}
	case catalog.KindDropColumn:
		id, _ := pickTable()
		rec = catalog.DropColumn{Table: id, Column: []string{"id", "v", "dt", "x", "c1"}[rng.IntN(5)]}
	case catalog.KindSetSequence:
		id, _ := pickTable()
		rec = catalog.SetSequence{Table: id, Column: []string{"id", "v", "s"}[rng.IntN(3)], Last: []int64{0, 1, 7, -1, 1 << 40}[rng.IntN(5)]}
	case catalog.KindRestoreColumn:
		id, _ := pickTable()
		rec = catalog.RestoreColumn{Table: id, Position: rng.IntN(4)}
	case catalog.KindRenameView:
		rec = catalog.RenameView{View: pickRelation(), Name: fmt.Sprintf("%s%d", []string{"t", "v"}[rng.IntN(2)], rng.IntN(6))}
	case catalog.KindSetClusterKey:
		rec = catalog.SetClusterKey{Key: bytes.Repeat([]byte{byte(rng.IntN(2))}, []int{32, 32, 32, 5}[rng.IntN(4)])}
	}
	if rng.IntN(10) == 0 {
		// Apply and EncodeRecord take a pointer to a record too.
		p := reflect.New(reflect.TypeOf(rec))
		p.Elem().Set(reflect.ValueOf(rec))
		rec = p.Interface().(catalog.Record)
	}
	return rec
}

// TestStateMachineCloneIsDeep checks that a clone shares no pointer, map or
// slice storage with its original, that it is equal to it, and that applying
// records to one does not change the other.
// testVerifier is a valid SCRAM verifier for the generated records.
var testVerifier = func() string {
	v, err := auth.NewVerifier("pw")
	if err != nil {
		panic(err)
	}
	return v.String()
}()

func TestStateMachineCloneIsDeep(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	v := catalog.NewView()
	// Apply random records until every kind of nested storage is in use.
	rich := func() bool {
		var partitions, tiering, snapshots, objects bool
		groups := len(v.Groups) > 0
		for _, t := range v.Tables {
			partitions = partitions || len(t.Partitions) > 0
			tiering = tiering || len(t.Tiering.Offsets) > 0
		}
		for _, b := range v.Buckets {
			snapshots = snapshots || len(b.Snapshots) > 0
		}
		for _, s := range v.Streams {
			objects = objects || len(s.Objects) > 0
		}
		var viewACL, viewRelations bool
		for _, sv := range v.Views {
			viewACL = viewACL || len(sv.ACL) > 0
			viewRelations = viewRelations || len(sv.Spec.Relations) > 0
		}
		return partitions && tiering && snapshots && objects && groups && len(v.WALTrims) > 0 && viewACL && viewRelations
	}
	for v.Index < 300 || !rich() {
		if v.Index > 100_000 {
			t.Fatalf("seed %d: the random history built too little to test: %s", seed, catalogtest.DumpView(v))
		}
		catalog.Apply(v, v.Index+1, randomRecord(rng, v))
	}
	c := v.Clone()
	if !reflect.DeepEqual(c, v) {
		t.Fatalf("clone differs from its original")
	}
	orig := refsOf(reflect.ValueOf(v), "view", map[uintptr]string{})
	shared := refsOf(reflect.ValueOf(c), "clone", map[uintptr]string{})
	for p, where := range shared {
		if o, ok := orig[p]; ok {
			t.Errorf("%s and %s share storage", where, o)
		}
	}

	before := mustEncodeView(t, v)
	for range 500 {
		catalog.Apply(c, c.Index+1, randomRecord(rng, c))
	}
	mutateAll(reflect.ValueOf(c))
	if after := mustEncodeView(t, v); !bytes.Equal(before, after) {
		t.Fatalf("seed %d: changing the clone changed the original", seed)
	}
}

// refsOf records the address of every pointer target, map and non-empty
// slice backing array reachable from rv.
func refsOf(rv reflect.Value, path string, refs map[uintptr]string) map[uintptr]string {
	switch rv.Kind() {
	case reflect.Pointer:
		if !rv.IsNil() {
			refs[rv.Pointer()] = path
			refsOf(rv.Elem(), path, refs)
		}
	case reflect.Map:
		if !rv.IsNil() {
			refs[rv.Pointer()] = path
			iter := rv.MapRange()
			for iter.Next() {
				refsOf(iter.Value(), fmt.Sprintf("%s[%v]", path, iter.Key()), refs)
			}
		}
	case reflect.Slice:
		if rv.Len() > 0 {
			refs[rv.Pointer()] = path
		}
		for i := range rv.Len() {
			refsOf(rv.Index(i), fmt.Sprintf("%s[%d]", path, i), refs)
		}
	case reflect.Struct:
		if rv.Type() == reflect.TypeFor[time.Time]() {
			return refs
		}
		for i := range rv.NumField() {
			if rv.Type().Field(i).IsExported() {
				refsOf(rv.Field(i), path+"."+rv.Type().Field(i).Name, refs)
			}
		}
	}
	return refs
}

// mutateAll changes every scalar reachable from rv and adds an entry to every
// map.
func mutateAll(rv reflect.Value) {
	switch rv.Kind() {
	case reflect.Pointer:
		if !rv.IsNil() {
			mutateAll(rv.Elem())
		}
	case reflect.Map:
		if rv.IsNil() {
			return
		}
		for _, k := range rv.MapKeys() {
			val := reflect.New(rv.Type().Elem()).Elem()
			val.Set(rv.MapIndex(k))
			mutateAll(val)
			rv.SetMapIndex(k, val)
		}
		rv.SetMapIndex(reflect.New(rv.Type().Key()).Elem(), reflect.New(rv.Type().Elem()).Elem())
	case reflect.Slice:
		for i := range rv.Len() {
			mutateAll(rv.Index(i))
		}
	case reflect.Struct:
		if rv.Type() == reflect.TypeFor[time.Time]() {
			rv.Set(reflect.ValueOf(rv.Interface().(time.Time).Add(time.Hour)))
			return
		}
		for i := range rv.NumField() {
			if rv.Type().Field(i).IsExported() {
				mutateAll(rv.Field(i))
			}
		}
	case reflect.String:
		rv.SetString(rv.String() + "!")
	case reflect.Bool:
		rv.SetBool(!rv.Bool())
	case reflect.Int, reflect.Int32, reflect.Int64:
		rv.SetInt(rv.Int() + 1)
	case reflect.Uint32, reflect.Uint64:
		rv.SetUint(rv.Uint() + 1)
	}
}

// TestStateMachineApplyAssertions checks the panics that guard Apply's
// contract: records in log order, views from NewView.
func TestStateMachineApplyAssertions(t *testing.T) {
	for _, tc := range []struct {
		name  string
		view  *catalog.View
		index uint64
		want  string
	}{
		{"skips an index", catalog.NewView(), 2, "Apply(index 2) to a view at index 0"},
		{"repeats an index", catalog.NewView(), 0, "Apply(index 0) to a view at index 0"},
		{"zero view", &catalog.View{}, 1, "not made by NewView"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(fmt.Sprint(r), tc.want) {
					t.Fatalf("panic %v, want one containing %q", r, tc.want)
				}
			}()
			catalog.Apply(tc.view, tc.index, catalog.RegisterNode{Node: 1})
		})
	}
}

// TestStateMachineForeignRecords checks that records Apply cannot know are
// rejected as invalid, not applied and not a panic.
func TestStateMachineForeignRecords(t *testing.T) {
	v := catalog.NewView()
	for _, rec := range []catalog.Record{nil, (*catalog.RegisterNode)(nil), foreignRecord{}} {
		o := catalog.Apply(v, v.Index+1, rec)
		if !errors.Is(o.Err, catalog.ErrInvalid) {
			t.Errorf("Apply(%#v) = %+v, want ErrInvalid", rec, o)
		}
	}
	if v.Index != 3 || len(v.Nodes) != 0 {
		t.Fatalf("view after foreign records: %s", catalogtest.DumpView(v))
	}
}

type foreignRecord struct{}

func (foreignRecord) Kind() catalog.Kind { return catalog.KindRegisterNode }

// TestStateMachineRecordNotAliased checks that the view keeps no reference
// into an applied record: the proposer may reuse it.
func TestStateMachineRecordNotAliased(t *testing.T) {
	v := catalog.NewView()
	spec := catalog.TableSpec{Name: "t", Columns: []catalog.Column{{Name: "id", Type: "bigint"}}, PrimaryKey: []string{"id"},
		Options: map[string]string{"a": "b"}}
	objects := []catalog.StreamObject{{Key: "k", Start: 0, End: 5}}
	offsets := map[catalog.BucketID]uint64{2: 3}
	for _, rec := range []catalog.Record{
		catalog.RegisterNode{Node: 1}, catalog.RegisterCoordinator{Node: 1, NodeEpoch: 1}, catalog.CreateTable{Spec: spec},
		catalog.LeadBucket{Bucket: 2, Node: 1, CoordinatorEpoch: 1}, catalog.OpenStream{Stream: 2, Epoch: 1, Node: 1, NodeEpoch: 1},
		catalog.CommitStreamObjects{Stream: 2, Epoch: 1, Objects: objects},
		catalog.CommitTieringRound{Table: 1, CoordinatorEpoch: 1, Offsets: offsets, LakeSnapshotID: 1, LakeSequence: 1},
	} {
		if o := catalog.Apply(v, v.Index+1, rec); o.Err != nil {
			t.Fatalf("%T: %v", rec, o.Err)
		}
	}
	before := mustEncodeView(t, v)
	spec.Columns[0].Name, spec.PrimaryKey[0], spec.Options["a"] = "x", "x", "x"
	objects[0].Key = "x"
	offsets[2] = 99
	if after := mustEncodeView(t, v); !bytes.Equal(before, after) {
		t.Fatalf("changing applied records changed the view:\n%s\n%s", before, after)
	}
}
