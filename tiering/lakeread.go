package tiering

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/sqltypes"
	"github.com/minkdb/mink/objstore"
)

// LakeReader reads lake snapshots for queries (the union read of sqlfront:
// lake rows below the tiered offsets, stream rows from them on). Data files
// and manifests are read through a FileCache when one is given. It keeps the
// newest metadata it loaded per table and loads a newer version only when a
// query asks for a snapshot that metadata does not have. Safe for
// concurrent use.
type LakeReader struct {
	lake  *Lake
	cache *FileCache

	mu     sync.Mutex
	tables map[catalog.TableID]table.Metadata
	plans  map[string][]table.FileScanTask
	// footers are the Parquet footers of data files (rowgroups.go).
	footers map[string]footerEntry

	filesRead, filesPruned         atomic.Uint64
	rowGroupsRead, rowGroupsPruned atomic.Uint64
}

// LakeReadStats are a LakeReader's totals since it was made.
type LakeReadStats struct {
	// FilesRead: data files scans read (or counted from their manifest
	// entry). FilesPruned: data files of the buckets scans asked for that
	// a scan's Filter let it skip, by their column bounds.
	FilesRead, FilesPruned uint64
	// RowGroupsRead, RowGroupsPruned: the row groups of the files that
	// filtered scans read, and of those the ones the Filter let them skip
	// by their Parquet statistics. (Unfiltered scans do not count.)
	RowGroupsRead, RowGroupsPruned uint64
}

// Stats returns the reader's totals.
func (r *LakeReader) Stats() LakeReadStats {
	return LakeReadStats{FilesRead: r.filesRead.Load(), FilesPruned: r.filesPruned.Load(),
		RowGroupsRead: r.rowGroupsRead.Load(), RowGroupsPruned: r.rowGroupsPruned.Load()}
}

// maxPlans bounds the plans a LakeReader keeps.
const maxPlans = 256

// NewLakeReader returns a reader of the lake in store (whose URL is base,
// as for NewLake); cache may be nil (every read goes to the store).
func NewLakeReader(store objstore.Store, base string, cache *FileCache) *LakeReader {
	return &LakeReader{lake: NewLake(store, base), cache: cache, tables: map[catalog.TableID]table.Metadata{}, plans: map[string][]table.FileScanTask{}, footers: map[string]footerEntry{}}
}

// Cache returns the reader's cache (nil if none).
func (r *LakeReader) Cache() *FileCache { return r.cache }

// LakeFileError is a lake data file that could not be read: missing from
// the object store (NotFound) or not decodable (corrupt). Key is its object
// key.
type LakeFileError struct {
	Key      string
	NotFound bool
	Err      error
}

func (e *LakeFileError) Error() string {
	if e.NotFound {
		return fmt.Sprintf("lake file %s is missing: %v", e.Key, e.Err)
	}
	return fmt.Sprintf("lake file %s is corrupt: %v", e.Key, e.Err)
}

func (e *LakeFileError) Unwrap() error { return e.Err }

// ScanRequest says what to read of one lake snapshot.
type ScanRequest struct {
	Table    catalog.TableID
	Snapshot int64
	// Schema is the schema of the batches to return: a subset of the
	// table's columns, by name, with the types mink's buckets hold
	// (sqltypes.Column.Type.ArrowType()). No fields: batches with only a
	// row count.
	Schema *arrow.Schema
	// Buckets, if not nil, restricts the read to rows of these buckets
	// (files of other buckets are skipped using their __bucket
	// statistics; every data file holds one bucket); an empty, non-nil
	// list reads nothing. A reader of the table's rows must set it to
	// buckets the table has: a snapshot may hold rows of buckets it no
	// longer has (one taken before the round that deleted them after
	// TRUNCATE or a partition drop, or a late round's), which nil reads.
	Buckets []catalog.BucketID
	// Columns are the table's columns (catalog order), with the missing
	// values of the ones ALTER TABLE added (sqltypes.Column.Missing). A
	// lake file written before a column was added lacks it; its rows read
	// as the column's missing value. A column of Schema or Filter not in
	// Columns reads as NULL where a file lacks it.
	Columns []sqltypes.Column
	// Filter, if not empty, is a conjunction the caller's rows must meet:
	// the scan may skip data files (by the column bounds of their manifest
	// entries) and row groups (by their Parquet statistics) where it cannot
	// hold, and rows it does not hold for. It returns every row the
	// filter holds for; the caller still applies its own condition
	// (predicates Scan cannot use are left out, which only widens the
	// scan).
	Filter []Predicate
}

