package kv

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/minkdb/mink/kv/kvcodec"
	"github.com/minkdb/mink/objstore"
)

var (
	seedFlag  = flag.Uint64("kv.seed", 0, "seed of the randomized tests (0: from the clock)")
	modelOps  = flag.Int("kv.ops", 2000, "operations per randomized model run")
	modelRuns = flag.Int("kv.runs", 2, "randomized model runs, with seeds seed, seed+1, …")
)

func testSeed(t *testing.T) uint64 {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	return seed
}

// modelChanges is the model of Changes: the records a batch of writes
// yields against state, or the index of the write that fails with a
// duplicate key or a conflict (-1 if none).
func modelChanges(state map[string]string, writes []kvcodec.Write) ([]kvcodec.ChangeRecord, int) {
	state = maps.Clone(state)
	var out []kvcodec.ChangeRecord
	for i, w := range writes {
		old, exists := state[string(w.Key)]
		if w.CheckRow && (exists != (w.IfRow != nil) || old != string(w.IfRow)) {
			return nil, i
		}
		switch {
		case w.Op == kvcodec.OpInsert && exists:
			return nil, i
		case (w.Op == kvcodec.OpInsert || w.Op == kvcodec.OpInsertIfAbsent || w.Op == kvcodec.OpUpsert) && !exists:
			out = append(out, kvcodec.ChangeRecord{Type: kvcodec.Insert, Key: w.Key, Row: w.Row})
		case (w.Op == kvcodec.OpUpsert || w.Op == kvcodec.OpUpdate) && exists:
			out = append(out, kvcodec.ChangeRecord{Type: kvcodec.UpdateBefore, Key: w.Key, Row: []byte(old)}, kvcodec.ChangeRecord{Type: kvcodec.UpdateAfter, Key: w.Key, Row: w.Row})
		case w.Op == kvcodec.OpDelete && exists:
			out = append(out, kvcodec.ChangeRecord{Type: kvcodec.Delete, Key: w.Key, Row: []byte(old)})
			delete(state, string(w.Key))
			continue
		default:
			continue // a no-op
		}
		state[string(w.Key)] = string(w.Row)
	}
	return out, -1
}

func applyModel(state map[string]string, records []kvcodec.ChangeRecord) {
	for _, r := range records {
		switch r.Type {
		case kvcodec.Insert, kvcodec.UpdateAfter:
			state[string(r.Key)] = string(r.Row)
		case kvcodec.Delete:
			delete(state, string(r.Key))
		}
	}
}

// TestModel runs seeded random histories of writes (pipelined through
// Pending), point lookups, snapshots (some failing half-way, some with the
// commit rejected), garbage collection, clean restarts and crashes (the
// tablet abandoned without Close, acknowledged records not yet applied),
// and checks after every recovery that the tablet equals the model of the
// acknowledged writes and the changelog.
func TestModel(t *testing.T) {
	seed := testSeed(t)
	for run := range *modelRuns {
		s := seed + uint64(run)
		t.Run(fmt.Sprintf("seed=%d", s), func(t *testing.T) {
			t.Logf("seed %d (rerun: go test ./kv -run TestModel -kv.runs=1 -kv.seed=%d)", s, s)
			runModel(t, s, *modelOps)
		})
	}
}

type stagedBatchModel struct {
	records []kvcodec.ChangeRecord
}

