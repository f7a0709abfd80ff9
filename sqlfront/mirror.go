package sqlfront

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	pg "github.com/minkdb/mink/sqlfront/pgtree"
	"github.com/minkdb/mink/sqlfront/translate"

	"github.com/minkdb/mink/buckets"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/sqlfront/engine"
)

// Mirrors: a SELECT over log tables runs over DuckDB-native copies of them
// (engine.NativeTable), which DuckDB plans far better than a table
// function: it has their statistics. Log tables only grow, so a mirror is
// kept current by appending, at the start of each statement that reads
// it, the rows each of the table's buckets acknowledged since the last
// append. A statement thus sees every row acknowledged before it started,
// as over the buckets themselves.
//
// A statement keeps reading the buckets directly (the session's views,
// tables.go) when it reads a primary-key table, when a table it reads has
// writes pending in the session's transaction block, when a bucket of a
// table is not led by this node, or when the mirrored statement does not
// plan. The mirrors of a node hold a copy of its log tables' rows in
// DuckDB's memory (engine.Options.MemoryLimit bounds it; a table that does
// not fit is no longer mirrored).

// mirrorPlan is a statement's variant over mirrors.
type mirrorPlan struct {
	sql    string
	tables []*tableInfo
}

func mirrorKey(id catalog.TableID) string { return "t" + strconv.FormatUint(uint64(id), 10) }

// planMirror returns the statement tree (after engineRewriter) rewritten
// to read mirrors, or nil when it reads no log table or cannot.
func (s *session) planMirror(ctx context.Context, tree *pg.Node) *mirrorPlan {
	if tree.GetSelectStmt() == nil {
		return nil
	}
	tree = proto.Clone(tree).(*pg.Node)
	ctes := map[string]bool{}
	pg.Walk(tree, func(m protoreflect.Message) {
		if c, ok := m.Interface().(*pg.CommonTableExpr); ok {
			ctes[c.Ctename] = true
		}
	})
	plan := &mirrorPlan{}
	seen := map[catalog.TableID]bool{}
	for _, rv := range pg.RangeVars(tree) {
		if rv.Schemaname == "" && ctes[rv.Relname] {
			continue
		}
		if rv.Schemaname != "" && rv.Schemaname != "public" {
			return nil
		}
		info, err := s.lookupTable(rv)
		if err != nil {
			return nil
		}
		if info.isPK() || len(info.spec.Dropped) > 0 {
			// A table with dropped columns has no mirror: one filled
			// before the drop holds the column's values under its name,
			// which a column added later could take.
			return nil
		}
		nt, err := s.f.cfg.Engine.NativeTable(ctx, mirrorKey(info.id), info.schema)
		if err != nil || nt.Disabled() {
			return nil
		}
		if rv.Alias == nil {
			rv.Alias = &pg.Alias{Aliasname: rv.Relname}
		}
		rv.Catalogname, rv.Schemaname, rv.Relname = "", engine.NativeSchema, mirrorKey(info.id)
		if !seen[info.id] {
			seen[info.id] = true
			plan.tables = append(plan.tables, info)
		}
	}
	if len(plan.tables) == 0 {
		return nil
	}
	sql, err := translate.Deparse(tree)
	if err != nil {
		return nil
	}
	if _, err := s.conn.Describe(ctx, sql); err != nil {
		return nil
	}
	plan.sql = sql
	s.dropStaleMirrors(ctx)
	return plan
}

// live reports whether the plan's tables still exist: a prepared statement
// outlives a DROP TABLE, after which its views read the new table of the
// name and its mirror plan is made again.
func (p *mirrorPlan) live(s *session) bool {
	live := true
	s.f.cfg.Meta.Read(func(v *catalog.View) {
		for _, t := range p.tables {
			if _, ok := v.Tables[t.id]; !ok {
				live = false
			}
		}
	})
	return live
}

// usable reports whether the session may run the mirrored variant now: no
// table of it has writes pending in the session's transaction block, or
// was truncated by it.
func (p *mirrorPlan) usable(s *session) bool {
	for _, t := range p.tables {
		if s.truncatedIDInTx(t.id) {
			return false // the block reads its own writes after the TRUNCATE
		}
	}
	for _, w := range s.tx.pending {
		for _, t := range p.tables {
			if w.table.id == t.id {
				return false
			}
		}
	}
	return true
}

