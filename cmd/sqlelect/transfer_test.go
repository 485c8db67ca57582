package main

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestTransferAndGracefulReelect: transfer hands the leadership to the
// named candidate at the leader's next renewal, reelect --graceful to
// another; the old leaders' demoted lines say "transferred", and no two
// leaderships overlap.
func TestTransferAndGracefulReelect(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 90*time.Second)
	dsn := migrated(t, ctx)
	name := randomName("tr")
	ids := []string{"c1", "c2", "c3"}
	procs := map[string]*proc{}
	for _, id := range ids {
		procs[id] = start(t, id, dsn, append([]string{"campaign", name, "--id", id}, fastFlags...)...)
	}
	leader := func() (string, uint64) {
		var who string
		var term uint64
		for id, p := range procs {
			for _, e := range p.events(false) {
				if e.Event == "elected" && e.Term > term {
					who, term = id, e.Term
				}
			}
		}
		return who, term
	}
	transferred := func(id string, term uint64) func() bool {
		return func() bool {
			for _, e := range procs[id].events(false) {
				if e.Event == "demoted" && e.Term == term && e.Reason == "transferred" {
					return true
				}
			}
			return false
		}
	}
	waitFor(t, ctx, "a first leader", func() bool { w, _ := leader(); return w != "" })
	first, firstTerm := leader()
	target := ids[0]
	if target == first {
		target = ids[1]
	}

	r := mustRun(t, ctx, dsn, 0, "transfer", name, target, "--yes")
	for _, want := range []string{
		fmt.Sprintf("asked %s (term %d, live) to hand %s to %s; it does at its next renewal", first, firstTerm, name, target),
		target + " leads " + name + " (term ",
		"acquired transferred) ",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("transfer output lacks %q:\n%s", want, r)
		}
	}
	waitFor(t, ctx, target+" elected", func() bool { w, term := leader(); return w == target && term > firstTerm })
	waitFor(t, ctx, first+" transferred", transferred(first, firstTerm))
	_, targetTerm := leader()

	r = mustRun(t, ctx, dsn, 0, "reelect", name, "--graceful", "--yes")
	if !strings.Contains(r.stdout, fmt.Sprintf("asked %s (term %d, live) to step down from %s", target, targetTerm, name)) ||
		!strings.Contains(r.stdout, "acquired released) ") {
		t.Errorf("reelect --graceful output:\n%s", r)
	}
	waitFor(t, ctx, "another leader", func() bool { w, term := leader(); return w != target && term > targetTerm })
	waitFor(t, ctx, target+" transferred", transferred(target, targetTerm))

	// Nobody else may take a row transferred to a candidate that does not
	// run; the wait then says who took it after the window.
	r = mustRun(t, ctx, dsn, exitError, "transfer", name, "ghost", "--yes")
	if !strings.Contains(r.stderr, "not ghost: the transfer window ran out") {
		t.Errorf("transfer to a ghost:\n%s", r)
	}

	for _, p := range procs {
		p.signal(syscall.SIGTERM)
	}
	byID := map[string][]jsonEvent{}
	for id, p := range procs {
		if code := p.wait(t, ctx); code != 0 {
			t.Errorf("%s exit %d", id, code)
		}
		byID[id] = p.events(false)
	}
	checkNoOverlap(t, leaderships(t, byID, time.Now()))
}
