package chaos

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/history"
	"github.com/sqlelect/sqlelect/internal/floor"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func elected(id string, term uint64, ms int) Record {
	return Record{Event: "elected", ID: id, Term: term, Time: at(ms)}
}

func demoted(id string, term uint64, ms, untilMS int) Record {
	return Record{Event: "demoted", ID: id, Term: term, Time: at(ms), Until: at(untilMS), Reason: "lease_lost"}
}

func faultRec(kind string, ms, endMS int) Record {
	return Record{Event: "fault", Kind: kind, Time: at(ms), End: at(endMS)}
}

var cfg = Config{RenewDeadline: time.Second, Bound: 5 * time.Second, FenceSlack: 50 * time.Millisecond}

func kinds(r Result) string {
	var ks []string
	for _, v := range r.Violations {
		ks = append(ks, v.Kind)
	}
	return strings.Join(ks, ",")
}

func wantKinds(t *testing.T, r Result, want string) {
	t.Helper()
	if got := kinds(r); got != want {
		t.Errorf("violations %q, want %q", got, want)
		for _, v := range r.Violations {
			t.Log(v)
		}
	}
}

func TestCheckCleanHistory(t *testing.T) {
	recs := []Record{
		elected("a", 10, 0),
		faultRec("kill9", 1000, 1000),
		{Event: "killed", ID: "a", Time: at(1000)},
		elected("b", 11, 2600), // after kill + renew deadline
		faultRec("resign", 4000, 4000),
		demoted("b", 11, 4010, 4005),
		elected("c", 12, 4020),
		demoted("c", 12, 6000, 6000),
		{Event: "run_end", Time: at(5900)},
		{Event: "fenced_ok", ID: "a", Term: 10, Time: at(100)},
		{Event: "fenced_rejected", ID: "c", Term: 12, Time: at(6001)},
		{Event: "stats", ID: "b", Time: at(10), Errors: map[string]float64{"deadlock": 1}},
		{Event: "stats", ID: "b", Time: at(20), Errors: map[string]float64{"deadlock": 2}, ErrNumbers: map[string]float64{"3101": 2}},
		{Event: "stats", ID: "c", Time: at(20), Errors: map[string]float64{"deadlock": 3, "timeout": 1}, ErrNumbers: map[string]float64{"3101": 1, "1180/149": 2}},
	}
	writes := []Write{
		{Seq: 1, Term: 10, Who: "a", At: at(99)},
		{Seq: 2, Term: 10, Who: "a", At: at(900)},
		{Seq: 3, Term: 11, Who: "b", At: at(2700)},
		{Seq: 4, Term: 11, Who: "b", At: at(4004)},
		{Seq: 5, Term: 12, Who: "c", At: at(4100)},
	}
	r := Check(cfg, recs, writes, nil)
	wantKinds(t, r, "")
	if len(r.Intervals) != 3 || r.TermsChecked != 2 {
		t.Fatalf("intervals %v, terms checked %d", r.Intervals, r.TermsChecked)
	}
	if iv := r.Intervals[0]; iv.How != "killed" || !iv.End.Equal(at(2000)) {
		t.Errorf("killed leader's interval %v, want it to end at the kill plus the renew deadline", iv)
	}
	if len(r.Faults) != 2 {
		t.Fatalf("faults %v", r.Faults)
	}
	if f := r.Faults[0]; f.Survived || !f.Recovered || f.Failover != 1600*time.Millisecond {
		t.Errorf("kill9 outcome %+v", f)
	}
	if f := r.Faults[1]; f.Survived || !f.Recovered || f.Failover != 20*time.Millisecond {
		t.Errorf("resign outcome %+v", f)
	}
	if r.FencedOK != 1 || r.FencedRejected != 1 || r.Writes != 5 {
		t.Errorf("fenced ok %d rejected %d writes %d", r.FencedOK, r.FencedRejected, r.Writes)
	}
	if r.Errors["deadlock"] != 5 || r.Errors["timeout"] != 1 {
		t.Errorf("errors %v, want the last stats of each candidate summed", r.Errors)
	}
	if r.ErrNumbers["3101"] != 3 || r.ErrNumbers["1180/149"] != 2 {
		t.Errorf("error numbers %v, want the last stats of each candidate summed", r.ErrNumbers)
	}
}

