package sqlfront

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/minkdb/mink/buckets"
	"github.com/minkdb/mink/buckets/routing"
	"github.com/minkdb/mink/buckets/s3stream"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/sqltypes"
	"github.com/minkdb/mink/sqlfront/pgwire"
)

// pendingWrite is a write buffered in a transaction block.
type pendingWrite struct {
	table   *tableInfo
	records []arrow.RecordBatch
}

// roundRobin spreads writes to log tables without a bucket key: each
// statement's batch goes to the next bucket.
var roundRobin routing.RoundRobin

// write applies batches to table now, or buffers them until COMMIT inside a
// transaction block. The batches must conform to the table's schema.
func (s *session) write(ctx context.Context, table *tableInfo, batches []arrow.RecordBatch) error {
	if s.tx.status == pgwire.TxInBlock {
		w := &pendingWrite{table: table}
		for _, b := range batches {
			if b.NumRows() > 0 {
				b.Retain()
				w.records = append(w.records, b)
			}
		}
		s.tx.pending = append(s.tx.pending, w)
		return nil
	}
	a := s.f.newAppender()
	for _, b := range batches {
		if err := a.add(ctx, table, b); err != nil {
			return err
		}
	}
	return a.wait(ctx)
}

// applyWrites applies a committed transaction block's writes in order,
// and releases them.
func (s *session) applyWrites(ctx context.Context, pending []*pendingWrite) error {
	defer releaseWrites(pending)
	a := s.f.newAppender()
	for _, w := range pending {
		for _, r := range w.records {
			if err := a.add(ctx, w.table, r); err != nil {
				return err
			}
		}
	}
	return a.wait(ctx)
}

// releaseWrites releases the batches of writes.
func releaseWrites(pending []*pendingWrite) {
	for _, w := range pending {
		for _, r := range w.records {
			r.Release()
		}
	}
}

// appender routes a statement's batches to buckets and queues them all
// before waiting, so that they share WAL objects instead of waiting for one
// upload each. Within a bucket, batches keep their order.
type appender struct {
	f       *Frontend
	pending []*s3stream.PendingAppend
}

func (f *Frontend) newAppender() *appender { return &appender{f: f} }

// wait returns once every queued batch is durable, or with an error that
// says what the client may do: unavailable (57P03, retry) when no batch
// was stored — every failure was a WAL that closed or was fenced before
// the batch reached it — and unknown outcome (40003) when some may have
// been.
func (a *appender) wait(ctx context.Context) error {
	var first error
	stored, unknown := 0, false
	for _, p := range a.pending {
		_, err := p.Wait(ctx)
		switch {
		case err == nil:
			stored++
			continue
		case errors.Is(err, s3stream.ErrUnknownOutcome):
			unknown = true
		case !errors.Is(err, s3stream.ErrClosed) && !errors.Is(err, s3stream.ErrFenced):
			unknown = true // a wait cut short: the batch may still land
		}
		if first == nil {
			first = err
		}
	}
	a.pending = nil
	switch {
	case first == nil || unknown:
		return first
	case stored > 0:
		return fmt.Errorf("%w: some of the statement's rows were stored, others not: %w", buckets.ErrUnknownOutcome, first)
	}
	return fmt.Errorf("nothing was stored: %w: %w", buckets.ErrUnavailable, first)
}

// add routes rec to its partitions and buckets and queues each part.
func (a *appender) add(ctx context.Context, table *tableInfo, rec arrow.RecordBatch) error {
	if rec.NumRows() == 0 {
		return nil
	}
	f := a.f
	if table.partCol < 0 {
		var bucketIDs []catalog.BucketID
		f.cfg.Meta.Read(func(v *catalog.View) {
			if t, ok := v.Tables[table.id]; ok {
				bucketIDs = t.Buckets
			}
		})
		if len(bucketIDs) == 0 {
			return undefinedTable(table.name)
		}
		return a.toBuckets(ctx, table, bucketIDs, rec)
	}
	parts, err := routing.SplitByPartition(ctx, rec, table.partCol)
	if err != nil {
		return err
	}
	defer func() {
		for _, p := range parts {
			p.Record.Release()
		}
	}()
	for _, p := range parts {
		for try := 0; ; try++ {
			bucketIDs, err := f.ensurePartition(ctx, table, p.Value)
			if err != nil {
				return err
			}
			err = a.toBuckets(ctx, table, bucketIDs, p.Record)
			if errors.Is(err, buckets.ErrNoSuchBucket) && try < 3 {
				// partition_retention dropped the partition under this
				// statement; what reached its buckets went with it. Write
				// the rows to the partition anew, as a later statement
				// would.
				continue
			}
			if err != nil {
				return err
			}
			break
		}
	}
	return nil
}

func (a *appender) toBuckets(ctx context.Context, table *tableInfo, bucketIDs []catalog.BucketID, rec arrow.RecordBatch) error {
	return eachBucket(ctx, rec, table.keyCols, len(bucketIDs), func(i int, part arrow.RecordBatch) error {
		return a.toBucket(ctx, table, bucketIDs[i], part)
	})
}

// toBucket queues rec on a bucket led by this node, waiting up to
// BucketWait for a bucket that is opening. A bucket led elsewhere gets rec
// as it is (its leader pads it); a local one gets it in the stored form,
// NULL where columns were dropped.
func (a *appender) toBucket(ctx context.Context, table *tableInfo, id catalog.BucketID, rec arrow.RecordBatch) error {
	f := a.f
	return buckets.Retry(ctx, f.cfg.BucketWait, func() (bool, error) {
		m := f.cfg.Buckets()
		if m == nil {
			return false, buckets.ErrRegistering
		}
		b, err := m.Bucket(id)
		if err == nil {
			stored := sqltypes.Pad(rec, table.stored, nil)
			p, err := b.AppendAsync(ctx, stored)
			stored.Release()
			if err != nil {
				return true, fmt.Errorf("append to bucket %d: %w", id, err)
			}
			if p != nil {
				a.pending = append(a.pending, p)
			}
			return true, nil
		}
		if to, ok := f.ledElsewhere(err); ok {
			// Forwarded to the leader; this waits until it is durable there.
			err = f.cfg.Remote.AppendBucket(ctx, to, id, rec)
		}
		return false, err
	})
}

// ensurePartition returns the buckets of the partition holding value,
// creating the partition on first write.
func (f *Frontend) ensurePartition(ctx context.Context, table *tableInfo, value string) ([]catalog.BucketID, error) {
	find := func() []catalog.BucketID {
		var ids []catalog.BucketID
		f.cfg.Meta.Read(func(v *catalog.View) {
			if t, ok := v.Tables[table.id]; ok {
				for _, p := range t.Partitions {
					if p.Value == value {
						ids = p.Buckets
					}
				}
			}
		})
		return ids
	}
	if ids := find(); ids != nil {
		return ids, nil
	}
	out, err := f.cfg.Meta.Propose(ctx, catalog.CreatePartition{Table: table.id, Value: value})
	if err != nil && !errors.Is(err, catalog.ErrExists) {
		return nil, fmt.Errorf("create partition %q of %q: %w", value, table.name, err)
	}
	if err == nil {
		return out.Buckets, nil
	}
	if ids := find(); ids != nil {
		return ids, nil
	}
	return nil, fmt.Errorf("partition %q of %q vanished", value, table.name)
}
