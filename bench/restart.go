package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/minkdb/mink/server"
)

// RestartConfig configures RunRestart.
type RestartConfig struct {
	// Dir holds the node's data directory, its local-directory object
	// store and the embedded etcd. Default: a temp dir.
	Dir string
	// StateBytes is the values loaded into the bucket (rows × RowBytes).
	// Default 1 GiB.
	StateBytes int64
	// RowBytes is the size of a row's bytea value (random, so that the
	// tablet does not compress it away). Default 1 KiB.
	RowBytes int
	// CopyRows is the rows of one COPY. Default 5000.
	CopyRows int
	// CrashBytes is written just before the SIGKILL, so that the crashed
	// tablet has unflushed writes to replay. Default 16 MiB.
	CrashBytes int64
	// SnapshotInterval is the node's --kv-snapshot-interval. Default 5 s.
	SnapshotInterval time.Duration
	// Bin is the mink binary; empty: built from cmd/mink.
	Bin string
	// SkipPostgres leaves the PostgreSQL peer out.
	SkipPostgres bool
}

func (c *RestartConfig) fill() {
	if c.StateBytes == 0 {
		c.StateBytes = 1 << 30
	}
	if c.RowBytes == 0 {
		c.RowBytes = 1 << 10
	}
	if c.CopyRows == 0 {
		c.CopyRows = 5000
	}
	if c.CrashBytes == 0 {
		c.CrashBytes = 16 << 20
	}
	if c.SnapshotInterval == 0 {
		c.SnapshotInterval = 5 * time.Second
	}
}

// RestartResult is one restart of the node.
type RestartResult struct {
	How string
	// FirstLookup is from starting the process to the first point lookup
	// by key answering (the bucket is open); Open is the bucket's open
	// as its "primary-key bucket open" log line gives it (reuse or
	// restore, then replay).
	FirstLookup, Open time.Duration
	Reused            bool
	DownloadedBytes   int64
	Replayed          uint64
}

