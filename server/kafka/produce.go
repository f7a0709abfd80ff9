package kafka

import (
	"context"
	"errors"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/minkdb/mink/buckets"
	"github.com/minkdb/mink/buckets/s3stream"
	"github.com/minkdb/mink/catalog"
)

// queued is one batch of a partition on its way to durability.
type queued struct {
	pending *s3stream.PendingAppend // nil for a duplicate already durable
	dup     *seqBatch               // a duplicate: its first append
}

// partWait is what the response of one partition waits for.
type partWait struct {
	rp     *kmsg.ProduceResponseTopicPartition
	id     catalog.BucketID
	bp     *bucketProducers // nil for a non-idempotent produce
	queued []queued
	// err, if set, failed a batch after the queued ones: the partition
	// fails with it once they are settled.
	err *batchError
	// records is the number of records of the partition's batches.
	records int
}

// produce checks and queues every partition's batches for append and
// returns the function that waits for them and builds the response. It is
// called by the connection's reader, so a connection's produces are queued
// in the order they were sent. A topic the connection of ss may not
// insert into fails every partition with TOPIC_AUTHORIZATION_FAILED.
func (s *Server) produce(ctx context.Context, ss *session, req *kmsg.ProduceRequest) func() kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	var waits []*partWait
	m := s.cfg.Buckets()
	now := time.Now()
	for _, t := range req.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = t.Topic
		// Capacity for every partition: partWait keeps pointers into it.
		rt.Partitions = make([]kmsg.ProduceResponseTopicPartition, 0, len(t.Partitions))
		var tp *topic
		var sh *shape
		var lookupErr error
		allowed := false
		check := func() {
			s.cfg.Meta.Read(func(v *catalog.View) {
				if tp, lookupErr = lookupTopic(v, t.Topic); lookupErr == nil {
					allowed = s.may(v, ss, tp.table, catalog.PrivInsert)
					sh, lookupErr = s.shapes.of(tp.table)
				}
			})
		}
		if check(); lookupErr == nil && !allowed && s.syncAfterRefusal(ctx) {
			check()
		}
		if errors.Is(lookupErr, kerr.UnknownTopicOrPartition) && s.cfg.AutoCreateTopics {
			if err := s.createTopic(ctx, t.Topic, s.cfg.DefaultPartitions, nil, s.owner(ss)); err != nil && !errors.Is(err, catalog.ErrExists) {
				s.cfg.Logger.Warn("kafka: auto-create topic failed", "topic", t.Topic, "err", err)
			}
		}
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, kmsg.NewProduceResponseTopicPartition())
			rp := &rt.Partitions[len(rt.Partitions)-1]
			rp.Partition = p.Partition
			rp.BaseOffset, rp.LogAppendTime, rp.LogStartOffset = -1, -1, -1
			fail := func(code *kerr.Error, msg string) {
				rp.ErrorCode = code.Code
				if msg != "" {
					rp.ErrorMessage = &msg
				}
			}
			switch {
			case lookupErr != nil && errors.Is(lookupErr, kerr.UnknownTopicOrPartition):
				fail(kerr.UnknownTopicOrPartition, "")
				continue
			case lookupErr != nil:
				fail(kerr.InvalidTopicException, lookupErr.Error())
				continue
			case !allowed:
				fail(kerr.TopicAuthorizationFailed, "permission denied for table "+t.Topic+": producing needs INSERT")
				continue
			case p.Partition < 0 || int(p.Partition) >= len(tp.buckets):
				fail(kerr.UnknownTopicOrPartition, "")
				continue
			}
			w, err := s.producePartition(ctx, m, tp, sh, int(p.Partition), p.Records, now)
			if err != nil {
				var be *batchError
				if errors.As(err, &be) {
					fail(be.code, be.msg)
				} else {
					fail(kerr.UnknownServerError, err.Error())
				}
				continue
			}
			w.rp = rp
			waits = append(waits, w)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	timeout := max(timeoutOf(req.TimeoutMillis), 5*time.Second)
	return func() kmsg.Response {
		ctx, cancel := context.WithTimeout(s.ctx, timeout)
		defer cancel()
		for _, w := range waits {
			s.finishPartition(ctx, m, w)
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					s.counters.produceErrors.Add(1)
				}
			}
		}
		return resp
	}
}

