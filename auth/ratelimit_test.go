package auth

import (
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"
)

var limiterEpoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// at is the fake clock: d after limiterEpoch.
func at(d time.Duration) time.Time { return limiterEpoch.Add(d) }

func checkAllow(t *testing.T, l *LoginLimiter, addr string, now time.Time, wantOK bool, wantRetry time.Duration) {
	t.Helper()
	ok, retry := l.Allow(netip.MustParseAddr(addr), now)
	if ok != wantOK || retry != wantRetry {
		t.Errorf("Allow(%s, epoch+%v) = %v, %v; want %v, %v", addr, now.Sub(limiterEpoch), ok, retry, wantOK, wantRetry)
	}
}

func fail(l *LoginLimiter, addr string, now time.Time, times int) {
	for range times {
		l.Failed(netip.MustParseAddr(addr), now)
	}
}

func tracked(l *LoginLimiter) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.mu.refilledAt)
}

func TestLoginLimiterBurstAndRefill(t *testing.T) {
	l := NewLoginLimiter(10, time.Second)
	const addr = "192.0.2.1"
	for i := range 10 {
		checkAllow(t, l, addr, at(0), true, 0)
		fail(l, addr, at(time.Duration(i)*time.Millisecond), 1)
	}
	// Ten failures in 9 ms: the bucket is empty. It has refilled for 9 ms,
	// and gives one more try when it has refilled for a second.
	checkAllow(t, l, addr, at(9*time.Millisecond), false, 991*time.Millisecond)
	checkAllow(t, l, addr, at(509*time.Millisecond), false, 491*time.Millisecond)
	checkAllow(t, l, addr, at(1000*time.Millisecond), true, 0)
	fail(l, addr, at(1000*time.Millisecond), 1)
	checkAllow(t, l, addr, at(1000*time.Millisecond), false, time.Second)
	checkAllow(t, l, addr, at(1999*time.Millisecond), false, time.Millisecond)
	checkAllow(t, l, addr, at(2000*time.Millisecond), true, 0)
	// Another source is not affected.
	checkAllow(t, l, "192.0.2.2", at(1000*time.Millisecond), true, 0)

	// Waiting long enough gives a full burst again, and the source is
	// forgotten.
	checkAllow(t, l, addr, at(20*time.Second), true, 0)
	if n := tracked(l); n != 0 {
		t.Errorf("%d sources tracked after a full refill, want 0", n)
	}
	fail(l, addr, at(20*time.Second), 10)
	checkAllow(t, l, addr, at(20*time.Second), false, time.Second)
}

// TestLoginLimiterSuccessRefundsNothing checks that a client with a valid
// account cannot log in between guesses to reset the limit.
func TestLoginLimiterSuccessRefundsNothing(t *testing.T) {
	l := NewLoginLimiter(3, time.Second)
	fail(l, "192.0.2.1", at(0), 3)
	l.Succeeded(netip.MustParseAddr("192.0.2.1"))
	checkAllow(t, l, "192.0.2.1", at(0), false, time.Second)
}

// TestLoginLimiterInFlight checks that failures reported together (from
// connections that passed Allow together) are all charged.
func TestLoginLimiterInFlight(t *testing.T) {
	l := NewLoginLimiter(10, time.Second)
	fail(l, "192.0.2.1", at(0), 30)
	checkAllow(t, l, "192.0.2.1", at(0), false, 21*time.Second)
	checkAllow(t, l, "192.0.2.1", at(21*time.Second), true, 0)
}

