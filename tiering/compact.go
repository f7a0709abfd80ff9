package tiering

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/parquet-go/parquet-go"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/plan"
)

// Compaction of log tables' lakes. Every round appends at least one file
// per bucket with new rows, so a bucket under steady ingest gets a small
// file per tiering_freshness (1,440 a day at the default minute). Compact
// rewrites runs of a bucket's small files into fewer, larger ones in one
// Iceberg "replace" snapshot: the rows, their order ((__bucket, __offset))
// and the tiered offsets are unchanged, so every reader sees the same
// table. Primary-key tables need none: their rounds rewrite each changed
// bucket whole.
//
// A compacted file has the name of a round's file for the range it covers,
// b<bucket>-<from>-<to>-e<epoch>-c<token>.parquet: it holds rows [from, to)
// of the bucket in offset order, as a round's file does. Only consecutive
// files (one's to is the next one's from) are merged, so that holds.

// DefaultTargetFileSize is the default size compaction aims for.
const DefaultTargetFileSize = 128 << 20

// DefaultCompactMinFiles is the default number of files a run of small
// files of similar size may have before it is compacted.
const DefaultCompactMinFiles = 16

// CompactPolicy says when and how a table's lake is compacted.
type CompactPolicy struct {
	// TargetFileSize: files at least this large are left alone, and
	// compaction writes files up to about this size (and at most 1 Mi
	// rows, like a round).
	TargetFileSize int64
	// MinFiles: a run of consecutive files of a bucket below
	// TargetFileSize and of similar size (compactGroups) is compacted
	// once it has more than MinFiles files. 0 turns compaction off.
	MinFiles int
}

// CompactResult says what one compaction did.
type CompactResult struct {
	// FilesBefore and FilesAfter are the table's data files in the lake
	// before and after.
	FilesBefore, FilesAfter int
	// Rewritten files (BytesRead) were replaced by Written files
	// (BytesWritten) holding Rows rows.
	Rewritten, Written      int
	BytesRead, BytesWritten int64
	Rows                    int64
	// Committed: a replace snapshot (SnapshotID, Sequence) was committed.
	Committed  bool
	SnapshotID int64
	Sequence   uint64
}

// logFile is a data file of a log table's lake: rows [from, to) of bucket.
type logFile struct {
	df       iceberg.DataFile
	key      string
	bucket   catalog.BucketID
	from, to uint64
}

