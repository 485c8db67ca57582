// Package chaos is sqlelect's chaos suite: candidate processes (package
// integration/chaos/candidate) campaign in one election (or, through a
// Batcher, in several) while the suite injects faults (kill -9, SIGSTOP,
// database restarts, killed connections, network faults through toxiproxy,
// half-open connections through a relay that freezes them without closing,
// operators' REPLACE and DELETE alone and combined with a partition and a
// resign or shutdown, a long-held row lock, the same election in a second
// database, clean resigns, Galera node deaths), and a checker reads
// everything they recorded and fails on any violation of the election's
// guarantees.
//
// This file is the checker. It is pure: it reads Records (the candidates'
// JSON lines and the suite's own notes of what it did and when) and Writes
// (the rows of chaos_writes), all timed by the one wall clock of the
// machine, and the elections' History (the rows of their history tables,
// timed by the database's clock on the same machine), and reports
// violations:
//
//   - overlap: two candidates leading at the same instant. A leadership
//     lasts from its elected record's Time to its demoted record's Until; a
//     candidate killed while leading is taken to lead until the kill plus
//     RenewDeadline (it stands down RenewDeadline after its last successful
//     renewal, which was before the kill).
//   - term: a term that does not strictly increase from one leadership to
//     the next (ordered by start).
//   - liveness: a fault after whose end no new leader was elected within
//     Config.Bound (after its start for the kinds of Config.FromStart).
//   - fence: a row of chaos_writes that was not written by the current
//     leadership: it names no leadership of that candidate and term, lies
//     outside it, was written after a leadership with a higher term had
//     begun, or two terms' writes interleave.
//   - protocol: the callbacks' contract broken (elected twice without a
//     demotion, demoted without elected, a process that exited leading
//     without a demotion, a leadership never demoted).
//   - stuck: a candidate whose Run hung: its heartbeats (the beats of its
//     stats records) did not advance for longer than Config.StuckAfter
//     while it ran and was not SIGSTOPped, or it had not exited
//     StuckAfter after a SIGTERM. (An election with no leader for longer
//     than Bound after a fault ended is a liveness violation.)
//   - server: the database refused or timed out an unrelated client
//     during a fault (the suite's probe; a probe_failed record).
//   - history: the election's history (package history, when the suite
//     gives it: History) disagrees with the records: its terms do not
//     strictly increase or its starts go back; a leadership has no row of
//     its term, or several, or one naming another holder; a row's end lies
//     before its start or after the next row's start.
//
// The suite's own stalls (harness_stall records: its process ran no code,
// or a write to a file of its run's directory hung, for longer than half a
// second, as a shared 2-core machine does now and then) are not the
// candidates': a candidate's heartbeats may stop for StuckAfter plus the
// stalls within that gap, and a leader may come Bound plus the stalls
// after a fault. No safety check (overlap, term, fence, protocol,
// history) excuses anything.
package chaos

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sqlelect/sqlelect/history"
	"github.com/sqlelect/sqlelect/internal/floor"
	"github.com/sqlelect/sqlelect/internal/spans"
)

// Record is one event: a line printed by a candidate process, or a note of
// the suite.
//
// Candidates' events: started, elected, demoted, fenced_ok,
// fenced_rejected, fenced_error, stats (with Beats: heartbeats so far),
// resign, error, exit. The suite's: killed (a SIGKILL was sent to ID at
// Time), sigterm (a SIGTERM was sent to ID at Time), exited (the process of
// ID exited at or before Time), fault (a fault of Kind from Time to End,
// aimed at Target), probe_failed (an unrelated client could not use the
// server during a fault; Detail says how often), run_end (no more faults
// after Time).
type Record struct {
	Event  string             `json:"event"`
	ID     string             `json:"id,omitempty"`
	Term   uint64             `json:"term,omitempty"`
	Time   time.Time          `json:"time"`
	Until  time.Time          `json:"until,omitzero"`
	Reason string             `json:"reason,omitempty"`
	Detail string             `json:"detail,omitempty"`
	Pid    int                `json:"pid,omitempty"`
	Errors map[string]float64 `json:"errors,omitempty"`
	// ErrNumbers (stats) counts the candidate's failed heartbeats by
	// MySQL error number ("other" when not a MySQL error; 1180 "Got error
	// 149", a transaction a remote write set aborted, as "1180/149").
	ErrNumbers map[string]float64 `json:"err_numbers,omitempty"`
	Kind       string             `json:"kind,omitempty"`
	End        time.Time          `json:"end,omitzero"`
	Target     string             `json:"target,omitempty"`
	Beats      uint64             `json:"beats,omitempty"`
	// Election names the election of a candidate's event when its process
	// campaigns in several (empty otherwise, and for process events).
	Election string `json:"election,omitempty"`
}

