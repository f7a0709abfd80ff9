package s3stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/objstore"
)

var (
	// ErrFenced means a newer epoch owns the stream, or this node's epoch was
	// superseded: nothing more can be acknowledged. The node registers again.
	ErrFenced = errors.New("s3stream: fenced")
	// ErrClosed is returned by operations on a closed stream or node.
	ErrClosed = errors.New("s3stream: closed")
	// ErrUnknownOutcome is returned to appenders whose WAL upload failed. The
	// entry was not acknowledged; it may still become durable if a retry of the
	// same upload succeeds, in which case it is in the stream exactly once.
	ErrUnknownOutcome = errors.New("s3stream: WAL upload failed; append not acknowledged")
	// ErrTrimmed is returned by reads from below a stream's start offset:
	// that data was trimmed (catalog.TrimStream, log_retention).
	ErrTrimmed = errors.New("s3stream: offsets trimmed")
)

// Metadata is what s3stream needs from the metadata log. *metalog.Catalog
// implements it; tests wrap it to inject faults.
type Metadata interface {
	Propose(ctx context.Context, rec catalog.Record) (catalog.Outcome, error)
	Read(fn func(v *catalog.View))
}

// Config configures a Node. Zero values take the defaults noted.
type Config struct {
	Node      catalog.NodeID
	NodeEpoch uint64
	Store     objstore.Store
	Meta      Metadata
	Logger    *slog.Logger

	// BatchWindow is how long the batcher waits to group appends into one WAL
	// object while other WAL uploads are in flight (with none in flight,
	// appends are uploaded at once). Default 2 ms, suited to a local
	// directory; use tens of milliseconds on S3 (DefaultS3BatchWindow).
	BatchWindow time.Duration
	// MaxBatchBytes closes a WAL object early. Default 8 MiB.
	MaxBatchBytes int
	// MaxInflight is the number of WAL uploads in flight at once. Default 4.
	MaxInflight int
	// GroupCommitBytes, when positive, makes the WAL commit in groups as a
	// database's log does: while an upload is in flight, the next one
	// starts only once this many bytes are pending. Smaller appends wait
	// for the upload in flight and all go in the object after it, so that
	// under concurrent small appends each put carries every append that
	// arrived during the one before it. BatchWindow is then not waited.
	// Suited to a local directory, where a put is a few fsyncs and creates
	// a file (parallel small puts cost CPU and inodes, not latency). Zero,
	// the default, starts up to MaxInflight uploads at once, each after
	// BatchWindow, which suits S3's long, parallel puts.
	GroupCommitBytes int
	// MaxBuffered bounds the bytes held in memory (appended but not yet
	// committed to stream objects); Append waits above it. Default 512 MiB.
	MaxBuffered int64
	// FlushInterval is how often acknowledged entries are written to stream
	// objects and committed. Default 1 s.
	FlushInterval time.Duration
	// FlushBytes triggers a flush of a stream early. Default 16 MiB.
	FlushBytes int64
	// MaxObjectBytes caps the size of one stream object. Default 64 MiB.
	MaxObjectBytes int
	// CompactSmallBytes: committed objects smaller than this are merged in
	// the background once CompactMinObjects of them are adjacent. Defaults
	// 4 MiB and 8.
	CompactSmallBytes int64
	CompactMinObjects int
	// Cache serves committed reads; nil reads straight from the store.
	Cache *Cache
	// WALMetrics counts the WAL's writes; nil: the node counts in one of
	// its own (Node.WALStats reads either).
	WALMetrics *WALMetrics
	// WALSegmentBytes is the size of the segments the WAL is written to on
	// a store that holds segments (a local directory; see segment.go).
	// Default DefaultWALSegmentBytes; negative writes one object per WAL
	// object there too.
	WALSegmentBytes int64
	// RetryBackoff is the first delay before retrying a failed WAL upload;
	// it doubles up to 2 s. Default 50 ms.
	RetryBackoff time.Duration
}

// DefaultS3BatchWindow is a batch window suited to S3 latencies.
const DefaultS3BatchWindow = 20 * time.Millisecond

// DefaultGroupCommitBytes is a GroupCommitBytes suited to a local
// directory: a backlog of a megabyte (bulk loads) uploads in parallel.
const DefaultGroupCommitBytes = 1 << 20

