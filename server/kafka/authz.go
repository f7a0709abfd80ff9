package kafka

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/minkdb/mink/access"
	"github.com/minkdb/mink/catalog"
)

// Privileges per request (docs/kafka.md, "Security"): a topic is a log
// table, and a role may do to it through Kafka what it may do in SQL.
// Produce needs INSERT; Fetch, ListOffsets, OffsetForLeaderEpoch,
// DescribeConfigs, OffsetCommit, OffsetFetch and OffsetDelete need SELECT;
// Metadata shows a topic to a role that holds any privilege on it
// (Kafka's DESCRIBE); DeleteTopics needs the owner or a superuser. Any
// role may create topics (it owns them) and use any consumer group: there
// are no group ACLs. Every check reads the view of the request, never
// something kept on the connection, so a GRANT or REVOKE holds from the
// connection's next request (a Produce or Fetch refused on this node's
// view is checked again once the view has caught up with the log).

// syncAfterRefusal catches this node's view up with the metadata log's
// head after a check refused a request, and reports whether it did (the
// check is then made again): a GRANT committed through another node holds
// from the connection's next request, as in SQL.
func (s *Server) syncAfterRefusal(ctx context.Context) bool {
	sy, ok := s.cfg.Meta.(interface{ Sync(context.Context) error })
	if !ok {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	return sy.Sync(ctx) == nil
}

// syncTimeout bounds syncAfterRefusal: with the metadata log out of reach
// the refusal stands after it.
const syncTimeout = 5 * time.Second

// unrestricted reports whether the connection of ss is subject to no
// checks: the listener has no guard, or the node trusts every client and
// the connection did not authenticate as a role (it acts as the bootstrap
// superuser).
func (s *Server) unrestricted(ss *session) bool {
	if s.cfg.Access == nil {
		return true
	}
	return ss.id == nil && s.cfg.Access.Trust()
}

// may reports whether the connection of ss holds need on t, read within v.
func (s *Server) may(v *catalog.View, ss *session, t *catalog.Table, need catalog.Privileges) bool {
	if s.unrestricted(ss) {
		return true
	}
	if ss.id == nil {
		return false // cannot happen: the connection is closed before its first request
	}
	return access.Authorize(v, *ss.id, t, need) == nil
}

// describes reports whether the connection of ss holds any privilege on t
// (Kafka's DESCRIBE, implied by every other operation).
func (s *Server) describes(v *catalog.View, ss *session, t *catalog.Table) bool {
	if s.unrestricted(ss) {
		return true
	}
	return ss.id != nil && v.TablePrivileges(ss.id.Role, t) != 0
}

// owns reports whether the connection of ss acts as a superuser or as the
// owner of t (or a member of the owning role), who may drop it. A table
// without an owner is a superuser's.
func (s *Server) owns(v *catalog.View, ss *session, t *catalog.Table) bool {
	if s.unrestricted(ss) {
		return true
	}
	if ss.id == nil {
		return false
	}
	r := v.Roles[ss.id.Role]
	return r != nil && (r.Superuser || t.Owner != 0 && v.IsMember(r.ID, t.Owner))
}

// owner is the role a topic created by the connection of ss is owned by:
// the role it authenticated as, or the bootstrap superuser.
func (s *Server) owner(ss *session) catalog.RoleID {
	switch {
	case ss.id != nil:
		return ss.id.Role
	case s.cfg.Access != nil:
		return catalog.BootstrapRole
	}
	return 0
}

// deniedTopic reports whether name is a log table on which the connection
// of ss lacks need. A name that is no topic is not denied: the request
// answers UNKNOWN_TOPIC_OR_PARTITION for it.
func (s *Server) deniedTopic(v *catalog.View, ss *session, name string, need catalog.Privileges) bool {
	t, ok := v.TableNamed(name)
	return ok && len(t.Spec.PrimaryKey) == 0 && !s.may(v, ss, t, need)
}

// groupRequest passes a group request to the coordinator after checking
// the topics it names: SELECT for OffsetCommit, OffsetFetch and
// OffsetDelete, whose partitions of denied topics get
// TOPIC_AUTHORIZATION_FAILED (an OffsetFetch of every committed offset
// leaves them out). Groups themselves are open to every role.
func (s *Server) groupRequest(ctx context.Context, ss *session, req kmsg.Request) (kmsg.Response, error) {
	if s.unrestricted(ss) {
		return s.cfg.Groups.Handle(ctx, req)
	}
	switch r := req.(type) {
	case *kmsg.OffsetCommitRequest:
		return s.offsetCommit(ctx, ss, r)
	case *kmsg.OffsetFetchRequest:
		resp, err := s.cfg.Groups.Handle(ctx, r)
		if err == nil {
			s.filterOffsetFetch(ss, r, resp.(*kmsg.OffsetFetchResponse))
		}
		return resp, err
	case *kmsg.OffsetDeleteRequest:
		return s.offsetDelete(ctx, ss, r)
	}
	return s.cfg.Groups.Handle(ctx, req)
}

// readableTopics splits the topics of a request into those the role may
// read (SELECT) and the others.
func readableTopics[T any](s *Server, ss *session, topics []T, name func(T) string) (allowed, denied []T) {
	s.cfg.Meta.Read(func(v *catalog.View) {
		for _, t := range topics {
			if s.deniedTopic(v, ss, name(t), catalog.PrivSelect) {
				denied = append(denied, t)
			} else {
				allowed = append(allowed, t)
			}
		}
	})
	return allowed, denied
}

// offsetCommit commits the offsets of the topics the role may read and
// fails the others, without committing anything of them.
func (s *Server) offsetCommit(ctx context.Context, ss *session, req *kmsg.OffsetCommitRequest) (kmsg.Response, error) {
	allowed, denied := readableTopics(s, ss, req.Topics, func(t kmsg.OffsetCommitRequestTopic) string { return t.Topic })
	if len(denied) == 0 {
		return s.cfg.Groups.Handle(ctx, req)
	}
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	if len(allowed) > 0 {
		part := *req
		part.Topics = allowed
		out, err := s.cfg.Groups.Handle(ctx, &part)
		if err != nil {
			return nil, err
		}
		resp = out.(*kmsg.OffsetCommitResponse)
	}
	for _, t := range denied {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, kerr.TopicAuthorizationFailed.Code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// filterOffsetFetch hides the committed offsets of topics the role may
// not read: asked for by name, their partitions get offset -1 and
// TOPIC_AUTHORIZATION_FAILED (as in Kafka); in an answer of every
// committed offset they are left out.
func (s *Server) filterOffsetFetch(ss *session, req *kmsg.OffsetFetchRequest, resp *kmsg.OffsetFetchResponse) {
	s.cfg.Meta.Read(func(v *catalog.View) {
		if req.Version < 8 {
			all := req.Topics == nil && req.Version >= 2
			kept := resp.Topics[:0]
			for _, t := range resp.Topics {
				if s.deniedTopic(v, ss, t.Topic, catalog.PrivSelect) {
					if all {
						continue
					}
					for i := range t.Partitions {
						p := &t.Partitions[i]
						p.Offset, p.LeaderEpoch, p.Metadata = -1, -1, kmsg.StringPtr("")
						p.ErrorCode = kerr.TopicAuthorizationFailed.Code
					}
				}
				kept = append(kept, t)
			}
			resp.Topics = kept
			return
		}
		for gi := range resp.Groups {
			g := &resp.Groups[gi]
			all := gi < len(req.Groups) && req.Groups[gi].Topics == nil
			kept := g.Topics[:0]
			for _, t := range g.Topics {
				if s.deniedTopic(v, ss, t.Topic, catalog.PrivSelect) {
					if all {
						continue
					}
					for i := range t.Partitions {
						p := &t.Partitions[i]
						p.Offset, p.LeaderEpoch, p.Metadata = -1, -1, kmsg.StringPtr("")
						p.ErrorCode = kerr.TopicAuthorizationFailed.Code
					}
				}
				kept = append(kept, t)
			}
			g.Topics = kept
		}
	})
}

// offsetDelete deletes the offsets of the topics the role may read and
// fails the others.
func (s *Server) offsetDelete(ctx context.Context, ss *session, req *kmsg.OffsetDeleteRequest) (kmsg.Response, error) {
	allowed, denied := readableTopics(s, ss, req.Topics, func(t kmsg.OffsetDeleteRequestTopic) string { return t.Topic })
	if len(denied) == 0 {
		return s.cfg.Groups.Handle(ctx, req)
	}
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	if len(allowed) > 0 {
		part := *req
		part.Topics = allowed
		out, err := s.cfg.Groups.Handle(ctx, &part)
		if err != nil {
			return nil, err
		}
		resp = out.(*kmsg.OffsetDeleteResponse)
	}
	for _, t := range denied {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, kerr.TopicAuthorizationFailed.Code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
