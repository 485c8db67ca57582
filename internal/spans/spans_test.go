package spans

import (
	"testing"
	"time"
)

// TestWithin: how much of a window spans took, each instant once however
// many spans (electiontest's sampler's and ping's) cover it.
func TestWithin(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	for _, tc := range []struct {
		name     string
		spans    [][2]int
		from, to int
		want     time.Duration
	}{
		{"none", nil, 0, 1000, 0},
		{"inside", [][2]int{{100, 300}}, 0, 1000, 200 * time.Millisecond},
		{"clipped", [][2]int{{-100, 100}, {900, 1200}}, 0, 1000, 200 * time.Millisecond},
		{"the same stall twice", [][2]int{{100, 300}, {150, 320}}, 0, 1000, 220 * time.Millisecond},
		{"nested", [][2]int{{100, 500}, {200, 300}}, 0, 1000, 400 * time.Millisecond},
		{"apart", [][2]int{{600, 700}, {100, 200}}, 0, 1000, 200 * time.Millisecond},
		{"outside", [][2]int{{1100, 1200}}, 0, 1000, 0},
	} {
		var s [][2]time.Time
		for _, sp := range tc.spans {
			s = append(s, [2]time.Time{at(sp[0]), at(sp[1])})
		}
		if got := Within(s, at(tc.from), at(tc.to)); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
