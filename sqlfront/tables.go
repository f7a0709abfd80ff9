package sqlfront

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/minkdb/mink/buckets"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/sqltypes"
	"github.com/minkdb/mink/sqlfront/engine"
	"github.com/minkdb/mink/sqlfront/pgwire"
	"github.com/minkdb/mink/tiering"
)

// tableInfo is what the SQL layer knows about a table, derived from the view.
type tableInfo struct {
	id   catalog.TableID
	name string
	spec catalog.TableSpec
	cols []sqltypes.Column
	// stored are the columns as stored batches hold them: cols with the
	// dropped columns at their places (catalog TableSpec.StoredColumns);
	// cols itself when none was dropped.
	stored []sqltypes.Column
	schema *arrow.Schema
	// buildSchema is buildRecord's schema for cols (buildSchema; nil:
	// buildRecord builds it).
	buildSchema *arrow.Schema
	colIdx      map[string]int
	keyCols     []int // bucket key column indexes; nil: round-robin
	// seqEpoch is the table's catalog.Table.SequenceEpoch.
	seqEpoch uint64
	partCol  int // partition column index, -1 if unpartitioned
}

// newTableInfo derives a tableInfo from a table of the view whose
// qualified name (catalog.View.QualifiedName) is name.
func newTableInfo(t *catalog.Table, name string) (*tableInfo, error) {
	ti := &tableInfo{id: t.ID, name: name, spec: t.Spec, colIdx: map[string]int{}, partCol: -1, seqEpoch: t.SequenceEpoch}
	stored, err := t.Spec.SQLColumns()
	if err != nil {
		return nil, fmt.Errorf("table %q: %w", name, err)
	}
	ti.stored, ti.cols = stored, sqltypes.Visible(stored)
	for i, c := range ti.cols {
		ti.colIdx[c.Name] = i
	}
	ti.schema = sqltypes.Schema(ti.cols)
	ti.buildSchema = buildSchema(ti.cols)
	for _, k := range t.Spec.BucketKey {
		ti.keyCols = append(ti.keyCols, ti.colIdx[k])
	}
	if t.Spec.PartitionBy != "" {
		ti.partCol = ti.colIdx[t.Spec.PartitionBy]
	}
	return ti, nil
}

// widen returns a stored batch of the table as a batch of all its current
// columns under their current names: a batch written before ALTER TABLE …
// ADD COLUMN (or by a node that had not seen it yet) lacks the added
// columns, which read as their missing values, and one written before a
// RENAME COLUMN has the old names (sqltypes.Widen). The result is a new
// reference.
func (t *tableInfo) widen(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	w, err := sqltypes.Widen(rec, t.stored, nil)
	if err != nil {
		return nil, fmt.Errorf("table %q: %w", t.name, err)
	}
	return w, nil
}

// lookupTableByName returns the table whose qualified name is name.
func (f *Frontend) lookupTableByName(name string) (*tableInfo, error) {
	var t *catalog.Table
	f.cfg.Meta.Read(func(v *catalog.View) {
		if tt, ok := v.TableNamed(name); ok {
			t, name = tt, v.TopicName(tt)
		}
	})
	if t == nil {
		return nil, undefinedTable(name)
	}
	return newTableInfo(t, name)
}

// tableRegistry keeps one engine view per table registered on the
// session's DuckDB connection, so that SQL text runs as the user wrote it.
// Each view's source reads the table's current data when a statement scans
// it.
type tableRegistry struct {
	s *session
	// index is the metadata index the registrations were made at.
	index uint64
	// temps is the temporary tables' Generation at the last sync.
	temps uint64
	// views maps table ids to their registration.
	views map[catalog.TableID]*registeredTable
	// partitions, when set for a statement, restricts the scans of a
	// partitioned table to the listed partition values (pruning).
	partitions map[catalog.TableID]map[string]bool
	// lakeFilters, when set for a statement, are conditions the lake part
	// of a table's scan may prune with (lakefilter.go).
	lakeFilters map[catalog.TableID][]tiering.Predicate
	// keys, when set for a statement, restricts the scans of a
	// primary-key table to one key (pk_scan.go): an UPDATE or DELETE
	// whose WHERE fixes the whole key reads that row, not the table.
	keys map[catalog.TableID]*keyScan
}

type registeredTable struct {
	info    *tableInfo
	release func()
}

func newTableRegistry(s *session) *tableRegistry {
	return &tableRegistry{s: s, views: map[catalog.TableID]*registeredTable{}}
}