// RunRestart loads StateBytes into the one bucket of a primary-key table
// on a single real mink process, then restarts it three ways and measures
// how soon a point lookup answers: after SIGTERM (the local tablet is
// reused), after SIGKILL (reused, the writes since its last flush
// replayed), and after SIGTERM with the node's kv/ directory removed (the
// snapshot restore the reuse avoids). The peers are the raw disk (reading
// the tablet directory's bytes once) and PostgreSQL, restarted fast and
// immediate with the same rows (restartPostgres). The measured restarts
// take no snapshot, so that the crash leaves its last writes unflushed.
func RunRestart(ctx context.Context, w io.Writer, cfg RestartConfig) (err error) {
	cfg.fill()
	dir, err := os.MkdirTemp(cfg.Dir, "mink-bench-restart-")
	if err != nil {
		return err
	}
	defer func() {
		if err == nil {
			os.RemoveAll(dir)
		} else {
			err = fmt.Errorf("%w (node log kept in %s)", err, dir)
		}
	}()
	// The PostgreSQL peer's cluster is under dir; its server runs as the
	// postgres user when we are root.
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	bin := cfg.Bin
	if bin == "" {
		if bin, err = buildMink(ctx, dir); err != nil {
			return err
		}
	}
	// The default lease: a restart does not wait for it (the node
	// recovers its own earlier epoch), and a short one is lost on a loaded
	// machine in the middle of the load.
	c, err := startProcCluster(ctx, bin, dir, 1, server.DefaultConfig().LeaseTTL, time.Second)
	if err != nil {
		return err
	}
	defer c.close()
	nd := c.nodes[0]
	// Snapshots often enough that the restore baseline replays little.
	setSnapshotInterval(nd, cfg.SnapshotInterval.String())
	if err := restartNode(ctx, nd, bin, syscall.SIGTERM); err != nil {
		return err
	}
	conn, err := nd.connect(ctx)
	if err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE restartbench (k bigint PRIMARY KEY, v bytea) WITH (buckets = 1)"); err != nil {
		conn.Close(ctx)
		return err
	}
	rows := cfg.StateBytes / int64(cfg.RowBytes)
	loadStart := time.Now()
	if err := restartLoad(ctx, conn, cfg, 0, rows, 1); err != nil {
		conn.Close(ctx)
		return fmt.Errorf("load: %w", err)
	}
	load := time.Since(loadStart)
	conn.Close(ctx)
	admin := server.NewAdminClient(nd.admin)
	bs, err := admin.TableBuckets(ctx, "restartbench")
	if err != nil || len(bs) != 1 {
		return fmt.Errorf("table buckets: %v %v", bs, err)
	}
	end := bs[0].End
	// Wait for a snapshot of the whole load, the restore's starting point.
	snapWait := time.Now()
	if err := pollUntil(ctx, 10*time.Minute, func() (bool, error) {
		evs, err := readJSONLog(nd.logPath, "KV snapshot committed")
		if err != nil {
			return false, err
		}
		for _, ev := range evs {
			if off, _ := ev["log_offset"].(float64); uint64(off) >= end {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		return fmt.Errorf("no snapshot at offset %d: %w", end, err)
	}
	tabletBytes, err := dirBytes(filepath.Join(dir, "node1", "kv"))
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "Loaded %d rows of %d B random values (%.0f MiB) into one bucket by COPY in %v (%.1f MiB/s); the snapshot of all of it committed %v later. Tablet directory: %.0f MiB.\n\n",
		rows, cfg.RowBytes, float64(rows*int64(cfg.RowBytes))/(1<<20), load.Round(time.Second),
		float64(rows*int64(cfg.RowBytes))/(1<<20)/load.Seconds(), time.Since(snapWait).Round(time.Second), float64(tabletBytes)/(1<<20))

	// No snapshot during the measured restarts: the crash must find the
	// writes before it unflushed (a snapshot flushes the memtable).
	setSnapshotInterval(nd, "1h")
	var results []RestartResult
	dataDir := filepath.Join(dir, "node1")
	measure := func(how string, sig syscall.Signal, removeKV bool, before func() error) error {
		if before != nil {
			if err := before(); err != nil {
				return err
			}
		}
		r := RestartResult{How: how}
		since := time.Now()
		removeDir := ""
		if removeKV {
			removeDir = filepath.Join(dataDir, "kv")
		}
		t0, err := stopStart(ctx, nd, bin, sig, removeDir)
		if err != nil {
			return err
		}
		if err := firstLookup(ctx, nd.connect, rows/2); err != nil {
			return fmt.Errorf("%s: %w", how, err)
		}
		r.FirstLookup = time.Since(t0)
		evs, err := readJSONLog(nd.logPath, "primary-key bucket open")
		if err != nil {
			return err
		}
		for _, ev := range evs {
			if at, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(ev["time"])); at.Before(since) {
				continue
			}
			total, _ := ev["total"].(float64)
			r.Open = time.Duration(total)
			r.Reused, _ = ev["reused_tablet"].(bool)
			b, _ := ev["downloaded_bytes"].(float64)
			rr, _ := ev["replayed_records"].(float64)
			r.DownloadedBytes, r.Replayed = int64(b), uint64(rr)
		}
		results = append(results, r)
		return nil
	}
	if err := measure("clean restart (SIGTERM): local tablet reused", syscall.SIGTERM, false, nil); err != nil {
		return err
	}
	crashRows := cfg.CrashBytes / int64(cfg.RowBytes)
	if err := measure(fmt.Sprintf("crash (SIGKILL right after %.0f MiB of upserts): local tablet reused", float64(cfg.CrashBytes)/(1<<20)), syscall.SIGKILL, false, func() error {
		conn, err := nd.connect(ctx)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		return restartLoad(ctx, conn, cfg, 0, crashRows, 2)
	}); err != nil {
		return err
	}
	// The baseline: the same clean restart, but the local tablets gone
	// (a new disk, or reuse refused): the snapshot is restored. A snapshot
	// of the crash's writes first, so that the restore replays nothing.
	if err := measure("clean restart, kv/ directory removed: snapshot restored", syscall.SIGTERM, true, func() error {
		setSnapshotInterval(nd, cfg.SnapshotInterval.String())
		if err := restartNode(ctx, nd, bin, syscall.SIGTERM); err != nil {
			return err
		}
		bs, err := admin.TableBuckets(ctx, "restartbench")
		if err != nil || len(bs) != 1 {
			return fmt.Errorf("table buckets: %v %v", bs, err)
		}
		return pollUntil(ctx, 5*time.Minute, func() (bool, error) {
			evs, err := readJSONLog(nd.logPath, "KV snapshot committed")
			if err != nil {
				return false, err
			}
			for _, ev := range evs {
				if off, _ := ev["log_offset"].(float64); uint64(off) >= bs[0].End {
					return true, nil
				}
			}
			return false, nil
		})
	}); err != nil {
		return err
	}
	// The peer: read the tablet directory's bytes once, the node stopped
	// (its compactions would replace files under the walk).
	nd.cmd.Process.Signal(syscall.SIGTERM)
	<-nd.exited
	tabletBytes, err = dirBytes(filepath.Join(dir, "node1", "kv"))
	if err != nil {
		return err
	}
	syscall.Sync()
	t0 := time.Now()
	if err := readDir(filepath.Join(dir, "node1", "kv")); err != nil {
		return err
	}
	readAll := time.Since(t0)

	pg, err := restartPostgres(ctx, dir, cfg, rows)
	if err != nil {
		return fmt.Errorf("PostgreSQL peer: %w", err)
	}

	fmt.Fprintln(w, "| restart | reused tablet | downloaded | replayed records | bucket open (log) | start → first point lookup |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|")
	for _, r := range results {
		fmt.Fprintf(w, "| %s | %v | %.0f MiB | %d | %v | %v |\n", r.How, r.Reused, float64(r.DownloadedBytes)/(1<<20), r.Replayed,
			r.Open.Round(time.Millisecond), r.FirstLookup.Round(time.Millisecond))
	}
	fmt.Fprintf(w, "\nPeer, raw disk: reading the tablet directory's %.0f MiB once (page cache as the restarts left it): %v.\n",
		float64(tabletBytes)/(1<<20), readAll.Round(time.Millisecond))
	if len(results) == 3 && results[0].Open > 0 {
		fmt.Fprintf(w, "Snapshot restore vs reuse, bucket open: %.1f× (clean restart), %.1f× (crash); start → first lookup: %.1f×, %.1f×.\n",
			results[2].Open.Seconds()/results[0].Open.Seconds(), results[2].Open.Seconds()/results[1].Open.Seconds(),
			results[2].FirstLookup.Seconds()/results[0].FirstLookup.Seconds(), results[2].FirstLookup.Seconds()/results[1].FirstLookup.Seconds())
	}
	if pg.Skipped != "" {
		fmt.Fprintf(w, "\nPeer, PostgreSQL: not measured (%s).\n", pg.Skipped)
		return nil
	}
	fmt.Fprintf(w, "\nPeer, %s (its own fresh cluster, default settings, fsync on): the same %d rows loaded by COPY into `restartbench (k bigint PRIMARY KEY, v bytea)` in %v (%.1f MiB/s), table with index %.0f MiB, then CHECKPOINT.\n\n",
		pg.Name, rows, pg.Load.Round(time.Second), float64(rows*int64(cfg.RowBytes))/(1<<20)/pg.Load.Seconds(), float64(pg.TableBytes)/(1<<20))
	fmt.Fprintln(w, "| restart | WAL since the last checkpoint's redo point | stop | start → first point lookup |")
	fmt.Fprintln(w, "|---|---:|---:|---:|")
	for _, r := range pg.Results {
		fmt.Fprintf(w, "| %s | %.1f MiB | %v | %v |\n", r.How, float64(r.WALBytes)/(1<<20), r.Stop.Round(time.Millisecond), r.FirstLookup.Round(time.Millisecond))
	}
	if len(results) == 3 && len(pg.Results) == 2 {
		ratio := func(m, p time.Duration) string {
			return fmt.Sprintf("%.2f× (mink %v, PostgreSQL %v)", m.Seconds()/p.Seconds(), m.Round(time.Millisecond), p.Round(time.Millisecond))
		}
		fmt.Fprintf(w, "\nmink / %s, start → first point lookup: clean restart %s; crash %s; mink's snapshot restore vs PostgreSQL's clean restart %s.\n",
			pg.Name, ratio(results[0].FirstLookup, pg.Results[0].FirstLookup), ratio(results[1].FirstLookup, pg.Results[1].FirstLookup),
			ratio(results[2].FirstLookup, pg.Results[0].FirstLookup))
	}
	return nil
}

