package main

// A slow, throttling S3 (issue 19, scenario 4): versitygw behind a proxy
// that delays requests and answers 503 SlowDown, either before passing a
// request on or after versitygw carried it out (the response lost).

import (
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// s3Proxy is the faulty proxy. Its rates change while it runs.
type s3Proxy struct {
	target *url.URL
	mu     sync.Mutex
	rng    *rand.Rand
	// delay is the most a request waits (uniformly) before it goes on;
	// before and after are the chances of a 503 before passing it on and
	// after versitygw answered.
	delay         time.Duration
	before, after float64

	throttled, lost atomic.Int64 // 503s answered before and after
	walPuts         atomic.Int64 // PUTs of WAL objects that reached the proxy
}

func startS3Proxy(t *testing.T, endpoint string, seed uint64) (*s3Proxy, string) {
	t.Helper()
	target, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	p := &s3Proxy{target: target, rng: rand.New(rand.NewPCG(seed, seed))}
	t.Logf("S3 proxy seed %d", seed)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = p
	rp.ErrorLog = nil
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: rp}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return p, "http://" + ln.Addr().String()
}

// set changes the fault rates.
func (p *s3Proxy) set(delay time.Duration, before, after float64) {
	p.mu.Lock()
	p.delay, p.before, p.after = delay, before, after
	p.mu.Unlock()
}

func (p *s3Proxy) roll() (delay time.Duration, before, after bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.delay > 0 {
		delay = time.Duration(p.rng.Int64N(int64(p.delay)))
	}
	return delay, p.rng.Float64() < p.before, p.rng.Float64() < p.after
}

const slowDown = `<?xml version="1.0" encoding="UTF-8"?>
<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`

func (p *s3Proxy) slowDown(req *http.Request) *http.Response {
	return &http.Response{
		StatusCode: http.StatusServiceUnavailable, Status: "503 Slow Down",
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/xml"}},
		Body:          io.NopCloser(strings.NewReader(slowDown)),
		ContentLength: int64(len(slowDown)), Request: req,
	}
}

// RoundTrip implements http.RoundTripper for the reverse proxy.
func (p *s3Proxy) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPut && strings.Contains(req.URL.Path, "/wal/") {
		p.walPuts.Add(1)
	}
	delay, before, after := p.roll()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	if before {
		p.throttled.Add(1)
		return p.slowDown(req), nil
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || !after {
		return resp, err
	}
	// versitygw did it; the client hears 503 and will try again.
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	p.lost.Add(1)
	return p.slowDown(req), nil
}

// Three nodes on versitygw behind the proxy, under writes and reads: first
// with delays and 503s (some after the request was carried out), then a
// few seconds of 503 for everything, then a clean store. Nothing
// acknowledged is lost or duplicated (history checked, every row read once
// through every node), and retries back off: during the total outage the
// nodes' WAL puts stay at a trickle.
func TestSlowThrottlingObjectStore(t *testing.T) {
	c := newTestCluster(t, clusterOpts{s3: true})
	var proxy *s3Proxy
	var proxyURL string
	for _, n := range c.nodes {
		for i := 1; i < len(n.args); i++ {
			if n.args[i-1] == "--s3-endpoint" {
				if proxy == nil {
					proxy, proxyURL = startS3Proxy(t, n.args[i], uint64(time.Now().UnixNano()))
				}
				n.args[i] = proxyURL
			}
		}
	}
	c.startAll()
	const buckets = 6
	createTable(t, c.nodes[0], "s", buckets)
	c.waitServed(c.nodes[0], "s", 60*time.Second)

	h := newHistory()
	w := &workload{h: h, table: "s", writers: 4, readEvery: 200 * time.Millisecond, seed: 24, timeout: 10 * time.Second}
	proxy.set(20*time.Millisecond, 0.05, 0.05)
	w.run(c)
	waitFor(t, 90*time.Second, "200 inserts acknowledged through the faulty store", func() bool {
		ok, _, _, _ := h.counts()
		return ok >= 200
	})
	if proxy.throttled.Load() == 0 || proxy.lost.Load() == 0 {
		t.Fatalf("the proxy answered %d 503s before and %d after carrying a request out: the faults were not exercised",
			proxy.throttled.Load(), proxy.lost.Load())
	}

	// Everything 503 for 3 s: the WAL uploads back off.
	const outage = 3 * time.Second
	proxy.set(0, 1, 0)
	putsBefore := proxy.walPuts.Load()
	time.Sleep(outage)
	puts := proxy.walPuts.Load() - putsBefore
	proxy.set(0, 0, 0)
	t.Logf("WAL puts during a %v total outage: %d (%.0f/s)", outage, puts, float64(puts)/outage.Seconds())
	// Three nodes, four uploads in flight each, each retried with a
	// doubling backoff: a few dozen. A retry loop without backoff would
	// send thousands.
	if rate := float64(puts) / outage.Seconds(); rate > 100 {
		t.Fatalf("%d WAL puts in %v of 503s (%.0f/s): the retries do not back off", puts, outage, rate)
	}
	before := h.now()
	waitFor(t, 60*time.Second, "writes acknowledged again after the outage", func() bool {
		for _, o := range h.snapshot() {
			if !o.read && o.status == opOK && o.call > before {
				return true
			}
		}
		return false
	})
	w.haltAfter(t, 350)
	acked, fail, info, reads := h.counts()
	t.Logf("inserts: %d acknowledged, %d failed, %d unknown; %d reads; proxy: %d throttled, %d responses lost",
		acked, fail, info, reads, proxy.throttled.Load(), proxy.lost.Load())
	checkHistory(t, h, buckets)
	checkEveryNodeReadsAll(c, h, "s")
	for _, n := range c.nodes {
		n.stop()
	}
}
