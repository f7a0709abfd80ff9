package etcdlog

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minkdb/mink/catalog"
	"github.com/minkdb/mink/metalog"
	"github.com/minkdb/mink/metalog/metalogtest"
)

// The multi-process test: three helper processes (this test binary re-run
// with -test.run=^TestHelperProposer$) open a Catalog each on one etcd and
// propose concurrently through a log that loses a tenth of the append
// requests or responses. The parent checks what every process applied.

const (
	helperEnv        = "MINK_HELPER_PROPOSER"
	helperProcesses  = 3
	helperProposers  = 4  // goroutines per process
	helperProposals  = 50 // per goroutine: 200 per process
	helperSnapEvery  = 100
	helperTimeout    = 150 * time.Second
	helperWaitPeriod = 10 * time.Millisecond
)

// helperResult is what a helper process writes for the parent.
type helperResult struct {
	// Applied lists every entry the process applied, in order.
	Applied []appliedEntry `json:"applied"`
	// Reloads are the snapshot indexes the process loaded instead of tailing.
	Reloads []uint64 `json:"reloads"`
	// StartIndex is the view index Open began from (a snapshot or 0).
	StartIndex uint64 `json:"start_index"`
	// Proposals are the process's Propose calls and their results.
	Proposals []helperProposal `json:"proposals"`
	FinalView []byte           `json:"final_view"`
	// LostResponses counts appends that committed but reported an error.
	LostResponses int `json:"lost_responses"`
}

type appliedEntry struct {
	Index  uint64 `json:"index"`
	Entry  string `json:"entry"`  // sha256 of the whole entry (proposal id included)
	Record string `json:"record"` // sha256 of the record bytes
}

type helperProposal struct {
	Record   string         `json:"record"` // sha256 of EncodeRecord
	Index    uint64         `json:"index"`
	Accepted bool           `json:"accepted"`
	Unknown  bool           `json:"unknown"` // ErrUnknownOutcome
	Node     catalog.NodeID `json:"node"`    // RegisterNode only
}

func hashHex(b []byte) string {
	sum := sha256.Sum256(b)
	return fmt.Sprintf("%x", sum[:8])
}

// flakyLog loses an Append's request (not appended) or its response
// (appended) at the given rate each.
type flakyLog struct {
	metalog.Log
	mu   sync.Mutex
	rng  *rand.Rand
	rate float64
	// lostResponses counts the committed appends reported as failed.
	lostResponses int
}

var errInjected = errors.New("injected fault")

func (f *flakyLog) Append(ctx context.Context, data []byte) (uint64, error) {
	return f.AppendBatch(ctx, [][]byte{data})
}

func (f *flakyLog) AppendBatch(ctx context.Context, entries [][]byte) (uint64, error) {
	f.mu.Lock()
	roll := f.rng.Float64()
	f.mu.Unlock()
	if roll < f.rate {
		return 0, fmt.Errorf("append request lost: %w", errInjected)
	}
	index, err := f.Log.AppendBatch(ctx, entries)
	if err == nil && roll < 2*f.rate {
		f.mu.Lock()
		f.lostResponses++
		f.mu.Unlock()
		return 0, fmt.Errorf("append response lost: %w", errInjected)
	}
	return index, err
}

