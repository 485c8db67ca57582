package election

import (
	"context"
	"database/sql"
	"encoding/json"
	"time"
)

// Election is one candidate in one election. *Candidate implements it, as
// made by either backend: NewTable (the service_election row and its
// heartbeat) and NewLock (MySQL GET_LOCK on a dedicated connection).
//
// All methods are safe for concurrent use.
type Election interface {
	// Run campaigns until ctx ends, then resigns (if it leads) and returns
	// nil once every goroutine it started has exited. A leader's renewal in
	// flight when ctx ends is let finish first (at most QueryTimeout, and
	// as much again for the read that may follow it), so that the release
	// follows it in order, and so is a table-backend follower's take, which
	// it then gives up without leading; the resign itself is bounded by
	// QueryTimeout too. It returns early with
	// an error only for problems retrying cannot fix: a missing table
	// (ErrTableMissing), missing privileges (ErrAccessDenied), an outdated
	// schema (ErrSchemaMismatch), an unsafe time zone (ErrUnsafeTimeZone), a
	// session that assigns simultaneously (ErrSimultaneousAssignment),
	// does not commit each statement (ErrNoAutocommit) or cuts reads short
	// (ErrSelectLimit), a server with --sysdate-is-now (ErrSysdateIsNow) or
	// an unsupported topology (ErrUnsupportedTopology); it stands down first.
	// Database errors while running are retried: any error means "not
	// leader this tick", never a guess. A second concurrent call returns
	// ErrAlreadyRunning.
	Run(ctx context.Context) error

	// IsLeader reports whether this candidate leads now. It reads the local
	// monotonic clock: it turns false when the lease this candidate last
	// renewed runs out (RenewDeadline after it sent the renewal), even if
	// the process was frozen past that instant and no goroutine has run
	// since. It never blocks and does not allocate.
	IsLeader() bool

	// Term returns the fencing term of the current leadership, or 0 when
	// this candidate does not lead. Every leadership's term is above every
	// earlier leadership's of the election, across Assume, Reelect, a plain
	// DELETE or REPLACE and a database clock set back (the term floor, see
	// the package documentation); pass the term to systems outside MySQL as
	// a fencing token (like Consul's sequencer or etcd's revision).
	Term() uint64

	// Leader reads who leads from the database. When nobody holds a live
	// lease it returns the last record (if any) and an error wrapping
	// ErrNoLeader.
	Leader(ctx context.Context) (Record, error)

	// Resign stands this candidate down if it leads: the elected context is
	// cancelled, OnElected is waited for, OnDemoted is called, and the row
	// is marked released so another candidate takes over at once. A
	// candidate that holds the row but does not lead yet (it is waiting out
	// its lock delay) gives the row up too, but with the rest of that delay:
	// the row expires when the delay would have ended. The candidate then
	// sits out for two retry intervals (after that delay) before
	// campaigning again. Resign returns nil when this candidate does not lead, and an
	// error when Run is not running (ErrNotRunning) or ctx ends first.
	//
	// Called from OnElected (the leader giving up from its own work), pass
	// OnElected's context or one derived from it: the stand-down waits for
	// OnElected to return, so the call returns ctx.Err() once that context
	// is cancelled, while the stand-down goes on. With an unrelated context
	// the call and the Run goroutine wait for each other until it ends. The
	// same holds for Transfer.
	Resign(ctx context.Context) error

	// Fenced runs fn in a database transaction that first checks, under a
	// share lock on the election's row (on Galera: by writing the row), that
	// this candidate still leads with its term: a deposed leader that has
	// not noticed yet changes nothing, and no write of a deposed term
	// commits after the takeover. On one server a takeover waits until the
	// fenced transaction ends. On a certification-based cluster (Galera,
	// Group Replication multi-primary) the fenced transaction and a
	// takeover through any node conflict in certification and the one
	// certified second fails with a deadlock error (1213); there a leader's
	// fenced transactions are serialized on the row, and each moves the
	// row's last_seen_active forward (extending the lease by the database
	// clock only). The error wraps ErrNotLeader when the check fails. Keep
	// fenced transactions shorter than RenewDeadline: the leader's own
	// renewals wait for them. With sqlx, wrap tx with a Mapper (the Named
	// methods panic without one): &sqlx.Tx{Tx: tx, Mapper: sdb.Mapper},
	// sdb being sqlx.NewDb(db, "mysql"). From OnElected, prefer its
	// Leadership's Fenced, which fences with that leadership's term.
	Fenced(ctx context.Context, fn func(tx *sql.Tx) error) error

	// Transfer hands leadership to candidate to, which leads at once,
	// without a lock delay (see "Planned changes of leader" in the package
	// documentation): this leader stands down first (its elected context is
	// cancelled, OnElected is waited for, OnDemoted is called with
	// ReasonTransferred), then marks the row released and reserved for to,
	// and wakes the followers. Until the transfer window (2 × RetryInterval,
	// by the database clock) ends, only to may take the row; if to does not
	// (it is not running, or not campaigning), any candidate may after that.
	// This candidate sits out the window and two retry intervals more
	// before campaigning again, so that another candidate takes the row
	// when to never comes.
	//
	// Transfer returns once the row was handed over, not when to leads
	// (watch OnLeaderChanged or Leader for that). It returns an error
	// wrapping ErrNotLeader when this candidate does not lead (a holder
	// still waiting out its lock delay does not lead), one wrapping
	// ErrInvalidConfig for an invalid ID, an error when Run is not running
	// or ctx ends before the Run goroutine took the request, and nil without
	// doing anything when to is this candidate's own ID (it leads already).
	// An error from the statement that hands the row over is returned after
	// the leader stood down: the row then expires after its lease, as after a
	// crash. No existence check is made on to: candidates register nowhere.
	// A target that is sitting out (it resigned, handed over or failed its
	// HealthCheck within the last few retry intervals) does not look at the
	// election then, so a transfer to it falls back after the window.
	// From OnElected, pass its context (see Resign).
	Transfer(ctx context.Context, to string) error

	// Proclaim changes the value this leader publishes (Config.Value, the
	// row's value column) without a re-election, like etcd's Proclaim: it
	// writes it at once, and later renewals and later terms of this
	// candidate keep it (the Config is not changed). Followers see it at
	// their next look (OnLeaderChanged is called when the holder, term or
	// value they see changes), Leader and Status at once. It returns an
	// error wrapping ErrNotLeader when this candidate does not lead or lost
	// the row meanwhile (the value is kept for its next term all the same),
	// an error wrapping ErrInvalidConfig for a value that is not UTF-8 of at
	// most 1024 bytes, and
	// an error when Run is not running or ctx ends first.
	Proclaim(ctx context.Context, value string) error

	// Name returns the election's name; ID returns this candidate's identity.
	Name() string
	ID() string
}

