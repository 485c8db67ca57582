package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/sqlelect/sqlelect/members"
)

// Versions of the rolling upgrade.
const (
	rollingFrom = "1.0.0"
	rollingTo   = "2.0.0"
)

// rolling runs n rolling upgrades (issue 35, item 4) of a peer run through
// members.Run (sp.member; others have none), each in a new election: 3
// candidates r1, r2 and r3 of version 1.0.0 with FollowNewest and a
// hold-down of holdDown; once one leads and all three are live members,
// and a settle later (harness.settle), each in turn, r1, r2 then r3 whichever leads, is stopped (SIGTERM, its
// clean leave), and once it has exited started again with the same ID as
// 2.0.0; the next waits until its member row is live and healthy (as a
// deployment waits for a replica's readiness), and with hold until it has
// also served its hold-down (by the database clock: last seen − started,
// as TestRollingUpgrade waits), so that leadership may follow it before
// the next restart. After the last, the trial
// waits until a 2.0.0 member leads (its hold-down has to pass) and half a
// lease more. The trial's figures, from the candidates' leader signals
// from the first SIGTERM on: the changes of leader (elected events), the
// longest time without a leader (from one's last true sample to the next
// one's elected event) and the longest with two.
func (h *harness) rolling(ctx context.Context, sp *spec, n int, holdDown time.Duration, hold bool) ([]trial, error) {
	if !sp.member {
		return nil, nil
	}
	db, err := sql.Open("mysql", sp.dsn)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var out []trial
	for i := range n {
		t, err := h.rollingTrial(ctx, sp, db, holdDown, hold)
		if err != nil {
			return nil, err
		}
		t.n = i + 1
		out = append(out, t)
		fmt.Fprintf(os.Stderr, "peers: %s rolling %d/%d: %d changes, longest leaderless %v, two leaders %v (%s)\n",
			sp.name, i+1, n, t.changes, t.d.Round(time.Millisecond/10), t.overlap.Round(time.Millisecond/10), t.detail)
	}
	return out, nil
}

func (h *harness) rollingTrial(ctx context.Context, sp *spec, db *sql.DB, holdDown time.Duration, hold bool) (trial, error) {
	L := h.lease
	g, err := h.emptyGroup(ctx, sp, "--follow", "newest", "--hold-down", holdDown.String())
	if err != nil {
		return trial{}, err
	}
	defer g.stop()
	ids := []string{"r1", "r2", "r3"}
	for _, id := range ids {
		if err := g.spawnAs(id, "--app-version", rollingFrom); err != nil {
			return trial{}, err
		}
	}
	first, err := g.wait(electedBy("", time.Time{}), 30*time.Second, "first leader")
	if err != nil {
		return trial{}, err
	}
	// member reads the members table: is id a live, healthy member of
	// version v (with hold, for the hold-down)? "": are the three?
	member := func(id, v string, hold bool) func() (bool, error) {
		return func() (bool, error) {
			qctx, cancel := context.WithTimeout(ctx, L)
			defer cancel()
			ms, err := members.List(qctx, db, "", g.el)
			if err != nil {
				return false, err
			}
			live := 0
			for _, m := range ms {
				if m.Live && m.Healthy && (m.ID == id || id == "") && m.Version == v && (!hold || m.LastSeen.Sub(m.Started) >= holdDown) {
					live++
				}
			}
			return id != "" && live == 1 || id == "" && live == len(ids), nil
		}
	}
	if err := g.until(member("", rollingFrom, false), 30*time.Second, "three live members"); err != nil {
		return trial{}, err
	}
	g.drain(h.settle()) // the upgrade starts at a random point of the leader's renewals
	from := time.Now()
	upgraded := map[string]time.Time{} // when each ID started again as 2.0.0
	for _, id := range ids {
		p := g.procs[id]
		p.signal(syscall.SIGTERM)
		if err := g.until(func() (bool, error) {
			select {
			case <-p.done:
				return true, nil
			default:
				return false, nil
			}
		}, 10*time.Second, id+"'s exit after SIGTERM"); err != nil {
			return trial{}, err
		}
		delete(g.procs, id)
		upgraded[id] = time.Now()
		if err := g.spawnAs(id, "--app-version", rollingTo); err != nil {
			return trial{}, err
		}
		if err := g.until(member(id, rollingTo, hold), holdDown+30*time.Second, id+" live and healthy as "+rollingTo); err != nil {
			return trial{}, err
		}
	}
	// A 2.0.0 member leads: one whose elected event came after it started
	// again.
	newLeads := func() (bool, error) {
		for id, since := range leadership(g.hist, from).leaders {
			if u, ok := upgraded[id]; ok && !since.Before(u) {
				return true, nil
			}
		}
		return false, nil
	}
	if err := g.until(newLeads, 5*L+holdDown+30*time.Second, "a "+rollingTo+" leader"); err != nil {
		return trial{}, err
	}
	g.drain(L / 2)
	s := leadership(g.hist, from)
	t := trial{peer: sp.name, scenario: "rolling", lease: L, d: s.gap, changes: s.changes, overlap: s.overlap,
		detail: fmt.Sprintf("first leader %s; then %s", first.ID, strings.Join(s.path, ", "))}
	if s.changes == 0 {
		t.detail = fmt.Sprintf("first leader %s; no change", first.ID)
	}
	return t, nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// until polls cond every 10 ms, taking in the candidates' events
// meanwhile, until it holds (nil), fails (its error) or within passes.
func (g *group) until(cond func() (bool, error), within time.Duration, what string) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		for waiting := true; waiting; {
			select {
			case ev := <-g.events:
				g.hist = append(g.hist, ev)
			case <-tick.C:
				waiting = false
			case <-deadline.C:
				return fmt.Errorf("%s %s: %s: not within %v", g.sp.name, g.el, what, within)
			case <-g.ctx.Done():
				return g.ctx.Err()
			}
		}
	}
}

