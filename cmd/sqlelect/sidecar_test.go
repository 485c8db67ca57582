package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/election/electionhttp"
)

// get fetches http://addr/path and returns the status code and body; code
// 0 when the request failed (nothing listening).
func get(ctx context.Context, addr, path string) (int, string) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(rctx, "GET", "http://"+addr+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestSidecarAddrFlags(t *testing.T) {
	base := campaignFlags{common: common{table: election.DefaultTable}, backend: "table", logLevel: "warn"}
	for _, tc := range []struct {
		addr, want string
	}{
		{"127.0.0.1:0", ""},
		{":8080", ""},
		{"[::1]:8080", ""},
		{"8080", `--http-addr "8080": want [HOST]:PORT, a port from 0 to 65535`},
		{":99999", `--http-addr ":99999": want [HOST]:PORT, a port from 0 to 65535`},
		{"localhost", `--http-addr "localhost": want [HOST]:PORT, a port from 0 to 65535`},
	} {
		f := base
		f.httpAddr = tc.addr
		_, _, err := f.config("e", io.Discard)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("--http-addr %s: %v", tc.addr, err)
		case tc.want != "" && (err == nil || err.Error() != tc.want):
			t.Errorf("--http-addr %s: %v\nwant %s", tc.addr, err, tc.want)
		case tc.want != "":
			if code, _ := describe(err); code != exitUsage {
				t.Errorf("--http-addr %s: exit %d, want %d", tc.addr, code, exitUsage)
			}
		}
	}
}

// killedMsg begins the error of a health command killed at its bound.
const killedMsg = "health command killed: no exit within "

// TestHealthCmdRun: the outcomes of one run of --health-cmd, and the
// events written on changes only.
func TestHealthCmdRun(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	for _, tc := range []struct {
		script string
		bound  time.Duration
		want   string // "" for healthy
	}{
		{"true", time.Minute, ""},
		{`test "$SQLELECT_ELECTION/$SQLELECT_ID" = e/c1`, time.Minute, ""},
		{"echo out; exit 3", time.Minute, "health command failed (exit status 3)"},
		{"echo '  down for maintenance ' >&2; echo more >&2; exit 1", time.Minute,
			"health command failed (exit status 1): down for maintenance"},
		{"kill -KILL $$", time.Minute, "health command failed (signal: killed)"},
		// A background child holds stderr after a successful exit: healthy,
		// once the pipe was waited for healthWaitDelay (exec.ErrWaitDelay).
		{"sleep 2 >&2 & exit 0", time.Minute, ""},
		// A background child holds stderr: the group is killed at the
		// bound and the pipe is not waited for.
		{"sleep 30 & sleep 30", 300 * time.Millisecond, "health command killed: no exit within 300ms"},
	} {
		wantBound, killed := strings.CutPrefix(tc.want, killedMsg)
		h := &healthCmd{script: tc.script, name: "e", id: "c1"}
		cctx, cancel := context.WithTimeout(ctx, tc.bound)
		begin := time.Now()
		err := h.run(cctx)
		took := time.Since(begin)
		cancel()
		got := ""
		if err != nil {
			got = err.Error()
		}
		if killed {
			// The message names what was left of the bound when the
			// command started, to the millisecond: 300ms, or less when
			// this goroutine was descheduled after WithTimeout (299ms
			// under -race on a busy machine).
			want, _ := time.ParseDuration(wantBound)
			rest, ok := strings.CutPrefix(got, killedMsg)
			left, err := time.ParseDuration(rest)
			if !ok || err != nil || left <= 0 || left > want {
				t.Errorf("%q: %q, want %q (or less: what was left of it)", tc.script, got, tc.want)
			}
		} else if got != tc.want {
			t.Errorf("%q: %q, want %q", tc.script, got, tc.want)
		}
		if took > tc.bound+2*time.Second {
			t.Errorf("%q took %v with a bound of %v", tc.script, took, tc.bound)
		}
	}

	var out strings.Builder
	dir := t.TempDir()
	down := filepath.Join(dir, "down")
	h := &healthCmd{script: "test ! -e " + down, name: "e", id: "c1", ev: newEvents(&out, "e", "c1")}
	for _, failing := range []bool{false, true, true, false, false, true} {
		if failing {
			if err := os.WriteFile(down, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		} else {
			_ = os.Remove(down)
		}
		if err := h.check(ctx); (err != nil) != failing {
			t.Errorf("failing %v: check %v", failing, err)
		}
	}
	var kinds []string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var e jsonEvent
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		kinds = append(kinds, e.Event+"/"+e.Err)
	}
	if got, want := strings.Join(kinds, " "),
		"unhealthy/health command failed (exit status 1) healthy/ unhealthy/health command failed (exit status 1)"; got != want {
		t.Errorf("events %q, want %q", got, want)
	}
}

