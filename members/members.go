// Package members registers the candidates of an election in the members
// table (migration 9: service_election_members, or <table>_members), so
// that an operator can list who runs, with its version, host, priority,
// health and when it was last seen, and so that a second process started
// with the ID of a live member is refused instead of fighting it for the
// row.
//
// Run wraps a candidate's Run: it registers the member, runs the candidate,
// refreshes the member's row every half lease while it runs, and deletes
// the row when Run returns. A member is live while its last refresh is
// within its lease, by the database clock. The election's own statements
// never read the table: the election protocol, and every guarantee of
// package election, is unchanged; a candidate not run through Run simply
// is not listed.
//
//	c, err := election.NewTable(db, cfg)
//	…
//	err = members.Run(ctx, db, c, cfg, members.Options{Version: "1.4.2"})
//	var dup *members.DuplicateError
//	if errors.As(err, &dup) { … another live process has this ID: dup.Other … }
//
// List reads the members of an election.
package members

import (
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/dbclock"
	"github.com/sqlelect/sqlelect/internal/ident"
	"github.com/sqlelect/sqlelect/internal/mysqlerr"
	"github.com/sqlelect/sqlelect/internal/probe"
)

// ErrDuplicateID means that a live member of the election has the
// candidate's ID and another incarnation: another process runs with it.
// Run returns it in a *DuplicateError, without campaigning; the earlier
// member keeps its place.
var ErrDuplicateID = errors.New("members: a live member of the election has this ID")

// DuplicateError is Run's error when another process runs with the
// candidate's ID: Other is that member.
type DuplicateError struct{ Other Member }

func (e *DuplicateError) Error() string {
	return fmt.Sprintf("%v: %q, running on host %q since %s (version %q); give each process its own ID",
		ErrDuplicateID, e.Other.ID, e.Other.Host, e.Other.Started.UTC().Format(time.RFC3339), e.Other.Version)
}

func (e *DuplicateError) Unwrap() error { return ErrDuplicateID }

// Member is one member of an election, as List reads it.
type Member struct {
	Election    string    `json:"election"`
	ID          string    `json:"id"`
	Incarnation string    `json:"incarnation"` // new for each Run
	Version     string    `json:"version"`
	Host        string    `json:"host"`
	Priority    int       `json:"priority"`
	Healthy     bool      `json:"healthy"` // its candidate campaigns (its first step began), and its latest health check passed (true without one)
	Started     time.Time `json:"started"` // by the database clock, UTC
	LastSeen    time.Time `json:"last_seen"`
	// Live is true while LastSeen is within Lease of the database clock.
	Live  bool          `json:"live"`
	Lease time.Duration `json:"-"`
	// PID is the member's process ID on Host.
	PID int `json:"pid"`
}

// Candidate is what Run needs of a candidate: *election.Candidate is one.
type Candidate interface {
	Run(ctx context.Context) error
	Name() string
	ID() string
	Progress() election.Progress
	IsLeader() bool
	Transfer(ctx context.Context, to string) error
}

// Options describe a member beyond its candidate's Config.
type Options struct {
	// Version is the member's version. Default: the main module's version
	// from the build info ("(devel)" for a build outside a module
	// version, "" when there is none).
	Version string
	// Host is where the member runs. Default: os.Hostname.
	Host string
	// Follow makes leadership follow the members' versions (FollowNewest
	// or FollowOldest): the leader hands over, by a transfer, to a live,
	// healthy member whose version should lead once that member has been
	// so for HoldDown; and when Run's context ends, to the live, healthy
	// member whose version should lead, at once (rather than to whichever
	// follower looks first). Default FollowNone.
	Follow Follow
	// HoldDown is how long a member must have run before leadership
	// follows its version, and how long a transfer to it that did not make
	// it lead is not asked again. Default: the lease.
	HoldDown time.Duration
	// Batcher, when set, refreshes the member's row together with the
	// other members of the Batcher (see Batcher): one statement for many
	// elections. It must be for the election's table. Default nil: the
	// member refreshes on its own.
	Batcher *Batcher
}

// Table returns the members table of election table table (default
// service_election): table + "_members", as the term floor's is
// table + "_floor".
func Table(table string) string { return cmp.Or(table, election.DefaultTable) + "_members" }

