package plan

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/catalog/catalogtest"
)

// TestPlan runs the scripts in testdata: a script builds a view from
// records, then asks for plans. Commands:
//
//	apply
//	<one record per line, in the syntax of catalogtest.ParseRecord>
//	----
//	<index>: ok [table=… partition=… buckets=[…] epoch=…] | rejected <error>
//
//	view
//	----
//	<catalogtest.DumpView>
//
//	save name=old            keep a copy of the view as it is now
//
//	assign live=1,2,3 clock=5 epoch=3 [apply=true]
//	failover live=1,2 epoch=3 [apply=true]
//	rebalance live=1,2,3 [epoch=3 apply=true] [view=old]
//	trims now=M epoch=1 [apply=true]
//	partition-drops now=M [apply=true]
//	retired-closes live=1 [apply=true]
//	tiering-round table=1 [epoch=1] [lake=7 seq=1 offsets=(2:10, …)] [files=(2:f, 3:g, …)] [at=M]
//	tiering-due table=1 now=M freshness=5m [off=true] [requested=true] [running=true]
//	            [last-attempt=M] [behind-since=M]
//
// A plan of records prints one record per line in ParseRecord's syntax, so
// that it could be applied as it is; apply=true applies it to the view (a
// rejection fails the test) and prints the outcomes after it. A rebalance
// prints its moves and then the load of every live node after them, with
// the band (110% and 90% of the mean); view=old plans from a saved view and
// applies to the current one (a coordinator whose view lags). A time M is
// minutes after 2025-01-01T00:00+01:00 (the base of ParseRecord's object
// times ~M), or an RFC 3339 time. live= lists the live nodes (sorted by the
// harness, as the coordinator does); an empty list is "live=()". A tiering
// round prints its frozen view of the table, then its decision given the
// lake it read (lake= snapshot, seq=, offsets=) and the lake's files
// (files=, bucket:location, read only when the decision needs them).
// tiering-due prints whether the worker rounds the table now (plan.Due) and
// the table's new BehindSince, in minutes after the base or "never" (zero).
// Run with -rewrite to update the expected output.
func TestPlan(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		v := catalog.NewView()
		saved := map[string]*catalog.View{}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			var out strings.Builder
			applyAll := func(recs []catalog.Record) {
				if !d.HasArg("apply") || argStr(d, "apply") != "true" {
					return
				}
				out.WriteString("applied:\n")
				for _, rec := range recs {
					o := catalog.Apply(v, v.Index+1, rec)
					if o.Err != nil {
						d.Fatalf(t, "the view rejected the plan's %s: %v", formatRecord(rec), o.Err)
					}
					fmt.Fprintf(&out, "  %s\n", formatOutcome(o))
				}
			}
			printRecords := func(recs []catalog.Record) {
				if len(recs) == 0 {
					out.WriteString("(none)\n")
				}
				for _, rec := range recs {
					out.WriteString(formatRecord(rec) + "\n")
				}
				applyAll(recs)
			}
			switch d.Cmd {
			case "apply":
				for _, line := range strings.Split(d.Input, "\n") {
					line = strings.TrimSpace(line)
					if line == "" || strings.HasPrefix(line, "#") {
						continue
					}
					rec, err := catalogtest.ParseRecord(line)
					if err != nil {
						d.Fatalf(t, "%s: %v", line, err)
					}
					o := catalog.Apply(v, v.Index+1, rec)
					if o.Err != nil {
						fmt.Fprintf(&out, "%d: rejected %v\n", o.Index, o.Err)
						continue
					}
					out.WriteString(formatOutcome(o) + "\n")
				}
			case "view":
				return catalogtest.DumpView(v)
			case "save":
				saved[argStr(d, "name")] = v.Clone()
				return "ok"
			case "assign":
				printRecords(leadRecords(Assign(v, argNodes(t, d, "live"), argUint(t, d, "clock"), argUint(t, d, "epoch"))))
			case "failover":
				printRecords(leadRecords(Failover(v, argNodes(t, d, "live"), argUint(t, d, "epoch"))))
			case "rebalance":
				from := v
				if d.HasArg("view") {
					if from = saved[argStr(d, "view")]; from == nil {
						d.Fatalf(t, "no saved view %q", argStr(d, "view"))
					}
				}
				live := argNodes(t, d, "live")
				moves := Rebalance(from, live)
				if len(moves) == 0 {
					out.WriteString("(none)\n")
				}
				var recs []catalog.Record
				for _, m := range moves {
					fmt.Fprintf(&out, "move bucket=%d from=%d to=%d\n", m.Bucket, m.From, m.To)
					recs = append(recs, catalog.LeadBucket{Bucket: m.Bucket, Node: m.To, CoordinatorEpoch: argUint(t, d, "epoch")})
				}
				// The loads the plan leads to, on the view it planned from.
				load := map[catalog.NodeID]int{}
				for _, b := range from.Buckets {
					load[b.Leader]++
				}
				for _, m := range moves {
					load[m.From]--
					load[m.To]++
				}
				out.WriteString(formatLoads("planned", load, live, len(from.Buckets)))
				applyAll(recs)
				if d.HasArg("apply") {
					load = map[catalog.NodeID]int{}
					for _, b := range v.Buckets {
						load[b.Leader]++
					}
					out.WriteString(formatLoads("after", load, live, len(v.Buckets)))
				}
			case "trims":
				var recs []catalog.Record
				for _, r := range Trims(v, argTime(t, d, "now"), argUint(t, d, "epoch")) {
					recs = append(recs, r)
				}
				printRecords(recs)
			case "partition-drops":
				var recs []catalog.Record
				for _, r := range PartitionDrops(v, argTime(t, d, "now")) {
					recs = append(recs, r)
				}
				printRecords(recs)
			case "retired-closes":
				live := argNodes(t, d, "live")
				var recs []catalog.Record
				for _, r := range RetiredCloses(v, func(n catalog.NodeID) bool { return slices.Contains(live, n) }) {
					recs = append(recs, r)
				}
				printRecords(recs)
			case "tiering-round":
				tieringRound(t, d, v, &out)
			case "tiering-due":
				tbl := v.Tables[catalog.TableID(argUint(t, d, "table"))]
				if tbl == nil {
					d.Fatalf(t, "no table %s", argStr(d, "table"))
				}
				freshness, err := time.ParseDuration(argStr(d, "freshness"))
				if err != nil {
					d.Fatalf(t, "freshness=%s: %v", argStr(d, "freshness"), err)
				}
				w := TableWork{Enabled: argStr(d, "off") != "true", Freshness: freshness,
					Requested: argStr(d, "requested") == "true", Running: argStr(d, "running") == "true"}
				if d.HasArg("last-attempt") {
					w.LastAttempt = argTime(t, d, "last-attempt")
				}
				if d.HasArg("behind-since") {
					w.BehindSince = argTime(t, d, "behind-since")
				}
				due, since := Due(v, tbl, w, argTime(t, d, "now"))
				fmt.Fprintf(&out, "due=%v behind-since=%s behind=%v lake-retired=%v\n", due, formatMinutes(since), Behind(v, tbl), LakeRetired(tbl))
			default:
				d.Fatalf(t, "unknown command %q", d.Cmd)
			}
			return out.String()
		})
	})
}