// waitHTTP waits until http://addr/path answers code.
func waitHTTP(t *testing.T, ctx context.Context, addr, path string, code int) {
	t.Helper()
	waitFor(t, ctx, addr+path+" answering "+http.StatusText(code), func() bool {
		c, _ := get(ctx, addr, path)
		return c == code
	})
}

// TestSidecarHTTP: two candidates serve --http-addr; /leader is 200 on the
// leader only, /status and /healthz answer, /metrics shares the address
// when --metrics-addr is the same; when the leader exits its server is gone
// and the other answers 200.
func TestSidecarHTTP(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 60*time.Second)
	dsn := migrated(t, ctx)
	name := randomName("http")
	addrs := map[string]string{"c1": freePort(t), "c2": freePort(t)}
	procs := map[string]*proc{}
	for _, id := range []string{"c1", "c2"} {
		args := []string{"campaign", name, "--id", id, "--http-addr", addrs[id]}
		if id == "c1" {
			args = append(args, "--metrics-addr", addrs[id])
		}
		procs[id] = start(t, id, dsn, append(args, fastFlags...)...)
	}
	leader := func() string {
		for id, p := range procs {
			if hasEvent(p.events(false), "elected", "") {
				return id
			}
		}
		return ""
	}
	waitFor(t, ctx, "a leader", func() bool { return leader() != "" })
	lead := leader()
	other := map[string]string{"c1": "c2", "c2": "c1"}[lead]
	waitFor(t, ctx, other+" following "+lead, func() bool { return hasEvent(procs[other].events(false), "leader", lead) })

	if code, body := get(ctx, addrs[lead], "/leader"); code != 200 || body != "leader\n" {
		t.Errorf("%s /leader: %d %q", lead, code, body)
	}
	if code, body := get(ctx, addrs[other], "/leader"); code != 404 || body != "not leader\n" {
		t.Errorf("%s /leader: %d %q", other, code, body)
	}
	for id, addr := range addrs {
		if code, body := get(ctx, addr, "/healthz"); code != 200 || body != "ok\n" {
			t.Errorf("%s /healthz: %d %q", id, code, body)
		}
		code, body := get(ctx, addr, "/status")
		var st electionhttp.StatusJSON
		if err := json.Unmarshal([]byte(body), &st); err != nil || code != 200 {
			t.Errorf("%s /status: %d %q: %v", id, code, body, err)
			continue
		}
		if st.Election != name || st.ID != id || st.IsLeader != (id == lead) || st.Leader == nil || st.Leader.ID != lead ||
			st.Wedged || st.Healthy != nil || !strings.Contains(body, `"wedged":false`) {
			t.Errorf("%s /status (no --health-cmd: healthy left out): %s", id, body)
		}
		if code, _ := get(ctx, addr, "/nosuch"); code != 404 {
			t.Errorf("%s /nosuch: %d", id, code)
		}
	}
	code, body := get(ctx, addrs["c1"], "/metrics")
	if code != 200 || !strings.Contains(body, `sqlelect_leader{election="`+name+`"} `) ||
		!strings.Contains(body, "\ngo_goroutines ") || !strings.Contains(body, "\nprocess_start_time_seconds ") {
		t.Errorf("c1 /metrics on the --http-addr: %d\n%s", code, body)
	}
	if code, _ := get(ctx, addrs["c2"], "/metrics"); code != 404 {
		t.Errorf("c2 /metrics without --metrics-addr: %d", code)
	}

	// The leader exits: its server is gone, the other leads.
	procs[lead].signal(syscall.SIGTERM)
	if code := procs[lead].wait(t, ctx); code != 0 {
		t.Errorf("%s exit %d", lead, code)
	}
	if code, body := get(ctx, addrs[lead], "/leader"); code != 0 {
		t.Errorf("%s exited, yet /leader answers %d %q", lead, code, body)
	}
	// /leader follows IsLeader, which turns true as the lease is taken,
	// just before OnElected prints the elected line; and the line reaches
	// this test through a pipe. So wait for both rather than order them.
	waitHTTP(t, ctx, addrs[other], "/leader", 200)
	waitFor(t, ctx, other+" elected", func() bool { return hasEvent(procs[other].events(false), "elected", "") })
}

