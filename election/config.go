package election

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"crypto/rand"
	"encoding/hex"
)

// Defaults applied by New* constructors to zero fields of Config. They follow
// client-go's leaderelection (15 s lease, 10 s renew deadline, 2 s retry).
const (
	// DefaultTable is the table name of the migrations in package migrations.
	DefaultTable = "service_election"
	// DefaultLeaseDuration is how long a lease lasts on the database clock
	// after its last renewal before another candidate may take over.
	DefaultLeaseDuration = 15 * time.Second
	// DefaultRenewDeadline is how long a leader keeps leading, by its own
	// monotonic clock, after it sent its last successful renewal. It is
	// shorter than the lease so that the leader stands down before anyone
	// can take over; the difference is the margin for clock-rate drift and
	// for the leader's work to stop.
	DefaultRenewDeadline = 10 * time.Second
	// DefaultRenewInterval is how often the leader renews.
	DefaultRenewInterval = 2 * time.Second
	// DefaultRetryInterval is how often a follower looks at the election.
	// A follower also wakes when the current lease runs out by the database
	// clock, so failover does not wait for this interval.
	DefaultRetryInterval = 2 * time.Second
	// DefaultJitterFactor spreads followers' polls: each wait is the
	// interval times a random factor in [1, 1+JitterFactor).
	DefaultJitterFactor = 0.2
	// DefaultQueryTimeout bounds every SQL statement. A leader's renewal is
	// also bounded by the time left before it must stand down.
	DefaultQueryTimeout = 5 * time.Second
	// MaxNameLen, MaxIDLen and MaxValueLen are the column widths in
	// characters (bytes for names, which are ASCII).
	MaxNameLen  = 128
	MaxIDLen    = 255
	MaxValueLen = 1024
)

// Config configures an election candidate. The constructors copy it: they
// never modify the caller's value, and changing it afterwards has no effect.
// The zero value of every field but Name means its default.
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
	// renewal plus the lease. Default DefaultLeaseDuration; at least 1 ms,
	// stored in milliseconds (rounded up).
	LeaseDuration time.Duration
	// RenewDeadline is how long a leader keeps leading after it sent its
	// last successful renewal, by its monotonic clock. Must be less than
	// LeaseDuration. Default DefaultRenewDeadline.
	RenewDeadline time.Duration
	// RenewInterval is the time between a leader's renewals. Must be less
	// than RenewDeadline. Default DefaultRenewInterval.
	RenewInterval time.Duration
	// RetryInterval is the time between a follower's looks at the election.
	// Default DefaultRetryInterval.
	RetryInterval time.Duration
	// JitterFactor in [0, 1] spreads followers' polls. Default
	// DefaultJitterFactor; set NoJitter to disable.
	JitterFactor float64
	// NoJitter disables the jitter (JitterFactor is then ignored).
	NoJitter bool
	// LockDelay is how long a candidate that became holder without winning
	// an expired or released row (a new row, a row an operator deleted or
	// replaced) waits, renewing, before it is told it leads: long enough for
	// a predecessor that does not know it was deposed to stand down. Default
	// LeaseDuration; it must be at least the longest RenewDeadline of any
	// candidate. See DisableLockDelay.
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
	// DisableFastHandover, the skip is counted by Metrics
	// (sqlelect_fast_handover_skipped_total) and the first one logged. With
	// a pool of n connections, at most n-1 of its elections get the hint.
	DisableFastHandover bool
	// DisableLockDelay makes such a candidate lead at once. The cost: after
	// an operator's REPLACE or DELETE, the deposed leader may still act for
	// up to its RenewDeadline while the new one already does; two leaders
	// overlap. Only safe when leader-only work is fenced (see Fenced).
	DisableLockDelay bool
	// QueryTimeout bounds every SQL statement. Default DefaultQueryTimeout
	// (capped at RenewDeadline).
	QueryTimeout time.Duration
	// Value is published in the row while this candidate holds it (an
	// address, say): up to 1024 characters of UTF-8.
	Value string

	// Callbacks are called on leadership changes; see Callbacks for the
	// contract. All are optional.
	Callbacks Callbacks
	// HealthCheck, when not nil, ties leadership to the application's
	// health (see "Health" in the package documentation). A leader runs it
	// before each renewal, bounded by half the time left before its renew
	// deadline; a follower before each look at the election, bounded by
	// RenewDeadline/2. An error, or no answer in time, stands the leader
	// down (OnDemoted with ReasonUnhealthy) and releases the row, so that a
	// follower takes over at once; while the check fails the candidate
	// does not campaign, and runs it again every RetryInterval. It runs on
	// Run's goroutine and must return soon after its context ends.
	HealthCheck func(ctx context.Context) error
	// Clock is the local clock. Default RealClock{}.
	Clock Clock
	// Logger receives structured logs (election, id, term); nothing is
	// logged at Info level on every heartbeat. Default: discard.
	Logger *slog.Logger
	// Metrics, when not nil, records this election's metrics; see
	// NewMetrics. Several elections may share one Metrics.
	Metrics *Metrics
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
	if c.LeaseDuration == 0 {
		c.LeaseDuration = DefaultLeaseDuration
	}
	if c.RenewDeadline == 0 {
		c.RenewDeadline = DefaultRenewDeadline
	}
	if c.RenewInterval == 0 {
		c.RenewInterval = DefaultRenewInterval
	}
	if c.RetryInterval == 0 {
		c.RetryInterval = DefaultRetryInterval
	}
	if c.JitterFactor == 0 {
		c.JitterFactor = DefaultJitterFactor
	}
	if c.NoJitter {
		c.JitterFactor = 0
	}
	if c.LockDelay == 0 {
		c.LockDelay = c.LeaseDuration
	}
	if c.QueryTimeout == 0 {
		c.QueryTimeout = min(DefaultQueryTimeout, c.RenewDeadline)
	}
	if c.Clock == nil {
		c.Clock = RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Batcher != nil {
		c.DisableFastHandover = true
		if c.Batcher.table != c.Table {
			return c, fmt.Errorf("%w: the Batcher's table %q is not the election's table %q", ErrInvalidConfig, c.Batcher.table, c.Table)
		}
	}
	return c, c.validate()
}

