package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/minkdb/mink/buckets/routing"
	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/server"
)

// FailoverConfig configures RunFailover. Zero values mean the defaults.
type FailoverConfig struct {
	// Dir holds the cluster's data (a fresh subdirectory, removed
	// afterwards). Default: the temp dir.
	Dir string
	// ShortRuns is the number of runs with short timings (lease_ttl 2 s,
	// coordinator_tick 0.5 s) per table kind. Default 5.
	ShortRuns int
	// DefaultRuns is the number of runs with the default timings (30 s and
	// 5 s) per table kind. Default 2; negative: none.
	DefaultRuns int
	// Buckets of the table. Default 6 (two per node).
	Buckets int
}

func (c *FailoverConfig) fill() {
	if c.ShortRuns == 0 {
		c.ShortRuns = 5
	}
	if c.DefaultRuns == 0 {
		c.DefaultRuns = 2
	}
	if c.Buckets == 0 {
		c.Buckets = 6
	}
}

// FailoverResult is one kill -9 of a bucket leader, split into the spec's
// phases (ownership-and-failover.txt, "Failover"):
//
//	Detection     kill → the node is no longer live (its lease expired)
//	Reassignment  → every bucket it led has a new leader in the view
//	Takeover      → the last new leader logged "took over from dead node"
//	              (dead node fenced, its WAL replayed and sealed)
//	Open          → the last of those buckets logged "bucket open" (for a
//	              primary-key bucket: tablet restored from its snapshot and
//	              changelog, "primary-key bucket open")
//
// FirstWrite is kill → the first acknowledged write, sent after the kill,
// into a bucket the dead node led.
type FailoverResult struct {
	Kind     string // "log" or "primary key"
	LeaseTTL time.Duration
	Tick     time.Duration
	Moved    int // buckets the dead node led

	Detection, Reassignment, Takeover, Open, FirstWrite time.Duration
	Total                                               time.Duration // kill → every bucket open
}

// RunFailover measures and prints a markdown table.
func RunFailover(ctx context.Context, w io.Writer, cfg FailoverConfig) error {
	res, err := MeasureFailover(ctx, cfg)
	if err != nil {
		return err
	}
	WriteFailoverTable(w, res)
	return nil
}

// MeasureFailover runs the failovers: for log and primary-key tables, with
// short timings and with the default ones.
func MeasureFailover(ctx context.Context, cfg FailoverConfig) (_ []FailoverResult, err error) {
	cfg.fill()
	dir, err := os.MkdirTemp(cfg.Dir, "mink-bench-failover")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err == nil {
			os.RemoveAll(dir)
		} else {
			err = fmt.Errorf("%w (node logs kept in %s)", err, dir)
		}
	}()
	bin, err := buildMink(ctx, dir)
	if err != nil {
		return nil, err
	}
	type timing struct {
		lease, tick time.Duration
		runs        int
	}
	timings := []timing{{2 * time.Second, 500 * time.Millisecond, cfg.ShortRuns}}
	if cfg.DefaultRuns > 0 {
		d := server.DefaultConfig()
		timings = append(timings, timing{d.LeaseTTL, d.CoordinatorTick, cfg.DefaultRuns})
	}
	var out []FailoverResult
	run := 0
	for _, kind := range []string{"log", "primary key"} {
		for _, tm := range timings {
			for i := 0; i < tm.runs; i++ {
				run++
				runDir := fmt.Sprintf("%s/run%d", dir, run)
				r, err := measureFailover(ctx, bin, runDir, kind, cfg.Buckets, tm.lease, tm.tick)
				if err != nil {
					return nil, fmt.Errorf("%s table, lease %v: %w", kind, tm.lease, err)
				}
				out = append(out, r)
			}
		}
	}
	return out, nil
}

// bucketOfInt64 is the bucket of a bigint key (buckets/routing).
func bucketOfInt64(id int64, buckets int) int {
	return routing.Bucket(binary.BigEndian.AppendUint64([]byte{1}, uint64(id)), buckets)
}

