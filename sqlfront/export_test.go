package sqlfront

import "github.com/minkdb/mink/catalog"

// SetMirrorReadFault makes mirrors' bucket reads call fault first (nil:
// no fault). Not safe while statements run.
func SetMirrorReadFault(fault func(bucket uint64) error) {
	if fault == nil {
		mirrorReadFault = nil
		return
	}
	mirrorReadFault = func(id catalog.BucketID) error { return fault(uint64(id)) }
}