func TestCheckOverlap(t *testing.T) {
	r := Check(cfg, []Record{
		elected("a", 10, 0),
		demoted("a", 10, 1500, 1200), // a believed it led until 1200
		elected("b", 11, 1100),       // b began at 1100: 100ms of two leaders
		demoted("b", 11, 3000, 3000),
	}, nil, nil)
	wantKinds(t, r, "overlap")
	if !strings.Contains(r.Violations[0].Msg, "100ms") {
		t.Errorf("message %q does not say how long", r.Violations[0].Msg)
	}
	if len(r.Violations[0].Evidence) != 3 {
		t.Errorf("evidence %v", r.Violations[0].Evidence)
	}
}

func TestCheckKilledLeaderOverlap(t *testing.T) {
	// a is killed while leading at 1000: it may lead until 2000.
	r := Check(cfg, []Record{
		elected("a", 10, 0),
		{Event: "killed", ID: "a", Time: at(1000)},
		{Event: "exited", ID: "a", Time: at(1010)},
		elected("b", 11, 1900),
		demoted("b", 11, 3000, 3000),
	}, nil, nil)
	wantKinds(t, r, "overlap")
}

func TestCheckOverlapWithLaterLeaderOnly(t *testing.T) {
	// The second leadership of a overlaps b's, not the first.
	r := Check(cfg, []Record{
		elected("a", 10, 0),
		demoted("a", 10, 5000, 5000),
		elected("a", 11, 5001),
		demoted("a", 11, 6000, 6000),
		elected("b", 12, 5500),
		demoted("b", 12, 7000, 7000),
	}, nil, nil)
	wantKinds(t, r, "overlap")
	if v := r.Violations[0]; !strings.Contains(v.Msg, "a (term 11) and b (term 12)") {
		t.Errorf("%v", v)
	}
}

func TestCheckTermMustIncrease(t *testing.T) {
	r := Check(cfg, []Record{
		elected("a", 10, 0),
		demoted("a", 10, 1000, 1000),
		elected("b", 10, 2000),
		demoted("b", 10, 3000, 3000),
		elected("c", 9, 4000),
		demoted("c", 9, 5000, 5000),
	}, nil, nil)
	wantKinds(t, r, "term,term")
	if r.TermsChecked != 2 {
		t.Errorf("terms checked %d", r.TermsChecked)
	}
}

func TestCheckLiveness(t *testing.T) {
	recs := []Record{
		elected("a", 10, 0),
		faultRec("sigstop", 1000, 3000),
		demoted("a", 10, 3001, 1100),
		elected("b", 11, 8001), // 5001ms after the fault ended: 1ms late
		demoted("b", 11, 9000, 9000),
	}
	r := Check(cfg, recs, nil, nil)
	wantKinds(t, r, "liveness")
	if f := r.Faults[0]; f.Recovered || f.Failover != 7001*time.Millisecond {
		t.Errorf("outcome %+v", f)
	}

	// On time, measured from the fault's end, not its start.
	recs[3] = elected("b", 11, 8000)
	wantKinds(t, Check(cfg, recs, nil, nil), "")

	// No leader at all after the fault.
	r = Check(cfg, []Record{
		elected("a", 10, 0),
		faultRec("dbrestart", 1000, 4000),
		demoted("a", 10, 1500, 1500),
		{Event: "run_end", Time: at(20000)},
	}, nil, nil)
	wantKinds(t, r, "liveness")
}

