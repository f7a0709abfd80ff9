package auth

import (
	"fmt"
	"net/netip"
	"sync"
	"time"
)

// The limits a node puts on failed logins unless configured otherwise: ten
// failures in a row, then one more try per second.
const (
	DefaultLoginBurst  = 10
	DefaultLoginRefill = time.Second
)

// limiterMaxSources bounds the sources a LoginLimiter tracks: about 100
// bytes each, so about a megabyte.
const limiterMaxSources = 10000

// A LoginLimiter limits failed logins per source, so that a client cannot
// guess passwords faster than the refill rate: each source has a bucket of
// burst failures that refills by one every refill. A listener calls Allow
// before it authenticates a client and refuses the client without looking
// at its credentials if Allow says no; it calls Failed when authentication
// fails.
//
// A source is an IPv4 address or an IPv6 /64 (a host usually has a whole
// /64 and could otherwise rotate addresses within it). A failure is charged
// when it is reported, even if the bucket is already empty, so failures
// that were in flight together all count: opening many connections at once
// buys no extra guesses, only a longer wait.
//
// A successful login (Succeeded) refunds nothing: if it did, a client with
// one valid account could log in after every few failures and guess at
// other roles' passwords without limit. A user who mistyped their password
// waits at most refill between tries, and burst × refill for a fresh start.
//
// It tracks at most limiterMaxSources sources. When a new source fails and
// the limit is reached, it forgets, among a few sources it samples, those
// whose buckets have refilled (they are no different from new ones), or
// else the one closest to refilled. So a client failing from more sources
// than that can make it forget some, but each of its sources still gets
// at most burst failures before it must wait.
//
// It is safe for concurrent use, and starts no goroutines.
type LoginLimiter struct {
	// Fixed at construction.
	burst      int
	refill     time.Duration
	maxSources int // limiterMaxSources; tests lower it

	mu struct {
		sync.Mutex
		// refilledAt is, for each source that failed recently, when its
		// bucket is full again (the "theoretical arrival time" of the generic
		// cell rate algorithm). Each failure pushes it one refill later than
		// max(refilledAt, now); a source may try iff refilledAt is at most
		// (burst-1)*refill ahead of now. A source without an entry has a full
		// bucket.
		refilledAt map[netip.Prefix]time.Time
	}
}

// NewLoginLimiter returns a limiter that allows burst failures in a row
// from a source, then one more per refill.
func NewLoginLimiter(burst int, refill time.Duration) *LoginLimiter {
	if burst < 1 || refill <= 0 {
		panic(fmt.Sprintf("auth: NewLoginLimiter(%d, %v): need a burst of at least 1 and a positive refill", burst, refill))
	}
	l := &LoginLimiter{burst: burst, refill: refill, maxSources: limiterMaxSources}
	l.mu.refilledAt = make(map[netip.Prefix]time.Time)
	return l
}

// Allow reports whether a client at addr may try to log in at now, and if
// not, how long until it may.
func (l *LoginLimiter) Allow(addr netip.Addr, now time.Time) (ok bool, retryAfter time.Duration) {
	source := limiterSource(addr)
	l.mu.Lock()
	defer l.mu.Unlock()
	refilledAt, tracked := l.mu.refilledAt[source]
	if !tracked {
		return true, 0
	}
	if !refilledAt.After(now) {
		delete(l.mu.refilledAt, source)
		return true, 0
	}
	if wait := refilledAt.Sub(now) - time.Duration(l.burst-1)*l.refill; wait > 0 {
		return false, wait
	}
	return true, 0
}

// Failed charges a failed login by a client at addr at now.
func (l *LoginLimiter) Failed(addr netip.Addr, now time.Time) {
	source := limiterSource(addr)
	l.mu.Lock()
	defer l.mu.Unlock()
	refilledAt, tracked := l.mu.refilledAt[source]
	if !tracked && len(l.mu.refilledAt) >= l.maxSources {
		l.evictLocked(now)
	}
	if refilledAt.Before(now) {
		refilledAt = now
	}
	l.mu.refilledAt[source] = refilledAt.Add(l.refill)
}

// limiterEvictSample is how many sources evictLocked looks at: enough to
// find one that has refilled or nearly so, and few enough that a failure
// costs the same however many sources are tracked (an exact choice would
// scan them all, under the lock every login takes).
const limiterEvictSample = 16

// Succeeded is told of a successful login from addr, and on purpose
// changes nothing: if a success refunded failures, a client with one valid
// account could log in between guesses at other roles' passwords and guess
// without limit (see LoginLimiter). It is there so that a listener can
// report every outcome to one interface (access.Limiter).
func (l *LoginLimiter) Succeeded(addr netip.Addr) {}

// evictLocked makes room for one more source. Among a sample of the
// sources (Go randomises the order of a map), it forgets those whose
// buckets have refilled by now, or if there is none, the one that refills
// first.
//
// REQUIRES: l.mu held.
func (l *LoginLimiter) evictLocked(now time.Time) {
	var (
		victim         netip.Prefix
		victimAt       time.Time
		looked, forgot int
	)
	for source, refilledAt := range l.mu.refilledAt {
		if !refilledAt.After(now) {
			delete(l.mu.refilledAt, source)
			forgot++
		} else if victimAt.IsZero() || refilledAt.Before(victimAt) {
			victim, victimAt = source, refilledAt
		}
		if looked++; looked == limiterEvictSample {
			break
		}
	}
	if forgot == 0 {
		delete(l.mu.refilledAt, victim)
	}
}

// limiterSource is the source addr counts against: the address itself for
// IPv4 (IPv4-mapped IPv6 included) and its /64 for IPv6. Invalid addresses
// share one source.
func limiterSource(addr netip.Addr) netip.Prefix {
	addr = addr.Unmap().WithZone("")
	switch {
	case addr.Is4():
		return netip.PrefixFrom(addr, 32)
	case addr.Is6():
		source, _ := addr.Prefix(64)
		return source
	}
	return netip.Prefix{}
}
