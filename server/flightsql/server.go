package flightsql

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/minkdb/mink/access"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/sqlfront"
)

// Metadata is what the server reads of the metadata log (tables, their
// columns and privileges); *metalog.Catalog implements it.
type Metadata interface {
	Read(fn func(v *catalog.View))
}

// Config configures a Server.
type Config struct {
	// Front runs the statements (sqlfront's Arrow sessions).
	Front *sqlfront.Frontend
	Meta  Metadata
	// Access checks table visibility for the metadata commands; nil:
	// every table is visible (tests). Statements check privileges in
	// their session either way.
	Access *access.Guard
	// IdleTimeout closes a prepared statement not used for this long.
	// Default 10 minutes.
	IdleTimeout time.Duration
	// Version is reported as the server version (GetSqlInfo). Default
	// "dev".
	Version string
	Logger  *slog.Logger
}

// Server is the Flight SQL server of one node. Serve it through Route.
type Server struct {
	flightsql.BaseServer
	cfg   Config
	alloc memory.Allocator

	mu struct {
		sync.Mutex
		// prepared are the open prepared statements by handle.
		prepared map[string]*prepared
		closed   bool
	}

	quit chan struct{}
	done chan struct{}
}

// New returns a server and starts its janitor; Close stops it.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = 10 * time.Minute
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	s := &Server{cfg: cfg, alloc: memory.DefaultAllocator, quit: make(chan struct{}), done: make(chan struct{})}
	s.BaseServer.Alloc = s.alloc
	s.mu.prepared = map[string]*prepared{}
	s.registerSQLInfo()
	go s.janitor()
	return s
}

// Close closes every prepared statement and stops the janitor. Calls
// still running finish on their own (the Flight listener is closed first).
func (s *Server) Close() {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return
	}
	s.mu.closed = true
	all := s.mu.prepared
	s.mu.prepared = nil
	s.mu.Unlock()
	close(s.quit)
	<-s.done
	for _, p := range all {
		p.close()
	}
}

// janitor closes prepared statements idle for longer than IdleTimeout.
func (s *Server) janitor() {
	defer close(s.done)
	every := s.cfg.IdleTimeout / 4
	if every < 10*time.Millisecond {
		every = 10 * time.Millisecond
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.quit:
			return
		case now := <-t.C:
			for _, p := range s.idle(now) {
				s.cfg.Logger.Debug("flight sql: closing an idle prepared statement", "role", p.id.Name, "idle", s.cfg.IdleTimeout)
				p.close()
			}
		}
	}
}

// idle removes and returns the prepared statements idle since before
// now - IdleTimeout and not in use.
func (s *Server) idle(now time.Time) []*prepared {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*prepared
	for h, p := range s.mu.prepared {
		if p.idleSince(now) > s.cfg.IdleTimeout {
			delete(s.mu.prepared, h)
			out = append(out, p)
		}
	}
	return out
}

// identity is the role a call acts as: its authenticated identity, or the
// bootstrap superuser when the listener authenticates no one.
func (s *Server) identity(ctx context.Context) access.Identity {
	if id, ok := access.FromContext(ctx); ok {
		return id
	}
	return s.cfg.Front.BootstrapIdentity()
}

// session opens a session acting as the caller.
func (s *Server) session(ctx context.Context) (*sqlfront.ArrowSession, access.Identity, error) {
	id := s.identity(ctx)
	a, err := s.cfg.Front.NewArrowSession(ctx, id)
	if err != nil {
		return nil, id, toStatus(err)
	}
	return a, id, nil
}

func newHandle() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}
