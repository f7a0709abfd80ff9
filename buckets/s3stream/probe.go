package s3stream

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/minkdb/mink/objstore"
)

// A node whose liveness lease is in doubt (etcd does not answer, so it
// cannot tell whether etcd expired the lease) may already have been
// declared dead, and a node taking its buckets over seals its WAL before
// it serves them (Failover). The seal is the one witness both sides can
// reach without etcd: while it is absent, no takeover has begun, so
// nothing the old leader's streams hold has been overtaken by a write
// elsewhere. Unsealed looks for it.

// sealProbe is one look at this node's WAL above its durable prefix.
type sealProbe struct {
	started time.Time
	done    chan struct{}
	err     error // nil: not sealed when the probe looked
}

// Unsealed is nil if a look at this node's WAL, begun at or after since,
// found no seal: no node had begun to take this node epoch over at that
// moment. It returns ErrFenced (and fences the node) if the WAL is sealed,
// and ctx's error or the store's if the look did not finish. Callers
// asking at about the same time share one look.
//
// A read served after Unsealed(since) with since taken when the read
// arrived is linearizable: any write another leader acknowledged before the
// read arrived needed the seal first.
func (n *Node) Unsealed(ctx context.Context, since time.Time) error {
	if err := n.Fenced(); err != nil {
		return err
	}
	n.probeMu.Lock()
	p := n.probeMu.last
	if p == nil || p.started.Before(since) {
		p = &sealProbe{started: time.Now(), done: make(chan struct{})}
		n.probeMu.last = p
		go n.probe(p)
	}
	n.probeMu.Unlock()
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// probeTimeout bounds one probe; callers wait less if their ctx says so.
const probeTimeout = 10 * time.Second

// probe walks the WAL from the durable prefix: every object below it is
// this node's, so a seal can only be at or above it. Objects of uploads
// still under way may or may not be there (and a takeover's garbage
// collection may have removed those below its seal), so the walk goes on
// past every seq this node has handed out and ends at the first absent
// one at or past them.
func (n *Node) probe(p *sealProbe) {
	defer close(p.done)
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	if n.wal.segs != nil {
		// On segments the fence is the seal's witness.
		_, err := n.cfg.Store.GetRange(ctx, walFenceKey(n.cfg.Node, n.cfg.NodeEpoch), 0, 0)
		switch {
		case err == nil:
			n.fenceAt(errSealed, math.MaxUint64)
			p.err = n.Fenced()
		case !errors.Is(err, objstore.ErrNotFound):
			p.err = fmt.Errorf("look for a seal on this node's WAL: %w", err)
		}
		return
	}
	n.wal.mu.Lock()
	seq, next := n.wal.mu.durable, n.wal.mu.nextSeq
	n.wal.mu.Unlock()
	for ; ; seq++ {
		w, err := getWAL(ctx, n.cfg.Store, n.cfg.Node, n.cfg.NodeEpoch, seq)
		switch {
		case errors.Is(err, objstore.ErrNotFound):
			if seq >= next {
				return
			}
			continue
		case err != nil:
			p.err = fmt.Errorf("look for a seal on this node's WAL at seq %d: %w", seq, err)
			return
		case w.Sealed:
			n.fenceAt(fmt.Errorf("WAL sealed at seq %d by a node taking over", seq), seq)
			p.err = n.Fenced()
			return
		}
	}
}

// probeState is the Node's last seal probe.
type probeState struct {
	sync.Mutex
	last *sealProbe
}