// producePartition checks and converts the batches of one partition and
// queues them for append. The partition's batches are all checked before
// any is queued, so that a bad batch stores nothing of the request's
// records for the partition.
func (s *Server) producePartition(ctx context.Context, m *buckets.Manager, tp *topic, sh *shape, partition int, raw []byte, now time.Time) (*partWait, error) {
	id := tp.buckets[partition]
	if m == nil {
		return nil, batchErrorf(kerr.LeaderNotAvailable, "this node is registering again")
	}
	lb, err := m.Bucket(id)
	if err != nil {
		return nil, bucketError(err)
	}
	if err := checkBatchSizes(raw, maxMessageBytes(tp.table)); err != nil {
		return nil, err
	}
	batches, err := parseBatches(raw)
	if err != nil {
		return nil, err
	}
	recs := make([]arrow.RecordBatch, 0, len(batches))
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	for i := range batches {
		rec, err := sh.rowsOf(&batches[i], tp.partitionOf[partition], now)
		if err != nil {
			return nil, err
		}
		recs = append(recs, rec)
	}
	w := &partWait{id: id}
	for _, b := range batches {
		w.records += len(b.records)
	}
	idempotent := batches[0].header.ProducerID >= 0
	for _, b := range batches[1:] {
		if (b.header.ProducerID >= 0) != idempotent || b.header.ProducerID != batches[0].header.ProducerID {
			return nil, batchErrorf(kerr.InvalidRecord, "the batches of one partition come from different producers")
		}
	}
	if !idempotent {
		for _, rec := range recs {
			p, err := lb.AppendAsync(ctx, rec)
			if err != nil {
				return nil, s.appendError(m, id, err)
			}
			w.queued = append(w.queued, queued{pending: p})
		}
		return w, nil
	}
	w.bp = s.states.of(id, lb.Epoch())
	w.bp.mu.Lock()
	defer w.bp.mu.Unlock()
	if err := w.bp.loadLocked(ctx, lb); err != nil {
		return nil, batchErrorf(kerr.KafkaStorageError, "%v", err)
	}
	// Check every batch before queuing any: batch 0 against the state,
	// each later one as the continuation of the one before.
	checks := make([]seqCheck, len(batches))
	for i, b := range batches {
		h := b.header
		if i == 0 || checks[0].duplicate != nil {
			checks[i] = w.bp.checkLocked(h.ProducerID, h.ProducerEpoch, h.FirstSequence, len(b.records))
		} else if prev := batches[i-1].header; h.ProducerEpoch != prev.ProducerEpoch || h.FirstSequence != prev.FirstSequence+prev.NumRecords {
			checks[i].err = kerr.OutOfOrderSequenceNumber
		}
		if checks[i].err != nil {
			return nil, batchErrorf(checks[i].err, "producer %d epoch %d sequence %d: %s", h.ProducerID, h.ProducerEpoch, h.FirstSequence, checks[i].err.Description)
		}
	}
	for i, b := range batches {
		h := b.header
		if dup := checks[i].duplicate; dup != nil {
			d := *dup
			w.queued = append(w.queued, queued{dup: &d})
			continue
		}
		mark := buckets.ProducerMark{ID: h.ProducerID, Epoch: h.ProducerEpoch, Sequence: h.FirstSequence}
		p, err := lb.AppendProduced(ctx, recs[i], mark)
		if err != nil {
			s.states.forget(id, w.bp)
			if i == 0 {
				return nil, s.appendError(m, id, err)
			}
			// Earlier batches are queued: report the failure once they
			// are settled; the client's retry of them is a duplicate.
			w.err = s.appendError(m, id, err)
			return w, nil
		}
		w.bp.recordLocked(h.ProducerID, h.ProducerEpoch, seqBatch{
			first: h.FirstSequence, last: h.FirstSequence + int32(len(b.records)) - 1, offset: p.Offset(), pending: p,
		})
		w.queued = append(w.queued, queued{pending: p})
	}
	return w, nil
}

// finishPartition waits for a partition's batches and fills its response:
// the offset of the first batch once every batch is durable, or the error
// of the first one that is not.
func (s *Server) finishPartition(ctx context.Context, m *buckets.Manager, w *partWait) {
	rp := w.rp
	for i, q := range w.queued {
		var offset uint64
		var err error
		switch {
		case q.pending != nil:
			offset, err = q.pending.Wait(ctx)
		case q.dup.pending != nil:
			offset, err = q.dup.pending.Wait(ctx)
		default:
			offset = q.dup.offset
		}
		if err != nil {
			if w.bp != nil {
				s.states.forget(w.id, w.bp)
			}
			be := s.appendError(m, w.id, err)
			if w.err != nil {
				be = w.err
			}
			rp.ErrorCode, rp.BaseOffset = be.code.Code, -1
			rp.ErrorMessage = &be.msg
			return
		}
		if i == 0 {
			rp.BaseOffset = int64(offset)
		}
	}
	if w.err == nil {
		s.counters.producedRecords.Add(uint64(w.records))
	}
	if w.err != nil {
		rp.ErrorCode, rp.BaseOffset = w.err.code.Code, -1
		rp.ErrorMessage = &w.err.msg
		return
	}
	if m != nil {
		if lb, err := m.Bucket(w.id); err == nil {
			rp.LogStartOffset = int64(lb.Start())
		}
	}
}

// bucketError maps a bucket manager error to the partition error clients
// act on: NOT_LEADER_OR_FOLLOWER makes them refresh metadata and go to the
// leader; LEADER_NOT_AVAILABLE makes them retry while the bucket opens.
func bucketError(err error) *batchError {
	switch {
	case errors.Is(err, buckets.ErrNotLeader):
		return batchErrorf(kerr.NotLeaderForPartition, "%v", err)
	case errors.Is(err, buckets.ErrUnavailable):
		return batchErrorf(kerr.LeaderNotAvailable, "%v", err)
	case errors.Is(err, buckets.ErrNoSuchBucket):
		return batchErrorf(kerr.UnknownTopicOrPartition, "%v", err)
	}
	return batchErrorf(kerr.UnknownServerError, "%v", err)
}

// appendError maps a failed append. A fenced or closed stream means this
// node no longer leads the bucket; an unknown outcome (the request timed
// out) is retriable, and idempotent producers' retries are deduplicated.
func (s *Server) appendError(m *buckets.Manager, id catalog.BucketID, err error) *batchError {
	if m != nil {
		if _, berr := m.Bucket(id); berr != nil {
			return bucketError(berr)
		}
	}
	switch {
	case errors.Is(err, s3stream.ErrFenced), errors.Is(err, s3stream.ErrClosed):
		return batchErrorf(kerr.NotLeaderForPartition, "bucket %d: %v", id, err)
	case errors.Is(err, s3stream.ErrUnknownOutcome), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return batchErrorf(kerr.RequestTimedOut, "bucket %d: %v", id, err)
	}
	return batchErrorf(kerr.KafkaStorageError, "bucket %d: %v", id, err)
}
