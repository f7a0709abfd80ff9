package buckets

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minkdb/mink/buckets/s3stream"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/kv"
	"github.com/minkdb/mink/objstore"
)

// Metadata is what the manager needs from the metadata log;
// *metalog.Catalog implements it.
type Metadata interface {
	s3stream.Metadata
	Changed() <-chan struct{}
}

// Config configures a Manager.
type Config struct {
	Node      catalog.NodeID
	NodeEpoch uint64
	Meta      Metadata
	Store     objstore.Store
	// Live reports whether a node holds its liveness lease.
	Live func(catalog.NodeID) bool
	// LeaseHeld reports whether this node's own liveness lease surely
	// still holds (metalog.LivenessSession.Held). While it does not, the
	// node serves no bucket: another node may already lead them (spec,
	// "Failover"). Nil: always.
	LeaseHeld func() bool
	// Stream is the template for the node's s3stream configuration; Node,
	// NodeEpoch, Store, Meta and Logger are filled in.
	Stream s3stream.Config
	// SyncInterval is how often the sync task runs without a view change
	// (to retry HeldBy). Default 500 ms.
	SyncInterval time.Duration
	Logger       *slog.Logger
	// BatchCacheBytes bounds the decoded batches of committed stream
	// objects kept in memory for queries. Default 1 GiB.
	BatchCacheBytes int64
	// OnFenced is called once if the node's s3stream epoch is fenced; the
	// owner must register the node again and start a new Manager.
	OnFenced func(err error)

	// DataDir holds the KV tablets of the primary-key buckets open here,
	// in DataDir/kv/<bucket>-<leader epoch>. Empty: a temporary directory,
	// removed by Close.
	DataDir string
	// KVSnapshotInterval is how often an open primary-key bucket whose
	// tablet advanced is snapshotted. Default 5 minutes.
	KVSnapshotInterval time.Duration
	// KVCacheBytes is the block cache shared by the node's KV tablets.
	// Default 256 MiB.
	KVCacheBytes int64
	// KVLake, if set, reads a tiered primary-key bucket's rows from the
	// lake: the last resort of an open when no retained KV snapshot is
	// usable and the changelog is trimmed (see LakeRows).
	KVLake LakeRows
}

// Manager runs a node's buckets for one node epoch.
type Manager struct {
	cfg     Config
	node    *s3stream.Node
	batches *batchCache
	kick    chan struct{}

	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu struct {
		sync.Mutex
		open   map[catalog.BucketID]*LogBucket
		kv     map[catalog.BucketID]*KVBucket
		busy   map[catalog.BucketID]bool // an action is running for the bucket
		closed bool

		// unrecoverable holds the buckets whose stream a failover left
		// open because a WAL object it needed is corrupt (unrecoverable.go).
		unrecoverable map[catalog.BucketID]recoveryFailure
	}
	fencedOnce sync.Once
	// kvOpenErrs holds, per primary-key bucket (catalog.BucketID), the
	// error of its last failed open attempt while it keeps retrying.
	kvOpenErrs sync.Map

	kvCache *kv.Cache
	tempDir string // DataDir when Config.DataDir was empty
	// crashTablets is a test seam: shutting a bucket down leaves its
	// tablet as a crash of the process would (kv.Tablet.Crash). Set
	// before Close.
	crashTablets atomic.Bool
	releaseOnce  sync.Once
}

