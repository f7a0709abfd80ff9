package tiering

import (
	"bytes"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"

	"github.com/minkdb/mink/catalog"
)

// Parquet layout of lake files. A row group of 128 k rows keeps a group's
// column chunks around a few MB for typical rows (good for statistics
// pruning and for readers' memory), and a file holds at most a few row groups
// so that one round of a busy bucket produces a handful of files rather than
// one huge one.
const (
	rowGroupRows = 128 << 10
	pageBuffer   = 256 << 10
)

// newLakeWriter is the writer of every lake Parquet file: zstd, row groups
// of rowGroupRows, page statistics. Pages are version 1 and byte arrays are
// PLAIN (parquet-go's default is DELTA_LENGTH_BYTE_ARRAY in version-2
// pages), the layout every reader decodes: Iceberg's vectorized Spark
// reader refuses delta-encoded strings.
func newLakeWriter(w io.Writer, ps *parquet.Schema) *parquet.GenericWriter[any] {
	return parquet.NewGenericWriter[any](w, ps,
		parquet.Compression(&parquet.Zstd),
		parquet.MaxRowsPerRowGroup(rowGroupRows),
		parquet.PageBufferSize(pageBuffer),
		parquet.DataPageStatistics(true),
		parquet.DataPageVersion(1),
		parquet.DefaultEncodingFor(parquet.ByteArray, &parquet.Plain),
		parquet.CreatedBy("mink", "tiering", ""),
	)
}

// fileRows is the most rows in one lake file (a variable for tests).
var fileRows = 1 << 20

// encodeParquet writes rows [from, to) of bucket, taken from batches (dense
// offsets, in order; batches may extend beyond the range on either side), as
// Parquet files of at most fileRows rows each, and returns their contents.
// Columns are zstd-compressed with page and column-chunk statistics.
func encodeParquet(ls *lakeSchema, bucket catalog.BucketID, batches []Batch, from, to uint64) ([][]byte, error) {
	ps := ls.parquetSchema()
	writers, err := ls.columnWriters(ps)
	if err != nil {
		return nil, err
	}
	nleaves := len(ps.Columns())
	var (
		files [][]byte
		buf   *bytes.Buffer
		w     *parquet.GenericWriter[any]
		inCur int
	)
	flush := func() error {
		if w == nil {
			return nil
		}
		if err := w.Close(); err != nil {
			return fmt.Errorf("close Parquet writer: %w", err)
		}
		files = append(files, buf.Bytes())
		w, buf, inCur = nil, nil, 0
		return nil
	}
	next := from
	rows := make([]parquet.Row, 0, 1024)
	for _, b := range batches {
		n := uint64(b.Record.NumRows())
		if b.Offset+n <= next || b.Offset >= to {
			continue
		}
		if b.Offset > next {
			return nil, fmt.Errorf("bucket %d: offsets %d..%d missing from the stream read", bucket, next, b.Offset)
		}
		if int(b.Record.NumCols()) != len(ls.cols)-2 {
			return nil, fmt.Errorf("bucket %d: batch at offset %d has %d columns, the table has %d",
				bucket, b.Offset, b.Record.NumCols(), len(ls.cols)-2)
		}
		for i := next - b.Offset; i < n && b.Offset+i < to; i++ {
			if w == nil {
				buf = &bytes.Buffer{}
				w = newLakeWriter(buf, ps)
			}
			row, err := appendRow(writers, make(parquet.Row, 0, nleaves), b.Record, 0, int(i), bucket, b.Offset+i)
			if err != nil {
				return nil, fmt.Errorf("bucket %d offset %d: %w", bucket, b.Offset+i, err)
			}
			rows = append(rows, row)
			inCur++
			next = b.Offset + i + 1
			if len(rows) == cap(rows) || inCur == fileRows {
				if _, err := w.WriteRows(rows); err != nil {
					return nil, fmt.Errorf("write Parquet rows: %w", err)
				}
				rows = rows[:0]
			}
			if inCur == fileRows {
				if err := flush(); err != nil {
					return nil, err
				}
			}
		}
	}
	if next < to {
		return nil, fmt.Errorf("bucket %d: the stream read ended at offset %d, the round needs up to %d", bucket, next, to)
	}
	if len(rows) > 0 {
		if _, err := w.WriteRows(rows); err != nil {
			return nil, fmt.Errorf("write Parquet rows: %w", err)
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return files, nil
}
