package electiontest

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/election"
)

// logs keeps the last maxLogLines lines that a cluster's candidates logged,
// at debug level (their failed renewals and looks, with the errors), and
// prints them when the test failed: a lease lost with no stall seen then
// shows what each renewal met. Passing tests print none of it.
type logs struct {
	mu    sync.Mutex
	lines []string
}

const maxLogLines = 400

// Write takes one line from a slog.TextHandler (one Write a record).
func (l *logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, string(bytes.TrimRight(p, "\n")))
	if n := len(l.lines); n > 2*maxLogLines {
		l.lines = append(l.lines[:0], l.lines[n-maxLogLines:]...)
	}
	return len(p), nil
}

// logger is the candidates' Logger.
func (l *logs) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// print logs the last lines if t failed.
func (l *logs) print(t *testing.T) {
	if !t.Failed() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	t.Logf("the candidates' last %d log lines:\n  %s", min(len(l.lines), maxLogLines),
		strings.Join(l.lines[max(len(l.lines)-maxLogLines, 0):], "\n  "))
}

// slowBeats is the candidates' Config.Metrics: it logs each statement of
// a campaign that failed or took stallMin or more (a renewal that came
// back after the renew deadline among them), which the candidates do not
// log themselves.
type slowBeats struct{ log *slog.Logger }

func (s slowBeats) Start(election.Config, func() election.Progress) func() { return func() {} }
func (s slowBeats) Elected(string, uint64)                                 {}
func (s slowBeats) Demoted(string, election.Reason)                        {}
func (s slowBeats) LeaseLost(string)                                       {}
func (s slowBeats) HealthCheck(string, error, bool)                        {}
func (s slowBeats) HandoverSkipped(string)                                 {}
func (s slowBeats) PreferenceRequested(string)                             {}

func (s slowBeats) Heartbeat(name string, d time.Duration, err error) {
	if err != nil || d >= stallMin {
		s.log.Info("suite: slow or failed statement", "election", name, "took", d, "err", err)
	}
}
