package probe

import "testing"

// TestChecksEndWithTopology: Preflight runs the server's heartbeat probe
// (Server, which refuses an unsafe server) when its loop reaches the
// topology check, which must therefore be the last of Checks: removed, or
// with a check after it, the probe would be skipped or come too early.
func TestChecksEndWithTopology(t *testing.T) {
	cs := Checks("service_election")
	if len(cs) == 0 || cs[len(cs)-1].Prop != Topology {
		t.Fatalf("the last check is not %s: %v", Topology, cs)
	}
	for _, c := range cs[:len(cs)-1] {
		if c.Prop == Topology {
			t.Errorf("%s is checked twice", Topology)
		}
	}
}