// TestHealthCmdHandsOver: a leader whose --health-cmd fails hands over
// (unhealthy event, then demoted with reason unhealthy), its /leader turns
// 404 and /healthz stays 200; once the check passes again (healthy event)
// it campaigns again and leads when the other leaves.
func TestHealthCmdHandsOver(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 60*time.Second)
	dsn := migrated(t, ctx)
	name := randomName("hc")
	down := filepath.Join(t.TempDir(), "down")
	addr := freePort(t)
	c1 := start(t, "c1", dsn, append([]string{"campaign", name, "--id", "c1", "--http-addr", addr,
		"--health-cmd", "if test -e " + down + "; then echo down for maintenance >&2; exit 1; fi"}, fastFlags...)...)
	waitFor(t, ctx, "c1 elected", func() bool { return hasEvent(c1.events(false), "elected", "") })
	c2 := start(t, "c2", dsn, append([]string{"campaign", name, "--id", "c2"}, fastFlags...)...)
	waitFor(t, ctx, "c2 following", func() bool { return hasEvent(c2.events(false), "leader", "c1") })
	waitHTTP(t, ctx, addr, "/leader", 200)

	if err := os.WriteFile(down, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "c2 elected", func() bool { return hasEvent(c2.events(false), "elected", "") })
	if code, _ := get(ctx, addr, "/leader"); code != 404 {
		t.Errorf("c1 /leader after it stood down: %d", code)
	}
	if code, body := get(ctx, addr, "/healthz"); code != 200 || !strings.Contains(body, "health check failing") {
		t.Errorf("c1 /healthz while its check fails: %d %q", code, body)
	}
	wantHealthy(t, ctx, addr, false)
	// c1 wrote its demoted line before it let the row go, but through its
	// own pipe: c2's elected line, read through another, may come first.
	waitFor(t, ctx, "c1 demoted", func() bool { return hasEvent(c1.events(false), "demoted", "") })
	evs := c1.events(false)
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, e.Event)
	}
	if got := strings.Join(kinds, " "); !strings.HasPrefix(got, "leader elected unhealthy demoted") {
		t.Fatalf("c1 events: %s", got)
	}
	elected, unhealthy, demoted := evs[1], evs[2], evs[3]
	if unhealthy.Term != elected.Term || unhealthy.Err != "health command failed (exit status 1): down for maintenance" {
		t.Errorf("unhealthy event: %+v (elected term %d)", unhealthy, elected.Term)
	}
	if demoted.Reason != "unhealthy" || demoted.Term != elected.Term {
		t.Errorf("demoted event: %+v", demoted)
	}

	// Healthy again: it campaigns, and leads when c2 resigns.
	if err := os.Remove(down); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "c1 healthy", func() bool { return hasEvent(c1.events(false), "healthy", "") })
	c2.signal(syscall.SIGTERM)
	if code := c2.wait(t, ctx); code != 0 {
		t.Errorf("c2 exit %d", code)
	}
	waitHTTP(t, ctx, addr, "/leader", 200)
	wantHealthy(t, ctx, addr, true)
	// /leader follows IsLeader, which turns true before OnElected prints
	// the second elected line (and that comes through a pipe): wait for it.
	electedLines := func() (n int) {
		for _, e := range c1.events(false) {
			if e.Event == "elected" {
				n++
			}
		}
		return n
	}
	waitFor(t, ctx, "c1's second elected line", func() bool { return electedLines() >= 2 })
	if n := electedLines(); n != 2 {
		t.Errorf("c1 elected %d times, want 2", n)
	}
	for _, e := range c1.events(false) {
		if e.Event == "healthy" && e.Err != "" {
			t.Errorf("healthy event with err: %+v", e)
		}
	}
	end := time.Now()
	checkNoOverlap(t, leaderships(t, map[string][]jsonEvent{"c1": c1.events(false), "c2": c2.events(false)}, end))
}

