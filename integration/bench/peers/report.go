package main

import (
	"cmp"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// peerResult is everything measured of one peer.
type peerResult struct {
	spec                             *spec
	first, failover, handover, stall []trial
	transfer, killconn, rolling      []trial
	cost                             *costResult
	rollingWait                      string // what each restart of a rolling upgrade waits for
}

type costResult struct {
	window                      time.Duration
	baseReq, baseWrites         float64
	leaderReq, leaderWrites     float64
	followerReq, followerWrites float64
}

type quantiles struct {
	N                  int
	P50, P90, P99, Max time.Duration
}

// quantile is the nearest-rank quantile of sorted: with 30 trials p99 is
// the maximum.
func quantile[T cmp.Ordered](sorted []T, q float64) T {
	if len(sorted) == 0 {
		var zero T
		return zero
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func quants(ts []trial) quantiles {
	ds := make([]time.Duration, len(ts))
	for i, t := range ts {
		ds[i] = t.d
	}
	slices.Sort(ds)
	return quantiles{N: len(ds), P50: quantile(ds, .5), P90: quantile(ds, .9), P99: quantile(ds, .99), Max: quantile(ds, 1)}
}

func dur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.3f s", d.Seconds())
	case d >= 10*time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	}
}

// stallSummary condenses the stall trials of one peer.
type stallSummary struct {
	N, Takeovers, LeaderAtResume, Overlaps int
	MaxOverlap, MedianOverlap              time.Duration // of the trials with an overlap
	TakeoverP50                            time.Duration
	Fence                                  map[string]int
}

func summarizeStall(ts []trial) stallSummary {
	s := stallSummary{N: len(ts), Fence: map[string]int{}}
	var ov, tk []time.Duration
	for _, t := range ts {
		if t.takeover {
			s.Takeovers++
			tk = append(tk, t.takeoverAfter)
		}
		if t.leaderAtResume {
			s.LeaderAtResume++
		}
		if t.d > 0 {
			s.Overlaps++
			ov = append(ov, t.d)
		}
		s.Fence[t.fence]++
	}
	slices.Sort(ov)
	slices.Sort(tk)
	s.MaxOverlap, s.MedianOverlap = quantile(ov, 1), quantile(ov, .5)
	s.TakeoverP50 = quantile(tk, .5)
	return s
}

// rollingSummary condenses the rolling-upgrade trials of one peer.
type rollingSummary struct {
	N                            int
	ChangesP50, ChangesP99, Most int
	Gap                          quantiles // the longest time without a leader, of each trial
	MaxOverlap                   time.Duration
	Missed                       int // trials with more than 2 changes or a gap above 100 ms
}

func summarizeRolling(ts []trial) rollingSummary {
	s := rollingSummary{N: len(ts), Gap: quants(ts)}
	var cs []int
	for _, t := range ts {
		cs = append(cs, t.changes)
		s.MaxOverlap = max(s.MaxOverlap, t.overlap)
		if t.changes > 2 || t.d > 100*time.Millisecond {
			s.Missed++
		}
	}
	slices.Sort(cs)
	s.ChangesP50, s.ChangesP99, s.Most = quantile(cs, .5), quantile(cs, .99), quantile(cs, 1)
	return s
}

func (s stallSummary) fenceText() string {
	var parts []string
	for _, k := range []string{"rejected", "accepted", "no token"} {
		if n := s.Fence[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d/%d", k, n, s.N))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// formatSummary is the markdown of the run: one table per figure.
func formatSummary(rs []*peerResult, lease time.Duration) string {
	var b strings.Builder
	b.WriteString("## The peers\n\n| peer | server | configuration | fencing token |\n|---|---|---|---|\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", r.spec.label, r.spec.server, r.spec.config, r.spec.token)
	}
	b.WriteString("\n## Failover, handover, transfer, first election\n\nFrom the signal (kill -9, SIGTERM) to another candidate's leader signal; transfer: from the operator's request to a named follower (operator.Transfer, as the CLI's transfer) to that follower's leader signal, n/a for a peer without a planned transfer to a named candidate (only sqlelect has one); first election: from the winner's start to its leader signal. Nearest-rank quantiles: with 30 trials p99 is the maximum.\n\n")
	b.WriteString("| peer | failover p50 / p99 (× lease) | handover p50 / p99 | transfer p50 / p99 | first election p50 / p99 | trials (failover, handover, transfer, first) |\n|---|---|---|---|---|---|\n")
	for _, r := range rs {
		f, h, tr, fe := quants(r.failover), quants(r.handover), quants(r.transfer), quants(r.first)
		fo := "-"
		if f.N > 0 {
			fo = fmt.Sprintf("%s / %s (%.2f / %.2f)", dur(f.P50), dur(f.P99), float64(f.P50)/float64(lease), float64(f.P99)/float64(lease))
		}
		pair := func(q quantiles) string {
			if q.N == 0 {
				return "-"
			}
			return dur(q.P50) + " / " + dur(q.P99)
		}
		to := pair(tr)
		if r.spec.dsn == "" {
			to = "n/a"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %d, %d, %d, %d |\n", r.spec.label, fo, pair(h), to, pair(fe), f.N, h.N, tr.N, fe.N)
	}
	b.WriteString("\n## Cost at steady state\n\nRequests and writes per second on the server the peer uses, with the calibration (no candidate) subtracted; a follower's figure is (leader and two followers − leader alone) / 2. MariaDB: statements (`Questions`; a `COM_PING` is not one) and write statements (`Com_insert/update/delete/replace`). etcd: gRPC messages received (keep-alives included) and raft proposals committed. ZooKeeper: packets received (pings included) and transactions (the zxid's counter). Lease API: HTTP requests and PUT/POST.\n\n")
	b.WriteString("| peer | leader requests/s | leader writes/s | each follower requests/s | each follower writes/s | window |\n|---|---|---|---|---|---|\n")
	for _, r := range rs {
		c := r.cost
		if c == nil {
			continue
		}
		z := func(v float64) string {
			if math.Abs(v) < 0.005 {
				v = 0
			}
			return fmt.Sprintf("%.2f", v)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %v |\n", r.spec.label, z(c.leaderReq), z(c.leaderWrites), z(c.followerReq), z(c.followerWrites), c.window)
	}
	b.WriteString("\n## A stalled leader: SIGSTOP for 1.5 × lease, then SIGCONT\n\nEach trial a new election of 3 candidates. *Takeover*: another candidate's leader signal turned true while the leader was stopped. *Leader at resume*: the stopped leader's own signal, at its first sample after SIGCONT. *Overlap*: how long after SIGCONT both its signal and the new leader's were true (each process samples its own signal every 1 ms; the last true sample counts). *Fenced write*: the stale leader's one write with the token it held, attempted at once after it resumed.\n\n")
	b.WriteString("| peer | trials | takeover (p50 after SIGSTOP) | leader at resume | trials with overlap | overlap p50 / max | stale fenced write |\n|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		if len(r.stall) == 0 {
			continue
		}
		s := summarizeStall(r.stall)
		tk := fmt.Sprintf("%d/%d", s.Takeovers, s.N)
		if s.Takeovers > 0 {
			tk += " (" + dur(s.TakeoverP50) + ")"
		}
		ov := "-"
		if s.Overlaps > 0 {
			ov = dur(s.MedianOverlap) + " / " + dur(s.MaxOverlap)
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %d/%d | %d/%d | %s | %s |\n", r.spec.label, s.N, tk, s.LeaderAtResume, s.N, s.Overlaps, s.N, ov, s.fenceText())
	}
	headed := false
	for _, r := range rs {
		if len(r.rolling) == 0 {
			continue
		}
		if !headed {
			headed = true
			b.WriteString("\n## A rolling upgrade with leadership following the newest version (members.Run)\n\nEach trial a new election of 3 candidates r1, r2, r3 at 1.0.0 with `members.Options{Follow: FollowNewest}` and a hold-down; each in turn, r1, r2 then r3 whichever leads, gets SIGTERM, exits and starts again as 2.0.0, and the next waits until its member row is live and healthy (with -rolling-hold, and has served its hold-down); after the last, until a 2.0.0 member leads. From the first SIGTERM on: *changes*, the leader signals that turned true; *leaderless*, the longest time from one leader's last true sample to the next one's leader signal; *two leaders*, the longest time two signals were true at once. Targets (issue 35): at most 2 changes, no leaderless time above 100 ms.\n\n")
			b.WriteString("| peer | each restart waits until the member is | trials | changes p50 / p99 / max | longest leaderless p50 / p99 / max | two leaders, max | trials over a target |\n|---|---|---|---|---|---|---|\n")
		}
		s := summarizeRolling(r.rolling)
		fmt.Fprintf(&b, "| %s | %s | %d | %d / %d / %d | %s / %s / %s | %s | %d/%d |\n", r.spec.label, r.rollingWait, s.N, s.ChangesP50, s.ChangesP99, s.Most,
			dur(s.Gap.P50), dur(s.Gap.P99), dur(s.Gap.Max), dur(s.MaxOverlap), s.Missed, s.N)
	}
	for _, r := range rs {
		if len(r.killconn) == 0 {
			continue
		}
		q := quants(r.killconn)
		over := 0
		for _, t := range r.killconn {
			if t.d > 0 {
				over++
			}
		}
		fmt.Fprintf(&b, "\n## %s: the holder's connection killed on the server\n\n| trials | trials with overlap | overlap p50 / p99 / max |\n|---|---|---|\n| %d | %d/%d | %s / %s / %s |\n",
			r.spec.label, q.N, over, q.N, dur(q.P50), dur(q.P99), dur(q.Max))
	}
	return b.String()
}

// writeResults writes summary.md, trials.csv and results.json to out.
func writeResults(out string, rs []*peerResult, ts []trial, header string) error {
	lease := time.Duration(0)
	if len(ts) > 0 {
		lease = ts[0].lease
	}
	if err := os.WriteFile(filepath.Join(out, "summary.md"), []byte(header+formatSummary(rs, lease)), 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(out, "trials.csv"))
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"peer", "scenario", "trial", "ms", "lease_ms", "takeover", "takeover_ms", "leader_at_resume", "fence", "fence_detail", "changes", "overlap_ms", "detail"})
	for _, t := range ts {
		row := []string{t.peer, t.scenario, strconv.Itoa(t.n), ms(t.d), strconv.FormatInt(t.lease.Milliseconds(), 10), "", "", "", "", "", "", "", ""}
		if t.scenario == "stall" || t.scenario == "killconn" {
			row[5], row[6], row[7], row[8], row[9] = strconv.FormatBool(t.takeover), ms(t.takeoverAfter), strconv.FormatBool(t.leaderAtResume), t.fence, t.fenceDetail
		}
		if t.scenario == "rolling" {
			row[10], row[11], row[12] = strconv.Itoa(t.changes), ms(t.overlap), t.detail
		}
		_ = w.Write(row)
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	type jq struct {
		N                          int
		P50Ms, P90Ms, P99Ms, MaxMs float64
	}
	toJ := func(q quantiles) *jq {
		if q.N == 0 {
			return nil
		}
		m := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
		return &jq{q.N, m(q.P50), m(q.P90), m(q.P99), m(q.Max)}
	}
	type jp struct {
		Peer, Label, Server, Config, Token  string
		LeaseMs                             int64
		Failover, Handover, Transfer, First *jq
		Cost                                map[string]float64 `json:",omitempty"`
		Stall                               map[string]any     `json:",omitempty"`
		Rolling                             map[string]any     `json:",omitempty"`
	}
	var js []jp
	for _, r := range rs {
		p := jp{Peer: r.spec.name, Label: r.spec.label, Server: r.spec.server, Config: r.spec.config, Token: r.spec.token,
			LeaseMs: lease.Milliseconds(), Failover: toJ(quants(r.failover)), Handover: toJ(quants(r.handover)),
			Transfer: toJ(quants(r.transfer)), First: toJ(quants(r.first))}
		if c := r.cost; c != nil {
			p.Cost = map[string]float64{"window_s": c.window.Seconds(), "calibration_requests_per_s": c.baseReq, "calibration_writes_per_s": c.baseWrites,
				"leader_requests_per_s": c.leaderReq, "leader_writes_per_s": c.leaderWrites,
				"follower_requests_per_s": c.followerReq, "follower_writes_per_s": c.followerWrites}
		}
		if len(r.stall) > 0 {
			s := summarizeStall(r.stall)
			p.Stall = map[string]any{"trials": s.N, "takeovers": s.Takeovers, "takeover_p50_ms": float64(s.TakeoverP50) / 1e6,
				"leader_at_resume": s.LeaderAtResume, "overlaps": s.Overlaps, "overlap_p50_ms": float64(s.MedianOverlap) / 1e6,
				"overlap_max_ms": float64(s.MaxOverlap) / 1e6, "fence": s.Fence}
		}
		if len(r.rolling) > 0 {
			s := summarizeRolling(r.rolling)
			p.Rolling = map[string]any{"wait": r.rollingWait, "trials": s.N, "changes_p50": s.ChangesP50, "changes_p99": s.ChangesP99, "changes_max": s.Most,
				"leaderless": toJ(s.Gap), "two_leaders_max_ms": float64(s.MaxOverlap) / 1e6, "trials_over_a_target": s.Missed}
		}
		js = append(js, p)
	}
	b, err := json.MarshalIndent(js, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "results.json"), append(b, '\n'), 0o644)
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 3, 64)
}

// plot draws the empirical distributions (CDF) of failover (÷ lease),
// handover, transfer and first election (milliseconds, log scale) of every peer into
// distributions.png with gnuplot.
func plot(out string, ts []trial) error {
	gp, err := exec.LookPath("gnuplot")
	if err != nil {
		return fmt.Errorf("gnuplot is not installed (Debian: apt-get install gnuplot-nox)")
	}
	dir, err := os.MkdirTemp("", "peers-plot-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	type series struct {
		title, file string
		vals        []float64
	}
	panels := map[string][]*series{}
	index := map[string]*series{}
	for _, t := range ts {
		if t.scenario == "stall" || t.scenario == "killconn" || t.scenario == "rolling" {
			continue
		}
		key := t.scenario + "|" + t.peer
		s := index[key]
		if s == nil {
			s = &series{title: t.peer, file: filepath.Join(dir, fmt.Sprintf("s%d.dat", len(index)))}
			index[key] = s
			panels[t.scenario] = append(panels[t.scenario], s)
		}
		v := float64(t.d) / float64(time.Millisecond)
		if t.scenario == "failover" {
			v = float64(t.d) / float64(t.lease)
		}
		s.vals = append(s.vals, max(v, 0.01))
	}
	for _, s := range index {
		slices.Sort(s.vals)
		var b strings.Builder
		fmt.Fprintf(&b, "%g 0\n", s.vals[0])
		for i, v := range s.vals {
			fmt.Fprintf(&b, "%g %g\n", v, float64(i+1)/float64(len(s.vals)))
		}
		if err := os.WriteFile(s.file, []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	png, err := filepath.Abs(filepath.Join(out, "distributions.png"))
	if err != nil {
		return err
	}
	var sc strings.Builder
	fmt.Fprintf(&sc, "set terminal pngcairo size 2400,600 font 'sans,10'\nset output %q\n", png)
	sc.WriteString("set multiplot layout 1,4\nset grid\nset key outside below\nset ylabel 'fraction of trials'\nset yrange [0:1.02]\n")
	for _, p := range []struct {
		kind, title, xlabel string
		log                 bool
	}{
		{"failover", "Failover after kill -9: time to a new leader / lease", "time / lease", false},
		{"handover", "Handover after SIGTERM: time to a new leader", "milliseconds (log scale)", true},
		{"transfer", "Transfer to a named follower: time to its leader signal", "milliseconds (log scale)", true},
		{"first", "First election of a new name", "milliseconds (log scale)", true},
	} {
		ss := panels[p.kind]
		if len(ss) == 0 {
			continue
		}
		fmt.Fprintf(&sc, "set title %q\nset xlabel %q\n", p.title, p.xlabel)
		if p.log {
			sc.WriteString("set logscale x\n")
		} else {
			sc.WriteString("unset logscale x\n")
		}
		var parts []string
		for _, s := range ss {
			parts = append(parts, fmt.Sprintf("%q using 1:2 with steps lw 2 title %q", s.file, s.title))
		}
		fmt.Fprintf(&sc, "plot %s\n", strings.Join(parts, ", "))
	}
	sc.WriteString("unset multiplot\n")
	cmd := exec.Command(gp)
	cmd.Stdin = strings.NewReader(sc.String())
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("gnuplot: %w: %s", err, b)
	}
	return nil
}
