package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sqlelect/sqlelect/operator"
)

// spec is one peer as the harness runs it.
type spec struct {
	name   string // the candidate's --peer
	label  string // as the tables show it
	server string // the server it runs against, with its version
	config string // its timings
	token  string // its fencing token, or "none"
	dsn    string // for an operator's transfer to a named candidate; "" when the peer has none
	member bool   // run through members.Run: the rolling scenario measures it
	args   []string
	reset  func(ctx context.Context) error // before each new election, or nil
	counts counter
}

// harness is the candidate program and the processes started.
type harness struct {
	cand  string
	lease time.Duration
	maria *mariadb

	mu    sync.Mutex
	procs map[*proc]bool
}

// setup starts what peer name needs and returns it with a cleanup.
func (h *harness) setup(ctx context.Context, name string) (*spec, func(), error) {
	L := h.lease
	secs := int((L + time.Second - 1) / time.Second)
	sp := &spec{name: name, label: name, token: "none"}
	nop := func() {}
	needMaria := func() error {
		if h.maria != nil {
			return nil
		}
		m, err := startMariaDB(ctx)
		if err != nil {
			return err
		}
		h.maria = m
		return nil
	}
	switch name {
	case "sqlelect-table", "sqlelect-lock", "sqlelect-table-nolockdelay", "sqlelect-members", "sqlelect-members-lock", "mysql-lock", "seed":
		if err := needMaria(); err != nil {
			return nil, nil, err
		}
		params := map[string]string{}
		if name == "mysql-lock" {
			params["wait_timeout"] = strconv.Itoa(secs)
		}
		dsn, err := h.maria.database(ctx, params)
		if err != nil {
			return nil, nil, err
		}
		sp.args = []string{"--dsn", dsn}
		sp.server = serverLabel(h.maria.version)
		sp.counts = h.maria.counts
		switch name {
		case "sqlelect-table", "sqlelect-lock", "sqlelect-table-nolockdelay", "sqlelect-members", "sqlelect-members-lock":
			b := strings.TrimPrefix(name, "sqlelect-")
			sp.label = "sqlelect (" + b + ")"
			switch b {
			case "table-nolockdelay":
				sp.label = "sqlelect (table, DisableLockDelay)"
			case "members":
				sp.label, sp.member = "sqlelect (table, members.Run)", true
			case "members-lock":
				sp.label, sp.member = "sqlelect (lock, members.Run)", true
			}
			sp.config = fmt.Sprintf("lease %v, renew deadline %v, renew/retry %v", L, (L * 2 / 3).Round(time.Millisecond), L/10)
			sp.token = "term (Election.Fenced)"
			sp.dsn = dsn
		case "mysql-lock":
			sp.label = "go-mysql-lock (scheme)"
			sp.config = fmt.Sprintf("GET_LOCK on its own connection, ping every 1 s; session wait_timeout %d s", secs)
		case "seed":
			sp.label = "seed recipe"
			sp.config = fmt.Sprintf("timeout %d s, every candidate every 1 s", secs)
			sp.reset = func(ctx context.Context) error {
				_, err := h.maria.admin.ExecContext(ctx, "DELETE FROM "+dbName(dsn)+".seed_election")
				return err
			}
		}
		return sp, nop, nil
	case "etcd":
		d, err := startEtcd(ctx)
		if err != nil {
			return nil, nil, err
		}
		sp.label, sp.server = "etcd", d.version
		sp.args = []string{"--endpoint", "http://" + d.addr}
		sp.counts = etcdCounts(d.addr)
		sp.config = fmt.Sprintf("session TTL %d s (keep-alive every TTL/3)", secs)
		sp.token = "create revision of the key"
		return sp, d.close, nil
	case "zookeeper":
		d, err := startZooKeeper(ctx)
		if err != nil {
			return nil, nil, err
		}
		sp.label, sp.server = "ZooKeeper", d.version
		sp.args = []string{"--endpoint", d.addr}
		sp.counts = zkCounts(d.addr)
		sp.config = fmt.Sprintf("session timeout %v, tickTime 200 ms", L)
		sp.token = "sequential node (multi with a version check)"
		return sp, d.close, nil
	case "client-go":
		s, err := startLeaseServer()
		if err != nil {
			return nil, nil, err
		}
		sp.label, sp.server = "client-go leaderelection", "in-harness Lease API"
		sp.args = []string{"--endpoint", s.url}
		sp.counts = func(context.Context) (float64, float64, error) { q, w := s.counts(); return q, w, nil }
		sp.config = fmt.Sprintf("LeaseDuration %v, RenewDeadline %v, RetryPeriod %v", L, (L * 2 / 3).Round(time.Millisecond), L/10)
		return sp, s.close, nil
	}
	return nil, nil, fmt.Errorf("unknown peer %q", name)
}