func TestCheckSurvivedFault(t *testing.T) {
	r := Check(cfg, []Record{
		elected("a", 10, 0),
		faultRec("killconn", 1000, 1000),
		faultRec("kill9", 1500, 1500), // the next fault comes first
		{Event: "killed", ID: "a", Time: at(1500)},
		elected("b", 11, 3500),
		demoted("b", 11, 9000, 9000),
	}, nil, nil)
	wantKinds(t, r, "")
	if f := r.Faults[0]; !f.Survived || !f.Recovered {
		t.Errorf("killconn outcome %+v, want survived", f)
	}
	if f := r.Faults[1]; f.Survived || f.Failover != 2*time.Second {
		t.Errorf("kill9 outcome %+v", f)
	}
}

func TestCheckProtocol(t *testing.T) {
	r := Check(cfg, []Record{
		demoted("x", 5, 0, 0), // without elected
		elected("a", 10, 100),
		elected("a", 11, 200), // twice
		demoted("a", 12, 300, 300),
		elected("b", 13, 400),
		{Event: "exited", ID: "b", Time: at(500)}, // exited leading
		elected("c", 14, 2000),                    // never demoted
	}, nil, nil)
	wantKinds(t, r, "protocol,protocol,protocol,protocol,protocol")
}

// TestCheckSameTermAgain: a renewal that lands after the deadline begins a
// new leadership of the same term (the Callbacks contract); the checker
// accepts it when nobody led in between, and matches writes to the
// leadership they were made in.
func TestCheckSameTermAgain(t *testing.T) {
	recs := []Record{
		elected("a", 10, 0),
		demoted("a", 10, 1000, 1000),
		elected("a", 10, 1200),
		demoted("a", 10, 2000, 2000),
		elected("b", 11, 3000),
		demoted("b", 11, 4000, 4000),
	}
	writes := []Write{{1, 10, "a", at(500), ""}, {2, 10, "a", at(1500), ""}, {3, 11, "b", at(3500), ""}}
	wantKinds(t, Check(cfg, recs, writes, nil), "")
	wantKinds(t, Check(cfg, recs, []Write{{1, 10, "a", at(1100), ""}}, nil), "fence") // between the two
	wantKinds(t, Check(cfg, []Record{                                                 // another led in between
		elected("a", 10, 0), demoted("a", 10, 1000, 1000),
		elected("b", 10, 1100), demoted("b", 10, 1150, 1150),
		elected("a", 10, 1200), demoted("a", 10, 2000, 2000),
	}, nil, nil), "term,term")
}

func TestCheckFence(t *testing.T) {
	recs := []Record{
		elected("a", 10, 0),
		demoted("a", 10, 1000, 1000),
		elected("b", 11, 2000),
		demoted("b", 11, 3000, 3000),
	}
	cases := []struct {
		name   string
		writes []Write
		want   string
	}{
		{"ok", []Write{{1, 10, "a", at(10), ""}, {2, 10, "a", at(1040), ""}, {3, 11, "b", at(2500), ""}}, ""},
		{"unknown term", []Write{{1, 12, "a", at(10), ""}}, "fence"},
		{"wrong writer", []Write{{1, 11, "a", at(2500), ""}}, "fence"},
		{"before its leadership", []Write{{1, 11, "b", at(1999), ""}}, "fence"},
		{"after its leadership", []Write{{1, 10, "a", at(1051), ""}}, "fence"},
		// a deposed leader's write committed after the next leader was
		// elected (and after its own leadership: two findings).
		{"after a higher term", []Write{{1, 10, "a", at(2001), ""}}, "fence,fence"},
		// ordered by the database clock, not by id
		{"ids out of order", []Write{{1, 10, "a", at(10), ""}, {2, 11, "b", at(2500), ""}, {3, 10, "a", at(20), ""}}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantKinds(t, Check(cfg, recs, tc.writes, nil), tc.want)
		})
	}

	// Interleaving that the per-interval checks cannot see: two leaders
	// whose intervals overlap (an overlap) wrote alternately.
	recs = []Record{
		elected("a", 10, 0),
		demoted("a", 10, 3000, 3000),
		elected("b", 11, 1000),
		demoted("b", 11, 4000, 4000),
	}
	r := Check(cfg, recs, []Write{{1, 11, "b", at(1500), ""}, {2, 10, "a", at(1600), ""}}, nil)
	wantKinds(t, r, "overlap,fence,fence")
}

