package pgwire

import (
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of Config.
const (
	DefaultMaxMessageSize = 64 << 20
	DefaultServerVersion  = "15.0 (mink)"
	DefaultStartupTimeout = 60 * time.Second
)

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("pgwire: server closed")

// Config configures a Server.
type Config struct {
	Handler Handler
	Logger  *slog.Logger // slog.Default() when nil

	// Auth decides how connections authenticate; nil trusts every user
	// unless Users is set.
	Auth Authenticator
	// Users, when Auth is nil and Users is not empty, makes every client
	// authenticate with SCRAM-SHA-256 against these passwords (by user).
	Users map[string]string

	// TLSConfig enables TLS: an SSLRequest is answered 'S' and the
	// connection upgraded. When nil, SSLRequest is answered 'N'.
	TLSConfig *tls.Config

	// MaxMessageSize is the largest message body a client may send, in
	// bytes; 0 means DefaultMaxMessageSize (64 MiB). A longer message
	// gets a FATAL 08P01 error and its connection is closed.
	MaxMessageSize int

	// MaxConnections limits concurrent client connections; 0 means no
	// limit. Extra connections get FATAL 53300.
	MaxConnections int

	// ServerVersion is reported as server_version; drivers parse its
	// leading number. DefaultServerVersion when empty.
	ServerVersion string

	// StartupTimeout bounds the startup and authentication exchange
	// (PostgreSQL's authentication_timeout). DefaultStartupTimeout when 0.
	StartupTimeout time.Duration
}

// Server accepts PostgreSQL wire protocol connections and serves each on its
// own goroutine. It starts, per Serve call, one accept loop, and per
// connection one goroutine running the protocol and one reading the socket;
// Close stops and waits for all of them. All methods are safe to call
// concurrently.
type Server struct {
	cfg  Config
	log  *slog.Logger
	auth Authenticator // nil: trust everyone

	nextPID atomic.Uint32
	wg      sync.WaitGroup

	mu struct {
		sync.Mutex
		closed    bool
		listeners map[net.Listener]struct{}
		// conns holds every accepted connection, for Close and
		// MaxConnections.
		conns map[*conn]struct{}
		// byPID holds connections that finished startup, for
		// CancelRequest.
		byPID map[uint32]*conn
	}
}

// NewServer returns a server; call Serve to accept connections.
func NewServer(cfg Config) (*Server, error) {
	if cfg.Handler == nil {
		return nil, errors.New("pgwire: Config.Handler is nil")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxMessageSize <= 0 {
		cfg.MaxMessageSize = DefaultMaxMessageSize
	}
	if cfg.ServerVersion == "" {
		cfg.ServerVersion = DefaultServerVersion
	}
	if cfg.StartupTimeout <= 0 {
		cfg.StartupTimeout = DefaultStartupTimeout
	}
	s := &Server{cfg: cfg, log: cfg.Logger}
	s.auth = cfg.Auth
	if s.auth == nil && len(cfg.Users) > 0 {
		users, err := newStaticUsers(cfg.Users)
		if err != nil {
			return nil, err
		}
		s.auth = users
	}
	var seed [4]byte
	_, _ = rand.Read(seed[:])
	// Process ids start at a random point so that ids from before a restart
	// do not cancel new queries; they stay below 2^30 like real pids.
	s.nextPID.Store(binary.BigEndian.Uint32(seed[:]) % (1 << 30))
	s.mu.listeners = make(map[net.Listener]struct{})
	s.mu.conns = make(map[*conn]struct{})
	s.mu.byPID = make(map[uint32]*conn)
	return s, nil
}

// Serve accepts connections on ln until Close. It returns ErrServerClosed
// after Close, or the listener's error.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return ErrServerClosed
	}
	s.mu.listeners[ln] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()

	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.mu.closed
			s.mu.Unlock()
			if closed {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("pgwire: accept", "err", err, "retry_in", backoff)
				time.Sleep(backoff)
				continue
			}
			s.mu.Lock()
			delete(s.mu.listeners, ln)
			s.mu.Unlock()
			return fmt.Errorf("pgwire: accept: %w", err)
		}
		backoff = 0
		c := newConn(s, nc)
		s.mu.Lock()
		if s.mu.closed {
			s.mu.Unlock()
			nc.Close()
			return ErrServerClosed
		}
		tooMany := s.cfg.MaxConnections > 0 && len(s.mu.conns) >= s.cfg.MaxConnections
		s.mu.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			defer s.forget(c)
			c.serve(tooMany)
		}()
	}
}

// Close stops accepting, ends every connection (a running query is
// cancelled and its client gets FATAL 57P01) and waits for every goroutine
// of the server to finish.
func (s *Server) Close() error {
	s.mu.Lock()
	s.mu.closed = true
	for ln := range s.mu.listeners {
		ln.Close()
	}
	for c := range s.mu.conns {
		c.shutdown()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// Addrs returns the addresses of the listeners being served.
func (s *Server) Addrs() []net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	var addrs []net.Addr
	for ln := range s.mu.listeners {
		addrs = append(addrs, ln.Addr())
	}
	return addrs
}

func (s *Server) forget(c *conn) {
	s.mu.Lock()
	delete(s.mu.conns, c)
	if s.mu.byPID[c.pid] == c {
		delete(s.mu.byPID, c.pid)
	}
	s.mu.Unlock()
}

// register makes c reachable by CancelRequest and assigns its key. It
// reports false when the server is closing.
func (s *Server) register(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return false
	}
	for {
		pid := s.nextPID.Add(1) % (1 << 30)
		if _, taken := s.mu.byPID[pid]; pid != 0 && !taken {
			c.pid = pid
			break
		}
	}
	s.mu.byPID[c.pid] = c
	return true
}

// cancel handles a CancelRequest: it cancels the running query of the
// connection with that process id if the secret matches. Like PostgreSQL, it
// never tells the requester whether anything happened.
func (s *Server) cancel(pid uint32, secret []byte) {
	s.mu.Lock()
	c := s.mu.byPID[pid]
	s.mu.Unlock()
	if c == nil || subtle.ConstantTimeCompare(c.secret[:], secret) != 1 {
		s.log.Debug("pgwire: cancel request for unknown process", "pid", pid)
		return
	}
	c.cancelQuery()
}
