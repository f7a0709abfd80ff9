package flightsvc

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/flightwire"
	"github.com/minkdb/mink/tiering"
)

// The lake part of a log-table bucket (tiering/lakebucket.go). DoGet
// serves a ticket's rows below the stream's start from the lake snapshot
// the metadata log records for the table, on any node, and the rest from
// the stream; GetFlightInfo hands out the lake part of each bucket as an
// endpoint of its own (no location: any node).

// lakeSplit returns the lake snapshot of table and the offset of bucket id
// below which only the lake holds its rows (the stream's start in the
// view, at most the tiered offset); 0 when the stream holds every row.
func (s *Service) lakeSplit(table catalog.TableID, id catalog.BucketID) (snapshot int64, lakeEnd uint64) {
	s.cfg.Meta.Read(func(v *catalog.View) {
		if st, ok := v.Streams[catalog.StreamID(id)]; ok {
			snapshot, lakeEnd = tiering.LakeSplit(v, table, id, st.Start)
		}
	})
	return snapshot, lakeEnd
}

// sendLake writes the rows [from, to) of bucket id, read from the lake
// snapshot, in offset order, projected to schema. Each message's
// app_metadata is the offset of its first row, as for the stream's rows.
func (s *Service) sendLake(ctx context.Context, w batchWriter, tb *table, id catalog.BucketID, snapshot int64, from, to uint64, schema *arrow.Schema) error {
	if s.cfg.Lake == nil {
		return status.Errorf(codes.Unavailable, "bucket %d: offsets [%d, %d) are only in the lake, and this node has no lake reader", id, from, to)
	}
	req := tiering.BucketRead{Table: tb.id, Snapshot: snapshot, Bucket: id, Schema: schema, Columns: tb.stored, From: from, To: to}
	return s.cfg.Lake.ReadBucket(ctx, req, func(first uint64, rec arrow.RecordBatch) error {
		for start := int64(0); start < rec.NumRows(); start += maxRowsPerMessage {
			part := rec.NewSlice(start, min(start+maxRowsPerMessage, rec.NumRows()))
			meta, _ := json.Marshal(flightwire.BatchMeta{Offset: first + uint64(start)})
			err := w.WriteWithAppMetadata(part, meta)
			part.Release()
			if err != nil {
				return fmt.Errorf("bucket %d: lake offset %d: %w", id, first+uint64(start), err)
			}
		}
		return nil
	})
}
