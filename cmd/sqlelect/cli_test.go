package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/testdb"
)

// migrated returns the DSN of a fresh database with the election table.
func migrated(t *testing.T, ctx context.Context) string {
	t.Helper()
	dsn := testdb.DSN(t)
	mustRun(t, ctx, dsn, 0, "migrate", "up")
	return dsn
}

// ---- without a database ---------------------------------------------------

// TestParse: GNU-style flags anywhere, "--" ends them, negative numbers
// are positional, and bad flags are reported as typed.
func TestParse(t *testing.T) {
	c := &cli{stdout: io.Discard, stderr: io.Discard}
	cmd := &command{name: "x"}
	for _, tc := range []struct {
		in      []string
		want    string // positional arguments, then the flags' values
		wantErr string
	}{
		{[]string{"e1", "--json"}, "[e1] json=true dsn= d=0s", ""},
		{[]string{"e1", "--dsn", "d", "x"}, "[e1 x] json=false dsn=d d=0s", ""},
		{[]string{"--dsn=d", "e1"}, "[e1] json=false dsn=d d=0s", ""},
		{[]string{"e1", "--", "-x", "--json"}, "[e1 -x --json] json=false dsn= d=0s", ""},
		{[]string{"-", "e1"}, "[- e1] json=false dsn= d=0s", ""},
		{[]string{"force", "-1"}, "[force -1] json=false dsn= d=0s", ""},
		{[]string{"--dsn", "-1", "e1"}, "[e1] json=false dsn=-1 d=0s", ""},
		{[]string{"--d", "1m30s", "e1"}, "[e1] json=false dsn= d=1m30s", ""},
		{[]string{"-foo"}, "", "unknown shorthand flag: 'f' in -foo: flags take two dashes, and an argument that starts with - goes after -- (see 'sqlelect x --help')"},
		{[]string{"--foo"}, "", "unknown flag: --foo (see 'sqlelect x --help')"},
		{[]string{"e1", "--dsn"}, "", "flag needs an argument: --dsn (see 'sqlelect x --help')"},
		{[]string{"--d", "5x"}, "", `--d "5x": want a Go duration such as 500ms, 10s or 1m30s (see 'sqlelect x --help')`},
	} {
		fs := newFlagSet(cmd)
		asJSON := fs.Bool("json", false, "")
		dsn := fs.String("dsn", "", "")
		d := fs.Duration("d", 0, "")
		pos, err := c.parse(cmd, fs, tc.in)
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("parse(%q): error %v, want %s", tc.in, err, tc.wantErr)
			} else if code, _ := describe(err); code != exitUsage {
				t.Errorf("parse(%q): exit %d", tc.in, code)
			}
			continue
		}
		got := fmt.Sprintf("%v json=%v dsn=%s d=%v", pos, *asJSON, *dsn, *d)
		if err != nil || got != tc.want {
			t.Errorf("parse(%q) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
}

func TestDSNConfig(t *testing.T) {
	co := common{dsn: "app:s3cret@tcp(db:3306)/app", table: election.DefaultTable}
	cfg, shown, err := co.dsnConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Params["time_zone"] != "'+00:00'" {
		t.Errorf("time_zone not completed: %v", cfg.Params)
	}
	if strings.Contains(shown, "s3cret") || !strings.Contains(shown, "app:***@tcp(db:3306)/app") {
		t.Errorf("shown DSN %q", shown)
	}
	co.dsn = "app@tcp(db:3306)/app?time_zone=%27Europe%2FParis%27"
	if cfg, _, _ := co.dsnConfig(); cfg.Params["time_zone"] != "'Europe/Paris'" {
		t.Errorf("time_zone of the DSN replaced: %v", cfg.Params)
	}
	co.dsn = "app@tcp(db:3306)/app?time_zone=SYSTEM"
	if cfg, _, err := co.dsnConfig(); err != nil || cfg.Params["time_zone"] != "SYSTEM" {
		t.Errorf("a bare time_zone word: %v, %v", cfg, err)
	}
	for dsn, want := range map[string]string{
		"nonsense": "invalid DSN: missing the slash separating the database name",
		"app@tcp(db:3306)/app?time_zone=Europe/Berlin": "the DSN's time_zone=Europe/Berlin is not a quoted SQL string: " +
			"quote it, as time_zone=%27Europe%2FBerlin%27",
		"app@tcp(db:3306)/app?time_zone=Europe%2FBerlin&x=y": "the DSN's time_zone=Europe%2FBerlin is not a quoted SQL string: " +
			"quote it, as time_zone=%27Europe%2FBerlin%27",
		"app@tcp(db:3306)/app?time_zone=%2B01%3A00": "the DSN's time_zone=%2B01%3A00 is not a quoted SQL string: " +
			"quote it, as time_zone=%27%2B01%3A00%27",
		"app@tcp(db:3306)/": "the DSN app@tcp(db:3306)/ names no database: add /DBNAME, or qualify --table as db.table",
	} {
		co.dsn = dsn
		_, _, err := co.dsnConfig()
		if err == nil || err.Error() != want {
			t.Errorf("DSN %s: %v, want %s", dsn, err, want)
		} else if code, _ := describe(err); code != exitUsage {
			t.Errorf("DSN %s: exit %d, want %d", dsn, code, exitUsage)
		}
	}
	co.dsn, co.table = "app@tcp(db:3306)/", "app.elections"
	if _, _, err := co.dsnConfig(); err != nil {
		t.Errorf("no database, qualified table: %v", err)
	}
}

func TestCampaignConfig(t *testing.T) {
	base := campaignFlags{common: common{table: election.DefaultTable}, backend: "table", logLevel: "warn"}
	cfg, _, err := base.config("e", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.LeaseDuration != 15*time.Second || cfg.Tuning.RenewDeadline != 10*time.Second ||
		cfg.Tuning.RenewInterval != 2*time.Second || cfg.Tuning.RetryInterval != 2*time.Second || cfg.Tuning.LockDelay != 15*time.Second {
		t.Errorf("defaults: %+v", cfg)
	}
	f := base
	f.lease = 3 * time.Second
	if cfg, _, err = f.config("e", io.Discard); err != nil {
		t.Fatal(err)
	}
	if cfg.Tuning.RenewDeadline != 2*time.Second || cfg.Tuning.RenewInterval != 400*time.Millisecond || cfg.Tuning.RetryInterval != 400*time.Millisecond {
		t.Errorf("scaled: %+v", cfg)
	}
	// One error, its first root cause, once prefixed, about what was given.
	const p = "election: invalid config: "
	for _, tc := range []struct {
		mod  func(*campaignFlags)
		want string
	}{
		{func(f *campaignFlags) { f.lease = 3 * time.Second; f.renewDeadline = 3 * time.Second },
			p + "renew deadline 3s: must be positive and less than the lease duration 3s"},
		{func(f *campaignFlags) { f.lease = time.Nanosecond }, p + "lease duration 1ns: must be from 100ms to 24h0m0s"},
		{func(f *campaignFlags) { f.lease = -time.Second }, p + "lease duration -1s: must be from 100ms to 24h0m0s"},
		{func(f *campaignFlags) { f.lease = time.Millisecond }, p + "lease duration 1ms: must be from 100ms to 24h0m0s"},
		{func(f *campaignFlags) { f.renew = 20 * time.Second },
			p + "renew interval 20s: must be positive and less than the renew deadline 10s (default: 2/3 of the lease)"},
		{func(f *campaignFlags) { f.metricsAddr = ":99999" }, `--metrics-addr ":99999": want [HOST]:PORT, a port from 0 to 65535`},
		{func(f *campaignFlags) { f.metricsAddr = "9090" }, `--metrics-addr "9090": want [HOST]:PORT, a port from 0 to 65535`},
		{func(f *campaignFlags) { f.backend = "paxos" }, `--backend "paxos": want table or lock`},
		{func(f *campaignFlags) { f.priority = 1001 }, p + "priority 1001: must be from 0 (no preference) to 1000"},
		{func(f *campaignFlags) { f.priority = -1 }, p + "priority -1: must be from 0 (no preference) to 1000"},
		{func(f *campaignFlags) { f.priority = 1; f.preferenceTenure = -time.Second }, p + "preference tenure -1s: must not be negative"},
	} {
		f := base
		tc.mod(&f)
		_, _, err := f.config("e", io.Discard)
		if err == nil || err.Error() != tc.want {
			t.Errorf("config: %v\nwant    %s", err, tc.want)
		} else if code, _ := describe(err); code != exitUsage {
			t.Errorf("%s: exit %d, want %d", tc.want, code, exitUsage)
		}
	}
	f = base
	f.metricsAddr = "127.0.0.1:0"
	if _, _, err := f.config("e", io.Discard); err != nil {
		t.Errorf("--metrics-addr 127.0.0.1:0: %v", err)
	}
}

func TestHelpAndVersion(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	r := mustRun(t, ctx, "", 0, "help")
	for _, want := range []string{"Exit codes:", "migrate", "campaign", "7  the backend"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("help lacks %q:\n%s", want, r.stdout)
		}
	}
	for _, cmd := range commands() {
		r := mustRun(t, ctx, "", 0, cmd.name, "--help")
		if !strings.Contains(r.stdout, "\nExample:\n  ") {
			t.Errorf("%s --help has no example:\n%s", cmd.name, r.stdout)
		}
	}
	mustRun(t, ctx, "", 0, "help", "run")
	if r := mustRun(t, ctx, "", 0, "version"); !strings.HasPrefix(r.stdout, "sqlelect v0.1.0-devel") {
		t.Errorf("version: %q", r.stdout)
	}
	mustRun(t, ctx, "", exitUsage)
	mustRun(t, ctx, "", exitUsage, "bogus")
	mustRun(t, ctx, "", exitUsage, "status", "--bogus")
	r = mustRun(t, ctx, "", 0, "campaign", "--help")
	for _, want := range []string{"--lease duration", "--renew-deadline duration", "--id ID", "--priority N", "--preference-tenure duration"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("campaign --help lacks %q:\n%s", want, r.stdout)
		}
	}
}