func measureFailover(ctx context.Context, bin, dir, kind string, nbuckets int, lease, tick time.Duration) (FailoverResult, error) {
	res := FailoverResult{Kind: kind, LeaseTTL: lease, Tick: tick}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, err
	}
	c, err := startProcCluster(ctx, bin, dir, 3, lease, tick)
	if err != nil {
		return res, err
	}
	defer c.close()
	admin := server.NewAdminClient(c.nodes[0].admin)
	var conn *pgx.Conn
	if err := pollUntil(ctx, 30*time.Second, func() (bool, error) {
		conn, err = c.nodes[0].connect(ctx)
		return err == nil, nil
	}); err != nil {
		return res, fmt.Errorf("connect to node 1: %w", err)
	}
	ddl := fmt.Sprintf("CREATE TABLE f (id bigint NOT NULL, v bigint) WITH (buckets = %d, bucket_key = 'id')", nbuckets)
	upsert := "INSERT INTO f VALUES ($1, $2)"
	if kind == "primary key" {
		ddl = fmt.Sprintf("CREATE TABLE f (id bigint PRIMARY KEY, v bigint) WITH (buckets = %d)", nbuckets)
		upsert = "INSERT INTO f VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET v = excluded.v"
	}
	_, err = conn.Exec(ctx, ddl)
	conn.Close(ctx)
	if err != nil {
		return res, err
	}
	var victimBuckets map[catalog.BucketID]bool
	victimIndex := map[int]bool{}
	if err := pollUntil(ctx, time.Minute, func() (bool, error) {
		bs, err := admin.TableBuckets(ctx, "f")
		if err != nil {
			return false, nil
		}
		victimBuckets = map[catalog.BucketID]bool{}
		for _, b := range bs {
			if !b.Open {
				return false, nil
			}
			if b.Leader == 3 {
				victimBuckets[b.Bucket] = true
				victimIndex[b.Index] = true
			}
		}
		return len(victimBuckets) > 0, nil
	}); err != nil {
		return res, fmt.Errorf("buckets not open, or node 3 leads none: %w", err)
	}
	res.Moved = len(victimBuckets)

	// Writers write rows that land in node 3's buckets (upserting a small
	// key set for primary-key tables), one statement at a time, from before
	// the kill until the first write after it: one writer per node and
	// bucket, because SQL cannot reach a primary-key bucket on another node
	// yet, and the survivor a bucket moves to is not known in advance.
	var killedAt time.Time
	var mu sync.Mutex
	var firstWrite time.Time
	wctx, stopWriters := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var writerBuckets []int
	for bi := range victimIndex {
		writerBuckets = append(writerBuckets, bi)
	}
	nwriters := len(c.nodes) * len(writerBuckets)
	for wi := 0; wi < nwriters; wi++ {
		nd := c.nodes[wi%len(c.nodes)]
		bucket := writerBuckets[wi/len(c.nodes)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			var wconn *pgx.Conn
			defer func() {
				if wconn != nil {
					wconn.Close(context.Background())
				}
			}()
			for id := int64(wi); wctx.Err() == nil; id += int64(nwriters) {
				key := id
				if kind == "primary key" {
					key = id % 2000
				}
				if bucketOfInt64(key, nbuckets) != bucket {
					continue
				}
				if wconn == nil {
					var err error
					if wconn, err = nd.connect(wctx); err != nil {
						time.Sleep(50 * time.Millisecond)
						continue
					}
				}
				mu.Lock()
				sentAfterKill := !killedAt.IsZero()
				mu.Unlock()
				qctx, cancel := context.WithTimeout(wctx, 2*time.Minute)
				_, err := wconn.Exec(qctx, upsert, key, id)
				cancel()
				if wctx.Err() != nil {
					return
				}
				if err != nil {
					// In flight at the kill, the node is gone, or 57P03 (the
					// bucket is elsewhere or did not open within the
					// statement's 30 s wait): try again.
					var pgErr *pgconn.PgError
					if !errors.As(err, &pgErr) {
						wconn.Close(context.Background())
						wconn = nil
					}
					time.Sleep(20 * time.Millisecond)
					continue
				}
				if sentAfterKill {
					mu.Lock()
					if firstWrite.IsZero() {
						firstWrite = time.Now()
					}
					mu.Unlock()
				}
			}
		}()
	}
	defer func() { stopWriters(); wg.Wait() }()
	time.Sleep(3 * time.Second) // a WAL to replay

	mu.Lock()
	killedAt = time.Now()
	mu.Unlock()
	c.nodes[2].kill()
	var dead, led, open time.Time
	err = pollUntil(ctx, 5*time.Minute, func() (bool, error) {
		now := time.Now()
		if dead.IsZero() {
			if st, err := admin.ClusterStatus(ctx); err == nil {
				for _, n := range st.Nodes {
					if n.ID == 3 && !n.Live {
						dead = now
					}
				}
			}
		}
		bs, err := admin.TableBuckets(ctx, "f")
		if err != nil {
			return false, nil
		}
		allMoved, allOpen := true, true
		for _, b := range bs {
			if victimBuckets[b.Bucket] {
				allMoved = allMoved && b.Leader != 3
				allOpen = allOpen && b.Leader != 3 && b.Open
			}
		}
		if allMoved && led.IsZero() {
			led = now
		}
		if allOpen && open.IsZero() {
			open = now
		}
		mu.Lock()
		wrote := !firstWrite.IsZero()
		mu.Unlock()
		return !open.IsZero() && wrote, nil
	})
	if err != nil {
		return res, err
	}
	if dead.IsZero() {
		dead = led // the status poll missed it between two table polls
	}
	// Takeover and open times from the new leaders' logs.
	var takeover, opened time.Time
	for _, nd := range c.nodes[:2] {
		evs, err := nd.readLog(killedAt, "took over from dead node", "bucket open", "primary-key bucket open")
		if err != nil {
			return res, err
		}
		for _, ev := range evs {
			switch {
			case ev.Msg == "took over from dead node" && ev.Holder == 3 && ev.Time.After(takeover):
				takeover = ev.Time
			case ev.Msg != "took over from dead node" && victimBuckets[catalog.BucketID(ev.Bucket)] && ev.Time.After(opened):
				opened = ev.Time
			}
		}
	}
	if takeover.IsZero() || opened.IsZero() {
		return res, fmt.Errorf("no takeover or open logged by nodes 1 and 2 (logs in %s)", dir)
	}
	res.Detection = dead.Sub(killedAt)
	res.Reassignment = nonNegative(led.Sub(dead))
	res.Takeover = nonNegative(takeover.Sub(maxTime(led, dead)))
	res.Open = nonNegative(opened.Sub(maxTime(takeover, led)))
	res.Total = maxTime(opened, open).Sub(killedAt)
	res.FirstWrite = firstWrite.Sub(killedAt)
	return res, nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func nonNegative(d time.Duration) time.Duration {
	if d < 0 {
		return 0
	}
	return d
}

