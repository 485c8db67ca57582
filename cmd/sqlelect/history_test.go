package main

// Tests of the history command (issue 35): a campaign's terms, with how
// each began and ended, as a table and as JSON; --since; an older schema.

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/history"
	"github.com/sqlelect/sqlelect/internal/testdb"
)

// historyHeader is the header of history's table.
var historyHeader = regexp.MustCompile(`^TERM\s+HOLDER\s+BEGAN\s+STARTED\s+DURATION\s+ENDED$`)

// TestHistory: a transfer from one campaign to another is two terms of the
// history (the first "first", or "insert" on a database migrated less than
// a lock delay ago), the first ended "transferred" and the second running; --since
// keeps the terms that ran then; an election without history prints the
// header alone (exit 0); without the history table history exits 5 naming
// migration 10.
func TestHistory(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 60*time.Second)
	dsn := migrated(t, ctx)
	name := randomName("hist")
	a := start(t, "a", dsn, append([]string{"campaign", name, "--id", "a"}, fastFlags...)...)
	waitFor(t, ctx, "a elected", func() bool { return hasEvent(a.events(false), "elected", "") })
	b := start(t, "b", dsn, append([]string{"campaign", name, "--id", "b"}, fastFlags...)...)
	mustRun(t, ctx, dsn, 0, "transfer", name, "b", "--yes")
	waitFor(t, ctx, "b elected", func() bool { return hasEvent(b.events(false), "elected", "") })

	var ts []history.Term
	if r := mustRun(t, ctx, dsn, 0, "history", name, "--json"); json.Unmarshal([]byte(r.stdout), &ts) != nil || len(ts) != 2 ||
		ts[0].Holder != "a" || ts[0].Began != "first" && ts[0].Began != "insert" || ts[0].End != "transferred" || ts[0].Ended.IsZero() ||
		ts[1].Holder != "b" || ts[1].Began != "transferred" || ts[1].End != "" || !ts[1].Ended.IsZero() || ts[1].Term <= ts[0].Term {
		t.Fatalf("history --json after a transfer from a to b: %+v\n%s", ts, r)
	}
	r := mustRun(t, ctx, dsn, 0, "history", name)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 || !historyHeader.MatchString(lines[0]) || !strings.HasSuffix(strings.TrimSpace(lines[1]), "transferred") ||
		!strings.Contains(lines[2], "(runs)") || !strings.Contains(lines[2], " b ") {
		t.Errorf("history after a transfer: %s", r)
	}
	if r := mustRun(t, ctx, dsn, 0, "history", name, "--since", "1h", "--json"); json.Unmarshal([]byte(r.stdout), &ts) != nil || len(ts) != 2 {
		t.Errorf("history --since 1h: %s", r)
	}
	if r := mustRun(t, ctx, dsn, 0, "history", randomName("none"), "--json"); strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("history --json of an election without history: want []: %s", r)
	}
	if _, err := testdb.Open(t, dsn).ExecContext(ctx, "DROP TABLE service_election_history"); err != nil {
		t.Fatal(err)
	}
	if r := mustRun(t, ctx, dsn, exitTable, "history", name); !strings.Contains(r.stderr, "migration 10") || !strings.Contains(r.stderr, "sqlelect migrate up") {
		t.Errorf("history without the history table: %s", r)
	}
	if r := mustRun(t, ctx, dsn, exitTable, append([]string{"campaign", randomName("nohist")}, fastFlags...)...); !strings.Contains(r.stderr, "service_election_history") ||
		!strings.Contains(r.stderr, "schema version 10") {
		t.Errorf("campaign without the history table: %s", r)
	}
}
