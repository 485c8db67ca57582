package election

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"crypto/rand"
	"encoding/hex"

	"github.com/sqlelect/sqlelect/internal/floor"
)

// Defaults applied by New* constructors to zero fields of Config. They follow
// client-go's leaderelection (15 s lease, 10 s renew deadline, 2 s retry).
// When some durations are given and others are not, the missing ones are
// derived from the given ones with the Default*Fraction constants, so that
// they keep the relations of the defaults (see Config).
const (
	// DefaultTable is the table name of the migrations in package migrations.
	DefaultTable = "service_election"
	// DefaultLeaseDuration is how long a lease lasts on the database clock
	// after its last renewal before another candidate may take over, when
	// neither LeaseDuration nor RenewDeadline is given.
	DefaultLeaseDuration = 15 * time.Second
	// DefaultRenewDeadline is how long a leader keeps leading, by its own
	// monotonic clock, after it sent its last successful renewal:
	// DefaultRenewDeadlineFraction of the default lease. It is shorter than
	// the lease so that the leader stands down before anyone can take over;
	// the difference is the margin for clock-rate drift and for the leader's
	// work to stop.
	DefaultRenewDeadline = 10 * time.Second
	// DefaultRenewInterval is how often the leader renews:
	// DefaultRenewIntervalFraction of the default renew deadline.
	DefaultRenewInterval = 2 * time.Second
	// DefaultRetryInterval is how often a follower looks at the election:
	// DefaultRetryIntervalFraction of the default lease. A follower also
	// wakes when the current lease runs out by the database clock, so
	// failover does not wait for this interval.
	DefaultRetryInterval = 2 * time.Second
	// DefaultRenewDeadlineFraction is the renew deadline as a fraction of
	// the lease (2/3: 10 s of 15 s). A zero RenewDeadline is the lease times
	// this; a zero LeaseDuration with a RenewDeadline given is the renew
	// deadline divided by it.
	DefaultRenewDeadlineFraction = 2.0 / 3
	// DefaultRenewIntervalFraction is the renew interval as a fraction of
	// the renew deadline (1/5: 2 s of 10 s). A zero RenewInterval is the
	// renew deadline times this.
	DefaultRenewIntervalFraction = 1.0 / 5
	// DefaultRetryIntervalFraction is the retry interval as a fraction of
	// the lease (2/15: 2 s of 15 s). A zero RetryInterval is the lease times
	// this.
	DefaultRetryIntervalFraction = 2.0 / 15
	// DefaultPreferenceTenureLeases is the default PreferenceTenure in
	// leases: a zero PreferenceTenure is LeaseDuration times this.
	DefaultPreferenceTenureLeases = 1
	// DefaultHealthCheckHoldDownIntervals is the shortest default
	// HealthCheckHoldDown in health check intervals: a zero
	// HealthCheckHoldDown is the longer of PreferenceTenure and
	// HealthCheckInterval times this.
	DefaultHealthCheckHoldDownIntervals = 3
	// MinLeaseDuration is the shortest LeaseDuration accepted. Below it a
	// renewal's round trip and the database's millisecond granularity leave
	// no time to renew, and a candidate would never lead.
	MinLeaseDuration = 100 * time.Millisecond
	// MaxLeaseDuration is the longest LeaseDuration accepted.
	MaxLeaseDuration = 24 * time.Hour
	// DefaultJitterFactor is the default Config.JitterFactor: a follower's
	// wait between looks is RetryInterval times a random factor in
	// [1, 1.2).
	DefaultJitterFactor = 0.2
	// NoJitter, as Config.JitterFactor, turns the jitter off: followers
	// look exactly every RetryInterval.
	NoJitter = -1
	// DefaultQueryTimeout bounds every SQL statement. A leader's renewal is
	// also bounded by the time left before it must stand down.
	DefaultQueryTimeout = 5 * time.Second
	// MaxNameLen, MaxIDLen and MaxValueLen are the column widths in
	// characters (bytes for names, which are ASCII).
	MaxNameLen  = 128
	MaxIDLen    = 255
	MaxValueLen = 1024
	// MaxPriority is the highest Config.Priority accepted (the lowest is
	// 0, no preference).
	MaxPriority = 1000
)