// Scan calls fn with the batches of the snapshot, file by file, until fn
// returns an error or the files are read. fn must not keep a batch beyond
// its call without retaining it.
func (r *LakeReader) Scan(ctx context.Context, req ScanRequest, fn func(arrow.RecordBatch) error) error {
	if req.Snapshot == 0 {
		return nil
	}
	meta, err := r.metadata(ctx, req.Table, req.Snapshot)
	if err != nil {
		return err
	}
	if lake, asked, ok := req.inLakeNames(meta.CurrentSchema()); ok {
		// Columns renamed since the lake got them (names.go).
		req, fn = lake, toAsked(asked, fn)
	}
	tbl := table.New(ident(req.Table), meta, "", r.fsys(), nil)
	sch := snapshotSchema(meta, req.Snapshot)
	cols := newLakeColumns(req, sch, meta)
	// Predicates on columns no file of the snapshot has hold for all rows
	// or for none, by the columns' missing values.
	for _, p := range req.Filter {
		if c, ok := cols.notInSchema[p.Column]; ok {
			if meets, known := missingMeets(c, p); known && !meets {
				return nil
			}
		}
	}
	fields := make([]string, 0, req.Schema.NumFields())
	for _, f := range req.Schema.Fields() {
		if _, ok := cols.notInSchema[f.Name]; !ok {
			fields = append(fields, f.Name)
		}
	}
	if len(fields) == 0 {
		fields = []string{OffsetColumn}
	}
	var bucketFilter iceberg.BooleanExpression
	if req.Buckets != nil {
		bucketFilter = iceberg.AlwaysFalse{}
		if len(req.Buckets) > 0 {
			vals := make([]int64, len(req.Buckets))
			for i, b := range req.Buckets {
				vals[i] = int64(b)
			}
			bucketFilter = iceberg.IsIn(iceberg.Reference(BucketColumn), vals...)
		}
	}
	baseKey := fmt.Sprintf("%d/%d/%v/%v", req.Table, req.Snapshot, req.Buckets != nil, req.Buckets)
	var filter iceberg.BooleanExpression
	if len(req.Filter) > 0 && sch != nil {
		filter = icebergFilter(sch, req.Filter)
	}
	files := &scanFiles{req: req, tbl: tbl, schema: sch, fields: fields, bucketFilter: bucketFilter, cols: cols,
		scans: map[string]*table.Scan{}}
	files.scans[""] = files.newScan(filter)
	tasks, err := r.plan(ctx, baseKey, req, tbl, fields, bucketFilter, nil)
	if err != nil {
		return err
	}
	if filter != nil {
		all := len(tasks)
		if tasks, err = r.plan(ctx, baseKey+"/"+filterKey(req.Filter), req, tbl, fields, bucketFilter, filter); err != nil {
			return err
		}
		r.filesPruned.Add(uint64(all - len(tasks)))
		r.filesRead.Add(uint64(len(tasks)))
		var parts []table.FileScanTask
		for _, task := range tasks {
			split, groups, kept := r.splitRowGroups(ctx, sch, task, req.Filter)
			parts = append(parts, split...)
			r.rowGroupsRead.Add(uint64(kept))
			r.rowGroupsPruned.Add(uint64(groups - kept))
		}
		tasks = parts
	} else {
		r.filesRead.Add(uint64(len(tasks)))
	}
	return r.readTasks(ctx, files, tasks, req.Schema, filter != nil, fn)
}

// snapshotSchema is the schema of a snapshot's scan (as iceberg-go picks
// it): the schema current when the snapshot was committed.
func snapshotSchema(meta table.Metadata, snapshot int64) *iceberg.Schema {
	if snap := meta.SnapshotByID(snapshot); snap != nil && snap.SchemaID != nil {
		for _, s := range meta.Schemas() {
			if s.ID == *snap.SchemaID {
				return s
			}
		}
	}
	return meta.CurrentSchema()
}

// lakeColumns says which columns a scan reads may be missing from its
// files: the ones ALTER TABLE added after the lake's first schema.
type lakeColumns struct {
	// notInSchema are the columns of the request (Schema and Filter) that
	// the snapshot's schema does not have: no file of the snapshot has
	// them (the lake had not been written since they were added).
	notInSchema map[string]sqltypes.Column
	// added are the columns of the request in the snapshot's schema but
	// not in the lake's first: files written before they were added lack
	// them (the file's footer says).
	added map[string]sqltypes.Column
}

