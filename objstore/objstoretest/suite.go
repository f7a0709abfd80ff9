// Package objstoretest is the conformance suite every objstore.Store
// implementation must pass. It lives in a non-test file so that packages
// with their own Store (or a wrapper around one) can run it too.
package objstoretest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/minkdb/mink/objstore"
)

// Run runs the suite. open must return a new, empty store for each call
// (each subtest calls it once) and arrange for its cleanup; Run closes the
// store at the end of the subtest.
func Run(t *testing.T, open func(t *testing.T) objstore.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, ctx context.Context, s objstore.Store)
	}{
		{"GetMissing", testGetMissing},
		{"PutGet", testPutGet},
		{"PutTwice", testPutTwice},
		{"ConcurrentPutOneWinner", testConcurrentPutOneWinner},
		{"ReadsNeverSeePartialObjects", testNoPartialReads},
		{"GetRange", testGetRange},
		{"GetRangeMissing", testGetRangeMissing},
		{"List", testList},
		{"ListEmpty", testListEmpty},
		{"Delete", testDelete},
		{"EmptyObject", testEmptyObject},
		{"LargeObject", testLargeObject},
		{"DeepKeys", testDeepKeys},
		{"InvalidKeys", testInvalidKeys},
		{"CallerBuffersNotRetained", testBuffersNotRetained},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			s := open(t)
			defer func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			}()
			tc.fn(t, ctx, s)
		})
	}
}

func mustPut(t *testing.T, ctx context.Context, s objstore.Store, key string, data []byte) {
	t.Helper()
	if err := s.PutIfAbsent(ctx, key, data); err != nil {
		t.Fatalf("PutIfAbsent(%q): %v", key, err)
	}
}

func mustGet(t *testing.T, ctx context.Context, s objstore.Store, key string) []byte {
	t.Helper()
	data, err := s.Get(ctx, key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return data
}

func checkContent(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: got %d bytes %s, want %d bytes %s", what, len(got), abbrev(got), len(want), abbrev(want))
	}
}

func abbrev(b []byte) string {
	if len(b) > 32 {
		return fmt.Sprintf("%q...", b[:32])
	}
	return fmt.Sprintf("%q", b)
}

// pattern returns n deterministic bytes that differ per seed and per
// position, so a misplaced or truncated range is visible.
func pattern(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 0x6d696e6b))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func testGetMissing(t *testing.T, ctx context.Context, s objstore.Store) {
	_, err := s.Get(ctx, "no/such/key")
	if !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Get of a missing key: got %v, want ErrNotFound", err)
	}
	mustPut(t, ctx, s, "dir/obj", []byte("x"))
	for _, key := range []string{"dir", "dir/ob", "dir/obj/below"} {
		if _, err := s.Get(ctx, key); !errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("Get(%q) next to object dir/obj: got %v, want ErrNotFound", key, err)
		}
	}
}

func testPutGet(t *testing.T, ctx context.Context, s objstore.Store) {
	want := []byte("hello, object store")
	mustPut(t, ctx, s, "a", want)
	checkContent(t, "Get(a)", mustGet(t, ctx, s, "a"), want)
}

func testPutTwice(t *testing.T, ctx context.Context, s objstore.Store) {
	first := []byte("first")
	mustPut(t, ctx, s, "k/once", first)
	err := s.PutIfAbsent(ctx, "k/once", []byte("second, longer content"))
	if !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("second PutIfAbsent: got %v, want ErrExists", err)
	}
	checkContent(t, "Get after refused put", mustGet(t, ctx, s, "k/once"), first)
	// Same content is refused too: create-only, not idempotent.
	if err := s.PutIfAbsent(ctx, "k/once", first); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("PutIfAbsent with identical content: got %v, want ErrExists", err)
	}
}

