package sqlfront

import "github.com/minkdb/mink/catalog"

// SetKVWriteHook wraps every write to a primary-key bucket on this node
// (nil: none): write does the real write, and what the hook returns is
// what the statement sees. Not safe while statements run.
func SetKVWriteHook(hook func(bucket uint64, write func() error) error) {
	if hook == nil {
		kvWriteHook = nil
		return
	}
	kvWriteHook = func(id catalog.BucketID, write func() error) error { return hook(uint64(id), write) }
}
