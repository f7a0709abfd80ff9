package flightsvc

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/flightwire"
	"github.com/minkdb/mink/tiering"
)

// The lake part of a log-table bucket. Retention trims a bucket's stream
// only below its tiered offset, so the rows below the stream's start are
// in the lake snapshot the metadata log records for the table. DoGet
// serves a ticket's rows below the start from that snapshot, on any node,
// and the rest from the stream; GetFlightInfo hands out the lake part of
// each bucket as an endpoint of its own (no location: any node).

// lakeChunkRows is how many offsets of a bucket's lake part one scan
// reads before its rows are sent, in offset order (about four row groups).
const lakeChunkRows = 512 << 10

// lakeSplit returns the lake snapshot of table and the offset of bucket id
// below which only the lake holds its rows (the stream's start, at most the
// tiered offset); 0 when the stream holds every row.
func (s *Service) lakeSplit(table catalog.TableID, id catalog.BucketID) (snapshot int64, lakeEnd uint64) {
	s.cfg.Meta.Read(func(v *catalog.View) {
		t, ok := v.Tables[table]
		st, sok := v.Streams[catalog.StreamID(id)]
		if !ok || !sok || t.Tiering.LakeSnapshotID == 0 {
			return
		}
		snapshot, lakeEnd = t.Tiering.LakeSnapshotID, min(st.Start, t.Tiering.Offsets[id])
	})
	if lakeEnd == 0 {
		snapshot = 0
	}
	return snapshot, lakeEnd
}

// sendLake writes the rows [from, to) of bucket id, read from the lake
// snapshot, in offset order, projected to schema. Each message's
// app_metadata is the offset of its first row, as for the stream's rows.
func (s *Service) sendLake(ctx context.Context, w *flight.Writer, tb *table, id catalog.BucketID, snapshot int64, from, to uint64, schema *arrow.Schema) error {
	if s.cfg.Lake == nil {
		return status.Errorf(codes.Unavailable, "bucket %d: offsets [%d, %d) are only in the lake, and this node has no lake reader", id, from, to)
	}
	fields := append(slices.Clone(schema.Fields()), arrow.Field{Name: tiering.OffsetColumn, Type: arrow.PrimitiveTypes.Int64})
	readSchema := arrow.NewSchema(fields, nil)
	for lo := from; lo < to; {
		hi := min(lo+lakeChunkRows, to)
		runs, err := s.lakeRuns(ctx, tb, id, snapshot, readSchema, lo, hi)
		if err != nil {
			return err
		}
		err = sendRuns(w, runs, lo, hi, len(schema.Fields()), schema)
		for _, r := range runs {
			r.rec.Release()
		}
		if err != nil {
			return fmt.Errorf("bucket %d: lake offsets [%d, %d): %w", id, lo, hi, err)
		}
		lo = hi
	}
	return nil
}

// run is a slice of lake rows with consecutive offsets from first.
type run struct {
	first uint64
	rec   arrow.RecordBatch
}

// lakeRuns scans the lake snapshot for bucket id's offsets [lo, hi) (the
// __offset bounds of files and row groups prune the scan) and returns the
// rows in range as runs of consecutive offsets, sorted.
func (s *Service) lakeRuns(ctx context.Context, tb *table, id catalog.BucketID, snapshot int64, readSchema *arrow.Schema, lo, hi uint64) ([]run, error) {
	req := tiering.ScanRequest{
		Table: tb.id, Snapshot: snapshot, Schema: readSchema, Columns: tb.cols,
		Buckets: []catalog.BucketID{id},
		Filter: []tiering.Predicate{
			{Column: tiering.OffsetColumn, Op: tiering.PredGe, Values: []any{int64(lo)}},
			{Column: tiering.OffsetColumn, Op: tiering.PredLt, Values: []any{int64(hi)}},
		},
	}
	offCol := len(readSchema.Fields()) - 1
	var runs []run
	release := func() {
		for _, r := range runs {
			r.rec.Release()
		}
	}
	err := s.cfg.Lake.Scan(ctx, req, func(rec arrow.RecordBatch) error {
		offs, ok := rec.Column(offCol).(*array.Int64)
		if !ok {
			return fmt.Errorf("lake column %s is %s, not bigint", tiering.OffsetColumn, rec.Column(offCol).DataType())
		}
		n := offs.Len()
		for i := 0; i < n; {
			if offs.IsNull(i) || uint64(offs.Value(i)) < lo || uint64(offs.Value(i)) >= hi {
				i++
				continue
			}
			j := i + 1
			for j < n && offs.IsValid(j) && offs.Value(j) == offs.Value(j-1)+1 && uint64(offs.Value(j)) < hi {
				j++
			}
			runs = append(runs, run{first: uint64(offs.Value(i)), rec: rec.NewSlice(int64(i), int64(j))})
			i = j
		}
		return nil
	})
	if err != nil {
		release()
		return nil, toStatus(lakeReadError(id, err))
	}
	slices.SortFunc(runs, func(a, b run) int { return cmp.Compare(a.first, b.first) })
	return runs, nil
}

// sendRuns writes runs, which must cover [lo, hi) exactly once, dropping
// the offset column (the last; ncols are the columns sent).
func sendRuns(w *flight.Writer, runs []run, lo, hi uint64, ncols int, schema *arrow.Schema) error {
	next := lo
	for _, r := range runs {
		if r.first != next {
			if r.first < next {
				return status.Errorf(codes.DataLoss, "the lake holds offset %d twice", r.first)
			}
			return status.Errorf(codes.DataLoss, "the lake lacks offsets [%d, %d)", next, r.first)
		}
		cols := make([]arrow.Array, ncols)
		for i := range ncols {
			cols[i] = r.rec.Column(i)
		}
		out := array.NewRecordBatch(schema, cols, r.rec.NumRows())
		for start := int64(0); start < out.NumRows(); start += maxRowsPerMessage {
			part := out.NewSlice(start, min(start+maxRowsPerMessage, out.NumRows()))
			meta, _ := json.Marshal(flightwire.BatchMeta{Offset: r.first + uint64(start)})
			err := w.WriteWithAppMetadata(part, meta)
			part.Release()
			if err != nil {
				out.Release()
				return err
			}
		}
		out.Release()
		next = r.first + uint64(r.rec.NumRows())
	}
	if next != hi {
		return status.Errorf(codes.DataLoss, "the lake lacks offsets [%d, %d)", next, hi)
	}
	return nil
}

// lakeReadError names the bucket in an error of the lake scan; a missing
// or corrupt file keeps its tiering.LakeFileError.
func lakeReadError(id catalog.BucketID, err error) error {
	return fmt.Errorf("bucket %d: read the lake: %w", id, err)
}