func (c *Config) setDefaults() {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.WALMetrics == nil {
		c.WALMetrics = &WALMetrics{}
	}
	if c.BatchWindow == 0 {
		c.BatchWindow = 2 * time.Millisecond
	}
	if c.MaxBatchBytes == 0 {
		c.MaxBatchBytes = 8 << 20
	}
	if c.MaxInflight == 0 {
		c.MaxInflight = 4
	}
	if c.MaxBuffered == 0 {
		c.MaxBuffered = 512 << 20
	}
	if c.FlushInterval == 0 {
		c.FlushInterval = time.Second
	}
	if c.FlushBytes == 0 {
		c.FlushBytes = 16 << 20
	}
	if c.MaxObjectBytes == 0 {
		c.MaxObjectBytes = 64 << 20
	}
	if c.CompactSmallBytes == 0 {
		c.CompactSmallBytes = 4 << 20
	}
	if c.CompactMinObjects == 0 {
		c.CompactMinObjects = 8
	}
	if c.WALSegmentBytes == 0 {
		c.WALSegmentBytes = DefaultWALSegmentBytes
	}
	if c.RetryBackoff == 0 {
		c.RetryBackoff = 50 * time.Millisecond
	}
}

// Node is one node epoch's view of s3stream: the streams it has open and its
// WAL. A Node never outlives its node epoch: when it is fenced, the owner
// closes it, registers again and creates a new Node.
type Node struct {
	cfg    Config
	reader *Reader
	wal    *wal

	flushKick chan struct{}
	probeMu   probeState // probe.go
	cancel    context.CancelFunc
	wg        sync.WaitGroup

	mu struct {
		sync.Mutex
		streams map[catalog.StreamID]*Stream
		// fenced is sticky: once set, every stream of this node is fenced.
		fenced error
		closed bool
	}
}

// NewNode starts the node's batcher and flusher. The node epoch must already
// be registered in the metadata log.
func NewNode(cfg Config) (*Node, error) {
	if cfg.Store == nil || cfg.Meta == nil || cfg.Node == 0 || cfg.NodeEpoch == 0 {
		return nil, fmt.Errorf("s3stream: node config needs a store, metadata, a node id and a node epoch")
	}
	cfg.setDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	n := &Node{
		cfg:       cfg,
		reader:    NewReader(cfg.Store, cfg.Meta, cfg.Cache),
		flushKick: make(chan struct{}, 1),
		cancel:    cancel,
	}
	n.mu.streams = make(map[catalog.StreamID]*Stream)
	n.wal = newWAL(ctx, n)
	n.wg.Add(2)
	go func() { defer n.wg.Done(); n.wal.batchLoop(ctx) }()
	go func() { defer n.wg.Done(); n.flushLoop(ctx) }()
	return n, nil
}

// WALStats returns the counters of the node's WALMetrics.
func (n *Node) WALStats() WALStats { return n.cfg.WALMetrics.Stats() }

// Fenced returns the reason the node was fenced, or nil.
func (n *Node) Fenced() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.mu.fenced
}

// fenceAt marks the node fenced after finding its WAL sealed at sealSeq (a
// node took over, and replays the WAL objects below it): the WAL refuses
// new appends and fails every waiter (wal.fail says with which error), and
// every open stream reports ErrFenced.
func (n *Node) fenceAt(reason error, sealSeq uint64) {
	n.mu.Lock()
	if n.mu.fenced != nil {
		n.mu.Unlock()
		return
	}
	n.mu.fenced = fmt.Errorf("%w: %v", ErrFenced, reason)
	err := n.mu.fenced
	streams := make([]*Stream, 0, len(n.mu.streams))
	for _, s := range n.mu.streams {
		streams = append(streams, s)
	}
	n.mu.Unlock()
	n.cfg.Logger.Warn("s3stream node fenced", "node", n.cfg.Node, "node_epoch", n.cfg.NodeEpoch, "reason", reason)
	n.wal.fail(err, sealSeq)
	for _, s := range streams {
		s.setFenced(err)
	}
}

// OpenStream opens stream id at epoch on this node (OpenStream in the
// metadata log). The stream continues at its committed end offset. It fails
// with catalog.ErrFenced when epoch is below the stream's epoch and with a
// *catalog.HeldByError when another node holds it open.
func (n *Node) OpenStream(ctx context.Context, id catalog.StreamID, epoch uint64) (*Stream, error) {
	n.mu.Lock()
	if err := n.usableLocked(); err != nil {
		n.mu.Unlock()
		return nil, err
	}
	if _, ok := n.mu.streams[id]; ok {
		n.mu.Unlock()
		return nil, fmt.Errorf("s3stream: stream %d is already open on this node", id)
	}
	n.mu.Unlock()

	out, err := n.cfg.Meta.Propose(ctx, catalog.OpenStream{Stream: id, Epoch: epoch, Node: n.cfg.Node, NodeEpoch: n.cfg.NodeEpoch})
	if err != nil {
		return nil, fmt.Errorf("open stream %d at epoch %d: %w", id, epoch, err)
	}
	s := newStream(n, id, epoch, out.End)
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.usableLocked(); err != nil {
		return nil, err
	}
	n.mu.streams[id] = s
	return s, nil
}

