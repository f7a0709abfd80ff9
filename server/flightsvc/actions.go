package flightsvc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/flightwire"
)

// actionTypes are the actions ListActions advertises.
var actionTypes = []*flight.ActionType{
	{Type: flightwire.ActionDescribeTable, Description: `{"table": name} → the table's columns, bucket key, partitions and the leader of every bucket (JSON)`},
	{Type: flightwire.ActionCreatePartition, Description: `{"table": name, "value": text} → creates the partition if missing, then as describe-table`},
	{Type: flightwire.ActionClusterStatus, Description: `→ nodes (epoch, liveness, Flight location, buckets led), coordinator, applied metadata index (JSON)`},
	{Type: flightwire.ActionBucketEnds, Description: `{"buckets": [id, …]} → {"ends": {id: offset}} for the buckets this node leads and has open`},
	{Type: flightwire.ActionLookup, Description: `{"bucket": id, "keys": [base64 encoded key, …]} → {"rows": [base64 encoded row or null, …], "offset": n}, from the leader of a primary-key bucket`},
	{Type: flightwire.ActionKVWrite, Description: `{"bucket": id, "writes": [{"op", "key", "row", "check_row", "if_row"}, …]} → {"records": [{"type", "key", "row", "write"}, …], "first": offset}: one atomic batch of writes to a primary-key bucket, run by its leader`},
}

// ListActions lists the actions DoAction runs.
func (s *Service) ListActions(_ *flight.Empty, stream flight.FlightService_ListActionsServer) error {
	for _, a := range actionTypes {
		if err := stream.Send(a); err != nil {
			return err
		}
	}
	return nil
}

// DoAction runs one action; bodies and the single result are JSON.
func (s *Service) DoAction(a *flight.Action, stream flight.FlightService_DoActionServer) error {
	ctx := stream.Context()
	var (
		out any
		err error
	)
	// Each action checks the caller's privileges (privileges.go) after
	// decoding its body; cluster-status needs none.
	switch a.GetType() {
	case flightwire.ActionDescribeTable:
		var req flightwire.DescribeTableRequest
		if err = decodeBody(a, &req); err == nil {
			if err = s.authorizeName(ctx, req.Table, anyOf(anyPrivilege)); err == nil {
				out, err = s.describeTable(req.Table)
			}
		}
	case flightwire.ActionCreatePartition:
		var req flightwire.CreatePartitionRequest
		if err = decodeBody(a, &req); err == nil {
			if err = s.authorizeName(ctx, req.Table, all(catalog.PrivInsert)); err == nil {
				out, err = s.createPartition(ctx, req)
			}
		}
	case flightwire.ActionClusterStatus:
		out = s.clusterStatus()
	case flightwire.ActionBucketEnds:
		var req flightwire.BucketEndsRequest
		if err = decodeBody(a, &req); err == nil {
			for _, id := range req.Buckets {
				if err = s.authorizeBucket(ctx, id, anyOf(anyPrivilege)); err != nil {
					break
				}
			}
			if err == nil {
				out = s.localEnds(req.Buckets)
			}
		}
	case flightwire.ActionLookup:
		var req flightwire.KVLookupRequest
		if err = decodeBody(a, &req); err == nil {
			if err = s.authorizeBucket(ctx, req.Bucket, readNeed(ctx)); err == nil {
				out, err = s.kvLookup(req)
			}
		}
	case flightwire.ActionKVWrite:
		var req flightwire.KVWriteRequest
		if err = decodeBody(a, &req); err == nil {
			if err = s.authorizeBucket(ctx, req.Bucket, kvWriteNeed(req.Writes)); err == nil {
				out, err = s.kvWrite(ctx, req)
			}
		}
	default:
		err = status.Errorf(codes.InvalidArgument, "unknown action %q (ListActions lists them)", a.GetType())
	}
	if err != nil {
		return toStatus(err)
	}
	body, err := json.Marshal(out)
	if err != nil {
		return toStatus(err)
	}
	return stream.Send(&flight.Result{Body: body})
}

func decodeBody(a *flight.Action, v any) error {
	if err := json.Unmarshal(a.GetBody(), v); err != nil {
		return status.Errorf(codes.InvalidArgument, "action %s: body: %v", a.GetType(), err)
	}
	return nil
}

