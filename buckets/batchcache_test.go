package buckets

import (
	"testing"
)

func TestBatchCacheEvictsLeastRecentlyUsed(t *testing.T) {
	one := Batch{Offset: 0, Record: rowsRecord(1, 2, 3)} // 24 bytes of values
	size := recordBytes(one)
	c := newBatchCache(2*size + size/2)
	c.put("a", []Batch{one})
	c.put("b", []Batch{{Offset: 3, Record: rowsRecord(4, 5, 6)}})
	if got, ok := c.get("a"); !ok || len(got) != 1 || got[0].Record.NumRows() != 3 {
		t.Fatalf("get a: %v %v", got, ok)
	} else {
		ReleaseBatches(got)
	}
	c.put("c", []Batch{{Offset: 6, Record: rowsRecord(7, 8, 9)}}) // evicts b, the least recently used
	if _, ok := c.get("b"); ok {
		t.Fatal("b survived eviction")
	}
	for _, k := range []string{"a", "c"} {
		got, ok := c.get(k)
		if !ok {
			t.Fatalf("%s evicted", k)
		}
		ReleaseBatches(got)
	}
	c.clear()
	if _, ok := c.get("a"); ok {
		t.Fatal("clear kept a")
	}
}