// Run registers c, a candidate built with cfg on db, as a member of its
// election, then runs c.Run(ctx) and returns its result once the member's
// row is deleted again. While Run runs, the row is refreshed every half
// lease (cfg.LeaseDuration) with the candidate's priority and health, and
// with o.Follow the leader then hands leadership over to the member whose
// version should lead (see Follow).
//
// When a live member has c's ID with another incarnation, Run returns a
// *DuplicateError (ErrDuplicateID) before campaigning. If that happens
// later (this member's row expired, during a stall longer than the lease,
// and another process registered with the ID meanwhile), Run stops the
// candidate (its Run ends as when ctx ends: it stands down and releases)
// and returns that error: the earlier live member keeps its place.
//
// A missing members table is an error wrapping election.ErrTableMissing:
// run the migrations (sqlelect migrate up).
func Run(ctx context.Context, db *sql.DB, c Candidate, cfg election.Config, o Options) error {
	cfg, err := cfg.WithDefaults()
	if err != nil {
		return err
	}
	if o.Batcher != nil {
		if err := o.Batcher.check(cfg); err != nil {
			return err
		}
	}
	m := member{db: db, c: c, cfg: cfg, tbl: ident.Quote(Table(cfg.Table)), o: o}
	m.o.Version = cmp.Or(o.Version, mainVersion())
	if m.o.Host == "" {
		m.o.Host, _ = os.Hostname()
	}
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	m.inc = hex.EncodeToString(b[:])
	if err := m.registerUntil(ctx); err != nil || ctx.Err() != nil {
		return err
	}
	// The candidate's Run outlives ctx by the leaving leader's transfer
	// (leave), and ends with stop.
	rctx, stop := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stop(nil)
	done := make(chan error, 1)
	go func() { done <- c.Run(rctx) }()
	var lost error // set when another incarnation took the ID
	quit := ctx.Done()
	m.due = cfg.Tuning.Clock.Now().Add(cfg.Tuning.RetryInterval)
	for {
		// Every retry interval until the row says healthy (the
		// candidate campaigns), then every half lease. Meanwhile the
		// candidate's progress is looked at every campaignPoll (no
		// statement), and the row refreshed as soon as it campaigns: a
		// shard group gives a member its share once it says healthy.
		every := min(cfg.Tuning.RetryInterval, campaignPoll)
		if m.campaigns {
			every = m.untilRefresh(cfg.LeaseDuration / 2)
		}
		t := newTimer(cfg.Tuning.Clock, every)
		select {
		case err := <-done:
			t.stop()
			if lost != nil {
				return lost
			}
			m.remove()
			return err
		case <-quit:
			t.stop()
			quit = nil
			m.leave(rctx)
			stop(context.Cause(ctx))
			continue
		case <-t.c:
		}
		if lost != nil || quit == nil { // the candidate is stopping
			continue
		}
		if !m.refreshDue() {
			continue
		}
		refresh := m.refresh
		if m.o.Batcher != nil {
			refresh = m.refreshBatched
		}
		if err := refresh(ctx); errors.Is(err, ErrDuplicateID) {
			lost = err
			stop(err) // the candidate stands down; its Run returns
		} else if m.o.Follow != FollowNone && c.IsLeader() {
			m.follow(rctx)
		}
		// Another error (the database does not answer) is the campaign's
		// to report: the next refresh tries again.
	}
}

// campaignPoll is how often Run looks whether its candidate campaigns
// yet, until it does.
const campaignPoll = 10 * time.Millisecond

// campaigning reports whether a candidate's campaign began: its Run runs
// and took its first step. Run takes that step a moment before it says it
// runs, so the first alone could say healthy a candidate not yet running.
func campaigning(p election.Progress) bool { return p.Running && !p.LastStep.IsZero() }

// refreshDue reports whether the row is to be refreshed now: always once
// the candidate campaigns (Run's timer says when), and before that when
// it begins to campaign, or a retry interval after the last refresh.
func (m *member) refreshDue() bool {
	now := m.cfg.Tuning.Clock.Now()
	if !m.campaigns && !campaigning(m.c.Progress()) && now.Before(m.due) {
		return false
	}
	m.due = now.Add(m.cfg.Tuning.RetryInterval)
	return true
}

// member is a member Run keeps.
type member struct {
	db  *sql.DB
	c   Candidate
	cfg election.Config
	tbl string // the members table, quoted
	o   Options
	inc string // the incarnation
	// asked is the incarnation the leader last transferred to by version
	// (follow), not asked again before askedUntil.
	asked      string
	askedUntil time.Time
	// campaigns is set once the candidate's campaign began (its first
	// step): until then the row says not healthy.
	campaigns bool
	due       time.Time // before it campaigns: the next refresh (refreshDue)
}