// ---- with a database ------------------------------------------------------

func TestMigrate(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 60*time.Second)
	dsn := testdb.DSN(t)
	want := func(r result, s string) {
		t.Helper()
		if !strings.Contains(r.stdout, s) {
			t.Errorf("want %q in\n%s", s, r)
		}
	}
	want(mustRun(t, ctx, dsn, 0, "migrate", "version"), "schema version 0 (latest 10)")
	r := mustRun(t, ctx, dsn, exitTable, "status")
	if !strings.Contains(r.stderr, "sqlelect migrate up") {
		t.Errorf("status on a missing table does not say to migrate:\n%s", r)
	}
	want(mustRun(t, ctx, dsn, 0, "migrate", "up"), "schema version 0 -> 10 (latest 10): applied")
	want(mustRun(t, ctx, dsn, 0, "migrate", "up"), "no change")
	want(mustRun(t, ctx, dsn, 0, "migrate", "version"), "schema version 10 (latest 10)")
	mustRun(t, ctx, dsn, 0, "status")

	r = mustRun(t, ctx, dsn, exitUsage, "migrate", "down")
	if !strings.Contains(r.stderr, "--yes") {
		t.Errorf("migrate down without a terminal does not ask for --yes:\n%s", r)
	}
	want(mustRun(t, ctx, dsn, 0, "migrate", "down", "--yes"), "schema version 10 -> 0")
	mustRun(t, ctx, dsn, exitTable, "status", "anything")
	want(mustRun(t, ctx, dsn, 0, "migrate", "force", "1"), "forced from 0 to 1")
	want(mustRun(t, ctx, dsn, 0, "migrate", "version"), "schema version 1")
	mustRun(t, ctx, dsn, 0, "migrate", "force", "-1")
	want(mustRun(t, ctx, dsn, 0, "migrate", "up"), "0 -> 10")
	mustRun(t, ctx, dsn, exitUsage, "migrate")
	mustRun(t, ctx, dsn, exitUsage, "migrate", "sideways")
	mustRun(t, ctx, dsn, exitUsage, "migrate", "force", "x")
	mustRun(t, ctx, dsn, exitUsage, "migrate", "up", "--table", "other")
}

