package election

import (
	"errors"
	"strings"
	"testing"
	"time"
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
		{"id with trailing space is distinct and valid", func(c *Config) { c.ID = "node1 " }, ""},
		{"id too long", func(c *Config) { c.ID = strings.Repeat("é", 256) }, "candidate id"},
		{"table injection", func(c *Config) { c.Table = "t; DROP TABLE x" }, "table"},
		{"table qualified", func(c *Config) { c.Table = "app.service_election" }, ""},
		{"table three parts", func(c *Config) { c.Table = "a.b.c" }, "table"},
		{"lease below renew deadline", func(c *Config) { c.LeaseDuration = 5 * time.Second }, "renew deadline"},
		{"renew interval above deadline", func(c *Config) { c.RenewInterval = 11 * time.Second }, "renew interval"},
		{"negative retry", func(c *Config) { c.RetryInterval = -time.Second }, "retry interval"},
		{"jitter above one", func(c *Config) { c.JitterFactor = 1.5 }, "jitter"},
		{"lock delay shorter than deadline", func(c *Config) { c.LockDelay = time.Second }, "lock delay"},
		{"lock delay disabled", func(c *Config) { c.LockDelay = time.Second; c.DisableLockDelay = true }, ""},
		{"query timeout above deadline", func(c *Config) { c.QueryTimeout = time.Minute }, "query timeout"},
		{"tiny lease", func(c *Config) { c.LeaseDuration = time.Microsecond }, "lease duration"},
		{"sub-second timings", func(c *Config) {
			c.LeaseDuration, c.RenewDeadline, c.RenewInterval, c.RetryInterval = time.Second, 600*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond
		}, ""},
		{"value too long", func(c *Config) { c.Value = strings.Repeat("v", 1025) }, "value"},
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

func TestConfigDefaultsDoNotMutateCaller(t *testing.T) {
	c := Config{Name: "orders"}
	d, err := c.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.ID != "" || c.LeaseDuration != 0 || c.Table != "" {
		t.Fatalf("caller's config changed: %+v", c)
	}
	if d.LeaseDuration != DefaultLeaseDuration || d.RenewDeadline != DefaultRenewDeadline ||
		d.LockDelay != DefaultLeaseDuration || d.Table != DefaultTable || d.ID == "" {
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
		if got := (Config{LeaseDuration: tc.d}).leaseMillis(); got != tc.want {
			t.Errorf("leaseMillis(%v) = %d, want %d", tc.d, got, tc.want)
		}
	}
}

func TestNewTableRejectsBadInput(t *testing.T) {
	if _, err := NewTable(nil, Config{Name: "x"}); !errors.Is(err, ErrNilDB) {
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
