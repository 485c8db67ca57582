package election

import (
	"slices"
	"testing"
)

// TestPhaseTransitions: enter makes exactly the moves the transitions table
// lists, and panics on any other.
func TestPhaseTransitions(t *testing.T) {
	all := []phase{following, sittingOut, holding, leading}
	for _, from := range all {
		for _, to := range all {
			allowed := slices.Contains(transitions[from], to)
			c := &Candidate{cfg: settings{Config: Config{ID: "me"}}}
			c.st.phase = from
			panicked := func() (p bool) {
				defer func() { p = recover() != nil }()
				c.enter(to)
				return false
			}()
			switch {
			case allowed && panicked:
				t.Errorf("%v → %v: listed, but enter panicked", from, to)
			case !allowed && !panicked:
				t.Errorf("%v → %v: not listed, but enter allowed it", from, to)
			case allowed && c.st.phase != to:
				t.Errorf("%v → %v: phase is %v after enter", from, to, c.st.phase)
			}
		}
	}
	if got := phase(9).String(); got != "phase(9)" {
		t.Errorf("phase(9).String() = %q", got)
	}
}