// parseLogFile reads bucket and range from a log table's file name
// (b<bucket>-<from>-<to>-e<epoch>-<token>[-<i>].parquet).
func parseLogFile(loc string) (b catalog.BucketID, from, to uint64, ok bool) {
	parts := strings.SplitN(strings.TrimSuffix(path.Base(loc), ".parquet"), "-", 5)
	if len(parts) < 5 || !strings.HasPrefix(parts[0], "b") || !strings.HasPrefix(parts[3], "e") {
		return 0, 0, 0, false
	}
	id, err1 := strconv.ParseUint(parts[0][1:], 10, 64)
	from, err2 := strconv.ParseUint(parts[1], 10, 64)
	to, err3 := strconv.ParseUint(parts[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || to <= from {
		return 0, 0, 0, false
	}
	return catalog.BucketID(id), from, to, true
}

// similarSize is the largest ratio between the sizes of the files of one
// run of compaction.
const similarSize = 4

// compactGroups picks, in one bucket's files, the groups to rewrite. A run
// is a maximal sequence of consecutive files (each starts at the offset
// where the one before ends) below the target size and of similar size (the
// largest at most similarSize times the smallest); a run of more than
// minFiles files is cut into groups of up to target bytes and maxRows rows,
// and the groups of two files or more are rewritten. Merging only files of
// similar size (size-tiered, like the levels of an LSM tree) keeps a
// compacted file from being merged again with every few new small files:
// each row is rewritten about once per size tier (a factor of more than
// minFiles), not once per compaction.
func compactGroups(files []logFile, target, maxRows int64, minFiles int) [][]logFile {
	slices.SortFunc(files, func(a, b logFile) int {
		if a.from != b.from {
			return cmpUint(a.from, b.from)
		}
		return cmpUint(a.to, b.to)
	})
	var (
		out            [][]logFile
		run            []logFile
		runMin, runMax int64
	)
	pack := func() {
		if len(run) > minFiles {
			var (
				cur   []logFile
				bytes int64
				rows  int64
			)
			for _, f := range run {
				size, n := f.df.FileSizeBytes(), f.df.Count()
				if len(cur) > 0 && (bytes+size > target || rows+n > maxRows) {
					if len(cur) > 1 {
						out = append(out, cur)
					}
					cur, bytes, rows = nil, 0, 0
				}
				cur = append(cur, f)
				bytes += size
				rows += n
			}
			if len(cur) > 1 {
				out = append(out, cur)
			}
		}
		run = nil
	}
	for _, f := range files {
		size := f.df.FileSizeBytes()
		if size >= target {
			pack()
			continue
		}
		if len(run) > 0 && (run[len(run)-1].to != f.from || max(runMax, size) > similarSize*min(runMin, size)) {
			pack()
		}
		if len(run) == 0 {
			runMin, runMax = size, size
		}
		run = append(run, f)
		runMin, runMax = min(runMin, size), max(runMax, size)
	}
	pack()
	return out
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Compact compacts the lake of log table id under coordinator epoch epoch:
// the runs of more than pol.MinFiles consecutive small files of similar
// size in a bucket are rewritten (compactGroups), all in one replace
// snapshot that carries the current snapshot's tiered offsets, which is then
// recorded with CommitTieringRound (so queries pin it). It is fenced like a
// round: ErrFenced before the lake commit leaves only garbage files; after
// it, the next round records the snapshot (repair). A round or expiry that
// commits first makes it fail with ErrLakeConflict (its files are garbage).
// Rounds of the table must not run meanwhile (the caller serializes them).
func (t *Tierer) Compact(ctx context.Context, id catalog.TableID, epoch uint64, pol CompactPolicy) (CompactResult, error) {
	var (
		res CompactResult
		p   plan.TableRound
		err error
	)
	if pol.MinFiles <= 0 {
		return res, nil
	}
	if pol.TargetFileSize <= 0 {
		pol.TargetFileSize = DefaultTargetFileSize
	}
	t.cfg.Meta.Read(func(v *catalog.View) { p, err = plan.Round(v, id) })
	if err != nil {
		return res, err
	}
	if p.Epoch != epoch {
		return res, fmt.Errorf("%w: compaction of table %d under epoch %d, the coordinator is at %d", ErrFenced, id, epoch, p.Epoch)
	}
	if len(p.Spec.PrimaryKey) > 0 {
		return res, nil
	}
	tbl, err := t.lake.Load(ctx, id)
	if err != nil || tbl == nil || tbl.CurrentSnapshot() == nil {
		return res, err
	}
	lakeState, err := stateOf(tbl)
	if err != nil {
		return res, fmt.Errorf("table %q: %w", p.Spec.Name, err)
	}
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		return res, fmt.Errorf("table %q: list lake files: %w", p.Spec.Name, err)
	}
	res.FilesBefore, res.FilesAfter = len(tasks), len(tasks)
	byBucket := map[catalog.BucketID][]logFile{}
	for _, task := range tasks {
		if len(task.DeleteFiles) > 0 {
			return res, fmt.Errorf("table %q: lake file %s has delete files: mink's log lake has none", p.Spec.Name, task.File.FilePath())
		}
		b, from, to, ok := parseLogFile(task.File.FilePath())
		if !ok {
			continue // not a file mink wrote for a log table: left alone
		}
		if p.IsRetired(b) {
			// The lake still holds rows of a bucket the table no longer
			// has (TRUNCATE, a dropped partition): the next round
			// deletes them first. A compaction snapshot would carry them
			// on, and be recorded.
			return res, nil
		}
		if !p.Current(b) {
			continue // a bucket newer than this view: the next pass
		}
		key, ok := strings.CutPrefix(task.File.FilePath(), t.lake.base+"/")
		if !ok {
			return res, fmt.Errorf("table %q: lake file %s is outside the object store %s", p.Spec.Name, task.File.FilePath(), t.lake.base)
		}
		byBucket[b] = append(byBucket[b], logFile{df: task.File, key: key, bucket: b, from: from, to: to})
	}
	var groups [][]logFile
	for _, b := range slices.Sorted(maps.Keys(byBucket)) {
		groups = append(groups, compactGroups(byBucket[b], pol.TargetFileSize, int64(fileRows), pol.MinFiles)...)
	}
	if len(groups) == 0 {
		return res, nil
	}
	ls, err := newLakeSchema(p.Spec)
	if err != nil {
		return res, fmt.Errorf("table %q: %w", p.Spec.Name, err)
	}
	// Compacted files have the table's current columns (files written
	// before a column was added are widened with its missing value), so
	// the lake schema gets them first.
	if tbl, err = t.lake.evolve(ctx, id, tbl, ls); err != nil {
		return res, fmt.Errorf("table %q: %w", p.Spec.Name, err)
	}
	ps := ls.parquetSchema()
	tokenBytes := make([]byte, 8)
	_, _ = rand.Read(tokenBytes)
	token := "c" + hex.EncodeToString(tokenBytes)

	written := make([]writtenFile, len(groups))
	idx := make([]catalog.BucketID, len(groups)) // forEachBucket wants ids; the group index is i
	var mu sync.Mutex
	err = forEachBucket(ctx, idx, func(ctx context.Context, i int, _ catalog.BucketID) error {
		// Heartbeat before each file: a fenced compaction stops early.
		if err := t.checkEpoch(epoch); err != nil {
			return err
		}
		g := groups[i]
		f, read, rows, err := t.rewriteGroup(ctx, ls, ps, g, epoch, token)
		if err != nil {
			return fmt.Errorf("table %q bucket %d [%d, %d): compact %d files: %w", p.Spec.Name, g[0].bucket, g[0].from, g[len(g)-1].to, len(g), err)
		}
		written[i] = f
		mu.Lock()
		res.BytesRead += read
		res.Rows += rows
		mu.Unlock()
		return nil
	})
	if err != nil {
		return res, err
	}
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return res, err
	}
	tx := tbl.NewTransaction()
	props := iceberg.Properties{OffsetsProperty: encodeOffsets(lakeState.Offsets), EpochProperty: strconv.FormatUint(epoch, 10)}
	rw := tx.NewRewrite(props)
	for i, g := range groups {
		for _, f := range g {
			rw.DeleteFile(f.df)
			res.Rewritten++
		}
		df, err := table.FileToDataFile(ctx, fsys, t.lake.Location(written[i].key), tbl.Schema(), tbl.Spec(), 0, tbl.Properties())
		if err != nil {
			return res, fmt.Errorf("table %q: lake file %s: %w", p.Spec.Name, written[i].key, err)
		}
		rw.AddDataFile(df)
		res.Written++
		res.BytesWritten += written[i].size
	}
	if err := rw.Commit(ctx); err != nil {
		return res, fmt.Errorf("table %q: stage the compaction of %d lake files into %d: %w", p.Spec.Name, res.Rewritten, res.Written, err)
	}
	// Heartbeat: do not commit to the lake under a stale epoch.
	if err := t.checkEpoch(epoch); err != nil {
		return res, err
	}
	committed, err := tx.Commit(ctx)
	if err != nil {
		return res, fmt.Errorf("table %q: commit the lake compaction: %w", p.Spec.Name, err)
	}
	snap := committed.CurrentSnapshot()
	res.Committed, res.SnapshotID, res.Sequence = true, snap.SnapshotID, uint64(snap.SequenceNumber)
	res.FilesAfter = res.FilesBefore - res.Rewritten + res.Written
	if err := t.recordCompaction(ctx, epoch, p, lakeState, res.SnapshotID, res.Sequence); err != nil {
		return res, fmt.Errorf("table %q: lake compaction snapshot %d is committed but not recorded (the next round repairs it): %w",
			p.Spec.Name, res.SnapshotID, err)
	}
	return res, nil
}

// recordCompaction proposes the CommitTieringRound of a compaction snapshot
// (plan.TableRound.RecordCompaction: the lake's offsets, and the log's
// tiering time when the log was up to date with the lake).
func (t *Tierer) recordCompaction(ctx context.Context, epoch uint64, p plan.TableRound, base LakeState, snapshotID int64, seq uint64) error {
	rec, ok := p.RecordCompaction(plan.Lake{SnapshotID: base.SnapshotID, Sequence: base.Sequence, Offsets: base.Offsets}, snapshotID, seq, epoch, t.cfg.Now())
	if !ok {
		return nil
	}
	o, err := t.cfg.Meta.Propose(ctx, rec)
	if err == nil {
		err = o.Err
	}
	if errors.Is(err, catalog.ErrStaleEpoch) {
		return fmt.Errorf("%w: %v", ErrFenced, err)
	}
	return err
}

// rewriteGroup writes the rows of a run of consecutive files of one bucket
// into one file of the current lake schema ps (a file written before a
// column was added is widened with its missing value), checking that they
// are exactly rows [from, to) of the bucket in offset order. It returns the
// file, the bytes read and the rows.
func (t *Tierer) rewriteGroup(ctx context.Context, ls *lakeSchema, ps *parquet.Schema, g []logFile, epoch uint64, token string) (writtenFile, int64, int64, error) {
	bucketLeaf, ok1 := ps.Lookup(BucketColumn)
	offsetLeaf, ok2 := ps.Lookup(OffsetColumn)
	if !ok1 || !ok2 {
		return writtenFile{}, 0, 0, fmt.Errorf("the lake schema has no %s or %s column", BucketColumn, OffsetColumn)
	}
	var (
		buf  bytes.Buffer
		read int64
	)
	w := newLakeWriter(&buf, ps)
	b, next := g[0].bucket, g[0].from
	rows := make([]parquet.Row, 256)
	for _, f := range g {
		if next != f.from {
			return writtenFile{}, 0, 0, fmt.Errorf("lake file %s starts at offset %d, the run is at %d", f.key, f.from, next)
		}
		data, err := t.cfg.Store.Get(ctx, f.key)
		if err != nil {
			return writtenFile{}, 0, 0, fmt.Errorf("read lake file %s: %w", f.key, err)
		}
		read += int64(len(data))
		pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return writtenFile{}, 0, 0, fmt.Errorf("lake file %s: %w", f.key, err)
		}
		widener, err := newRowWidener(ls, ps, pf.Schema())
		if err != nil {
			return writtenFile{}, 0, 0, fmt.Errorf("lake file %s: %w", f.key, err)
		}
		r := parquet.NewReader(pf, pf.Schema())
		for {
			n, rerr := r.ReadRows(rows)
			if widener != nil {
				for i, row := range rows[:n] {
					rows[i] = widener.widen(row)
				}
			}
			for _, row := range rows[:n] {
				var gotB, gotOff int64 = -1, -1
				for _, v := range row {
					switch v.Column() {
					case bucketLeaf.ColumnIndex:
						gotB = v.Int64()
					case offsetLeaf.ColumnIndex:
						gotOff = v.Int64()
					}
				}
				if gotB != int64(b) || gotOff != int64(next) {
					r.Close()
					return writtenFile{}, 0, 0, fmt.Errorf("lake file %s: row (%s %d, %s %d) where bucket %d offset %d belongs",
						f.key, BucketColumn, gotB, OffsetColumn, gotOff, b, next)
				}
				next++
			}
			if n > 0 {
				if _, err := w.WriteRows(rows[:n]); err != nil {
					r.Close()
					return writtenFile{}, 0, 0, fmt.Errorf("write Parquet rows: %w", err)
				}
			}
			if rerr != nil {
				if errors.Is(rerr, io.EOF) {
					break
				}
				r.Close()
				return writtenFile{}, 0, 0, fmt.Errorf("lake file %s: %w", f.key, rerr)
			}
			if n == 0 {
				break
			}
		}
		r.Close()
		if next != f.to {
			return writtenFile{}, 0, 0, fmt.Errorf("lake file %s ends at offset %d, its name says %d", f.key, next, f.to)
		}
	}
	if err := w.Close(); err != nil {
		return writtenFile{}, 0, 0, fmt.Errorf("close Parquet writer: %w", err)
	}
	from, to := g[0].from, g[len(g)-1].to
	key := fmt.Sprintf("%sb%d-%d-%d-e%d-%s.parquet", path.Dir(g[0].key)+"/", b, from, to, epoch, token)
	if err := t.cfg.Store.PutIfAbsent(ctx, key, buf.Bytes()); err != nil {
		return writtenFile{}, 0, 0, fmt.Errorf("write lake file %s: %w", key, err)
	}
	return writtenFile{key: key, size: int64(buf.Len())}, read, int64(to - from), nil
}
