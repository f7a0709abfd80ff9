package tiering

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"testing"

	"github.com/minkdb/mink/objstore"
)

// TestStoreIORangeFile reads a large object through ranges: ReadAt anywhere,
// sequential Read, Seek, and the errors of a missing or outside location.
func TestStoreIORangeFile(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMem()
	data := make([]byte, 5<<20+123)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	if err := store.PutIfAbsent(ctx, "lake/1/data/f.parquet", data); err != nil {
		t.Fatal(err)
	}
	sio := &storeIO{ctx: ctx, store: store, base: storeURL}
	f, err := sio.Open(storeURL + "/lake/1/data/f.parquet")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.(*rangeFile); !ok {
		t.Fatalf("a %d-byte object opened as %T", len(data), f)
	}
	if st, _ := f.Stat(); st.Size() != int64(len(data)) || st.Name() != "f.parquet" {
		t.Fatalf("stat: %d %q", st.Size(), st.Name())
	}
	for _, off := range []int64{0, 1, 1 << 20, int64(len(data)) - 8} {
		p := make([]byte, 8)
		if n, err := f.ReadAt(p, off); n != 8 || err != nil || !bytes.Equal(p, data[off:off+8]) {
			t.Fatalf("ReadAt %d: %d %v", off, n, err)
		}
	}
	if n, err := f.ReadAt(make([]byte, 16), int64(len(data))-8); n != 8 || err != io.EOF {
		t.Fatalf("ReadAt across the end: %d %v", n, err)
	}
	all, err := io.ReadAll(f)
	if err != nil || !bytes.Equal(all, data) {
		t.Fatalf("sequential read: %d bytes, %v", len(all), err)
	}
	if pos, err := f.Seek(-10, io.SeekEnd); err != nil || pos != int64(len(data))-10 {
		t.Fatalf("seek: %d %v", pos, err)
	}
	tail, _ := io.ReadAll(f)
	if !bytes.Equal(tail, data[len(data)-10:]) {
		t.Fatalf("read after seek: %x", tail)
	}
	if _, err := sio.Open(storeURL + "/lake/1/data/missing.parquet"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("open of a missing object: %v", err)
	}
	if _, err := sio.Open("s3://elsewhere/x"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("open outside the store: %v", err)
	}
}

// TestRoundRangeReads runs a round and reads the lake with every object
// (metadata, manifests, data files) read by ranges.
func TestRoundRangeReads(t *testing.T) {
	defer func(n int64) { wholeReadBytes = n }(wholeReadBytes)
	wholeReadBytes = 0
	TestRoundTiersLogTable(t)
	TestRoundPartitionedTable(t)
}