func testConcurrentPutOneWinner(t *testing.T, ctx context.Context, s objstore.Store) {
	const writers = 32
	// Distinct content per writer, large enough that the writes overlap.
	contents := make([][]byte, writers)
	for i := range contents {
		contents[i] = append([]byte(fmt.Sprintf("writer %02d:", i)), pattern(uint64(i), 64<<10)...)
	}
	for round := range 3 {
		key := fmt.Sprintf("race/%d/obj", round)
		errs := make([]error, writers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range writers {
			wg.Go(func() {
				<-start
				errs[i] = s.PutIfAbsent(ctx, key, contents[i])
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil:
				if winner >= 0 {
					t.Fatalf("%s: writers %d and %d both won", key, winner, i)
				}
				winner = i
			case errors.Is(err, objstore.ErrExists):
			default:
				t.Fatalf("%s: writer %d: got %v, want nil or ErrExists", key, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("%s: no writer won; errors: %v", key, errs)
		}
		checkContent(t, key+" after race", mustGet(t, ctx, s, key), contents[winner])
	}
}

func testNoPartialReads(t *testing.T, ctx context.Context, s objstore.Store) {
	const rounds, readers = 4, 3
	want := pattern(7, 4<<20)
	for round := range rounds {
		key := fmt.Sprintf("partial/%d", round)
		done := make(chan struct{})
		started := make(chan struct{}, readers)
		errs := make(chan error, readers)
		var wg sync.WaitGroup
		for range readers {
			wg.Go(func() {
				started <- struct{}{}
				for {
					data, err := s.Get(ctx, key)
					switch {
					case errors.Is(err, objstore.ErrNotFound):
					case err != nil:
						errs <- fmt.Errorf("get during put: %w", err)
						return
					case !bytes.Equal(data, want):
						errs <- fmt.Errorf("get during put returned %d bytes, want all %d or ErrNotFound", len(data), len(want))
						return
					}
					select {
					case <-done:
						return
					default:
					}
				}
			})
		}
		for range readers {
			<-started
		}
		err := s.PutIfAbsent(ctx, key, want)
		close(done)
		wg.Wait()
		close(errs)
		if err != nil {
			t.Fatalf("PutIfAbsent(%s): %v", key, err)
		}
		for err := range errs {
			t.Fatal(err)
		}
	}
	listed, err := s.List(ctx, "partial/")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(listed) != rounds || listed[0].Size != int64(len(want)) {
		t.Fatalf("List after puts: got %v, want %d objects of %d bytes", listed, rounds, len(want))
	}
}

func testGetRange(t *testing.T, ctx context.Context, s objstore.Store) {
	data := pattern(1, 1000)
	const key = "range/obj"
	mustPut(t, ctx, s, key, data)
	size := int64(len(data))
	tests := []struct {
		off, n int64
		want   []byte // nil with wantErr
		err    error
	}{
		{0, 1, data[:1], nil},
		{0, 10, data[:10], nil},
		{0, size, data, nil},
		{0, -1, data, nil},
		{0, 0, []byte{}, nil},
		{10, 20, data[10:30], nil},
		{size - 1, 1, data[size-1:], nil},
		{size - 1, -1, data[size-1:], nil},
		{size - 10, 100, data[size-10:], nil}, // clipped at the end
		{500, -1, data[500:], nil},
		{size, 1, []byte{}, nil}, // at the end: empty, not an error
		{size, -1, []byte{}, nil},
		{size, 0, []byte{}, nil},
		{size + 1, 1, nil, objstore.ErrInvalidRange},
		{size + 1, -1, nil, objstore.ErrInvalidRange},
		{size + 1000, 0, nil, objstore.ErrInvalidRange},
		{-1, 10, nil, objstore.ErrInvalidRange},
	}
	for _, tc := range tests {
		got, err := s.GetRange(ctx, key, tc.off, tc.n)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("GetRange(off=%d, n=%d) of %d bytes: got %d bytes, err %v; want %v", tc.off, tc.n, size, len(got), err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("GetRange(off=%d, n=%d) of %d bytes: %v", tc.off, tc.n, size, err)
			continue
		}
		if !bytes.Equal(got, tc.want) {
			t.Errorf("GetRange(off=%d, n=%d) of %d bytes: got %d bytes %s, want %d bytes %s", tc.off, tc.n, size, len(got), abbrev(got), len(tc.want), abbrev(tc.want))
		}
	}
}

func testGetRangeMissing(t *testing.T, ctx context.Context, s objstore.Store) {
	for _, r := range [][2]int64{{0, 1}, {0, -1}, {0, 0}, {5, 5}} {
		if _, err := s.GetRange(ctx, "no/such/key", r[0], r[1]); !errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("GetRange(off=%d, n=%d) of a missing key: got %v, want ErrNotFound", r[0], r[1], err)
		}
	}
}

func testList(t *testing.T, ctx context.Context, s objstore.Store) {
	objects := map[string]int{
		"wal/1/1/0001":  1,
		"wal/1/1/0002":  22,
		"wal/1/1/0010":  3,
		"wal/1/1/1000":  4,
		"wal/1/2/0001":  5,
		"wal/10/1/0001": 6,
		"wal/1-x":       7, // sorts before "wal/1/..." ('-' < '/')
		"wala":          8,
		"stream/9/a":    9,
		"z":             0,
	}
	// Put in an order unrelated to key order.
	keys := make([]string, 0, len(objects))
	for k := range objects {
		keys = append(keys, k)
	}
	rand.New(rand.NewPCG(3, 3)).Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	for _, k := range keys {
		mustPut(t, ctx, s, k, bytes.Repeat([]byte{'x'}, objects[k]))
	}
	expect := func(prefix string) []objstore.ObjectInfo {
		var out []objstore.ObjectInfo
		for k, size := range objects {
			if len(k) >= len(prefix) && k[:len(prefix)] == prefix {
				out = append(out, objstore.ObjectInfo{Key: k, Size: int64(size)})
			}
		}
		slices.SortFunc(out, func(a, b objstore.ObjectInfo) int {
			if a.Key < b.Key {
				return -1
			}
			return 1
		})
		return out
	}
	for _, prefix := range []string{
		"", "w", "wal", "wal/", "wal/1", "wal/1/", "wal/1/1/", "wal/1/1/000", "wal/1/1/0001",
		"wal/1/1/00010", "wal/1/", "wal/10", "stream/", "z", "nothing", "nothing/here/", "wal/1/1/0001/",
	} {
		got, err := s.List(ctx, prefix)
		if err != nil {
			t.Errorf("List(%q): %v", prefix, err)
			continue
		}
		if want := expect(prefix); !slices.Equal(got, want) {
			t.Errorf("List(%q):\n got  %v\n want %v", prefix, got, want)
		}
	}
}

func testListEmpty(t *testing.T, ctx context.Context, s objstore.Store) {
	for _, prefix := range []string{"", "a", "a/"} {
		got, err := s.List(ctx, prefix)
		if err != nil || len(got) != 0 {
			t.Errorf("List(%q) of an empty store: got %v, %v; want nothing", prefix, got, err)
		}
	}
}

func testDelete(t *testing.T, ctx context.Context, s objstore.Store) {
	mustPut(t, ctx, s, "del/a/1", []byte("one"))
	mustPut(t, ctx, s, "del/a/2", []byte("two"))
	if err := s.Delete(ctx, "del/a/1"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := s.Get(ctx, "del/a/1"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Get after Delete: got %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, "del/a/1"); err != nil {
		t.Fatalf("second Delete: got %v, want nil", err)
	}
	if err := s.Delete(ctx, "never/existed"); err != nil {
		t.Fatalf("Delete of a missing key: got %v, want nil", err)
	}
	checkContent(t, "sibling after Delete", mustGet(t, ctx, s, "del/a/2"), []byte("two"))
	got, err := s.List(ctx, "del/")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if want := []objstore.ObjectInfo{{Key: "del/a/2", Size: 3}}; !slices.Equal(got, want) {
		t.Fatalf("List after Delete: got %v, want %v", got, want)
	}
	// Deleting the last object under a prefix, then writing there again.
	if err := s.Delete(ctx, "del/a/2"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if got, err := s.List(ctx, ""); err != nil || len(got) != 0 {
		t.Fatalf("List after deleting everything: got %v, %v; want nothing", got, err)
	}
	// A deleted key can be created again.
	mustPut(t, ctx, s, "del/a/1", []byte("again"))
	checkContent(t, "Get after re-create", mustGet(t, ctx, s, "del/a/1"), []byte("again"))
}

func testEmptyObject(t *testing.T, ctx context.Context, s objstore.Store) {
	mustPut(t, ctx, s, "empty", nil)
	if got := mustGet(t, ctx, s, "empty"); len(got) != 0 {
		t.Fatalf("Get of empty object: got %d bytes", len(got))
	}
	for _, r := range [][2]int64{{0, -1}, {0, 10}, {0, 0}} {
		got, err := s.GetRange(ctx, "empty", r[0], r[1])
		if err != nil || len(got) != 0 {
			t.Errorf("GetRange(off=%d, n=%d) of empty object: got %d bytes, %v; want empty, nil", r[0], r[1], len(got), err)
		}
	}
	if _, err := s.GetRange(ctx, "empty", 1, -1); !errors.Is(err, objstore.ErrInvalidRange) {
		t.Errorf("GetRange(off=1) of empty object: got %v, want ErrInvalidRange", err)
	}
	got, err := s.List(ctx, "empty")
	if want := []objstore.ObjectInfo{{Key: "empty", Size: 0}}; err != nil || !slices.Equal(got, want) {
		t.Errorf("List(empty): got %v, %v; want %v", got, err, want)
	}
	if err := s.PutIfAbsent(ctx, "empty", []byte("x")); !errors.Is(err, objstore.ErrExists) {
		t.Errorf("put over empty object: got %v, want ErrExists", err)
	}
}

func testLargeObject(t *testing.T, ctx context.Context, s objstore.Store) {
	data := pattern(5, 5<<20)
	mustPut(t, ctx, s, "large/5MiB", data)
	checkContent(t, "Get of 5 MiB object", mustGet(t, ctx, s, "large/5MiB"), data)
	off := int64(3<<20 + 12345)
	got, err := s.GetRange(ctx, "large/5MiB", off, 1<<20)
	if err != nil {
		t.Fatalf("GetRange: %v", err)
	}
	checkContent(t, "GetRange inside 5 MiB object", got, data[off:off+1<<20])
	listed, err := s.List(ctx, "large/")
	if want := []objstore.ObjectInfo{{Key: "large/5MiB", Size: 5 << 20}}; err != nil || !slices.Equal(listed, want) {
		t.Fatalf("List: got %v, %v; want %v", listed, err, want)
	}
}

func testDeepKeys(t *testing.T, ctx context.Context, s objstore.Store) {
	keys := []string{
		"a/b/c/d/e/f/g/h",
		"a/b/c/d/e/f/g/i",
		"a/b/x",
		"stream/00000000000000000042/00000000000000001000-00000000000000002000.7",
		"odd chars/key with spaces/üñí/a=b,c;d+e@f%g",
	}
	for _, k := range keys {
		mustPut(t, ctx, s, k, []byte(k))
	}
	for _, k := range keys {
		checkContent(t, "Get("+k+")", mustGet(t, ctx, s, k), []byte(k))
	}
	got, err := s.List(ctx, "a/b/")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	want := []objstore.ObjectInfo{{Key: keys[0], Size: int64(len(keys[0]))}, {Key: keys[1], Size: int64(len(keys[1]))}, {Key: keys[2], Size: int64(len(keys[2]))}}
	if !slices.Equal(got, want) {
		t.Fatalf("List(a/b/): got %v, want %v", got, want)
	}
}

func testInvalidKeys(t *testing.T, ctx context.Context, s objstore.Store) {
	bad := []string{"", "/abs", "/", "a/../b", "..", "../a", "a/..", ".", "./a", "a/./b", "a//b", "a/", "nul\x00byte"}
	for _, key := range bad {
		check := func(op string, err error) {
			t.Helper()
			if !errors.Is(err, objstore.ErrInvalidKey) {
				t.Errorf("%s(%q): got %v, want ErrInvalidKey", op, key, err)
			}
		}
		_, err := s.Get(ctx, key)
		check("Get", err)
		_, err = s.GetRange(ctx, key, 0, 1)
		check("GetRange", err)
		check("PutIfAbsent", s.PutIfAbsent(ctx, key, []byte("x")))
		check("Delete", s.Delete(ctx, key))
	}
	for _, prefix := range []string{"/abs", "../", "a/../", "a//", "nul\x00"} {
		if _, err := s.List(ctx, prefix); !errors.Is(err, objstore.ErrInvalidKey) {
			t.Errorf("List(%q): got %v, want ErrInvalidKey", prefix, err)
		}
	}
	if got, err := s.List(ctx, ""); err != nil || len(got) != 0 {
		t.Errorf("List after invalid puts: got %v, %v; want nothing", got, err)
	}
}

func testBuffersNotRetained(t *testing.T, ctx context.Context, s objstore.Store) {
	buf := []byte("original")
	mustPut(t, ctx, s, "buf", buf)
	copy(buf, "XXXXXXXX")
	got := mustGet(t, ctx, s, "buf")
	checkContent(t, "Get after caller reused its put buffer", got, []byte("original"))
	copy(got, "YYYYYYYY")
	checkContent(t, "Get after caller modified a returned buffer", mustGet(t, ctx, s, "buf"), []byte("original"))
}