// TestLoginLimiterSources checks which addresses share a bucket.
func TestLoginLimiterSources(t *testing.T) {
	for _, tc := range []struct {
		failing, other string
		shared         bool
	}{
		{"192.0.2.1", "192.0.2.1", true},
		{"192.0.2.1", "::ffff:192.0.2.1", true},
		{"192.0.2.1", "192.0.2.2", false},
		{"2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff", true},
		{"2001:db8:1:2::1", "2001:db8:1:2::1%eth0", true},
		{"2001:db8:1:2::1", "2001:db8:1:3::1", false},
		{"::1", "127.0.0.1", false},
	} {
		l := NewLoginLimiter(2, time.Minute)
		fail(l, tc.failing, at(0), 2)
		ok, _ := l.Allow(netip.MustParseAddr(tc.other), at(0))
		if ok == tc.shared {
			t.Errorf("after 2 failures from %s, Allow(%s) = %v; want shared bucket %v", tc.failing, tc.other, ok, tc.shared)
		}
	}
	// Invalid addresses share one bucket.
	l := NewLoginLimiter(1, time.Minute)
	l.Failed(netip.Addr{}, at(0))
	if ok, _ := l.Allow(netip.Addr{}, at(0)); ok {
		t.Error("Allow(invalid address) after a failure from one = true")
	}
}

// TestLoginLimiterBound checks that the sources tracked stay bounded, and
// that the ones forgotten first are the refilled ones, then the one closest
// to refilled (with fewer sources than limiterEvictSample, the choice is
// exact).
func TestLoginLimiterBound(t *testing.T) {
	l := NewLoginLimiter(1, time.Second)
	l.maxSources = 3
	fail(l, "192.0.2.1", at(0), 3) // refilled at 3 s
	fail(l, "192.0.2.2", at(0), 1) // at 1 s
	fail(l, "192.0.2.3", at(0), 2) // at 2 s
	fail(l, "192.0.2.4", at(0), 1) // forgets .2, the first to refill
	if n := tracked(l); n != 3 {
		t.Errorf("%d sources tracked, want 3", n)
	}
	checkAllow(t, l, "192.0.2.2", at(0), true, 0)
	checkAllow(t, l, "192.0.2.1", at(0), false, 3*time.Second)
	checkAllow(t, l, "192.0.2.3", at(0), false, 2*time.Second)
	checkAllow(t, l, "192.0.2.4", at(0), false, time.Second)

	// At 2 s, .3 and .4 have refilled: a new source sweeps both.
	fail(l, "192.0.2.5", at(2*time.Second), 1)
	if n := tracked(l); n != 2 {
		t.Errorf("%d sources tracked, want 2 (.1 and .5)", n)
	}
	checkAllow(t, l, "192.0.2.1", at(2*time.Second), false, time.Second)

	// With the default bound, many sources failing stay within it, and a
	// flood of them does not make it forget a source that failed often.
	l = NewLoginLimiter(DefaultLoginBurst, DefaultLoginRefill)
	fail(l, "192.0.2.1", at(0), 100)
	for i := range 3 * limiterMaxSources {
		l.Failed(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), at(time.Duration(i)*time.Microsecond))
	}
	if n := tracked(l); n != limiterMaxSources {
		t.Errorf("%d sources tracked, want %d", n, limiterMaxSources)
	}
	checkAllow(t, l, "192.0.2.1", at(time.Second), false, 90*time.Second)
}

// TestLoginLimiterConcurrent checks under -race that failures reported
// concurrently are all charged.
func TestLoginLimiterConcurrent(t *testing.T) {
	const goroutines, failures = 8, 200
	l := NewLoginLimiter(10, time.Second)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			other := netip.MustParseAddr(fmt.Sprintf("198.51.100.%d", g))
			for range failures {
				l.Allow(netip.MustParseAddr("192.0.2.1"), at(0))
				l.Failed(netip.MustParseAddr("192.0.2.1"), at(0))
				l.Failed(other, at(0))
			}
		})
	}
	wg.Wait()
	checkAllow(t, l, "192.0.2.1", at(0), false, (goroutines*failures-9)*time.Second)
	checkAllow(t, l, "198.51.100.0", at(0), false, (failures-9)*time.Second)
}

func TestNewLoginLimiterPanics(t *testing.T) {
	for _, tc := range []struct {
		burst  int
		refill time.Duration
	}{{0, time.Second}, {10, 0}, {10, -time.Second}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewLoginLimiter(%d, %v) did not panic", tc.burst, tc.refill)
				}
			}()
			NewLoginLimiter(tc.burst, tc.refill)
		}()
	}
}