// leaders is what the leader signals of a group said from a time on.
type leaders struct {
	changes int           // elected events
	gap     time.Duration // the longest time without a leader
	overlap time.Duration // the longest time with two or more
	path    []string      // who was elected, and when after from
	leaders map[string]time.Time
}

// leadership sweeps the leader signals of hist in time order: a signal is
// true from its elected event's time to its demoted event's last true
// sample (or its process's exit line, when no demoted line came). Gaps
// and overlaps count from from on; leaders are who lead at the end, with
// the time each was elected.
func leadership(hist []event, from time.Time) leaders {
	type edge struct {
		at time.Time
		id string
		on bool
	}
	var es []edge
	elected := map[string]time.Time{} // hist keeps each process's lines in order
	for _, e := range hist {
		switch e.Event {
		case "elected":
			es = append(es, edge{e.Time, e.ID, true})
			elected[e.ID] = e.Time
		case "demoted":
			// A signal true for one sample has its last true sample (read
			// before the sample) before its elected line (written after).
			es = append(es, edge{maxTime(e.LastTrue, elected[e.ID]), e.ID, false})
		case "exit":
			es = append(es, edge{e.Time, e.ID, false})
		}
	}
	slices.SortStableFunc(es, func(a, b edge) int { return a.at.Compare(b.at) })
	r := leaders{leaders: map[string]time.Time{}}
	var since time.Time // of the current run of no leader, or of two
	for _, e := range es {
		before := len(r.leaders)
		if _, on := r.leaders[e.id]; e.on == on {
			continue // an exit after its demoted line
		}
		if e.on {
			r.leaders[e.id] = e.at
		} else {
			delete(r.leaders, e.id)
		}
		after := len(r.leaders)
		at := e.at
		if at.Before(from) {
			at = from
		}
		switch {
		case before == 0 && after == 1 && !since.IsZero():
			r.gap = max(r.gap, at.Sub(since))
		case before == 2 && after == 1 && !since.IsZero():
			r.overlap = max(r.overlap, at.Sub(since))
		}
		if after == 0 || after == 2 {
			since = at
		} else if after == 1 {
			since = time.Time{}
		}
		if e.on && !e.at.Before(from) {
			r.changes++
			r.path = append(r.path, fmt.Sprintf("%s +%.2fs", e.id, e.at.Sub(from).Seconds()))
		}
	}
	return r
}