// statusRow is one object of status --json.
type statusRow struct {
	Election string    `json:"election"`
	ID       string    `json:"id"`
	Term     uint64    `json:"term"`
	Since    time.Time `json:"since"`
	LeaseMS  int64     `json:"lease_ms"`
	LeftMS   int64     `json:"lease_left_ms"`
	Value    string    `json:"value"`
	Backend  string    `json:"backend"`
	Priority int       `json:"priority"`
	Live     bool      `json:"live"`
	State    string    `json:"state"`
	// MembersLive is left out when unknown, and for status without a name.
	MembersLive *int `json:"members_live"`
}

func statusJSON(t *testing.T, ctx context.Context, dsn string, args ...string) []statusRow {
	t.Helper()
	r := mustRun(t, ctx, dsn, 0, append([]string{"status"}, append(args, "--json")...)...)
	var rows []statusRow
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil {
		t.Fatalf("status --json: %v\n%s", err, r)
	}
	return rows
}

// closedPort is a loopback address nothing listens on: port 1, which no
// server of the tests ever takes (they listen on ports the kernel picks,
// as freePort's are, so that a port freePort just freed could be a
// server's by the time a test dialled it: a "closed port" once answered
// "access denied").
const closedPort = "127.0.0.1:1"

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestStatusWatch: status (table and JSON) and watch follow two candidates
// through a hand-over, a release and a re-election; the first candidate
// serves metrics.
func TestStatusWatch(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 60*time.Second)
	dsn := migrated(t, ctx)
	name := randomName("sw")
	metrics := freePort(t)
	c1 := start(t, "c1", dsn, append([]string{"campaign", name, "--id", "c1", "--value", "10.0.0.1:80",
		"--metrics-addr", metrics}, fastFlags...)...)
	waitFor(t, ctx, "c1 elected", func() bool { return hasEvent(c1.events(false), "elected", "") })

	r := mustRun(t, ctx, dsn, 0, "status")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 2 || !regexp.MustCompile(`^ELECTION\s+LEADER\s+TERM\s+SINCE\s+LAST-RENEWAL\s+LEASE-LEFT\s+STATE\s+VALUE\s+BACKEND\s+PRIORITY$`).MatchString(lines[0]) {
		t.Fatalf("status table:\n%s", r)
	}
	row := regexp.MustCompile(`^` + name + `\s+c1\s+\d+\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\s+\S+Z\s+\d[.\dms]*s\s+live\s+10\.0\.0\.1:80\s+table\s+0$`)
	if !row.MatchString(lines[1]) {
		t.Errorf("status row %q does not match %v", lines[1], row)
	}
	rows := statusJSON(t, ctx, dsn, name) // flag after the election
	if len(rows) != 1 || rows[0].ID != "c1" || !rows[0].Live || rows[0].State != "live" ||
		rows[0].LeaseMS != 2000 || rows[0].LeftMS <= 0 || rows[0].Value != "10.0.0.1:80" || rows[0].Backend != "table" {
		t.Errorf("status --json: %+v", rows)
	}
	if all := statusJSON(t, ctx, dsn); len(all) != 1 || all[0].Election != name {
		t.Errorf("status --json of all: %+v", all)
	}
	if got := scrape(t, ctx, metrics); !strings.Contains(got, `sqlelect_leader{election="`+name+`"} 1`) ||
		!strings.Contains(got, `sqlelect_members_live{election="`+name+`"} 1`) {
		t.Errorf("metrics: no sqlelect_leader 1 or sqlelect_members_live 1 in\n%s", got)
	}

	w := start(t, "watch", dsn, "watch", name, "--interval", "50ms")
	waitFor(t, ctx, "watch's first line", func() bool { return len(w.lines(false)) >= 1 })
	c2 := start(t, "c2", dsn, append([]string{"campaign", name, "--id", "c2"}, fastFlags...)...)
	waitFor(t, ctx, "c2 following", func() bool { return hasEvent(c2.events(false), "leader", "c1") })

	// c1 resigns: c2 wins the released row at once.
	c1.signal(syscall.SIGTERM)
	if code := c1.wait(t, ctx); code != 0 {
		t.Errorf("c1 exit %d", code)
	}
	waitFor(t, ctx, "c2 elected", func() bool { return hasEvent(c2.events(false), "elected", "") })
	waitFor(t, ctx, "watch sees c2", func() bool { return strings.Contains(last(w.lines(false)), "leader=c2") })
	// c2 resigns, nobody is left: the row stays, released.
	c2.signal(syscall.SIGINT)
	if code := c2.wait(t, ctx); code != 0 {
		t.Errorf("c2 exit %d", code)
	}
	rows = statusJSON(t, ctx, dsn, name)
	if len(rows) != 1 || rows[0].State != "released" || rows[0].Live {
		t.Errorf("status after both resigned: %+v", rows)
	}
	waitFor(t, ctx, "watch sees the release", func() bool { return strings.Contains(last(w.lines(false)), "state=released") })
	mustRun(t, ctx, dsn, 0, "reelect", name, "--yes")
	waitFor(t, ctx, "watch sees the deletion", func() bool { return strings.Contains(last(w.lines(false)), "state=deleted") })
	w.signal(syscall.SIGINT)
	if code := w.wait(t, ctx); code != 0 {
		t.Errorf("watch exit %d", code)
	}

	// One line per change: c1, maybe (none) between, c2, (none) released, deleted.
	re := regexp.MustCompile(`^(\S+) leader=(\S+) term=(\d+) state=(\S+) priority=(?:\d+|-) value=(\S+)$`)
	var leaders []string
	for _, l := range w.lines(false) {
		m := re.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("watch line %q", l)
			continue
		}
		if _, err := time.Parse(time.RFC3339Nano, m[1]); err != nil {
			t.Errorf("watch time %q: %v", m[1], err)
		}
		leaders = append(leaders, m[2]+"/"+m[4]+"/"+m[5])
	}
	got := strings.Join(leaders, " ")
	if !regexp.MustCompile(`^c1/live/10\.0\.0\.1:80( \(none\)/released/-)? c2/live/- \(none\)/released/- \(none\)/deleted/-$`).MatchString(got) {
		t.Errorf("watch saw %q", got)
	}
	checkWatchDocumented(t, w.lines(false))
}

func hasEvent(evs []jsonEvent, kind, leader string) bool {
	for _, e := range evs {
		if e.Event == kind && (leader == "" || e.Leader != nil && *e.Leader == leader) {
			return true
		}
	}
	return false
}