// tieringRound runs the tiering-round command: Round, CheckLake, Decide,
// Record.
func tieringRound(t *testing.T, d *datadriven.TestData, v *catalog.View, out *strings.Builder) {
	r, err := Round(v, catalog.TableID(argUint(t, d, "table")))
	if err != nil {
		fmt.Fprintf(out, "error: %v\n", err)
		return
	}
	fmt.Fprintf(out, "frozen: buckets=%v ends=%s epoch=%d next-id=%d tiered=%s lake-seq=%d\n",
		r.Buckets, formatOffsets(r.Ends), r.Epoch, r.NextID, formatOffsets(r.Tiered.Offsets), r.Tiered.LakeSequence)
	if d.HasArg("epoch") && argUint(t, d, "epoch") != r.Epoch {
		fmt.Fprintf(out, "fenced: the round's epoch %d, the view's %d\n", argUint(t, d, "epoch"), r.Epoch)
		return
	}
	lake := Lake{Offsets: map[catalog.BucketID]uint64{}}
	if d.HasArg("lake") {
		lake.SnapshotID = int64(argUint(t, d, "lake"))
	}
	if d.HasArg("seq") {
		lake.Sequence = argUint(t, d, "seq")
	}
	if a, ok := d.Arg("offsets"); ok {
		for _, kv := range a.Vals {
			if kv == "" {
				continue
			}
			b, off, _ := strings.Cut(kv, ":")
			lake.Offsets[catalog.BucketID(mustUint(t, b))] = mustUint(t, off)
		}
	}
	if err := r.CheckLake(lake); err != nil {
		fmt.Fprintf(out, "error: %v\n", err)
		return
	}
	files := map[catalog.BucketID][]string{}
	if a, ok := d.Arg("files"); ok {
		for _, kv := range a.Vals {
			b, loc, _ := strings.Cut(kv, ":")
			id := catalog.BucketID(mustUint(t, b))
			files[id] = append(files[id], loc)
		}
	}
	fmt.Fprintf(out, "needs-files: %v\n", r.NeedsFiles(lake))
	dec := r.Decide(lake, files)
	for _, b := range slices.Sorted(maps.Keys(dec.To)) {
		fmt.Fprintf(out, "tier bucket=%d from=%d to=%d\n", b, dec.From[b], dec.To[b])
	}
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	if d.HasArg("at") {
		at = argTime(t, d, "at")
	}
	if dec.Repair {
		if rec, ok := r.Record(lake.Offsets, lake.SnapshotID, lake.Sequence, r.Epoch, at); ok {
			fmt.Fprintf(out, "repair: %s\n", formatRecord(rec))
		} else {
			out.WriteString("repair: nothing to record (no current bucket in the lake's offsets)\n")
		}
	}
	if !dec.Commit {
		out.WriteString("commit: nothing\n")
		return
	}
	if len(dec.Retired) > 0 {
		fmt.Fprintf(out, "retire buckets=%v files=%v\n", dec.Retired, dec.RetiredFiles)
	}
	fmt.Fprintf(out, "commit: snapshot offsets=%s\n", formatOffsets(dec.Offsets))
	if rec, ok := r.Record(dec.Offsets, 0, 0, r.Epoch, at); ok {
		fmt.Fprintf(out, "record: offsets=%s\n", formatOffsets(rec.Offsets))
	} else {
		out.WriteString("record: nothing (no current bucket)\n")
	}
}