// serverLabel names the server from its VERSION(): "MariaDB 10.11.19" for
// "10.11.19-MariaDB-0+deb12u1", "MySQL 9.7.4-2" otherwise.
func serverLabel(version string) string {
	if v, _, ok := strings.Cut(version, "-MariaDB"); ok {
		return "MariaDB " + v
	}
	return "MySQL " + version
}

func dbName(dsn string) string {
	// .../NAME?params
	i := len(dsn)
	for j := 0; j < len(dsn); j++ {
		if dsn[j] == '?' {
			i = j
			break
		}
	}
	for j := i - 1; j >= 0; j-- {
		if dsn[j] == '/' {
			return dsn[j+1 : i]
		}
	}
	return ""
}

func (h *harness) header(started time.Time, load string) string {
	return fmt.Sprintf("Machine: %s. Run started %s; load average at start %s. Lease or session TTL %v for every peer.\n\n",
		machine(), started.Format("2006-01-02 15:04 UTC"), load, h.lease)
}

func (h *harness) killAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for p := range h.procs {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Kill()
	}
	if h.maria != nil {
		h.maria.close()
	}
}

// event is one JSON line of a candidate.
type event struct {
	Event    string    `json:"event"`
	ID       string    `json:"id"`
	Time     time.Time `json:"time"`
	Leader   *bool     `json:"leader"`
	LastTrue time.Time `json:"last_true"`
	GapMs    int64     `json:"gap_ms"`
	Accepted *bool     `json:"accepted"`
	Detail   string    `json:"detail"`
}

type proc struct {
	id   string
	cmd  *exec.Cmd
	done chan struct{}
}

func (p *proc) signal(s syscall.Signal) { _ = p.cmd.Process.Signal(s) }

// group is 3 candidates of one peer in one election, and what they said.
type group struct {
	h      *harness
	sp     *spec
	el     string
	extra  []string
	events chan event
	hist   []event
	procs  map[string]*proc
	next   int
	ctx    context.Context
}

func (h *harness) newGroup(ctx context.Context, sp *spec, extra ...string) (*group, error) {
	g, err := h.emptyGroup(ctx, sp, extra...)
	if err != nil {
		return nil, err
	}
	for range 3 {
		if err := g.spawn(); err != nil {
			g.stop()
			return nil, err
		}
	}
	return g, nil
}

// emptyGroup is a new election of sp's, with no candidate yet; extra are
// arguments of every candidate.
func (h *harness) emptyGroup(ctx context.Context, sp *spec, extra ...string) (*group, error) {
	if sp.reset != nil {
		if err := sp.reset(ctx); err != nil {
			return nil, err
		}
	}
	return &group{h: h, sp: sp, el: "e" + randHex(4), extra: extra, events: make(chan event, 4096), procs: map[string]*proc{}, ctx: ctx}, nil
}

// spawn starts the next candidate, c1, c2, …
func (g *group) spawn() error {
	g.next++
	return g.spawnAs(fmt.Sprintf("c%d", g.next))
}

