package sqlfront

import (
	"context"
	"fmt"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/minkdb/mink/buckets"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/sqltypes"
	"github.com/minkdb/mink/kv/kvcodec"
)

// ChangelogSuffix names the changelog view of a primary-key table:
// SELECT … FROM "t$changelog".
const changelogSuffix = "$changelog"

// Columns of the changelog view before the table's own.
const (
	offsetColumn = "_offset"
	bucketColumn = "_bucket"
)

// registerChangelog registers the changelog view of a table and returns a
// release that also calls release. A primary-key table's changelog is its
// KV changelog; a log table's is its rows, every one an insert (+I), at
// the offsets Kafka consumers see.
func (r *tableRegistry) registerChangelog(ctx context.Context, info *tableInfo, release func()) (func(), error) {
	cols := []sqltypes.Column{
		{Name: kvcodec.ChangeTypeColumn, Type: mustType("text"), NotNull: true},
		{Name: offsetColumn, Type: mustType("bigint"), NotNull: true},
		{Name: bucketColumn, Type: mustType("bigint"), NotNull: true},
	}
	cols = append(cols, info.cols...)
	src := &changelogSource{r: r, info: info, schema: sqltypes.Schema(cols)}
	rel, err := r.s.conn.Register(ctx, info.name+changelogSuffix, src)
	if err != nil {
		release()
		return nil, fmt.Errorf("register the changelog of %q: %w", info.name, err)
	}
	return func() { rel(); release() }, nil
}

func mustType(name string) sqltypes.Type {
	t, err := sqltypes.Parse(name)
	if err != nil {
		panic(err)
	}
	return t
}

// changelogSource is the engine source of "t$changelog": every record of
// every bucket's changelog up to its acknowledged end, by bucket and offset.
type changelogSource struct {
	r      *tableRegistry
	info   *tableInfo
	schema *arrow.Schema
}

func (c *changelogSource) Schema() *arrow.Schema { return c.schema }

func (c *changelogSource) Open(ctx context.Context, columns []int) (array.RecordReader, error) {
	f := c.r.s.f
	var ids []catalog.BucketID
	f.cfg.Meta.Read(func(v *catalog.View) { ids = v.BucketsOf(c.info.id) })
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	var out []arrow.RecordBatch
	defer func() { releaseAll(out) }()
	for _, id := range ids {
		if !c.info.isPK() {
			rows, err := f.readBucket(ctx, id)
			if err != nil {
				return nil, fmt.Errorf("read the changelog of %q: %w", c.info.name, err)
			}
			for i, b := range rows {
				rec, err := c.logChanges(b.Record, b.Offset, id)
				b.Record.Release()
				if err != nil {
					buckets.ReleaseBatches(rows[i+1:])
					return nil, fmt.Errorf("read the changelog of %q: %w", c.info.name, err)
				}
				out = append(out, project(rec, columns))
				rec.Release()
			}
			continue
		}
		b, err := f.kvBucket(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("read the changelog of %q: %w", c.info.name, err)
		}
		got, err := b.Changelog(ctx)
		if err != nil {
			return nil, fmt.Errorf("read the changelog of %q: %w", c.info.name, err)
		}
		for i, g := range got {
			rec, err := c.withOffsets(g.Record, g.Offset, id)
			g.Record.Release()
			if err != nil {
				for _, g := range got[i+1:] {
					g.Record.Release()
				}
				return nil, fmt.Errorf("read the changelog of %q: %w", c.info.name, err)
			}
			out = append(out, project(rec, columns))
			rec.Release()
		}
	}
	return array.NewRecordReader(projectSchema(c.schema, columns), out)
}

// logChanges turns a stored batch of a log table into a batch of the
// view's schema: every row an insert.
func (c *changelogSource) logChanges(rec arrow.RecordBatch, first uint64, bucket catalog.BucketID) (arrow.RecordBatch, error) {
	wide, err := sqltypes.Widen(rec, c.info.stored, nil)
	if err != nil {
		return nil, err
	}
	defer wide.Release()
	tb := array.NewStringBuilder(memory.DefaultAllocator)
	defer tb.Release()
	for i := 0; i < int(wide.NumRows()); i++ {
		tb.Append("+I")
	}
	types := tb.NewArray()
	defer types.Release()
	cols := append([]arrow.Array{types}, wide.Columns()...)
	fields := append([]arrow.Field{{Name: kvcodec.ChangeTypeColumn, Type: arrow.BinaryTypes.String}}, wide.Schema().Fields()...)
	changes := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, wide.NumRows())
	defer changes.Release()
	return c.withOffsets(changes, first, bucket)
}

// withOffsets turns a changelog batch (_change_type, columns) into a batch
// of the view's schema. A batch written before ALTER TABLE … ADD COLUMN
// has fewer columns: the added ones read as their missing values; the
// dropped ones are left out.
func (c *changelogSource) withOffsets(rec arrow.RecordBatch, first uint64, bucket catalog.BucketID) (arrow.RecordBatch, error) {
	if int(rec.NumCols()) < 1+len(c.info.stored) || len(c.info.stored) > len(c.info.cols) {
		cols := append([]sqltypes.Column{{Name: kvcodec.ChangeTypeColumn, Type: mustType("text"), NotNull: true}}, c.info.stored...)
		wide, err := sqltypes.Widen(rec, cols, nil)
		if err != nil {
			return nil, err
		}
		defer wide.Release()
		rec = wide
	}
	n := int(rec.NumRows())
	ob := array.NewInt64Builder(memory.DefaultAllocator)
	bb := array.NewInt64Builder(memory.DefaultAllocator)
	defer ob.Release()
	defer bb.Release()
	for i := 0; i < n; i++ {
		ob.Append(int64(first) + int64(i))
		bb.Append(int64(bucket))
	}
	offs, bks := ob.NewArray(), bb.NewArray()
	defer offs.Release()
	defer bks.Release()
	cols := []arrow.Array{rec.Column(0), offs, bks}
	cols = append(cols, rec.Columns()[1:]...)
	return array.NewRecordBatch(c.schema, cols, int64(n)), nil
}
