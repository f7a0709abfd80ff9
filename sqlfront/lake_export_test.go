package sqlfront

import "github.com/minkdb/mink/tiering"

// SetPinnedStreamHook makes scans call hook between pinning their lake
// part and reading the streams (nil: none). Not safe while statements run.
func SetPinnedStreamHook(hook func(table string)) { pinnedStreamHook = hook }

// SetLakeFilters turns statistics pruning of lake reads on or off. Not
// safe while statements run.
func SetLakeFilters(on bool) { lakeFiltersOff = !on }

// LakeStats returns the frontend's lake reader's totals.
func (f *Frontend) LakeStats() tiering.LakeReadStats { return f.cfg.Lake.Stats() }