// spawnAs starts a candidate with ID id and, beyond the group's, the
// arguments extra.
func (g *group) spawnAs(id string, extra ...string) error {
	args := append([]string{"--peer", g.sp.name, "--id", id, "--election", g.el, "--lease", g.h.lease.String()}, g.sp.args...)
	args = append(append(args, g.extra...), extra...)
	cmd := exec.Command(g.h.cand, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if os.Getenv("PEERS_DEBUG") != "" {
		cmd.Stderr = os.Stderr
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	p := &proc{id: id, cmd: cmd, done: make(chan struct{})}
	g.h.mu.Lock()
	if g.h.procs == nil {
		g.h.procs = map[*proc]bool{}
	}
	g.h.procs[p] = true
	g.h.mu.Unlock()
	g.procs[id] = p
	ctx := g.ctx
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var ev event
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				if os.Getenv("PEERS_DEBUG") != "" {
					fmt.Fprintf(os.Stderr, "%s\n", sc.Bytes())
				}
				select {
				case g.events <- ev:
				case <-ctx.Done():
				}
			}
		}
		_ = cmd.Wait()
		g.h.mu.Lock()
		delete(g.h.procs, p)
		g.h.mu.Unlock()
		close(p.done)
	}()
	return nil
}

// stop kills every candidate of g and waits for them.
func (g *group) stop() {
	for id, p := range g.procs {
		p.signal(syscall.SIGCONT)
		p.signal(syscall.SIGKILL)
		<-p.done
		delete(g.procs, id)
	}
}

// wait returns the first event, already seen or to come, that pred
// accepts, or an error after within.
func (g *group) wait(pred func(event) bool, within time.Duration, what string) (event, error) {
	for _, ev := range g.hist {
		if pred(ev) {
			return ev, nil
		}
	}
	t := time.NewTimer(within)
	defer t.Stop()
	for {
		select {
		case ev := <-g.events:
			g.hist = append(g.hist, ev)
			if pred(ev) {
				return ev, nil
			}
		case <-t.C:
			return event{}, fmt.Errorf("%s %s: %s: nothing within %v", g.sp.name, g.el, what, within)
		case <-g.ctx.Done():
			return event{}, g.ctx.Err()
		}
	}
}

// drain takes in what the candidates said during d.
func (g *group) drain(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case ev := <-g.events:
			g.hist = append(g.hist, ev)
		case <-t.C:
			return
		case <-g.ctx.Done():
			return
		}
	}
}

func electedBy(not string, after time.Time) func(event) bool {
	return func(ev event) bool { return ev.Event == "elected" && ev.ID != not && !ev.Time.Before(after) }
}

// trial is one measurement.
type trial struct {
	peer, scenario string
	n              int
	d              time.Duration // the figure: time to a leader, or the overlap (stall)
	lease          time.Duration
	// stall only
	takeover       bool
	takeoverAfter  time.Duration // from SIGSTOP to another's leader signal
	leaderAtResume bool
	fence          string // accepted, rejected, no token
	fenceDetail    string
	// rolling only: d is the longest time without a leader
	changes int           // changes of leader during the upgrade
	overlap time.Duration // the longest time with two leaders
	detail  string        // who led, and when
}

