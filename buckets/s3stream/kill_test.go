package s3stream

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/internal/embedetcd"
	"github.com/minkdb/mink/internal/s3test"
	"github.com/minkdb/mink/metalog"
	"github.com/minkdb/mink/metalog/etcdlog"
	"github.com/minkdb/mink/objstore"
)

const helperEnv = "MINK_S3STREAM_KILL_HELPER"

// TestHelperAppender is not a test: TestKillAppender runs the test binary
// as a separate process in this mode. It appends to one stream from four
// goroutines and prints "ACK <id>" after each acknowledgement, until killed.
func TestHelperAppender(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		t.Skip("helper process for TestKillAppender")
	}
	ctx := context.Background()
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(3)
	}
	client, err := etcdlog.Dial(ctx, strings.Split(os.Getenv("MINK_ETCD"), ","), quietLogger(), 10*time.Second)
	if err != nil {
		fail(err)
	}
	meta, err := metalog.Open(ctx, etcdlog.New(client, "killtest"), metalog.Options{Logger: quietLogger()})
	if err != nil {
		fail(err)
	}
	store, err := objstore.Open(ctx, os.Getenv("MINK_STORE"), objstore.Options{
		S3Endpoint: os.Getenv("MINK_S3_ENDPOINT"), S3AccessKey: os.Getenv("MINK_S3_KEY"), S3SecretKey: os.Getenv("MINK_S3_SECRET"),
	})
	if err != nil {
		fail(err)
	}
	var expect uint64
	meta.Read(func(v *catalog.View) {
		if n, ok := v.Nodes[1]; ok {
			expect = n.Epoch
		}
	})
	out, err := meta.Propose(ctx, catalog.RegisterNode{Node: 1, ExpectEpoch: expect})
	if err != nil {
		fail(err)
	}
	n, err := NewNode(Config{Node: 1, NodeEpoch: out.Epoch, Store: store, Meta: meta, Logger: quietLogger(),
		FlushInterval: 30 * time.Millisecond, FlushBytes: 4 << 10})
	if err != nil {
		fail(err)
	}
	streamEpoch, _ := strconv.ParseUint(os.Getenv("MINK_STREAM_EPOCH"), 10, 64)
	s, err := n.OpenStream(ctx, sid, streamEpoch)
	if err != nil {
		fail(err)
	}
	base, _ := strconv.ParseUint(os.Getenv("MINK_ID_BASE"), 10, 64)
	var mu sync.Mutex
	w := bufio.NewWriter(os.Stdout)
	for g := uint64(0); g < 4; g++ {
		go func() {
			for i := uint64(0); ; i++ {
				id := base + g<<24 + i
				if _, err := s.Append(ctx, payload(id), 1); err != nil {
					fail(err)
				}
				mu.Lock()
				fmt.Fprintf(w, "ACK %d\n", id)
				w.Flush()
				mu.Unlock()
			}
		}()
	}
	select {}
}

