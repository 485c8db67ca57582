package election

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-sql-driver/mysql"
)

// logLines is a slog handler that keeps each record's level and message.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l *logLines) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logLines) WithGroup(string) slog.Handler            { return l }
func (l *logLines) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.lines = append(l.lines, r.Level.String()+" "+r.Message)
	l.mu.Unlock()
	return nil
}

// above returns the lines logged at level or above, in order.
func (l *logLines) above(level slog.Level) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		var lv slog.Level
		if lv.UnmarshalText([]byte(strings.Fields(line)[0])) == nil && lv >= level {
			out = append(out, line)
		}
	}
	return strings.Join(out, "; ")
}

// TestUnreachableLoggedOncePerChange: a database that does not answer (a
// connection error, a timeout), at preflight or later, is logged once when
// it stops answering and once when it answers again, not at each of its
// retries, which are each counted (Metrics.Heartbeat); Progress says so
// meanwhile (electionhttp's HealthzHandler stays 200 and says so). A
// deadlock (a stampede of first candidates) is the database's answer,
// retried by design: logged at Debug level only, and counted as kind
// deadlock.
func TestUnreachableLoggedOncePerChange(t *testing.T) {
	refused := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	deadlock := &mysql.MySQLError{Number: 1213 /* ER_LOCK_DEADLOCK */, Message: "Deadlock found when trying to get lock; try restarting transaction"}
	const retries = 10
	for _, tc := range []struct {
		name      string
		pre, look error  // the preflight's error, the follower's
		kind      string // the kind counted
		logged    string // at Info level and above
	}{
		{"preflight refused", refused, nil, "connection",
			"WARN database unreachable; retrying; INFO database reachable again"},
		{"follow times out", nil, context.DeadlineExceeded, "timeout",
			"WARN database unreachable; retrying; INFO database reachable again"},
		{"follow deadlocks", nil, deadlock, "deadlock", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				logs, m := &logLines{}, newRecMetrics()
				b := &fakeBackend{preErr: tc.pre, followErr: tc.look}
				h := newHarness(t, b, func(c *Config) { c.Tuning.Logger, c.Metrics = slog.New(logs), m })
				synctest.Wait()
				for range retries - 1 {
					advance(tRetry)
				}
				want := time.Duration(0)
				if tc.kind != "deadlock" {
					want = 9 * time.Second
				}
				if p := h.c.Progress(); !p.Running || p.Wedged || p.Unreachable.Round(time.Millisecond) != want {
					t.Errorf("progress running %v wedged %v unreachable %v after %d failures, want unreachable %v",
						p.Running, p.Wedged, p.Unreachable, retries, want)
				}
				if n := m.n("error:" + tc.kind); n != retries {
					t.Errorf("%d errors of kind %s counted, want %d", n, tc.kind, retries)
				}
				b.set(func(f *fakeBackend) { f.preErr, f.followErr = nil, nil })
				advance(tRetry)
				if p := h.c.Progress(); !p.Running || p.Wedged || p.Unreachable != 0 {
					t.Errorf("progress running %v wedged %v unreachable %v once the database answers", p.Running, p.Wedged, p.Unreachable)
				}
				if got := logs.above(slog.LevelInfo); got != tc.logged {
					t.Errorf("logged %q, want %q", got, tc.logged)
				}
			})
		})
	}
}
