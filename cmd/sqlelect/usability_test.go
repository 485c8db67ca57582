package main

// Tests of what a new user tripped on (issue 34): empty --dsn, errors of
// --json commands, shell completion, the driver's log lines.

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/testdb"
)

// TestEmptyDSNFlag: --dsn ” is a usage error, not a fall back to
// $SQLELECT_DSN: reelect must not delete the row of the DSN in the
// environment.
func TestEmptyDSNFlag(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 60*time.Second)
	dsn := migrated(t, ctx)
	name := randomName("emptydsn")
	db := testdb.Open(t, dsn)
	if _, err := db.ExecContext(ctx, "INSERT INTO service_election (anchor, service_id) VALUES (?, 'x')", name); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"reelect", name, "--dsn", "", "--yes"},
		{"reelect", name, "--dsn=", "--yes"},
		{"status", "--dsn", ""},
		{"campaign", name, "--dsn", ""},
		{"migrate", "down", "--dsn", "", "--yes"},
	} {
		r := mustRun(t, ctx, dsn, exitUsage, args...)
		if !strings.Contains(r.stderr, "--dsn is empty") {
			t.Errorf("sqlelect %q: %s", args, r)
		}
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM service_election WHERE anchor = ?", name).Scan(&n); err != nil || n != 1 {
		t.Errorf("rows of %s: %d (%v), want the one inserted", name, n, err)
	}
}

// TestJSONErrors: a command given --json reports its error on stdout as a
// JSON object too, whatever failed (flags, DSN, the database).
func TestJSONErrors(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 60*time.Second)
	dsn := migrated(t, ctx)
	for _, tc := range []struct {
		dsn  string
		args []string
		code int
		msg  string
	}{
		{"", []string{"status", "--json"}, exitUsage, "no database: set --dsn"},
		{dsn, []string{"status", "--json", "--bogus"}, exitUsage, "unknown flag: --bogus"},
		{dsn, []string{"status", "no-such", "--json"}, exitUnknown, "no such election"},
		{dsn, []string{"watch", "no-such", "--json=true"}, exitUnknown, "no such election"},
		{dsn, []string{"doctor", "--json", "--backend", "paxos"}, exitUsage, "--backend \"paxos\""},
		{testdb.DSN(t), []string{"status", "--json"}, exitTable, "sqlelect migrate up"},
	} {
		r := mustRun(t, ctx, tc.dsn, tc.code, tc.args...)
		var got jsonError
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || got.ExitCode != tc.code ||
			got.Command != tc.args[0] || !strings.Contains(got.Error, tc.msg) {
			t.Errorf("sqlelect %q: stdout is not the error as JSON (%v): %s", tc.args, err, r)
		}
		if !strings.Contains(r.stderr, tc.msg) {
			t.Errorf("sqlelect %q: the message left stderr: %s", tc.args, r)
		}
	}
	// Without --json (or after --), stdout stays empty.
	if r := mustRun(t, ctx, dsn, exitUnknown, "status", "no-such"); r.stdout != "" {
		t.Errorf("status without --json printed on stdout: %s", r)
	}
}

// TestWatchJSONRetryError: watch --json reports the errors it retries as
// JSON lines on stdout too.
func TestWatchJSONRetryError(t *testing.T) {
	var out, errs bytes.Buffer
	w := watcher{out: &out, errs: &errs, name: "e", enc: json.NewEncoder(&out)}
	if err := w.see(election.Record{}, errors.New("connection refused")); err != nil {
		t.Fatal(err)
	}
	var ev event
	if err := json.Unmarshal(out.Bytes(), &ev); err != nil || ev.Event != "error" || ev.Election != "e" || ev.Err != "connection refused" {
		t.Errorf("stdout %q (%v)", out.String(), err)
	}
	if !strings.Contains(errs.String(), "error (retrying): connection refused") {
		t.Errorf("stderr %q", errs.String())
	}
}