func TestBound(t *testing.T) {
	got := Bound(1500*time.Millisecond, 1500*time.Millisecond, 200*time.Millisecond, 200*time.Millisecond,
		500*time.Millisecond, 0.2, time.Second)
	if want := 5340 * time.Millisecond; got != want {
		t.Errorf("Bound = %v, want %v", got, want)
	}
}

func statsRec(id string, beats uint64, ms int) Record {
	return Record{Event: "stats", ID: id, Beats: beats, Time: at(ms)}
}

func TestCheckStuckHeartbeats(t *testing.T) {
	recs := []Record{
		{Event: "started", ID: "a", Time: at(0)},
		statsRec("a", 3, 500),
		statsRec("a", 6, 1000),
		faultRec("net_halfopen_wake", 1100, 9000),
		statsRec("a", 7, 8000), // 7 s without a heartbeat: Run hung
		{Event: "started", ID: "b", Time: at(0)},
		statsRec("b", 3, 500),
		{Event: "fault", Kind: "sigstop", Target: "b", Time: at(600), End: at(7000)},
		statsRec("b", 4, 7100), // frozen meanwhile: not stuck
		{Event: "started", ID: "c", Time: at(0)},
		statsRec("c", 3, 500),
		{Event: "sigterm", ID: "c", Time: at(1000)},
		{Event: "exited", ID: "c", Time: at(1010)}, // exits at once: fine
		{Event: "started", ID: "d", Time: at(0)},
		statsRec("d", 3, 500),
		{Event: "sigterm", ID: "d", Time: at(1000)},
		{Event: "exited", ID: "d", Time: at(7000)}, // 6 s after SIGTERM
		{Event: "run_end", Time: at(9000)},
		statsRec("e", 1, 100),                       // its last heartbeat long before the run's end, never stopped
		{Event: "sigterm", ID: "e", Time: at(9100)}, // never exits
	}
	cfg := cfg
	cfg.StuckAfter = 5 * time.Second
	r := Check(cfg, recs, nil, nil)
	var msgs []string
	for _, v := range r.Violations {
		if v.Kind == "stuck" {
			msgs = append(msgs, v.Msg)
		}
	}
	want := []string{
		"a made no heartbeat for 7s (more than 5s) while running",
		"e made no heartbeat for 9s (more than 5s) while running",
		"d exited 6s after SIGTERM (more than 5s)",
		"e never exited after SIGTERM",
	}
	if strings.Join(msgs, "\n") != strings.Join(want, "\n") {
		t.Errorf("stuck violations:\n%s\nwant:\n%s", strings.Join(msgs, "\n"), strings.Join(want, "\n"))
	}
	// a's last heartbeat was just before the fault; it became a stall
	// during it, StuckAfter later.
	found := false
	for _, v := range r.Violations {
		if v.Kind == "stuck" && strings.HasPrefix(v.Msg, "a ") {
			found = true
			if !v.At.Equal(at(6000)) {
				t.Errorf("a's stall at %v, want %v", v.At, at(6000))
			}
		}
	}
	if !found {
		t.Error("a's stall not found")
	}
}

