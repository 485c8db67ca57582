package election

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"math"
	"os"
	"time"

	"github.com/sqlelect/sqlelect/internal/ident"
)

// Defaults and limits of Config. The other defaults are derived from the
// lease (see Config and docs/embedding.md).
const (
	// DefaultTable is the table name of the migrations in package migrations.
	DefaultTable = "service_election"
	// DefaultLeaseDuration is the lease when neither LeaseDuration nor
	// Tuning.RenewDeadline is given.
	DefaultLeaseDuration = 15 * time.Second
)

// The derived defaults and the limits nothing outside the package needs.
const (
	minLeaseDuration    = 100 * time.Millisecond
	defaultQueryTimeout = 5 * time.Second
	maxLeaseDuration    = 24 * time.Hour
	maxPriority         = 1000
	// The defaults keep client-go's relations (15 s lease, 10 s renew
	// deadline, 2 s renew and retry intervals) for any lease.
	renewDeadlineFraction = 2.0 / 3  // of the lease
	renewIntervalFraction = 1.0 / 5  // of the renew deadline
	retryIntervalFraction = 2.0 / 15 // of the lease
	defaultJitterFactor   = 0.2
	holdDownIntervals     = 3 // the shortest default hold-down, in health check intervals
)

// Config configures an election candidate. The constructors copy it: they
// never modify the caller's value, and changing it afterwards has no effect.
// The zero value of every field but Name means its default. Most programs
// set Name, Callbacks and maybe LeaseDuration, Value and Metrics; Health and
// Preference are features to opt into, and Tuning is best left zero unless
// you measured why (see docs/embedding.md).
type Config struct {
	// Name is the election's name: 1 to 128 characters among letters,
	// digits and . _ - : / @. Required.
	Name string
	// ID is this candidate's identity, unique among the candidates: up to
	// 255 characters, no control characters. Default DefaultID().
	ID string
	// Table is the election table, optionally `db.table`. Default
	// DefaultTable.
	Table string
	// LeaseDuration is how long a lease lasts after its last renewal, by
	// the database clock: 100 ms to 24 h. Default 15 s.
	LeaseDuration time.Duration
	// Value is published in the row while this candidate holds it (an
	// address, say): at most 1024 bytes of UTF-8. Default empty.
	Value string
	// Callbacks are called on leadership changes; all are optional.
	Callbacks Callbacks
	// Metrics receives what the campaign reports, for instance
	// electionprom.NewMetrics(). Default nil: none.
	Metrics Metrics
	// Health ties leadership to the application's health. Default: off.
	Health HealthConfig
	// Preference makes leadership go to the candidate of highest priority.
	// Default: off.
	Preference PreferenceConfig
	// Tuning changes the protocol's timing, safety margins and fast paths.
	Tuning TuningConfig
}

// HealthConfig ties leadership to the application's health (see "Health"
// in the package documentation and docs/embedding.md): while Check fails, a
// leader stands down (ReasonUnhealthy) and a follower does not campaign.
// Check runs on a goroutine of its own and must return soon after its
// context ends.
type HealthConfig struct {
	// Check, when not nil, runs every Interval; an error, or no answer
	// within Timeout, is a failure. Default nil: no health check.
	Check func(ctx context.Context) error
	// Interval is the time between the starts of two runs of Check.
	// Default Tuning.RenewInterval (2 s).
	Interval time.Duration
	// Timeout bounds one run of Check. Default Tuning.RenewDeadline/2 (5 s).
	Timeout time.Duration
	// HoldDown is how long after a failed Check a candidate does not ask
	// for leadership by Priority. Default the longer of Preference.Tenure
	// and 3 × Interval.
	HoldDown time.Duration
}

// PreferenceConfig makes leadership go to the candidate of highest
// priority (see "Leadership preference" in the package documentation): a
// healthy follower of strictly higher Priority than the live leader asks
// it to hand over, once that leader has led for Tenure.
type PreferenceConfig struct {
	// Priority is this candidate's preference, from 0 to 1000,
	// written into the row while it holds it. Default 0: no preference.
	Priority int
	// Tenure is how long a leader keeps leadership, by the database clock,
	// before a follower of higher Priority may ask for it. Default
	// LeaseDuration.
	Tenure time.Duration
}