// refresh appends to each mirror of the plan what its table's buckets
// acknowledged since. An error means the statement reads the buckets.
func (p *mirrorPlan) refresh(ctx context.Context, s *session) error {
	for _, t := range p.tables {
		if err := s.f.refreshMirror(ctx, t); err != nil {
			return err
		}
	}
	return nil
}

// mirrorReadFault, when set (by tests), is called before a mirror reads a
// bucket; an error fails the read.
var mirrorReadFault func(catalog.BucketID) error

// errNotLocal: a bucket of the table is not led here.
var errNotLocal = errors.New("a bucket is not led by this node")

func (f *Frontend) refreshMirror(ctx context.Context, t *tableInfo) error {
	nt, err := f.cfg.Engine.NativeTable(ctx, mirrorKey(t.id), t.schema)
	if err != nil {
		return err
	}
	m := f.cfg.Buckets()
	if m == nil {
		return errNotLocal
	}
	var ids []catalog.BucketID
	var first map[catalog.BucketID]uint64
	f.cfg.Meta.Read(func(v *catalog.View) {
		tbl, ok := v.Tables[t.id]
		if !ok {
			return
		}
		ids = append(ids, tbl.Buckets...)
		for _, p := range tbl.Partitions {
			ids = append(ids, p.Buckets...)
		}
		first = firstRows(v, tbl, ids)
	})
	if why := mirrorStale(nt.Progress(), ids, first); why != "" {
		return f.rebuildMirror(ctx, t, why)
	}
	// Read what each bucket acknowledged beyond the mirror, without the
	// mirrors' lock; then append it under the lock, skipping what another
	// statement appended meanwhile (offsets name the same rows).
	type catchUp struct {
		id        catalog.BucketID
		from, end uint64
		batches   []buckets.Batch
	}
	var reads []catchUp
	defer func() {
		for _, r := range reads {
			buckets.ReleaseBatches(r.batches)
		}
	}()
	progress, err := f.fillMirrorFromLake(ctx, t, nt, nt.Progress())
	if err != nil {
		return err
	}
	// Take every bucket's end before reading any, so that the statement
	// sees each bucket as of (nearly) one moment: its start.
	bs := make([]*buckets.LogBucket, len(ids))
	ends := make([]uint64, len(ids))
	for i, id := range ids {
		b, err := m.Bucket(id)
		if err != nil {
			return fmt.Errorf("%w: %v", errNotLocal, err)
		}
		bs[i], ends[i] = b, b.End()
	}
	for i, id := range ids {
		b, from, end := bs[i], progress[uint64(id)], ends[i]
		if end < from {
			return fmt.Errorf("bucket %d ends at %d, below the %d rows mirrored", id, end, from)
		}
		if end == from {
			continue
		}
		if mirrorReadFault != nil {
			if err := mirrorReadFault(id); err != nil {
				return err
			}
		}
		got, err := b.Read(ctx, from, end)
		if err != nil {
			return err
		}
		reads = append(reads, catchUp{id: id, from: from, end: end, batches: got})
		if from > 0 && (len(got) == 0 || got[0].Offset > from) {
			// Trimmed past the mirror since the view above was read.
			return f.rebuildMirror(ctx, t, fmt.Sprintf("bucket %d was trimmed past the %d rows mirrored", id, from))
		}
	}
	if len(reads) == 0 {
		return nil
	}
	err = nt.Update(ctx, func(progress map[uint64]uint64, appendRows func([]arrow.RecordBatch) error) error {
		for _, r := range reads {
			from := max(r.from, progress[uint64(r.id)])
			if from >= r.end {
				continue
			}
			var batches []arrow.RecordBatch
			for _, g := range r.batches {
				lo, hi := int64(0), g.Record.NumRows()
				if g.Offset < from {
					lo = int64(min(from-g.Offset, uint64(hi)))
				}
				if g.Offset+uint64(hi) > r.end {
					hi = int64(r.end - min(g.Offset, r.end))
				}
				if lo < hi {
					slice := g.Record.NewSlice(lo, hi)
					wide, err := t.widen(slice)
					slice.Release()
					if err != nil {
						for _, rec := range batches {
							rec.Release()
						}
						return err
					}
					batches = append(batches, wide)
				}
			}
			err := appendRows(batches)
			for _, rec := range batches {
				rec.Release()
			}
			if err != nil {
				return err
			}
			if progress[uint64(r.id)] == 0 && len(r.batches) > 0 {
				progress[firstKey(r.id)] = max(from, r.batches[0].Offset)
			}
			progress[uint64(r.id)] = r.end
		}
		return nil
	})
	var ee *engine.Error
	if errors.As(err, &ee) && ee.Code == engine.CodeOutOfMemory {
		// DuckDB's memory cannot hold the table: stop mirroring it.
		f.cfg.Logger.Warn("log table no longer mirrored in the engine: out of memory", "table", t.name)
		_ = nt.Disable(ctx)
	}
	return err
}

