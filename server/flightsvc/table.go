package flightsvc

import (
	"fmt"
	"sort"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/flightwire"
	"github.com/minkdb/mink/internal/sqltypes"
)

// table is a table as the Flight service sees it, derived from the view
// the way sqlfront derives it (same columns, schema and key columns).
type table struct {
	id   catalog.TableID
	name string
	spec catalog.TableSpec
	cols []sqltypes.Column
	// stored are the columns as stored batches hold them, dropped ones
	// included (catalog TableSpec.SQLColumns); cols are the others.
	stored  []sqltypes.Column
	schema  *arrow.Schema
	keyCols []int // bucket key column indexes; nil: round-robin
	partCol int   // partition column index, -1 if unpartitioned
}

// newTable describes table t, whose qualified name (catalog.View.TopicName)
// is name.
func newTable(t *catalog.Table, name string) (*table, error) {
	tb := &table{id: t.ID, name: name, spec: t.Spec, partCol: -1}
	stored, err := t.Spec.SQLColumns()
	if err != nil {
		return nil, fmt.Errorf("table %q: %w", t.Spec.Name, err)
	}
	tb.stored, tb.cols = stored, sqltypes.Visible(stored)
	idx := map[string]int{}
	for i, c := range tb.cols {
		idx[c.Name] = i
	}
	tb.schema = sqltypes.Schema(tb.cols)
	for _, k := range t.Spec.BucketKey {
		tb.keyCols = append(tb.keyCols, idx[k])
	}
	if t.Spec.PartitionBy != "" {
		tb.partCol = idx[t.Spec.PartitionBy]
	}
	return tb, nil
}

// primaryKey reports a primary-key table, which the service does not
// serve yet.
func (t *table) primaryKey() bool { return len(t.spec.PrimaryKey) > 0 }

// projection returns the column indexes and schema of a projection; nil
// columns mean all.
func (t *table) projection(columns []string) ([]int, *arrow.Schema, error) {
	if columns == nil {
		idx := make([]int, len(t.cols))
		for i := range idx {
			idx[i] = i
		}
		return idx, t.schema, nil
	}
	idx := make([]int, len(columns))
	fields := make([]arrow.Field, len(columns))
	for i, name := range columns {
		j := t.column(name)
		if j < 0 {
			return nil, nil, status.Errorf(codes.InvalidArgument, "column %q of table %q does not exist", name, t.name)
		}
		idx[i], fields[i] = j, t.schema.Field(j)
	}
	return idx, arrow.NewSchema(fields, nil), nil
}

func (t *table) column(name string) int {
	for i, c := range t.cols {
		if c.Name == name {
			return i
		}
	}
	return -1
}

// conform checks a batch written by a client and returns it in the
// table's stored form: the table's columns by name (any order), each
// converted as sqltypes.Conform does. The caller releases the result.
//
// A batch may lack columns that ALTER TABLE … ADD COLUMN added (written by
// a client, or a node, that has not learned of them yet): it is stored
// with the columns it has, which must be all but some of the last ones,
// and its rows read the others as their missing values. A column without
// a missing value (NULL) that is NOT NULL cannot be left out.
func (t *table) conform(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	in := rec.Schema()
	want := t.cols
	if k := int(rec.NumCols()); k < len(want) {
		for i := k; i < len(want); i++ {
			if !t.spec.Columns[i].Added || want[i].NotNull && want[i].Missing == nil {
				return nil, t.columnMismatch(in)
			}
		}
		want = want[:k]
	}
	inOrder := int(rec.NumCols()) == len(want)
	for i := 0; inOrder && i < len(want); i++ {
		inOrder = in.Field(i).Name == want[i].Name
	}
	if !inOrder {
		if int(rec.NumCols()) != len(want) {
			return nil, t.columnMismatch(in)
		}
		cols := make([]arrow.Array, len(want))
		for i, c := range want {
			j := in.FieldIndices(c.Name)
			if len(j) != 1 {
				return nil, t.columnMismatch(in)
			}
			cols[i] = rec.Column(j[0])
		}
		fields := make([]arrow.Field, len(cols))
		for i, c := range cols {
			fields[i] = arrow.Field{Name: want[i].Name, Type: c.DataType(), Nullable: true}
		}
		rec = array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, rec.NumRows())
		defer rec.Release()
	}
	return sqltypes.Conform(t.name, want, rec, nil)
}

