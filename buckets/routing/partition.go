package routing

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// ErrPartitionType: the partition column's type cannot name a partition.
var ErrPartitionType = errors.New("routing: unsupported partition column type")

// PartitionValue is the canonical text of row i of a partition column; it
// names the partition in the metadata log, so it is part of the same
// contract as the hash. NULL is its own partition, named "NULL".
//
//   - text: the value;
//   - smallint, integer, bigint: decimal;
//   - boolean: "true" or "false";
//   - date: YYYY-MM-DD;
//   - timestamp, timestamptz: "2006-01-02 15:04:05.999999" in UTC.
//
// The SQL front end and the Flight service both name partitions with it.
func PartitionValue(arr arrow.Array, i int) (string, error) {
	if arr.IsNull(i) {
		return "NULL", nil
	}
	switch a := arr.(type) {
	case *array.String:
		// Value aliases the array's buffer; the partition name outlives it.
		return strings.Clone(a.Value(i)), nil
	case *array.Int16:
		return strconv.FormatInt(int64(a.Value(i)), 10), nil
	case *array.Int32:
		return strconv.FormatInt(int64(a.Value(i)), 10), nil
	case *array.Int64:
		return strconv.FormatInt(a.Value(i), 10), nil
	case *array.Boolean:
		return strconv.FormatBool(a.Value(i)), nil
	case *array.Date32:
		return a.Value(i).ToTime().Format("2006-01-02"), nil
	case *array.Timestamp:
		unit := a.DataType().(*arrow.TimestampType).Unit
		return a.Value(i).ToTime(unit).UTC().Format("2006-01-02 15:04:05.999999"), nil
	}
	return "", fmt.Errorf("%w: partitioning by a %s column is not supported", ErrPartitionType, arr.DataType())
}

// PartitionPart is the rows of a batch that belong to one partition.
type PartitionPart struct {
	Value  string
	Record arrow.RecordBatch
}

// SplitByPartition groups the rows of rec by the PartitionValue of column
// col, in order of first appearance, keeping row order within a part. The
// caller releases the parts' records.
func SplitByPartition(ctx context.Context, rec arrow.RecordBatch, col int) ([]PartitionPart, error) {
	arr := rec.Column(col)
	var order []string
	rows := map[string][]int64{}
	for i := 0; i < int(rec.NumRows()); i++ {
		v, err := PartitionValue(arr, i)
		if err != nil {
			return nil, err
		}
		if _, ok := rows[v]; !ok {
			order = append(order, v)
		}
		rows[v] = append(rows[v], int64(i))
	}
	if len(order) <= 1 {
		if len(order) == 0 {
			return nil, nil
		}
		rec.Retain()
		return []PartitionPart{{Value: order[0], Record: rec}}, nil
	}
	out := make([]PartitionPart, 0, len(order))
	for _, v := range order {
		b := array.NewInt64Builder(memory.DefaultAllocator)
		b.AppendValues(rows[v], nil)
		idx := b.NewArray()
		b.Release()
		taken, err := compute.Take(ctx, *compute.DefaultTakeOptions(), compute.NewDatumWithoutOwning(rec), compute.NewDatumWithoutOwning(idx))
		idx.Release()
		if err != nil {
			for _, p := range out {
				p.Record.Release()
			}
			return nil, fmt.Errorf("routing: split by partition: %w", err)
		}
		out = append(out, PartitionPart{Value: v, Record: taken.(*compute.RecordDatum).Value})
	}
	return out, nil
}