func newLakeColumns(req ScanRequest, sch *iceberg.Schema, meta table.Metadata) lakeColumns {
	cols := lakeColumns{notInSchema: map[string]sqltypes.Column{}, added: map[string]sqltypes.Column{}}
	var first *iceberg.Schema
	for _, s := range meta.Schemas() {
		if first == nil || s.ID < first.ID {
			first = s
		}
	}
	column := func(name string, f *arrow.Field) sqltypes.Column {
		for _, c := range req.Columns {
			if c.Name == name {
				return c
			}
		}
		// Not in Columns: NULL where a file lacks it (a filter column
		// not in Schema is never filled, only evaluated).
		c := sqltypes.Column{Name: name}
		if f != nil {
			c.Type = sqltypes.FromArrowField(*f)
		}
		return c
	}
	see := func(name string, f *arrow.Field) {
		if name == BucketColumn || name == OffsetColumn {
			return
		}
		c := column(name, f)
		if prev, ok := cols.added[name]; ok && prev.Type.Valid() {
			return
		}
		if prev, ok := cols.notInSchema[name]; ok && prev.Type.Valid() {
			return
		}
		switch {
		case sch == nil:
		case !hasField(sch, name):
			cols.notInSchema[name] = c
		case first != nil && !hasField(first, name):
			cols.added[name] = c
		}
	}
	for i := range req.Schema.NumFields() {
		f := req.Schema.Field(i)
		see(f.Name, &f)
	}
	for _, p := range req.Filter {
		see(p.Column, nil)
	}
	return cols
}

func hasField(s *iceberg.Schema, name string) bool {
	_, ok := s.FindFieldByName(name)
	return ok
}

// hasMetrics reports whether counts (a data file's value counts by field
// id) has a count of column name of schema, or of one of its nested fields
// (an interval's struct fields, an array's element: metrics are kept for
// leaves).
func hasMetrics(schema *iceberg.Schema, name string, counts map[int]int64) bool {
	if schema == nil {
		return false
	}
	field, ok := schema.FindFieldByName(name)
	if !ok {
		return false
	}
	var has func(id int, t iceberg.Type) bool
	has = func(id int, t iceberg.Type) bool {
		if _, ok := counts[id]; ok {
			return true
		}
		switch t := t.(type) {
		case *iceberg.StructType:
			for _, f := range t.FieldList {
				if has(f.ID, f.Type) {
					return true
				}
			}
		case *iceberg.ListType:
			return has(t.ElementID, t.Element)
		}
		return false
	}
	return has(field.ID, field.Type)
}

// scanFiles are the scans of one ScanRequest: the scan of the files that
// have every column the request names, and scans of files that lack some
// (their predicates on the columns they lack left out), made as needed.
type scanFiles struct {
	req          ScanRequest
	tbl          *table.Table
	schema       *iceberg.Schema
	fields       []string
	bucketFilter iceberg.BooleanExpression
	cols         lakeColumns

	mu sync.Mutex
	// scans by the sorted names of the columns their files lack, joined
	// by ",": "" is the scan of files that lack none.
	scans map[string]*table.Scan // guarded by mu
}

func (s *scanFiles) newScan(filter iceberg.BooleanExpression, extra ...string) *table.Scan {
	fields := s.fields
	for _, f := range extra {
		if !slices.Contains(fields, f) {
			fields = append(slices.Clip(fields), f)
		}
	}
	opts := []table.ScanOption{table.WithSnapshotID(s.req.Snapshot), table.WithSelectedFields(fields...)}
	rowFilter := s.bucketFilter
	if filter != nil {
		if rowFilter == nil {
			rowFilter = filter
		} else {
			rowFilter = iceberg.NewAnd(rowFilter, filter)
		}
	}
	if rowFilter != nil {
		opts = append(opts, table.WithRowFilter(rowFilter))
	}
	return s.tbl.Scan(opts...)
}