// sync registers new tables and releases dropped ones.
func (r *tableRegistry) sync(ctx context.Context) error {
	index := r.s.f.cfg.Meta.AppliedIndex()
	if index == r.index && r.index != 0 && r.temps == r.s.temps.Generation() {
		return nil
	}
	var tables []*catalog.Table
	var names []string
	r.s.f.cfg.Meta.Read(func(v *catalog.View) {
		for _, t := range v.Tables {
			tables, names = append(tables, t), append(names, v.TopicName(t))
		}
	})
	live := map[catalog.TableID]bool{}
	for i, t := range tables {
		name := names[i]
		if _, ok := r.s.temps.Lookup(name); ok {
			// Hidden by the session's temporary table (temp.go).
			continue
		}
		live[t.ID] = true
		if rt, ok := r.views[t.ID]; ok {
			if rt.info.name == name && slices.EqualFunc(rt.info.spec.Columns, t.Spec.Columns, func(a, b catalog.Column) bool {
				return a.Name == b.Name && a.Type == b.Type && a.NotNull == b.NotNull
			}) {
				continue
			}
			// ALTER TABLE … ADD COLUMN, RENAME, RENAME COLUMN or ALTER COLUMN: register
			// the table anew.
			rt.release()
			delete(r.views, t.ID)
		}
		info, err := newTableInfo(t, name)
		if err != nil {
			return err
		}
		release, err := r.s.conn.Register(ctx, info.name, &tableSource{r: r, info: info})
		if err != nil {
			return fmt.Errorf("register table %q: %w", info.name, err)
		}
		if release, err = r.registerChangelog(ctx, info, release); err != nil {
			return err
		}
		r.views[t.ID] = &registeredTable{info: info, release: release}
	}
	for id, rt := range r.views {
		if !live[id] {
			rt.release()
			delete(r.views, id)
		}
	}
	r.index, r.temps = index, r.s.temps.Generation()
	return nil
}

func (r *tableRegistry) close() {
	for id, rt := range r.views {
		rt.release()
		delete(r.views, id)
	}
}

// tableSource is an engine.Source over one table's buckets, plus the
// session's own uncommitted writes to it.
type tableSource struct {
	r    *tableRegistry
	info *tableInfo
}

var _ engine.SizedSource = (*tableSource)(nil)

func (t *tableSource) Schema() *arrow.Schema { return t.info.schema }

// EstimatedRows implements engine.SizedSource: the acknowledged ends of the
// table's buckets (offsets count rows), which the engine's planner uses.
func (t *tableSource) EstimatedRows() (int64, bool) {
	m := t.r.s.f.cfg.Buckets()
	if m == nil {
		return -1, false
	}
	var ids []catalog.BucketID
	t.r.s.f.cfg.Meta.Read(func(v *catalog.View) { ids = v.BucketsOf(t.info.id) })
	var rows int64
	for _, id := range ids {
		b, err := m.Bucket(id)
		if err != nil {
			return -1, false
		}
		rows += int64(b.End())
	}
	for _, w := range t.r.s.tx.pending {
		if w.table.id == t.info.id {
			for _, r := range w.records {
				rows += r.NumRows()
			}
		}
	}
	return rows, true
}

// Open reads every bucket of the table (of the selected partitions) up to
// its acknowledged end at the time of the call.
func (t *tableSource) Open(ctx context.Context, columns []int) (array.RecordReader, error) {
	for attempt := 1; ; attempt++ {
		rdr, err := t.open(ctx, columns)
		var te *trimmedError
		if errors.As(err, &te) {
			if attempt < maxTrimRetries {
				// See trimmedError: nothing was returned yet; pin again.
				continue
			}
			return nil, &pgwire.Error{Code: pgwire.CodeSerializationFailure, Message: err.Error(), Hint: "Retry the statement.", Err: err}
		}
		return rdr, err
	}
}

