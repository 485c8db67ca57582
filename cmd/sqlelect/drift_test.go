package main

// Tests that would have caught the docs drifting from what the binary does
// (issue 34): each compares a document with a run.

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/internal/testdb"
)

// startedLine is the first line of examples/shell/leader-only.sh.
var startedLine = regexp.MustCompile(`(?m)^([0-9]+\.[0-9]+) leader-only\.sh\[[0-9]+\] started: leading \S+ as \S+ with term ([0-9]+)$`)

// startDelay is the time from the term's start (its value, in microseconds
// since the epoch, when the candidate inserted the row) to the script's
// start, from its started line.
func startDelay(t *testing.T, m []string) time.Duration {
	t.Helper()
	at, err1 := strconv.ParseFloat(m[1], 64)
	term, err2 := strconv.ParseInt(m[2], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("started line %q: %v %v", m[0], err1, err2)
	}
	return time.Duration((at - float64(term)/1e6) * float64(time.Second))
}

// TestShellExampleFirstElection runs examples/shell as its README says and
// checks the README against it: the first election on a table migrated
// less than a lease before its take waits out one lease (the lock delay of
// a new row) before the script starts, as the README says and as its
// sample output shows; on one migrated earlier it leads at once (the
// floor's marker, migration 8: on a loaded machine the run may start a
// lease after the migration).
func TestShellExampleFirstElection(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 60*time.Second)
	dsn := migrated(t, ctx)
	script, err := filepath.Abs(filepath.Join("..", "..", "examples", "shell", "leader-only.sh"))
	if err != nil {
		t.Fatal(err)
	}
	p := start(t, "node-1", dsn, "run", "leader-only", "--id", "node-1", "--lease", "3s", "--", script)
	var m []string
	waitFor(t, ctx, "the script started", func() bool {
		m = startedLine.FindStringSubmatch(strings.Join(p.lines(false), "\n"))
		return m != nil
	})
	got := startDelay(t, m)
	const lease = 3 * time.Second
	var marked int64 // the marker's marked_at, microseconds like the term
	if err := testdb.Open(t, dsn).QueryRowContext(ctx, "SELECT marked_at FROM service_election_floor WHERE anchor = ''").Scan(&marked); err != nil {
		t.Fatalf("the floor's marker: %v", err)
	}
	term, _ := strconv.ParseInt(m[2], 10, 64)
	if age := time.Duration(term-marked) * time.Microsecond; age >= lease {
		if got > time.Second {
			t.Errorf("the first election, %v after the migration, started the script %v after its term began, want at once", age, got)
		}
	} else if got < lease || got > lease+time.Second {
		t.Errorf("the first election, %v after the migration, started the script %v after its term began, want about one lease (%v)", age, got, lease)
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "examples", "shell", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(strings.Fields(string(readme)), " "), "a first election within a lease of the table's creation waits out one lease") {
		t.Errorf("examples/shell/README.md no longer says that a first election within a lease of the table's creation waits out one lease")
	}
	doc := startedLine.FindStringSubmatch(string(readme))
	if doc == nil {
		t.Fatal("examples/shell/README.md shows no started line")
	}
	if shown := startDelay(t, doc); shown < lease || shown > lease+time.Second {
		t.Errorf("examples/shell/README.md's sample starts the script %v after the term began; a run starts it after %v", shown, got)
	}
	t.Logf("run:\n%s", strings.Join(p.lines(false), "\n"))
}

// TestSystemdUnit checks examples/systemd/sqlelect-run.service against
// the CLI: its `sqlelect run` flags parse and pass run's checks (it gets
// as far as connecting), Restart= restarts, the stop timeout outlasts
// --grace plus a resign, and the DSN comes from a file, which the README
// has readable by root alone. (make test runs systemd-analyze verify on it.)
func TestSystemdUnit(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	dir := filepath.Join("..", "..", "examples", "systemd")
	b, err := os.ReadFile(filepath.Join(dir, "sqlelect-run.service"))
	if err != nil {
		t.Fatal(err)
	}
	set := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && !strings.HasPrefix(l, "#") {
			set[k] = v
		}
	}
	argv := strings.Fields(strings.ReplaceAll(set["ExecStart"], "%H", "host-1"))
	if len(argv) < 3 || filepath.Base(argv[0]) != "sqlelect" || argv[1] != "run" {
		t.Fatalf("ExecStart=%s: want sqlelect run …", set["ExecStart"])
	}
	// A closed port: the flags pass every check, then the connection fails
	// (CMD, /usr/local/bin/myjob, replaced by one that exists).
	args := append([]string{argv[1], argv[2], "--dsn", "u:p@tcp(" + closedPort + ")/app"}, argv[3:len(argv)-1]...)
	args = append(args, "/bin/true")
	if r := mustRun(t, ctx, "", exitConnect, args...); !strings.Contains(r.stderr, "cannot connect") {
		t.Errorf("ExecStart's flags: %s", r)
	}
	var grace time.Duration
	for i, a := range argv {
		if a == "--grace" && i+1 < len(argv) {
			grace, _ = time.ParseDuration(argv[i+1])
		}
	}
	stop, err := time.ParseDuration(set["TimeoutStopSec"])
	if grace == 0 || err != nil || stop <= grace+queryTimeout {
		t.Errorf("TimeoutStopSec=%s (%v), --grace %v: the timeout must outlast the grace and a resign (%v)", set["TimeoutStopSec"], err, grace, queryTimeout)
	}
	if r := set["Restart"]; r == "" || r == "no" {
		t.Errorf("Restart=%q: the unit must restart sqlelect run", r)
	}
	env := set["EnvironmentFile"]
	readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if env == "" || !strings.Contains(string(readme), "install -m 0600 -o root -g root /dev/null "+env) {
		t.Errorf("EnvironmentFile=%s: the README must create it readable by root alone", env)
	}
}

// watchShape reduces a line of watch to what does not change from run to
// run: the leader or (none), the term or 0, the state, whether a priority
// and a value are shown.
func watchShape(line string) string {
	m := regexp.MustCompile(`^\S+ leader=(\S+) term=(\d+) state=(\S+) priority=(\S+) value=(\S+)$`).FindStringSubmatch(line)
	if m == nil {
		return ""
	}
	shape := func(s, none string) string {
		if s == none {
			return none
		}
		return "X"
	}
	return strings.Join([]string{shape(m[1], "(none)"), shape(m[2], "0"), m[3], shape(m[4], "-"), shape(m[5], "-")}, " ")
}

// checkWatchDocumented fails unless docs/cli.md's transcript shows a line
// of each shape among lines, which watch printed: after a reelect, for one,
// it prints (none), term 0 and state deleted.
func checkWatchDocumented(t *testing.T, lines []string) {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "cli.md"))
	if err != nil {
		t.Fatal(err)
	}
	shown := map[string]bool{}
	for _, l := range strings.Split(string(doc), "\n") {
		shown[watchShape(l)] = true
	}
	for _, l := range lines {
		if s := watchShape(l); s != "" && !shown[s] {
			t.Errorf("watch printed %q; docs/cli.md shows no line like it (%s)", l, s)
		}
	}
}