// live is true for a member row whose last refresh is within its lease by
// the database clock.
const live = `last_seen + lease_ms * 1000 > ` + dbclock.TermNow

// registerUntil registers the member (register), again every retry
// interval while that fails for a reason that may pass (the database does
// not answer), until ctx ends: then it returns nil, as Run does.
func (m *member) registerUntil(ctx context.Context) error {
	for failed := false; ; failed = true {
		err := m.register(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err == nil || errors.Is(err, ErrDuplicateID) || probe.Permanent(err) {
			return err
		}
		if errors.Is(err, election.ErrUnsafeSession) { // one connection's session, or the DSN's: Run's preflight tells
			if err := m.preflight(ctx); err != nil {
				return err
			}
		}
		if !failed {
			m.cfg.Tuning.Logger.Warn("members: registering failed; retrying", "election", m.c.Name(), "id", m.c.ID(), "err", err)
		}
		t := newTimer(m.cfg.Tuning.Clock, m.cfg.Tuning.RetryInterval)
		select {
		case <-t.c:
		case <-ctx.Done():
			t.stop()
			return nil
		}
	}
}

// preflight runs Run's preflight (probe.Preflight) and returns its
// refusal of the database clock (a DST time zone in the DSN, a server run
// with --sysdate-is-now), with what to do; nil otherwise: the session
// state of one pooled connection, which retrying may get past.
func (m *member) preflight(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.Tuning.QueryTimeout)
	defer cancel()
	_, err := probe.Preflight(ctx, m.db, m.cfg.Table, probe.Lock, probe.Privileges(ident.Quote(m.cfg.Table))[0].Query)
	if errors.Is(err, probe.ErrUnsafeTimeZone) || errors.Is(err, probe.ErrUnknownTimeZone) || errors.Is(err, probe.ErrSysdateIsNow) {
		return fmt.Errorf("members: %w", err)
	}
	return nil
}

// register deletes an expired row of the candidate's ID and inserts its
// own: a live one of another incarnation makes the INSERT fail on the key,
// and register returns it in a DuplicateError, unless it is an earlier
// process of this host that is gone (a crash, then a restart: its PID no
// longer runs, or is this process's own, in a new container), whose row
// it deletes. The clock is trusted only
// on a session without daylight saving time and without --sysdate-is-now
// (dbclock.Trusted): else the anchor is NULL and the INSERT fails.
func (m *member) register(ctx context.Context) error {
	qctx, cancel := context.WithTimeout(ctx, m.cfg.Tuning.QueryTimeout)
	defer cancel()
	name, id := m.c.Name(), m.c.ID()
	insert := `INSERT INTO ` + m.tbl + ` (anchor, member_id, incarnation, version, host, pid, priority, healthy, started_at, last_seen, lease_ms)
VALUES (IF(` + dbclock.Trusted + `, ?, NULL), ?, ?, ?, ?, ?, ?, ?, ` + dbclock.TermNow + `, ` + dbclock.TermNow + `, ?)`
	args := []any{name, id, m.inc, m.o.Version, m.o.Host, os.Getpid(), m.cfg.Preference.Priority, m.healthy(), m.cfg.LeaseDuration.Milliseconds()}
	gone := "" // the incarnation of a gone process of this host
	for try := 1; ; try++ {
		if _, err := m.db.ExecContext(qctx, `DELETE FROM `+m.tbl+` WHERE anchor = ? AND member_id = ? AND (NOT (`+live+`) OR incarnation = ?) AND `+dbclock.Trusted,
			name, id, gone); err != nil {
			return classify(err, Table(m.cfg.Table))
		}
		_, err := m.db.ExecContext(qctx, insert, args...)
		if mysqlerr.Errno(err) != 1062 || try == 3 { // ER_DUP_ENTRY: another incarnation's row
			return classify(err, Table(m.cfg.Table))
		}
		others, err := List(qctx, m.db, m.cfg.Table, name)
		if err != nil {
			return err
		}
		for _, o := range others {
			if o.ID != id || !o.Live {
				continue
			}
			if o.Host != m.o.Host || o.PID != os.Getpid() && running(o.PID) {
				return &DuplicateError{Other: o}
			}
			gone = o.Incarnation
		}
		// It expired or went away meanwhile, or its process is gone: again.
	}
}

