package election

import (
	"errors"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/internal/getlock"
)

func TestConfigValidation(t *testing.T) {
	ok := Config{Name: "orders"}
	tests := []struct {
		name    string
		mod     func(*Config)
		wantErr string // substring; empty means valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"missing name", func(c *Config) { c.Name = "" }, "election name"},
		{"name with space", func(c *Config) { c.Name = "my app" }, "election name"},
		{"name too long", func(c *Config) { c.Name = strings.Repeat("a", 129) }, "election name"},
		{"name max length", func(c *Config) { c.Name = strings.Repeat("a", 128) }, ""},
		{"name with slash", func(c *Config) { c.Name = "service/orders/leader" }, ""},
		{"id with control char", func(c *Config) { c.ID = "node\n1" }, "candidate id"},
		{"id with trailing space", func(c *Config) { c.ID = "node1 " }, "ends with a space"},
		{"id of only spaces", func(c *Config) { c.ID = "   " }, "only white space"},
		{"id with inner and leading space", func(c *Config) { c.ID = " node 1" }, ""},
		{"id too long", func(c *Config) { c.ID = strings.Repeat("é", 256) }, "candidate id"},
		{"table injection", func(c *Config) { c.Table = "t; DROP TABLE x" }, "table"},
		{"table qualified", func(c *Config) { c.Table = "app.service_election" }, ""},
		{"table three parts", func(c *Config) { c.Table = "a.b.c" }, "table"},
		// <table>_decision (a CHECK constraint) must fit in 64 characters.
		{"table at the length limit", func(c *Config) { c.Table = strings.Repeat("t", 55) }, ""},
		{"table past the length limit", func(c *Config) { c.Table = strings.Repeat("t", 56) },
			"56 characters, at most 55: the schema names its CHECK constraint " + strings.Repeat("t", 56) + "_decision"},
		{"table of 64 characters", func(c *Config) { c.Table = strings.Repeat("t", 64) }, "64 characters, at most 55"},
		{"qualified table past the length limit", func(c *Config) { c.Table = "app." + strings.Repeat("t", 56) }, "at most 55"},
		{"database of 64 characters", func(c *Config) { c.Table = strings.Repeat("d", 64) + ".service_election" }, ""},
		{"lease below renew deadline", func(c *Config) { c.LeaseDuration = 5 * time.Second; c.Tuning.RenewDeadline = 6 * time.Second }, "renew deadline"},
		{"lease alone scales the rest", func(c *Config) { c.LeaseDuration = 5 * time.Second }, ""},
		{"renew interval above deadline", func(c *Config) { c.Tuning.RenewInterval = 11 * time.Second }, "renew interval"},
		{"negative retry", func(c *Config) { c.Tuning.RetryInterval = -time.Second }, "retry interval"},
		{"jitter above one", func(c *Config) { c.Tuning.JitterFactor = 1.5 }, "jitter factor 1.5: must be at most 1 (0 for the default 0.2, negative for none)"},
		{"jitter NaN", func(c *Config) { c.Tuning.JitterFactor = math.NaN() }, "jitter factor NaN"},
		{"jitter infinite", func(c *Config) { c.Tuning.JitterFactor = math.Inf(1) }, "jitter factor +Inf"},
		{"jitter one", func(c *Config) { c.Tuning.JitterFactor = 1 }, ""},
		{"jitter off", func(c *Config) { c.Tuning.JitterFactor = -1 }, ""},
		{"jitter negative", func(c *Config) { c.Tuning.JitterFactor = -0.5 }, ""},
		{"lock delay shorter than deadline", func(c *Config) { c.Tuning.LockDelay = time.Second }, "lock delay"},
		{"lock delay disabled", func(c *Config) { c.Tuning.LockDelay = time.Second; c.Tuning.DisableLockDelay = true }, ""},
		{"query timeout above deadline", func(c *Config) { c.Tuning.QueryTimeout = time.Minute }, "query timeout"},
		{"tiny lease", func(c *Config) { c.LeaseDuration = time.Microsecond }, "lease duration"},
		{"lease below the floor", func(c *Config) { c.LeaseDuration = minLeaseDuration - 1 }, "lease duration"},
		{"lease at the floor", func(c *Config) { c.LeaseDuration = minLeaseDuration }, ""},
		{"lease above the ceiling", func(c *Config) { c.LeaseDuration = maxLeaseDuration + 1 }, "lease duration"},
		{"sub-second timings", func(c *Config) {
			c.LeaseDuration, c.Tuning.RenewDeadline, c.Tuning.RenewInterval, c.Tuning.RetryInterval = time.Second, 600*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond
		}, ""},
		{"value too long", func(c *Config) { c.Value = strings.Repeat("v", 1025) }, "value"},
		{"priority negative", func(c *Config) { c.Preference.Priority = -1 }, "priority -1: must be from 0 (no preference) to 1000"},
		{"priority above the maximum", func(c *Config) { c.Preference.Priority = maxPriority + 1 }, "priority 1001: must be from 0"},
		{"priority at the maximum", func(c *Config) { c.Preference.Priority = maxPriority }, ""},
		{"negative preference tenure", func(c *Config) { c.Preference.Priority = 1; c.Preference.Tenure = -time.Second }, "preference tenure -1s: must not be negative"},
		{"short preference tenure", func(c *Config) { c.Preference.Priority = 1; c.Preference.Tenure = time.Millisecond }, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.mod(&c)
			err := c.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && err == nil:
				t.Fatalf("want an error mentioning %q", tc.wantErr)
			case tc.wantErr != "" && (!errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %q: want ErrInvalidConfig mentioning %q", err, tc.wantErr)
			}
		})
	}
}

