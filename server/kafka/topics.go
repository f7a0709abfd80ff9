package kafka

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/minkdb/mink/catalog"
)

// topic is a log table as Kafka sees it, read from one view.
type topic struct {
	table *catalog.Table
	// buckets are the topic's partitions: bucket i is partition i.
	buckets []catalog.BucketID
	// partitionOf is the LIST partition value of each bucket of a
	// partitioned table ("" otherwise).
	partitionOf []string
}

// partitionValues is the LIST partition value of each of a topic's
// buckets ("" for an unpartitioned table).
func partitionValues(v *catalog.View, t *catalog.Table, ids []catalog.BucketID) []string {
	values := make([]string, len(ids))
	for i, id := range ids {
		if b, ok := v.Buckets[id]; ok && b.Partition != 0 {
			if p, ok := t.Partitions[b.Partition]; ok {
				values[i] = p.Value
			}
		}
	}
	return values
}

// errNotATopic: the table exists but is a primary-key table.
var errNotATopic = errors.New("is a primary-key table, not a topic")

// lookupTopic finds the log table named name in v.
func lookupTopic(v *catalog.View, name string) (*topic, error) {
	t, ok := v.TableNamed(name)
	if !ok {
		return nil, kerr.UnknownTopicOrPartition
	}
	if len(t.Spec.PrimaryKey) > 0 {
		return nil, fmt.Errorf("table %q %w", name, errNotATopic)
	}
	ids := v.TopicBuckets(t)
	return &topic{table: t, buckets: ids, partitionOf: partitionValues(v, t, ids)}, nil
}

// partitionLeader is the node serving bucket id now: its leader, if that
// node is live, advertises a Kafka listener and holds the bucket's stream
// open at the leader epoch. ok is false otherwise (LEADER_NOT_AVAILABLE).
func (s *Server) partitionLeader(v *catalog.View, id catalog.BucketID) (leader catalog.NodeID, epoch uint64, ok bool) {
	b, found := v.Buckets[id]
	if !found || b.Leader == 0 {
		return 0, 0, false
	}
	n, found := v.Nodes[b.Leader]
	if !found || n.Addrs.Kafka == "" || !s.cfg.Live(b.Leader) {
		return b.Leader, b.LeaderEpoch, false
	}
	st, found := v.Streams[catalog.StreamID(id)]
	if !found || !st.Open || st.Node != b.Leader || st.Epoch != b.LeaderEpoch {
		return b.Leader, b.LeaderEpoch, false
	}
	return b.Leader, b.LeaderEpoch, true
}

// broker is a node as Metadata lists it.
func broker(n *catalog.Node) (kmsg.MetadataResponseBroker, bool) {
	host, portText, err := net.SplitHostPort(n.Addrs.Kafka)
	if err != nil {
		return kmsg.MetadataResponseBroker{}, false
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return kmsg.MetadataResponseBroker{}, false
	}
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID, b.Host, b.Port = int32(n.ID), host, int32(port)
	return b, true
}

// brokers lists the live nodes with a Kafka listener, by id.
func (s *Server) brokers(v *catalog.View) []kmsg.MetadataResponseBroker {
	ids := slices.Sorted(maps.Keys(v.Nodes))
	var out []kmsg.MetadataResponseBroker
	for _, id := range ids {
		if !s.cfg.Live(id) {
			continue
		}
		if b, ok := broker(v.Nodes[id]); ok {
			out = append(out, b)
		}
	}
	return out
}

// metadata answers a Metadata request. A topic on which the connection of
// ss holds no privilege is TOPIC_AUTHORIZATION_FAILED when named, and left
// out of a listing of every topic (Kafka's DESCRIBE).
func (s *Server) metadata(ctx context.Context, ss *session, req *kmsg.MetadataRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	var names []string
	all := req.Topics == nil
	for _, t := range req.Topics {
		if t.Topic != nil {
			names = append(names, *t.Topic)
		}
	}
	// Version 0 asks for every topic with an empty list.
	if req.Version == 0 && len(req.Topics) == 0 {
		all = true
	}
	if s.cfg.AutoCreateTopics && req.AllowAutoTopicCreation && !all {
		var missing []string
		s.cfg.Meta.Read(func(v *catalog.View) {
			for _, name := range names {
				if _, ok := v.TableNamed(name); !ok {
					missing = append(missing, name)
				}
			}
		})
		for _, name := range missing {
			if err := s.createTopic(ctx, name, s.cfg.DefaultPartitions, nil, s.owner(ss)); err != nil && !errors.Is(err, catalog.ErrExists) {
				s.cfg.Logger.Warn("kafka: auto-create topic failed", "topic", name, "err", err)
			}
		}
	}
	s.cfg.Meta.Read(func(v *catalog.View) {
		resp.ClusterID = &s.cfg.Cluster
		resp.ControllerID = int32(v.Coordinator.Node)
		if v.Coordinator.Node == 0 {
			resp.ControllerID = -1
		}
		resp.Brokers = s.brokers(v)
		if all {
			for _, t := range v.Tables {
				if len(t.Spec.PrimaryKey) == 0 && s.describes(v, ss, t) {
					names = append(names, v.TopicName(t))
				}
			}
			sort.Strings(names)
		}
		for _, name := range names {
			if t, ok := v.TableNamed(name); ok && len(t.Spec.PrimaryKey) == 0 && !s.describes(v, ss, t) {
				mt := kmsg.NewMetadataResponseTopic()
				mt.Topic = &name
				mt.ErrorCode = kerr.TopicAuthorizationFailed.Code
				resp.Topics = append(resp.Topics, mt)
				continue
			}
			resp.Topics = append(resp.Topics, s.topicMetadata(v, name))
		}
	})
	return resp
}