func (r Record) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Time.UTC().Format(tsFormat), r.Event)
	if r.Kind != "" {
		fmt.Fprintf(&b, " kind=%s", r.Kind)
	}
	if r.ID != "" {
		fmt.Fprintf(&b, " id=%s", r.ID)
	}
	if r.Term != 0 {
		fmt.Fprintf(&b, " term=%d", r.Term)
	}
	if !r.Until.IsZero() {
		fmt.Fprintf(&b, " until=%s", r.Until.UTC().Format(tsFormat))
	}
	if !r.End.IsZero() {
		fmt.Fprintf(&b, " end=%s", r.End.UTC().Format(tsFormat))
	}
	if r.Target != "" {
		fmt.Fprintf(&b, " target=%s", r.Target)
	}
	if r.Reason != "" {
		fmt.Fprintf(&b, " reason=%s", r.Reason)
	}
	if r.Election != "" {
		fmt.Fprintf(&b, " election=%s", r.Election)
	}
	if r.Beats != 0 {
		fmt.Fprintf(&b, " beats=%d", r.Beats)
	}
	if r.Detail != "" {
		fmt.Fprintf(&b, " detail=%q", r.Detail)
	}
	return b.String()
}

const tsFormat = "15:04:05.000000"

// Write is one row of chaos_writes: a fenced write that committed.
type Write struct {
	Seq  int64     // the row's auto-increment id
	Term uint64    // the term the writer held
	Who  string    // the writer's candidate id
	At   time.Time // NOW(6) inside the fenced transaction, after its check
	// Election is the election, when the writer campaigned in several.
	Election string
}

func (w Write) String() string {
	return fmt.Sprintf("write #%d who=%s term=%d at=%s", w.Seq, w.Who, w.Term, w.At.UTC().Format(tsFormat))
}

// Config is what the checker needs of the election's configuration.
type Config struct {
	// RenewDeadline of the candidates: a killed leader is taken to lead
	// until the kill plus RenewDeadline.
	RenewDeadline time.Duration
	// Bound is the longest time after a fault ends before a leader must be
	// elected (see Bound).
	Bound time.Duration
	// FenceSlack is how far past the end of its leadership a fenced write's
	// NOW(6) may lie: the leadership's context is cancelled by a timer that
	// fires a little after the deadline, and a commit sent just before
	// still lands (the database checked the lease by its own clock). Zero
	// allows none.
	FenceSlack time.Duration
	// FromStart names the fault kinds that isolate the leader alone: the
	// others must elect a new leader within Bound of the fault's start,
	// while it lasts (a partitioned leader's lease runs out; nothing it
	// left behind may block the takeover).
	FromStart map[string]bool
	// StuckAfter is how long a running candidate's heartbeats may stall,
	// and how long it may take to exit after a SIGTERM, before it counts
	// as stuck. Zero means Bound.
	StuckAfter time.Duration
}

// Bound is the liveness bound the configuration promises after a fault
// ends: the rest of a lease that may still be live (LeaseDuration), a lock
// delay when the new holder inserted or was handed the row (LockDelay), the
// sit-out of two retry intervals after a DELETE or a resign, one jittered
// retry interval for followers to look, a renewal interval for the holder to
// notice a DELETE or REPLACE, one query timeout for a statement that hung on
// a dead connection, and a margin for scheduling and reconnecting.
func Bound(lease, lockDelay, renewInterval, retryInterval, queryTimeout time.Duration, jitter float64, margin time.Duration) time.Duration {
	retry := time.Duration(float64(retryInterval) * (1 + jitter))
	return lease + lockDelay + 2*retryInterval + retry + renewInterval + queryTimeout + margin
}