// pollUntil calls cond every 10 ms until it returns true or an error, or
// the timeout passes.
func pollUntil(ctx context.Context, timeout time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not done after %v", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// WriteFailoverTable prints the results, one row per run, and the median
// per kind and timing.
func WriteFailoverTable(w io.Writer, res []FailoverResult) {
	ms := func(d time.Duration) string { return fmt.Sprintf("%d ms", d.Milliseconds()) }
	fmt.Fprintln(w, "| table | lease_ttl / tick | buckets moved | detection | reassignment | takeover | open | kill → all open | kill → first write |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range res {
		fmt.Fprintf(w, "| %s | %v / %v | %d | %s | %s | %s | %s | %s | **%s** |\n", r.Kind, r.LeaseTTL, r.Tick, r.Moved,
			ms(r.Detection), ms(r.Reassignment), ms(r.Takeover), ms(r.Open), ms(r.Total), ms(r.FirstWrite))
	}
	type group struct {
		kind string
		ttl  time.Duration
	}
	byGroup := map[group][]time.Duration{}
	var order []group
	for _, r := range res {
		g := group{r.Kind, r.LeaseTTL}
		if _, ok := byGroup[g]; !ok {
			order = append(order, g)
		}
		byGroup[g] = append(byGroup[g], r.FirstWrite)
	}
	fmt.Fprintln(w)
	for _, g := range order {
		ds := byGroup[g]
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		fmt.Fprintf(w, "- %s table, lease_ttl %v: kill → first write median %s over %d runs (%.2f× lease_ttl)\n",
			g.kind, g.ttl, ms(ds[len(ds)/2]), len(ds), float64(ds[len(ds)/2])/float64(g.ttl))
	}
}