func leadRecords(lbs []catalog.LeadBucket) []catalog.Record {
	var out []catalog.Record
	for _, lb := range lbs {
		out = append(out, lb)
	}
	return out
}

// formatRecord prints a plan's record in ParseRecord's syntax.
func formatRecord(rec catalog.Record) string {
	switch r := rec.(type) {
	case catalog.LeadBucket:
		return fmt.Sprintf("lead-bucket bucket=%d node=%d coord=%d", r.Bucket, r.Node, r.CoordinatorEpoch)
	case catalog.TrimStream:
		return fmt.Sprintf("trim-stream stream=%d start=%d coord=%d", r.Stream, r.Start, r.CoordinatorEpoch)
	case catalog.DropPartition:
		return fmt.Sprintf("drop-partition table=%d partition=%d", r.Table, r.Partition)
	case catalog.CloseStream:
		return fmt.Sprintf("close-stream stream=%d epoch=%d", r.Stream, r.Epoch)
	case catalog.CommitTieringRound:
		return fmt.Sprintf("commit-tiering-round table=%d coord=%d offsets=%s lake=%d seq=%d at=%s",
			r.Table, r.CoordinatorEpoch, formatOffsets(r.Offsets), r.LakeSnapshotID, r.LakeSequence, r.At.Format(time.RFC3339))
	}
	panic(fmt.Sprintf("plan harness: no syntax for %T", rec))
}