func last(ss []string) string {
	if len(ss) == 0 {
		return ""
	}
	return ss[len(ss)-1]
}

func scrape(t *testing.T, ctx context.Context, addr string) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestCampaignAssumeReelect: three candidates; an operator hands the
// election to a follower, then forces a re-election; from the candidates'
// JSON lines no two leaderships overlap and terms increase.
func TestCampaignAssumeReelect(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 90*time.Second)
	dsn := migrated(t, ctx)
	name := randomName("car")
	ids := []string{"c1", "c2", "c3"}
	procs := map[string]*proc{}
	for _, id := range ids {
		procs[id] = start(t, id, dsn, append([]string{"campaign", name, "--id", id, "--value", "v-" + id}, fastFlags...)...)
	}
	// leader returns who led last, by the elected lines, and its term.
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
	waitFor(t, ctx, "a first leader", func() bool { w, _ := leader(); return w != "" })
	first, firstTerm := leader()
	rows := statusJSON(t, ctx, dsn, name)
	if len(rows) != 1 || rows[0].ID != first || rows[0].Term != firstTerm || !rows[0].Live {
		t.Fatalf("status: %+v, want %s term %d", rows, first, firstTerm)
	}

	// assume: hand the election to a follower.
	target := ids[0]
	if target == first {
		target = ids[1]
	}
	r := mustRun(t, ctx, dsn, 0, "assume", name, target, "--yes")
	for _, want := range []string{
		fmt.Sprintf("assumed %s: %s (term %d, live) -> %s (term ", name, first, firstTerm, target),
		target + " takes over at its next look and leads after its lock delay (default: its lease, 2s); the old leader stands down at its next renewal",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("assume output lacks %q:\n%s", want, r)
		}
	}
	waitFor(t, ctx, target+" elected", func() bool { w, term := leader(); return w == target && term > firstTerm })
	_, assumedTerm := leader()
	waitFor(t, ctx, first+" deposed", func() bool {
		for _, e := range procs[first].events(false) {
			if e.Event == "demoted" && e.Term == firstTerm && e.Reason == "deposed" {
				return true
			}
		}
		return false
	})

	// reelect: somebody leads again, with a higher term.
	r = mustRun(t, ctx, dsn, 0, "reelect", name, "--yes")
	if !strings.Contains(r.stdout, fmt.Sprintf("re-election of %s forced: deleted the row of %s (term %d, live)", name, target, assumedTerm)) ||
		!strings.Contains(r.stdout, "the holder stands down at its next renewal; a candidate that wins a released row leads at once") {
		t.Errorf("reelect output:\n%s", r)
	}
	waitFor(t, ctx, "a leader after the re-election", func() bool { _, term := leader(); return term > assumedTerm })

	// Everyone leaves; the leader resigns on the way.
	for _, p := range procs {
		p.signal(syscall.SIGTERM)
	}
	for id, p := range procs {
		if code := p.wait(t, ctx); code != 0 {
			t.Errorf("%s exit %d", id, code)
		}
	}
	byID := map[string][]jsonEvent{}
	for id, p := range procs {
		evs := p.events(false)
		for _, e := range evs {
			if e.Election != name || e.ID != id || e.Time.IsZero() {
				t.Errorf("%s: bad event %+v", id, e)
			}
		}
		byID[id] = evs
		if n := len(p.lines(false)); n != len(evs) {
			t.Errorf("%s: %d stdout lines, %d events", id, n, len(evs))
		}
	}
	ivs := leaderships(t, byID, time.Now())
	if len(ivs) < 3 {
		t.Errorf("want at least 3 leaderships, got %v", ivs)
	}
	checkNoOverlap(t, ivs)
	if rows := statusJSON(t, ctx, dsn, name); len(rows) != 1 || rows[0].State != "released" {
		t.Errorf("after all resigned: %+v", rows)
	}
}

// childScript records the child's life in a shared file: one "start" line
// when it starts and one "stop" line when SIGTERM stops it.
const childScript = `#!/bin/sh
f="$1"
echo "start $$ $SQLELECT_ID $SQLELECT_TERM $(date +%s.%N) $SQLELECT_ELECTION" >> "$f"
trap 'echo "stop $$ $SQLELECT_ID $SQLELECT_TERM $(date +%s.%N)" >> "$f"; exit 0' TERM
while :; do sleep 0.05; done
`

type childLife struct {
	pid      int
	id       string
	term     uint64
	from, to time.Time
	stopped  bool
	election string
}

func readChildLog(t *testing.T, path string) []*childLife {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	byPID := map[int]*childLife{}
	var out []*childLife
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(l)
		if len(f) < 5 {
			continue
		}
		pid, _ := strconv.Atoi(f[1])
		term, _ := strconv.ParseUint(f[3], 10, 64)
		secs, _ := strconv.ParseFloat(f[4], 64)
		at := time.Unix(0, int64(secs*1e9))
		switch f[0] {
		case "start":
			c := &childLife{pid: pid, id: f[2], term: term, from: at}
			if len(f) > 5 {
				c.election = f[5]
			}
			byPID[pid] = c
			out = append(out, c)
		case "stop":
			if c := byPID[pid]; c != nil {
				c.to, c.stopped = at, true
			}
		}
	}
	return out
}

