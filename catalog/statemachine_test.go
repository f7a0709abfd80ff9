package catalog

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"github.com/minkdb/mink/auth"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// TestStateMachine runs the scripts in testdata/statemachine. Commands:
//
//	apply
//	<one record per line, in the syntax of parseRecord>
//	----
//	<index>: ok [epoch=… table=… partition=… buckets=[…] end=…]
//	<index>: rejected <sentinel>: <message>
//
//	view
//	----
//	<a compact dump of the view, see dumpView>
//
// Every record is also applied, through an EncodeRecord/DecodeRecord round
// trip, to a second view that is itself round-tripped through
// EncodeView/DecodeView; both must agree. After every record the harness
// checks the view's invariants and that a rejection changed nothing but
// View.Index. Run with -rewrite to update the expected output.
func TestStateMachine(t *testing.T) {
	datadriven.Walk(t, "testdata/statemachine", func(t *testing.T, path string) {
		v := NewView()
		shadow := NewView()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "apply":
				var out strings.Builder
				for _, line := range strings.Split(d.Input, "\n") {
					line = strings.TrimSpace(line)
					if line == "" || strings.HasPrefix(line, "#") {
						continue
					}
					rec, err := parseRecord(line)
					if err != nil {
						d.Fatalf(t, "%s: %v", line, err)
					}
					o := applyChecked(t, v, rec)
					fmt.Fprintf(&out, "%d: %s\n", o.Index, formatOutcome(t, rec, o))

					data, err := EncodeRecord(rec)
					if err != nil {
						d.Fatalf(t, "%s: encode: %v", line, err)
					}
					decoded, err := DecodeRecord(data)
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
					d.Fatalf(t, "the view and its round-tripped shadow differ:\n%s\n%s", dumpView(v), dumpView(shadow))
				}
				return out.String()
			case "view":
				return dumpView(v)
			default:
				d.Fatalf(t, "unknown command %q", d.Cmd)
				return ""
			}
		})
	})
}