// wantHealthy checks healthy (and wedged false) in the /status of the
// candidate serving addr with a --health-cmd.
func wantHealthy(t *testing.T, ctx context.Context, addr string, healthy bool) {
	t.Helper()
	code, body := get(ctx, addr, "/status")
	var st electionhttp.StatusJSON
	if err := json.Unmarshal([]byte(body), &st); err != nil || code != 200 {
		t.Errorf("/status: %d %q: %v", code, body, err)
		return
	}
	if st.Healthy == nil || *st.Healthy != healthy || st.Wedged {
		t.Errorf("/status %s, want healthy %v and not wedged", body, healthy)
	}
}

// TestSidecarPortInUse: a port in use is an error before campaigning
// starts (no row is written); an invalid address a usage error.
func TestSidecarPortInUse(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	dsn := migrated(t, ctx)
	name := randomName("port")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	busy := ln.Addr().String()
	r := mustRun(t, ctx, dsn, exitError, append([]string{"campaign", name, "--http-addr", busy}, fastFlags...)...)
	if want := "sqlelect campaign: --http-addr " + busy + ": listen tcp " + busy + ": bind: address already in use\n"; r.stderr != want {
		t.Errorf("port in use: %q, want %q", r.stderr, want)
	}
	r = mustRun(t, ctx, dsn, exitError, append([]string{"run", name, "--metrics-addr", freePort(t), "--http-addr", busy}, append(fastFlags, "--", "true")...)...)
	if !strings.Contains(r.stderr, "--http-addr "+busy+": listen") {
		t.Errorf("run, port in use: %s", r)
	}
	mustRun(t, ctx, dsn, exitUnknown, "status", name) // never campaigned
	r = mustRun(t, ctx, dsn, exitUsage, "campaign", name, "--http-addr", "8080")
	if !strings.Contains(r.stderr, `--http-addr "8080": want [HOST]:PORT`) {
		t.Errorf("invalid address: %s", r)
	}
}

// TestRunHealthCmd: run with --health-cmd and --http-addr: a failing check
// stops CMD (demoted, reason unhealthy, on stderr) and /leader turns 404;
// once it passes, the candidate leads again and restarts CMD.
func TestRunHealthCmd(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 60*time.Second)
	dsn := migrated(t, ctx)
	name := randomName("runhc")
	dir := t.TempDir()
	script, log, down := filepath.Join(dir, "child.sh"), filepath.Join(dir, "child.log"), filepath.Join(dir, "down")
	if err := os.WriteFile(script, []byte(childScript), 0o755); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	p := start(t, "r1", dsn, append(append([]string{"run", name, "--id", "r1", "--http-addr", addr,
		"--health-cmd", "test ! -e " + down}, fastFlags...), "--", script, log)...)
	waitFor(t, ctx, "the child", func() bool { return len(readChildLog(t, log)) == 1 })
	waitHTTP(t, ctx, addr, "/leader", 200)

	if err := os.WriteFile(down, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Stopped: by SIGTERM (its trap writes a stop line) or, on a loaded
	// machine where the trap did not run within --grace, by SIGKILL (it is
	// gone: run reaps it).
	waitFor(t, ctx, "the child stopped", func() bool {
		c := readChildLog(t, log)
		return len(c) == 1 && (c[0].stopped || syscall.Kill(c[0].pid, 0) != nil)
	})
	waitFor(t, ctx, "demoted, unhealthy", func() bool {
		for _, e := range p.events(true) {
			if e.Event == "demoted" && e.Reason == "unhealthy" {
				return true
			}
		}
		return false
	})
	if !hasEvent(p.events(true), "unhealthy", "") {
		t.Errorf("no unhealthy event on stderr")
	}
	if code, _ := get(ctx, addr, "/leader"); code != 404 {
		t.Errorf("/leader after standing down: %d", code)
	}
	if err := os.Remove(down); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the child restarted", func() bool { return len(readChildLog(t, log)) == 2 })
	waitHTTP(t, ctx, addr, "/leader", 200)
	if c := readChildLog(t, log); !c[0].to.Before(c[1].from) || c[1].term <= c[0].term {
		t.Errorf("children: %+v %+v", *c[0], *c[1])
	}
	// The healthy line precedes the campaign, hence the child; but it comes
	// through a pipe, the child's start through a file: wait for it.
	waitFor(t, ctx, "a healthy event on stderr", func() bool { return hasEvent(p.events(true), "healthy", "") })
}
