package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A full disk under a single node (issue 19, scenario 5): the data
// directory — KV tablets and the local-directory object store — is a
// small tmpfs the test mounts, and a filler file takes every free byte.
// etcd runs on a disk of its own, as in a cluster: an embedded etcd on the
// full disk fails its next commit and the node exits (docs/faults.md), at
// a moment the test cannot choose, which made it flaky. Writes fail with a clear error naming the cause (40003: the
// WAL upload is retried, so the row may still land), log tables go on
// answering reads from what is stored, and once the filler is gone writes
// succeed again without a restart. Nothing acknowledged is lost, and a
// clean restart finds the same rows (no corrupt local state).
func TestDiskFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("TestDiskFull mounts a tmpfs: run it as root")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=160m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount a tmpfs: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() })
	etcd := startTestEtcd(t)
	n := newNode(t, nodeOpts{dataDir: filepath.Join(mnt, "data"), etcd: strings.Join(etcd.Endpoints(), ",")})
	n.start()
	n.waitHealthy()
	ctx := context.Background()
	conn := connect(t, n.pgURL(), pgx.QueryExecModeSimpleProtocol)
	defer conn.Close(ctx)
	exec1 := func(sql string) error {
		qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_, err := conn.Exec(qctx, sql)
		return err
	}
	for _, sql := range []string{
		"CREATE TABLE events (id bigint, note text)",
		"CREATE TABLE kv (id bigint PRIMARY KEY, note text)",
		"INSERT INTO events SELECT i, repeat('x', 100) FROM generate_series(1, 1000) i",
		"INSERT INTO kv SELECT i, 'a' FROM generate_series(1, 1000) i",
	} {
		if err := exec1(sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	count := func(table string) (int64, error) {
		qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		var c int64
		err := conn.QueryRow(qctx, "SELECT count(*) FROM "+table).Scan(&c)
		return c, err
	}

	// Take every free byte.
	var st syscall.Statfs_t
	if err := syscall.Statfs(mnt, &st); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(mnt, "filler")
	if out, err := exec.Command("fallocate", "-l", strconv.FormatInt(int64(st.Bavail)*st.Bsize, 10), filler).CombinedOutput(); err != nil {
		t.Fatalf("fallocate: %v\n%s", err, out)
	}
	// Writes fail, saying why; a few may squeeze into the last bytes.
	var failed error
	acked := int64(0)
	for i := int64(0); i < 50 && failed == nil; i++ {
		if err := exec1("INSERT INTO events SELECT 2000 + i, repeat('y', 1000) FROM generate_series(1, 100) i"); err != nil {
			failed = err
		} else {
			acked += 100
		}
	}
	var pe *pgconn.PgError
	if !errors.As(failed, &pe) || pe.Code != "40003" || !strings.Contains(pe.Message, "no space left on device") {
		t.Fatalf("an INSERT on a full disk: %v; want 40003 naming the cause", failed)
	}
	t.Logf("on the full disk (%d rows squeezed in first): %s", acked, pe.Message)
	// Reads of the log table go on.
	if c, err := count("events"); err != nil || c < 1000+acked {
		t.Fatalf("SELECT count(*) FROM events on the full disk: %d, %v; want at least %d", c, err, 1000+acked)
	}

	// Space comes back: writes succeed again, no restart.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "an INSERT succeeding after the disk has room again", func() bool {
		return exec1("INSERT INTO events VALUES (9999, 'after')") == nil
	})
	waitFor(t, 60*time.Second, "an upsert succeeding after the disk has room again", func() bool {
		return exec1("INSERT INTO kv VALUES (5000, 'after') ON CONFLICT (id) DO UPDATE SET note = excluded.note") == nil
	})
	before, err := count("events")
	if err != nil || before < 1000+acked+1 {
		t.Fatalf("events after the disk had room again: %d, %v; want at least %d", before, err, 1000+acked+1)
	}
	// The failed statement's rows may have landed (40003) — in whole
	// batches of 100, since one statement's rows share a WAL object.
	if extra := before - (1000 + acked + 1); extra%100 != 0 {
		t.Fatalf("events holds %d rows beyond the acknowledged ones: not whole statements", extra)
	}
	kvCount, err := count("kv")
	if err != nil || kvCount != 1001 {
		t.Fatalf("kv after the disk had room again: %d, %v; want 1001", kvCount, err)
	}

	// A clean restart finds the same rows.
	conn.Close(ctx)
	n.stop()
	n.start()
	n.waitHealthy()
	conn = connect(t, n.pgURL(), pgx.QueryExecModeSimpleProtocol)
	if c, err := count("events"); err != nil || c != before {
		t.Fatalf("events after a restart: %d, %v; want %d", c, err, before)
	}
	if c, err := count("kv"); err != nil || c != 1001 {
		t.Fatalf("kv after a restart: %d, %v; want 1001", c, err)
	}
	n.stop()
}