// NewManager starts the node's s3stream node and the sync task.
func NewManager(cfg Config) (*Manager, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.SyncInterval == 0 {
		cfg.SyncInterval = 500 * time.Millisecond
	}
	if cfg.Live == nil {
		return nil, fmt.Errorf("buckets: Config.Live is required")
	}
	sc := cfg.Stream
	sc.Node, sc.NodeEpoch, sc.Store, sc.Meta, sc.Logger = cfg.Node, cfg.NodeEpoch, cfg.Store, cfg.Meta, cfg.Logger
	node, err := s3stream.NewNode(sc)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	if cfg.BatchCacheBytes == 0 {
		cfg.BatchCacheBytes = 1 << 30
	}
	if cfg.KVSnapshotInterval == 0 {
		cfg.KVSnapshotInterval = 5 * time.Minute
	}
	if cfg.KVCacheBytes == 0 {
		cfg.KVCacheBytes = 256 << 20
	}
	var tempDir string
	if cfg.DataDir == "" {
		if tempDir, err = os.MkdirTemp("", "mink-kv-"); err != nil {
			cancel()
			node.Close()
			return nil, fmt.Errorf("buckets: KV tablet directory: %w", err)
		}
		cfg.DataDir = tempDir
	}
	m := &Manager{cfg: cfg, node: node, batches: newBatchCache(cfg.BatchCacheBytes), kick: make(chan struct{}, 1), cancel: cancel,
		kvCache: kv.NewCache(cfg.KVCacheBytes), tempDir: tempDir}
	m.mu.open = make(map[catalog.BucketID]*LogBucket)
	m.mu.kv = make(map[catalog.BucketID]*KVBucket)
	m.mu.busy = make(map[catalog.BucketID]bool)
	m.mu.unrecoverable = make(map[catalog.BucketID]recoveryFailure)
	m.wg.Add(1)
	go func() { defer m.wg.Done(); m.syncLoop(ctx) }()
	return m, nil
}

// Reader returns the reader of committed stream data.
func (m *Manager) Reader() *s3stream.Reader { return m.node.Reader() }

// Kick makes the sync task run now.
func (m *Manager) Kick() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

func (m *Manager) syncLoop(ctx context.Context) {
	m.sweepKVDirs()
	t := time.NewTicker(m.cfg.SyncInterval)
	defer t.Stop()
	for {
		changed := m.cfg.Meta.Changed()
		m.syncOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-m.kick:
		case <-t.C:
		}
	}
}

func (m *Manager) syncOnce(ctx context.Context) {
	if m.inDoubt() {
		// In doubt: a look finding the WAL sealed fences the node.
		pctx, cancel := context.WithTimeout(ctx, readProofTimeout)
		m.node.Unsealed(pctx, time.Now())
		cancel()
	}
	if err := m.node.Fenced(); err != nil {
		m.fenced(err)
		return
	}
	m.mu.Lock()
	local := localState{open: make(map[catalog.BucketID]uint64, len(m.mu.open)), busy: make(map[catalog.BucketID]bool, len(m.mu.busy))}
	for id, b := range m.mu.open {
		local.open[id] = b.epoch
	}
	var failed []action
	for id, b := range m.mu.kv {
		local.open[id] = b.epoch
		if b.failure() != nil && !m.mu.busy[id] {
			// Pending's protocol: a bucket whose append failed is closed
			// (which waits for the stream to settle) and reopened.
			failed = append(failed, action{kind: actClose, bucket: id, epoch: b.epoch})
		}
	}
	for id := range m.mu.busy {
		local.busy[id] = true
	}
	m.mu.Unlock()
	var actions []action
	m.cfg.Meta.Read(func(v *catalog.View) {
		actions = decide(v, m.cfg.Node, m.cfg.NodeEpoch, m.cfg.Live, local)
	})
	actions = append(failed, actions...)
	for _, a := range actions {
		if a.kind == actWait {
			continue
		}
		m.mu.Lock()
		if m.mu.closed || m.mu.busy[a.bucket] {
			m.mu.Unlock()
			continue
		}
		m.mu.busy[a.bucket] = true
		m.mu.Unlock()
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			err := m.act(ctx, a)
			m.mu.Lock()
			delete(m.mu.busy, a.bucket)
			m.mu.Unlock()
			if err != nil && ctx.Err() == nil {
				m.cfg.Logger.Warn("bucket sync step failed; will retry", "action", a.String(), "err", err)
			}
			m.Kick()
		}()
	}
}