// Interval is one leadership.
type Interval struct {
	ID         string
	Term       uint64
	Start, End time.Time
	// How is how the end is known: demoted (its Until), killed (kill time
	// plus RenewDeadline), exited (exit time plus RenewDeadline, a
	// protocol violation), open (never ended; End is the last record's
	// time plus RenewDeadline).
	How     string
	Elected Record
	Ended   Record
}

func (iv Interval) String() string {
	return fmt.Sprintf("%s term %d %s..%s (%s)", iv.ID, iv.Term,
		iv.Start.UTC().Format(tsFormat), iv.End.UTC().Format(tsFormat), iv.How)
}

// Violation is one broken guarantee, with the records that show it.
type Violation struct {
	Kind     string // overlap, term, liveness, fence, protocol, stuck, server, history
	Msg      string
	Evidence []string
	// At is when it began (for an overlap, the second leader's election;
	// for a stall, StuckAfter past the last heartbeat): it is counted
	// against the last fault that began at or before At
	// (FaultOutcome.Violations).
	At time.Time
}

func (v Violation) String() string {
	s := v.Kind + ": " + v.Msg
	for _, e := range v.Evidence {
		s += "\n\t" + e
	}
	return s
}

// FaultOutcome is what happened after one fault.
type FaultOutcome struct {
	Fault Record
	// Survived: the leader in office when the fault began kept leading
	// through the fault and for Bound after it (or until the next fault).
	Survived bool
	// Failover is the time from the fault's start to the start of the next
	// leadership (not counting one that survived), when there was one.
	Failover time.Duration
	// Recovered: a leader led within Bound of the fault's end.
	Recovered bool
	Next      *Interval
	// Violations counts, by kind, the violations that began after this
	// fault began and before the next one did.
	Violations map[string]int
}

// Result is the checker's verdict.
type Result struct {
	Violations []Violation
	Intervals  []Interval
	// TermsChecked is the number of successive leaderships whose terms
	// were compared.
	TermsChecked int
	// HistoryChecked is the number of leaderships (candidate and term)
	// looked up in the history; -1 when no history was given.
	HistoryChecked int
	Faults         []FaultOutcome
	Writes         int
	FencedOK       int
	// FencedRejected counts fenced writes refused with ErrNotLeader (a
	// leader that had just lost its lease, say): the fence at work.
	FencedRejected int
	// Errors sums the candidates' last stats (heartbeat errors by kind).
	Errors map[string]float64
	// ErrNumbers sums the candidates' last stats' failed heartbeats by
	// MySQL error number (Record.ErrNumbers).
	ErrNumbers map[string]float64
	// Margins says how close the run came to the bounds it is checked
	// against, violated or not.
	Margins Margins
}

// Margins is how close a run came to the checker's bounds: a bound that a
// run on an idle machine approaches will be crossed on a busy one, so the
// suite reports them with every run.
type Margins struct {
	// NextLeader is the longest time from the end of a fault (its start,
	// for the kinds of Config.FromStart) to the election of the next
	// leader, over the faults the leader did not survive (Config.Bound);
	// NextLeaderAfter names that fault.
	NextLeader      time.Duration
	NextLeaderAfter string
	// FencedLate is the most a fenced write's NOW(6) came after the end
	// of its writer's leadership (Config.FenceSlack); zero or less when
	// none came after.
	FencedLate time.Duration
	// Stall is the longest time a running candidate that was not
	// SIGSTOPped went without a heartbeat, as its stats records show
	// (Config.StuckAfter; they come every 500 ms while it beats).
	Stall time.Duration
}

// merge keeps the larger of each margin.
func (m *Margins) merge(o Margins) {
	if o.NextLeader > m.NextLeader {
		m.NextLeader, m.NextLeaderAfter = o.NextLeader, o.NextLeaderAfter
	}
	m.FencedLate = max(m.FencedLate, o.FencedLate)
	m.Stall = max(m.Stall, o.Stall)
}

// Failed reports whether any guarantee was broken.
func (r Result) Failed() bool { return len(r.Violations) > 0 }

// Count returns the number of violations of kind.
func (r Result) Count(kind string) int {
	n := 0
	for _, v := range r.Violations {
		if v.Kind == kind {
			n++
		}
	}
	return n
}