// first measures n first elections of new names: 3 candidates start at
// once; the figure is from the winner's started line to its leader signal.
func (h *harness) first(ctx context.Context, sp *spec, n int) ([]trial, error) {
	// sqlelect's first election skips the lock delay only on a table whose
	// floor marker is older than the delay (migration 8, issue 31): names a
	// deployment starts after its migration by more than a lease, as here.
	select {
	case <-time.After(h.lease):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	var out []trial
	for i := range n {
		g, err := h.newGroup(ctx, sp)
		if err != nil {
			return nil, err
		}
		ev, err := g.wait(electedBy("", time.Time{}), 30*time.Second, "first election")
		if err != nil {
			g.stop()
			return nil, err
		}
		st, err := g.wait(func(e event) bool { return e.Event == "started" && e.ID == ev.ID }, time.Second, "started")
		g.stop()
		if err != nil {
			return nil, err
		}
		d := ev.Time.Sub(st.Time)
		out = append(out, trial{peer: sp.name, scenario: "first", n: i + 1, d: d, lease: h.lease})
		fmt.Fprintf(os.Stderr, "peers: %s first %d/%d: %v\n", sp.name, i+1, n, d.Round(time.Millisecond/10))
	}
	return out, nil
}

// settle is how long the harness lets a leader lead before it strikes: a
// quarter lease plus a random part of half a lease, so that the strike lands
// at a random point of every peer's renewal cycle (at most 1 s here).
func (h *harness) settle() time.Duration { return h.lease/4 + randDuration(h.lease/2) }

// trials runs n failover (kill -9), handover (SIGTERM) or transfer trials
// in one election of 3 candidates; the struck one is replaced after each.
// A transfer is an operator's request (operator.Transfer, as the CLI's
// transfer) that the leader hand over to a named follower; the figure is
// from the call (its UPDATE commits within it) to the target's leader
// signal, and the old leader runs on as a follower. Peers without a
// planned transfer to a named candidate (sp.dsn "") have no transfer trials.
func (h *harness) trials(ctx context.Context, sp *spec, kind string, n int) ([]trial, error) {
	var op *operator.Operator
	if kind == "transfer" {
		if sp.dsn == "" {
			return nil, nil
		}
		db, err := sql.Open("mysql", sp.dsn)
		if err != nil {
			return nil, err
		}
		defer db.Close()
		if op, err = operator.New(db, ""); err != nil {
			return nil, err
		}
	}
	g, err := h.newGroup(ctx, sp)
	if err != nil {
		return nil, err
	}
	defer g.stop()
	L := h.lease
	leader, err := g.wait(electedBy("", time.Time{}), 30*time.Second, "first leader")
	if err != nil {
		return nil, err
	}
	var out []trial
	var prev string // the leader before a transfer: it sits out (below)
	for i := range n {
		sleepCtx(ctx, h.settle())
		p := g.procs[leader.ID]
		// A transfer's target is a follower other than the leader that
		// just handed over: that one sits out two retry intervals and the
		// transfer window after a transfer (Election.Transfer), which the
		// settle may not outlast, and a transfer to it waits for that.
		var target string
		for id := range g.procs {
			if id != leader.ID && id != prev {
				target = id
			}
		}
		at := time.Now()
		switch kind {
		case "failover":
			p.signal(syscall.SIGKILL)
		case "handover":
			p.signal(syscall.SIGTERM)
		case "transfer":
			if _, err := op.Transfer(ctx, g.el, target); err != nil {
				return nil, err
			}
		}
		next, err := g.wait(electedBy(leader.ID, at), 5*L+30*time.Second, kind)
		if err != nil {
			return nil, err
		}
		if kind == "transfer" && next.ID != target {
			return nil, fmt.Errorf("%s transfer to %s: %s was elected", sp.name, target, next.ID)
		}
		d := next.Time.Sub(at)
		out = append(out, trial{peer: sp.name, scenario: kind, n: i + 1, d: d, lease: L})
		fmt.Fprintf(os.Stderr, "peers: %s %s %d/%d: %v\n", sp.name, kind, i+1, n, d.Round(time.Millisecond/10))
		if kind == "transfer" {
			prev, leader = leader.ID, next
			continue
		}
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			p.signal(syscall.SIGKILL)
			<-p.done
		}
		delete(g.procs, leader.ID)
		if err := g.spawn(); err != nil {
			return nil, err
		}
		leader = next
	}
	return out, nil
}

