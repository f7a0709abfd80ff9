// Package layering keeps mink's import graph layered: its test lists every
// package of the module in one of a few ordered layers, the ones README's
// architecture table describes, and fails when a package imports one of
// its own layer or a higher one, or when a package is in no layer (a new
// package must be placed deliberately). It has no code.
package layering