// TestRunNoOverlap: three `run` candidates; the child runs only on the
// leader, starts on election and stops on demotion (re-election, assume,
// resignation), and never runs on two candidates at once.
func TestRunNoOverlap(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 90*time.Second)
	dsn := migrated(t, ctx)
	name := randomName("run")
	dir := t.TempDir()
	script := filepath.Join(dir, "child.sh")
	if err := os.WriteFile(script, []byte(childScript), 0o755); err != nil {
		t.Fatal(err)
	}
	logFile := filepath.Join(dir, "children.log")
	ids := []string{"r1", "r2", "r3"}
	procs := map[string]*proc{}
	for _, id := range ids {
		// --grace as long as the lease allows (it must stay below lease -
		// renew-deadline, 800 ms): the child's trap writes its stop line
		// within it, where the default 400 ms was once missed on a loaded
		// machine (SIGKILL, no stop line).
		args := append([]string{"run", name, "--id", id, "--grace", "700ms"}, fastFlags...)
		procs[id] = start(t, id, dsn, append(args, "--", script, logFile)...)
	}
	starts := func() []*childLife { return readChildLog(t, logFile) }
	waitFor(t, ctx, "a first child", func() bool { return len(starts()) >= 1 })
	if c := starts()[0]; c.election != name {
		t.Errorf("SQLELECT_ELECTION = %q, want %q", c.election, name)
	}

	// Re-election: a child starts on a new term.
	mustRun(t, ctx, dsn, 0, "reelect", name, "--yes")
	waitFor(t, ctx, "a child after the re-election", func() bool { return len(starts()) >= 2 })

	// Assume: the child moves to the named candidate.
	cur := last2(starts()).id
	target := ids[0]
	if target == cur {
		target = ids[1]
	}
	mustRun(t, ctx, dsn, 0, "assume", name, target, "--yes")
	waitFor(t, ctx, "a child on "+target, func() bool { s := starts(); return len(s) >= 3 && s[len(s)-1].id == target })

	// The leader resigns on SIGTERM, stopping its child first; another
	// candidate takes over.
	procs[target].signal(syscall.SIGTERM)
	if code := procs[target].wait(t, ctx); code != 0 {
		t.Errorf("%s exit %d", target, code)
	}
	waitFor(t, ctx, "a child after the resignation", func() bool { s := starts(); return len(s) >= 4 && s[len(s)-1].id != target })
	for id, p := range procs {
		p.signal(syscall.SIGTERM)
		if code := p.wait(t, ctx); code != 0 {
			t.Errorf("%s exit %d", id, code)
		}
	}

	lives := starts()
	var ivs []interval
	for _, c := range lives {
		if !c.stopped {
			t.Errorf("child %d of %s (term %d) has no stop line", c.pid, c.id, c.term)
			continue
		}
		if err := syscall.Kill(c.pid, 0); err == nil {
			t.Errorf("child %d of %s still runs", c.pid, c.id)
		}
		ivs = append(ivs, interval{who: c.id, term: c.term, from: c.from, to: c.to})
	}
	checkNoOverlap(t, ivs)
	// Each child ran inside its candidate's leadership, term for term.
	for _, c := range lives {
		found := false
		for _, e := range procs[c.id].events(true) {
			if e.Event == "elected" && e.Term == c.term && !e.Time.After(c.from) {
				found = true
			}
		}
		if !found {
			t.Errorf("child %d of %s: no elected line with term %d before it started", c.pid, c.id, c.term)
		}
	}
	// The JSON lines went to stderr: stdout is the children's (silent).
	for id, p := range procs {
		if out := p.lines(false); len(out) != 0 {
			t.Errorf("%s stdout: %q", id, out)
		}
	}
}

// TestRunChildExits: when CMD exits by itself while leading, sqlelect
// resigns and exits with its status; CMD sees its term and election.
func TestRunChildExits(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 60*time.Second)
	dsn := migrated(t, ctx)
	name := randomName("exit")
	args := append([]string{"run", name, "--id", "x1"}, fastFlags...)
	r := mustRun(t, ctx, dsn, 3, append(args, "--", "sh", "-c", `echo "leading as $SQLELECT_ID of $SQLELECT_ELECTION term $SQLELECT_TERM"; exit 3`)...)
	m := regexp.MustCompile(`^leading as x1 of ` + name + ` term (\d+)\n$`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("child output:\n%s", r)
	}
	var elected, demoted bool
	for _, l := range strings.Split(r.stderr, "\n") {
		var e jsonEvent
		if json.Unmarshal([]byte(l), &e) != nil {
			continue
		}
		if e.Event == "elected" && strconv.FormatUint(e.Term, 10) == m[1] {
			elected = true
		}
		if e.Event == "demoted" && e.Reason == "resigned" {
			demoted = true
		}
	}
	if !elected || !demoted {
		t.Errorf("want elected (term %s) and demoted (resigned) on stderr:\n%s", m[1], r.stderr)
	}
	if rows := statusJSON(t, ctx, dsn, name); len(rows) != 1 || rows[0].State != "released" {
		t.Errorf("after the child exited: %+v", rows)
	}
	// A signal's death is 128+N; a command that cannot start is exit 1.
	mustRun(t, ctx, dsn, 128+int(syscall.SIGKILL), append(args, "--", "sh", "-c", "kill -KILL $$")...)
	r = mustRun(t, ctx, dsn, exitError, append(args, "--", filepath.Join(t.TempDir(), "missing"))...)
	if !strings.Contains(r.stderr, "cannot start") {
		t.Errorf("missing command:\n%s", r)
	}
}

// TestRunOutputApart: with --output, sqlelect's own lines (events, and
// logs in --log-format json, durations as strings) go to the file, and
// stderr carries the child's lines alone.
func TestRunOutputApart(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 60*time.Second)
	dsn := migrated(t, ctx)
	name := randomName("out")
	out := filepath.Join(t.TempDir(), "sqlelect.log")
	r := mustRun(t, ctx, dsn, 0, append(append([]string{"run", name, "--id", "x1", "--output", out,
		"--log-format", "json", "--log-level", "info"}, fastFlags...), "--", "sh", "-c", "echo child-err >&2")...)
	if r.stderr != "child-err\n" {
		t.Errorf("stderr with --output: %q, want the child's line alone", r.stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var events, logs int
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("--output line is not JSON: %q", l)
		}
		switch {
		case m["event"] != nil:
			events++
		case m["msg"] != nil && m["level"] != nil:
			logs++
			for k, v := range m {
				if _, isNum := v.(float64); isNum && (k == "lock_delay" || strings.HasSuffix(k, "_deadline")) {
					t.Errorf("log line gives duration %s as a number: %q", k, l)
				}
			}
		}
	}
	if events == 0 || logs == 0 {
		t.Errorf("--output has %d event and %d log lines, want both:\n%s", events, logs, b)
	}
	mustRun(t, ctx, dsn, exitUsage, "campaign", name, "--log-format", "xml")
	mustRun(t, ctx, dsn, exitUsage, "run", name, "--output", "", "--", "true")
}