// TestJitterFactor: zero is the default, a negative value (-1) is
// kept as given, so that WithDefaults' copy means the same when passed
// again, and no wait is then jittered; the caller's Config is not changed.
func TestJitterFactor(t *testing.T) {
	for _, tc := range []struct {
		name    string
		factor  float64
		want    float64
		maxWait time.Duration // bound of a jittered 1s wait; 1s: not jittered
	}{
		{"default", 0, defaultJitterFactor, 1200 * time.Millisecond},
		{"given", 0.5, 0.5, 1500 * time.Millisecond},
		{"off", -1, -1, time.Second},
		{"off, any negative", -0.3, -0.3, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{Name: "e", Tuning: TuningConfig{JitterFactor: tc.factor}}
			d, err := c.WithDefaults()
			if err != nil || d.Tuning.JitterFactor != tc.want || c.Tuning.JitterFactor != tc.factor {
				t.Fatalf("JitterFactor %v (caller's %v), %v; want %v (caller's %v)", d.Tuning.JitterFactor, c.Tuning.JitterFactor, err, tc.want, tc.factor)
			}
			if again, _ := d.WithDefaults(); again.Tuning.JitterFactor != d.Tuning.JitterFactor {
				t.Errorf("WithDefaults twice: %v, then %v", d.Tuning.JitterFactor, again.Tuning.JitterFactor)
			}
			for range 1000 {
				w := getlock.Jitter(time.Second, d.Tuning.JitterFactor)
				ok := w >= time.Second && w < tc.maxWait
				if tc.maxWait == time.Second {
					ok = w == time.Second // no jitter
				}
				if !ok {
					t.Fatalf("jittered wait %v, want in [1s, %v), or 1s without jitter", w, tc.maxWait)
				}
			}
		})
	}
}

// TestPreferenceTenureDefault: a zero PreferenceTenure is one lease, the
// given or derived one; a given one is kept.
func TestPreferenceTenureDefault(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Config
		want time.Duration
	}{
		{"default lease", Config{Name: "e"}, DefaultLeaseDuration},
		{"given lease", Config{Name: "e", LeaseDuration: 3 * time.Second}, 3 * time.Second},
		{"lease from the renew deadline", Config{Name: "e", Tuning: TuningConfig{RenewDeadline: 2 * time.Second}}, 3 * time.Second},
		{"given tenure", Config{Name: "e", Preference: PreferenceConfig{Tenure: 42 * time.Second}}, 42 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tc.c.WithDefaults()
			if err != nil || c.Preference.Tenure != tc.want {
				t.Errorf("PreferenceTenure %v, %v; want %v", c.Preference.Tenure, err, tc.want)
			}
		})
	}
}

