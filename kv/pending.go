package kv

import (
	"fmt"
	"sync"

	"github.com/minkdb/mink/kv/kvcodec"
)

// Pending is the leader's write-side view of a primary-key bucket: the
// tablet plus the changes that are appended to the stream but not yet
// acknowledged and applied. It lets the leader pipeline writes — compute the
// changes of the next batch while earlier appends are still in flight —
// without reading a stale row: Changes reads through the staged batches.
//
// Readers that serve queries use the Tablet (or a Reader), never Pending:
// they must not see a value that could still be lost.
//
// Protocol, per bucket:
//
//	records, err := p.Changes(codec, writes)   // computes and stages, in order
//	… append records to the stream, in the same order as Changes calls …
//	on acknowledgement, in stream order: p.Apply(records, endOffset)
//	on a failed append: p.Discard(), stop writing, and reopen the bucket
//
// An append whose outcome is unknown (s3stream.ErrUnknownOutcome, a context
// error) may still become durable, so it must not simply be forgotten: the
// bucket discards, closes and reopens, and the replay applies whatever the
// stream acknowledged. For the same reason, the goroutine that waits for
// acknowledgements and calls Apply waits with the bucket's context, not a
// client's.
//
// The caller serializes Changes with its stream appends (so that staging
// order is stream order) and calls Apply in stream order. Pending is safe
// for concurrent use under that protocol.
type Pending struct {
	t *Tablet

	mu struct {
		sync.Mutex
		// rows holds, for every key a staged batch writes, the row after
		// the newest such batch (nil: deleted) and that batch's sequence.
		rows map[string]pendingRow
		// staged are the staged batches not yet applied, oldest first.
		staged []stagedBatch
		// seq numbers staged batches.
		seq uint64
	}
}

type pendingRow struct {
	row []byte // nil: deleted
	seq uint64
}

type stagedBatch struct {
	seq     uint64
	records int
}

// NewPending returns the write-side view of t with nothing staged.
func NewPending(t *Tablet) *Pending {
	p := &Pending{t: t}
	p.mu.rows = map[string]pendingRow{}
	return p
}

// Get returns the row of key as of the last staged batch.
func (p *Pending) Get(key []byte) ([]byte, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.getLocked(key)
}

// REQUIRES: p.mu held.
func (p *Pending) getLocked(key []byte) ([]byte, bool, error) {
	if pr, ok := p.mu.rows[string(key)]; ok {
		return pr.row, pr.row != nil, nil
	}
	return p.t.Get(key)
}

// Staged is the number of records staged and not yet applied.
func (p *Pending) Staged() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, b := range p.mu.staged {
		n += b.records
	}
	return n
}

// Changes computes the records of writes against the tablet and the staged
// batches (see ChangesWith: conditional writes compare rows as c reads
// them; nil c compares bytewise) and stages them. A batch that produces no
// records (every write a no-op) stages nothing and needs no append.
func (p *Pending) Changes(c *kvcodec.Codec, writes []kvcodec.Write) ([]kvcodec.ChangeRecord, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	records, err := ChangesWith(c, pendingReader{p}, writes)
	if err != nil || len(records) == 0 {
		return records, err
	}
	p.mu.seq++
	for _, r := range records {
		row := r.Row
		if r.Type == kvcodec.Delete {
			row = nil
		} else if r.Type == kvcodec.UpdateBefore {
			continue
		}
		p.mu.rows[string(r.Key)] = pendingRow{row: row, seq: p.mu.seq}
	}
	p.mu.staged = append(p.mu.staged, stagedBatch{seq: p.mu.seq, records: len(records)})
	return records, nil
}

// pendingReader reads through p with p.mu already held.
type pendingReader struct{ p *Pending }

func (r pendingReader) Get(key []byte) ([]byte, bool, error) { return r.p.getLocked(key) }

// Apply applies the oldest staged batch, whose append was acknowledged with
// end offset endOffset, to the tablet (Tablet.Apply), and unstages it.
// records must be exactly what Changes returned for that batch.
func (p *Pending) Apply(records []kvcodec.ChangeRecord, endOffset uint64) error {
	p.mu.Lock()
	if len(p.mu.staged) == 0 || p.mu.staged[0].records != len(records) {
		staged := p.mu.staged
		p.mu.Unlock()
		panic(fmt.Sprintf("kv: Pending.Apply of %d records ending at %d, but the oldest staged batch is %v: batches are applied in the order they were staged", len(records), endOffset, staged))
	}
	p.mu.Unlock()
	// The tablet is updated before the batch is unstaged, so a concurrent
	// Get sees the batch's rows throughout.
	if err := p.t.Apply(records, endOffset); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	b := p.mu.staged[0]
	p.mu.staged = p.mu.staged[1:]
	for _, r := range records {
		if pr, ok := p.mu.rows[string(r.Key)]; ok && pr.seq == b.seq {
			delete(p.mu.rows, string(r.Key))
		}
	}
	return nil
}

// Discard drops every staged batch. The bucket calls it when an append
// fails: the stream then acknowledges nothing after the failed entry, so
// none of the staged batches will be applied.
func (p *Pending) Discard() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.rows = map[string]pendingRow{}
	p.mu.staged = nil
}
