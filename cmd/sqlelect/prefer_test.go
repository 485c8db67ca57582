package main

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestPriority: a candidate of higher --priority that joins while one of
// lower priority leads gets leadership once the leader has led for
// --preference-tenure: the old leader's demoted line says transferred, the
// leader lines carry the holder's priority, and status shows it. A bad
// --priority is a usage error (exit 2) naming the range.
func TestPriority(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 60*time.Second)
	dsn := migrated(t, ctx)
	name := randomName("pr")

	r := mustRun(t, ctx, dsn, exitUsage, "campaign", name, "--priority", "1001")
	if !strings.Contains(r.stderr, "priority 1001: must be from 0 (no preference) to 1000") {
		t.Errorf("--priority 1001:\n%s", r)
	}
	mustRun(t, ctx, dsn, exitUsage, "campaign", name, "--priority", "high")

	low := start(t, "low", dsn, append([]string{"campaign", name, "--id", "low", "--priority", "1"}, fastFlags...)...)
	waitFor(t, ctx, "low elected", func() bool { return hasEvent(low.events(false), "elected", "") })
	high := start(t, "high", dsn, append([]string{"campaign", name, "--id", "high", "--priority", "2",
		"--preference-tenure", "500ms"}, fastFlags...)...)
	waitFor(t, ctx, "high elected", func() bool { return hasEvent(high.events(false), "elected", "") })
	waitFor(t, ctx, "low transferred", func() bool {
		for _, e := range low.events(false) {
			if e.Event == "demoted" && e.Reason == "transferred" {
				return true
			}
		}
		return false
	})
	for _, p := range []*proc{low, high} {
		waitFor(t, ctx, "a leader line with high's priority 2", func() bool {
			for _, e := range p.events(false) {
				if e.Event == "leader" && e.Leader != nil && *e.Leader == "high" && e.Priority != nil && *e.Priority == 2 {
					return true
				}
			}
			return false
		})
	}
	if rows := statusJSON(t, ctx, dsn, name); len(rows) != 1 || rows[0].ID != "high" || rows[0].Priority != 2 {
		t.Errorf("status --json: %+v", rows)
	}
	for _, p := range []*proc{low, high} {
		p.signal(syscall.SIGTERM)
		if code := p.wait(t, ctx); code != 0 {
			t.Errorf("exit %d", code)
		}
	}
	checkNoOverlap(t, leaderships(t, map[string][]jsonEvent{"low": low.events(false), "high": high.events(false)}, time.Now()))
}