// Fault 7: a node is killed with SIGKILL while appending and restarted. The
// restarted node recovers its previous epoch's WAL before opening anything,
// and every acknowledged record is present exactly once. Three kill/restart
// rounds, on a local directory and on versitygw.
func TestKillAppender(t *testing.T) {
	for _, backend := range []string{"dir", "s3"} {
		t.Run(backend, func(t *testing.T) {
			ctx := context.Background()
			etcd, err := embedetcd.StartOnFreePorts(ctx, embedetcd.Config{Dir: t.TempDir(), Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			defer etcd.Close()
			env := []string{helperEnv + "=1", "MINK_ETCD=" + strings.Join(etcd.Endpoints(), ",")}
			var store objstore.Store
			if backend == "dir" {
				dir := t.TempDir()
				env = append(env, "MINK_STORE=file://"+dir)
				store, err = objstore.NewDir(dir)
			} else {
				s3 := s3test.Start(t)
				env = append(env, "MINK_STORE="+s3.URL("kill"), "MINK_S3_ENDPOINT="+s3.Endpoint,
					"MINK_S3_KEY="+s3.AccessKey, "MINK_S3_SECRET="+s3.SecretKey)
				store, err = objstore.Open(ctx, s3.URL("kill"), objstore.Options{S3Endpoint: s3.Endpoint, S3AccessKey: s3.AccessKey, S3SecretKey: s3.SecretKey})
			}
			if err != nil {
				t.Fatal(err)
			}
			client, err := etcdlog.Dial(ctx, etcd.Endpoints(), quietLogger(), 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()

			acked := map[uint64]bool{}
			for round := uint64(1); round <= 3; round++ {
				if round > 1 {
					// The restarted node: a new epoch, then recovery of the old one.
					meta, err := metalog.Open(ctx, etcdlog.New(client, "killtest"), metalog.Options{Logger: quietLogger()})
					if err != nil {
						t.Fatal(err)
					}
					var expect uint64
					meta.Read(func(v *catalog.View) { expect = v.Nodes[1].Epoch })
					if _, err := meta.Propose(ctx, catalog.RegisterNode{Node: 1, ExpectEpoch: expect}); err != nil {
						t.Fatal(err)
					}
					st, err := RecoverNode(ctx, store, meta, 1, failoverBy(meta, 1))
					if err != nil {
						t.Fatal(err)
					}
					checkExactlyOnce(t, store, meta, acked)
					t.Logf("round %d: recovered %d entries from %d WAL objects; %d acknowledged so far",
						round-1, st.Entries, st.WALObjects, len(acked))
					meta.Close()
				}
				cmd := exec.Command(os.Args[0], "-test.run=^TestHelperAppender$", "-test.v=false")
				cmd.Env = append(os.Environ(), append(env,
					fmt.Sprintf("MINK_STREAM_EPOCH=%d", round), fmt.Sprintf("MINK_ID_BASE=%d", round<<40))...)
				stdout, err := cmd.StdoutPipe()
				if err != nil {
					t.Fatal(err)
				}
				var stderr strings.Builder
				cmd.Stderr = &stderr
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				sc := bufio.NewScanner(stdout)
				got := 0
				deadline := time.Now().Add(20 * time.Second)
				for got < 400 && time.Now().Before(deadline) && sc.Scan() {
					if id, ok := strings.CutPrefix(sc.Text(), "ACK "); ok {
						v, _ := strconv.ParseUint(id, 10, 64)
						acked[v] = true
						got++
					}
				}
				cmd.Process.Kill() // SIGKILL, mid-append
				for sc.Scan() {    // acknowledgements printed before the kill count too
					if id, ok := strings.CutPrefix(sc.Text(), "ACK "); ok {
						v, _ := strconv.ParseUint(id, 10, 64)
						acked[v] = true
					}
				}
				cmd.Wait()
				if got < 400 {
					t.Fatalf("round %d: helper acknowledged only %d appends:\n%s", round, got, stderr.String())
				}
			}
			// Final recovery after the third kill.
			meta, err := metalog.Open(ctx, etcdlog.New(client, "killtest"), metalog.Options{Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			defer meta.Close()
			var expect uint64
			meta.Read(func(v *catalog.View) { expect = v.Nodes[1].Epoch })
			if _, err := meta.Propose(ctx, catalog.RegisterNode{Node: 1, ExpectEpoch: expect}); err != nil {
				t.Fatal(err)
			}
			if _, err := RecoverNode(ctx, store, meta, 1, failoverBy(meta, 1)); err != nil {
				t.Fatal(err)
			}
			checkExactlyOnce(t, store, meta, acked)
			var trims int
			meta.Read(func(v *catalog.View) { trims = len(v.WALTrims) })
			if trims < 3 {
				t.Fatalf("WAL trims for %d node epochs, want 3", trims)
			}
		})
	}
}

// checkExactlyOnce asserts that every acknowledged id is in the stream once
// and nothing is in it twice.
func checkExactlyOnce(t *testing.T, store objstore.Store, meta Metadata, acked map[uint64]bool) {
	t.Helper()
	got := readAll(t, store, meta, sid)
	seen := map[uint64]bool{}
	for _, id := range got {
		if seen[id] {
			t.Fatalf("record %d appears twice", id)
		}
		seen[id] = true
	}
	for id := range acked {
		if !seen[id] {
			t.Fatalf("acknowledged record %d lost (%d acked, %d in stream)", id, len(acked), len(got))
		}
	}
}