// Config configures an election candidate. The constructors copy it: they
// never modify the caller's value, and changing it afterwards has no effect.
// The zero value of every field but Name means its default.
//
// Most programs set Name, Callbacks, maybe LeaseDuration, Value, Logger and
// Metrics, and leave the rest. The fields marked "Advanced" change the
// protocol's timing or safety margins, or its fast paths: leave them zero
// unless you measured why (README, "Guarantees and their limits").
type Config struct {
	// Name is the election's name, stored as the table's anchor: 1 to 128
	// characters among letters, digits and . _ - : / @. Required.
	Name string
	// ID is this candidate's identity, unique among the candidates: up to
	// 255 characters, no control characters, compared byte for byte.
	// Default: DefaultID() (host, pid and a random token).
	ID string
	// Table is the election table, optionally qualified with a database
	// (`db.table`); each part a plain identifier. Default DefaultTable.
	Table string

	// LeaseDuration is the lease recorded with each renewal: other
	// candidates may take over once the database clock is past the last
	// renewal plus the lease. From MinLeaseDuration to MaxLeaseDuration,
	// stored in milliseconds (rounded up). Default: RenewDeadline divided by
	// DefaultRenewDeadlineFraction when RenewDeadline is given, else
	// DefaultLeaseDuration.
	LeaseDuration time.Duration
	// RenewDeadline is how long a leader keeps leading after it sent its
	// last successful renewal, by its monotonic clock. Must be less than
	// LeaseDuration. Default: LeaseDuration times
	// DefaultRenewDeadlineFraction (DefaultRenewDeadline with the default
	// lease).
	// Advanced (see Config).
	RenewDeadline time.Duration
	// RenewInterval is the time between a leader's renewals. Must be less
	// than RenewDeadline. Default: RenewDeadline times
	// DefaultRenewIntervalFraction (DefaultRenewInterval with the default
	// lease).
	// Advanced (see Config).
	RenewInterval time.Duration
	// RetryInterval is the time between a follower's looks at the election.
	// Default: LeaseDuration times DefaultRetryIntervalFraction
	// (DefaultRetryInterval with the default lease).
	// Advanced (see Config).
	RetryInterval time.Duration
	// JitterFactor spreads followers' looks, as client-go's wait.Jitter
	// does: each wait of RetryInterval is multiplied by a random factor in
	// [1, 1+JitterFactor), so a wait is at most (1+JitterFactor) ×
	// RetryInterval. At most 1. Zero means DefaultJitterFactor (0.2); a
	// negative value, such as NoJitter, turns the jitter off. Leaders'
	// renewals are never jittered.
	// Advanced (see Config).
	JitterFactor float64
	// LockDelay is how long a candidate that became holder without winning
	// an expired or released row (a new row, a row an operator deleted or
	// replaced) waits, renewing, before it is told it leads: long enough for
	// a predecessor that does not know it was deposed to stand down. Default
	// LeaseDuration; it must be at least the longest RenewDeadline of any
	// candidate. See DisableLockDelay.
	// Advanced (see Config).
	LockDelay time.Duration
	// DisableFastHandover turns off the table backend's handover wakeup.
	// By default the table backend's holder also holds a MySQL user lock
	// (GET_LOCK) on a dedicated connection, and each follower waits in
	// GET_LOCK for it on a pooled connection for up to its retry interval:
	// when the leader resigns (or its connection dies) the followers wake
	// at once and a clean handover takes a few milliseconds instead of a
	// retry interval. The lock is only a hint, never a proof of leadership:
	// the row decides. The cost is one connection per candidate, held while
	// following or leading; set DisableFastHandover when the pool is small
	// or a process runs many elections (see Batcher). Ignored by NewLock,
	// whose waiters always wake at once.
	//
	// The connections come from db's pool, which the election's statements
	// need too. So that a small pool (SetMaxOpenConns) never starves them,
	// the hint takes a connection only when the pool has two to spare, and
	// keeps it only if one is still free afterwards (db.Stats(); several
	// elections sharing the pool count each other's). Otherwise it is
	// skipped for that renewal or wait: followers then poll every
	// RetryInterval (and when the lease runs out) as with
	// DisableFastHandover, the skip is reported to Metrics
	// (sqlelect_fast_handover_skipped_total) and the first one logged. With
	// a pool of n connections, at most n-1 of its elections get the hint.
	// Advanced (see Config).
	DisableFastHandover bool
	// DisableLockDelay makes such a candidate lead at once. The cost: after
	// an operator's REPLACE or DELETE, the deposed leader may still act for
	// up to its RenewDeadline while the new one already does; two leaders
	// overlap. Only safe when leader-only work is fenced (see Fenced).
	// Advanced (see Config).
	DisableLockDelay bool
	// QueryTimeout bounds every SQL statement. Default DefaultQueryTimeout
	// (capped at RenewDeadline).
	// Advanced (see Config).
	QueryTimeout time.Duration
	// Value is published in the row while this candidate holds it (an
	// address, say): up to 1024 characters of UTF-8.
	Value string

	// Priority is this candidate's leadership preference, from 0 (the
	// default: no preference) to MaxPriority, written into the row while it
	// holds it. A running, healthy follower whose Priority is strictly
	// greater than the live leader's asks that leader to hand over to it
	// (a planned transfer), once the leader has led for PreferenceTenure
	// by the database clock; see "Leadership preference" in the package
	// documentation. A candidate with Priority 0 never asks, and followers
	// ask nothing of a leader whose priority is at least theirs, so equal
	// priorities never change the leader. Candidates of one election may
	// have different priorities; that is the point.
	Priority int
	// PreferenceTenure is how long a leader keeps leadership, by the
	// database clock from the start of its term, before a follower of
	// higher Priority may ask it to hand over: the stickiness that keeps
	// preferences from moving leadership more than once per tenure. It is
	// the asking follower's setting. Must not be negative. Default
	// DefaultPreferenceTenureLeases times LeaseDuration (one lease: the time
	// a takeover after a crash costs anyway). Ignored when Priority is 0.
	// Advanced (see Config).
	PreferenceTenure time.Duration

	// Callbacks are called on leadership changes; see Callbacks for the
	// contract. All are optional.
	Callbacks Callbacks
	// HealthCheck, when not nil, ties leadership to the application's
	// health (see "Health" in the package documentation). It runs beside
	// the campaign, on a goroutine of its own that Run starts and joins,
	// every HealthCheckInterval and bounded by HealthCheckTimeout, the same
	// for a leader and a follower; the campaign never waits for it but acts
	// on its latest result. While that result is a failure (an error, or no
	// answer within HealthCheckTimeout) a leader stands down (OnDemoted
	// with ReasonUnhealthy) and releases the row, so that a follower takes
	// over at once, and a follower does not campaign; a candidate does not
	// campaign before its first check passed. A candidate whose check
	// failed within HealthCheckHoldDown does not ask for leadership by
	// Priority. Runs of the check never overlap, and a run past its timeout
	// is waited for before the next: it must return soon after its context
	// ends.
	HealthCheck func(ctx context.Context) error
	// HealthCheckInterval is the time between the starts of two runs of
	// HealthCheck (the next starts when the previous returns, if that is
	// later). Must not be negative. Default: RenewInterval (with the
	// default timings, 2 s).
	// Advanced (see Config).
	HealthCheckInterval time.Duration
	// HealthCheckTimeout bounds one run of HealthCheck: a run that has not
	// returned by then fails (reported to Metrics as a failure and as a
	// timeout) and its context is cancelled. Must not be negative. Default:
	// RenewDeadline/2 (with the default timings, 5 s).
	// Advanced (see Config).
	HealthCheckTimeout time.Duration
	// HealthCheckHoldDown is how long after a failed HealthCheck (or after
	// Run began: a candidate with no record of passing counts as failed) a
	// candidate does not ask for leadership by Priority, however its checks
	// go meanwhile, so that a flapping check does not draw leadership to it
	// again and again (a route's hold-down). It still takes a free row:
	// a leader it is better than none. Must not be negative. Default: the
	// longer of PreferenceTenure and 3 × HealthCheckInterval. Ignored when
	// Priority is 0.
	// Advanced (see Config).
	HealthCheckHoldDown time.Duration
	// Clock is the local clock. Default RealClock{}.
	// Advanced (see Config).
	Clock Clock
	// Logger receives structured logs (election, id, term); nothing is
	// logged at Info level on every heartbeat, and a database that does not
	// answer is logged when it stops and when it answers again, not at each
	// retry. Default: slog.Default(), so that a dead database is seen
	// without configuration; slog.New(slog.DiscardHandler) logs nothing.
	Logger *slog.Logger
	// Metrics receives what the campaign reports (see Metrics), for
	// instance electionprom.NewMetrics() for Prometheus. Several elections
	// may share one. Default NopMetrics{}.
	Metrics Metrics
	// Batcher, when not nil, combines this table-backend election's
	// steady-state statements with those of the Batcher's other elections
	// (see Batcher); its table must be Table. Fast handover is then off.
	// NewLock refuses a Batcher.
	Batcher *Batcher
}