// act carries out one action.
func (m *Manager) act(ctx context.Context, a action) error {
	opts := s3stream.FailoverOptions{By: m.cfg.Node, ByEpoch: m.cfg.NodeEpoch, Logger: m.cfg.Logger}
	switch a.kind {
	case actOpen:
		if spec, ok := m.primaryKeySpec(a.bucket); ok {
			return m.openKV(ctx, a, spec)
		}
		stream, err := m.node.OpenStream(ctx, catalog.StreamID(a.bucket), a.epoch)
		if err != nil {
			return err
		}
		m.mu.Lock()
		m.mu.open[a.bucket] = &LogBucket{id: a.bucket, epoch: a.epoch, stream: stream, m: m}
		m.mu.Unlock()
		m.cfg.Logger.Info("bucket open", "bucket", a.bucket, "leader_epoch", a.epoch, "end", stream.End())
	case actRenew:
		out, err := m.cfg.Meta.Propose(ctx, catalog.LeadBucket{Bucket: a.bucket, Node: m.cfg.Node, ExpectLeaderEpoch: a.epoch, NodeEpoch: m.cfg.NodeEpoch})
		if err != nil {
			return fmt.Errorf("renew leader epoch of bucket %d: %w", a.bucket, err)
		}
		m.cfg.Logger.Info("bucket leader epoch renewed", "bucket", a.bucket, "leader_epoch", out.Epoch)
	case actRecover:
		if m.recentlyUnrecoverable(a.bucket) {
			return nil
		}
		st, err := s3stream.RecoverNode(ctx, m.cfg.Store, m.cfg.Meta, m.cfg.Node, opts)
		if rest := m.noteUnrecoverable(a.bucket, m.cfg.Node, 0, err); rest != nil {
			return fmt.Errorf("recover this node's earlier epochs: %w", rest)
		} else if err != nil {
			return nil // logged by noteUnrecoverable
		}
		m.cfg.Logger.Info("recovered earlier epochs of this node", "entries", st.Entries, "streams", st.Streams, "wal_objects", st.WALObjects)
	case actTakeover:
		if m.recentlyUnrecoverable(a.bucket) {
			return nil
		}
		if err := m.fence(ctx, a.holder, a.holderEpoch); err != nil {
			return err
		}
		st, err := s3stream.Failover(ctx, m.cfg.Store, m.cfg.Meta, a.holder, a.holderEpoch, opts)
		if rest := m.noteUnrecoverable(a.bucket, a.holder, a.holderEpoch, err); rest != nil {
			return fmt.Errorf("take over from node %d epoch %d: %w", a.holder, a.holderEpoch, rest)
		} else if err != nil {
			return nil // logged by noteUnrecoverable
		}
		m.cfg.Logger.Info("took over from dead node", "holder", a.holder, "holder_epoch", a.holderEpoch, "entries", st.Entries, "streams", st.Streams)
	case actClose:
		m.mu.Lock()
		b := m.mu.open[a.bucket]
		kb := m.mu.kv[a.bucket]
		m.mu.Unlock()
		if kb != nil {
			return m.closeKV(ctx, kb)
		}
		if b == nil {
			return nil
		}
		err := b.stream.Close(ctx)
		if err != nil && !errors.Is(err, s3stream.ErrFenced) {
			return fmt.Errorf("close bucket %d: %w", a.bucket, err)
		}
		m.mu.Lock()
		delete(m.mu.open, a.bucket)
		m.mu.Unlock()
		m.cfg.Logger.Info("bucket closed", "bucket", a.bucket, "leader_epoch", a.epoch, "err", err)
	}
	return nil
}

// fence bumps a dead holder's node epoch so that its WAL can be sealed,
// unless it has moved on already (it re-registered, or another node fenced
// it first).
func (m *Manager) fence(ctx context.Context, holder catalog.NodeID, holderEpoch uint64) error {
	var current uint64
	m.cfg.Meta.Read(func(v *catalog.View) {
		if n, ok := v.Nodes[holder]; ok {
			current = n.Epoch
		}
	})
	if current > holderEpoch {
		return nil
	}
	_, err := m.cfg.Meta.Propose(ctx, catalog.RegisterNode{Node: holder, ExpectEpoch: holderEpoch})
	if err != nil && !errors.Is(err, catalog.ErrStaleEpoch) {
		return fmt.Errorf("fence node %d epoch %d: %w", holder, holderEpoch, err)
	}
	return nil
}