// TestCheckExcusesSuiteStalls: the suite's own stalls (harness_stall)
// extend the stuck and liveness bounds by the time they took, no more.
func TestCheckExcusesSuiteStalls(t *testing.T) {
	stall := func(ms, endMS int) Record { return Record{Event: "harness_stall", Time: at(ms), End: at(endMS)} }
	for _, tc := range []struct {
		name   string
		stalls []Record
		want   string // the violations' kinds
	}{
		{"no stall", nil, "liveness,stuck"},
		{"the gap stalled", []Record{stall(1000, 8000)}, ""},
		{"the same stall twice", []Record{stall(1000, 8000), stall(1500, 7000)}, ""},
		{"a stall too short", []Record{stall(1000, 3000)}, "liveness,stuck"},
		{"a stall elsewhere", []Record{stall(9500, 19000)}, "liveness,stuck"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs := append([]Record{
				elected("a", 10, 0),
				{Event: "started", ID: "a", Time: at(0)},
				statsRec("a", 3, 500),
				faultRec("kill_conn", 1000, 1000),
				demoted("a", 10, 1200, 1200),
				statsRec("a", 4, 9000), // 8.5 s without a heartbeat
				elected("b", 11, 9000), // 8 s after the fault
				demoted("b", 11, 9400, 9400),
				{Event: "run_end", Time: at(9500)},
			}, tc.stalls...)
			cfg := cfg
			cfg.StuckAfter = 5 * time.Second
			wantKinds(t, Check(cfg, recs, nil, nil), tc.want)
		})
	}
}

func TestCheckViolationsPerFault(t *testing.T) {
	recs := []Record{
		elected("a", 10, 0),
		faultRec("op_assume_resign", 1000, 3000),
		elected("b", 11, 1500), // a leads until 1800
		demoted("a", 10, 1900, 1800),
		demoted("b", 11, 4000, 4000),
		elected("c", 12, 4100),
		demoted("c", 12, 7100, 7100),
		faultRec("row_lock", 5000, 6000),
		{Event: "probe_failed", Time: at(5000), Detail: "3 of 10 new connections failed"},
		{Event: "run_end", Time: at(7000)},
	}
	r := Check(cfg, recs, nil, nil)
	wantKinds(t, r, "server,overlap")
	if got := r.Faults[0].Violations["overlap"]; got != 1 {
		t.Errorf("overlaps counted against op_assume_resign: %d, want 1", got)
	}
	if got := r.Faults[1].Violations["server"]; got != 1 {
		t.Errorf("server findings counted against row_lock: %d, want 1", got)
	}
}

func TestCheckElections(t *testing.T) {
	recs := []Record{
		{Event: "started", ID: "a", Time: at(0)},
		{Event: "elected", ID: "a", Term: 10, Time: at(0), Election: "e"},
		{Event: "elected", ID: "b", Term: 10, Time: at(100), Election: "e-2"},
		faultRec("kill9", 1000, 1000),
		{Event: "elected", ID: "c", Term: 20, Time: at(1500), Election: "e-2"}, // b still leads e-2
		{Event: "demoted", ID: "a", Term: 10, Time: at(3000), Until: at(3000), Election: "e"},
		{Event: "demoted", ID: "b", Term: 10, Time: at(3000), Until: at(3000), Election: "e-2"},
		{Event: "demoted", ID: "c", Term: 20, Time: at(3000), Until: at(3000), Election: "e-2"},
		{Event: "run_end", Time: at(3000)},
	}
	writes := []Write{{1, 10, "a", at(50), "e"}, {2, 10, "b", at(150), "e-2"}}
	r := CheckElections(cfg, recs, writes, []string{"e", "e-2"}, nil)
	wantKinds(t, r, "overlap")
	if r.Writes != 2 || len(r.Intervals) != 3 {
		t.Errorf("writes %d, intervals %d: want 2 and 3", r.Writes, len(r.Intervals))
	}
	if got := r.Faults[0].Violations["overlap"]; got != 1 {
		t.Errorf("overlaps counted against kill9: %d, want 1", got)
	}
	// One election: untagged records and writes.
	one := CheckElections(cfg, []Record{elected("a", 1, 0), demoted("a", 1, 10, 10)}, []Write{{1, 1, "a", at(5), ""}}, []string{"x"}, nil)
	wantKinds(t, one, "")
	if one.Writes != 1 {
		t.Errorf("one election: %d writes, want 1", one.Writes)
	}
}

