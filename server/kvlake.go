package server

import (
	"context"
	"errors"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/tiering"
)

// kvLakeRows reads a tiered primary-key bucket's rows from a lake snapshot
// (buckets.Config.KVLake): the last resort of a bucket open when none of
// its retained KV snapshots is usable and its changelog is trimmed. It
// reads through the SQL front end's lake reader and its file cache.
func (s *Server) kvLakeRows(ctx context.Context, table catalog.TableID, snapshot int64, bucket catalog.BucketID, schema *arrow.Schema, fn func(arrow.RecordBatch) error) error {
	r := s.lakeReader.Load()
	if r == nil {
		return errors.New("this node's lake reader is not started")
	}
	return r.Scan(ctx, tiering.ScanRequest{Table: table, Snapshot: snapshot, Schema: schema, Buckets: []catalog.BucketID{bucket}}, fn)
}