func (m *Manager) fenced(err error) {
	m.fencedOnce.Do(func() {
		m.cfg.Logger.Error("node fenced: stop serving buckets", "err", err)
		if m.cfg.OnFenced != nil {
			go m.cfg.OnFenced(err)
		}
	})
}

// Bucket returns the log bucket if this node leads it and has it open, a
// *NotLeaderError naming the leader, or ErrUnavailable.
func (m *Manager) Bucket(id catalog.BucketID) (*LogBucket, error) {
	since := time.Now()
	m.mu.Lock()
	b := m.mu.open[id]
	lost := m.mu.unrecoverable[id].err
	m.mu.Unlock()
	var err error
	m.cfg.Meta.Read(func(v *catalog.View) {
		vb, ok := v.Buckets[id]
		switch {
		case !ok:
			err = fmt.Errorf("bucket %d: %w", id, ErrNoSuchBucket)
		case isPrimaryKey(v, vb):
			err = fmt.Errorf("bucket %d %w", id, errIsKVBucket)
		case vb.Leader == 0:
			err = fmt.Errorf("bucket %d has no leader yet: %w", id, ErrUnavailable)
		case vb.Leader != m.cfg.Node:
			nle := &NotLeaderError{Bucket: id, Leader: vb.Leader}
			if n, ok := v.Nodes[vb.Leader]; ok {
				nle.To = n.Addrs.Flight
			}
			err = nle
		case b == nil && lost != nil:
			err = unrecoverableError(id, lost)
		case b == nil || b.epoch != vb.LeaderEpoch:
			err = fmt.Errorf("bucket %d is opening on this node: %w", id, ErrUnavailable)
		}
	})
	if err != nil {
		return nil, err
	}
	if serr := b.stream.Err(); serr != nil {
		return nil, fmt.Errorf("bucket %d: %w: %v", id, ErrUnavailable, serr)
	}
	if err := m.readable(id, since); err != nil {
		return nil, err
	}
	return b, nil
}

// A node's liveness lease is in doubt once the last renewal etcd granted
// no longer covers now, until the next one is granted: etcd does not
// answer (a partition from etcd, or etcd without a quorum), and the node
// cannot tell whether its lease expired there, in which case another node
// may be taking its buckets over. The spec (issue 19, scenario 3) wants
// no write acknowledged and reads of committed data going on:
//
//   - writes: leaseHeld refuses every append (ErrLeaseInDoubt) before it is
//     queued. An append queued while the lease held and acknowledged after
//     is safe: a takeover replays every WAL object below its seal, and one
//     above the seal fails (s3stream fences the node).
//   - reads: readable serves a read only after a look at this node's WAL,
//     begun after the read arrived, finds no seal (s3stream.Node.Unsealed).
//     A takeover seals the WAL before the new leader serves anything, so
//     no write elsewhere can precede the read. A seal found fences the
//     node, which then registers again.
//
// The sync task looks too while the lease is in doubt, so a node that was
// taken over fences itself even if nothing reads it.

// leaseHeld is nil while this node's liveness lease surely holds, and
// ErrLeaseInDoubt while it is in doubt.
func (m *Manager) leaseHeld(id catalog.BucketID) error {
	if !m.inDoubt() {
		return nil
	}
	return fmt.Errorf("bucket %d: %w", id, ErrLeaseInDoubt)
}

// leaseWait is how long a write waits for a lease in doubt to be renewed
// before it fails with ErrLeaseInDoubt: a renewal held up for a moment (a
// busy etcd) costs the writer a pause, not an error.
const leaseWait = 2 * time.Second