// forFile returns the scan to read a data file with, and the columns of
// the request the file lacks (to be filled with their missing values);
// skip when a predicate on a column the file lacks does not hold for the
// column's missing value (no row of the file is in the result).
func (r *LakeReader) forFile(ctx context.Context, s *scanFiles, task table.FileScanTask) (scan *table.Scan, absent map[string]sqltypes.Column, skip bool, err error) {
	absent = s.cols.notInSchema
	s.mu.Lock()
	scan = s.scans[""]
	s.mu.Unlock()
	if len(s.cols.added) == 0 {
		return scan, absent, false, nil
	}
	// A file with column metrics for the column has it (the common case
	// once the lake has evolved: no footer to read). Metrics can be left
	// out, so their absence proves nothing: the footer tells.
	counts := task.File.ValueCounts()
	known := true
	for name := range s.cols.added {
		if !hasMetrics(s.schema, name, counts) {
			known = false
			break
		}
	}
	if known {
		return scan, absent, false, nil
	}
	meta, _, err := r.footer(ctx, task.File.FilePath())
	if err != nil {
		return nil, nil, false, err
	}
	root := meta.Schema.Root()
	has := map[string]bool{}
	for i := range root.NumFields() {
		has[root.Field(i).Name()] = true
	}
	var lacks []string
	for name := range s.cols.added {
		if !has[name] {
			lacks = append(lacks, name)
		}
	}
	if len(lacks) == 0 {
		return scan, absent, false, nil
	}
	slices.Sort(lacks)
	absent = maps.Clone(absent)
	for _, name := range lacks {
		absent[name] = s.cols.added[name]
	}
	var keep []Predicate
	for _, p := range s.req.Filter {
		c, ok := absent[p.Column]
		if !ok {
			keep = append(keep, p)
			continue
		}
		if meets, known := missingMeets(c, p); known && !meets {
			return nil, nil, true, nil
		}
	}
	key := strings.Join(lacks, ",")
	s.mu.Lock()
	defer s.mu.Unlock()
	if scan = s.scans[key]; scan == nil {
		var filter iceberg.BooleanExpression
		if len(keep) > 0 && s.schema != nil {
			filter = icebergFilter(s.schema, keep)
		}
		// Every file has the offset column: selected too, so that a scan
		// whose columns the file all lacks still reads its rows (conform
		// drops it).
		scan = s.newScan(filter, OffsetColumn)
		s.scans[key] = scan
	}
	return scan, absent, false, nil
}

// plan returns the data files of a scan of req's snapshot with the bucket
// filter and the column filter (either may be nil), kept under key:
// snapshots never change, so a plan (manifests read and pruned) is kept.
func (r *LakeReader) plan(ctx context.Context, key string, req ScanRequest, tbl *table.Table, fields []string, buckets, filter iceberg.BooleanExpression) ([]table.FileScanTask, error) {
	r.mu.Lock()
	tasks, ok := r.plans[key]
	r.mu.Unlock()
	if ok {
		return tasks, nil
	}
	opts := []table.ScanOption{table.WithSnapshotID(req.Snapshot), table.WithSelectedFields(fields...)}
	switch {
	case buckets != nil && filter != nil:
		opts = append(opts, table.WithRowFilter(iceberg.NewAnd(buckets, filter)))
	case buckets != nil:
		opts = append(opts, table.WithRowFilter(buckets))
	case filter != nil:
		opts = append(opts, table.WithRowFilter(filter))
	}
	tasks, err := tbl.Scan(opts...).PlanFiles(ctx)
	if err != nil {
		return nil, fmt.Errorf("plan lake scan of table %d snapshot %d: %w", req.Table, req.Snapshot, err)
	}
	// Files in name order (bucket, then offset): deterministic output.
	slices.SortFunc(tasks, func(a, b table.FileScanTask) int { return strings.Compare(a.File.FilePath(), b.File.FilePath()) })
	r.mu.Lock()
	if len(r.plans) >= maxPlans {
		clear(r.plans)
	}
	r.plans[key] = tasks
	r.mu.Unlock()
	return tasks, nil
}

// countBatchRows is the size of the column-less batches of a row count.
const countBatchRows = 1 << 20

// scanWorkers is the number of data files a Scan decodes at once.
var scanWorkers = runtime.GOMAXPROCS(0)