// PGRestart is the PostgreSQL peer of RunRestart.
type PGRestart struct {
	// Skipped, when set, says why the peer was not measured.
	Skipped    string
	Name       string
	Load       time.Duration
	TableBytes int64
	Results    []PGRestartResult
}

// PGRestartResult is one restart of the PostgreSQL peer.
type PGRestartResult struct {
	How string
	// WALBytes is the WAL from the last checkpoint's redo point to the
	// end, just before the stop: what a start after an immediate stop
	// replays.
	WALBytes int64
	// Stop is the stop (a fast one writes the shutdown checkpoint);
	// FirstLookup is from starting the postmaster to the first point
	// lookup by key answering, as on the mink side.
	Stop, FirstLookup time.Duration
}

// restartPostgres is RunRestart's peer: a fresh PostgreSQL cluster under
// dir gets the same rows, a CHECKPOINT, then a fast stop and start (pg_ctl
// stop -m fast: the shutdown checkpoint) and, after the same upserts as the
// mink crash following a CHECKPOINT, an immediate stop (pg_ctl stop -m
// immediate: no checkpoint, so the start replays the upserts' WAL) and
// start. The cluster is the benchmark's own, so that restarting it
// disturbs no other user of a shared server.
func restartPostgres(ctx context.Context, dir string, cfg RestartConfig, rows int64) (res PGRestart, err error) {
	if cfg.SkipPostgres {
		res.Skipped = "skipped by configuration"
		return res, nil
	}
	pg, err := StartPostgres(ctx, dir)
	if errors.Is(err, ErrNoPostgres) {
		res.Skipped = err.Error()
		return res, nil
	}
	if err != nil {
		return res, err
	}
	defer func() {
		if stopErr := pg.Stop(); err == nil {
			err = stopErr
		}
	}()
	res.Name = pg.peerName()
	connect := func(ctx context.Context) (*pgx.Conn, error) { return pgx.Connect(ctx, pg.DSN) }
	withConn := func(f func(*pgx.Conn) error) error {
		conn, err := connect(ctx)
		if err != nil {
			return err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		return f(conn)
	}
	if err := withConn(func(conn *pgx.Conn) error {
		if _, err := conn.Exec(ctx, "CREATE TABLE restartbench (k bigint PRIMARY KEY, v bytea)"); err != nil {
			return err
		}
		t0 := time.Now()
		if err := restartLoad(ctx, conn, cfg, 0, rows, 1); err != nil {
			return fmt.Errorf("load: %w", err)
		}
		res.Load = time.Since(t0)
		if err := conn.QueryRow(ctx, "SELECT pg_total_relation_size('restartbench')").Scan(&res.TableBytes); err != nil {
			return err
		}
		_, err := conn.Exec(ctx, "CHECKPOINT")
		return err
	}); err != nil {
		return res, err
	}
	measure := func(how, mode string, before func(*pgx.Conn) error) error {
		r := PGRestartResult{How: how}
		if err := withConn(func(conn *pgx.Conn) error {
			if before != nil {
				if err := before(conn); err != nil {
					return err
				}
			}
			return conn.QueryRow(ctx, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), redo_lsn)::bigint FROM pg_control_checkpoint()").Scan(&r.WALBytes)
		}); err != nil {
			return fmt.Errorf("%s: %w", how, err)
		}
		t0 := time.Now()
		if err := pg.Halt(mode); err != nil {
			return err
		}
		r.Stop = time.Since(t0)
		syscall.Sync()
		t0 = time.Now()
		if err := pg.Restart(); err != nil {
			return err
		}
		if err := firstLookup(ctx, connect, rows/2); err != nil {
			return fmt.Errorf("%s: %w", how, err)
		}
		r.FirstLookup = time.Since(t0)
		res.Results = append(res.Results, r)
		return nil
	}
	if err := measure("clean restart (stop -m fast, start)", "fast", nil); err != nil {
		return res, err
	}
	crashRows := cfg.CrashBytes / int64(cfg.RowBytes)
	if err := measure(fmt.Sprintf("crash (CHECKPOINT, %.0f MiB of upserts, stop -m immediate, start): WAL replayed", float64(cfg.CrashBytes)/(1<<20)), "immediate", func(conn *pgx.Conn) error {
		if _, err := conn.Exec(ctx, "CHECKPOINT"); err != nil {
			return err
		}
		return restartLoad(ctx, conn, cfg, 0, crashRows, 2)
	}); err != nil {
		return res, err
	}
	if err := withConn(func(conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, "DROP TABLE restartbench")
		return err
	}); err != nil {
		return res, err
	}
	return res, nil
}