// TestRunGrace: a child that ignores SIGTERM is killed after --grace.
func TestRunGrace(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 60*time.Second)
	dsn := migrated(t, ctx)
	name := randomName("grace")
	pidFile := filepath.Join(t.TempDir(), "pid")
	args := append([]string{"run", name, "--id", "g1", "--grace", "300ms"}, fastFlags...)
	p := start(t, "g1", dsn, append(args, "--", "sh", "-c", `trap "" TERM; echo $$ > `+pidFile+`; while :; do sleep 0.05; done`)...)
	var pid int
	waitFor(t, ctx, "the child", func() bool {
		b, err := os.ReadFile(pidFile)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	})
	t0 := time.Now()
	p.signal(syscall.SIGTERM)
	if code := p.wait(t, ctx); code != 0 {
		t.Errorf("exit %d", code)
	}
	if d := time.Since(t0); d < 300*time.Millisecond {
		t.Errorf("exited after %v, before the grace", d)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("child %d survived", pid)
	}
}

// TestErrors: every error path has its exit code and a clear message.
func TestErrors(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 60*time.Second)
	dsn := migrated(t, ctx)
	empty := testdb.DSN(t) // no table
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	const secret = "Sup3r-Secret-pw"
	withUser := func(user, pass, addr string) string {
		c := cfg.Clone()
		c.User, c.Passwd = user, pass
		if addr != "" {
			c.Addr = addr
		}
		return c.FormatDSN()
	}
	// A user without privileges on the test database, and one with SELECT only.
	admin := testdb.Open(t, testdb.AdminDSN(t))
	none, ro, noUpdate := randomName("none")[:13], randomName("ro")[:11], randomName("noupd")[:14]
	none, ro, noUpdate = strings.ReplaceAll(none, "-", "_"), strings.ReplaceAll(ro, "-", "_"), strings.ReplaceAll(noUpdate, "-", "_")
	// Both at % and at localhost: an anonymous ''@'localhost' would match
	// local connections before 'user'@'%'.
	hosts := []string{"%", "localhost"}
	for _, h := range hosts {
		for _, q := range []string{
			"CREATE USER '" + none + "'@'" + h + "' IDENTIFIED BY '" + secret + "'",
			"CREATE USER '" + ro + "'@'" + h + "' IDENTIFIED BY '" + secret + "'",
			"GRANT SELECT ON `" + cfg.DBName + "`.* TO '" + ro + "'@'" + h + "'",
			"CREATE USER '" + noUpdate + "'@'" + h + "' IDENTIFIED BY '" + secret + "'",
			"GRANT SELECT, INSERT ON `" + cfg.DBName + "`.* TO '" + noUpdate + "'@'" + h + "'",
		} {
			if _, err := admin.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	t.Cleanup(func() {
		for _, u := range []string{none, ro, noUpdate} {
			for _, h := range hosts {
				_, _ = admin.ExecContext(context.Background(), "DROP USER IF EXISTS '"+u+"'@'"+h+"'")
			}
		}
	})
	name := randomName("err")
	known := randomName("known") // an election with a row
	db := testdb.Open(t, dsn)
	if _, err := db.ExecContext(ctx, "INSERT INTO service_election (anchor, service_id) VALUES (?, 'x')", known); err != nil {
		t.Fatal(err)
	}
	// Refused at preflight: no candidate wrote the election's row.
	t.Cleanup(func() {
		var n int
		if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM service_election WHERE anchor = ?", name).Scan(&n); err != nil || n != 0 {
			t.Errorf("rows of %s after the refused campaigns: %d (%v), want none", name, n, err)
		}
	})
	for _, tc := range []struct {
		desc string
		dsn  string
		args []string
		code int
		msg  string
	}{
		{"no DSN", "", []string{"status"}, exitUsage, "set --dsn or SQLELECT_DSN"},
		{"bad DSN", "nonsense", []string{"status"}, exitUsage, "sqlelect status: invalid DSN: missing the slash separating the database name\n"},
		{"unquoted time zone", dsn + "&time_zone=Europe/Berlin", []string{"status"}, exitUsage, "quote it, as time_zone=%27Europe%2FBerlin%27"},
		{"closed port", withUser("root", secret, closedPort), []string{"status"}, exitConnect, "cannot connect to root:***@tcp("},
		{"wrong password", withUser(cfg.User, secret, ""), []string{"status"}, exitAccess, "access denied"},
		{"no privileges", withUser(none, secret, ""), []string{"status"}, exitAccess, "Error 1044"},
		{"read-only: status", withUser(ro, secret, ""), []string{"status"}, 0, "note: this user cannot campaign (run and campaign refuse it): election: access denied: the user lacks INSERT, UPDATE on `service_election`"},
		{"read-only: campaign", withUser(ro, secret, ""), append([]string{"campaign", name}, fastFlags...), exitAccess,
			"sqlelect campaign: election: access denied: the user lacks INSERT, UPDATE on `service_election`, which a candidate needs to take over"},
		{"read-only: run", withUser(ro, secret, ""), append([]string{"run", name}, append(fastFlags, "--", "true")...), exitAccess, "the user lacks INSERT, UPDATE"},
		{"no UPDATE: campaign", withUser(noUpdate, secret, ""), append([]string{"campaign", name}, fastFlags...), exitAccess,
			"the user lacks UPDATE on `service_election`"},
		{"no UPDATE: campaign --backend lock", withUser(noUpdate, secret, ""), append([]string{"campaign", name, "--backend", "lock"}, fastFlags...), exitAccess,
			"the user lacks UPDATE on `service_election`"},
		{"read-only: reelect", withUser(ro, secret, ""), []string{"reelect", known, "--yes"}, exitAccess, "DELETE command denied"},
		{"read-only: migrate down", withUser(ro, secret, ""), []string{"migrate", "down", "--yes", "--force"}, exitAccess, "DELETE command denied"},
		{"unknown time zone", dsn + "&time_zone=%27No%2FSuch%27", []string{"status"}, exitUsage, "time_zone"},
		{"table missing: status", empty, []string{"status"}, exitTable, "run `sqlelect migrate up`"},
		{"table missing: campaign", empty, append([]string{"campaign", name}, fastFlags...), exitTable, "run `sqlelect migrate up`"},
		{"table missing: watch", empty, []string{"watch", name}, exitTable, "sqlelect migrate up"},
		{"table missing: assume", empty, []string{"assume", name, "x", "--yes"}, exitTable, "sqlelect migrate up"},
		{"unknown election: status", dsn, []string{"status", name}, exitUnknown, "sqlelect status: election: no such election: \"" + name + "\" in service_election\n"},
		{"unknown election: watch", dsn, []string{"watch", name}, exitUnknown, "no such election"},
		{"unknown election: assume", dsn, []string{"assume", name, "x", "--yes"}, exitUnknown, "no such election"},
		{"unknown election: reelect", dsn, []string{"reelect", name, "--yes"}, exitUnknown, "no such election"},
		{"name starting with -", dsn, []string{"status", "-foo"}, exitUsage, "unknown shorthand flag: 'f' in -foo"},
		{"name starting with -, after --", dsn, []string{"status", "--", "-foo"}, exitUnknown, "no such election"},
		{"invalid name: status", dsn, []string{"status", "bad name"}, exitUsage, "election name"},
		{"invalid name: campaign", dsn, []string{"campaign", "bad name"}, exitUsage, "election name"},
		{"invalid ID", dsn, []string{"assume", name, "bad\tid", "--yes"}, exitUsage, "candidate id"},
		{"invalid table", dsn, []string{"status", "--table", "no-such;table"}, exitUsage, "table"},
		// Config and migrate agree: a name whose derived names do not fit.
		{"table too long: campaign", dsn, []string{"campaign", name, "--table", strings.Repeat("t", 56)}, exitUsage, "56 characters, at most 55"},
		{"table too long: migrate", dsn, []string{"migrate", "up", "--table", strings.Repeat("t", 56)}, exitUsage, "56 characters, at most 55"},
		{"another table: migrate", dsn, []string{"migrate", "up", "--table", "jobs"}, exitUsage, "copy package schema's DDL(table)"},
		{"invalid duration", dsn, []string{"campaign", name, "--lease", "5x"}, exitUsage, "Go duration"},
		{"renew deadline >= lease", dsn, []string{"campaign", name, "--lease", "1s", "--renew-deadline", "1s"}, exitUsage,
			"sqlelect campaign: election: invalid config: renew deadline 1s: must be positive and less than the lease duration 1s\n"},
		{"lease below the floor", dsn, []string{"campaign", name, "--lease", "1ms"}, exitUsage,
			"sqlelect campaign: election: invalid config: lease duration 1ms: must be from 100ms to 24h0m0s\n"},
		{"negative lease", dsn, []string{"run", name, "--lease", "-1s", "--", "true"}, exitUsage,
			"sqlelect run: election: invalid config: lease duration -1s: must be from 100ms to 24h0m0s\n"},
		{"metrics port", dsn, []string{"campaign", name, "--metrics-addr", ":99999"}, exitUsage, "--metrics-addr"},
		{"invalid backend", dsn, []string{"campaign", name, "--backend", "paxos"}, exitUsage, "--backend"},
		{"invalid log level", dsn, []string{"campaign", name, "--log-level", "loud"}, exitUsage, "--log-level"},
		{"grace too long", dsn, append([]string{"run", name, "--grace", "800ms"}, append(fastFlags, "--", "true")...), exitUsage, "--grace"},
		{"run without --", dsn, []string{"run", name, "true"}, exitUsage, "missing the command"},
		{"watch interval", dsn, []string{"watch", name, "--interval", "0s"}, exitUsage, "--interval 0s: must be at least 10ms"},
		{"watch interval below the floor", dsn, []string{"watch", name, "--interval", "1ms"}, exitUsage, "--interval 1ms: must be at least 10ms"},
		{"no --yes: reelect", dsn, []string{"reelect", known}, exitUsage, "use --yes"},
		{"no --yes: assume", dsn, []string{"assume", known, "y"}, exitUsage, "use --yes"},
		{"too many args", dsn, []string{"status", "a", "b"}, exitUsage, "too many"},
		// Papercuts found by trying sqlelect as a new user would (issue 23).
		{"empty name: status", dsn, []string{"status", ""}, exitUsage, "election name \"\""},
		{"empty name: watch", dsn, []string{"watch", ""}, exitUsage, "election name \"\""},
		{"URL as DSN", "mysql://root:" + secret + "@tcp(127.0.0.1:3306)/db", []string{"status"}, exitUsage,
			"the DSN is a URL (mysql://…); sqlelect takes a go-sql-driver/mysql DSN, user:pass@tcp(host:3306)/db?param=value: here root:***@tcp(127.0.0.1:3306)/db"},
		{"unknown DSN parameter", dsn + "&no_such_var=1", []string{"status"}, exitUsage, "no_such_var"},
		{"DSN without tcp()", "root@127.0.0.1:3306/db", []string{"status"}, exitUsage, "must be written as tcp(host:port)"},
		{"DSN timeout", dsn + "&timeout=abc", []string{"status"}, exitUsage, "the DSN's timeout=abc is not a duration"},
		{"--lease 0", dsn, []string{"campaign", name, "--lease", "0"}, exitUsage, "--lease is empty or zero"},
		{"--retry 0", dsn, []string{"campaign", name, "--retry", "0s"}, exitUsage, "--retry is empty or zero"},
		{"--id ''", dsn, []string{"campaign", name, "--id", ""}, exitUsage, "--id is empty or zero"},
		{"--health-cmd ''", dsn, []string{"run", name, "--health-cmd", "", "--", "true"}, exitUsage, "--health-cmd is empty or zero"},
		{"--renew-interval as Config names it", dsn, []string{"campaign", name, "--lease", "2s", "--renew-deadline", "1s", "--renew-interval", "1s"}, exitUsage,
			"renew interval 1s"},
		{"migrate force past the latest", dsn, []string{"migrate", "force", "99", "--yes"}, exitUsage, "knows versions up to"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t, 30*time.Second)
			r := sqlelect(t, ctx, tc.dsn, tc.args...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.msg) ||
				strings.Contains(r.stderr, "invalid config: election: invalid config") || strings.Contains(r.stderr, "invalid DSN: invalid DSN") {
				t.Errorf("want exit %d and %q on stderr, got %s", tc.code, tc.msg, r)
			}
			if strings.Contains(r.stdout+r.stderr, secret) {
				t.Errorf("the password appears in the output:\n%s", r)
			}
		})
	}
}