func (s *Server) topicMetadata(v *catalog.View, name string) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic = &name
	tp, err := lookupTopic(v, name)
	if err != nil {
		mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
		return mt
	}
	for i, id := range tp.buckets {
		p := kmsg.NewMetadataResponseTopicPartition()
		p.Partition = int32(i)
		leader, epoch, ok := s.partitionLeader(v, id)
		if ok {
			p.Leader = int32(leader)
			p.LeaderEpoch = int32(epoch)
			p.Replicas = []int32{int32(leader)}
			p.ISR = []int32{int32(leader)}
		} else {
			p.ErrorCode = kerr.LeaderNotAvailable.Code
			p.Leader = -1
			p.LeaderEpoch = -1
		}
		mt.Partitions = append(mt.Partitions, p)
	}
	return mt
}

func (s *Server) describeCluster(req *kmsg.DescribeClusterRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	s.cfg.Meta.Read(func(v *catalog.View) {
		resp.ClusterID = s.cfg.Cluster
		resp.ControllerID = int32(v.Coordinator.Node)
		for _, b := range s.brokers(v) {
			db := kmsg.NewDescribeClusterResponseBroker()
			db.NodeID, db.Host, db.Port = b.NodeID, b.Host, b.Port
			resp.Brokers = append(resp.Brokers, db)
		}
	})
	return resp
}

// kafkaShape is the table a topic created through Kafka gets.
var kafkaShape = []catalog.Column{
	{Name: "key", Type: "bytea"},
	{Name: "value", Type: "bytea"},
	{Name: "headers", Type: "jsonb"},
	{Name: "ts", Type: "timestamptz"},
}

// createTopic creates the Kafka-shaped log table name with partitions
// buckets and table options opts, owned by owner.
func (s *Server) createTopic(ctx context.Context, name string, partitions int, opts map[string]string, owner catalog.RoleID) error {
	if err := validTopicName(name); err != nil {
		return err
	}
	if len(opts) == 0 {
		opts = nil
	}
	spec := catalog.TableSpec{Name: name, Columns: append([]catalog.Column(nil), kafkaShape...), Buckets: partitions, Options: opts}
	// A topic "s.t" of an existing schema s is the table t of s.
	s.cfg.Meta.Read(func(v *catalog.View) { spec.Schema, spec.Name = v.SplitQualified(name) })
	_, err := s.cfg.Meta.Propose(ctx, catalog.CreateTable{Spec: spec, Owner: owner})
	return err
}

