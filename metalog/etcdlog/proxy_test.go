package etcdlog

import (
	"net"
	"sync"
	"testing"
)

// faultProxy is a TCP proxy between an etcd client and etcd that can freeze
// all traffic (a paused process, a partition) or cut the connections at the
// next bytes in one direction (a request lost, or a response lost after the
// request got through).
type faultProxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu struct {
		sync.Mutex
		// thawed is closed while traffic flows, open while frozen.
		thawed chan struct{}
		// cutArmed cuts every connection at the next bytes in the armed
		// direction: cutResponse etcd to client, else client to etcd.
		cutArmed    bool
		cutResponse bool
		conns       map[net.Conn]struct{}
		closed      bool
	}
}

func newFaultProxy(t testing.TB, target string) *faultProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{ln: ln, target: target}
	p.mu.thawed = make(chan struct{})
	close(p.mu.thawed)
	p.mu.conns = map[net.Conn]struct{}{}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *faultProxy) addr() string { return p.ln.Addr().String() }

func (p *faultProxy) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.mu.thawed:
		p.mu.thawed = make(chan struct{})
	default:
	}
}

func (p *faultProxy) thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.mu.thawed:
	default:
		close(p.mu.thawed)
	}
}

// armCut cuts every connection at the next bytes from etcd (response: the
// request got through) or to etcd (the request is lost).
func (p *faultProxy) armCut(response bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.cutArmed, p.mu.cutResponse = true, response
}

// cutAll closes every connection (the client reconnects).
func (p *faultProxy) cutAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.mu.conns {
		c.Close()
		delete(p.mu.conns, c)
	}
}

func (p *faultProxy) cutArmed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.cutArmed
}

func (p *faultProxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		if p.mu.closed {
			p.mu.Unlock()
			client.Close()
			server.Close()
			return
		}
		p.mu.conns[client] = struct{}{}
		p.mu.conns[server] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(server, client, false)
		go p.pipe(client, server, true)
	}
}

// pipe copies src to dst. fromServer marks the etcd-to-client direction.
func (p *faultProxy) pipe(dst, src net.Conn, fromServer bool) {
	defer p.wg.Done()
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			thawed := p.mu.thawed
			cut := p.mu.cutArmed && fromServer == p.mu.cutResponse
			if cut {
				p.mu.cutArmed = false
				for c := range p.mu.conns {
					c.Close()
					delete(p.mu.conns, c)
				}
			}
			p.mu.Unlock()
			if cut {
				return
			}
			<-thawed
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *faultProxy) close() {
	p.mu.Lock()
	p.mu.closed = true
	for c := range p.mu.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.thaw()
	p.ln.Close()
	p.wg.Wait()
}