// TuningConfig changes the protocol's timing, safety margins and fast
// paths: leave it zero unless you measured why (see docs/embedding.md and
// README, "Guarantees and their limits"). Given durations must keep
// RenewInterval < RenewDeadline < LeaseDuration <= LockDelay.
type TuningConfig struct {
	// RenewDeadline is how long a leader keeps leading after it sent its
	// last successful renewal, by its monotonic clock. Default 2/3 of
	// LeaseDuration (10 s); when only it is given, the lease is 3/2 of it.
	RenewDeadline time.Duration
	// RenewInterval is the time between a leader's renewals. Default 1/5
	// of RenewDeadline (2 s).
	RenewInterval time.Duration
	// RetryInterval is the time between a follower's looks at the
	// election. Default 2/15 of LeaseDuration (2 s).
	RetryInterval time.Duration
	// JitterFactor multiplies each follower wait by a random factor in
	// [1, 1+JitterFactor); at most 1. Default 0.2; negative for none.
	JitterFactor float64
	// LockDelay is how long a candidate that took a new or replaced row
	// waits, renewing, before it leads; at least every candidate's
	// RenewDeadline. Default LeaseDuration.
	LockDelay time.Duration
	// DisableLockDelay makes such a candidate lead at once: two leaders
	// may then overlap after an operator's REPLACE or DELETE (see Fenced).
	DisableLockDelay bool
	// DisableFastHandover turns off the table backend's GET_LOCK handover
	// wakeup (a pooled connection per candidate), and both backends'
	// transfer bell (two per leader, which a planned change's request
	// wakes: docs/algorithm.md, "Planned changes of leader"); see "Fast
	// handover" in the package documentation and README. A leader then
	// acts on requests at its next renewal. Default false.
	DisableFastHandover bool
	// QueryTimeout bounds every SQL statement. Default 5 s, at most
	// RenewDeadline. Run's preflight (about 20 statements, once) is
	// bounded as a whole: by QueryTimeout, doubled after each attempt that
	// ran out of time, up to 4 times it (so a candidate started while the
	// database did not answer may begin up to that long after it answers).
	QueryTimeout time.Duration
	// Clock is the local clock. Default nil: the time package's.
	Clock Clock
	// Logger receives structured logs. Default slog.Default();
	// slog.New(slog.DiscardHandler) logs nothing.
	Logger *slog.Logger
	// Batcher, when not nil, combines this table-backend election's
	// statements with those of its other elections; its table must be
	// Table, and fast handover is then off. NewLock refuses one.
	Batcher *Batcher
}

// settings is a Config with its defaults applied, with Tuning's fields
// promoted so that the backends read plain fields (c.cfg.RenewDeadline):
// its Config's own Tuning is left zero.
type settings struct {
	Config
	TuningConfig
}

// config is the Config of s.
func (s settings) config() Config {
	c := s.Config
	c.Tuning = s.TuningConfig
	return c
}

// settings returns c with defaults filled in, validated. The zero
// durations are filled in from the given ones: the lease from the renew
// deadline (or DefaultLeaseDuration), the renew deadline and the retry
// interval from the lease, the renew interval from the renew deadline, the
// lock delay from the lease and the query timeout from the renew deadline.
// Out-of-range values are left for validate.
func (c Config) settings() (settings, error) {
	given := settings{Config: c, TuningConfig: c.Tuning} // defaults not applied
	given.Tuning = TuningConfig{}
	s := given
	if s.ID == "" {
		s.ID = DefaultID() // not computed when given: a hostname look-up and random bytes
	}
	s.Table = cmp.Or(s.Table, DefaultTable)
	if s.LeaseDuration == 0 && s.RenewDeadline > 0 {
		s.LeaseDuration = scale(s.RenewDeadline, 1/renewDeadlineFraction)
	}
	s.LeaseDuration = cmp.Or(s.LeaseDuration, DefaultLeaseDuration)
	s.RenewDeadline = cmp.Or(s.RenewDeadline, scale(s.LeaseDuration, renewDeadlineFraction))
	s.RenewInterval = cmp.Or(s.RenewInterval, scale(s.RenewDeadline, renewIntervalFraction))
	s.RetryInterval = cmp.Or(s.RetryInterval, scale(s.LeaseDuration, retryIntervalFraction))
	s.LockDelay = cmp.Or(s.LockDelay, s.LeaseDuration)
	s.QueryTimeout = cmp.Or(s.QueryTimeout, min(defaultQueryTimeout, s.RenewDeadline))
	s.Preference.Tenure = cmp.Or(s.Preference.Tenure, s.LeaseDuration)
	s.Health.Interval = cmp.Or(s.Health.Interval, s.RenewInterval)
	s.Health.Timeout = cmp.Or(s.Health.Timeout, s.RenewDeadline/2)
	s.Health.HoldDown = cmp.Or(s.Health.HoldDown, max(s.Preference.Tenure, holdDownIntervals*s.Health.Interval))
	s.JitterFactor = cmp.Or(s.JitterFactor, defaultJitterFactor)
	s.Clock = cmp.Or[Clock](s.Clock, realClock{})
	s.Logger = cmp.Or(s.Logger, slog.Default())
	s.Metrics = cmp.Or[Metrics](s.Metrics, nopMetrics{})
	if err := s.validate(given); err != nil {
		return s, err
	}
	if s.Batcher != nil {
		s.DisableFastHandover = true
		if s.Batcher.opts.Table != s.Table {
			return s, fmt.Errorf("%w: the Batcher's table %q is not the election's table %q", ErrInvalidConfig, s.Batcher.opts.Table, s.Table)
		}
	}
	return s, nil
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
	s, err := c.settings()
	return s.config(), err
}