func TestCheckMargins(t *testing.T) {
	recs := []Record{
		elected("a", 10, 0),
		statsRec("a", 1, 100),
		statsRec("a", 2, 900), // 800 ms without a heartbeat
		faultRec("kill9", 1000, 1000),
		{Event: "killed", ID: "a", Time: at(1000)}, // leads until 2000
		elected("b", 11, 2600),                     // 1.6 s after the kill
		faultRec("resign", 4000, 4100),
		demoted("b", 11, 4010, 4005),
		elected("c", 12, 4120), // 20 ms after the resign ended
		demoted("c", 12, 6000, 6000),
		{Event: "run_end", Time: at(6000)},
	}
	writes := []Write{
		{1, 10, "a", at(1990), ""}, // 10 ms before a's end
		{2, 11, "b", at(4030), ""}, // 25 ms after b's end: within the slack
	}
	r := Check(cfg, recs, writes, nil)
	wantKinds(t, r, "")
	want := Margins{NextLeader: 1600 * time.Millisecond, NextLeaderAfter: "kill9 (from its end)",
		FencedLate: 25 * time.Millisecond, Stall: 800 * time.Millisecond}
	if r.Margins != want {
		t.Errorf("margins %+v, want %+v", r.Margins, want)
	}
	// None after: the latest write's lead over its leadership's end.
	if r := Check(cfg, recs, writes[:1], nil); r.Margins.FencedLate != -10*time.Millisecond {
		t.Errorf("fenced late %v, want -10ms", r.Margins.FencedLate)
	}
	// Several elections: the larger of each.
	in := func(e string, r Record) Record { r.Election = e; return r }
	recs = []Record{
		in("e1", elected("a", 10, 0)),
		in("e2", elected("a", 20, 0)),
		faultRec("kill9", 1000, 1000),
		{Event: "killed", ID: "a", Time: at(1000)},
		in("e1", elected("b", 11, 2600)),
		in("e2", elected("b", 21, 4000)), // 3 s after the kill
		{Event: "run_end", Time: at(6000)},
	}
	if r := CheckElections(cfg, recs, nil, []string{"e1", "e2"}, nil); r.Margins.NextLeader != 3*time.Second {
		t.Errorf("merged margins %+v, want the next leader 3s after the kill", r.Margins)
	}
}

// row is a history row of term, held by holder, from ms to endMS (open when
// endMS is negative).
func row(term uint64, holder string, ms, endMS int) history.Term {
	r := history.Term{Term: term, Holder: holder, Began: "expired", Started: at(ms)}
	if endMS >= 0 {
		r.Ended, r.End = at(endMS), "expired"
	}
	return r
}