// History is an election's history as the suite read it, for the history
// check.
type History struct {
	// Terms are its rows, oldest first (history.List's order).
	Terms []history.Term
	// From is the lowest term of a leadership that must have its row: the
	// history keeps the last floor.HistoryKeep terms of an election, so a
	// leadership of a lower term may have lost its row (0: every one must
	// have it).
	From uint64
}

// mergeHistory merges the readings of one election's history, oldest
// first: a term is taken from the latest reading that has it (the rows of
// one reading are all kept, two of the same term included). Leaderships
// are checked from the oldest term of the latest reading that found the
// history full (floor.HistoryKeep rows): the terms written since the
// reading before it may have gone round the ring over the lower ones.
func mergeHistory(readings [][]history.Term) History {
	var h History
	have := map[uint64]bool{}
	for i := len(readings) - 1; i >= 0; i-- {
		r := readings[i]
		var added []uint64
		for _, t := range r {
			if !have[t.Term] {
				h.Terms = append(h.Terms, t)
				added = append(added, t.Term)
			}
		}
		for _, t := range added {
			have[t] = true
		}
		if h.From == 0 && len(r) >= floor.HistoryKeep {
			h.From = r[0].Term // history.List: oldest first
		}
	}
	slices.SortStableFunc(h.Terms, func(a, b history.Term) int { return cmp.Compare(a.Term, b.Term) })
	return h
}

// termRow is a history row as evidence.
type termRow history.Term

func (r termRow) String() string {
	s := fmt.Sprintf("history term=%d holder=%s began=%s started=%s", r.Term, r.Holder, r.Began, r.Started.UTC().Format(tsFormat))
	if !r.Ended.IsZero() {
		s += fmt.Sprintf(" ended=%s end=%s", r.Ended.UTC().Format(tsFormat), r.End)
	}
	return s
}