// TestConfigErrorMessages: validation names the first root cause only, once
// prefixed, and says which durations are defaults.
func TestConfigErrorMessages(t *testing.T) {
	const p = "election: invalid config: "
	for _, tc := range []struct {
		name string
		c    Config
		want string
	}{
		{"bad name", Config{Name: "bad name"},
			p + `election name "bad name": must be 1 to 128 characters among letters, digits and . _ - : / @`},
		{"bad name and bad lease", Config{Name: "", LeaseDuration: -time.Second},
			p + `election name "": must be 1 to 128 characters among letters, digits and . _ - : / @`},
		{"bad ID", Config{Name: "e", ID: "a\nb"},
			p + `candidate id "a\nb": must be 1 to 255 characters of UTF-8 without control characters`},
		{"bad table", Config{Name: "e", Table: "a.b.c"},
			p + `table "a.b.c": must be an identifier ([A-Za-z_][A-Za-z0-9_$]*, at most 64 characters), optionally db.table`},
		{"lease 1ns", Config{Name: "e", LeaseDuration: time.Nanosecond},
			p + "lease duration 1ns: must be from 100ms to 24h0m0s"},
		{"negative lease", Config{Name: "e", LeaseDuration: -time.Second},
			p + "lease duration -1s: must be from 100ms to 24h0m0s"},
		{"lease 1ms", Config{Name: "e", LeaseDuration: time.Millisecond},
			p + "lease duration 1ms: must be from 100ms to 24h0m0s"},
		{"renew deadline alone too short", Config{Name: "e", Tuning: TuningConfig{RenewDeadline: time.Millisecond}},
			p + "renew deadline 1ms: must be from 66.666667ms to 16h0m0s"},
		{"renew deadline above the lease", Config{Name: "e", LeaseDuration: 2 * time.Second, Tuning: TuningConfig{RenewDeadline: 3 * time.Second}},
			p + "renew deadline 3s: must be positive and less than the lease duration 2s"},
		{"negative renew deadline", Config{Name: "e", Tuning: TuningConfig{RenewDeadline: -time.Second}},
			p + "renew deadline -1s: must be positive and less than the lease duration 15s (default)"},
		{"renew interval above the default deadline", Config{Name: "e", Tuning: TuningConfig{RenewInterval: 11 * time.Second}},
			p + "renew interval 11s: must be positive and less than the renew deadline 10s (default: 2/3 of the lease)"},
		{"renew interval above the derived deadline", Config{Name: "e", LeaseDuration: 3 * time.Second, Tuning: TuningConfig{RenewInterval: 2 * time.Second}},
			p + "renew interval 2s: must be positive and less than the renew deadline 2s (default: 2/3 of the lease)"},
		{"lock delay", Config{Name: "e", Tuning: TuningConfig{LockDelay: time.Second}},
			p + "lock delay 1s: must be at least the renew deadline 10s (default: 2/3 of the lease), or a deposed leader could still act"},
		{"query timeout", Config{Name: "e", Tuning: TuningConfig{QueryTimeout: time.Minute}},
			p + "query timeout 1m0s: must be positive and at most the renew deadline 10s (default: 2/3 of the lease)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Validate()
			if err == nil || err.Error() != tc.want || !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("Validate() = %v\nwant           %s", err, tc.want)
			}
		})
	}
}

// TestConfigDerivedDurations: missing durations follow the given ones with
// the Default*Fraction constants.
func TestConfigDerivedDurations(t *testing.T) {
	for _, tc := range []struct {
		name                                     string
		c                                        Config
		lease, deadline, renew, retry, lockDelay time.Duration
	}{
		{"defaults", Config{}, 15 * time.Second, 10 * time.Second, 2 * time.Second, 2 * time.Second, 15 * time.Second},
		{"lease", Config{LeaseDuration: 3 * time.Second}, 3 * time.Second, 2 * time.Second, 400 * time.Millisecond, 400 * time.Millisecond, 3 * time.Second},
		{"minimum lease", Config{LeaseDuration: minLeaseDuration}, 100 * time.Millisecond, 66666667, 13333333, 13333333, 100 * time.Millisecond},
		{"renew deadline", Config{Tuning: TuningConfig{RenewDeadline: 4 * time.Second}}, 6 * time.Second, 4 * time.Second, 800 * time.Millisecond, 800 * time.Millisecond, 6 * time.Second},
		{"lease and renew deadline", Config{LeaseDuration: 15 * time.Second, Tuning: TuningConfig{RenewDeadline: time.Second}}, 15 * time.Second, time.Second, 200 * time.Millisecond, 2 * time.Second, 15 * time.Second},
		{"all given", Config{LeaseDuration: 2 * time.Second, Tuning: TuningConfig{RenewDeadline: 1200 * time.Millisecond, RenewInterval: 200 * time.Millisecond, RetryInterval: 300 * time.Millisecond, LockDelay: 5 * time.Second}},
			2 * time.Second, 1200 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.c.Name = "e"
			d, err := tc.c.settings()
			if err != nil {
				t.Fatal(err)
			}
			if d.LeaseDuration != tc.lease || d.RenewDeadline != tc.deadline || d.RenewInterval != tc.renew ||
				d.RetryInterval != tc.retry || d.LockDelay != tc.lockDelay {
				t.Errorf("got lease %v, renew deadline %v, renew %v, retry %v, lock delay %v; want %v, %v, %v, %v, %v",
					d.LeaseDuration, d.RenewDeadline, d.RenewInterval, d.RetryInterval, d.LockDelay,
					tc.lease, tc.deadline, tc.renew, tc.retry, tc.lockDelay)
			}
		})
	}
	// The documented defaults are the fractions applied to the default lease.
	if scale(DefaultLeaseDuration, renewDeadlineFraction) != (10*time.Second) ||
		scale((10*time.Second), renewIntervalFraction) != (2*time.Second) ||
		scale(DefaultLeaseDuration, retryIntervalFraction) != (2*time.Second) {
		t.Error("the Default* durations do not follow the Default*Fraction constants")
	}
}

