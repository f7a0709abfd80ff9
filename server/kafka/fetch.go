package kafka

import (
	"context"
	"errors"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/minkdb/mink/buckets"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/sqltypes"
	"github.com/minkdb/mink/tiering"
)

// fetchChunkRows is how many rows a fetch reads from a bucket at a time
// while it fills a partition's byte budget.
const fetchChunkRows = 4096

// lakeChunkRows is how many offsets a fetch reads from the lake in one
// scan: a scan decodes whole row groups (128 Ki rows), so fewer scans of
// more rows each fill a budget faster.
const lakeChunkRows = 32 << 10

// servedPartition is a partition this node serves now, for a fetch or a
// list-offsets request.
type servedPartition struct {
	table       catalog.TableID
	lb          *buckets.LogBucket
	sh          *shape
	leaderEpoch int32
}

// logStart returns the first offset a consumer may fetch of partition sp,
// whose stream starts at start, and the lake snapshot that holds the rows
// below start (0: none). When retention trimmed the stream below its tiered
// offset and the lake snapshot the metadata log records holds every row
// below start, that is offset 0, as a Kafka broker with tiered storage
// (KIP-405) reports its earliest remote offset as the log start; otherwise
// the stream's start.
func (s *Server) logStart(sp servedPartition, start uint64) (first uint64, snapshot int64) {
	if start == 0 || s.cfg.Lake == nil {
		return start, 0
	}
	var lakeEnd uint64
	s.cfg.Meta.Read(func(v *catalog.View) {
		snapshot, lakeEnd = tiering.LakeSplit(v, sp.table, sp.lb.ID(), start)
	})
	if snapshot == 0 || lakeEnd != start {
		// The lake does not reach the stream's start: offsets between
		// them are nowhere to be read, so the log starts at the stream.
		return start, 0
	}
	return 0, snapshot
}

// servePartition finds the bucket of partition of topic name and checks
// that the connection of ss may read it (SELECT), that this node serves
// it, and that the client's idea of the leader epoch (-1: none) is current
// (KIP-320).
func (s *Server) servePartition(ctx context.Context, m *buckets.Manager, ss *session, name string, partition, currentLeaderEpoch int32) (servedPartition, *kerr.Error) {
	var tp *topic
	var sh *shape
	var err error
	allowed := false
	check := func() {
		s.cfg.Meta.Read(func(v *catalog.View) {
			if tp, err = lookupTopic(v, name); err == nil {
				allowed = s.may(v, ss, tp.table, catalog.PrivSelect)
				sh, err = s.shapes.of(tp.table)
			}
		})
	}
	if check(); err == nil && !allowed && s.syncAfterRefusal(ctx) {
		check()
	}
	if err != nil || partition < 0 || int(partition) >= len(tp.buckets) {
		return servedPartition{}, kerr.UnknownTopicOrPartition
	}
	if !allowed {
		return servedPartition{}, kerr.TopicAuthorizationFailed
	}
	if m == nil {
		return servedPartition{}, kerr.LeaderNotAvailable
	}
	lb, err := m.Bucket(tp.buckets[partition])
	if err != nil {
		return servedPartition{}, bucketError(err).code
	}
	epoch := int32(lb.Epoch())
	switch {
	case currentLeaderEpoch >= 0 && currentLeaderEpoch < epoch:
		return servedPartition{}, kerr.FencedLeaderEpoch
	case currentLeaderEpoch > epoch:
		return servedPartition{}, kerr.UnknownLeaderEpoch
	}
	return servedPartition{table: tp.table.ID, lb: lb, sh: sh, leaderEpoch: epoch}, nil
}

// fetch answers a Fetch, waiting up to MaxWaitMillis for MinBytes. Fetch
// sessions (KIP-227) are not kept: every fetch is a full one, and the
// response's session id 0 tells the client so.
func (s *Server) fetch(ctx context.Context, ss *session, req *kmsg.FetchRequest) kmsg.Response {
	deadline := time.Now().Add(min(max(time.Duration(req.MaxWaitMillis)*time.Millisecond, 0), 30*time.Second))
	for {
		resp, size, changed := s.fetchOnce(ctx, ss, req)
		if size >= int(req.MinBytes) || len(changed) == 0 || !time.Now().Before(deadline) {
			return resp
		}
		if !waitAny(ctx, changed, time.Until(deadline)) {
			return resp
		}
	}
}

