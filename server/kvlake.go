package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/tiering"
)

// kvLakeRows reads a tiered primary-key bucket's rows from a lake snapshot
// (buckets.Config.KVLake): the last resort of a bucket open when none of
// its retained KV snapshots is usable and its changelog is trimmed. It
// reads through the SQL front end's lake reader and its file cache. Lake
// files written before ALTER TABLE … ADD COLUMN lack the column: their rows
// read as the column's missing value, from this node's catalog.
func (s *Server) kvLakeRows(ctx context.Context, table catalog.TableID, snapshot int64, bucket catalog.BucketID, schema *arrow.Schema, fn func(arrow.RecordBatch) error) error {
	r := s.lakeReader.Load()
	if r == nil {
		return errors.New("this node's lake reader is not started")
	}
	var spec *catalog.TableSpec
	s.cat.Read(func(v *catalog.View) {
		if t := v.Tables[table]; t != nil {
			sp := t.Spec
			spec = &sp
		}
	})
	if spec == nil {
		return fmt.Errorf("table %d: %w", table, catalog.ErrNotFound)
	}
	// The stored columns: the lake's match them by position.
	cols, err := spec.SQLColumns()
	if err != nil {
		return fmt.Errorf("table %q: %w", spec.Name, err)
	}
	return r.Scan(ctx, tiering.ScanRequest{Table: table, Snapshot: snapshot, Schema: schema, Buckets: []catalog.BucketID{bucket}, Columns: cols}, fn)
}