// readTasks decodes up to scanWorkers files at once and passes their
// batches to fn in task order.
func (r *LakeReader) readTasks(ctx context.Context, scan *scanFiles, tasks []table.FileScanTask, schema *arrow.Schema, filtered bool, fn func(arrow.RecordBatch) error) error {
	workers := min(scanWorkers, len(tasks))
	if workers <= 1 {
		for _, task := range tasks {
			if err := r.readTask(ctx, scan, task, schema, filtered, fn); err != nil {
				return err
			}
		}
		return nil
	}
	type result struct {
		recs []arrow.RecordBatch
		err  error
		done chan struct{}
	}
	results := make([]*result, len(tasks))
	for i := range results {
		results[i] = &result{done: make(chan struct{})}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, workers)
	go func() {
		for i, task := range tasks {
			res := results[i]
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				res.err = ctx.Err()
				close(res.done)
				continue
			}
			go func() {
				defer func() { <-sem }()
				res.err = r.readTask(ctx, scan, task, schema, filtered, func(rec arrow.RecordBatch) error {
					rec.Retain()
					res.recs = append(res.recs, rec)
					return nil
				})
				close(res.done)
			}()
		}
	}()
	var err error
	for _, res := range results {
		<-res.done
		if err == nil {
			err = res.err
		}
		for _, rec := range res.recs {
			if err == nil {
				err = fn(rec)
			}
			rec.Release()
		}
		if err != nil {
			cancel()
		}
	}
	return err
}

func (r *LakeReader) readTask(ctx context.Context, files *scanFiles, task table.FileScanTask, schema *arrow.Schema, filtered bool, fn func(arrow.RecordBatch) error) error {
	key, ok := strings.CutPrefix(task.File.FilePath(), r.lake.base+"/")
	if !ok {
		return fmt.Errorf("lake file %s is outside the object store %s", task.File.FilePath(), r.lake.base)
	}
	if schema.NumFields() == 0 && !filtered && task.Start == 0 && task.Length == task.File.FileSizeBytes() &&
		len(task.DeleteFiles)+len(task.EqualityDeleteFiles)+len(task.DeletionVectorFiles) == 0 {
		// Only the number of rows: the whole file is in the scan (every
		// file holds one bucket, so a bucket filter keeps or skips whole
		// files) and the manifest records its row count.
		for n := task.File.Count(); n > 0; n -= countBatchRows {
			rec := array.NewRecordBatch(schema, nil, min(n, countBatchRows))
			err := fn(rec)
			rec.Release()
			if err != nil {
				return err
			}
		}
		return nil
	}
	if r.cache != nil {
		// Fetch first: a store error is not corruption.
		f, err := r.cache.open(ctx, r.lake.store, key)
		if errors.Is(err, objstore.ErrNotFound) {
			return &LakeFileError{Key: key, NotFound: true, Err: err}
		}
		if errors.Is(err, errCorruptFile) {
			return &LakeFileError{Key: key, Err: err}
		}
		if err != nil {
			return fmt.Errorf("read lake file %s: %w", key, err)
		}
		f.Close()
	}
	scan, absent, skip, err := r.forFile(ctx, files, task)
	if err != nil {
		return r.fileError(ctx, key, err)
	}
	if skip {
		r.filesPruned.Add(1)
		r.filesRead.Add(^uint64(0))
		return nil
	}
	_, it, err := scan.ReadTasks(ctx, []table.FileScanTask{task})
	if err != nil {
		return r.fileError(ctx, key, err)
	}
	for rec, err := range it {
		if err != nil {
			return r.fileError(ctx, key, err)
		}
		out, err := conform(rec, schema, absent)
		rec.Release()
		if err != nil {
			return fmt.Errorf("lake file %s: %w", key, err)
		}
		err = fn(out)
		out.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

func (r *LakeReader) fileError(ctx context.Context, key string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if r.cache != nil {
		r.cache.forget(key)
	}
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, objstore.ErrNotFound) {
		return &LakeFileError{Key: key, NotFound: true, Err: err}
	}
	return &LakeFileError{Key: key, Err: err}
}

// metadata returns metadata of table id that has snapshot.
func (r *LakeReader) metadata(ctx context.Context, id catalog.TableID, snapshot int64) (table.Metadata, error) {
	r.mu.Lock()
	meta := r.tables[id]
	r.mu.Unlock()
	if meta != nil && meta.SnapshotByID(snapshot) != nil {
		return meta, nil
	}
	version, err := r.lake.currentVersion(ctx, id)
	if err != nil {
		return nil, err
	}
	if version == 0 {
		return nil, fmt.Errorf("lake of table %d has no metadata (snapshot %d expected)", id, snapshot)
	}
	key := metadataKey(id, version)
	data, err := r.lake.store.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read lake metadata %s: %w", key, err)
	}
	meta, err = table.ParseMetadataBytes(data)
	if err != nil {
		return nil, fmt.Errorf("parse lake metadata %s: %w", key, err)
	}
	if meta.SnapshotByID(snapshot) == nil {
		return nil, fmt.Errorf("lake metadata %s has no snapshot %d", key, snapshot)
	}
	r.mu.Lock()
	if old := r.tables[id]; old == nil || old.LastSequenceNumber() <= meta.LastSequenceNumber() {
		r.tables[id] = meta
	}
	r.mu.Unlock()
	return meta, nil
}