// waitLeaders waits up to timeout for every partition of topic name to
// have a serving leader, so that a client producing right after creating
// the topic does not start with LEADER_NOT_AVAILABLE.
func (s *Server) waitLeaders(ctx context.Context, name string, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		ready := false
		s.cfg.Meta.Read(func(v *catalog.View) {
			tp, err := lookupTopic(v, name)
			if err != nil {
				return
			}
			ready = true
			for _, id := range tp.buckets {
				if _, _, ok := s.partitionLeader(v, id); !ok {
					ready = false
				}
			}
		})
		if ready {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// timeoutOf is a request's timeout, bounded to [0, 30 s].
func timeoutOf(millis int32) time.Duration {
	return min(max(time.Duration(millis)*time.Millisecond, 0), 30*time.Second)
}

// validTopicName applies Kafka's topic name rules, which are also safe
// table names.
func validTopicName(name string) error {
	if name == "" || name == "." || name == ".." {
		return kerr.InvalidTopicException
	}
	if len(name) > 249 {
		return kerr.InvalidTopicException
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return kerr.InvalidTopicException
		}
	}
	return nil
}

// maxPartitions bounds CreateTopics' partition count, as SQL's buckets
// option does.
const maxPartitions = 1024

// createTopics creates topics; any role may, and owns what it creates.
func (s *Server) createTopics(ctx context.Context, ss *session, req *kmsg.CreateTopicsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = t.Topic
		n := int(t.NumPartitions)
		if n == -1 {
			n = s.cfg.DefaultPartitions
		}
		msg := func(err *kerr.Error, text string) {
			rt.ErrorCode = err.Code
			rt.ErrorMessage = &text
		}
		opts, badConfig := topicOptions(t.Configs)
		switch {
		case badConfig != nil:
			msg(badConfig.code, badConfig.msg)
		case validTopicName(t.Topic) != nil:
			msg(kerr.InvalidTopicException, fmt.Sprintf("topic name %q: use 1 to 249 of [a-zA-Z0-9._-]", t.Topic))
		case n < 1 || n > maxPartitions:
			msg(kerr.InvalidPartitions, fmt.Sprintf("%d partitions: a topic has 1 to %d", n, maxPartitions))
		case t.ReplicationFactor != -1 && t.ReplicationFactor != 1:
			// Durability comes from the object store, not from replicas.
			msg(kerr.InvalidReplicationFactor, fmt.Sprintf("replication factor %d: mink topics are stored once in the object store; use 1 or -1", t.ReplicationFactor))
		case len(t.ReplicaAssignment) > 0:
			msg(kerr.InvalidReplicaAssignment, "mink assigns partitions to nodes itself")
		case req.ValidateOnly:
			var exists bool
			s.cfg.Meta.Read(func(v *catalog.View) { _, exists = v.TableNamed(t.Topic) })
			if exists {
				msg(kerr.TopicAlreadyExists, fmt.Sprintf("topic %q already exists", t.Topic))
			}
		default:
			err := s.createTopic(ctx, t.Topic, n, opts, s.owner(ss))
			if err == nil {
				s.waitLeaders(ctx, t.Topic, timeoutOf(req.TimeoutMillis))
				s.cfg.Meta.Read(func(v *catalog.View) {
					if tb, ok := v.TableNamed(t.Topic); ok {
						rt.Configs = createdConfigs(s.topicConfigs(tb))
					}
				})
			} else {
				if errors.Is(err, catalog.ErrExists) {
					msg(kerr.TopicAlreadyExists, fmt.Sprintf("topic %q already exists", t.Topic))
				} else {
					msg(kerr.UnknownServerError, err.Error())
				}
			}
		}
		rt.NumPartitions = int32(n)
		rt.ReplicationFactor = 1
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// deleteTopics drops topics: their owner or a superuser may
// (TOPIC_AUTHORIZATION_FAILED otherwise).
func (s *Server) deleteTopics(ctx context.Context, ss *session, req *kmsg.DeleteTopicsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	names := req.TopicNames
	for _, t := range req.Topics {
		if t.Topic != nil {
			names = append(names, *t.Topic)
		}
	}
	for _, name := range names {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic = &name
		var id catalog.TableID
		var err error
		allowed := false
		s.cfg.Meta.Read(func(v *catalog.View) {
			var tp *topic
			if tp, err = lookupTopic(v, name); err == nil {
				id, allowed = tp.table.ID, s.owns(v, ss, tp.table)
			}
		})
		if err == nil && !allowed {
			rt.ErrorCode = kerr.TopicAuthorizationFailed.Code
			rt.ErrorMessage = kmsg.StringPtr("must be owner of table " + name)
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		if err == nil {
			_, err = s.cfg.Meta.Propose(ctx, catalog.DropTable{Table: id})
		}
		if err != nil {
			switch {
			case errors.Is(err, kerr.UnknownTopicOrPartition):
				rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case errors.Is(err, catalog.ErrInUse):
				// SQL views read the table: DROP TABLE … CASCADE drops them.
				rt.ErrorCode = kerr.PolicyViolation.Code
			default:
				rt.ErrorCode = kerr.UnknownServerError.Code
			}
			text := err.Error()
			rt.ErrorMessage = &text
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// describeConfigs answers for topics with the few configs clients look
// at; brokers get an empty list. A topic needs SELECT.
func (s *Server) describeConfigs(ss *session, req *kmsg.DescribeConfigsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, r := range req.Resources {
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		if r.ResourceType == kmsg.ConfigResourceTypeTopic {
			var tp *topic
			var err error
			allowed := false
			s.cfg.Meta.Read(func(v *catalog.View) {
				if tp, err = lookupTopic(v, r.ResourceName); err == nil {
					allowed = s.may(v, ss, tp.table, catalog.PrivSelect)
				}
			})
			switch {
			case err != nil:
				rr.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case !allowed:
				rr.ErrorCode = kerr.TopicAuthorizationFailed.Code
				rr.ErrorMessage = kmsg.StringPtr("permission denied for table " + r.ResourceName)
			default:
				for _, c := range describedConfigs(s.topicConfigs(tp.table)) {
					if len(r.ConfigNames) == 0 || slices.Contains(r.ConfigNames, c.Name) {
						rr.Configs = append(rr.Configs, c)
					}
				}
			}
		}
		resp.Resources = append(resp.Resources, rr)
	}
	return resp
}
