package election

import (
	"context"
	"testing"
	"time"
)

// TestPreferAsksOnlyWhenItMayBeGranted: a follower writes a request only
// when it has a priority, strictly higher than the live leader's, no
// planned change is pending, and the leader has led for the tenure (by the
// database clock the record carries); before the tenure ends it looks again
// when it ends. Everything else writes nothing: followers of priority 0,
// equal or lower priorities (the hysteresis).
func TestPreferAsksOnlyWhenItMayBeGranted(t *testing.T) {
	const tenure = time.Second
	dbNow := time.Unix(1_800_000_000, 0).UTC()
	// leader is a live record of another candidate with priority p, whose
	// term began held ago by the database clock.
	leader := func(p int, held time.Duration) Record {
		return Record{Election: "unit", ID: "other", Term: 7, Priority: p, Since: dbNow.Add(-held),
			LastRenewal: dbNow.Add(-100 * time.Millisecond), Lease: time.Second, LeaseLeft: 900 * time.Millisecond}
	}
	with := func(r Record, f func(*Record)) Record { f(&r); return r }
	const wait = 2 * time.Second
	tests := []struct {
		name     string
		priority int
		seen     Record
		ask      bool
		wait     time.Duration
	}{
		{"no priority never asks", 0, leader(0, time.Hour), false, wait},
		{"no priority never asks, even of a negative one", 0, leader(-1, time.Hour), false, wait},
		{"equal priorities never ask", 2, leader(2, time.Hour), false, wait},
		{"a lower priority never asks", 2, leader(3, time.Hour), false, wait},
		{"a higher priority asks after the tenure", 2, leader(1, tenure), true, wait},
		{"a higher priority looks again when the tenure ends", 2, leader(1, 400*time.Millisecond), false, 600*time.Millisecond + time.Millisecond},
		{"a request pending", 2, with(leader(1, time.Hour), func(r *Record) { r.Transfer, r.TransferTo = true, "x" }), false, wait},
		{"a released row", 2, with(leader(1, time.Hour), func(r *Record) { r.Released = true }), false, wait},
		{"an expired row", 2, with(leader(1, time.Hour), func(r *Record) { r.LeaseLeft = 0 }), false, wait},
		{"a row naming this candidate", 2, with(leader(1, time.Hour), func(r *Record) { r.ID = "me" }), false, wait},
		{"no row", 2, Record{Election: "unit"}, false, wait},
		{"an operator's assignment not claimed yet", 2, with(leader(1, time.Hour), func(r *Record) { r.Acquired = "operator" }), false, wait},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, b, ctx := preferCandidate(t, tc.priority, tenure)
			got := c.prefer(ctx, tc.seen, wait)
			if asked := len(b.prefers) == 1; asked != tc.ask || len(b.prefers) > 1 {
				t.Errorf("%d requests, want ask=%v", len(b.prefers), tc.ask)
			}
			if got != tc.wait {
				t.Errorf("wait %v, want %v", got, tc.wait)
			}
		})
	}
}

// TestPreferAsksATermOnce: a follower that asked a term to hand over does
// not ask it again (a holder still waiting out its lock delay gives the row
// up without acting on the request: the request is cleared and the term
// stays); it asks the next term.
func TestPreferAsksATermOnce(t *testing.T) {
	dbNow := time.Unix(1_800_000_000, 0).UTC()
	seen := Record{Election: "unit", ID: "other", Term: 7, Priority: 1, Since: dbNow.Add(-time.Hour),
		LastRenewal: dbNow.Add(-100 * time.Millisecond), Lease: time.Second, LeaseLeft: 900 * time.Millisecond}
	c, b, ctx := preferCandidate(t, 2, time.Second)
	for range 3 {
		c.prefer(ctx, seen, time.Second)
	}
	if len(b.prefers) != 1 {
		t.Fatalf("%d requests of term 7 in 3 looks, want 1", len(b.prefers))
	}
	seen.Term = 8
	c.prefer(ctx, seen, time.Second)
	if len(b.prefers) != 2 {
		t.Fatalf("%d requests after term 8 was seen, want 2", len(b.prefers))
	}
}

// preferCandidate is candidate "me" of election "unit" with the given
// priority and tenure on a fake backend, and a context for its calls that
// ends with the test (5 s at most).
func preferCandidate(t *testing.T, priority int, tenure time.Duration) (*Candidate, *fakeBackend, context.Context) {
	t.Helper()
	cfg, err := Config{Name: "unit", ID: "me", Preference: PreferenceConfig{Priority: priority, Tenure: tenure}}.settings()
	if err != nil {
		t.Fatal(err)
	}
	b := &fakeBackend{}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return newCandidate(cfg, b), b, ctx
}
