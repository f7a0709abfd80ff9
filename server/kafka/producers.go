package kafka

import (
	"context"
	"fmt"
	"math"
	"sort"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/minkdb/mink/buckets"
	"github.com/minkdb/mink/buckets/s3stream"
	"github.com/minkdb/mink/catalog"
)

// Producer ids are unique without coordination: the node id, the node
// epoch (new at every start of the node) and a counter.
//
//	bit 63: 0 | bits 62–47: node id | bits 46–23: node epoch | bits 22–0: counter (from 1)
const (
	producerCounterBits = 23
	producerEpochBits   = 24
)

type producerIDs struct {
	node catalog.NodeID
	mu   struct {
		sync.Mutex
		epoch uint64 // the node epoch the counter counts in
		next  uint64
	}
}

func newProducerIDs(node catalog.NodeID) *producerIDs { return &producerIDs{node: node} }

func (p *producerIDs) allocate(nodeEpoch uint64) (int64, error) {
	if nodeEpoch == 0 {
		return 0, kerr.CoordinatorLoadInProgress
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.epoch != nodeEpoch {
		p.mu.epoch, p.mu.next = nodeEpoch, 1
	}
	if p.mu.next >= 1<<producerCounterBits {
		return 0, fmt.Errorf("this node handed out %d producer ids in its epoch; restart it for more", p.mu.next-1)
	}
	id := int64(p.node&0xffff)<<(producerCounterBits+producerEpochBits) |
		int64(nodeEpoch&(1<<producerEpochBits-1))<<producerCounterBits | int64(p.mu.next)
	p.mu.next++
	return id, nil
}

func (s *Server) initProducerID(req *kmsg.InitProducerIDRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil && *req.TransactionalID != "" {
		// Transactions are not advertised; a client that tries anyway
		// gets a clear refusal instead of a half-working transaction.
		resp.ErrorCode = kerr.InvalidRequest.Code
		s.cfg.Logger.Info("kafka: refused a transactional producer (transactions are not supported)", "transactional_id", *req.TransactionalID)
		return resp
	}
	if req.ProducerID >= 0 && req.ProducerEpoch >= 0 {
		// KIP-360: the producer asks for a new epoch of its id.
		if req.ProducerEpoch < math.MaxInt16-1 {
			resp.ProducerID, resp.ProducerEpoch = req.ProducerID, req.ProducerEpoch+1
			return resp
		}
	}
	id, err := s.producers.allocate(s.cfg.NodeEpoch())
	if err != nil {
		resp.ErrorCode = kerr.UnknownServerError.Code
		if ke, ok := err.(*kerr.Error); ok {
			resp.ErrorCode = ke.Code
		}
		s.cfg.Logger.Warn("kafka: no producer id", "err", err)
		return resp
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp
}

// producerScanRows is how far back a new leader reads a bucket's stream
// to rebuild its producers' sequence state. A producer whose last batch is
// older than that is treated as new: its next batch is accepted at any
// sequence, as Kafka does for a producer whose state expired.
const producerScanRows = 1 << 17

// producerWindow is how many of a producer's last batches are kept per
// partition to answer duplicates (Kafka's 5 in-flight batches).
const producerWindow = 5

// seqBatch is one batch of an idempotent producer in a bucket.
type seqBatch struct {
	first, last int32 // sequence numbers
	offset      uint64
	pending     *s3stream.PendingAppend // nil once known durable
}

type producerState struct {
	epoch   int16
	batches []seqBatch // oldest first, at most producerWindow
}

// bucketProducers is the producer state of one bucket at one leader epoch.
type bucketProducers struct {
	leaderEpoch uint64
	// mu is held from the sequence check of a batch until it is queued
	// for append, so that sequences and offsets are in the same order.
	mu        sync.Mutex
	loaded    bool
	producers map[int64]*producerState
}

type producerStates struct {
	mu      sync.Mutex
	buckets map[catalog.BucketID]*bucketProducers
}

func newProducerStates() *producerStates {
	return &producerStates{buckets: map[catalog.BucketID]*bucketProducers{}}
}

// of returns the producer state of bucket id at its leader epoch (a new,
// unloaded one after a leader change).
func (ps *producerStates) of(id catalog.BucketID, leaderEpoch uint64) *bucketProducers {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	bp := ps.buckets[id]
	if bp == nil || bp.leaderEpoch != leaderEpoch {
		bp = &bucketProducers{leaderEpoch: leaderEpoch, producers: map[int64]*producerState{}}
		ps.buckets[id] = bp
	}
	return bp
}

// forget drops a bucket's state (an append failed: the bucket reopens at
// a new epoch and the state is rebuilt from the stream).
func (ps *producerStates) forget(id catalog.BucketID, bp *bucketProducers) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.buckets[id] == bp {
		delete(ps.buckets, id)
	}
}

// loadLocked rebuilds the state from the tail of the bucket's stream.
// REQUIRES: bp.mu held.
func (bp *bucketProducers) loadLocked(ctx context.Context, lb *buckets.LogBucket) error {
	if bp.loaded {
		return nil
	}
	end := lb.End()
	from := lb.Start()
	if end > producerScanRows {
		from = max(from, end-producerScanRows)
	}
	if from < end {
		batches, err := lb.Read(ctx, from, end)
		if err != nil {
			return fmt.Errorf("rebuild producer state of bucket %d: %w", lb.ID(), err)
		}
		for _, b := range batches {
			if b.Producer.ID != 0 {
				bp.recordLocked(b.Producer.ID, b.Producer.Epoch, seqBatch{
					first: b.Producer.Sequence, last: b.Producer.Sequence + int32(b.Record.NumRows()) - 1, offset: b.Offset,
				})
			}
		}
		buckets.ReleaseBatches(batches)
	}
	bp.loaded = true
	return nil
}

// maxProducersPerBucket bounds the producers a bucket keeps state for;
// beyond it the tenth whose last batch is oldest are forgotten (treated as
// new if they come back, as Kafka treats expired producers).
const maxProducersPerBucket = 10000

func (bp *bucketProducers) recordLocked(id int64, epoch int16, b seqBatch) {
	st := bp.producers[id]
	if st == nil || st.epoch != epoch {
		if st == nil && len(bp.producers) >= maxProducersPerBucket {
			bp.evictLocked()
		}
		st = &producerState{epoch: epoch}
		bp.producers[id] = st
	}
	st.batches = append(st.batches, b)
	if len(st.batches) > producerWindow {
		st.batches = st.batches[len(st.batches)-producerWindow:]
	}
}

// seqCheck is the outcome of checking a batch's sequence.
type seqCheck struct {
	duplicate *seqBatch // the batch was appended before: answer with its offset
	err       *kerr.Error
}

// checkLocked checks the sequence of a batch of n records from producer
// id at epoch, whose first record has sequence first.
// REQUIRES: bp.mu held and bp loaded.
func (bp *bucketProducers) checkLocked(id int64, epoch int16, first int32, n int) seqCheck {
	st := bp.producers[id]
	if st == nil || len(st.batches) == 0 {
		return seqCheck{}
	}
	switch {
	case epoch < st.epoch:
		return seqCheck{err: kerr.InvalidProducerEpoch}
	case epoch > st.epoch:
		if first != 0 {
			return seqCheck{err: kerr.OutOfOrderSequenceNumber}
		}
		return seqCheck{}
	}
	last := first + int32(n) - 1
	for i := range st.batches {
		if b := &st.batches[i]; b.first == first && b.last == last {
			return seqCheck{duplicate: b}
		}
	}
	if want := st.batches[len(st.batches)-1].last + 1; first != want && !(want < 0 && first == 0) {
		return seqCheck{err: kerr.OutOfOrderSequenceNumber}
	}
	return seqCheck{}
}

// evictLocked forgets the tenth of the producers whose last batch is
// oldest. REQUIRES: bp.mu held.
func (bp *bucketProducers) evictLocked() {
	type last struct {
		id     int64
		offset uint64
	}
	all := make([]last, 0, len(bp.producers))
	for id, st := range bp.producers {
		all = append(all, last{id, st.batches[len(st.batches)-1].offset})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].offset < all[j].offset })
	for _, l := range all[:len(all)/10+1] {
		delete(bp.producers, l.id)
	}
}