// TestBackendLock: the lock backend either works (then it campaigns and
// resigns like the table backend) or fails at once with a clear message.
func TestBackendLock(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 60*time.Second)
	dsn := migrated(t, ctx)
	name := randomName("lock")
	p := start(t, "lock", dsn, append([]string{"campaign", name, "--backend", "lock", "--id", "l1"}, fastFlags...)...)
	waitFor(t, ctx, "lock backend: elected or failed", func() bool { return p.exited() || hasEvent(p.events(false), "elected", "") })
	if p.exited() {
		code := p.wait(t, ctx)
		stderr := strings.Join(p.lines(true), "\n")
		if code == 0 || !strings.Contains(stderr, "lock") {
			t.Errorf("lock backend refused with exit %d and no clear message:\n%s", code, stderr)
		}
		t.Logf("lock backend refused (exit %d): %s", code, stderr)
		return
	}
	if rows := statusJSON(t, ctx, dsn, name); len(rows) != 1 || rows[0].ID != "l1" || rows[0].Backend != "lock" || !rows[0].Live {
		t.Errorf("status of a lock election: %+v", rows)
	}
	p.signal(syscall.SIGTERM)
	if code := p.wait(t, ctx); code != 0 {
		t.Errorf("exit %d", code)
	}
	if !hasEvent(p.events(false), "demoted", "") {
		t.Errorf("no demoted line")
	}
}

