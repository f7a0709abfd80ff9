package tiering

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// convertLakeType converts a lake column that Arrow's casts do not map to
// its bucket type: an interval's struct (months int32, days int32,
// nanoseconds int64; docs/format/lake.md) to MonthDayNanoInterval, and a
// list (any element field name, e.g. Iceberg's "element") to the bucket's
// list, its elements converted by convertArray. ok is false for every
// other pair of types.
func convertLakeType(a arrow.Array, to arrow.DataType) (out arrow.Array, ok bool, err error) {
	if lt, isList := to.(*arrow.ListType); isList {
		return convertList(a, lt)
	}
	if to.ID() != arrow.INTERVAL_MONTH_DAY_NANO {
		return nil, false, nil
	}
	st, isStruct := a.(*array.Struct)
	if !isStruct {
		return nil, false, nil
	}
	if err := checkIntervalStruct(st); err != nil {
		return nil, true, err
	}
	return intervalsOfStruct(st), true, nil
}

// checkIntervalStruct reports a lake interval struct whose fields are not
// the ones mink writes.
func checkIntervalStruct(st *array.Struct) error {
	typ := st.DataType().(*arrow.StructType)
	want := []struct {
		name string
		id   arrow.Type
	}{{intervalMonths, arrow.INT32}, {intervalDays, arrow.INT32}, {intervalNanoseconds, arrow.INT64}}
	for _, w := range want {
		i, ok := typ.FieldIdx(w.name)
		if !ok || typ.Field(i).Type.ID() != w.id {
			return fmt.Errorf("interval struct %s has no %s field of type %s", typ, w.name, w.id)
		}
	}
	return nil
}

// intervalsOfStruct builds the intervals of an interval struct that
// checkIntervalStruct accepted.
func intervalsOfStruct(st *array.Struct) arrow.Array {
	typ := st.DataType().(*arrow.StructType)
	field := func(name string) arrow.Array {
		i, _ := typ.FieldIdx(name)
		return st.Field(i)
	}
	months := field(intervalMonths).(*array.Int32)
	days := field(intervalDays).(*array.Int32)
	nanos := field(intervalNanoseconds).(*array.Int64)
	b := array.NewMonthDayNanoIntervalBuilder(memory.DefaultAllocator)
	defer b.Release()
	b.Reserve(st.Len())
	for i := range st.Len() {
		if st.IsNull(i) {
			b.AppendNull()
			continue
		}
		b.Append(arrow.MonthDayNanoInterval{Months: months.Value(i), Days: days.Value(i), Nanoseconds: nanos.Value(i)})
	}
	return b.NewArray()
}

// convertList converts a List to the list type to (a LargeList, which
// mink does not write, is an error).
func convertList(a arrow.Array, to *arrow.ListType) (arrow.Array, bool, error) {
	switch l := a.(type) {
	case *array.List:
		elems, err := convertArray(l.ListValues(), to.Elem())
		if err != nil {
			return nil, true, err
		}
		defer elems.Release()
		d := l.Data()
		nd := array.NewData(to, d.Len(), d.Buffers()[:2], []arrow.ArrayData{elems.Data()}, d.NullN(), d.Offset())
		defer nd.Release()
		return array.MakeFromData(nd), true, nil
	case *array.LargeList:
		return nil, true, fmt.Errorf("lake list column of type %s: large lists are not read", a.DataType())
	}
	return nil, false, nil
}