// A mirror's progress record holds, per bucket id, the offset up to which
// the mirror holds the bucket's rows, and under firstKey(id) the offset of
// the first row it holds (absent: 0).
func firstKey(id catalog.BucketID) uint64 { return uint64(id) | 1<<63 }

// firstRows returns, for each bucket of tbl, the first offset a direct read
// of the table returns: 0 while the lake holds every trimmed row, else the
// stream's start (rows below it expired: log_retention of an untiered
// table).
func firstRows(v *catalog.View, tbl *catalog.Table, ids []catalog.BucketID) map[catalog.BucketID]uint64 {
	out := make(map[catalog.BucketID]uint64, len(ids))
	for _, id := range ids {
		st := v.Streams[catalog.StreamID(id)]
		if st != nil && st.Start > tbl.Tiering.Offsets[id] {
			out[id] = st.Start
		}
	}
	return out
}

// mirrorStale says why a mirror with progress no longer equals a prefix of
// its table ("" if it does): it holds rows of a bucket the table no longer
// has (a dropped partition), or rows that expired from a bucket.
func mirrorStale(progress map[uint64]uint64, ids []catalog.BucketID, first map[catalog.BucketID]uint64) string {
	has := make(map[uint64]bool, len(ids))
	for _, id := range ids {
		has[uint64(id)] = true
		if progress[uint64(id)] > 0 && progress[firstKey(id)] < first[id] {
			return fmt.Sprintf("rows of bucket %d below offset %d expired", id, first[id])
		}
	}
	for key, end := range progress {
		if key&(1<<63) == 0 && end > 0 && !has[key] {
			return fmt.Sprintf("bucket %d left the table", key)
		}
	}
	return ""
}

// errMirrorStale: the mirror is being rebuilt; the statement reads the
// table directly.
var errMirrorStale = errors.New("the engine's mirror of the table is being rebuilt")

// rebuildMirror drops t's mirror, so that the next statement fills it again
// from the lake and the streams, and returns errMirrorStale.
func (f *Frontend) rebuildMirror(ctx context.Context, t *tableInfo, why string) error {
	f.cfg.Logger.Info("rebuilding the engine's mirror of a log table", "table", t.name, "reason", why)
	if err := f.cfg.Engine.DropNativeTables(ctx, func(key string) bool { return key != mirrorKey(t.id) }); err != nil {
		return err
	}
	return errMirrorStale
}

// dropStaleMirrors drops the mirrors of dropped tables.
func (s *session) dropStaleMirrors(ctx context.Context) {
	keys := s.f.cfg.Engine.NativeTableKeys()
	live := map[string]bool{}
	s.f.cfg.Meta.Read(func(v *catalog.View) {
		for _, k := range keys {
			id, err := strconv.ParseUint(strings.TrimPrefix(k, "t"), 10, 64)
			if err == nil {
				if _, ok := v.Tables[catalog.TableID(id)]; ok {
					live[k] = true
				}
			}
		}
	})
	if len(live) == len(keys) {
		return
	}
	_ = s.f.cfg.Engine.DropNativeTables(ctx, func(key string) bool { return live[key] })
}

// SetMirrors turns the mirrors of log tables on (the default) or off; while
// off, every statement reads the buckets. For tests of the bucket path
// (partition pruning, reads of buckets led elsewhere).
func (f *Frontend) SetMirrors(on bool) { f.cfg.Engine.SetNativeTables(on) }