func runModel(t *testing.T, seed uint64, ops int) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	c := testCodec(t)
	mv := newMetaView(t)
	mem := objstore.NewMem()
	store := objstore.NewFaulty(mem)
	store.Seed(seed)
	root := t.TempDir()
	gen := 0
	var log memLog

	tab, err := Open(filepath.Join(root, "tablet-0"), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	var abandoned []*Tablet
	defer func() {
		tab.Close()
		// Crashed tablets are never used again; closing them here only
		// stops pebble's goroutines.
		for _, a := range abandoned {
			a.Close()
		}
	}()
	p := NewPending(tab)
	acked := map[string]string{}  // the model of acknowledged writes
	staged := map[string]string{} // acked plus the staged batches
	var queue []stagedBatchModel
	stats := map[string]int{}

	randomWrite := func() kvcodec.Write {
		r := testRow{id: rng.Int64N(40), name: []string{"a", "b"}[rng.IntN(2)]}
		if rng.IntN(3) > 0 {
			r.v = ptr(fmt.Sprintf("v%d", rng.IntN(1000)))
		}
		if rng.IntN(2) == 0 {
			r.n = ptr(rng.Int64())
		}
		keys, rows := encodeRows(t, c, r)
		op := kvcodec.WriteOp(rng.IntN(5))
		if op == kvcodec.OpDelete {
			return kvcodec.Write{Op: op, Key: keys[0]}
		}
		return kvcodec.Write{Op: op, Key: keys[0], Row: rows[0]}
	}
	check := func(what string) {
		t.Helper()
		if d := diffStates(t, c, tabletState(t, tab), acked); d != "" {
			t.Fatalf("%s: the tablet differs from the model of acknowledged writes:\n%s", what, d)
		}
		if got := tab.AppliedOffset(); got != log.end {
			t.Fatalf("%s: tablet at offset %d, changelog ends at %d", what, got, log.end)
		}
	}
	// recover restores a tablet from the retained snapshots and replays the
	// changelog. Every retained snapshot must restore (garbage collection
	// never deletes what one references) and hold exactly the changelog's
	// state at its offset.
	recoveries := 0
	recover := func(what string) {
		t.Helper()
		retained := mv.retained()
		if recoveries++; recoveries%4 != 1 {
			retained = nil // the full check of every retained snapshot is slow
		}
		for _, s := range retained {
			gen++
			one, res, err := Restore(ctx, store, filepath.Join(root, fmt.Sprintf("tablet-%d", gen)), RestoreOptions{
				Bucket: mv.bucket, Snapshots: retained[:1], Tablet: testOptions()})
			retained = retained[1:]
			if err != nil || len(res.Skipped) > 0 || res.Snapshot == nil || res.Snapshot.ID != s.ID {
				t.Fatalf("%s: restore of retained snapshot %d: %v, skipped %v", what, s.ID, err, res.Skipped)
			}
			if d := diffStates(t, c, tabletState(t, one), log.stateAt(t, c, s.LogOffset)); d != "" {
				t.Fatalf("%s: snapshot %d at offset %d differs from the changelog:\n%s", what, s.ID, s.LogOffset, d)
			}
			one.Close()
		}
		var res RestoreResult
		tab, res = mv.restore(ctx, store, root, &gen, &log, mv.retained())
		if len(res.Skipped) > 0 {
			t.Fatalf("%s: restore skipped %v", what, res.Skipped)
		}
		p = NewPending(tab)
		staged = maps.Clone(acked)
		queue = nil
		check(what)
	}

	for op := range ops {
		switch x := rng.IntN(100); {
		case x < 35: // a batch of writes
			stats["batch"]++
			writes := make([]kvcodec.Write, 1+rng.IntN(4))
			for i := range writes {
				writes[i] = randomWrite()
			}
			for i := range writes {
				// Some writes are conditional on the row as of the batch
				// start, usually the current one, sometimes a stale one.
				if rng.IntN(6) == 0 {
					writes[i].CheckRow = true
					if row, ok := staged[string(writes[i].Key)]; ok && rng.IntN(4) > 0 {
						writes[i].IfRow = []byte(row)
					} else if rng.IntN(2) == 0 {
						writes[i].IfRow = randomWrite().Row
					}
				}
			}
			want, failed := modelChanges(staged, writes)
			records, err := p.Changes(nil, writes)
			if failed >= 0 {
				var de *DuplicateKeyError
				var ce *ConflictError
				switch {
				case errors.As(err, &de) && de.Write == failed && writes[failed].Op == kvcodec.OpInsert:
					stats["duplicate"]++
				case errors.As(err, &ce) && ce.Write == failed && writes[failed].CheckRow:
					stats["conflict"]++
				default:
					t.Fatalf("op %d: Changes: %v, want a duplicate key or a conflict at write %d", op, err, failed)
				}
				continue
			}
			if err != nil {
				t.Fatalf("op %d: Changes: %v", op, err)
			}
			if len(records) != len(want) {
				t.Fatalf("op %d: %d records, the model says %d", op, len(records), len(want))
			}
			for i := range want {
				if records[i].Type != want[i].Type || string(records[i].Key) != string(want[i].Key) || string(records[i].Row) != string(want[i].Row) {
					t.Fatalf("op %d: record %d is %s %s, the model says %s %s", op, i,
						records[i].Type, describeRow(t, c, records[i].Row), want[i].Type, describeRow(t, c, want[i].Row))
				}
			}
			if len(records) > 0 {
				applyModel(staged, records)
				queue = append(queue, stagedBatchModel{records: records})
			}
		case x < 60: // the oldest append is acknowledged and applied
			if len(queue) == 0 {
				continue
			}
			stats["ack"]++
			b := queue[0]
			queue = queue[1:]
			end := log.append(t, c, b.records)
			applyModel(acked, b.records)
			if err := p.Apply(b.records, end); err != nil {
				t.Fatalf("op %d: apply: %v", op, err)
			}
		case x < 62: // the oldest append fails: nothing staged is acknowledged
			if len(queue) == 0 {
				continue
			}
			stats["append-failed"]++
			p.Discard()
			queue = nil
			staged = maps.Clone(acked)
		case x < 83: // point lookups: readers see acknowledged rows only
			stats["lookup"]++
			w := randomWrite()
			got, ok, err := tab.Get(w.Key)
			want, wantOK := acked[string(w.Key)]
			if err != nil || ok != wantOK || string(got) != want {
				t.Fatalf("op %d: Get = %v %v; the model of acknowledged writes has %v", op, ok, err, wantOK)
			}
			got, ok, err = p.Get(w.Key)
			want, wantOK = staged[string(w.Key)]
			if err != nil || ok != wantOK || string(got) != want {
				t.Fatalf("op %d: Pending.Get = %v %v; the model has %v", op, ok, err, wantOK)
			}
		case x < 89: // a snapshot, maybe failing half-way or rejected
			stats["snapshot"]++
			var remove func()
			if rng.IntN(4) == 0 {
				remove = store.Inject(objstore.Rule{Ops: objstore.OpPut, Prefix: "kv/", Prob: 0.4, Err: objstore.ErrInjected})
			}
			reject := rng.IntN(6) == 0
			res, err := tab.Snapshot(ctx, store, SnapshotOptions{Bucket: mv.bucket, LeaderEpoch: mv.epoch, Retained: mv.retained()})
			if remove != nil {
				remove()
			}
			if err != nil {
				if !errors.Is(err, objstore.ErrInjected) {
					t.Fatalf("op %d: snapshot: %v", op, err)
				}
				stats["snapshot-failed"]++
				continue
			}
			if reject {
				// A failover happened meanwhile: the commit is stale.
				mv.lead()
			}
			if out := mv.apply(res.Record); (out.Err != nil) != reject {
				t.Fatalf("op %d: commit snapshot (reject %v): %v", op, reject, out.Err)
			}
			if reject {
				stats["snapshot-rejected"]++
			}
		case x < 91: // garbage collection
			stats["gc"]++
			stats["gc-deleted"] += len(mv.collect(ctx, store))
		case x < 93: // a clean restart: unacknowledged appends are lost
			stats["restart"]++
			if err := tab.Close(); err != nil {
				t.Fatal(err)
			}
			// A restarted node leads its buckets at a fresh epoch (the
			// spec's "closed at the current leader epoch").
			mv.lead()
			recover(fmt.Sprintf("op %d: restart", op))
		case x < 95: // kill -9: some staged appends were acknowledged but not applied
			stats["crash"]++
			for len(queue) > 0 && rng.IntN(2) == 0 {
				log.append(t, c, queue[0].records)
				applyModel(acked, queue[0].records)
				queue = queue[1:]
			}
			abandoned = append(abandoned, tab)
			mv.lead()
			recover(fmt.Sprintf("op %d: crash", op))
		default:
			stats["check"]++
			check(fmt.Sprintf("op %d", op))
		}
	}
	if err := tab.Close(); err != nil {
		t.Fatal(err)
	}
	mv.lead()
	recover("end")
	if !maps.Equal(acked, log.stateAt(t, c, log.end)) {
		t.Fatal("the model and the changelog disagree")
	}
	t.Logf("%d rows, changelog end %d, %d retained snapshots; %v", len(acked), log.end, len(mv.retained()), stats)
}
