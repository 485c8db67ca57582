package main

// Tests of the members of an election (issue 35): campaign and run register
// through package members, members lists them, status counts them, and a
// second process with the ID of a live member exits 10.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/internal/testdb"
	"github.com/sqlelect/sqlelect/members"
)

// membersHeader is the header of members's table.
var membersHeader = regexp.MustCompile(`^ID\s+STATE\s+VERSION\s+HOST\s+PRIORITY\s+HEALTHY\s+STARTED\s+LAST-SEEN$`)

func membersJSON(t *testing.T, ctx context.Context, dsn, name string) []members.Member {
	t.Helper()
	r := mustRun(t, ctx, dsn, 0, "members", name, "--json")
	var ms []members.Member
	if err := json.Unmarshal([]byte(r.stdout), &ms); err != nil {
		t.Fatalf("members --json: %v\n%s", err, r)
	}
	return ms
}

func hostname(t *testing.T) string {
	t.Helper()
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return host
}

// TestDuplicateID: a campaign, and a run, with the --id of a live member
// exit 10 before campaigning, naming the member's host; the first keeps
// leading.
func TestDuplicateID(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 60*time.Second)
	dsn := migrated(t, ctx)
	name := randomName("dup")
	first := start(t, "first", dsn, append([]string{"campaign", name, "--id", "dup"}, fastFlags...)...)
	waitFor(t, ctx, "first elected", func() bool { return hasEvent(first.events(false), "elected", "") })
	var term uint64
	for _, e := range first.events(false) {
		if e.Event == "elected" {
			term = e.Term
		}
	}
	for _, args := range [][]string{
		append([]string{"campaign", name, "--id", "dup"}, fastFlags...),
		append([]string{"run", name, "--id", "dup"}, append(fastFlags, "--", "true")...),
	} {
		r := mustRun(t, ctx, dsn, exitDuplicate, args...)
		for _, want := range []string{fmt.Sprintf(`"dup", running on host %q since `, hostname(t)), "another live process runs with this --id"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("sqlelect %s: want %q on stderr: %s", args[0], want, r)
			}
		}
		if strings.Contains(r.stdout+r.stderr, `"event"`) {
			t.Errorf("sqlelect %s campaigned: %s", args[0], r)
		}
	}
	if rows := statusJSON(t, ctx, dsn, name); len(rows) != 1 || rows[0].ID != "dup" || rows[0].Term != term || !rows[0].Live {
		t.Errorf("status: %+v, want dup leading term %d", rows, term)
	}
	if first.exited() || hasEvent(first.events(false), "demoted", "") {
		t.Errorf("the first stood down or exited")
	}
}

// TestMembersList: members lists a campaign and a run as live, with the
// --app-version given or the binary's version; status counts them; a
// candidate that exits on SIGTERM leaves the list.
func TestMembersList(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 60*time.Second)
	dsn := migrated(t, ctx)
	name := randomName("mem")
	host := hostname(t)
	c1 := start(t, "c1", dsn, append([]string{"campaign", name, "--id", "c1", "--app-version", "1.4.2", "--priority", "3"}, fastFlags...)...)
	waitFor(t, ctx, "c1 elected", func() bool { return hasEvent(c1.events(false), "elected", "") })
	c2 := start(t, "c2", dsn, append([]string{"run", name, "--id", "c2"}, append(fastFlags, "--", "true")...)...)
	waitFor(t, ctx, "c2 following", func() bool { return hasEvent(c2.events(true), "leader", "c1") })

	want := map[string]members.Member{
		"c1": {Version: "1.4.2", Priority: 3},
		"c2": {Version: strings.Fields(mustRun(t, ctx, "", 0, "version").stdout)[1]},
	}
	ms := membersJSON(t, ctx, dsn, name)
	for _, m := range ms {
		w := want[m.ID]
		if !m.Live || m.Election != name || m.Version != w.Version || m.Priority != w.Priority || m.Host != host || !m.Healthy ||
			m.Incarnation == "" || m.PID == 0 || m.LastSeen.Before(m.Started) {
			t.Errorf("member %+v, want live, version %q, priority %d, host %q", m, w.Version, w.Priority, host)
		}
	}
	if len(ms) != 2 {
		t.Fatalf("members: %+v, want c1 and c2", ms)
	}
	r := mustRun(t, ctx, dsn, 0, "members", name)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	row := regexp.MustCompile(`^c1\s+live\s+1\.4\.2\s+` + regexp.QuoteMeta(host) + `\s+3\s+yes\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\s+\d+s ago$`)
	if len(lines) != 3 || !membersHeader.MatchString(lines[0]) || !row.MatchString(lines[1]) {
		t.Errorf("members table, want a header and c1's row matching %v:\n%s", row, r)
	}
	checkLiveCount(t, ctx, dsn, name, 2)

	c2.signal(syscall.SIGTERM)
	if code := c2.wait(t, ctx); code != 0 {
		t.Errorf("c2 exit %d", code)
	}
	if ms := membersJSON(t, ctx, dsn, name); len(ms) != 1 || ms[0].ID != "c1" {
		t.Errorf("members after c2 exited: %+v, want c1 alone", ms)
	}
	checkLiveCount(t, ctx, dsn, name, 1)
}