// awaitLease is leaseHeld, waiting up to leaseWait (or ctx) for a renewal.
func (m *Manager) awaitLease(ctx context.Context, id catalog.BucketID) error {
	if !m.inDoubt() {
		return nil
	}
	deadline := time.Now().Add(leaseWait)
	for m.inDoubt() {
		if time.Now().After(deadline) {
			return m.leaseHeld(id)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

func (m *Manager) inDoubt() bool { return m.cfg.LeaseHeld != nil && !m.cfg.LeaseHeld() }

// readProofTimeout bounds how long a read waits for the proof that no
// takeover has begun while the lease is in doubt.
const readProofTimeout = 3 * time.Second

// readable is nil if bucket id may serve a read that arrived at since:
// the lease holds, or it is in doubt and the WAL is not sealed.
func (m *Manager) readable(id catalog.BucketID, since time.Time) error {
	if !m.inDoubt() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), readProofTimeout)
	defer cancel()
	err := m.node.Unsealed(ctx, since)
	if err == nil {
		return nil
	}
	if errors.Is(err, s3stream.ErrFenced) {
		m.fenced(err)
	}
	return fmt.Errorf("bucket %d: %w, and no proof that none has begun: %v", id, ErrLeaseInDoubt, err)
}

// StoreStalled is how long the object store has kept this node's oldest
// write waiting (s3stream.Node.Stalled); 0 while writes go through.
func (m *Manager) StoreStalled() time.Duration { return m.node.Stalled() }

// LocalEnd is the acknowledged end offset of bucket id if this node has it
// open. It does not read the metadata view, so it may be called inside a
// Metadata.Read callback.
func (m *Manager) LocalEnd(id catalog.BucketID) (uint64, bool) {
	m.mu.Lock()
	b := m.mu.open[id]
	kb := m.mu.kv[id]
	m.mu.Unlock()
	if kb != nil {
		return kb.stream.End(), true
	}
	if b == nil {
		return 0, false
	}
	return b.stream.End(), true
}

// ReadCommitted returns the committed batches of bucket id overlapping
// [from, to), from stream objects; any node can serve it.
func (m *Manager) ReadCommitted(ctx context.Context, id catalog.BucketID, from, to uint64) ([]Batch, error) {
	return readBucket(ctx, m.cfg.Meta, m.node.Reader(), m.batches, nil, catalog.StreamID(id), from, to)
}

// Close stops the sync task and the node's s3stream goroutines. Open
// buckets are abandoned, not closed: their acknowledged data is in the WAL,
// and the next start of this node (or a node taking over) recovers it. Use
// CloseBuckets first for a clean hand-over.
func (m *Manager) Close() error {
	m.mu.Lock()
	m.mu.closed = true
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()
	m.mu.Lock()
	kvs := make([]*KVBucket, 0, len(m.mu.kv))
	for _, b := range m.mu.kv {
		kvs = append(kvs, b)
	}
	m.mu.kv = map[catalog.BucketID]*KVBucket{}
	m.mu.Unlock()
	for _, b := range kvs {
		b.shutdown(false, true)
	}
	m.batches.clear()
	err := m.node.Close()
	m.releaseOnce.Do(func() {
		m.kvCache.Release()
		if m.tempDir != "" {
			os.RemoveAll(m.tempDir)
		}
	})
	return err
}

// CloseBuckets closes every open bucket cleanly: flush, commit, CloseStream.
// A restart then takes the "closed at the current leader epoch" path.
func (m *Manager) CloseBuckets(ctx context.Context) error {
	m.mu.Lock()
	m.mu.closed = true
	open := make([]*LogBucket, 0, len(m.mu.open))
	for _, b := range m.mu.open {
		open = append(open, b)
	}
	kvs := make([]*KVBucket, 0, len(m.mu.kv))
	for _, b := range m.mu.kv {
		kvs = append(kvs, b)
	}
	m.mu.Unlock()
	var errs []error
	for _, b := range open {
		if err := b.stream.Close(ctx); err != nil && !errors.Is(err, s3stream.ErrFenced) {
			errs = append(errs, fmt.Errorf("close bucket %d: %w", b.id, err))
		}
	}
	for _, b := range kvs {
		if err := m.closeKVStream(ctx, b, true); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