func (t *table) columnMismatch(in *arrow.Schema) error {
	want := make([]string, len(t.cols))
	for i, c := range t.cols {
		want[i] = c.Name
	}
	got := make([]string, in.NumFields())
	for i, f := range in.Fields() {
		got[i] = f.Name
	}
	return status.Errorf(codes.InvalidArgument, "table %q has columns (%s); the batch has (%s)",
		t.name, strings.Join(want, ", "), strings.Join(got, ", "))
}

// bucketRef is a bucket of a table and where it is served, as of one view.
type bucketRef struct {
	id        catalog.BucketID
	partition string // the partition value; "" when unpartitioned
	leader    catalog.NodeID
	addr      string // the leader's advertised Flight address; "" if none
}

// resolved is what a command addresses, read from one view.
type resolved struct {
	table   *table
	buckets []bucketRef
}

// resolve finds the table and the buckets cmd addresses: one bucket, or
// every bucket of the table (of the selected partitions), partitions in
// creation order and buckets in index order.
func (s *Service) resolve(cmd flightwire.Command) (*resolved, error) {
	var (
		ct       *catalog.Table
		refs     []bucketRef
		name     string
		problem  error
		leaderOf = func(v *catalog.View, id catalog.BucketID) bucketRef {
			ref := bucketRef{id: id}
			if b, ok := v.Buckets[id]; ok {
				ref.leader = b.Leader
				if n, ok := v.Nodes[b.Leader]; ok {
					ref.addr = n.Addrs.Flight
				}
			}
			return ref
		}
	)
	s.cfg.Meta.Read(func(v *catalog.View) {
		if cmd.Bucket != 0 {
			b, ok := v.Buckets[catalog.BucketID(cmd.Bucket)]
			if !ok {
				problem = flightwire.NotFoundStatus(fmt.Sprintf("bucket %d does not exist", cmd.Bucket), flightwire.ReasonNoSuchBucket, cmd.Bucket)
				return
			}
			ct = v.Tables[b.Table]
			if ct != nil {
				name = v.TopicName(ct)
			}
			if ct == nil || (cmd.Table != "" && name != cmd.Table) {
				problem = flightwire.NotFoundStatus(fmt.Sprintf("bucket %d is not a bucket of table %q", cmd.Bucket, cmd.Table), flightwire.ReasonNoSuchBucket, cmd.Bucket)
				return
			}
			ref := leaderOf(v, b.ID)
			for _, p := range ct.Partitions {
				if p.ID == b.Partition {
					ref.partition = p.Value
				}
			}
			refs = append(refs, ref)
			return
		}
		var ok bool
		if ct, ok = v.TableNamed(cmd.Table); !ok {
			problem = flightwire.NotFoundStatus(fmt.Sprintf("table %q does not exist", cmd.Table), flightwire.ReasonNoSuchTable, 0)
			return
		}
		name = v.TopicName(ct)
		if ct.Spec.PartitionBy == "" {
			if cmd.Partitions != nil {
				problem = status.Errorf(codes.InvalidArgument, "table %q is not partitioned", cmd.Table)
				return
			}
			for _, id := range ct.Buckets {
				refs = append(refs, leaderOf(v, id))
			}
			return
		}
		want := map[string]bool{}
		for _, p := range cmd.Partitions {
			want[p] = true
		}
		parts := make([]*catalog.Partition, 0, len(ct.Partitions))
		for _, p := range ct.Partitions {
			if cmd.Partitions == nil || want[p.Value] {
				parts = append(parts, p)
			}
		}
		sort.Slice(parts, func(i, j int) bool { return parts[i].ID < parts[j].ID })
		for _, p := range parts {
			for _, id := range p.Buckets {
				ref := leaderOf(v, id)
				ref.partition = p.Value
				refs = append(refs, ref)
			}
		}
	})
	if problem != nil {
		return nil, problem
	}
	t, err := newTable(ct, name)
	if err != nil {
		return nil, toStatus(err)
	}
	return &resolved{table: t, buckets: refs}, nil
}