// stall runs n stall trials, each in a new election of 3 candidates: the
// leader is stopped (SIGSTOP) for 1.5 × lease and resumed (SIGCONT); the
// figure is how long its leader signal and another candidate's were both
// true after it resumed (the overlap).
func (h *harness) stall(ctx context.Context, sp *spec, n int) ([]trial, error) {
	L := h.lease
	var out []trial
	for i := range n {
		g, err := h.newGroup(ctx, sp, "--fence")
		if err != nil {
			return nil, err
		}
		t, err := func() (trial, error) {
			defer g.stop()
			leader, err := g.wait(electedBy("", time.Time{}), 30*time.Second, "first leader")
			if err != nil {
				return trial{}, err
			}
			sleepCtx(ctx, h.settle())
			p := g.procs[leader.ID]
			tStop := time.Now()
			p.signal(syscall.SIGSTOP)
			sleepCtx(ctx, L*3/2)
			tCont := time.Now()
			p.signal(syscall.SIGCONT)
			// Wait for the stale leader's fenced write, then for its signal
			// to turn false (up to two leases: a peer whose leader was not
			// replaced keeps leading).
			fence, err := g.wait(func(e event) bool { return e.Event == "fence" && e.ID == leader.ID }, 2*L+5*time.Second, "fence")
			if err != nil {
				return trial{}, err
			}
			demoted, derr := g.wait(func(e event) bool {
				return e.Event == "demoted" && e.ID == leader.ID && e.Time.After(tCont)
			}, 2*L, "stale leader's demotion")
			g.drain(100 * time.Millisecond)
			t := trial{peer: sp.name, scenario: "stall", n: i + 1, lease: L, fenceDetail: fence.Detail}
			switch {
			case fence.Accepted == nil:
			case fence.Detail == "no token":
				t.fence = "no token"
			case *fence.Accepted:
				t.fence = "accepted"
			default:
				t.fence = "rejected"
			}
			for _, e := range g.hist {
				if e.Event == "resumed" && e.ID == leader.ID && e.Leader != nil {
					t.leaderAtResume = *e.Leader
					break
				}
			}
			var b event
			for _, e := range g.hist {
				if electedBy(leader.ID, tStop)(e) {
					b = e
					break
				}
			}
			if b.ID == "" {
				return t, nil // nobody took over: no overlap
			}
			t.takeover, t.takeoverAfter = true, b.Time.Sub(tStop)
			aOff := g.h.farFuture()
			if derr == nil {
				aOff = demoted.LastTrue
			}
			bOff := g.h.farFuture()
			for _, e := range g.hist {
				if e.Event == "demoted" && e.ID == b.ID && e.Time.After(b.Time) {
					bOff = e.LastTrue
					break
				}
			}
			from := tCont
			if b.Time.After(from) {
				from = b.Time
			}
			to := aOff
			if bOff.Before(to) {
				to = bOff
			}
			if to.After(from) {
				t.d = to.Sub(from)
			}
			if derr != nil && t.d > 0 {
				t.fenceDetail += "; stale leader still leading at the end of observation"
				t.d = time.Since(from)
			}
			return t, nil
		}()
		if err != nil {
			return nil, err
		}
		out = append(out, t)
		fmt.Fprintf(os.Stderr, "peers: %s stall %d/%d: takeover %v after %v, leader at resume %v, overlap %v, fence %s (%s)\n",
			sp.name, i+1, n, t.takeover, t.takeoverAfter.Round(time.Millisecond), t.leaderAtResume, t.d.Round(time.Millisecond/10), t.fence, t.fenceDetail)
	}
	return out, nil
}

func (h *harness) farFuture() time.Time { return time.Now().Add(24 * time.Hour) }