// Callbacks are called as leadership changes. All are optional.
//
// The contract:
//   - OnLeaderChanged and OnDemoted are called on the goroutine running Run,
//     one at a time and in order; a slow callback delays the campaign (but
//     never extends leadership: that ends by the clock).
//   - OnElected is called in a new goroutine when this candidate starts to
//     lead, after IsLeader turned true, with that Leadership: its term, and
//     Fenced for writes that must not commit once it ended. Its context is cancelled when
//     leadership ends, at the latest when the lease runs out by the local
//     clock, even while the database does not answer. OnElected must return
//     soon after its context is cancelled: Run waits for it before calling
//     OnDemoted, before releasing the row, before campaigning again, and
//     before returning. At most one OnElected runs at a time.
//   - OnDemoted is called exactly once for every OnElected, whatever ended
//     the leadership (resignation, lost lease, deposition, failed health
//     check, shutdown), after
//     OnElected returned, and before Run returns.
//   - A leadership that ended is never revived. When a renewal sent before
//     the deadline succeeds after it, OnDemoted(ReasonLeaseLost) is called
//     and a new leadership begins with OnElected again, with the same term
//     (nobody else held the election in between).
//   - OnLeaderChanged is called whenever the observed holder, term or
//     published value (Proclaim) changes, for followers and the leader alike; Record.ID is empty when
//     nobody holds a live lease. A candidate waiting out its lock delay sees
//     itself as holder before OnElected.
type Callbacks struct {
	OnElected       func(ctx context.Context, l Leadership)
	OnDemoted       func(d Demotion)
	OnLeaderChanged func(r Record)
}

// Leadership is one leadership of a candidate, as OnElected receives it:
// its term, and Fenced for its leader-only writes.
type Leadership struct {
	// Term is the leadership's fencing term (see Election.Term).
	Term uint64
	// Fenced runs fn as Election.Fenced does, checking Term: it returns an
	// error wrapping ErrNotLeader, without calling fn, once this leadership
	// ended, even when a later leadership of the same candidate has begun.
	// Pass OnElected's context (see Election.Fenced). Always set in the
	// Leadership OnElected receives; a fake of Election sets it too.
	Fenced func(ctx context.Context, fn func(tx *sql.Tx) error) error
}

// Reason says why leadership ended.
type Reason string