// applyChecked applies rec at the next index and checks what must hold after
// every record: the invariants, and an unchanged view after a rejection.
func applyChecked(t testing.TB, v *View, rec Record) Outcome {
	t.Helper()
	before := mustEncodeView(t, v)
	o := Apply(v, v.Index+1, rec)
	if o.Index != v.Index {
		t.Fatalf("outcome index %d, view index %d", o.Index, v.Index)
	}
	if err := v.checkInvariants(); err != nil {
		t.Fatalf("after %T %+v (outcome %+v): %v\n%s", rec, rec, o, err, dumpView(v))
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

func mustEncodeView(t testing.TB, v *View) []byte {
	t.Helper()
	data, err := EncodeView(v)
	if err != nil {
		t.Fatalf("encode view: %v", err)
	}
	return data
}

// roundTripView returns DecodeView(EncodeView(v)) after checking that it
// equals v.
func roundTripView(t testing.TB, v *View) *View {
	t.Helper()
	data := mustEncodeView(t, v)
	decoded, err := DecodeView(data)
	if err != nil {
		t.Fatalf("decode view: %v\n%s", err, data)
	}
	if !reflect.DeepEqual(decoded, v) {
		t.Fatalf("view changed in an encoding round trip:\nbefore %s\nafter  %s", dumpView(v), dumpView(decoded))
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
	{"ErrStaleEpoch", ErrStaleEpoch},
	{"ErrFenced", ErrFenced},
	{"ErrHeldBy", ErrHeldBy},
	{"ErrExists", ErrExists},
	{"ErrNotFound", ErrNotFound},
	{"ErrGap", ErrGap},
	{"ErrInvalid", ErrInvalid},
}

// formatOutcome renders o for the scripts. It fails the test when a rejection
// does not wrap exactly one sentinel, when ErrHeldBy is not a *HeldByError
// naming the stream, or when an accepted outcome sets a field its kind does
// not return.
func formatOutcome(t testing.TB, rec Record, o Outcome) string {
	t.Helper()
	if o.Err != nil {
		if o.Epoch != 0 || o.Table != 0 || o.Partition != 0 || o.Buckets != nil || o.End != 0 {
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
			var held *HeldByError
			open, _ := rec.(OpenStream)
			if !errors.As(o.Err, &held) || held.Stream != open.Stream || held.Node == 0 || held.NodeEpoch == 0 || held.Epoch == 0 {
				t.Fatalf("ErrHeldBy rejection %q does not name the holder of stream %d", o.Err, open.Stream)
			}
		}
		return fmt.Sprintf("rejected %s: %v", names[0], o.Err)
	}
	s := "ok"
	want := Outcome{Index: o.Index}
	switch rec.Kind() {
	case KindRegisterNode, KindRegisterCoordinator, KindLeadBucket:
		s += fmt.Sprintf(" epoch=%d", o.Epoch)
		want.Epoch = o.Epoch
	case KindCreateTable:
		s += fmt.Sprintf(" table=%d", o.Table)
		want.Table = o.Table
		if o.Buckets != nil {
			s += " buckets=" + formatBucketIDs(o.Buckets)
			want.Buckets = o.Buckets
		}
	case KindTruncateTable:
		if o.Buckets != nil {
			s += " buckets=" + formatBucketIDs(o.Buckets)
			want.Buckets = o.Buckets
		}
	case KindCreatePartition:
		s += fmt.Sprintf(" partition=%d buckets=%s", o.Partition, formatBucketIDs(o.Buckets))
		want.Partition, want.Buckets = o.Partition, o.Buckets
	case KindOpenStream:
		s += fmt.Sprintf(" epoch=%d end=%d", o.Epoch, o.End)
		want.Epoch, want.End = o.Epoch, o.End
	case KindCommitStreamObjects:
		s += fmt.Sprintf(" end=%d", o.End)
		want.End = o.End
	}
	if !reflect.DeepEqual(o, want) {
		t.Fatalf("%v outcome %+v sets fields its kind does not return", rec.Kind(), o)
	}
	return s
}

// formatBucketIDs prints ids, a long run of consecutive ids as [first..last].
func formatBucketIDs(ids []BucketID) string {
	if n := len(ids); n > 8 && uint64(ids[n-1]-ids[0]) == uint64(n-1) && slices.IsSorted(ids) {
		return fmt.Sprintf("[%d..%d]", ids[0], ids[n-1])
	}
	return fmt.Sprint(ids)
}

// parseRecord parses one record in the script syntax:
//
//	register-node node=1 expect=0 [pg=… flight=… admin=…]
//	register-coordinator node=1 node-epoch=1 expect=0
//	create-table name=t cols=(id bigint not null, v text default 'x') [pk=(id)]
//	             [partition-by=dt] [buckets=2] [bucket-key=(id)] [opts=(k=v, …)]
//	drop-table table=1
//	create-partition table=1 value=2024-01-01
//	drop-partition table=1 partition=5
//	lead-bucket bucket=2 node=1 coord=1                      (coordinator form)
//	lead-bucket bucket=2 node=1 expect=1 node-epoch=1        (renewal form)
//	open-stream stream=2 epoch=1 node=1 node-epoch=1
//	close-stream stream=2 epoch=1
//	commit-stream-objects stream=2 epoch=1 objects=(0-10, key@10-20)
//	compact-stream-objects stream=2 epoch=1 replaces=(0-10, 10-15) with=c@0-15
//	commit-wal-trim node=1 node-epoch=1 seq=5 [by=1 by-epoch=1] (default: by the WAL's own node and epoch)
//	commit-kv-snapshot bucket=2 leader-epoch=1 id=1 offset=10 [manifest=m]
//	commit-tiering-round table=1 coord=1 offsets=(2:10, 3:20) lake=7 seq=1 [at=RFC3339]
//	trim-stream stream=2 start=10 coord=1
//	truncate-table table=1 [restart=true]
//	commit-group-offsets group=g coord=1 offsets=(events/0=5, events/1=7~2:meta)
//	delete-group-offsets group=g coord=1 [all=true] [partitions=(events/0, events/1)]
//
// A group offset without ~ has leader epoch -1; :text sets its metadata.
//
// An object without key@ gets the key "s<stream>/e<epoch>/<start>-<end>";
// a suffix ~M sets its time At to 2025-01-01T00:00Z plus M minutes (given in
// a +01:00 zone, which the state machine stores as UTC).
// parseObject parses [key@]start-end; without a key, the object gets the key
// "s<stream>/e<epoch>/<start>-<end>".
func parseObject(a *recordArgs, o string, stream StreamID, epoch uint64) StreamObject {
	o, minute, hasAt := strings.Cut(o, "~")
	key, rng, hasKey := strings.Cut(o, "@")
	if !hasKey {
		rng = key
	}
	start, end, _ := strings.Cut(rng, "-")
	so := StreamObject{Start: mustUint(a, start), End: mustUint(a, end)}
	if hasAt {
		so.At = time.Date(2025, 1, 1, 0, 0, 0, 0, time.FixedZone("x", 3600)).Add(time.Duration(mustUint(a, minute)) * time.Minute)
	}
	so.Size = int64(so.End-so.Start) * 100
	if !hasKey {
		key = fmt.Sprintf("s%d/e%d/%d-%d", stream, epoch, so.Start, so.End)
	}
	so.Key = key
	return so
}

func parseRecord(line string) (Record, error) {
	cmd, args, err := datadriven.ParseLine(line)
	if err != nil {
		return nil, err
	}
	a := &recordArgs{vals: map[string][]string{}}
	for _, arg := range args {
		if _, dup := a.vals[arg.Key]; dup {
			return nil, fmt.Errorf("argument %q given twice", arg.Key)
		}
		a.vals[arg.Key] = arg.Vals
	}
	var rec Record
	switch cmd {
	case "register-node":
		rec = RegisterNode{Node: NodeID(a.uint("node")), ExpectEpoch: a.uint("expect"),
			Addrs: Addrs{PG: a.str("pg"), Flight: a.str("flight"), Admin: a.str("admin")}}
	case "register-coordinator":
		rec = RegisterCoordinator{Node: NodeID(a.uint("node")), NodeEpoch: a.uint("node-epoch"), ExpectEpoch: a.uint("expect")}
	case "create-table":
		spec := TableSpec{Name: a.str("name"), PrimaryKey: a.list("pk"), PartitionBy: a.str("partition-by"),
			Buckets: int(a.int("buckets")), BucketKey: a.list("bucket-key")}
		for _, c := range a.list("cols") {
			col, err := parseColumn(c)
			if err != nil {
				return nil, err
			}
			spec.Columns = append(spec.Columns, col)
		}
		for _, kv := range a.list("opts") {
			k, v, _ := strings.Cut(kv, "=")
			if spec.Options == nil {
				spec.Options = map[string]string{}
			}
			spec.Options[k] = v
		}
		rec = CreateTable{Spec: spec}
	case "drop-table":
		rec = DropTable{Table: TableID(a.uint("table"))}
	case "create-partition":
		rec = CreatePartition{Table: TableID(a.uint("table")), Value: a.str("value")}
	case "drop-partition":
		rec = DropPartition{Table: TableID(a.uint("table")), Partition: PartitionID(a.uint("partition"))}
	case "lead-bucket":
		rec = LeadBucket{Bucket: BucketID(a.uint("bucket")), Node: NodeID(a.uint("node")), CoordinatorEpoch: a.uint("coord"),
			ExpectLeaderEpoch: a.uint("expect"), NodeEpoch: a.uint("node-epoch")}
	case "open-stream":
		rec = OpenStream{Stream: StreamID(a.uint("stream")), Epoch: a.uint("epoch"), Node: NodeID(a.uint("node")), NodeEpoch: a.uint("node-epoch")}
	case "close-stream":
		rec = CloseStream{Stream: StreamID(a.uint("stream")), Epoch: a.uint("epoch")}
	case "commit-stream-objects":
		r := CommitStreamObjects{Stream: StreamID(a.uint("stream")), Epoch: a.uint("epoch")}
		for _, o := range a.list("objects") {
			r.Objects = append(r.Objects, parseObject(a, o, r.Stream, r.Epoch))
		}
		rec = r
	case "compact-stream-objects":
		r := CompactStreamObjects{Stream: StreamID(a.uint("stream")), Epoch: a.uint("epoch")}
		for _, o := range a.list("replaces") {
			r.Replaces = append(r.Replaces, parseObject(a, o, r.Stream, r.Epoch))
		}
		r.With = parseObject(a, a.str("with"), r.Stream, r.Epoch)
		rec = r
	case "commit-wal-trim":
		r := CommitWALTrim{Node: NodeID(a.uint("node")), NodeEpoch: a.uint("node-epoch"), TrimSeq: a.uint("seq"),
			By: NodeID(a.uint("by")), ByEpoch: a.uint("by-epoch")}
		if _, ok := a.vals["by"]; !ok {
			r.By = r.Node
		}
		if _, ok := a.vals["by-epoch"]; !ok {
			r.ByEpoch = r.NodeEpoch
		}
		rec = r
	case "commit-kv-snapshot":
		r := CommitKVSnapshot{Bucket: BucketID(a.uint("bucket")), LeaderEpoch: a.uint("leader-epoch"),
			SnapshotID: a.uint("id"), LogOffset: a.uint("offset"), Manifest: a.str("manifest")}
		if _, ok := a.vals["manifest"]; !ok {
			r.Manifest = fmt.Sprintf("kv/b%d/snap-%d", r.Bucket, r.SnapshotID)
		}
		rec = r
	case "trim-stream":
		rec = TrimStream{Stream: StreamID(a.uint("stream")), Start: a.uint("start"), CoordinatorEpoch: a.uint("coord")}
	case "commit-tiering-round":
		r := CommitTieringRound{Table: TableID(a.uint("table")), CoordinatorEpoch: a.uint("coord"),
			LakeSnapshotID: a.int("lake"), LakeSequence: a.uint("seq"), At: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
		if at := a.str("at"); at != "" {
			if r.At, err = time.Parse(time.RFC3339Nano, at); err != nil {
				return nil, err
			}
		}
		for _, kv := range a.list("offsets") {
			b, off, _ := strings.Cut(kv, ":")
			if r.Offsets == nil {
				r.Offsets = map[BucketID]uint64{}
			}
			r.Offsets[BucketID(mustUint(a, b))] = mustUint(a, off)
		}
		rec = r
	case "truncate-table":
		rec = TruncateTable{Table: TableID(a.uint("table")), RestartSequences: a.str("restart") == "true"}
	case "commit-group-offsets":
		r := CommitGroupOffsets{Group: a.str("group"), CoordinatorEpoch: a.uint("coord")}
		for _, o := range a.list("offsets") {
			p, rest, _ := strings.Cut(o, "=")
			rest, meta, _ := strings.Cut(rest, ":")
			off, epoch, hasEpoch := strings.Cut(rest, "~")
			gp := parseGroupPartition(a, p)
			g := GroupOffset{Topic: gp.Topic, Partition: gp.Partition, Offset: mustInt(a, off), LeaderEpoch: -1, Metadata: meta}
			if hasEpoch {
				g.LeaderEpoch = int32(mustInt(a, epoch))
			}
			r.Offsets = append(r.Offsets, g)
		}
		rec = r
	case "delete-group-offsets":
		r := DeleteGroupOffsets{Group: a.str("group"), CoordinatorEpoch: a.uint("coord"), All: a.str("all") == "true"}
		for _, p := range a.list("partitions") {
			r.Partitions = append(r.Partitions, parseGroupPartition(a, p))
		}
		rec = r
	default:
		return nil, fmt.Errorf("unknown record %q", cmd)
	}
	if a.err != nil {
		return nil, a.err
	}
	for k := range a.vals {
		if !a.used[k] {
			return nil, fmt.Errorf("%s does not take argument %q", cmd, k)
		}
	}
	return rec, nil
}

// parseGroupPartition parses topic/partition.
func parseGroupPartition(a *recordArgs, s string) GroupPartition {
	topic, p, _ := strings.Cut(s, "/")
	return GroupPartition{Topic: topic, Partition: int32(mustInt(a, p))}
}

func mustInt(a *recordArgs, s string) int64 {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil && a.err == nil {
		a.err = err
	}
	return n
}

type recordArgs struct {
	vals map[string][]string
	used map[string]bool
	err  error
}

func (a *recordArgs) list(key string) []string {
	if a.used == nil {
		a.used = map[string]bool{}
	}
	a.used[key] = true
	return a.vals[key]
}

func (a *recordArgs) str(key string) string {
	vals := a.list(key)
	if len(vals) > 1 && a.err == nil {
		a.err = fmt.Errorf("argument %q takes one value, got %v", key, vals)
	}
	if len(vals) == 0 {
		return ""
	}
	return vals[0]
}

func (a *recordArgs) uint(key string) uint64 {
	if s := a.str(key); s != "" {
		return mustUint(a, s)
	}
	return 0
}

func (a *recordArgs) int(key string) int64 {
	s := a.str(key)
	if s == "" {
		return 0
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil && a.err == nil {
		a.err = err
	}
	return n
}

func mustUint(a *recordArgs, s string) uint64 {
	n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	if err != nil && a.err == nil {
		a.err = err
	}
	return n
}

// parseColumn parses "name type [not null] [default <literal>]".
func parseColumn(s string) (Column, error) {
	fields := strings.Fields(s)
	if len(fields) < 2 {
		return Column{}, fmt.Errorf("column %q: want name and type", s)
	}
	c := Column{Name: fields[0], Type: fields[1]}
	rest := fields[2:]
	if len(rest) >= 2 && rest[0] == "not" && rest[1] == "null" {
		c.NotNull = true
		rest = rest[2:]
	}
	if len(rest) >= 2 && rest[0] == "default" {
		c.Default = strings.Join(rest[1:], " ")
		rest = nil
	}
	if len(rest) > 0 {
		return Column{}, fmt.Errorf("column %q: cannot parse %v", s, rest)
	}
	if c.Name == `""` {
		c.Name = ""
	}
	return c, nil
}

// dumpView renders v compactly and deterministically, one entity per line.
func dumpView(v *View) string {
	var b strings.Builder
	fmt.Fprintf(&b, "index=%d next-id=%d coordinator=", v.Index, v.NextID)
	if v.Coordinator.Epoch == 0 {
		b.WriteString("none\n")
	} else {
		fmt.Fprintf(&b, "node %d epoch %d\n", v.Coordinator.Node, v.Coordinator.Epoch)
	}
	for _, id := range slices.Sorted(maps.Keys(v.Nodes)) {
		n := v.Nodes[id]
		fmt.Fprintf(&b, "node %d epoch=%d", n.ID, n.Epoch)
		for _, a := range []struct{ name, addr string }{{"pg", n.Addrs.PG}, {"flight", n.Addrs.Flight}, {"admin", n.Addrs.Admin}, {"kafka", n.Addrs.Kafka}} {
			if a.addr != "" {
				fmt.Fprintf(&b, " %s=%s", a.name, a.addr)
			}
		}
		b.WriteString("\n")
	}
	for _, id := range slices.Sorted(maps.Keys(v.Tables)) {
		t := v.Tables[id]
		fmt.Fprintf(&b, "table %d %q", t.ID, t.Spec.Name)
		var cols []string
		for _, c := range t.Spec.Columns {
			col := c.Name + " " + c.Type
			if c.NotNull {
				col += " not null"
			}
			if c.Default != "" {
				col += " default " + c.Default
			}
			cols = append(cols, col)
		}
		fmt.Fprintf(&b, " cols=(%s)", strings.Join(cols, ", "))
		if t.Spec.PrimaryKey != nil {
			fmt.Fprintf(&b, " pk=(%s)", strings.Join(t.Spec.PrimaryKey, ", "))
		}
		if t.Spec.PartitionBy != "" {
			fmt.Fprintf(&b, " partition-by=%s", t.Spec.PartitionBy)
		}
		fmt.Fprintf(&b, " buckets=%d", t.Spec.Buckets)
		if t.Spec.BucketKey != nil {
			fmt.Fprintf(&b, " bucket-key=(%s)", strings.Join(t.Spec.BucketKey, ", "))
		}
		for _, k := range slices.Sorted(maps.Keys(t.Spec.Options)) {
			fmt.Fprintf(&b, " %s=%s", k, t.Spec.Options[k])
		}
		if t.Buckets != nil {
			fmt.Fprintf(&b, " -> %v", t.Buckets)
		}
		b.WriteString("\n")
		for _, pid := range slices.Sorted(maps.Keys(t.Partitions)) {
			p := t.Partitions[pid]
			fmt.Fprintf(&b, "  partition %d %q -> %v\n", p.ID, p.Value, p.Buckets)
		}
		if ts := t.Tiering; ts.LakeSnapshotID != 0 || ts.Offsets != nil {
			fmt.Fprintf(&b, "  tiered lake-snapshot=%d seq=%d at=%s offsets=(", ts.LakeSnapshotID, ts.LakeSequence, ts.At.Format(time.RFC3339))
			for i, bid := range slices.Sorted(maps.Keys(ts.Offsets)) {
				if i > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, "%d:%d", bid, ts.Offsets[bid])
			}
			b.WriteString(")\n")
		}
	}
	for _, id := range slices.Sorted(maps.Keys(v.Buckets)) {
		bk := v.Buckets[id]
		fmt.Fprintf(&b, "bucket %d table=%d", bk.ID, bk.Table)
		if bk.Partition != 0 {
			fmt.Fprintf(&b, " partition=%d", bk.Partition)
		}
		fmt.Fprintf(&b, " index=%d", bk.Index)
		if bk.Leader != 0 {
			fmt.Fprintf(&b, " leader=%d leader-epoch=%d", bk.Leader, bk.LeaderEpoch)
		}
		if bk.Snapshots != nil {
			var snaps []string
			for _, s := range bk.Snapshots {
				snaps = append(snaps, fmt.Sprintf("%d@%d/e%d", s.ID, s.LogOffset, s.LeaderEpoch))
			}
			fmt.Fprintf(&b, " snapshots=(%s)", strings.Join(snaps, ", "))
		}
		b.WriteString("\n")
	}
	for _, id := range slices.Sorted(maps.Keys(v.Streams)) {
		s := v.Streams[id]
		state := "closed"
		if s.Open {
			state = "open"
		}
		if s.Retired {
			state += " retired"
		}
		fmt.Fprintf(&b, "stream %d %s epoch=%d node=%d node-epoch=%d", s.ID, state, s.Epoch, s.Node, s.NodeEpoch)
		if s.Start != 0 {
			fmt.Fprintf(&b, " start=%d", s.Start)
		}
		fmt.Fprintf(&b, " end=%d", s.End)
		if s.Objects != nil {
			var objs []string
			for _, o := range s.Objects {
				obj := fmt.Sprintf("%s@%d-%d", o.Key, o.Start, o.End)
				if !o.At.IsZero() {
					obj += "~" + o.At.Format(time.RFC3339)
				}
				objs = append(objs, obj)
			}
			fmt.Fprintf(&b, " objects=(%s)", strings.Join(objs, ", "))
		}
		b.WriteString("\n")
	}
	for _, w := range slices.SortedFunc(maps.Keys(v.WALTrims), compareWALID) {
		fmt.Fprintf(&b, "wal node=%d node-epoch=%d trim=%d\n", w.Node, w.Epoch, v.WALTrims[w])
	}
	for _, name := range slices.Sorted(maps.Keys(v.Groups)) {
		fmt.Fprintf(&b, "group %q", name)
		g := v.Groups[name]
		for _, topic := range slices.Sorted(maps.Keys(g.Offsets)) {
			for _, p := range slices.Sorted(maps.Keys(g.Offsets[topic])) {
				o := g.Offsets[topic][p]
				fmt.Fprintf(&b, " %s/%d=%d", topic, p, o.Offset)
				if o.LeaderEpoch != -1 {
					fmt.Fprintf(&b, "~%d", o.LeaderEpoch)
				}
				if o.Metadata != "" {
					fmt.Fprintf(&b, ":%s", o.Metadata)
				}
			}
		}
		b.WriteString("\n")
	}
	return b.String()
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
	accepted := map[Kind]int{}
	rejected := map[Kind]int{}
	runs, steps := 25, 400
	if testing.Short() {
		runs = 5
	}
	for run := range runs {
		rng := rand.New(rand.NewPCG(seed, uint64(run)))
		a, b := NewView(), NewView()
		for range steps {
			rec := randomRecord(rng, a)
			oa := applyChecked(t, a, rec)

			// What cannot be encoded cannot be in the log; Apply must reject
			// it too, in case a record reaches it without an encoding.
			decoded := rec
			if data, err := EncodeRecord(rec); err != nil {
				if !errors.Is(err, ErrInvalid) || !errors.Is(oa.Err, ErrInvalid) {
					t.Fatalf("seed %d run %d: encode %+v: %v; apply: %v", seed, run, rec, err, oa.Err)
				}
			} else if decoded, err = DecodeRecord(data); err != nil {
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
	for k := KindRegisterNode; k <= maxKnownKind; k++ {
		t.Logf("%-20v accepted %5d rejected %5d", k, accepted[k], rejected[k])
		if !testing.Short() && (accepted[k] == 0 || rejected[k] == 0) {
			t.Errorf("seed %d: %v accepted %d times, rejected %d times; the generator needs both", seed, k, accepted[k], rejected[k])
		}
	}
}

// randomRecord returns a record that is plausible for v: most are built from
// v's current state so that a good share are accepted, the rest are off by a
// little (a stale epoch, a gap, an unknown id).
func randomRecord(rng *rand.Rand, v *View) Record {
	likely := func() bool { return rng.IntN(8) != 0 }
	node := NodeID(1 + rng.IntN(4))
	nodeEpoch := func(n NodeID) uint64 {
		if cur := v.Nodes[n]; cur != nil && likely() {
			return cur.Epoch
		}
		return uint64(rng.IntN(4))
	}
	pickBucket := func() (BucketID, *Bucket) {
		ids := slices.Sorted(maps.Keys(v.Buckets))
		if len(ids) == 0 || !likely() {
			id := BucketID(rng.Uint64N(v.NextID + 2))
			return id, v.Buckets[id]
		}
		id := ids[rng.IntN(len(ids))]
		return id, v.Buckets[id]
	}
	pickTable := func() (TableID, *Table) {
		ids := slices.Sorted(maps.Keys(v.Tables))
		if len(ids) == 0 || !likely() {
			id := TableID(rng.Uint64N(v.NextID + 2))
			return id, v.Tables[id]
		}
		id := ids[rng.IntN(len(ids))]
		return id, v.Tables[id]
	}
	pickStream := func() (StreamID, *Stream) {
		ids := slices.Sorted(maps.Keys(v.Streams))
		if len(ids) == 0 || !likely() {
			id := StreamID(rng.Uint64N(v.NextID + 2))
			return id, v.Streams[id]
		}
		id := ids[rng.IntN(len(ids))]
		return id, v.Streams[id]
	}
	coordEpoch := func() uint64 {
		if likely() {
			return v.Coordinator.Epoch
		}
		return uint64(rng.IntN(3))
	}
	pickRole := func() RoleID {
		ids := slices.Sorted(maps.Keys(v.Roles))
		if len(ids) == 0 || !likely() {
			return RoleID(rng.IntN(3)) + FirstRoleID - 1
		}
		return ids[rng.IntN(len(ids))]
	}
	var rec Record
	switch Kind(1 + rng.IntN(int(maxKnownKind))) {
	case KindRegisterNode:
		r := RegisterNode{Node: node, ExpectEpoch: nodeEpoch(node)}
		if rng.IntN(2) == 0 {
			r.Addrs = Addrs{PG: fmt.Sprintf("10.0.0.%d:5433", node), Flight: fmt.Sprintf("10.0.0.%d:8815", rng.IntN(9))}
		}
		rec = r
	case KindRegisterCoordinator:
		rec = RegisterCoordinator{Node: node, NodeEpoch: nodeEpoch(node), ExpectEpoch: coordEpoch()}
	case KindCreateTable:
		pool := []Column{{Name: "id", Type: "bigint", NotNull: true}, {Name: "v", Type: "text", Default: "'x'"},
			{Name: "dt", Type: "date"}, {Name: "n", Type: "numeric(12,2)"}, {Name: "s", Type: "smallint", Sequence: SequenceSerial}}
		if rng.IntN(3) == 0 {
			pool[0].Sequence = SequenceAlways
		}
		spec := TableSpec{Name: fmt.Sprintf("t%d", rng.IntN(6)), Buckets: rng.IntN(4)}
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
			spec.Buckets = MaxBuckets + 1
		case 1:
			spec.Columns = append(spec.Columns, spec.Columns[0])
		case 2:
			spec.BucketKey = []string{"v"}
		case 3:
			spec.Options = map[string]string{"partition_retention": "7d"}
		case 4:
			spec.Columns[0].Name = "\xff"
		}
		r := CreateTable{Spec: spec}
		if rng.IntN(2) == 0 {
			r.Owner = pickRole()
		}
		rec = r
	case KindDropTable:
		if rng.IntN(3) == 0 { // drops are rare, or nothing would be left
			id, _ := pickTable()
			rec = DropTable{Table: id}
		} else {
			rec = DropTable{Table: TableID(v.NextID + 5)}
		}
	case KindCreatePartition:
		id, _ := pickTable()
		rec = CreatePartition{Table: id, Value: fmt.Sprintf("2025-01-%02d", 1+rng.IntN(4))}
	case KindDropPartition:
		id, t := pickTable()
		r := DropPartition{Table: id, Partition: PartitionID(rng.Uint64N(v.NextID + 1))}
		if t != nil && len(t.Partitions) > 0 && rng.IntN(3) == 0 {
			pids := slices.Sorted(maps.Keys(t.Partitions))
			r.Partition = pids[rng.IntN(len(pids))]
		}
		rec = r
	case KindLeadBucket:
		id, b := pickBucket()
		r := LeadBucket{Bucket: id, Node: node}
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
	case KindOpenStream:
		id, b := pickBucket()
		r := OpenStream{Stream: StreamID(id), Node: node, Epoch: uint64(1 + rng.IntN(3))}
		if b != nil && likely() {
			r.Node, r.Epoch = b.Leader, b.LeaderEpoch
		}
		if s := v.Streams[r.Stream]; s != nil && rng.IntN(6) == 0 {
			r.Node, r.Epoch = s.Node, s.Epoch
		}
		r.NodeEpoch = nodeEpoch(r.Node)
		rec = r
	case KindCloseStream:
		id, s := pickStream()
		r := CloseStream{Stream: id, Epoch: uint64(rng.IntN(4))}
		if s != nil && likely() {
			r.Epoch = s.Epoch
		}
		rec = r
	case KindCommitStreamObjects:
		id, s := pickStream()
		r := CommitStreamObjects{Stream: id, Epoch: uint64(rng.IntN(4))}
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
				r.Objects = append(r.Objects, StreamObject{Key: fmt.Sprintf("s%d/%d-%d", id, start, end), Start: start, End: end, Size: int64(end - start)})
				start = end
			}
		}
		rec = r
	case KindCommitWALTrim:
		r := CommitWALTrim{Node: node, NodeEpoch: uint64(1 + rng.IntN(3)), TrimSeq: uint64(rng.IntN(5))}
		if w := (WALID{Node: r.Node, Epoch: r.NodeEpoch}); likely() {
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
	case KindCommitKVSnapshot:
		id, b := pickBucket()
		r := CommitKVSnapshot{Bucket: id, LeaderEpoch: uint64(rng.IntN(3)), SnapshotID: uint64(rng.IntN(8)), LogOffset: uint64(rng.IntN(50))}
		if b != nil && likely() {
			r.LeaderEpoch = b.LeaderEpoch
			if n := len(b.Snapshots); n > 0 {
				r.LogOffset = b.Snapshots[n-1].LogOffset + uint64(rng.IntN(10))
				r.SnapshotID = b.Snapshots[n-1].ID + uint64(rng.IntN(3))
			}
		}
		r.Manifest = fmt.Sprintf("kv/%d/%d/%d", r.Bucket, r.SnapshotID, r.LogOffset%2)
		rec = r
	case KindCommitTieringRound:
		id, t := pickTable()
		r := CommitTieringRound{Table: id, CoordinatorEpoch: coordEpoch(), Offsets: map[BucketID]uint64{},
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
			r.Offsets[BucketID(rng.Uint64N(v.NextID+2))] = 1
		}
		rec = r
	case KindAllocateSequence:
		id, t := pickTable()
		r := AllocateSequence{Table: id, Column: "id", Count: uint64(1 + rng.IntN(20000))}
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
	case KindSetColumnDefault:
		id, _ := pickTable()
		r := SetColumnDefault{Table: id, Column: "v", Default: fmt.Sprintf("'%d'", rng.IntN(10))}
		if rng.IntN(3) == 0 {
			r.Default = ""
		}
		if !likely() {
			r.Column = "nosuch"
		}
		rec = r
	case KindTruncateTable:
		id, _ := pickTable()
		rec = TruncateTable{Table: id, RestartSequences: rng.IntN(2) == 0}
	case KindAddColumn:
		id, t := pickTable()
		r := AddColumn{Table: id, Column: Column{Name: fmt.Sprintf("c%d", rng.IntN(4)), Type: "integer"}}
		if t != nil && rng.IntN(2) == 0 {
			missing := fmt.Sprint(rng.IntN(100))
			r.Column.Missing = &missing
		}
		if !likely() {
			r.Column.Name = "id" // every generated table has it
		}
		rec = r
	case KindTrimStream:
		id, s := pickStream()
		r := TrimStream{Stream: id, CoordinatorEpoch: coordEpoch(), Start: uint64(rng.IntN(30))}
		if s != nil && likely() {
			r.Start = s.End
			if len(s.Objects) > 0 && rng.IntN(2) == 0 {
				r.Start = s.Objects[rng.IntN(len(s.Objects))].Start
			}
		}
		rec = r
	case KindCommitGroupOffsets:
		r := CommitGroupOffsets{Group: fmt.Sprintf("g%d", rng.IntN(3)), CoordinatorEpoch: coordEpoch()}
		for range 1 + rng.IntN(3) {
			o := GroupOffset{Topic: fmt.Sprintf("t%d", rng.IntN(6)), Partition: int32(rng.IntN(5)),
				Offset: rng.Int64N(100), LeaderEpoch: int32(rng.IntN(3)) - 1}
			var topics []*Table
			for _, id := range slices.Sorted(maps.Keys(v.Tables)) {
				if t := v.Tables[id]; len(t.Spec.PrimaryKey) == 0 && topicPartitions(t) > 0 {
					topics = append(topics, t)
				}
			}
			if len(topics) > 0 && likely() {
				t := topics[rng.IntN(len(topics))]
				o.Topic = t.Spec.Name
				if n := topicPartitions(t); n > 0 && likely() {
					o.Partition = int32(rng.IntN(n))
				}
			}
			switch rng.IntN(20) {
			case 0:
				o.Offset = -1
			case 1:
				o.Metadata = strings.Repeat("m", MaxGroupOffsetMetadata+1)
			case 2:
				o.Metadata = "meta"
			}
			r.Offsets = append(r.Offsets, o)
		}
		if rng.IntN(20) == 0 {
			r.Group = ""
		}
		rec = r
	case KindDeleteGroupOffsets:
		r := DeleteGroupOffsets{Group: fmt.Sprintf("g%d", rng.IntN(3)), CoordinatorEpoch: coordEpoch(), All: rng.IntN(4) == 0}
		if g := v.Groups[r.Group]; g != nil && (!r.All || rng.IntN(10) == 0) {
			for _, topic := range slices.Sorted(maps.Keys(g.Offsets)) {
				for _, p := range slices.Sorted(maps.Keys(g.Offsets[topic])) {
					if rng.IntN(2) == 0 {
						r.Partitions = append(r.Partitions, GroupPartition{Topic: topic, Partition: p})
					}
				}
			}
		}
		if !r.All && rng.IntN(4) == 0 {
			r.Partitions = append(r.Partitions, GroupPartition{Topic: "t9", Partition: 1})
		}
		rec = r
	case KindCompactStreamObjects:
		id, s := pickStream()
		r := CompactStreamObjects{Stream: id, Epoch: uint64(rng.IntN(4))}
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
			r.With = StreamObject{Key: fmt.Sprintf("c%d/%d", id, rng.IntN(1000)), Start: s.Objects[i].Start,
				End: s.Objects[i+n-1].End, Size: 7}
		}
		rec = r
	case KindCreateRole:
		r := CreateRole{Name: fmt.Sprintf("r%d", rng.IntN(6)), Login: rng.IntN(2) == 0, Superuser: rng.IntN(4) == 0}
		switch rng.IntN(8) {
		case 0:
			r.Name = []string{"", "public", "pg_x"}[rng.IntN(3)]
		case 1:
			r.Verifier = "not a verifier"
		case 2, 3:
			r.Verifier = testVerifier
		}
		rec = r
	case KindAlterRole:
		r := AlterRole{Role: pickRole()}
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
	case KindDropRole:
		rec = DropRole{Role: pickRole()}
	case KindGrantRole:
		rec = GrantRole{Role: pickRole(), Member: pickRole(), Revoke: rng.IntN(3) == 0}
	case KindGrantTable:
		r := GrantTable{Grantee: pickRole(), Privileges: Privileges(rng.IntN(int(PrivAll) + 2)), Revoke: rng.IntN(3) == 0}
		if rng.IntN(4) == 0 {
			r.Grantee = Public
		}
		for range rng.IntN(3) {
			id, _ := pickTable()
			r.Tables = append(r.Tables, id)
		}
		rec = r
	case KindSetTableOwner:
		id, _ := pickTable()
		rec = SetTableOwner{Table: id, Owner: pickRole()}
	case KindSetClusterKey:
		rec = SetClusterKey{Key: bytes.Repeat([]byte{byte(rng.IntN(2))}, []int{32, 32, 32, 5}[rng.IntN(4)])}
	}
	if rng.IntN(10) == 0 {
		// Apply and EncodeRecord take a pointer to a record too.
		p := reflect.New(reflect.TypeOf(rec))
		p.Elem().Set(reflect.ValueOf(rec))
		rec = p.Interface().(Record)
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
	v := NewView()
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
		return partitions && tiering && snapshots && objects && groups && len(v.WALTrims) > 0
	}
	for v.Index < 300 || !rich() {
		if v.Index > 100_000 {
			t.Fatalf("seed %d: the random history built too little to test: %s", seed, dumpView(v))
		}
		Apply(v, v.Index+1, randomRecord(rng, v))
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
		Apply(c, c.Index+1, randomRecord(rng, c))
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
		view  *View
		index uint64
		want  string
	}{
		{"skips an index", NewView(), 2, "Apply(index 2) to a view at index 0"},
		{"repeats an index", NewView(), 0, "Apply(index 0) to a view at index 0"},
		{"zero view", &View{}, 1, "not made by NewView"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(fmt.Sprint(r), tc.want) {
					t.Fatalf("panic %v, want one containing %q", r, tc.want)
				}
			}()
			Apply(tc.view, tc.index, RegisterNode{Node: 1})
		})
	}
}

// TestStateMachineForeignRecords checks that records Apply cannot know are
// rejected as invalid, not applied and not a panic.
func TestStateMachineForeignRecords(t *testing.T) {
	v := NewView()
	for _, rec := range []Record{nil, (*RegisterNode)(nil), foreignRecord{}} {
		o := Apply(v, v.Index+1, rec)
		if !errors.Is(o.Err, ErrInvalid) {
			t.Errorf("Apply(%#v) = %+v, want ErrInvalid", rec, o)
		}
	}
	if v.Index != 3 || len(v.Nodes) != 0 {
		t.Fatalf("view after foreign records: %s", dumpView(v))
	}
}

type foreignRecord struct{}

func (foreignRecord) Kind() Kind { return KindRegisterNode }

// TestStateMachineRecordNotAliased checks that the view keeps no reference
// into an applied record: the proposer may reuse it.
func TestStateMachineRecordNotAliased(t *testing.T) {
	v := NewView()
	spec := TableSpec{Name: "t", Columns: []Column{{Name: "id", Type: "bigint"}}, PrimaryKey: []string{"id"},
		Options: map[string]string{"a": "b"}}
	objects := []StreamObject{{Key: "k", Start: 0, End: 5}}
	offsets := map[BucketID]uint64{2: 3}
	for _, rec := range []Record{
		RegisterNode{Node: 1}, RegisterCoordinator{Node: 1, NodeEpoch: 1}, CreateTable{Spec: spec},
		LeadBucket{Bucket: 2, Node: 1, CoordinatorEpoch: 1}, OpenStream{Stream: 2, Epoch: 1, Node: 1, NodeEpoch: 1},
		CommitStreamObjects{Stream: 2, Epoch: 1, Objects: objects},
		CommitTieringRound{Table: 1, CoordinatorEpoch: 1, Offsets: offsets, LakeSnapshotID: 1, LakeSequence: 1},
	} {
		if o := Apply(v, v.Index+1, rec); o.Err != nil {
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