func (r *LakeReader) fsys() table.FSysF {
	return func(ctx context.Context) (iceio.IO, error) {
		return &cachedIO{storeIO: storeIO{ctx: ctx, store: r.lake.store, base: r.lake.base}, cache: r.cache}, nil
	}
}

// cachedIO is storeIO whose reads go through a FileCache.
type cachedIO struct {
	storeIO
	cache *FileCache
}

func (c *cachedIO) Open(name string) (iceio.File, error) {
	if c.cache == nil {
		return c.storeIO.Open(name)
	}
	key, err := c.key(name)
	if err != nil {
		return nil, err
	}
	f, err := c.cache.open(c.ctx, c.store, key)
	if errors.Is(err, objstore.ErrNotFound) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return f, nil
}

// conform turns a batch read by iceberg-go (Iceberg's Arrow types) into
// one of schema (mink's bucket types), matching columns by name; the
// columns absent from the batch's file are filled with their missing
// values.
func conform(rec arrow.RecordBatch, schema *arrow.Schema, absent map[string]sqltypes.Column) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, schema.NumFields())
	release := func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}
	for i, f := range schema.Fields() {
		if c, ok := absent[f.Name]; ok {
			a, err := sqltypes.FillArray(c.Type, c.Missing, int(rec.NumRows()), nil)
			if err == nil && !arrow.TypeEqual(a.DataType(), f.Type) {
				a.Release()
				err = fmt.Errorf("missing value of type %s, the scan asks for %s", a.DataType(), f.Type)
			}
			if err != nil {
				release()
				return nil, fmt.Errorf("column %q: %w", f.Name, err)
			}
			cols[i] = a
			continue
		}
		idx := rec.Schema().FieldIndices(f.Name)
		if len(idx) != 1 {
			release()
			return nil, fmt.Errorf("column %q missing", f.Name)
		}
		c, err := convertArray(rec.Column(idx[0]), f.Type)
		if err != nil {
			release()
			return nil, fmt.Errorf("column %q: %w", f.Name, err)
		}
		cols[i] = c
	}
	out := array.NewRecordBatch(schema, cols, rec.NumRows())
	release()
	return out, nil
}

// convertArray returns a as type to (a new reference).
func convertArray(a arrow.Array, to arrow.DataType) (arrow.Array, error) {
	if arrow.TypeEqual(a.DataType(), to) {
		a.Retain()
		return a, nil
	}
	if ext, ok := to.(arrow.ExtensionType); ok {
		inner, err := convertArray(a, ext.StorageType())
		if err != nil {
			return nil, err
		}
		defer inner.Release()
		return array.NewExtensionArrayWithStorage(ext, inner), nil
	}
	if e, ok := a.(array.ExtensionArray); ok {
		return convertArray(e.Storage(), to)
	}
	if arrow.TypeEqual(a.DataType(), to) {
		a.Retain()
		return a, nil
	}
	if out, ok, err := convertLakeType(a, to); ok {
		return out, err
	}
	return compute.CastArray(context.Background(), a, compute.UnsafeCastOptions(to))
}

// DataFiles returns the object keys of the data files of a lake snapshot
// of table id (0: the current snapshot), in name order. Other engines (the
// DuckDB peer of the lake query benchmark) read exactly these.
func (r *LakeReader) DataFiles(ctx context.Context, id catalog.TableID, snapshot int64) ([]string, error) {
	if snapshot == 0 {
		tbl, err := r.lake.Load(ctx, id)
		if err != nil {
			return nil, err
		}
		if tbl == nil || tbl.CurrentSnapshot() == nil {
			return nil, nil
		}
		snapshot = tbl.CurrentSnapshot().SnapshotID
	}
	meta, err := r.metadata(ctx, id, snapshot)
	if err != nil {
		return nil, err
	}
	tasks, err := table.New(ident(id), meta, "", r.fsys(), nil).Scan(table.WithSnapshotID(snapshot)).PlanFiles(ctx)
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(tasks))
	for _, t := range tasks {
		k, ok := strings.CutPrefix(t.File.FilePath(), r.lake.base+"/")
		if !ok {
			return nil, fmt.Errorf("lake file %s is outside the object store %s", t.File.FilePath(), r.lake.base)
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys, nil
}