// waitAny waits until one of chans is closed (true), or timeout passes or
// ctx ends (false).
func waitAny(ctx context.Context, chans []<-chan struct{}, timeout time.Duration) bool {
	woken := make(chan struct{}, 1)
	stop := make(chan struct{})
	defer close(stop)
	for _, c := range chans {
		go func() {
			select {
			case <-c:
				select {
				case woken <- struct{}{}:
				default:
				}
			case <-stop:
			}
		}()
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-woken:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// fetchOnce reads what is there now. It returns the response, its record
// bytes and the change channels of the partitions that had nothing new.
func (s *Server) fetchOnce(ctx context.Context, ss *session, req *kmsg.FetchRequest) (*kmsg.FetchResponse, int, []<-chan struct{}) {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	if req.Version >= 7 && req.SessionID != 0 {
		resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
		return resp, 0, nil
	}
	m := s.cfg.Buckets()
	maxBytes := int(req.MaxBytes)
	if req.Version < 3 || maxBytes <= 0 {
		maxBytes = 1 << 30
	}
	total := 0
	var changed []<-chan struct{}
	for _, t := range req.Topics {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = p.Partition
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
			rp.PreferredReadReplica = -1
			// Empty, not null: librdkafka refuses a null record set.
			rp.RecordBatches = []byte{}
			sp, kerrCode := s.servePartition(ctx, m, ss, t.Topic, p.Partition, p.CurrentLeaderEpoch)
			if kerrCode != nil {
				rp.ErrorCode = kerrCode.Code
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			// Take the change channel before reading the end, so that an
			// append after the read wakes the wait.
			ch := sp.lb.Changed()
			hw, start := sp.lb.End(), sp.lb.Start()
			first, snapshot := s.logStart(sp, start)
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = int64(hw), int64(hw), int64(first)
			offset := p.FetchOffset
			switch {
			case offset < int64(first) || offset > int64(hw):
				rp.ErrorCode = kerr.OffsetOutOfRange.Code
			case offset == int64(hw):
				changed = append(changed, ch)
			default:
				budget := int(p.PartitionMaxBytes)
				if budget <= 0 {
					budget = 1 << 20
				}
				// KIP-74: the first batch is sent even if larger than the
				// limits, so that a consumer always makes progress.
				budget = min(budget, maxBytes-total)
				var records []byte
				var err error
				from := uint64(offset)
				if from < start {
					// Below the stream's start: the lake's rows, then on
					// into the stream while the budget lasts.
					records, from, err = s.readLakeRecords(ctx, sp, snapshot, from, start, budget, total == 0)
					if err != nil {
						s.cfg.Logger.Warn("kafka: fetch read from the lake failed", "topic", t.Topic, "partition", p.Partition, "offset", offset, "err", err)
						rp.ErrorCode = kerr.KafkaStorageError.Code
						records = nil // no rows rather than rows before a hole
					}
				}
				if err == nil && from == max(start, uint64(offset)) {
					more, err := s.readRecords(ctx, sp, from, hw, budget-len(records), total == 0 && len(records) == 0)
					if err != nil {
						s.cfg.Logger.Warn("kafka: fetch read failed", "topic", t.Topic, "partition", p.Partition, "offset", offset, "err", err)
						rp.ErrorCode = kerr.KafkaStorageError.Code
					}
					records = append(records, more...)
				}
				if records != nil {
					rp.RecordBatches = records
				}
				total += len(records)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, total, changed
}

// readRecords reads rows from offset up to hw as record batches, one per
// stored batch (cut to start at offset, and to end where budget bytes are
// used), until budget bytes are used; first makes it return at least one
// record even if that is larger (KIP-74), so that a consumer always makes
// progress.
func (s *Server) readRecords(ctx context.Context, sp servedPartition, offset, hw uint64, budget int, first bool) ([]byte, error) {
	var out []byte
	var records []fetchedRecord
	for offset < hw {
		to := min(hw, offset+fetchChunkRows)
		batches, err := sp.lb.Read(ctx, offset, to)
		if err != nil {
			return out, err
		}
		full, before := false, offset
		for _, b := range batches {
			n := uint64(b.Record.NumRows())
			if full || b.Offset+n <= offset {
				continue
			}
			rec, err := sqltypes.Widen(b.Record, sp.sh.stored, nil)
			if err != nil {
				buckets.ReleaseBatches(batches)
				return out, err
			}
			from := int(offset - b.Offset)
			if b.Offset > offset {
				from = 0 // a gap cannot happen: offsets are dense
			}
			end := int(min(n, to-b.Offset))
			var sent int
			out, records, sent, full = s.appendRecords(out, records, sp, rec, b.Offset, from, end, b.AppendTime, budget, first)
			if sent > 0 {
				offset = b.Offset + uint64(from+sent)
			}
			rec.Release()
		}
		buckets.ReleaseBatches(batches)
		if full || offset == before {
			break
		}
	}
	return out, nil
}

// appendRecords appends rows [from, end) of rec, whose first row is at
// offset base, to out as one record batch (appendTime: the rows' append
// time, zero if unknown), stopping where budget bytes are used (unless
// first and nothing is in out yet: KIP-74). records is scratch space,
// returned for reuse. It returns how many rows it sent and whether the
// budget stopped it.
func (s *Server) appendRecords(out []byte, records []fetchedRecord, sp servedPartition, rec arrow.RecordBatch, base uint64, from, end int,
	appendTime time.Time, budget int, first bool) ([]byte, []fetchedRecord, int, bool) {
	records = records[:0]
	used := len(out) + batchHeaderLen
	full := false
	for i := from; i < end; i++ {
		r := sp.sh.recordAt(rec, i, appendTime)
		if size := r.encodedSize(); used+size > budget && !(first && len(out) == 0 && len(records) == 0) {
			full = true
			break
		} else {
			used += size
		}
		records = append(records, r)
	}
	if len(records) > 0 {
		out = appendBatch(out, int64(base)+int64(from), -1, records)
		s.counters.fetchedRecords.Add(uint64(len(records)))
	}
	return out, records, len(records), full
}

// errBudgetFull stops a lake read once a fetch's budget is used.
var errBudgetFull = errors.New("the fetch's byte budget is used")

// readLakeRecords reads the rows [offset, start) of partition sp from the
// lake snapshot as record batches, as readRecords reads the stream's (the
// same records for the same rows: one batch per run of rows the lake
// returns, cut where budget bytes are used; first as for readRecords). The
// lake does not keep the time a row was appended, so the records of a
// table without a timestamp column have timestamp -1 (none), where the
// stream's carry their append time. It returns the batches and the offset
// after their last record (start when every row was read). Rows of a
// missing or corrupt lake file, or offsets the lake lacks, are an error
// (the file named), never skipped.
func (s *Server) readLakeRecords(ctx context.Context, sp servedPartition, snapshot int64, offset, start uint64, budget int, first bool) ([]byte, uint64, error) {
	var out []byte
	var records []fetchedRecord
	next := offset
	// Chunks start at multiples of lakeChunkRows whatever the fetch
	// offset, so that a consumer's fetches scan the same ranges and the
	// reader's plans of them are reused; rows below offset are skipped.
	req := tiering.BucketRead{
		Table: sp.table, Snapshot: snapshot, Bucket: sp.lb.ID(),
		Schema: sqltypes.Schema(sp.sh.cols), Columns: sp.sh.stored,
		From: offset - offset%lakeChunkRows, To: start, ChunkRows: lakeChunkRows,
	}
	err := s.cfg.Lake.ReadBucket(ctx, req, func(firstOffset uint64, rec arrow.RecordBatch) error {
		n := int(rec.NumRows())
		if firstOffset+uint64(n) <= offset {
			return nil
		}
		from := 0
		if firstOffset < offset {
			from = int(offset - firstOffset)
		}
		var sent int
		var full bool
		out, records, sent, full = s.appendRecords(out, records, sp, rec, firstOffset, from, n, time.Time{}, budget, first)
		if sent > 0 {
			next = firstOffset + uint64(from+sent)
		}
		if full {
			return errBudgetFull
		}
		return nil
	})
	if err != nil && !errors.Is(err, errBudgetFull) {
		return nil, offset, err
	}
	return out, next, nil
}

func (s *Server) listOffsets(ctx context.Context, ss *session, req *kmsg.ListOffsetsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	m := s.cfg.Buckets()
	for _, t := range req.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition = p.Partition
			rp.Offset, rp.Timestamp, rp.LeaderEpoch = -1, -1, -1
			sp, code := s.servePartition(ctx, m, ss, t.Topic, p.Partition, p.CurrentLeaderEpoch)
			if code != nil {
				rp.ErrorCode = code.Code
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			rp.LeaderEpoch = sp.leaderEpoch
			hw, start := sp.lb.End(), sp.lb.Start()
			switch p.Timestamp {
			case -1: // latest
				rp.Offset = int64(hw)
			case -2: // earliest: 0 when the lake holds the trimmed rows
				first, _ := s.logStart(sp, start)
				rp.Offset = int64(first)
			default:
				offset, ts, err := int64(-1), int64(-1), error(nil)
				if _, snapshot := s.logStart(sp, start); snapshot != 0 {
					offset, ts, err = s.lakeOffsetForTime(ctx, sp, snapshot, start, p.Timestamp)
				}
				if err == nil && (offset < 0 || p.Timestamp == -3) {
					so, sts, serr := s.offsetForTime(sp, start, hw, p.Timestamp)
					if err = serr; sts > ts { // for -3, the first of the largest
						offset, ts = so, sts
					}
				}
				if err != nil {
					s.cfg.Logger.Warn("kafka: list offsets by time failed", "topic", t.Topic, "partition", p.Partition, "timestamp", p.Timestamp, "err", err)
					rp.ErrorCode = kerr.KafkaStorageError.Code
					offset, ts = -1, -1
				}
				rp.Offset, rp.Timestamp = offset, ts
			}
			if req.Version == 0 && rp.Offset >= 0 {
				rp.OldStyleOffsets = []int64{rp.Offset}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// offsetForTime finds the first offset whose record timestamp is at least
// ts (milliseconds), reading the bucket from start: -1 if there is none.
// ts -3 asks for the record with the largest timestamp (KIP-734).
func (s *Server) offsetForTime(sp servedPartition, start, hw uint64, ts int64) (int64, int64, error) {
	bestOffset, bestTS := int64(-1), int64(-1)
	for offset := start; offset < hw; {
		to := min(hw, offset+fetchChunkRows)
		batches, err := sp.lb.Read(s.ctx, offset, to)
		if err != nil {
			return -1, -1, err
		}
		for _, b := range batches {
			rec, err := sqltypes.Widen(b.Record, sp.sh.stored, nil)
			if err != nil {
				buckets.ReleaseBatches(batches)
				return -1, -1, err
			}
			n := int(rec.NumRows())
			from := 0
			if b.Offset < offset {
				from = int(offset - b.Offset)
			}
			for i, r := range sp.sh.recordsOf(rec, from, n, b.AppendTime) {
				o := int64(b.Offset) + int64(from+i)
				if ts == -3 {
					if r.timestamp > bestTS {
						bestOffset, bestTS = o, r.timestamp
					}
				} else if r.timestamp >= ts {
					rec.Release()
					buckets.ReleaseBatches(batches)
					return o, r.timestamp, nil
				}
			}
			rec.Release()
			offset = b.Offset + uint64(n)
		}
		buckets.ReleaseBatches(batches)
		if len(batches) == 0 {
			break
		}
	}
	return bestOffset, bestTS, nil
}

// errFound stops a lake scan at the row it looked for.
var errFound = errors.New("found")

// lakeOffsetForTime is offsetForTime over the rows [0, start) of partition
// sp in the lake snapshot: the first offset whose record timestamp is at
// least ts, or for ts -3 the first with the largest timestamp; -1 if none.
// Only the timestamp column is read. The lake keeps no append times, so a
// table without a timestamp column has no timestamps there (-1).
func (s *Server) lakeOffsetForTime(ctx context.Context, sp servedPartition, snapshot int64, start uint64, ts int64) (int64, int64, error) {
	col := sp.sh.tsCol
	if col < 0 {
		return -1, -1, nil
	}
	bestOffset, bestTS := int64(-1), int64(-1)
	req := tiering.BucketRead{
		Table: sp.table, Snapshot: snapshot, Bucket: sp.lb.ID(),
		Schema: sqltypes.Schema(sp.sh.cols[col : col+1]), Columns: sp.sh.stored,
		From: 0, To: start,
	}
	err := s.cfg.Lake.ReadBucket(ctx, req, func(first uint64, rec arrow.RecordBatch) error {
		for i := range int(rec.NumRows()) {
			rts := timestampAt(rec.Column(0), i, -1)
			if ts == -3 {
				if rts > bestTS {
					bestOffset, bestTS = int64(first)+int64(i), rts
				}
			} else if rts >= ts {
				bestOffset, bestTS = int64(first)+int64(i), rts
				return errFound
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, errFound) {
		return -1, -1, err
	}
	return bestOffset, bestTS, nil
}

// offsetForLeaderEpoch answers KIP-320's truncation check. mink never
// truncates an acknowledged record, so the end of any epoch a client saw
// is at or after its position: the answer is the current epoch and end.
func (s *Server) offsetForLeaderEpoch(ctx context.Context, ss *session, req *kmsg.OffsetForLeaderEpochRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	m := s.cfg.Buckets()
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			rp.Partition = p.Partition
			rp.LeaderEpoch, rp.EndOffset = -1, -1
			sp, code := s.servePartition(ctx, m, ss, t.Topic, p.Partition, p.CurrentLeaderEpoch)
			if code != nil {
				rp.ErrorCode = code.Code
			} else {
				rp.LeaderEpoch, rp.EndOffset = sp.leaderEpoch, int64(sp.lb.End())
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