func formatOutcome(o catalog.Outcome) string {
	s := fmt.Sprintf("%d: ok", o.Index)
	if o.Table != 0 {
		s += fmt.Sprintf(" table=%d", o.Table)
	}
	if o.Partition != 0 {
		s += fmt.Sprintf(" partition=%d", o.Partition)
	}
	if o.Buckets != nil {
		s += fmt.Sprintf(" buckets=%v", o.Buckets)
	}
	if o.Epoch != 0 {
		s += fmt.Sprintf(" epoch=%d", o.Epoch)
	}
	return s
}

func formatOffsets(m map[catalog.BucketID]uint64) string {
	var parts []string
	for _, b := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%d:%d", b, m[b]))
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// formatLoads prints the buckets led by each live node (and by nodes that
// are not live, or none, as "other"), with the rebalance band.
func formatLoads(what string, load map[catalog.NodeID]int, live []catalog.NodeID, total int) string {
	var parts []string
	other := total
	for _, n := range live {
		parts = append(parts, fmt.Sprintf("%d=%d", n, load[n]))
		other -= load[n]
	}
	if other != 0 {
		parts = append(parts, fmt.Sprintf("other=%d", other))
	}
	s := fmt.Sprintf("%s loads: %s", what, strings.Join(parts, " "))
	if len(live) > 0 {
		mean := float64(total) / float64(len(live))
		s += fmt.Sprintf(" (mean %.4g, band %.4g-%.4g)", mean, 0.9*mean, 1.1*mean)
	}
	return s + "\n"
}

func argStr(d *datadriven.TestData, key string) string {
	a, ok := d.Arg(key)
	if !ok {
		return ""
	}
	return strings.Join(a.Vals, ",")
}

func argUint(t *testing.T, d *datadriven.TestData, key string) uint64 {
	if !d.HasArg(key) {
		return 0
	}
	return mustUint(t, argStr(d, key))
}

// argNodes parses live=1,2,3 or live=(1, 2, 3), sorted.
func argNodes(t *testing.T, d *datadriven.TestData, key string) []catalog.NodeID {
	a, ok := d.Arg(key)
	if !ok {
		d.Fatalf(t, "missing %s=", key)
	}
	var out []catalog.NodeID
	for _, v := range a.Vals {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				n, err := strconv.ParseUint(s, 10, 64)
				if err != nil {
					d.Fatalf(t, "%s=%s: %v", key, v, err)
				}
				out = append(out, catalog.NodeID(n))
			}
		}
	}
	slices.Sort(out)
	return out
}

var base = time.Date(2025, 1, 1, 0, 0, 0, 0, time.FixedZone("x", 3600))

// argTime parses minutes after base, or an RFC 3339 time.
func argTime(t *testing.T, d *datadriven.TestData, key string) time.Time {
	s := argStr(d, key)
	if m, err := strconv.ParseInt(s, 10, 64); err == nil {
		return base.Add(time.Duration(m) * time.Minute)
	}
	ts, err := time.Parse(time.RFC3339, s)
	if err != nil {
		d.Fatalf(t, "%s=%s: %v", key, s, err)
	}
	return ts
}

// formatMinutes prints ts as minutes after base, or "never" for zero.
func formatMinutes(ts time.Time) string {
	if ts.IsZero() {
		return "never"
	}
	return strconv.FormatInt(int64(ts.Sub(base)/time.Minute), 10)
}

func mustUint(t *testing.T, s string) uint64 {
	n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}