// describeTable reads the table's routing information from the view.
func (s *Service) describeTable(name string) (*flightwire.TableInfo, error) {
	var info *flightwire.TableInfo
	s.cfg.Meta.Read(func(v *catalog.View) {
		t, ok := v.TableNamed(name)
		if !ok {
			return
		}
		info = &flightwire.TableInfo{
			ID: uint64(t.ID), Name: t.Spec.Name, PrimaryKey: t.Spec.PrimaryKey, PartitionBy: t.Spec.PartitionBy,
			BucketKey: t.Spec.BucketKey, BucketCount: t.Spec.Buckets,
		}
		info.Columns, info.Dropped = wireColumns(t.Spec)
		info.SchemaTag = flightwire.SchemaTag(info.Columns, info.Dropped)
		bucketInfos := func(ids []catalog.BucketID) []flightwire.BucketInfo {
			out := make([]flightwire.BucketInfo, len(ids))
			for i, id := range ids {
				out[i].ID = uint64(id)
				if b, ok := v.Buckets[id]; ok && b.Leader != 0 {
					out[i].Leader = uint32(b.Leader)
					if n, ok := v.Nodes[b.Leader]; ok && n.Addrs.Flight != "" {
						out[i].Location = flightwire.Location(n.Addrs.Flight)
					}
				}
			}
			return out
		}
		info.Buckets = bucketInfos(t.Buckets)
		parts := make([]*catalog.Partition, 0, len(t.Partitions))
		for _, p := range t.Partitions {
			parts = append(parts, p)
		}
		sort.Slice(parts, func(i, j int) bool { return parts[i].ID < parts[j].ID })
		for _, p := range parts {
			info.Partitions = append(info.Partitions, flightwire.PartitionInfo{Value: p.Value, Buckets: bucketInfos(p.Buckets)})
		}
	})
	if info == nil {
		return nil, flightwire.NotFoundStatus(fmt.Sprintf("table %q does not exist", name), flightwire.ReasonNoSuchTable, 0)
	}
	return info, nil
}

// wireColumns are a table's columns and dropped columns as TableInfo
// carries them.
func wireColumns(spec catalog.TableSpec) (cols []flightwire.Column, dropped []flightwire.DroppedColumn) {
	for _, c := range spec.Columns {
		cols = append(cols, flightwire.Column{Name: c.Name, Type: c.Type, NotNull: c.NotNull, Added: c.Added, Missing: c.Missing})
	}
	for _, d := range spec.Dropped {
		dropped = append(dropped, flightwire.DroppedColumn{Position: d.Position,
			Column: flightwire.Column{Name: catalog.DroppedName(d.Position), Type: d.Column.Type, Added: d.Column.Added, Missing: d.Column.Missing}})
	}
	return cols, dropped
}

// schemaTagOf is the schema tag of the table bucket belongs to, "" if the
// view has no such bucket.
func (s *Service) schemaTagOf(bucket catalog.BucketID) string {
	var tag string
	s.cfg.Meta.Read(func(v *catalog.View) {
		if b, ok := v.Buckets[bucket]; ok {
			if t, ok := v.Tables[b.Table]; ok {
				tag = flightwire.SchemaTag(wireColumns(t.Spec))
			}
		}
	})
	return tag
}

func (s *Service) createPartition(ctx context.Context, req flightwire.CreatePartitionRequest) (*flightwire.TableInfo, error) {
	var id catalog.TableID
	var partitioned bool
	s.cfg.Meta.Read(func(v *catalog.View) {
		if t, ok := v.TableNamed(req.Table); ok {
			id, partitioned = t.ID, t.Spec.PartitionBy != ""
		}
	})
	switch {
	case id == 0:
		return nil, flightwire.NotFoundStatus(fmt.Sprintf("table %q does not exist", req.Table), flightwire.ReasonNoSuchTable, 0)
	case !partitioned:
		return nil, status.Errorf(codes.InvalidArgument, "table %q is not partitioned", req.Table)
	}
	if _, err := s.cfg.Meta.Propose(ctx, catalog.CreatePartition{Table: id, Value: req.Value}); err != nil && !errors.Is(err, catalog.ErrExists) {
		return nil, fmt.Errorf("create partition %q of %q: %w", req.Value, req.Table, err)
	}
	return s.describeTable(req.Table)
}

func (s *Service) clusterStatus() *flightwire.ClusterStatus {
	st := &flightwire.ClusterStatus{AnsweredBy: uint32(s.cfg.Node), AppliedIndex: s.cfg.Meta.AppliedIndex()}
	s.cfg.Meta.Read(func(v *catalog.View) {
		led := map[catalog.NodeID]int{}
		for _, b := range v.Buckets {
			if b.Leader != 0 {
				led[b.Leader]++
			}
		}
		for _, n := range v.Nodes {
			ns := flightwire.NodeStatus{ID: uint32(n.ID), Epoch: n.Epoch, Live: s.cfg.Live(n.ID), BucketsLed: led[n.ID]}
			if n.Addrs.Flight != "" {
				ns.Location = flightwire.Location(n.Addrs.Flight)
			}
			st.Nodes = append(st.Nodes, ns)
		}
		st.Coordinator.Node, st.Coordinator.Epoch = uint32(v.Coordinator.Node), v.Coordinator.Epoch
	})
	sort.Slice(st.Nodes, func(i, j int) bool { return st.Nodes[i].ID < st.Nodes[j].ID })
	return st
}

// localEnds returns the ends of the buckets among ids that this node leads
// and has open.
func (s *Service) localEnds(ids []uint64) flightwire.BucketEnds {
	out := flightwire.BucketEnds{Ends: map[uint64]uint64{}}
	m := s.cfg.Buckets()
	if m == nil {
		return out
	}
	for _, id := range ids {
		if b, err := m.Bucket(catalog.BucketID(id)); err == nil {
			out.Ends[id] = b.End()
		}
	}
	return out
}