// TestCompletionBash loads `sqlelect completion bash` in bash and
// completes commands, every flag of every command, and the fixed first
// arguments; zsh's and fish's scripts are checked for syntax when those
// shells are installed.
func TestCompletionBash(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "sqlelect.bash")
	if err := os.WriteFile(script, []byte(mustRun(t, ctx, "", 0, "completion", "bash").stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	complete := func(words ...string) []string {
		t.Helper()
		quoted := make([]string, len(words))
		for i, w := range words {
			quoted[i] = shellQuote(w)
		}
		src := "source " + shellQuote(script) + "\ncomplete -p sqlelect >/dev/null || exit 9\n" +
			"COMP_WORDS=(" + strings.Join(quoted, " ") + "); COMP_CWORD=" + strconv.Itoa(len(words)-1) +
			"\n_sqlelect\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n"
		out, err := exec.CommandContext(ctx, bash, "--norc", "--noprofile", "-c", src).CombinedOutput()
		if err != nil {
			t.Fatalf("bash: %v\n%s", err, out)
		}
		return strings.Fields(string(out))
	}
	has := func(got []string, want string) bool {
		for _, g := range got {
			if g == want {
				return true
			}
		}
		return false
	}
	if got := complete("sqlelect", "sta"); strings.Join(got, " ") != "status" {
		t.Errorf("sqlelect sta<TAB>: %q", got)
	}
	if got := complete("sqlelect", "c"); strings.Join(got, " ") != "campaign completion" {
		t.Errorf("sqlelect c<TAB>: %q", got)
	}
	if got := complete("sqlelect", "migrate", "ad"); strings.Join(got, " ") != "adopt adopt-end" {
		t.Errorf("sqlelect migrate ad<TAB>: %q", got)
	}
	if got := complete("sqlelect", "completion", ""); strings.Join(got, " ") != "bash zsh fish" {
		t.Errorf("sqlelect completion <TAB>: %q", got)
	}
	if got := complete("sqlelect", "run", "x", "--", "--j"); len(got) != 0 {
		t.Errorf("after --, run's command gets the shell's default completion, not flags: %q", got)
	}
	c := &cli{stdout: io.Discard, stderr: io.Discard, commands: commands()}
	for _, comp := range c.completions() {
		if !has(complete("sqlelect", ""), comp.name) {
			t.Errorf("command %s not completed", comp.name)
		}
		if len(comp.flags) == 0 && comp.name != "help" && comp.name != "completion" && comp.name != "version" {
			t.Errorf("command %s: no flags to complete (its flag set was not built)", comp.name)
		}
		got := complete("sqlelect", comp.name, "--")
		for _, f := range comp.flags {
			if !has(got, "--"+f.Name) {
				t.Errorf("sqlelect %s --<TAB>: %q lacks --%s", comp.name, got, f.Name)
			}
		}
	}
	if got := complete("sqlelect", "status", "--"); !has(got, "--json") || !has(got, "--dsn") {
		t.Errorf("sqlelect status --<TAB>: %q", got)
	}
	for shell, check := range map[string][]string{"zsh": {"zsh", "-n"}, "fish": {"fish", "--no-execute"}} {
		path, err := exec.LookPath(check[0])
		if err != nil {
			t.Logf("%s not installed: its script is not checked", shell)
			continue
		}
		f := filepath.Join(dir, "sqlelect."+shell)
		if err := os.WriteFile(f, []byte(mustRun(t, ctx, "", 0, "completion", shell).stdout), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.CommandContext(ctx, path, append(check[1:], f)...).CombinedOutput(); err != nil {
			t.Errorf("%s: %v\n%s", check, err, out)
		}
	}
	mustRun(t, ctx, "", exitUsage, "completion", "tcsh")
	mustRun(t, ctx, "", exitUsage, "completion")
}

// TestDriverLogLines: once a command has its logger, the driver's own
// lines (its default logger, which configs parsed from a DSN start with)
// come out through it, in its format, not as plain "[mysql] …" text.
func TestDriverLogLines(t *testing.T) {
	t.Cleanup(func() { _ = mysql.SetLogger(log.New(os.Stderr, "[mysql] ", log.Ldate|log.Ltime)) })
	var buf bytes.Buffer
	useDriverLogger(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	mysql.NewConfig().Logger.Print("closing bad idle connection: ", io.EOF)
	var line struct{ Level, Msg string }
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil || line.Msg != "mysql driver: closing bad idle connection: EOF" {
		t.Errorf("driver line %q (%v), want a JSON log line", buf.String(), err)
	}
}

// TestHints: each hint names the real cause: a wrong password is not a
// missing privilege, and an unknown database (in the DSN or in --table)
// is not a missing table.
func TestHints(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 60*time.Second)
	dsn := migrated(t, ctx)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	wrongPass := cfg.Clone()
	wrongPass.Passwd = "not-the-password"
	noDB := cfg.Clone()
	noDB.DBName = "sqlelect_no_such_db"
	for _, tc := range []struct {
		desc      string
		dsn       string
		args      []string
		code      int
		want, not string
	}{
		{"wrong password", wrongPass.FormatDSN(), []string{"status"}, exitAccess,
			"the server refused the user or its password", "the user needs SELECT"},
		{"unknown database in the DSN", noDB.FormatDSN(), []string{"status"}, exitConnect,
			"the database does not exist: create it", "migrate up"},
		{"unknown database in --table", dsn, []string{"status", "--table", "sqlelect_no_such_db.service_election"}, exitConnect,
			"--table sqlelect_no_such_db.service_election: election: unknown database", "migrate up"},
		{"unknown database in --table: campaign", dsn, append([]string{"campaign", "x", "--table", "sqlelect_no_such_db.t"}, fastFlags...),
			exitConnect, "the database does not exist", "migrate up"},
		{"a database that exists, without the table", dsn, []string{"status", "--table", "mysql.service_election"}, exitTable, "migrate up", "does not exist: create it"},
	} {
		r := mustRun(t, ctx, tc.dsn, tc.code, tc.args...)
		if !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, tc.not) {
			t.Errorf("%s: want %q and not %q: %s", tc.desc, tc.want, tc.not, r)
		}
	}
}

// TestMigrateDownLiveLeader: migrate down refuses while an election in the
// table has a live leader, naming it, and drops the table with --force, or
// once the leader has resigned.
func TestMigrateDownLiveLeader(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 60*time.Second)
	dsn := migrated(t, ctx)
	name := randomName("down")
	c1 := start(t, "c1", dsn, append([]string{"campaign", name, "--id", "c1"}, fastFlags...)...)
	waitFor(t, ctx, "c1 elected", func() bool { return hasEvent(c1.events(false), "elected", "") })
	r := mustRun(t, ctx, dsn, exitError, "migrate", "down", "--yes")
	if want := "election \"" + name + "\" is led by c1 (term "; !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "--force") {
		t.Errorf("want %q and --force in: %s", want, r)
	}
	mustRun(t, ctx, dsn, 0, "status", name) // the table is still there
	c1.signal(syscall.SIGTERM)              // resigns: the row is released, not live
	if code := c1.wait(t, ctx); code != 0 {
		t.Fatalf("c1 exit %d", code)
	}
	mustRun(t, ctx, dsn, 0, "migrate", "down", "--yes")
	mustRun(t, ctx, dsn, 0, "migrate", "up")

	c2 := start(t, "c2", dsn, append([]string{"campaign", name, "--id", "c2"}, fastFlags...)...)
	waitFor(t, ctx, "c2 elected", func() bool { return hasEvent(c2.events(false), "elected", "") })
	mustRun(t, ctx, dsn, exitError, "migrate", "down", "--yes")
	if r := mustRun(t, ctx, dsn, 0, "migrate", "down", "--yes", "--force"); !strings.Contains(r.stdout, "dropped") {
		t.Errorf("migrate down --force: %s", r)
	}
}