func last2(cs []*childLife) *childLife { return cs[len(cs)-1] }

// TestRunStopsPromptly: a child whose own children die with it (orphans
// init reaps late) is stopped without waiting out the grace.
func TestRunStopsPromptly(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 60*time.Second)
	dsn := migrated(t, ctx)
	name := randomName("prompt")
	const grace = 700 * time.Millisecond // below lease - renew-deadline of fastFlags
	args := append([]string{"run", name, "--id", "p1", "--grace", grace.String(), "--log-level", "info"}, fastFlags...)
	p := start(t, "p1", dsn, append(args, "--", "sh", "-c", "echo started; sleep 1000")...)
	waitFor(t, ctx, "the child", func() bool { return len(p.lines(false)) > 0 })
	t0 := time.Now()
	p.signal(syscall.SIGTERM)
	if code := p.wait(t, ctx); code != 0 {
		t.Errorf("exit %d", code)
	}
	// The stop itself, from run's log: the whole exit also resigns and ends
	// a -race binary, which on a loaded machine can take the grace's time
	// without the grace being waited out.
	from, to := logTime(t, p, "leadership ended: stopping the command"), logTime(t, p, "command stopped")
	if d := to.Sub(from); d >= grace {
		t.Errorf("stopping the command took %v: the grace %v was waited out", d, grace)
	}
	t.Logf("the command stopped %v after run began stopping it; run exited %v after the SIGTERM (grace %v)",
		to.Sub(from), time.Since(t0).Round(time.Millisecond), grace)
}

// logTime returns the time of the first line of p's log (stderr) with
// message msg.
func logTime(t *testing.T, p *proc, msg string) time.Time {
	t.Helper()
	for _, l := range p.lines(true) {
		if !strings.Contains(l, ` msg="`+msg+`"`) {
			continue
		}
		if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(f[0], "time=") {
			if at, err := time.Parse(time.RFC3339Nano, strings.TrimPrefix(f[0], "time=")); err == nil {
				return at
			}
		}
		t.Fatalf("log line without a time: %s", l)
	}
	t.Fatalf("no %q in the log:\n%s", msg, strings.Join(p.lines(true), "\n"))
	return time.Time{}
}

// TestCampaignBrokenPipe: when nobody reads the events any more, campaign
// resigns and exits 1 instead of holding the election.
func TestCampaignBrokenPipe(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 60*time.Second)
	dsn := migrated(t, ctx)
	name := randomName("pipe")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close() // the reader is gone before the first line
	cmd := exec.CommandContext(ctx, bin, append([]string{"campaign", name, "--id", "p1"}, fastFlags...)...)
	cmd.Env = env(dsn)
	cmd.Stdout = w
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err = cmd.Run()
	w.Close()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitError {
		t.Fatalf("want exit %d, got %v\n%s", exitError, err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "cannot write events to stdout; resigned") {
		t.Errorf("stderr:\n%s", stderr.String())
	}
	// It gave the row up: released, or, as here, where it resigned while
	// still waiting out the lock delay of its new row, handed on with the
	// rest of that delay (at most the 2 s lease), after which it expires.
	rows := statusJSON(t, ctx, dsn, name)
	if len(rows) != 1 || rows[0].ID != "p1" || rows[0].State == "live" && rows[0].LeftMS > 2000 {
		t.Fatalf("after the reader left: %+v", rows)
	}
	waitFor(t, ctx, "the row given up", func() bool {
		rows := statusJSON(t, ctx, dsn, name)
		return len(rows) == 1 && rows[0].State != "live"
	})
}

// TestInterruptedWhileConnecting: a signal before anything was done exits
// 128+N, as a shell reports a process the signal killed.
func TestInterruptedWhileConnecting(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	// A server that accepts connections and never answers: the handshake
	// waits (up to the ping timeout).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	accepted := make(chan struct{}, 1)
	done := make(chan struct{})
	t.Cleanup(func() {
		ln.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		defer close(done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
			select {
			case accepted <- struct{}{}:
			default:
			}
		}
	}()
	dsn := "root@tcp(" + ln.Addr().String() + ")/app"
	for _, tc := range []struct {
		sig  syscall.Signal
		args []string
	}{
		{syscall.SIGINT, []string{"campaign", "e"}},
		{syscall.SIGTERM, []string{"campaign", "e"}},
		{syscall.SIGINT, []string{"run", "e", "--", "true"}},
		{syscall.SIGINT, []string{"watch", "e"}},
	} {
		p := start(t, tc.args[0], dsn, tc.args...)
		// It connects after it set up its signals: signal it then.
		select {
		case <-accepted:
		case <-ctx.Done():
			t.Fatalf("%v: no connection", tc.args)
		}
		p.signal(tc.sig)
		if code := p.wait(t, ctx); code != 128+int(tc.sig) {
			t.Errorf("%v, %s: exit %d, want %d", tc.args, tc.sig, code, 128+int(tc.sig))
		}
	}
}
