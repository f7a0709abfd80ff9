package catalogtest

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/minkdb/mink/catalog"
)

// DumpView renders v compactly and deterministically, one entity per line.
func DumpView(v *catalog.View) string {
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

func compareWALID(a, b catalog.WALID) int {
	return cmp.Or(cmp.Compare(a.Node, b.Node), cmp.Compare(a.Epoch, b.Epoch))
}