// Check checks the records and writes of one election, and its history
// when hist is not nil.
func Check(cfg Config, recs []Record, writes []Write, hist *History) Result {
	var res Result
	recs = slices.Clone(recs)
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].Time.Before(recs[j].Time) })
	// violate notes a violation; it began at the time of the last piece of
	// evidence (a Record's Time, a Write's At).
	violate := func(kind, msg string, ev ...fmt.Stringer) *Violation {
		v := Violation{Kind: kind, Msg: msg}
		for _, e := range ev {
			v.Evidence = append(v.Evidence, e.String())
			switch e := e.(type) {
			case Record:
				v.At = e.Time
			case Write:
				v.At = e.At
			}
		}
		res.Violations = append(res.Violations, v)
		return &res.Violations[len(res.Violations)-1]
	}

	// Leaderships, per candidate.
	open := map[string]*Interval{}
	var ivs []*Interval
	var last time.Time
	lastStats := map[string]map[string]float64{}
	lastNumbers := map[string]map[string]float64{}
	closeIv := func(iv *Interval, end time.Time, how string, r Record) {
		iv.End, iv.How, iv.Ended = end, how, r
		delete(open, iv.ID)
	}
	for _, r := range recs {
		if r.Time.After(last) {
			last = r.Time
		}
		switch r.Event {
		case "elected":
			if o := open[r.ID]; o != nil {
				violate("protocol", fmt.Sprintf("%s elected (term %d) while still leading term %d", r.ID, r.Term, o.Term), o.Elected, r)
				closeIv(o, r.Time, "demoted", r)
			}
			iv := &Interval{ID: r.ID, Term: r.Term, Start: r.Time, Elected: r}
			open[r.ID] = iv
			ivs = append(ivs, iv)
		case "demoted":
			o := open[r.ID]
			if o == nil {
				violate("protocol", fmt.Sprintf("%s demoted (term %d) without being elected", r.ID, r.Term), r)
				continue
			}
			if o.Term != r.Term {
				violate("protocol", fmt.Sprintf("%s demoted from term %d while leading term %d", r.ID, r.Term, o.Term), o.Elected, r)
			}
			end := r.Until
			if end.IsZero() {
				end = r.Time
				violate("protocol", fmt.Sprintf("%s demoted without an until", r.ID), r)
			}
			closeIv(o, end, "demoted", r)
		case "killed":
			if o := open[r.ID]; o != nil {
				closeIv(o, r.Time.Add(cfg.RenewDeadline), "killed", r)
			}
		case "exited":
			if o := open[r.ID]; o != nil {
				violate("protocol", fmt.Sprintf("%s exited while leading term %d without a demotion", r.ID, o.Term), o.Elected, r)
				closeIv(o, r.Time.Add(cfg.RenewDeadline), "exited", r)
			}
		case "fenced_ok":
			res.FencedOK++
		case "fenced_rejected":
			res.FencedRejected++
		case "stats":
			lastStats[r.ID] = r.Errors
			lastNumbers[r.ID] = r.ErrNumbers
		case "probe_failed":
			violate("server", "an unrelated client could not use the server: "+r.Detail, r)
		}
	}
	for _, o := range open {
		violate("protocol", fmt.Sprintf("%s never demoted from term %d", o.ID, o.Term), o.Elected)
		o.End, o.How = last.Add(cfg.RenewDeadline), "open"
	}
	res.Errors = map[string]float64{}
	for _, s := range lastStats {
		for k, v := range s {
			res.Errors[k] += v
		}
	}
	res.ErrNumbers = map[string]float64{}
	for _, s := range lastNumbers {
		for k, v := range s {
			res.ErrNumbers[k] += v
		}
	}
	sort.SliceStable(ivs, func(i, j int) bool { return ivs[i].Start.Before(ivs[j].Start) })
	for _, iv := range ivs {
		res.Intervals = append(res.Intervals, *iv)
	}

	// Two leaders at the same instant; terms.
	for i, a := range ivs {
		if i > 0 {
			res.TermsChecked++
			// The same candidate may lead the same term again right after
			// (Callbacks: a renewal that lands after the deadline begins a
			// new leadership with the same term; nobody led in between).
			if p := ivs[i-1]; a.Term < p.Term || a.Term == p.Term && (a.ID != p.ID || a.Start.Before(p.End)) {
				violate("term", fmt.Sprintf("term %d of %s does not increase on term %d of %s", a.Term, a.ID, p.Term, p.ID),
					p.Elected, a.Elected)
			}
		}
		for _, b := range ivs[i+1:] {
			if !b.Start.Before(a.End) {
				break // sorted by start: no later one starts before a ends either
			}
			kind := "overlap"
			if a.ID == b.ID {
				kind = "protocol"
			}
			violate(kind, fmt.Sprintf("%s (term %d) and %s (term %d) both lead for %v: %s and %s",
				a.ID, a.Term, b.ID, b.Term, minTime(a.End, b.End).Sub(b.Start), a, b),
				a.Elected, a.Ended, b.Elected)
		}
	}

	res.HistoryChecked = -1
	if hist != nil {
		res.HistoryChecked = checkHistory(ivs, *hist, violate)
	}

	// Liveness after each fault.
	stalls := harnessStalls(recs)
	var faults []Record
	var runEnd time.Time
	for _, r := range recs {
		switch r.Event {
		case "fault":
			faults = append(faults, r)
		case "run_end":
			runEnd = r.Time
		}
	}
	if runEnd.IsZero() {
		runEnd = last
	}
	for i, f := range faults {
		end, from := f.End, "end"
		if end.Before(f.Time) || cfg.FromStart[f.Kind] {
			end = f.Time
		}
		if cfg.FromStart[f.Kind] {
			from = "start"
		}
		horizon := end.Add(cfg.Bound)
		if i+1 < len(faults) && faults[i+1].Time.Before(horizon) {
			horizon = faults[i+1].Time
		}
		if runEnd.Before(horizon) {
			horizon = runEnd
		}
		out := FaultOutcome{Fault: f}
		var in *Interval // the leadership in office when the fault began
		for _, iv := range ivs {
			if !iv.Start.After(f.Time) && iv.End.After(f.Time) {
				in = iv
			}
		}
		if in != nil && !in.End.Before(horizon) {
			out.Survived, out.Recovered = true, true
		} else {
			for _, iv := range ivs {
				if iv != in && iv.Start.After(f.Time) {
					out.Next = iv
					break
				}
			}
			if out.Next != nil {
				out.Failover = out.Next.Start.Sub(f.Time)
				out.Recovered = !out.Next.Start.After(end.Add(cfg.Bound + spans.Within(stalls, end, out.Next.Start)))
				if d := out.Next.Start.Sub(end); d > res.Margins.NextLeader {
					res.Margins.NextLeader, res.Margins.NextLeaderAfter = d, fmt.Sprintf("%s (from its %s)", f.Kind, from)
				}
			}
			if !out.Recovered {
				msg := fmt.Sprintf("no leader within %v (plus the suite's own stalls) after the %s of fault %s", cfg.Bound, from, f.Kind)
				if out.Next != nil {
					msg += fmt.Sprintf(": the next one, %s, was elected %v after it", out.Next, out.Next.Start.Sub(end))
				}
				violate("liveness", msg, f)
			}
		}
		res.Faults = append(res.Faults, out)
	}

	res.Margins.Stall = checkStuck(cfg, recs, last, stalls, violate)

	// Count each violation against the fault in progress.
	for _, v := range res.Violations {
		k := -1
		for i, f := range res.Faults {
			if !f.Fault.Time.After(v.At) {
				k = i
			}
		}
		if k < 0 {
			continue
		}
		if res.Faults[k].Violations == nil {
			res.Faults[k].Violations = map[string]int{}
		}
		res.Faults[k].Violations[v.Kind]++
	}

	// Fenced writes.
	res.Writes = len(writes)
	ws := slices.Clone(writes)
	sort.SliceStable(ws, func(i, j int) bool {
		if !ws[i].At.Equal(ws[j].At) {
			return ws[i].At.Before(ws[j].At)
		}
		return ws[i].Seq < ws[j].Seq
	})
	// A candidate's term may have several leaderships (see the term
	// check): a write belongs to the last one that began before it.
	byKey := map[string][]*Interval{}
	for _, iv := range ivs {
		k := fmt.Sprintf("%s/%d", iv.ID, iv.Term)
		byKey[k] = append(byKey[k], iv)
	}
	res.Margins.FencedLate = -time.Hour
	for i, w := range ws {
		var iv *Interval
		for _, c := range byKey[fmt.Sprintf("%s/%d", w.Who, w.Term)] {
			if iv == nil || !c.Start.After(w.At) {
				iv = c
			}
		}
		if iv != nil {
			res.Margins.FencedLate = max(res.Margins.FencedLate, w.At.Sub(iv.End))
		}
		switch {
		case iv == nil:
			violate("fence", fmt.Sprintf("%s: %s never led term %d", w, w.Who, w.Term), w)
		case w.At.Before(iv.Start):
			violate("fence", fmt.Sprintf("%s: %v before its leadership began", w, iv.Start.Sub(w.At)), w, iv.Elected)
		case w.At.After(iv.End.Add(cfg.FenceSlack)):
			violate("fence", fmt.Sprintf("%s: %v after its leadership ended (%s; slack %v)", w, w.At.Sub(iv.End), iv.How, cfg.FenceSlack),
				w, iv.Elected, iv.Ended)
		}
		for _, o := range ivs {
			if o.Term > w.Term && o.Start.Before(w.At) {
				violate("fence", fmt.Sprintf("%s: written %v after %s (term %d) was elected", w, w.At.Sub(o.Start), o.ID, o.Term), w, o.Elected)
				break
			}
		}
		if i > 0 && ws[i-1].Term > w.Term {
			violate("fence", fmt.Sprintf("writes of terms interleave: term %d after term %d", w.Term, ws[i-1].Term), ws[i-1], w)
		}
	}
	if res.Margins.FencedLate == -time.Hour {
		res.Margins.FencedLate = 0
	}
	return res
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// checkStuck reports candidates whose Run hung (see the package comment);
// recs are sorted by time, last is the last record's time. It returns the
// longest stall it saw, a stuck one or not (Margins.Stall).
func checkStuck(cfg Config, recs []Record, last time.Time, stalls [][2]time.Time, violate func(kind, msg string, ev ...fmt.Stringer) *Violation) (longest time.Duration) {
	after := cfg.StuckAfter
	if after <= 0 {
		after = cfg.Bound
	}
	if after <= 0 {
		return 0
	}
	type life struct {
		progress time.Time // the last time its beats advanced
		lastBeat Record    // the record that said so
		beats    uint64
		tracked  bool      // it reports beats
		end      time.Time // killed, SIGTERMed or exited: no more heartbeats expected
		sigterm  *Record
		exited   bool
		exitedAt time.Time
	}
	lives := map[string]*life{}
	var order []string
	var stops []Record // sigstop faults
	runEnd := last
	get := func(r Record) *life {
		l := lives[r.ID]
		if l == nil {
			l = &life{progress: r.Time, lastBeat: r}
			lives[r.ID] = l
			order = append(order, r.ID)
		}
		return l
	}
	stopped := func(id string, from, to time.Time) bool {
		for _, f := range stops {
			if f.Target == id && f.Time.Before(to) && f.End.After(from) {
				return true
			}
		}
		return false
	}
	stall := func(id string, l *life, to time.Time, ev Record) {
		if !l.tracked || stopped(id, l.progress, to) {
			return
		}
		gap, suite := to.Sub(l.progress), spans.Within(stalls, l.progress, to)
		longest = max(longest, gap-suite)
		if gap-suite > after {
			more := after.String()
			if suite > 0 {
				more += fmt.Sprintf(" and the suite's own stalls, %v", suite.Round(time.Millisecond))
			}
			v := violate("stuck", fmt.Sprintf("%s made no heartbeat for %v (more than %s) while running", id,
				gap.Round(time.Millisecond), more), l.lastBeat, ev)
			v.At = l.progress.Add(after) // when it became a stall: during the fault that caused it
		}
	}
	for _, r := range recs {
		switch r.Event {
		case "fault":
			if r.Kind == kindSigstopName {
				stops = append(stops, r)
			}
		case "run_end":
			runEnd = r.Time
		}
		if r.ID == "" {
			continue
		}
		switch r.Event {
		case "started", "stats", "killed", "sigterm", "exited":
		default:
			continue
		}
		l := get(r)
		switch r.Event {
		case "stats":
			if r.Beats > l.beats && l.end.IsZero() {
				stall(r.ID, l, r.Time, r)
				l.beats, l.progress, l.lastBeat, l.tracked = r.Beats, r.Time, r, true
			}
		case "killed", "sigterm":
			if l.end.IsZero() {
				stall(r.ID, l, r.Time, r)
				l.end = r.Time
			}
			if r.Event == "sigterm" && l.sigterm == nil {
				rc := r
				l.sigterm = &rc
			}
		case "exited":
			if l.end.IsZero() {
				stall(r.ID, l, r.Time, r)
				l.end = r.Time
			}
			l.exited, l.exitedAt = true, r.Time
		}
	}
	for _, id := range order {
		l := lives[id]
		if l.end.IsZero() && runEnd.After(l.progress) {
			stall(id, l, runEnd, Record{Event: "run_end", Time: runEnd})
		}
		if st := l.sigterm; st != nil {
			switch {
			case !l.exited:
				violate("stuck", fmt.Sprintf("%s never exited after SIGTERM", id), *st)
			case l.exitedAt.Sub(st.Time) > after:
				violate("stuck", fmt.Sprintf("%s exited %v after SIGTERM (more than %v)", id,
					l.exitedAt.Sub(st.Time).Round(time.Millisecond), after), *st)
			}
		}
	}
	return longest
}