// checkLiveCount checks status's count of the live members of name, in
// its table's last line and in --json.
func checkLiveCount(t *testing.T, ctx context.Context, dsn, name string, n int) {
	t.Helper()
	if got := last(strings.Split(strings.TrimSpace(mustRun(t, ctx, dsn, 0, "status", name).stdout), "\n")); got != fmt.Sprintf("members: %d live", n) {
		t.Errorf("status's last line %q, want members: %d live", got, n)
	}
	if rows := statusJSON(t, ctx, dsn, name); len(rows) != 1 || rows[0].MembersLive == nil || *rows[0].MembersLive != n {
		t.Errorf("status --json: %+v, want members_live %d", rows, n)
	}
}

// TestMembersNoneAndOlderSchema: an election without members lists none
// (exit 0, not 6); without the members table (a schema older than migration
// 9) members and campaign exit 5, and status says so in its members line.
func TestMembersNoneAndOlderSchema(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 60*time.Second)
	dsn := migrated(t, ctx)
	name := randomName("nomem")
	if r := mustRun(t, ctx, dsn, 0, "members", name); !membersHeader.MatchString(strings.TrimSpace(r.stdout)) {
		t.Errorf("members of an election without members: want the header alone: %s", r)
	}
	if r := mustRun(t, ctx, dsn, 0, "members", name, "--json"); strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("members --json of an election without members: want []: %s", r)
	}
	db := testdb.Open(t, dsn)
	for _, q := range []string{"INSERT INTO service_election (anchor, service_id) VALUES ('" + name + "', 'x')", "DROP TABLE service_election_members"} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if r := mustRun(t, ctx, dsn, exitTable, "members", name); !strings.Contains(r.stderr, "migration 9") || !strings.Contains(r.stderr, "sqlelect migrate up") {
		t.Errorf("members without the members table: %s", r)
	}
	if r := mustRun(t, ctx, dsn, exitTable, append([]string{"campaign", name}, fastFlags...)...); !strings.Contains(r.stderr, "service_election_members") {
		t.Errorf("campaign without the members table: %s", r)
	}
	r := mustRun(t, ctx, dsn, 0, "status", name)
	if got := last(strings.Split(strings.TrimSpace(r.stdout), "\n")); got != "members: unknown: no members table (migration 9: run `sqlelect migrate up`)" {
		t.Errorf("status's members line %q", got)
	}
	if r := mustRun(t, ctx, dsn, 0, "status", name, "--json"); strings.Contains(r.stdout, "members_live") {
		t.Errorf("status --json without the members table: want no members_live: %s", r)
	}
}

// TestFollowVersion: with --follow-version newest, a member of a newer
// --app-version takes the leadership over once it has run for a lease; an
// unknown value is a usage error.
func TestFollowVersion(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 60*time.Second)
	dsn := migrated(t, ctx)
	name := randomName("follow")
	flags := append([]string{"--follow-version", "newest"}, fastFlags...)
	old := start(t, "old", dsn, append([]string{"campaign", name, "--id", "old", "--app-version", "1.0.0"}, flags...)...)
	waitFor(t, ctx, "old elected", func() bool { return hasEvent(old.events(false), "elected", "") })
	upgraded := start(t, "new", dsn, append([]string{"campaign", name, "--id", "new", "--app-version", "1.1.0"}, flags...)...)
	waitFor(t, ctx, "the newer version elected", func() bool { return hasEvent(upgraded.events(false), "elected", "") })
	if !slices.ContainsFunc(old.events(false), func(e jsonEvent) bool { return e.Event == "demoted" && e.Reason == "transferred" }) {
		t.Errorf("old's events %v: want a demotion by transfer", old.events(false))
	}
	mustRun(t, ctx, dsn, exitUsage, "campaign", name, "--id", "x", "--follow-version", "latest")
}