// healthy is what the member's row says of its health: its candidate
// campaigns (its first step began) and its latest health check passed.
func (m *member) healthy() bool {
	p := m.c.Progress()
	m.campaigns = m.campaigns || campaigning(p)
	return m.campaigns && p.Healthy
}

// refresh writes the member's last_seen, priority and health; when its row
// is gone (deleted, or expired and taken by another incarnation) it
// registers again.
func (m *member) refresh(ctx context.Context) error {
	qctx, cancel := context.WithTimeout(ctx, m.cfg.Tuning.QueryTimeout)
	defer cancel()
	res, err := m.db.ExecContext(qctx, `UPDATE `+m.tbl+` SET last_seen = `+dbclock.TermNow+`, healthy = ?, priority = ?
WHERE anchor = ? AND member_id = ? AND incarnation = ? AND `+dbclock.Trusted,
		m.healthy(), m.cfg.Preference.Priority, m.c.Name(), m.c.ID(), m.inc)
	if err != nil {
		return classify(err, Table(m.cfg.Table))
	}
	if n, err := res.RowsAffected(); err != nil || n == 1 {
		return err
	}
	return m.register(ctx)
}

// remove deletes the member's row, on a context of its own: Run's may have
// ended. A failure is logged: Run returns the candidate's result, and the
// row is gone from the live members once its lease runs out.
func (m *member) remove() {
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.Tuning.QueryTimeout)
	defer cancel()
	_, err := m.db.ExecContext(ctx, `DELETE FROM `+m.tbl+` WHERE anchor = ? AND member_id = ? AND incarnation = ?`, m.c.Name(), m.c.ID(), m.inc)
	if err != nil { // the row then stays until its lease runs out
		m.cfg.Tuning.Logger.Warn("members: removing the member's row failed", "election", m.c.Name(), "id", m.c.ID(), "err", classify(err, Table(m.cfg.Table)))
	}
}

// classify names the members table tbl in err, with the sentinel of
// package election it means (probe.Classify), and says how to create the
// table when it is missing.
func classify(err error, tbl string) error {
	if err == nil {
		return nil
	}
	if mysqlerr.Errno(err) == mysqlerr.BadNull {
		return fmt.Errorf("members: %w: %w", election.ErrUnsafeSession, err)
	}
	if err = probe.Classify(err, tbl); errors.Is(err, election.ErrTableMissing) {
		return fmt.Errorf("members: %w (migration 9: run the migrations, sqlelect migrate up)", err)
	}
	return fmt.Errorf("members: %w", err)
}

// List returns the members of election name in election table table
// (default service_election), live or not, ordered by ID.
func List(ctx context.Context, db *sql.DB, table, name string) ([]Member, error) {
	rows, err := db.QueryContext(ctx, `SELECT member_id, incarnation, version, host, pid, priority, healthy, started_at, last_seen, lease_ms, `+live+`
FROM `+ident.Quote(Table(table))+` WHERE anchor = ? ORDER BY member_id`, name)
	if err != nil {
		return nil, classify(err, Table(table))
	}
	defer rows.Close()
	var ms []Member
	for rows.Next() {
		m := Member{Election: name}
		var started, seen, lease int64
		if err := rows.Scan(&m.ID, &m.Incarnation, &m.Version, &m.Host, &m.PID, &m.Priority, &m.Healthy, &started, &seen, &lease, &m.Live); err != nil {
			return nil, fmt.Errorf("members: reading %s: %w", Table(table), err)
		}
		m.Started, m.LastSeen, m.Lease = time.UnixMicro(started).UTC(), time.UnixMicro(seen).UTC(), time.Duration(lease)*time.Millisecond
		ms = append(ms, m)
	}
	return ms, rows.Err()
}

// mainVersion is the main module's version from the build info, "" when
// the binary has none.
func mainVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return strings.TrimSpace(bi.Main.Version)
	}
	return ""
}

// timer is a one-shot timer of cfg's clock, or of the time package.
type timer struct {
	c    <-chan time.Time
	stop func()
}

func newTimer(clock election.Clock, d time.Duration) timer {
	if clock == nil {
		t := time.NewTimer(d)
		return timer{c: t.C, stop: func() { t.Stop() }}
	}
	t := clock.NewTimer(d)
	return timer{c: t.C(), stop: func() { t.Stop() }}
}