// checkHistory checks the history h against the leaderships ivs (sorted
// by start): the rows' order, one row of each leadership's term naming its
// candidate (for the terms from h.From on), and the rows' ends. It returns
// the number of leaderships (candidate and term) it looked up.
func checkHistory(ivs []*Interval, h History, violate func(kind, msg string, ev ...fmt.Stringer) *Violation) (checked int) {
	rows := h.Terms
	byTerm := map[uint64][]termRow{}
	for i, r := range rows {
		byTerm[r.Term] = append(byTerm[r.Term], termRow(r))
		if i == 0 {
			continue
		}
		p := rows[i-1]
		if r.Term <= p.Term {
			violate("history", fmt.Sprintf("term %d follows term %d in the history", r.Term, p.Term),
				termRow(p), termRow(r)).At = r.Started
		}
		if r.Started.Before(p.Started) {
			violate("history", fmt.Sprintf("term %d starts %v before term %d, its predecessor in the history", r.Term,
				p.Started.Sub(r.Started), p.Term), termRow(p), termRow(r)).At = r.Started
		}
	}
	for i, r := range rows {
		if r.Ended.IsZero() {
			continue
		}
		if r.Ended.Before(r.Started) {
			violate("history", fmt.Sprintf("term %d ends %v before it starts", r.Term, r.Started.Sub(r.Ended)),
				termRow(r)).At = r.Started
		}
		if i+1 < len(rows) && r.Ended.After(rows[i+1].Started) {
			n := rows[i+1]
			violate("history", fmt.Sprintf("term %d ends (%s) %v after term %d starts", r.Term, r.End, r.Ended.Sub(n.Started), n.Term),
				termRow(r), termRow(n)).At = n.Started
		}
	}
	// One row per leadership (a candidate may lead its term more than once:
	// see the term check).
	seen := map[string]bool{}
	for _, iv := range ivs {
		k := fmt.Sprintf("%s/%d", iv.ID, iv.Term)
		if iv.Term < h.From || seen[k] {
			continue
		}
		seen[k] = true
		checked++
		ev := []fmt.Stringer{iv.Elected}
		for _, r := range byTerm[iv.Term] {
			ev = append(ev, r)
		}
		switch rs := byTerm[iv.Term]; {
		case len(rs) == 0:
			violate("history", fmt.Sprintf("no history row of term %d, which %s led", iv.Term, iv.ID), ev...)
		case len(rs) > 1:
			violate("history", fmt.Sprintf("%d history rows of term %d, which %s led", len(rs), iv.Term, iv.ID), ev...).At = iv.Start
		case rs[0].Holder != iv.ID:
			violate("history", fmt.Sprintf("the history names %s the holder of term %d, which %s led", rs[0].Holder, iv.Term, iv.ID),
				ev...).At = iv.Start
		}
	}
	return checked
}

