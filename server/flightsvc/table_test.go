package flightsvc

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/minkdb/mink/buckets"
	"github.com/minkdb/mink/buckets/s3stream"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/tiering"
)

// TestConformWithoutAddedColumns: a batch written without the columns
// ALTER TABLE added (by a client or node that has not learned of them) is
// stored with the columns it has; one without a created column, or
// without an added NOT NULL column that has no missing value, is refused.
func TestConformWithoutAddedColumns(t *testing.T) {
	seven := "7"
	tb, err := newTable(&catalog.Table{ID: 1, Spec: catalog.TableSpec{Name: "t", Columns: []catalog.Column{
		{Name: "id", Type: "bigint", NotNull: true},
		{Name: "msg", Type: "text"},
		{Name: "n", Type: "integer", NotNull: true, Added: true, Missing: &seven},
		{Name: "strict", Type: "integer", NotNull: true, Added: true},
	}}}, "t")
	if err != nil {
		t.Fatal(err)
	}
	batch := func(names ...string) arrow.RecordBatch {
		var fields []arrow.Field
		var cols []arrow.Array
		for _, name := range names {
			var a arrow.Array
			switch name {
			case "id":
				b := array.NewInt64Builder(memory.DefaultAllocator)
				b.Append(1)
				a = b.NewArray()
			case "msg":
				b := array.NewStringBuilder(memory.DefaultAllocator)
				b.Append("m")
				a = b.NewArray()
			default:
				b := array.NewInt32Builder(memory.DefaultAllocator)
				b.Append(3)
				a = b.NewArray()
			}
			defer a.Release()
			fields = append(fields, arrow.Field{Name: name, Type: a.DataType(), Nullable: true})
			cols = append(cols, a)
		}
		return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, 1)
	}
	for _, tc := range []struct {
		names []string
		ok    bool
	}{
		{[]string{"id", "msg", "n", "strict"}, true},
		{[]string{"strict", "n", "msg", "id"}, true},
		{[]string{"id", "msg", "n"}, false}, // strict is NOT NULL without a missing value
		{[]string{"id", "msg"}, false},      // idem
		{[]string{"id"}, false},             // msg was created with the table
		{[]string{"msg", "id", "x"}, false}, // not the table's columns
	} {
		rec := batch(tc.names...)
		out, err := tb.conform(rec)
		rec.Release()
		if tc.ok != (err == nil) {
			t.Fatalf("%v: %v", tc.names, err)
		}
		if err == nil {
			if int(out.NumCols()) != len(tc.names) || out.Schema().Field(0).Name != "id" {
				t.Fatalf("%v: stored as %v", tc.names, out.Schema())
			}
			out.Release()
		}
	}

	// Without the NOT NULL column, a batch of the created columns and one
	// that also has n are stored as they are.
	tb2, _ := newTable(&catalog.Table{ID: 1, Spec: catalog.TableSpec{Name: "t", Columns: tb.spec.Columns[:3]}}, "t")
	for _, names := range [][]string{{"id", "msg"}, {"msg", "id"}, {"id", "msg", "n"}} {
		rec := batch(names...)
		out, err := tb2.conform(rec)
		rec.Release()
		if err != nil {
			t.Fatalf("%v: %v", names, err)
		}
		if got := out.Schema().String(); int(out.NumCols()) != len(names) || !strings.Contains(got, "id") {
			t.Fatalf("%v: stored as %s", names, got)
		}
		out.Release()
	}
}

// A lake file that is missing or corrupt (as tiering.ReadBucket reports
// it), or a lake that lacks offsets, is DATA_LOSS, with the file named.
func TestLakeFileErrorStatus(t *testing.T) {
	err := fmt.Errorf("bucket 3: read the lake: %w", &tiering.LakeFileError{Key: "lake/1/data/f.parquet", NotFound: true, Err: errors.New("no such key")})
	st := status.Convert(toStatus(err))
	if st.Code() != codes.DataLoss || !strings.Contains(st.Message(), "bucket 3: read the lake: lake file lake/1/data/f.parquet is missing") {
		t.Fatalf("status %v: %s", st.Code(), st.Message())
	}
	err = fmt.Errorf("%w: it lacks offsets [5, 9)", tiering.ErrLakeIncomplete)
	if st := status.Convert(toStatus(err)); st.Code() != codes.DataLoss {
		t.Fatalf("status %v: %s, want DATA_LOSS", st.Code(), st.Message())
	}
}

// A stream or WAL object that does not decode is DATA_LOSS naming it, also
// for a bucket that is unavailable because of it (a client must not retry
// it as UNAVAILABLE), and a DATA_LOSS from another node is ErrCorrupt
// again, which callers do not retry.
func TestCorruptObjectStatus(t *testing.T) {
	key := "wal/1/00000000000000000002/00000000000000000005"
	lost := fmt.Errorf("bucket 4 cannot be recovered: %w: WAL object %s: %w", buckets.ErrUnavailable, key, s3stream.ErrCorrupt)
	for _, err := range []error{bucketStatus(4, lost), toStatus(fmt.Errorf("read stream 4: object streams/4/x: %w", s3stream.ErrCorrupt))} {
		if st := status.Convert(err); st.Code() != codes.DataLoss {
			t.Fatalf("status %v: %s, want DATA_LOSS", st.Code(), st.Message())
		}
	}
	if st := status.Convert(bucketStatus(4, lost)); !strings.Contains(st.Message(), key) {
		t.Fatalf("status message %q does not name %s", st.Message(), key)
	}
	back := fromStatus("node2:8815", 4, bucketStatus(4, lost))
	if !errors.Is(back, s3stream.ErrCorrupt) || buckets.Retryable(back) || !strings.Contains(back.Error(), key) {
		t.Fatalf("DATA_LOSS from another node: %v, want ErrCorrupt naming %s, not retryable", back, key)
	}
}