// setSnapshotInterval sets nd's --kv-snapshot-interval for its next start.
func setSnapshotInterval(nd *procNode, interval string) {
	for i, a := range nd.args {
		if a == "--kv-snapshot-interval" {
			nd.args[i+1] = interval
			return
		}
	}
	nd.args = append(nd.args, "--kv-snapshot-interval", interval)
}

// restartNode stops nd with sig and starts it again, waiting until it is
// healthy.
func restartNode(ctx context.Context, nd *procNode, bin string, sig syscall.Signal) error {
	if _, err := stopStart(ctx, nd, bin, sig, ""); err != nil {
		return err
	}
	return nd.waitHealthy(ctx)
}

// stopStart stops nd with sig and starts it again, first removing
// removeDir if set; it returns when the new process was started.
func stopStart(ctx context.Context, nd *procNode, bin string, sig syscall.Signal, removeDir string) (time.Time, error) {
	if nd.running() {
		nd.cmd.Process.Signal(sig)
		select {
		case <-nd.exited:
		case <-time.After(2 * time.Minute):
			nd.kill()
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		}
	}
	if removeDir != "" {
		if err := os.RemoveAll(removeDir); err != nil {
			return time.Time{}, err
		}
	}
	syscall.Sync()
	t0 := time.Now()
	return t0, nd.start(bin)
}