func (t *tableSource) open(ctx context.Context, columns []int) (array.RecordReader, error) {
	f := t.r.s.f
	if t.r.s.tx.status != pgwire.TxIdle {
		if at, truncated := truncatedAt(t.r.s.tx.dropped, t.info.id); truncated {
			if t.info.isPK() {
				return nil, errTruncatedInTx(t.info)
			}
			// The block's TRUNCATE: the table holds the writes after it.
			batches, err := t.pendingBatches(columns, at)
			if err != nil {
				return nil, err
			}
			defer releaseBatches(batches)
			return array.NewRecordReader(projectSchema(t.info.schema, columns), batches)
		}
	}
	var bucketIDs []catalog.BucketID
	filter := t.r.partitions[t.info.id]
	var lake lakePin
	var starts map[catalog.BucketID]uint64 // the streams' starts in the pinned view
	f.cfg.Meta.Read(func(v *catalog.View) {
		tbl, ok := v.Tables[t.info.id]
		if !ok {
			return
		}
		// One view: the lake snapshot and tiered offsets match (lake.go).
		defer func() {
			lake = pinLake(tbl, bucketIDs)
			starts = make(map[catalog.BucketID]uint64, len(bucketIDs))
			for _, id := range bucketIDs {
				if st, ok := v.Streams[catalog.StreamID(id)]; ok {
					starts[id] = st.Start
				}
			}
		}()
		if tbl.Spec.PartitionBy == "" {
			bucketIDs = append(bucketIDs, tbl.Buckets...)
			return
		}
		for _, p := range tbl.Partitions {
			if filter == nil || filter[p.Value] {
				bucketIDs = append(bucketIDs, p.Buckets...)
			}
		}
	})
	sort.Slice(bucketIDs, func(i, j int) bool { return bucketIDs[i] < bucketIDs[j] })
	var batches []arrow.RecordBatch
	release := func() {
		for _, b := range batches {
			b.Release()
		}
	}
	if t.info.isPK() {
		if t.r.keys[t.info.id] == nil { // a key scan is a point read
			f.bucketScans.Add(uint64(len(bucketIDs)))
		}
		return t.openPK(ctx, bucketIDs, columns)
	}
	f.bucketScans.Add(uint64(len(bucketIDs)))
	lakeRdr, err := t.openLake(ctx, lake, bucketIDs, columns, t.r.lakeFilters[t.info.id])
	if err != nil {
		return nil, err
	}
	if pinnedStreamHook != nil {
		pinnedStreamHook(t.info.name)
	}
	for _, id := range bucketIDs {
		got, err := f.readBucketFrom(ctx, id, lake.from(id))
		if err = f.checkStreamFrom(id, max(lake.from(id), starts[id]), got, err); err != nil {
			for _, b := range got {
				b.Record.Release()
			}
			release()
			lakeRdr.close()
			return nil, fmt.Errorf("read table %q: %w", t.info.name, err)
		}
		for i, b := range got {
			wide, err := t.info.widen(b.Record)
			if err != nil {
				for _, b := range got[i:] {
					b.Record.Release()
				}
				release()
				lakeRdr.close()
				return nil, err
			}
			batches = append(batches, project(wide, columns))
			wide.Release()
			b.Record.Release()
		}
	}
	own, err := t.pendingBatches(columns, 0)
	if err != nil {
		release()
		lakeRdr.close()
		return nil, err
	}
	batches = append(batches, own...)
	schema := projectSchema(t.info.schema, columns)
	rdr, err := array.NewRecordReader(schema, batches)
	release()
	if err != nil {
		lakeRdr.close()
		return nil, err
	}
	return lakeRdr.then(rdr), nil
}

// pendingBatches returns the session's own writes to the table from the
// block's pending write from on, widened to the table's columns and
// projected to columns. They are buffered as written, in the table's
// visible columns of the time.
func (t *tableSource) pendingBatches(columns []int, from int) ([]arrow.RecordBatch, error) {
	var out []arrow.RecordBatch
	for _, w := range t.r.s.tx.pending[min(from, len(t.r.s.tx.pending)):] {
		if w.table.id != t.info.id {
			continue
		}
		for _, rec := range w.records {
			// Buffered as the table's columns were at the write: stored
			// form first (NULL where columns were dropped by then), then
			// widened to the columns now.
			stored := sqltypes.Pad(rec, w.table.stored, nil)
			wide, err := t.info.widen(stored)
			stored.Release()
			if err != nil {
				releaseBatches(out)
				return nil, err
			}
			out = append(out, project(wide, columns))
			wide.Release()
		}
	}
	return out, nil
}

func releaseBatches(batches []arrow.RecordBatch) {
	for _, b := range batches {
		b.Release()
	}
}

// readBucket returns every acknowledged batch of a bucket. It waits, up to
// BucketWait, for a bucket that is opening.
func (f *Frontend) readBucket(ctx context.Context, id catalog.BucketID) ([]buckets.Batch, error) {
	var got []buckets.Batch
	err := buckets.Retry(ctx, f.cfg.BucketWait, func() (bool, error) {
		m := f.cfg.Buckets()
		if m == nil {
			return true, buckets.ErrRegistering
		}
		b, err := m.Bucket(id)
		if err == nil {
			got, err = b.Read(ctx, 0, b.End())
			return true, err
		}
		if to, ok := f.ledElsewhere(err); ok {
			// Another node leads it: read it there, including the rows
			// still in that leader's memory.
			got, err = f.cfg.Remote.ReadBucket(ctx, to, id)
		}
		return false, err
	})
	if err != nil {
		return nil, err
	}
	return got, nil
}

func project(rec arrow.RecordBatch, columns []int) arrow.RecordBatch {
	cols := make([]arrow.Array, len(columns))
	for i, c := range columns {
		cols[i] = rec.Column(c)
	}
	return array.NewRecordBatch(projectSchema(rec.Schema(), columns), cols, rec.NumRows())
}

func projectSchema(s *arrow.Schema, columns []int) *arrow.Schema {
	fields := make([]arrow.Field, len(columns))
	for i, c := range columns {
		fields[i] = s.Field(c)
	}
	return arrow.NewSchema(fields, nil)
}
