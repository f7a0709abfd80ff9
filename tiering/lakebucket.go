package tiering

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/sqltypes"
)

// The lake part of a log-table bucket. Retention trims a bucket's stream
// only below its tiered offset (docs/tiering.md, "Retention"), so the rows
// below the stream's start are in the lake snapshot the metadata log
// records for the table (catalog.Table.Tiering). Flight's DoGet and the
// Kafka listener's Fetch read them with ReadBucket, in offset order.

// LakeChunkRows is how many offsets of a bucket ReadBucket reads in one
// scan by default (about four row groups).
const LakeChunkRows = 512 << 10

// ErrLakeIncomplete is a lake snapshot that lacks offsets of a bucket
// below its tiered offset, or holds one twice: the rows cannot be served.
var ErrLakeIncomplete = errors.New("the lake does not hold each of the bucket's offsets once")

// LakeSplit returns the lake snapshot of table and the offset of bucket id
// below which only the lake holds its rows: the stream's start (start), at
// most the bucket's tiered offset. It returns 0 and 0 when the lake holds
// none of the rows below start (nothing tiered, or start 0).
// REQUIRES: v is the view, read under its lock (Meta.Read).
func LakeSplit(v *catalog.View, table catalog.TableID, id catalog.BucketID, start uint64) (snapshot int64, lakeEnd uint64) {
	t, ok := v.Tables[table]
	if !ok || t.Tiering.LakeSnapshotID == 0 {
		return 0, 0
	}
	lakeEnd = min(start, t.Tiering.Offsets[id])
	if lakeEnd == 0 {
		return 0, 0
	}
	return t.Tiering.LakeSnapshotID, lakeEnd
}

// BucketRead says which rows of one bucket ReadBucket reads.
type BucketRead struct {
	Table    catalog.TableID
	Snapshot int64
	Bucket   catalog.BucketID
	// Schema is the columns to return, as ScanRequest.Schema (by the
	// table's current names: a renamed column is read under the lake's).
	Schema *arrow.Schema
	// Columns are the table's columns, as ScanRequest.Columns.
	Columns []sqltypes.Column
	// From and To are the offsets [From, To) to read. The snapshot must
	// hold each of them once.
	From, To uint64
	// ChunkRows is how many offsets one scan reads (0: LakeChunkRows).
	ChunkRows uint64
}

// ReadBucket calls fn with the rows [From, To) of the bucket in the lake
// snapshot, in offset order, each call a batch of Schema's columns with
// consecutive offsets from first. fn must not keep rec beyond its call
// without retaining it. ReadBucket stops at fn's first error and returns
// it unwrapped. A scan error is "bucket N: read the lake: …" (a missing or
// corrupt file keeps its *LakeFileError, naming the file); offsets the
// snapshot lacks or holds twice are ErrLakeIncomplete. Each chunk of
// ChunkRows offsets is read and checked before fn sees any of its rows, so
// fn never gets rows of a chunk with a hole.
func (r *LakeReader) ReadBucket(ctx context.Context, req BucketRead, fn func(first uint64, rec arrow.RecordBatch) error) error {
	chunk := req.ChunkRows
	if chunk == 0 {
		chunk = LakeChunkRows
	}
	fields := append(slices.Clone(req.Schema.Fields()), arrow.Field{Name: OffsetColumn, Type: arrow.PrimitiveTypes.Int64})
	readSchema := arrow.NewSchema(fields, nil)
	for lo := req.From; lo < req.To; {
		hi := min(lo+chunk, req.To)
		runs, err := r.bucketRuns(ctx, req, readSchema, lo, hi)
		if err != nil {
			return err
		}
		err = checkRuns(runs, lo, hi)
		for _, run := range runs {
			if err == nil {
				err = fn(run.first, run.rec)
			}
			run.rec.Release()
		}
		if err != nil {
			return err
		}
		lo = hi
	}
	return nil
}

// lakeRun is a slice of lake rows with consecutive offsets from first,
// without the offset column.
type lakeRun struct {
	first uint64
	rec   arrow.RecordBatch
}

// bucketRuns scans the snapshot for the bucket's offsets [lo, hi) (the
// __offset bounds of files and row groups prune the scan) and returns the
// rows in range as runs of consecutive offsets, sorted.
func (r *LakeReader) bucketRuns(ctx context.Context, req BucketRead, readSchema *arrow.Schema, lo, hi uint64) ([]lakeRun, error) {
	scan := ScanRequest{
		Table: req.Table, Snapshot: req.Snapshot, Schema: readSchema, Columns: req.Columns,
		Buckets: []catalog.BucketID{req.Bucket},
		Filter: []Predicate{
			{Column: OffsetColumn, Op: PredGe, Values: []any{int64(lo)}},
			{Column: OffsetColumn, Op: PredLt, Values: []any{int64(hi)}},
		},
	}
	ncols := req.Schema.NumFields()
	var runs []lakeRun
	err := r.Scan(ctx, scan, func(rec arrow.RecordBatch) error {
		offs, ok := rec.Column(ncols).(*array.Int64)
		if !ok {
			return fmt.Errorf("lake column %s is %s, not bigint", OffsetColumn, rec.Column(ncols).DataType())
		}
		cols := make([]arrow.Array, ncols)
		for i := range ncols {
			cols[i] = rec.Column(i)
		}
		data := array.NewRecordBatch(req.Schema, cols, rec.NumRows())
		defer data.Release()
		n := offs.Len()
		for i := 0; i < n; {
			if offs.IsNull(i) || offs.Value(i) < int64(lo) || offs.Value(i) >= int64(hi) {
				i++
				continue
			}
			j := i + 1
			for j < n && offs.IsValid(j) && offs.Value(j) == offs.Value(j-1)+1 && offs.Value(j) < int64(hi) {
				j++
			}
			runs = append(runs, lakeRun{first: uint64(offs.Value(i)), rec: data.NewSlice(int64(i), int64(j))})
			i = j
		}
		return nil
	})
	if err != nil {
		for _, run := range runs {
			run.rec.Release()
		}
		return nil, fmt.Errorf("bucket %d: read the lake: %w", req.Bucket, err)
	}
	slices.SortFunc(runs, func(a, b lakeRun) int { return cmp.Compare(a.first, b.first) })
	return runs, nil
}

// checkRuns reports whether sorted runs cover [lo, hi) exactly once.
func checkRuns(runs []lakeRun, lo, hi uint64) error {
	next := lo
	for _, run := range runs {
		switch {
		case run.first < next:
			return fmt.Errorf("%w: it holds offset %d twice", ErrLakeIncomplete, run.first)
		case run.first > next:
			return fmt.Errorf("%w: it lacks offsets [%d, %d)", ErrLakeIncomplete, next, run.first)
		}
		next = run.first + uint64(run.rec.NumRows())
	}
	if next != hi {
		return fmt.Errorf("%w: it lacks offsets [%d, %d)", ErrLakeIncomplete, next, hi)
	}
	return nil
}
