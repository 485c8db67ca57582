package electiontest

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Compound faults: a leader cut off from the database still leads by its
// clock for up to its renew deadline, and meanwhile operators act and the
// candidate they named gives the row up again. Nobody may lead before the
// cut-off leader has stood down: a holder that never led hands on the lock
// delay it had not served, and never a released row that others take at
// once.

// op is one step of a compound fault.
type op struct {
	name string
	do   func(c *cluster, cut, holder *member) error
}

var (
	opNone    = op{"nothing", func(*cluster, *member, *member) error { return nil }}
	opReelect = op{"reelect", func(c *cluster, _, _ *member) error {
		_, err := ops(c.admin).Reelect(c.ctx, c.name)
		return err
	}}
	opAssumeF  = op{"assume", func(c *cluster, cut, _ *member) error { return c.assumeOther(cut) }}
	opResignH  = op{"resign the holder", func(c *cluster, _, h *member) error { return h.e.Resign(c.ctx) }}
	opStopH    = op{"stop the holder", func(c *cluster, _, h *member) error { return c.stop(h) }}
	compoundOf = []struct{ first, then op }{
		{opAssumeF, opResignH},
		{opAssumeF, opStopH},
		{opAssumeF, opReelect},
		{opReelect, opReelect},
		{opReelect, opResignH},
		{opNone, opReelect},
		{opNone, opResignH},
	}
)

// testCompound cuts the leader off, runs the first operator step, waits
// until another candidate holds the row (typically still waiting out its
// lock delay), runs the second step on it, and checks that the next leader
// starts only after the cut-off leader stood down.
func testCompound(t *testing.T, s Suite) {
	for _, tc := range compoundOf {
		t.Run(tc.first.name+" then "+tc.then.name, func(t *testing.T) {
			t.Parallel()
			c := newCluster(t, s, true)
			c.startN(4)
			l, _ := c.waitLeader(takeoverBound, nil)
			c.cutOff(l)
			cut := time.Now()
			if err := tc.first.do(c, l, nil); err != nil {
				t.Fatalf("%s: %v", tc.first.name, err)
			}
			h := c.waitHolder(l)
			if err := tc.then.do(c, l, h); err != nil && !errors.Is(err, context.Canceled) {
				t.Fatalf("%s: %v", tc.then.name, err)
			}
			acted := time.Now()
			nl, at := c.waitLeader(takeoverBound+Lease, l)
			t.Logf("cut off %s; %s, %s held, %s %v later; %s leads %v after the cut",
				l.id, tc.first.name, h.id, tc.then.name, acted.Sub(cut).Round(time.Millisecond),
				nl.id, at.Sub(cut).Round(time.Millisecond))
			// finish (t.Cleanup) checks that no two leaderships overlap,
			// the cut-off leader's ending at its own deadline.
		})
	}
}

// cutOff makes a candidate unreachable from the database while its Run goes
// on: its *sql.DB is closed (every new statement fails) and the server kills
// the connections it holds (a lock or handover connection). It keeps
// leading by its clock until its renew deadline.
func (c *cluster) cutOff(m *member) {
	m.db.Close()
	c.killConnections(m)
}

// assumeOther forces a running candidate other than not to lead.
func (c *cluster) assumeOther(not *member) error {
	c.mu.Lock()
	var to *member
	for _, m := range c.member {
		if m != not && !m.exited {
			to = m
			break
		}
	}
	c.mu.Unlock()
	_, err := ops(c.admin).Assume(c.ctx, c.name, to.id)
	return err
}

// waitHolder waits until a candidate other than not holds the row by its
// own write (not an operator's), and returns it.
func (c *cluster) waitHolder(not *member) *member {
	c.t.Helper()
	var holder *member
	if !poll(takeoverBound, time.Millisecond, func() bool {
		rec, _ := ops(c.admin).Status(c.ctx, c.name)
		if rec.ID != "" && rec.ID != not.id && rec.Acquired != "operator" && !rec.Released {
			c.mu.Lock()
			defer c.mu.Unlock()
			for _, m := range c.member {
				if m.id == rec.ID {
					holder = m
				}
			}
		}
		return holder != nil
	}) {
		c.t.Fatalf("no candidate other than %s took the row within %v", not.id, takeoverBound)
	}
	return holder
}