var (
	nameRE  = regexp.MustCompile(`^[A-Za-z0-9._:/@-]{1,128}$`)
	identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]{0,63}$`)
)

// withDefaults returns a copy of c with defaults filled in, validated.
func (c Config) withDefaults() (Config, error) {
	if c.ID == "" {
		c.ID = DefaultID()
	}
	if c.Table == "" {
		c.Table = DefaultTable
	}
	var given timing
	c, given = c.withTimingDefaults()
	if c.JitterFactor == 0 {
		c.JitterFactor = DefaultJitterFactor
	}
	if c.Clock == nil {
		c.Clock = RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Metrics == nil {
		c.Metrics = NopMetrics{}
	}
	if err := c.validate(given); err != nil {
		return c, err
	}
	if c.Batcher != nil {
		c.DisableFastHandover = true
		if c.Batcher.table != c.Table {
			return c, fmt.Errorf("%w: the Batcher's table %q is not the election's table %q", ErrInvalidConfig, c.Batcher.table, c.Table)
		}
	}
	return c, nil
}

// timing records which durations the caller gave (the others are derived),
// so that an error about a derived one says where it came from.
type timing struct {
	lease, renewDeadline, renewInterval, retryInterval, lockDelay, queryTimeout bool
	tenure, healthInterval, healthTimeout, holdDown                             bool
	leaseFromDeadline                                                           bool // the lease was derived from the renew deadline
}

// withTimingDefaults fills in the zero durations from the given ones: the
// lease from the renew deadline (or DefaultLeaseDuration), the renew
// deadline and the retry interval from the lease, the renew interval from
// the renew deadline, the lock delay from the lease and the query timeout
// from the renew deadline. Out-of-range values are left for validate.
func (c Config) withTimingDefaults() (Config, timing) {
	given := timing{lease: c.LeaseDuration != 0, renewDeadline: c.RenewDeadline != 0,
		renewInterval: c.RenewInterval != 0, retryInterval: c.RetryInterval != 0,
		lockDelay: c.LockDelay != 0, queryTimeout: c.QueryTimeout != 0, tenure: c.PreferenceTenure != 0,
		healthInterval: c.HealthCheckInterval != 0, healthTimeout: c.HealthCheckTimeout != 0, holdDown: c.HealthCheckHoldDown != 0}
	switch {
	case given.lease:
	case given.renewDeadline && c.RenewDeadline > 0:
		c.LeaseDuration = scale(c.RenewDeadline, 1/DefaultRenewDeadlineFraction)
		given.leaseFromDeadline = true
	default:
		c.LeaseDuration = DefaultLeaseDuration
	}
	if !given.renewDeadline {
		c.RenewDeadline = scale(c.LeaseDuration, DefaultRenewDeadlineFraction)
	}
	if !given.renewInterval {
		c.RenewInterval = scale(c.RenewDeadline, DefaultRenewIntervalFraction)
	}
	if !given.retryInterval {
		c.RetryInterval = scale(c.LeaseDuration, DefaultRetryIntervalFraction)
	}
	if !given.lockDelay {
		c.LockDelay = c.LeaseDuration
	}
	if !given.queryTimeout {
		c.QueryTimeout = min(DefaultQueryTimeout, c.RenewDeadline)
	}
	if !given.tenure {
		c.PreferenceTenure = c.LeaseDuration * DefaultPreferenceTenureLeases
	}
	if !given.healthInterval {
		c.HealthCheckInterval = c.RenewInterval
	}
	if !given.healthTimeout {
		c.HealthCheckTimeout = c.RenewDeadline / 2
	}
	if !given.holdDown {
		c.HealthCheckHoldDown = max(c.PreferenceTenure, DefaultHealthCheckHoldDownIntervals*c.HealthCheckInterval)
	}
	return c, given
}

// scale is d times f, rounded to the nanosecond.
func scale(d time.Duration, f float64) time.Duration {
	return time.Duration(math.Round(float64(d) * f))
}

// WithDefaults returns a copy of c with the defaults applied to its zero
// fields (the durations derived from the given ones, as documented on
// Config), and the error Validate returns. It never modifies c; the
// constructors do the same, so passing the copy or c to them is the same.
func (c Config) WithDefaults() (Config, error) {
	return c.withDefaults()
}

// Validate reports whether c, with defaults applied, is usable. Its error
// wraps ErrInvalidConfig and names the first problem found, in the order
// of the fields (name, ID, table, then the durations from the lease down);
// a duration the caller left zero is named as derived, with what it was
// derived from.
func (c Config) Validate() error {
	_, err := c.withDefaults()
	return err
}

// validate checks c, whose defaults are applied; given says which
// durations the caller set. It returns the first problem only: a later one
// is often a consequence of it.
func (c Config) validate(given timing) error {
	if err := cmp.Or(ValidateName(c.Name), ValidateID(c.ID), ValidateTable(c.Table)); err != nil {
		return err
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	lease := describe("lease duration", c.LeaseDuration, given.lease, "")
	deadline := describe("renew deadline", c.RenewDeadline, given.renewDeadline, "2/3 of the lease")
	if given.leaseFromDeadline {
		lease = describe("lease duration", c.LeaseDuration, false, "3/2 of the renew deadline")
	}
	switch {
	case c.LeaseDuration < MinLeaseDuration || c.LeaseDuration > MaxLeaseDuration:
		if given.leaseFromDeadline {
			return bad("renew deadline %v: must be from %v to %v", c.RenewDeadline,
				scale(MinLeaseDuration, DefaultRenewDeadlineFraction), scale(MaxLeaseDuration, DefaultRenewDeadlineFraction))
		}
		return bad("lease duration %v: must be from %v (MinLeaseDuration) to %v", c.LeaseDuration, MinLeaseDuration, MaxLeaseDuration)
	case c.RenewDeadline <= 0 || c.RenewDeadline >= c.LeaseDuration:
		return bad("%s: must be positive and less than the %s", deadline, lease)
	case c.RenewInterval <= 0 || c.RenewInterval >= c.RenewDeadline:
		return bad("%s: must be positive and less than the %s",
			describe("renew interval", c.RenewInterval, given.renewInterval, "1/5 of the renew deadline"), deadline)
	case c.RetryInterval <= 0:
		return bad("retry interval %v: must be positive", c.RetryInterval)
	case !(c.JitterFactor <= 1): // also NaN
		return bad("jitter factor %v: must be at most 1 (0 for the default %v, negative such as NoJitter for none)", c.JitterFactor, DefaultJitterFactor)
	case c.LockDelay < 0:
		return bad("lock delay %v: must not be negative", c.LockDelay)
	case !c.DisableLockDelay && c.LockDelay < c.RenewDeadline:
		return bad("%s: must be at least the %s, or a deposed leader could still act",
			describe("lock delay", c.LockDelay, given.lockDelay, "the lease"), deadline)
	case c.QueryTimeout <= 0 || c.QueryTimeout > c.RenewDeadline:
		return bad("%s: must be positive and at most the %s",
			describe("query timeout", c.QueryTimeout, given.queryTimeout, "at most 5s"), deadline)
	case len(c.Value) > MaxValueLen || !utf8.ValidString(c.Value):
		return bad("value: must be valid UTF-8 of at most %d bytes", MaxValueLen)
	case c.Priority < 0 || c.Priority > MaxPriority:
		return bad("priority %d: must be from 0 (no preference) to %d (MaxPriority)", c.Priority, MaxPriority)
	case c.PreferenceTenure < 0:
		return bad("preference tenure %v: must not be negative", c.PreferenceTenure)
	case c.HealthCheckInterval < 0:
		return bad("health check interval %v: must not be negative", c.HealthCheckInterval)
	case c.HealthCheckTimeout < 0:
		return bad("health check timeout %v: must not be negative", c.HealthCheckTimeout)
	case c.HealthCheckHoldDown < 0:
		return bad("health check hold-down %v: must not be negative", c.HealthCheckHoldDown)
	}
	return nil
}

// describe names a duration for an error message, and says that it is a
// default, and how it was derived, when the caller did not give it:
// "renew deadline 10s (default: 2/3 of the lease)".
func describe(what string, d time.Duration, given bool, derived string) string {
	switch {
	case given:
		return fmt.Sprintf("%s %v", what, d)
	case derived == "":
		return fmt.Sprintf("%s %v (default)", what, d)
	}
	return fmt.Sprintf("%s %v (default: %s)", what, d, derived)
}

// ValidateName checks an election name: 1 to 128 characters among letters,
// digits and . _ - : / @. Its error wraps ErrInvalidConfig.
func ValidateName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("%w: election name %q: must be 1 to %d characters among letters, digits and . _ - : / @", ErrInvalidConfig, name, MaxNameLen)
	}
	return nil
}

// ValidateID checks a candidate identity: 1 to 255 characters of UTF-8
// without control characters, not only white space and not ending in a
// space (see checkIDSpaces). Its error wraps ErrInvalidConfig.
func ValidateID(id string) error {
	ok := id != "" && utf8.ValidString(id) && utf8.RuneCountInString(id) <= MaxIDLen &&
		strings.IndexFunc(id, unicode.IsControl) < 0
	if !ok {
		return fmt.Errorf("%w: candidate id %q: must be 1 to %d characters of UTF-8 without control characters", ErrInvalidConfig, id, MaxIDLen)
	}
	return checkIDSpaces(id)
}

// ValidateTable checks a table name: an identifier of letters, digits, _ and
// $ (not starting with a digit or $), optionally qualified by a database
// name of the same form; the database name at most 64 characters, the
// table's at most 55, so that the names the schema derives from it (its
// CHECK constraint <table>_decision and floor.Table) fit MySQL's 64. Its
// error wraps ErrInvalidConfig.
func ValidateTable(table string) error {
	parts := strings.Split(table, ".")
	ok := len(parts) <= 2
	for _, p := range parts {
		ok = ok && identRE.MatchString(p)
	}
	if !ok {
		return fmt.Errorf("%w: table %q: must be an identifier ([A-Za-z_][A-Za-z0-9_$]*, at most 64 characters), optionally db.table", ErrInvalidConfig, table)
	}
	if t := parts[len(parts)-1]; len(t) > maxTableLen {
		return fmt.Errorf("%w: table %q: %d characters, at most %d: the schema names its CHECK constraint %s_decision and its term floor table %s, and MySQL's identifiers have at most 64",
			ErrInvalidConfig, table, len(t), maxTableLen, t, floor.Table(t))
	}
	return nil
}

// maxTableLen is the longest table name whose derived identifiers fit
// MySQL's 64 characters: <table>_decision, the longest (migration 7's
// CHECK constraint, renamed by schema.DDL).
const maxTableLen = 64 - len("_decision")

// quoteTable returns a validated table name quoted for SQL.
func quoteTable(table string) string {
	parts := strings.Split(table, ".")
	for i, p := range parts {
		parts[i] = "`" + p + "`"
	}
	return strings.Join(parts, ".")
}

// DefaultID returns a human-readable identity unique to this process:
// "host:pid:token", the token being 6 random hex digits, as the MySQL recipe
// advises (a restarted process is a new candidate).
func DefaultID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	var b [3]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// leaseMillis is the lease in whole milliseconds, rounded up.
func (c Config) leaseMillis() int64 { return ceilMillis(c.LeaseDuration) }

// ceilMillis is d in whole milliseconds, rounded up.
func ceilMillis(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}
