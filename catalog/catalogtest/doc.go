// Package catalogtest is test support for code that builds catalog views from
// scripts: ParseRecord reads one metadata record in the one-line syntax of
// catalog's data-driven state-machine scripts (catalog/testdata/statemachine),
// and DumpView renders a view compactly and deterministically, one entity per
// line, for expected output. It holds no state and starts no goroutines; both
// functions are safe for concurrent use.
package catalogtest