// Validate reports whether c, with defaults applied, is usable. Its error
// wraps ErrInvalidConfig and names the first problem found, in the order
// of the fields (name, ID, table, then the durations from the lease down);
// a duration the caller left zero is named as derived, with what it was
// derived from.
func (c Config) Validate() error {
	_, err := c.settings()
	return err
}

// validate checks c, whose defaults are applied; given is c as the caller
// gave it, to say which durations are derived. It returns the first
// problem only: a later one is often a consequence of it.
func (c settings) validate(given settings) error {
	if err := cmp.Or(ident.Name(c.Name), ident.ID(c.ID), ident.Table(c.Table), ident.Value(c.Value)); err != nil {
		return err
	}
	lease := describe("lease duration", c.LeaseDuration, given.LeaseDuration, "")
	deadline := describe("renew deadline", c.RenewDeadline, given.RenewDeadline, "2/3 of the lease")
	leaseRange := fmt.Sprintf("lease duration %v: must be from %v to %v", c.LeaseDuration, minLeaseDuration, maxLeaseDuration)
	if given.LeaseDuration == 0 && given.RenewDeadline > 0 {
		// The lease is 3/2 of the renew deadline (always above it).
		leaseRange = fmt.Sprintf("renew deadline %v: must be from %v to %v", c.RenewDeadline,
			scale(minLeaseDuration, renewDeadlineFraction), scale(maxLeaseDuration, renewDeadlineFraction))
	}
	for _, check := range []struct {
		bad     bool
		problem string
	}{
		{c.LeaseDuration < minLeaseDuration || c.LeaseDuration > maxLeaseDuration, leaseRange},
		{c.RenewDeadline <= 0 || c.RenewDeadline >= c.LeaseDuration, deadline + ": must be positive and less than the " + lease},
		{c.RenewInterval <= 0 || c.RenewInterval >= c.RenewDeadline,
			describe("renew interval", c.RenewInterval, given.RenewInterval, "1/5 of the renew deadline") + ": must be positive and less than the " + deadline},
		{c.RetryInterval <= 0, fmt.Sprintf("retry interval %v: must be positive", c.RetryInterval)},
		{!(c.JitterFactor <= 1), // also NaN
			fmt.Sprintf("jitter factor %v: must be at most 1 (0 for the default %v, negative for none)", c.JitterFactor, defaultJitterFactor)},
		{c.LockDelay < 0, fmt.Sprintf("lock delay %v: must not be negative", c.LockDelay)},
		{!c.DisableLockDelay && c.LockDelay < c.RenewDeadline, describe("lock delay", c.LockDelay, given.LockDelay, "the lease") +
			": must be at least the " + deadline + ", or a deposed leader could still act"},
		{c.QueryTimeout <= 0 || c.QueryTimeout > c.RenewDeadline,
			describe("query timeout", c.QueryTimeout, given.QueryTimeout, "at most 5s") + ": must be positive and at most the " + deadline},
		{c.Preference.Priority < 0 || c.Preference.Priority > maxPriority, fmt.Sprintf("priority %d: must be from 0 (no preference) to %d", c.Preference.Priority, maxPriority)},
		{c.Preference.Tenure < 0, fmt.Sprintf("preference tenure %v: must not be negative", c.Preference.Tenure)},
		{c.Health.Interval < 0, fmt.Sprintf("health check interval %v: must not be negative", c.Health.Interval)},
		{c.Health.Timeout < 0, fmt.Sprintf("health check timeout %v: must not be negative", c.Health.Timeout)},
		{c.Health.HoldDown < 0, fmt.Sprintf("health check hold-down %v: must not be negative", c.Health.HoldDown)},
	} {
		if check.bad {
			return fmt.Errorf("%w: %s", ErrInvalidConfig, check.problem)
		}
	}
	return nil
}

// describe names a duration for an error message, and says that it is a
// default, and how it was derived, when the caller did not give it (given
// is zero): "renew deadline 10s (default: 2/3 of the lease)".
func describe(what string, d, given time.Duration, derived string) string {
	switch {
	case given != 0:
		return fmt.Sprintf("%s %v", what, d)
	case derived == "":
		return fmt.Sprintf("%s %v (default)", what, d)
	}
	return fmt.Sprintf("%s %v (default: %s)", what, d, derived)
}

// quoteTable returns a validated table name quoted for SQL: `db`.`table`.
func quoteTable(table string) string { return ident.Quote(table) }

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
	return fmt.Sprintf("%s:%d:%x", host, os.Getpid(), b)
}

// ceilMillis is d in whole milliseconds, rounded up.
func ceilMillis(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}