func TestCheckHistory(t *testing.T) {
	// a leads term 10 twice (a renewal after its deadline), b term 11, c
	// term 13; term 12 is an operator's Assume of d, who never led.
	recs := []Record{
		elected("a", 10, 0), demoted("a", 10, 1000, 1000),
		elected("a", 10, 1200), demoted("a", 10, 2000, 2000),
		elected("b", 11, 3000), demoted("b", 11, 4000, 4000),
		elected("c", 13, 5000), demoted("c", 13, 6000, 6000),
	}
	clean := []history.Term{row(10, "a", 0, 2500), row(11, "b", 2500, 4500), row(12, "d", 4500, 4900), row(13, "c", 4900, -1)}
	for _, tc := range []struct {
		name    string
		rows    []history.Term
		from    uint64
		want    string
		checked int
	}{
		{"clean", clean, 0, "", 3},
		{"ends unknown", []history.Term{row(10, "a", 0, -1), row(11, "b", 2500, -1), row(13, "c", 4900, -1)}, 0, "", 3},
		{"missing row", []history.Term{clean[0], clean[2], clean[3]}, 0, "history", 3},
		{"missing row before the oldest kept", clean[1:], 11, "", 2},
		{"missing row, an older one kept", []history.Term{row(9, "x", -500, 0), clean[1], clean[2], clean[3]}, 0, "history", 3},
		{"wrong holder", []history.Term{clean[0], row(11, "a", 2500, 4500), clean[2], clean[3]}, 0, "history", 3},
		{"two rows of a term", []history.Term{clean[0], row(11, "b", 2500, -1), row(11, "b", 2500, 4500), clean[2], clean[3]}, 0, "history,history", 3},
		{"terms out of order", []history.Term{clean[1], clean[0], clean[2], clean[3]}, 0, "history,history,history", 3},
		{"start goes back", []history.Term{clean[0], row(11, "b", 2500, -1), row(12, "d", 2400, 2450), clean[3]}, 0, "history", 3},
		{"ends before it starts", []history.Term{clean[0], clean[1], row(12, "d", 4500, 4400), clean[3]}, 0, "history", 3},
		{"ends after the next starts", []history.Term{clean[0], clean[1], row(12, "d", 4500, 4950), clean[3]}, 0, "history", 3},
		{"no history", nil, 0, "history,history,history", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Check(cfg, recs, nil, &History{Terms: tc.rows, From: tc.from})
			wantKinds(t, r, tc.want)
			if r.HistoryChecked != tc.checked {
				t.Errorf("%d leaderships checked against the history, want %d", r.HistoryChecked, tc.checked)
			}
		})
	}
	if r := Check(cfg, recs, nil, nil); r.HistoryChecked != -1 {
		t.Errorf("no history: %d leaderships checked, want -1", r.HistoryChecked)
	}
	// Per election.
	tagged := []Record{
		{Event: "elected", ID: "a", Term: 10, Time: at(0), Election: "e"},
		{Event: "elected", ID: "b", Term: 20, Time: at(0), Election: "e-2"},
		{Event: "demoted", ID: "a", Term: 10, Time: at(100), Until: at(100), Election: "e"},
		{Event: "demoted", ID: "b", Term: 20, Time: at(100), Until: at(100), Election: "e-2"},
	}
	r := CheckElections(cfg, tagged, nil, []string{"e", "e-2"}, map[string]*History{
		"e": {Terms: []history.Term{row(10, "a", 0, -1)}}, "e-2": {Terms: []history.Term{row(20, "a", 0, -1)}}})
	wantKinds(t, r, "history")
	if r.HistoryChecked != 2 || !strings.HasPrefix(r.Violations[0].Msg, "election e-2: ") {
		t.Errorf("checked %d, violations %v: want 2 checked and e-2's wrong holder", r.HistoryChecked, r.Violations)
	}
}

func TestMergeHistory(t *testing.T) {
	terms := func(h History) (out []uint64) {
		for _, r := range h.Terms {
			out = append(out, r.Term)
		}
		return out
	}
	// Read before the floor row went (terms 1 to 3), then after terms 4
	// and 5 went over slots 0 and 1: the later reading wins for term 3.
	before := []history.Term{row(1, "a", 0, 10), row(2, "b", 10, 20), row(3, "c", 20, -1)}
	after := []history.Term{row(3, "c", 20, 30), row(4, "d", 30, 40), row(5, "e", 40, -1)}
	h := mergeHistory([][]history.Term{before, after})
	if got := terms(h); !slices.Equal(got, []uint64{1, 2, 3, 4, 5}) || h.From != 0 || h.Terms[2].Ended.IsZero() {
		t.Errorf("merged %v from %d (term 3 ended %v): want 1 to 5 from 0, term 3 ended", got, h.From, h.Terms[2].Ended)
	}
	// Two rows of a term in one reading stay.
	if got := terms(mergeHistory([][]history.Term{before, append(after, row(5, "f", 40, -1))})); !slices.Equal(got, []uint64{1, 2, 3, 4, 5, 5}) {
		t.Errorf("merged %v: want both rows of term 5", got)
	}
	// A full reading: checked from its oldest term.
	var full []history.Term
	for i := range floor.HistoryKeep {
		full = append(full, row(uint64(10+i), "a", i, -1))
	}
	if h := mergeHistory([][]history.Term{before, full}); h.From != 10 {
		t.Errorf("from %d, want 10 (the full reading's oldest)", h.From)
	}
}
