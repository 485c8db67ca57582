package main

// Tests of ui, the read-only web page: rendered by a headless Chromium
// (Debian's chromium), served with a user that may only SELECT.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlelect/sqlelect/internal/testdb"
)

// chromium returns the path of a Chromium to drive, or skips t (fails it
// under CI=true, where make deps installs one).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "/usr/bin/chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const msg = "chromium not installed (Debian: apt-get install -y chromium, or make deps as root): the page is not checked in a browser"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// browse runs a headless Chromium on url with args (--dump-dom,
// --screenshot=FILE) and returns its stdout.
func browse(t *testing.T, ctx context.Context, browser, url string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--user-data-dir=" + t.TempDir()}
	cmd := exec.CommandContext(ctx, browser, append(append(base, args...), url)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %q: %v\n%s", args, err, stderr.String())
	}
	return stdout.String()
}

// selectOnly returns the DSN of a new user that may only SELECT in the
// database of dsn.
func selectOnly(t *testing.T, ctx context.Context, dsn string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	admin := testdb.Open(t, testdb.AdminDSN(t))
	user := strings.ReplaceAll(randomName("ui")[:11], "-", "_")
	const pass = "Read-0nly-pw"
	for _, h := range []string{"%", "localhost"} { // localhost: an anonymous ''@'localhost' would match first
		for _, q := range []string{
			"CREATE USER '" + user + "'@'" + h + "' IDENTIFIED BY '" + pass + "'",
			"GRANT SELECT ON `" + cfg.DBName + "`.* TO '" + user + "'@'" + h + "'",
		} {
			if _, err := admin.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		t.Cleanup(func() { _, _ = admin.ExecContext(context.Background(), "DROP USER IF EXISTS '"+user+"'@'"+h+"'") })
	}
	cfg.User, cfg.Passwd = user, pass
	return cfg.FormatDSN()
}

// serveUI starts ui with args and returns it and the URL it serves.
func serveUI(t *testing.T, ctx context.Context, dsn string, args ...string) (*proc, string) {
	t.Helper()
	p := start(t, "ui", dsn, append([]string{"ui"}, args...)...)
	var url string
	waitFor(t, ctx, "ui serving", func() bool {
		for _, l := range p.lines(false) {
			url, _ = strings.CutPrefix(l, "serving ")
		}
		return url != "" || p.exited()
	})
	if p.exited() {
		t.Fatalf("ui exited: %s", strings.Join(p.lines(true), "\n"))
	}
	return p, url
}

// electedTerm returns the term of p's latest elected event, 0 if none.
func electedTerm(p *proc) uint64 {
	var term uint64
	for _, e := range p.events(false) {
		if e.Event == "elected" {
			term = e.Term
		}
	}
	return term
}

// TestUI: two candidates and a transfer, so the history has two terms; ui,
// served with a SELECT-only user, shows the leader, its term, both members
// and both terms to a headless Chromium, which takes a screenshot
// (SQLELECT_UI_SCREENSHOT=docs/ui.png keeps it); ui exits 0 on SIGTERM.
func TestUI(t *testing.T) {
	t.Parallel()
	browser := chromium(t)
	ctx := testCtx(t, 180*time.Second)
	dsn := migrated(t, ctx)
	const name = "web"
	c1 := start(t, "web-1", dsn, append([]string{"campaign", name, "--id", "web-1", "--app-version", "1.4.2"}, fastFlags...)...)
	waitFor(t, ctx, "web-1 elected", func() bool { return electedTerm(c1) != 0 })
	c2 := start(t, "web-2", dsn, append([]string{"campaign", name, "--id", "web-2", "--app-version", "1.5.0"}, fastFlags...)...)
	waitFor(t, ctx, "web-2 following", func() bool { return hasEvent(c2.events(false), "leader", "web-1") })
	mustRun(t, ctx, dsn, 0, "transfer", name, "web-2", "--yes")
	waitFor(t, ctx, "web-2 elected", func() bool { return electedTerm(c2) != 0 })
	first, term := electedTerm(c1), electedTerm(c2)

	ui, url := serveUI(t, ctx, selectOnly(t, ctx, dsn), "--listen", "127.0.0.1:0")
	if strings.Contains(strings.Join(ui.lines(true), "\n"), "warning") {
		t.Errorf("ui on loopback warned: %q", ui.lines(true))
	}
	dom := browse(t, ctx, browser, url, "--dump-dom")
	for _, want := range []string{
		`http-equiv="refresh"`,
		fmt.Sprintf(`data-leader="web-2" data-term="%d"`, term),
		`data-member="web-1" data-state="live"`, `data-member="web-2" data-state="live"`, "1.5.0",
		fmt.Sprintf(`data-holder="web-1" data-term="%d"`, first), fmt.Sprintf(`data-holder="web-2" data-term="%d"`, term),
		"transferred",
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if strings.Contains(dom, `class="note`) || strings.Contains(dom, "<script") {
		t.Errorf("the page has a note or a script")
	}
	if t.Failed() {
		t.Fatalf("DOM:\n%s", dom)
	}
	shot := os.Getenv("SQLELECT_UI_SCREENSHOT")
	if shot == "" {
		shot = filepath.Join(t.TempDir(), "ui.png")
	}
	_ = os.Remove(shot)
	browse(t, ctx, browser, url, "--screenshot="+shot, "--window-size=1200,900", "--hide-scrollbars")
	if b, err := os.ReadFile(shot); err != nil || !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("screenshot %s: not a PNG (%v)", shot, err)
	}
	ui.signal(syscall.SIGTERM)
	if code := ui.wait(t, ctx); code != 0 {
		t.Errorf("ui exit %d after SIGTERM", code)
	}
}

// TestUIOlderSchema: without the members and history tables, the page
// notes them rather than failing; a non-loopback --listen works with a
// warning; a bad --listen is a usage error, and a missing election table
// fails at start (exit 5).
func TestUIOlderSchema(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 60*time.Second)
	dsn := migrated(t, ctx)
	db := testdb.Open(t, dsn)
	for _, q := range []string{"INSERT INTO service_election (anchor, service_id, released) VALUES ('old', 'x', 1)",
		"DROP TABLE service_election_members", "DROP TABLE service_election_history"} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	mustRun(t, ctx, "", exitUsage, "ui", "--listen", "nowhere")
	mustRun(t, ctx, testdb.DSN(t), exitTable, "ui", "--listen", "127.0.0.1:0") // no election table: fails at start
	ui, url := serveUI(t, ctx, dsn, "--listen", "0.0.0.0:0")
	waitFor(t, ctx, "the warning", func() bool {
		return strings.Contains(strings.Join(ui.lines(true), "\n"), "warning: --listen 0.0.0.0:0 is not a loopback address")
	})
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(url, "http://"))
	resp, err := http.Get("http://127.0.0.1:" + port)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	for _, want := range []string{`data-election="old"`, "no leader", "no members table (migration 9", "no history table (migration 10"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("the page lacks %q:\n%s", want, body)
		}
	}
}
