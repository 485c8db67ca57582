package probe

import (
	"database/sql"
	"errors"
	"math"
	"testing"
)

// TestChecksEndWithTopology: Preflight runs the server's heartbeat probe
// (Server, which refuses an unsafe server) when its loop reaches the
// topology check, which must therefore be the last of Checks: removed, or
// with a check after it, the probe would be skipped or come too early.
func TestChecksEndWithTopology(t *testing.T) {
	cs := Checks("service_election")
	if len(cs) == 0 || cs[len(cs)-1].Prop != Topology {
		t.Fatalf("the last check is not %s: %v", Topology, cs)
	}
	for _, c := range cs[:len(cs)-1] {
		if c.Prop == Topology {
			t.Errorf("%s is checked twice", Topology)
		}
	}
}

// TestSessionJudges: each check of the session's settings judges the one
// read Run's preflight makes of them (readSession), and refuses what the
// separate reads it replaced refused.
func TestSessionJudges(t *testing.T) {
	safe := session{dst: sql.NullInt64{Int64: 181 * 24 * 3600, Valid: true}, timeZone: "+00:00", autocommit: "1",
		completion: "NO_CHAIN", sqlMode: "STRICT_TRANS_TABLES", selectLimit: math.MaxUint64, start: "2026-11-29 01:00:00.000001", sysdate: "2026-11-29 01:00:00.000042"}
	for _, c := range Checks("service_election") {
		if (c.run == nil) == (c.judge == nil) {
			t.Errorf("%s: want either a run or a judge", c.Prop)
		}
		if c.judge != nil {
			if err := c.judge(safe); err != nil {
				t.Errorf("%s on a safe session: %v", c.Prop, err)
			}
		}
	}
	for _, tc := range []struct {
		name  string
		judge func(session) error
		set   func(*session)
		want  error
	}{
		{"a zone with DST", judgeTimeZone, func(s *session) { s.dst.Int64 -= 3600 }, ErrUnsafeTimeZone},
		{"no DST probe", judgeTimeZone, func(s *session) { s.dst = sql.NullInt64{} }, ErrUnsafeTimeZone},
		{"autocommit=0", judgeCommits, func(s *session) { s.autocommit = "0" }, ErrNoAutocommit},
		{"completion_type=CHAIN", judgeCommits, func(s *session) { s.completion = "chain" }, ErrNoAutocommit},
		{"completion_type=1", judgeCommits, func(s *session) { s.completion = "1" }, ErrNoAutocommit},
		{"SIMULTANEOUS_ASSIGNMENT", judgeAssignmentOrder, func(s *session) { s.sqlMode += ",simultaneous_assignment" }, ErrSimultaneousAssignment},
		{"SYSDATE() is NOW()", judgeSysdate, func(s *session) { s.sysdate = s.start }, ErrSysdateIsNow},
		{"sql_select_limit=1000", judgeSelectLimit, func(s *session) { s.selectLimit = 1000 }, ErrSelectLimit},
		{"sql_select_limit=0", judgeSelectLimit, func(s *session) { s.selectLimit = 0 }, ErrSelectLimit},
		{"sql_select_limit=2^31-2", judgeSelectLimit, func(s *session) { s.selectLimit = math.MaxInt32 - 1 }, ErrSelectLimit},
		{"sql_select_limit=2^31-1 (go-mysql-server's default)", judgeSelectLimit, func(s *session) { s.selectLimit = math.MaxInt32 }, nil},
	} {
		s := safe
		tc.set(&s)
		if err := tc.judge(s); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}