// Reasons for a demotion.
const (
	// ReasonResigned: Resign was called or Run's context ended.
	ReasonResigned Reason = "resigned"
	// ReasonLeaseLost: no renewal succeeded within RenewDeadline.
	ReasonLeaseLost Reason = "lease_lost"
	// ReasonDeposed: the row was taken over, replaced or deleted.
	ReasonDeposed Reason = "deposed"
	// ReasonError: Run stopped on a permanent error.
	ReasonError Reason = "error"
	// ReasonUnhealthy: Config.Health.Check failed or did not answer in
	// time; the row was released for a follower to take over at once.
	ReasonUnhealthy Reason = "unhealthy"
	// ReasonTransferred: a planned change of leader. Transfer was called,
	// or an operator asked for a transfer or a step-down (operator.Transfer,
	// StepDown, or the row's transfer_to set with plain SQL); the row was
	// handed over cleanly, so the next leader takes over at once.
	ReasonTransferred Reason = "transferred"
)

// Demotion describes the end of one leadership.
type Demotion struct {
	// Term is the term that ended.
	Term uint64
	// Reason says why.
	Reason Reason
	// Until is the last instant (local wall clock) this candidate could have
	// believed it led: its lease deadline, or the instant it stood down,
	// whichever came first. It is earlier than the time OnDemoted runs when
	// the process was frozen.
	Until time.Time
}

// Record is an election's row as read from the database, with lease
// arithmetic done by the database's clock.
type Record struct {
	// Election is the election's name (the anchor column).
	Election string `json:"election"`
	// ID is the holder (service_id); empty in OnLeaderChanged when nobody
	// holds a live lease.
	ID string `json:"id"`
	// Term is the fencing term.
	Term uint64 `json:"term"`
	// Since is when the term began; LastRenewal the holder's last renewal.
	Since       time.Time `json:"since"`
	LastRenewal time.Time `json:"last_renewal"`
	// Lease is the holder's lease; LeaseLeft what is left of it by the
	// database clock (zero or negative once expired). In JSON they are
	// whole milliseconds (see MarshalJSON).
	Lease     time.Duration `json:"lease_ms"`
	LeaseLeft time.Duration `json:"lease_left_ms"`
	// Released is true once the holder resigned cleanly.
	Released bool `json:"released"`
	// Acquired says how the term began: first (the election's first
	// term), insert, expired, released, transferred, claimed, operator, or
	// lock.
	Acquired string `json:"acquired"`
	// Value is what the holder published.
	Value string `json:"value"`
	// Backend is table or lock; ConnectionID the lock holder's connection.
	Backend      string `json:"backend"`
	ConnectionID uint64 `json:"connection_id,omitempty"`
	// Transfer is true when the row's transfer_to is set (see "Planned
	// changes of leader" in the package documentation): on a live row, a
	// request to the leader, acted on at its next renewal, to hand
	// leadership to TransferTo, or to step down for anyone when TransferTo
	// is empty; on a released row, the leader handed the row to TransferTo,
	// which alone may take it until LeaseLeft runs out.
	Transfer   bool   `json:"transfer,omitempty"`
	TransferTo string `json:"transfer_to,omitempty"`
	// Priority is the holder's Config.Preference.Priority as it last wrote it (0 for
	// no preference, and in a row an operator wrote until its holder
	// renews it). See "Leadership preference" in the package
	// documentation.
	Priority int `json:"priority"`
}

// plainRecord is Record's fields and tags, without its methods.
type plainRecord Record

// MarshalJSON encodes r by its fields' tags, with Lease and LeaseLeft in
// whole milliseconds (truncated toward zero).
func (r Record) MarshalJSON() ([]byte, error) {
	p := plainRecord(r)
	p.Lease, p.LeaseLeft = time.Duration(r.Lease.Milliseconds()), time.Duration(r.LeaseLeft.Milliseconds())
	return json.Marshal(p)
}

// UnmarshalJSON decodes what MarshalJSON encodes.
func (r *Record) UnmarshalJSON(b []byte) error {
	var p plainRecord
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*r = Record(p)
	r.Lease, r.LeaseLeft = r.Lease*time.Millisecond, r.LeaseLeft*time.Millisecond
	return nil
}

// Live reports whether the record names a holder with a live lease.
func (r Record) Live() bool { return r.ID != "" && !r.Released && r.LeaseLeft > 0 }

// reservedFor reports whether the row was handed to a candidate other than
// id and is still reserved for it: released with a transfer target, within
// the transfer window (the row's lease).
func (r Record) reservedFor(id string) bool {
	return r.Released && r.Transfer && r.TransferTo != "" && r.TransferTo != id && r.LeaseLeft > 0
}