// harnessStalls returns the suite's own stalls: the spans of recs'
// harness_stall records.
func harnessStalls(recs []Record) [][2]time.Time {
	var s [][2]time.Time
	for _, r := range recs {
		if r.Event == "harness_stall" {
			s = append(s, [2]time.Time{r.Time, r.End})
		}
	}
	return s
}

// kindSigstopName is the fault kind during which a candidate is frozen.
const kindSigstopName = "sigstop"

// CheckElections checks several elections whose candidates share processes
// (each process campaigns in all of them; with one name it is Check): the
// records of election e are
// those with Election e and the process's and suite's own (no Election),
// its writes those with Election e. The result is names[0]'s, with the
// other elections' leaderships, writes and violations (their messages
// prefixed with the election) added and counted against the same faults;
// stuck candidates and server findings, which concern processes, are
// counted once. hists holds the history of each election to check against
// it (none checked for a nil map, or an election it lacks).
func CheckElections(cfg Config, recs []Record, writes []Write, names []string, hists map[string]*History) Result {
	if len(names) <= 1 {
		var h *History
		if len(names) == 1 {
			h = hists[names[0]]
		}
		return Check(cfg, recs, writes, h) // one election: nothing is tagged
	}
	var res Result
	for i, name := range names {
		var rs []Record
		for _, r := range recs {
			if r.Election == name || r.Election == "" {
				rs = append(rs, r)
			}
		}
		var ws []Write
		for _, w := range writes {
			if w.Election == name {
				ws = append(ws, w)
			}
		}
		r := Check(cfg, rs, ws, hists[name])
		if i == 0 {
			res = r
			continue
		}
		for _, v := range r.Violations {
			if v.Kind == "stuck" || v.Kind == "server" {
				continue
			}
			v.Msg = "election " + name + ": " + v.Msg
			res.Violations = append(res.Violations, v)
		}
		for j := range min(len(res.Faults), len(r.Faults)) {
			f, o := &res.Faults[j], r.Faults[j]
			if !o.Recovered {
				f.Recovered = false
			}
			for k, n := range o.Violations {
				if k == "stuck" || k == "server" {
					continue
				}
				if f.Violations == nil {
					f.Violations = map[string]int{}
				}
				f.Violations[k] += n
			}
		}
		res.Intervals = append(res.Intervals, r.Intervals...)
		res.TermsChecked += r.TermsChecked
		if r.HistoryChecked >= 0 {
			res.HistoryChecked = max(res.HistoryChecked, 0) + r.HistoryChecked
		}
		res.Writes += r.Writes
		res.FencedOK += r.FencedOK
		res.FencedRejected += r.FencedRejected
		res.Margins.merge(r.Margins)
	}
	return res
}