// cost measures the server's request and write rates: a calibration
// window with no candidate, the leader alone, then the leader and two
// followers; a follower's figure is the difference divided by two.
func (h *harness) cost(ctx context.Context, sp *spec, window time.Duration, r *peerResult) error {
	rates := func() (float64, float64, error) {
		q0, w0, err := sp.counts(ctx)
		if err != nil {
			return 0, 0, err
		}
		start := time.Now()
		sleepCtx(ctx, window)
		q1, w1, err := sp.counts(ctx)
		if err != nil {
			return 0, 0, err
		}
		s := time.Since(start).Seconds()
		return (q1 - q0) / s, (w1 - w0) / s, ctx.Err()
	}
	fmt.Fprintf(os.Stderr, "peers: %s cost: calibration\n", sp.name)
	bq, bw, err := rates()
	if err != nil {
		return err
	}
	g, err := h.emptyGroup(ctx, sp)
	if err != nil {
		return err
	}
	defer g.stop()
	if err := g.spawn(); err != nil {
		return err
	}
	if _, err := g.wait(electedBy("", time.Time{}), 30*time.Second, "cost leader"); err != nil {
		return err
	}
	sleepCtx(ctx, 3*time.Second)
	fmt.Fprintf(os.Stderr, "peers: %s cost: leader alone\n", sp.name)
	lq, lw, err := rates()
	if err != nil {
		return err
	}
	for range 2 {
		if err := g.spawn(); err != nil {
			return err
		}
	}
	sleepCtx(ctx, 5*time.Second)
	fmt.Fprintf(os.Stderr, "peers: %s cost: leader and two followers\n", sp.name)
	aq, aw, err := rates()
	if err != nil {
		return err
	}
	r.cost = &costResult{window: window, baseReq: bq, baseWrites: bw,
		leaderReq: lq - bq, leaderWrites: lw - bw, followerReq: (aq - lq) / 2, followerWrites: (aw - lw) / 2}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func randDuration(max time.Duration) time.Duration {
	if max <= 0 {
		return 0
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	u := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 | uint64(b[4])<<32
	return time.Duration(u % uint64(max))
}

// killConn runs n trials of a cut lock connection for go-mysql-lock's
// scheme, each in a new election of 3 candidates: the harness kills the
// holder's connection on the server (KILL of IS_USED_LOCK's connection id),
// as a proxy, a failover of the network or an operator would. The server
// frees the lock at once and a waiter takes it; the holder learns of it at
// its next ping. The figure is how long both leader signals were true.
func (h *harness) killConn(ctx context.Context, sp *spec, n int) ([]trial, error) {
	if sp.name != "mysql-lock" || h.maria == nil {
		return nil, nil
	}
	var out []trial
	for i := range n {
		g, err := h.newGroup(ctx, sp)
		if err != nil {
			return nil, err
		}
		t, err := func() (trial, error) {
			defer g.stop()
			leader, err := g.wait(electedBy("", time.Time{}), 30*time.Second, "first leader")
			if err != nil {
				return trial{}, err
			}
			sleepCtx(ctx, h.settle())
			var id int64
			if err := h.maria.admin.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", "bench-"+g.el).Scan(&id); err != nil {
				return trial{}, err
			}
			tKill := time.Now()
			if _, err := h.maria.admin.ExecContext(ctx, "KILL "+strconv.FormatInt(id, 10)); err != nil {
				return trial{}, err
			}
			b, err := g.wait(electedBy(leader.ID, tKill), 5*time.Second, "takeover after KILL")
			if err != nil {
				return trial{}, err
			}
			a, err := g.wait(func(e event) bool { return e.Event == "demoted" && e.ID == leader.ID }, 5*time.Second, "holder's demotion")
			if err != nil {
				return trial{}, err
			}
			t := trial{peer: sp.name, scenario: "killconn", n: i + 1, lease: h.lease, takeover: true, takeoverAfter: b.Time.Sub(tKill)}
			if a.LastTrue.After(b.Time) {
				t.d = a.LastTrue.Sub(b.Time)
			}
			return t, nil
		}()
		if err != nil {
			return nil, err
		}
		out = append(out, t)
		fmt.Fprintf(os.Stderr, "peers: %s killconn %d/%d: takeover after %v, overlap %v\n", sp.name, i+1, n, t.takeoverAfter.Round(time.Millisecond/10), t.d.Round(time.Millisecond/10))
	}
	return out, nil
}