func TestConfigDefaultsDoNotMutateCaller(t *testing.T) {
	c := Config{Name: "orders"}
	d, err := c.settings()
	if err != nil {
		t.Fatal(err)
	}
	if c.ID != "" || c.LeaseDuration != 0 || c.Table != "" {
		t.Fatalf("caller's config changed: %+v", c)
	}
	if d.LeaseDuration != DefaultLeaseDuration || d.RenewDeadline != (10*time.Second) ||
		d.LockDelay != DefaultLeaseDuration || d.Table != DefaultTable || d.ID == "" || d.Logger != slog.Default() {
		t.Fatalf("defaults not applied: %+v", d)
	}
}

func TestDefaultIDIsReadableAndUnique(t *testing.T) {
	a, b := DefaultID(), DefaultID()
	if a == b {
		t.Fatalf("two DefaultIDs equal: %q", a)
	}
	if parts := strings.Split(a, ":"); len(parts) != 3 {
		t.Fatalf("DefaultID %q: want host:pid:token", a)
	}
}

func TestLeaseMillisRoundsUp(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int64
	}{{time.Second, 1000}, {1500 * time.Microsecond, 2}, {time.Millisecond, 1}} {
		if got := ceilMillis(tc.d); got != tc.want {
			t.Errorf("ceilMillis(%v) = %d, want %d", tc.d, got, tc.want)
		}
	}
}

func TestNewTableRejectsBadInput(t *testing.T) {
	if _, err := NewTable(nil, Config{Name: "x"}); !errors.Is(err, ErrNilDB) || !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("nil db: %v", err)
	}
}

func TestUnixDecimal(t *testing.T) {
	got := unixDecimal("1763790000.123456")
	if got.Unix() != 1763790000 || got.Nanosecond() != 123456000 {
		t.Fatalf("unixDecimal = %v", got)
	}
	if !unixDecimal("").IsZero() {
		t.Fatal("empty should be zero")
	}
}

// The health check's interval, timeout and hold-down default to the renew
// interval, half the renew deadline, and the longer of the tenure and three
// intervals; negative values are refused.
func TestHealthCheckDefaults(t *testing.T) {
	cfg, err := Config{Name: "e", ID: "me"}.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Health.Interval != (2*time.Second) || cfg.Health.Timeout != (10*time.Second)/2 ||
		cfg.Health.HoldDown != DefaultLeaseDuration {
		t.Errorf("interval %v timeout %v hold-down %v", cfg.Health.Interval, cfg.Health.Timeout, cfg.Health.HoldDown)
	}
	cfg, _ = Config{Name: "e", ID: "me", Health: HealthConfig{Interval: 10 * time.Second}}.WithDefaults()
	if cfg.Health.HoldDown != 30*time.Second {
		t.Errorf("hold-down %v with a 10s interval, want 30s", cfg.Health.HoldDown)
	}
	for _, c := range []Config{{Health: HealthConfig{Interval: -1}}, {Health: HealthConfig{Timeout: -1}}, {Health: HealthConfig{HoldDown: -1}}} {
		c.Name, c.ID = "e", "me"
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: %v, want ErrInvalidConfig", c, err)
		}
	}
}

// TestConfigGivenIDSkipsDefaultID: an ID that is given is used as it is,
// without computing DefaultID (a hostname look-up and random bytes, which
// every constructor and Validate would pay for nothing): with an ID like
// DefaultID's given, the defaults cost fewer allocations than with it
// derived.
func TestConfigGivenIDSkipsDefaultID(t *testing.T) {
	id := DefaultID()
	given := testing.AllocsPerRun(50, func() { _ = Config{Name: "orders", ID: id}.Validate() })
	derived := testing.AllocsPerRun(50, func() { _ = Config{Name: "orders"}.Validate() })
	if given >= derived {
		t.Fatalf("defaults with an ID given: %v allocations, with it derived: %v; want fewer (DefaultID not run)", given, derived)
	}
}