func TestConcurrentProposersAcrossProcesses(t *testing.T) {
	if os.Getenv(helperEnv) != "" {
		t.Skip("in a helper process")
	}
	ctx := metalogtest.Context(t, helperTimeout+30*time.Second)
	endpoints := sharedEndpoints(t)
	cluster := testCluster(t)
	dir := t.TempDir()
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)

	var wg sync.WaitGroup
	outputs := make([]bytes.Buffer, helperProcesses)
	errs := make([]error, helperProcesses)
	start := time.Now()
	for i := range helperProcesses {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProposer$", "-test.count=1",
			fmt.Sprintf("-test.timeout=%v", helperTimeout))
		cmd.Env = append(os.Environ(),
			helperEnv+"=1",
			"MINK_HELPER_ENDPOINTS="+strings.Join(endpoints, ","),
			"MINK_HELPER_CLUSTER="+cluster,
			"MINK_HELPER_DIR="+dir,
			"MINK_HELPER_ID="+strconv.Itoa(i),
			"MINK_HELPER_SEED="+strconv.FormatInt(seed+int64(i), 10),
		)
		cmd.Stdout, cmd.Stderr = &outputs[i], &outputs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = cmd.Wait()
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("helper %d: %v\n%s", i, err, outputs[i].String())
		}
	}
	t.Logf("%d processes x %d proposals in %v", helperProcesses, helperProposers*helperProposals, time.Since(start).Round(time.Millisecond))

	results := make([]helperResult, helperProcesses)
	for i := range results {
		data, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("result-%d.json", i)))
		if err != nil {
			t.Fatalf("helper %d wrote no result: %v\n%s", i, err, outputs[i].String())
		}
		if err := json.Unmarshal(data, &results[i]); err != nil {
			t.Fatal(err)
		}
	}
	checkHelperResults(t, results)

	// A new catalog bootstraps from the snapshot and the tail to the same view.
	fresh := metalogtest.OpenCatalog(t, New(testClient(t), cluster), metalogtest.Options(helperSnapEvery))
	if !bytes.Equal(metalogtest.EncodeView(t, fresh.View()), results[0].FinalView) {
		t.Fatal("a new catalog's view differs from the helpers'")
	}
}

func checkHelperResults(t *testing.T, results []helperResult) {
	// byIndex is the union of what the processes applied.
	byIndex := map[uint64]appliedEntry{}
	for i, r := range results {
		next := r.StartIndex + 1
		reloads := r.Reloads
		for _, a := range r.Applied {
			if a.Index != next {
				// Only a snapshot load may skip entries, to just after it.
				if len(reloads) == 0 || a.Index != reloads[0]+1 || reloads[0] < next {
					t.Fatalf("helper %d applied %d after %d (reloads %v)", i, a.Index, next-1, r.Reloads)
				}
				reloads = reloads[1:]
			}
			next = a.Index + 1
			if prev, ok := byIndex[a.Index]; ok && prev != a {
				t.Fatalf("index %d: helper %d applied %+v, another helper %+v", a.Index, i, a, prev)
			}
			byIndex[a.Index] = a
		}
		if !bytes.Equal(r.FinalView, results[0].FinalView) {
			t.Fatalf("helper %d's final view differs from helper 0's", i)
		}
	}
	view, err := catalog.DecodeView(results[0].FinalView)
	if err != nil {
		t.Fatal(err)
	}
	final := view.Index
	seen := map[string]uint64{}
	for index := uint64(1); index <= final; index++ {
		a, ok := byIndex[index]
		if !ok {
			t.Fatalf("no helper applied index %d (all skipped it by a snapshot load)", index)
		}
		if prev, dup := seen[a.Entry]; dup {
			t.Fatalf("the same proposal is at indexes %d and %d", prev, index)
		}
		seen[a.Entry] = index
	}

	var proposals, unknown, lost int
	accepted := map[catalog.NodeID]uint64{}
	for i, r := range results {
		lost += r.LostResponses
		for _, p := range r.Proposals {
			proposals++
			if p.Unknown {
				unknown++
				continue
			}
			if a := byIndex[p.Index]; a.Record != p.Record {
				t.Fatalf("helper %d: proposal acknowledged at %d is not there (found %+v)", i, p.Index, a)
			}
			if p.Accepted && p.Node != 0 {
				accepted[p.Node]++
			}
		}
	}
	// Every acknowledged proposal is in the log once; unknown ones at most
	// once; nothing else is.
	if final < uint64(proposals-unknown) || final > uint64(proposals) {
		t.Fatalf("%d entries for %d proposals (%d with unknown outcome)", final, proposals, unknown)
	}
	for node, n := range accepted {
		if got := view.Nodes[node].Epoch; got < n || got > n+uint64(unknown) {
			t.Fatalf("node %d at epoch %d after %d acknowledged registrations", node, got, n)
		}
	}
	if lost == 0 {
		t.Fatal("no append response was lost: the test did not test deduplication")
	}
	t.Logf("%d entries, %d proposals (%d with unknown outcome, %d appends committed but reported failed); reloads %v %v %v",
		final, proposals, unknown, lost, results[0].Reloads, results[1].Reloads, results[2].Reloads)
}