func (n *Node) usableLocked() error {
	if n.mu.closed {
		return ErrClosed
	}
	return n.mu.fenced
}

// Stream returns the open stream id, if this node has it open.
func (n *Node) Stream(id catalog.StreamID) (*Stream, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	s, ok := n.mu.streams[id]
	return s, ok
}

func (n *Node) forget(s *Stream) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.streams[s.id] == s {
		delete(n.mu.streams, s.id)
	}
}

func (n *Node) openStreams() []*Stream {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]*Stream, 0, len(n.mu.streams))
	for _, s := range n.mu.streams {
		out = append(out, s)
	}
	return out
}

// Stalled is how long this node's oldest unacknowledged WAL object has
// waited for the object store (failing or hanging uploads), 0 when none
// waits: how long the store has kept the node from acknowledging writes.
func (n *Node) Stalled() time.Duration { return n.wal.stalled() }

// WALObjects is the number of WAL objects this node epoch has begun to
// write (on a local directory, records in its segments).
func (n *Node) WALObjects() uint64 {
	n.wal.mu.Lock()
	defer n.wal.mu.Unlock()
	return n.wal.mu.nextSeq
}

// Reader returns the node's reader of committed data.
func (n *Node) Reader() *Reader { return n.reader }

// Close stops the node's goroutines. Streams still open are abandoned, not
// closed: their acknowledged entries are in the WAL, and the next incarnation
// of the node (or another node) recovers them with Failover. Use
// Stream.Close to hand a stream over cleanly.
func (n *Node) Close() error {
	n.mu.Lock()
	if n.mu.closed {
		n.mu.Unlock()
		return nil
	}
	n.mu.closed = true
	streams := make([]*Stream, 0, len(n.mu.streams))
	for _, s := range n.mu.streams {
		streams = append(streams, s)
	}
	n.mu.Unlock()
	n.cancel()
	n.wg.Wait()
	n.wal.fail(ErrClosed, math.MaxUint64)
	if n.wal.segs != nil {
		n.wal.segs.close()
	}
	for _, s := range streams {
		s.setFenced(ErrClosed)
	}
	return nil
}

func (n *Node) kickFlush() {
	select {
	case n.flushKick <- struct{}{}:
	default:
	}
}

// flushLoop writes acknowledged entries to stream objects every
// FlushInterval, or sooner when a stream has FlushBytes buffered.
func (n *Node) flushLoop(ctx context.Context) {
	t := time.NewTicker(n.cfg.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-n.flushKick:
		}
		if err := n.FlushAll(ctx); err != nil && ctx.Err() == nil {
			n.cfg.Logger.Warn("flush stream objects failed; will retry", "node", n.cfg.Node, "err", err)
		}
	}
}

// FlushAll writes every open stream's acknowledged entries to stream objects,
// commits them, advances the WAL trim point and merges small objects.
func (n *Node) FlushAll(ctx context.Context) error {
	var errs []error
	for _, s := range n.openStreams() {
		if err := s.Flush(ctx); err != nil && !errors.Is(err, ErrFenced) && !errors.Is(err, ErrClosed) {
			errs = append(errs, err)
		}
	}
	if err := n.trimWAL(ctx); err != nil {
		errs = append(errs, err)
	}
	for _, s := range n.openStreams() {
		if _, err := s.Compact(ctx); err != nil && !errors.Is(err, ErrFenced) && !errors.Is(err, ErrClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// trimWAL commits the node's WAL trim point: the lowest seq that still holds
// an entry not committed to a stream object.
func (n *Node) trimWAL(ctx context.Context) error {
	trim := n.wal.ackedSeq()
	for _, s := range n.openStreams() {
		if seq, ok := s.firstUncommittedSeq(); ok && seq < trim {
			trim = seq
		}
	}
	if !n.wal.shouldTrim(trim) {
		return nil
	}
	_, err := n.cfg.Meta.Propose(ctx, catalog.CommitWALTrim{Node: n.cfg.Node, NodeEpoch: n.cfg.NodeEpoch, TrimSeq: trim, By: n.cfg.Node, ByEpoch: n.cfg.NodeEpoch})
	if err != nil {
		return fmt.Errorf("commit WAL trim %d: %w", trim, err)
	}
	n.wal.trimmed(trim)
	return nil
}