// Validate reports whether c, with defaults applied, is usable. Its errors
// wrap ErrInvalidConfig and name every problem found.
func (c Config) Validate() error {
	_, err := c.withDefaults()
	return err
}

func (c Config) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if err := ValidateName(c.Name); err != nil {
		errs = append(errs, err)
	}
	if err := ValidateID(c.ID); err != nil {
		errs = append(errs, err)
	}
	if err := ValidateTable(c.Table); err != nil {
		errs = append(errs, err)
	}
	if c.LeaseDuration < time.Millisecond {
		bad("lease duration %v: must be at least 1ms", c.LeaseDuration)
	}
	if c.LeaseDuration > 24*time.Hour {
		bad("lease duration %v: must be at most 24h", c.LeaseDuration)
	}
	if c.RenewDeadline <= 0 || c.RenewDeadline >= c.LeaseDuration {
		bad("renew deadline %v: must be positive and less than the lease duration %v", c.RenewDeadline, c.LeaseDuration)
	}
	if c.RenewInterval <= 0 || c.RenewInterval >= c.RenewDeadline {
		bad("renew interval %v: must be positive and less than the renew deadline %v", c.RenewInterval, c.RenewDeadline)
	}
	if c.RetryInterval <= 0 {
		bad("retry interval %v: must be positive", c.RetryInterval)
	}
	if c.JitterFactor < 0 || c.JitterFactor > 1 {
		bad("jitter factor %v: must be between 0 and 1", c.JitterFactor)
	}
	if c.LockDelay < 0 {
		bad("lock delay %v: must not be negative", c.LockDelay)
	} else if !c.DisableLockDelay && c.LockDelay < c.RenewDeadline {
		bad("lock delay %v: must be at least the renew deadline %v, or a deposed leader could still act", c.LockDelay, c.RenewDeadline)
	}
	if c.QueryTimeout <= 0 || c.QueryTimeout > c.RenewDeadline {
		bad("query timeout %v: must be positive and at most the renew deadline %v", c.QueryTimeout, c.RenewDeadline)
	}
	if len(c.Value) > MaxValueLen || !utf8.ValidString(c.Value) {
		bad("value: must be valid UTF-8 of at most %d bytes", MaxValueLen)
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(errs...))
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
// without control characters. Its error wraps ErrInvalidConfig.
func ValidateID(id string) error {
	ok := id != "" && utf8.ValidString(id) && utf8.RuneCountInString(id) <= MaxIDLen &&
		strings.IndexFunc(id, unicode.IsControl) < 0
	if !ok {
		return fmt.Errorf("%w: candidate id %q: must be 1 to %d characters of UTF-8 without control characters", ErrInvalidConfig, id, MaxIDLen)
	}
	return nil
}

// ValidateTable checks a table name: an identifier of letters, digits, _ and
// $ (not starting with a digit or $), at most 64 characters, optionally
// qualified by a database name of the same form. Its error wraps
// ErrInvalidConfig.
func ValidateTable(table string) error {
	parts := strings.Split(table, ".")
	ok := len(parts) <= 2
	for _, p := range parts {
		ok = ok && identRE.MatchString(p)
	}
	if !ok {
		return fmt.Errorf("%w: table %q: must be an identifier ([A-Za-z_][A-Za-z0-9_$]*, at most 64 characters), optionally db.table", ErrInvalidConfig, table)
	}
	return nil
}

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
