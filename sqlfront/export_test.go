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

// SetFastInsert turns the fast path of INSERT … VALUES on (the default) or
// off; statements planned while it is off take the general path. Not safe
// while statements are planned.
func SetFastInsert(on bool) { fastInsertOff.Store(!on) }

// FastInserts is how many executions the fast path of INSERT … VALUES has
// stored since the process started.
func FastInserts() int64 { return fastInserts.Load() }
