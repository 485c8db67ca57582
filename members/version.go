package members

import (
	"cmp"
	"context"
	"strconv"
	"strings"
	"time"
)

// Follow says whether leadership follows the members' versions
// (Options.Follow).
type Follow uint8

const (
	// FollowNone: versions do not move leadership (the default).
	FollowNone Follow = iota
	// FollowNewest: the member with the newest version leads. During a
	// rolling upgrade, leadership moves to the first upgraded member once
	// it is healthy, and stays there.
	FollowNewest
	// FollowOldest: the member with the oldest version leads, which pins
	// leadership to the old version until the last old member stops.
	FollowOldest
)

// follow runs on the leader after each refresh: when a live, healthy
// member whose version should lead (Options.Follow) has been so for the
// hold-down, by the database clock, leadership moves to it by a planned
// transfer (Candidate.Transfer: milliseconds, no lease waited out). A
// transfer to a member that did not then lead is not asked again before
// the hold-down has passed. Versions that are not semantic versions
// (compareVersions) never move leadership.
func (m *member) follow(ctx context.Context) {
	hold := m.holdDown()
	best, ok := m.best(ctx, hold, Member{Version: m.o.Version, Incarnation: m.inc})
	now := m.cfg.Tuning.Clock.Now()
	if !ok || best.Incarnation == m.inc || best.Incarnation == m.asked && now.Before(m.askedUntil) {
		return
	}
	m.asked, m.askedUntil = best.Incarnation, now.Add(hold)
	m.transfer(ctx, best, "members: handing leadership to the member whose version leads")
}

// leave runs when Run's context ends, before the candidate's Run does: a
// leader that follows versions hands over to the other live, healthy
// member whose version should lead, hold-down or not, rather than to
// whichever follower looks first (a rolling upgrade's restart of the
// leader would otherwise move leadership to an old member, then again).
func (m *member) leave(ctx context.Context) {
	if m.o.Follow == FollowNone || !m.c.IsLeader() {
		return
	}
	if best, ok := m.best(ctx, 0, Member{}); ok && best.Incarnation != "" {
		m.transfer(ctx, best, "members: leaving; handing leadership to the member whose version leads")
	}
}

// best lists the members and returns the live, healthy one, other than
// this one, that has been so for hold and whose version should lead over
// from's (any semantic version when from is none), or from (ok when the
// list was read).
func (m *member) best(ctx context.Context, hold time.Duration, from Member) (Member, bool) {
	qctx, cancel := context.WithTimeout(ctx, m.cfg.Tuning.QueryTimeout)
	defer cancel()
	ms, err := List(qctx, m.db, m.cfg.Table, m.c.Name())
	if err != nil {
		return from, false // the next refresh tries again
	}
	best := from
	for _, o := range ms {
		if !o.Live || !o.Healthy || o.Incarnation == m.inc || o.LastSeen.Sub(o.Started) < hold {
			continue
		}
		if best.Incarnation == "" { // none yet (leave): the first semantic version
			if _, _, ok := parseVersion(o.Version); ok {
				best = o
			}
			continue
		}
		c, ok := compareVersions(o.Version, best.Version)
		if ok && (m.o.Follow == FollowNewest && c > 0 || m.o.Follow == FollowOldest && c < 0) {
			best = o
		}
	}
	return best, true
}

// transfer hands leadership to o (Candidate.Transfer), within the query
// timeout.
func (m *member) transfer(ctx context.Context, o Member, why string) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.Tuning.QueryTimeout)
	defer cancel()
	m.cfg.Tuning.Logger.Info(why, "election", m.c.Name(), "to", o.ID, "version", o.Version, "mine", m.o.Version)
	if err := m.c.Transfer(ctx, o.ID); err != nil {
		m.cfg.Tuning.Logger.Warn("members: transfer by version failed", "election", m.c.Name(), "to", o.ID, "err", err)
	}
}

// compareVersions compares two semantic versions (MAJOR.MINOR.PATCH, an
// optional leading v, an optional -prerelease, which sorts before the
// release, and +build, ignored): -1, 0 or 1, and ok false when either is
// not one. Pre-releases compare as text.
func compareVersions(a, b string) (int, bool) {
	pa, ra, oka := parseVersion(a)
	pb, rb, okb := parseVersion(b)
	if !oka || !okb {
		return 0, false
	}
	for i := range pa {
		if c := cmp.Compare(pa[i], pb[i]); c != 0 {
			return c, true
		}
	}
	switch {
	case ra == rb:
		return 0, true
	case ra == "":
		return 1, true
	case rb == "":
		return -1, true
	}
	return strings.Compare(ra, rb), true
}

// parseVersion splits a semantic version into its numbers and pre-release.
func parseVersion(v string) (nums [3]int, pre string, ok bool) {
	v, _, _ = strings.Cut(strings.TrimPrefix(v, "v"), "+")
	v, pre, _ = strings.Cut(v, "-")
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return nums, "", false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return nums, "", false
		}
		nums[i] = n
	}
	return nums, pre, true
}

// holdDown is how long a member's version must have been live and healthy
// before leadership follows it: Options.HoldDown, or the lease.
func (m *member) holdDown() time.Duration { return cmp.Or(m.o.HoldDown, m.cfg.LeaseDuration) }