// TestHelperProposer is one helper process of
// TestConcurrentProposersAcrossProcesses.
func TestHelperProposer(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		t.Skip("run by TestConcurrentProposersAcrossProcesses")
	}
	ctx := metalogtest.Context(t, helperTimeout)
	id, _ := strconv.Atoi(os.Getenv("MINK_HELPER_ID"))
	seed, _ := strconv.ParseInt(os.Getenv("MINK_HELPER_SEED"), 10, 64)
	dir := os.Getenv("MINK_HELPER_DIR")
	client, err := Dial(ctx, strings.Split(os.Getenv("MINK_HELPER_ENDPOINTS"), ","), metalogtest.Logger(), 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	log := &flakyLog{Log: New(client, os.Getenv("MINK_HELPER_CLUSTER")), rng: rand.New(rand.NewPCG(uint64(seed), 1)), rate: 0.05}

	var res helperResult
	var mu sync.Mutex // guards res
	opts := metalogtest.Options(helperSnapEvery)
	opts.TestingKnobs.SnapshotJitter = 0 // the default: the processes race to save
	opts.TestingKnobs.OnApply = func(index uint64, entry []byte, out catalog.Outcome) {
		mu.Lock()
		defer mu.Unlock()
		res.Applied = append(res.Applied, appliedEntry{Index: index, Entry: hashHex(entry), Record: hashHex(entry[entryHeaderSize:])})
	}
	opts.TestingKnobs.OnReload = func(index uint64) {
		mu.Lock()
		defer mu.Unlock()
		res.Reloads = append(res.Reloads, index)
	}
	c, err := metalog.Open(ctx, log, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mu.Lock()
	if len(res.Applied) > 0 {
		res.StartIndex = res.Applied[0].Index - 1
	} else {
		res.StartIndex = c.AppliedIndex()
	}
	mu.Unlock()

	barrier(t, dir, "ready", id)
	var wg sync.WaitGroup
	for g := range helperProposers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range helperProposals {
				var rec catalog.Record = metalogtest.CreateTable(fmt.Sprintf("h%d-g%d-%d", id, g, j))
				var node catalog.NodeID
				if j%5 == 0 {
					// All processes register the same nodes: the state
					// machine lets one registration per epoch win.
					node = catalog.NodeID(j/5%3 + 1)
					var expect uint64
					c.Read(func(v *catalog.View) {
						if n := v.Nodes[node]; n != nil {
							expect = n.Epoch
						}
					})
					rec = catalog.RegisterNode{Node: node, ExpectEpoch: expect}
				}
				body, err := catalog.EncodeRecord(rec)
				if err != nil {
					t.Error(err)
					return
				}
				out, err := c.Propose(ctx, rec)
				p := helperProposal{Record: hashHex(body), Index: out.Index, Accepted: err == nil, Node: node}
				switch {
				case errors.Is(err, metalog.ErrUnknownOutcome):
					p.Unknown = true
				case err != nil && !errors.Is(err, catalog.ErrStaleEpoch):
					t.Errorf("propose %+v: %v", rec, err)
					return
				}
				mu.Lock()
				res.Proposals = append(res.Proposals, p)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	barrier(t, dir, "done", id)

	// Everyone has finished proposing: the head is final.
	head, err := log.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WaitIndex(ctx, head); err != nil {
		t.Fatal(err)
	}
	view, err := catalog.EncodeView(c.View())
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	res.FinalView = view
	log.mu.Lock()
	res.LostResponses = log.lostResponses
	log.mu.Unlock()
	data, err := json.Marshal(&res)
	mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, fmt.Sprintf("result-%d.json.tmp", id))
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, fmt.Sprintf("result-%d.json", id))); err != nil {
		t.Fatal(err)
	}
}

// barrier marks this helper as having reached stage and waits for all.
func barrier(t *testing.T, dir, stage string, id int) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%d", stage, id)), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(helperTimeout / 2)
	for {
		n := 0
		for i := range helperProcesses {
			if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("%s-%d", stage, i))); err == nil {
				n++
			}
		}
		if n == helperProcesses {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d helpers reached %q", n, helperProcesses, stage)
		}
		time.Sleep(helperWaitPeriod)
	}
}

// entryHeaderSize is the size of metalog's entry envelope before the encoded
// record: a version byte and a 16-byte proposal id
// (docs/format/metadata-log.md).
const entryHeaderSize = 1 + 16
