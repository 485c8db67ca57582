// Package spans measures how much of a window a set of time spans covers:
// the test suites' record of their own stalls (electiontest, and the chaos
// suite's harness_stall records), by which they extend a bound.
package spans

import (
	"slices"
	"time"
)

// Within returns how much of [from, to] the spans (each a start and an
// end, in any order and overlapping) cover: their union, each instant
// once.
func Within(spans [][2]time.Time, from, to time.Time) time.Duration {
	spans = slices.Clone(spans)
	slices.SortFunc(spans, func(x, y [2]time.Time) int { return x[0].Compare(y[0]) })
	var d time.Duration
	covered := from
	for _, sp := range spans {
		end := sp[1]
		if to.Before(end) {
			end = to
		}
		a := sp[0]
		if covered.After(a) {
			a = covered
		}
		if end.After(a) {
			d, covered = d+end.Sub(a), end
		}
	}
	return d
}
