package pgwire

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// watchDelay is how long a handler call runs before the connection starts
// watching its socket for the client going away. Shorter calls finish
// before a watcher would notice anything; they pay nothing for it.
const watchDelay = 5 * time.Millisecond

// watchReadAhead bounds what a watcher reads ahead of the protocol
// goroutine (messages the client pipelined behind a long query). A watcher
// that has read this much stops; the client's end is then noticed when the
// protocol goroutine reads again.
const watchReadAhead = 256 << 10

// watchChunk is the size of one read of a watcher.
const watchChunk = 32 << 10

// Watcher states.
const (
	watchIdle    = iota // no handler call runs; only the protocol goroutine reads
	watchArmed          // a handler call runs; the timer starts a watcher after watchDelay
	watchRunning        // a watcher goroutine reads the socket
	watchOff            // this call reads the socket itself (COPY), or the watcher ended
)

// sockReader is what pgproto3.Backend reads from. Between handler calls the
// protocol goroutine reads the socket directly: a round trip costs no
// goroutine switch. While a handler call runs longer than watchDelay, a
// watcher goroutine reads the socket instead, so that a client that closes
// its connection cancels the running query (the connection's context is
// cancelled with errClientGone); what the watcher read is handed to the
// protocol goroutine when the call ends.
//
// Read, arm and disarm are called by the protocol goroutine only.
type sockReader struct {
	src  io.Reader // the connection, or the TLS connection over it
	nc   net.Conn  // for read deadlines, which interrupt a watcher
	ctx  context.Context
	gone func() // called once reading the socket failed

	timer *time.Timer

	// mu guards the hand-over between the protocol goroutine and a watcher.
	mu struct {
		sync.Mutex
		state    int
		pending  []byte        // read by a watcher, not yet returned by Read
		err      error         // the read error, returned after pending
		done     chan struct{} // closed when the running watcher returns
		stopping bool          // the protocol goroutine interrupts the watcher
	}
}

func newSockReader(ctx context.Context, src io.Reader, nc net.Conn, gone func()) *sockReader {
	r := &sockReader{src: src, nc: nc, ctx: ctx, gone: gone}
	r.timer = time.AfterFunc(time.Hour, r.startWatcher)
	r.timer.Stop()
	return r
}

// arm is called as a handler call begins.
func (r *sockReader) arm() {
	r.mu.Lock()
	r.mu.state = watchArmed
	r.mu.Unlock()
	r.timer.Reset(watchDelay)
}

// disarm is called as a handler call ends: it stops the watcher, if one
// runs, and waits for it.
//
// The timer may have fired already, its startWatcher waiting for mu: the
// check for a running watcher and the move to watchIdle happen under one
// lock, so that such a startWatcher either saw watchArmed and runs (and is
// stopped here) or sees watchIdle and returns. (Setting watchIdle in a
// second critical section after stopWatcher let a watcher start in
// between and keep reading the socket while the protocol goroutine read it
// too: the watcher took the client's next message and the connection hung.)
func (r *sockReader) disarm() {
	r.timer.Stop()
	r.mu.Lock()
	running := r.mu.state == watchRunning
	if !running {
		r.mu.state = watchIdle
	}
	r.mu.Unlock()
	if !running {
		return
	}
	r.stopWatcher() // leaves watchOff, from which no watcher starts
	r.mu.Lock()
	r.mu.state = watchIdle
	r.mu.Unlock()
}

// startWatcher runs on the timer's goroutine, which becomes the watcher.
func (r *sockReader) startWatcher() {
	r.mu.Lock()
	if r.mu.state != watchArmed {
		// The call ended (or reads the socket itself) meanwhile.
		r.mu.Unlock()
		return
	}
	r.mu.state = watchRunning
	done := make(chan struct{})
	r.mu.done = done
	r.mu.Unlock()
	defer close(done)
	r.watch()
}

func (r *sockReader) watch() {
	buf := make([]byte, watchChunk)
	for {
		n, err := r.src.Read(buf)
		r.mu.Lock()
		r.mu.pending = append(r.mu.pending, buf[:n]...)
		if err != nil {
			if r.mu.stopping && errors.Is(err, os.ErrDeadlineExceeded) {
				r.mu.Unlock() // interrupted by stopWatcher: not an error
				return
			}
			r.mu.err = &readError{err: err}
			r.mu.Unlock()
			r.gone()
			return
		}
		full := len(r.mu.pending) >= watchReadAhead
		r.mu.Unlock()
		if full {
			return
		}
	}
}

// stopWatcher interrupts a running watcher and waits for it to return. The
// watcher may have read part of a TLS record; crypto/tls keeps it for the
// next read, as a timed-out read does not break the TLS state.
func (r *sockReader) stopWatcher() {
	r.mu.Lock()
	if r.mu.state != watchRunning {
		r.mu.Unlock()
		return
	}
	r.mu.stopping = true
	done := r.mu.done
	r.mu.Unlock()
	_ = r.nc.SetReadDeadline(time.Unix(1, 0))
	<-done
	_ = r.nc.SetReadDeadline(time.Time{})
	// Server.Close cancels the context, then sets a past deadline: if it
	// did so while the watcher was being stopped, the deadline cleared
	// above was its, so set it again. (Checked after clearing: a Close
	// that comes later sets its own.)
	if r.ctx.Err() != nil {
		_ = r.nc.SetReadDeadline(time.Now())
	}
	r.mu.Lock()
	r.mu.stopping = false
	r.mu.state = watchOff
	r.mu.done = nil
	r.mu.Unlock()
}

// Read implements io.Reader for pgproto3.Backend: first what a watcher read,
// then its error, then the socket.
func (r *sockReader) Read(p []byte) (int, error) {
	r.mu.Lock()
	switch r.mu.state {
	case watchArmed:
		// A handler call reads the socket itself (COPY FROM STDIN): it
		// sees the client's end on its own.
		r.mu.state = watchOff
	case watchRunning:
		r.mu.Unlock()
		r.stopWatcher()
		r.mu.Lock()
	}
	if len(r.mu.pending) > 0 {
		n := copy(p, r.mu.pending)
		r.mu.pending = r.mu.pending[n:]
		if len(r.mu.pending) == 0 {
			r.mu.pending = nil
		}
		r.mu.Unlock()
		return n, nil
	}
	if r.mu.err != nil {
		err := r.mu.err
		r.mu.Unlock()
		return 0, err
	}
	r.mu.Unlock()
	n, err := r.src.Read(p)
	if err != nil {
		// Even EOF is wrapped: pgproto3 reports a body that ends early
		// with io.EOF too, and that is a malformed message, not a client
		// that went away.
		err = &readError{err: err}
		r.mu.Lock()
		r.mu.err = err
		r.mu.Unlock()
		r.gone()
		return n, err
	}
	return n, nil
}

// close stops the timer and waits for a running watcher. The connection
// is closed (or being closed), so the watcher's read fails promptly.
func (r *sockReader) close() {
	r.timer.Stop()
	r.mu.Lock()
	done := r.mu.done
	r.mu.state = watchOff
	r.mu.Unlock()
	if done != nil {
		<-done
	}
}