// restartLoad upserts keys [from, to) with random values of round, by
// COPY.
func restartLoad(ctx context.Context, conn *pgx.Conn, cfg RestartConfig, from, to int64, round uint64) error {
	rng := rand.New(rand.NewPCG(round, 0))
	for lo := from; lo < to; lo += int64(cfg.CopyRows) {
		hi := min(lo+int64(cfg.CopyRows), to)
		rows := make([][]any, 0, hi-lo)
		for k := lo; k < hi; k++ {
			val := make([]byte, cfg.RowBytes)
			for i := 0; i < len(val); i += 8 {
				x := rng.Uint64()
				for j := 0; j < 8 && i+j < len(val); j++ {
					val[i+j] = byte(x >> (8 * j))
				}
			}
			rows = append(rows, []any{k, val})
		}
		if round > 1 {
			// Upserts of existing keys: COPY inserts, so use statements.
			batch := &pgx.Batch{}
			for _, r := range rows {
				batch.Queue("INSERT INTO restartbench VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = excluded.v", r...)
			}
			if err := conn.SendBatch(ctx, batch).Close(); err != nil {
				return err
			}
			continue
		}
		if _, err := conn.CopyFrom(ctx, pgx.Identifier{"restartbench"}, []string{"k", "v"}, pgx.CopyFromRows(rows)); err != nil {
			return err
		}
	}
	return nil
}

// firstLookup polls a point lookup of key, over connections from connect,
// until it answers.
func firstLookup(ctx context.Context, connect func(context.Context) (*pgx.Conn, error), key int64) error {
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.WithoutCancel(ctx))
		}
	}()
	return pollUntil(ctx, 30*time.Minute, func() (bool, error) {
		if conn == nil {
			c, err := connect(ctx)
			if err != nil {
				return false, nil
			}
			conn = c
		}
		var v []byte
		if err := conn.QueryRow(ctx, "SELECT v FROM restartbench WHERE k = $1", key).Scan(&v); err != nil {
			if conn.IsClosed() {
				conn = nil
			}
			return false, nil
		}
		return len(v) > 0, nil
	})
}

// readJSONLog returns the events of a JSON log whose msg is msg.
func readJSONLog(path, msg string) ([]map[string]any, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev map[string]any
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev["msg"] == msg {
			out = append(out, ev)
		}
	}
	return out, sc.Err()
}

// dirBytes is the size of the regular files under dir.
func dirBytes(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed under the walk by a running node's compaction
		}
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			n += info.Size()
		}
		return nil
	})
	return n, err
}

// readDir reads every regular file under dir once.
func readDir(dir string) error {
	buf := make([]byte, 1<<20)
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		for {
			_, err := f.Read(buf)
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
		}
	})
}
