package election

import "time"

// Clock is the package's only source of local time: every reading of the
// time and every timer of a candidate (its campaign loop, the leadership
// watchdog, the lock backend's GET_LOCK wait and idle limit) goes through
// Config.Tuning.Clock, a Batcher's linger through its own Clock, and nothing else in
// the package calls time.Now, time.Since or the time package's timers.
// Statement timeouts are the exception: they are context deadlines, which
// database/sql counts in real time.
//
// A nil Clock means the time package's, which reads the monotonic clock
// through time.Now. Another Clock changes a candidate's view of time:
// electiontest.FreezableClock stops it, as SIGSTOP would, while the
// database's time goes on. (The package's unit tests inject none: they run
// the time package's in testing/synctest bubbles, whose time is fake.) A
// Clock must be safe for concurrent use.
//
// Only durations between two Now readings of the same Clock are used, never
// wall-clock values: a leader stands down by the monotonic clock, which keeps
// counting while the process is stopped (SIGSTOP, long GC pauses) but, on
// Linux, not while the whole machine is suspended.
type Clock interface {
	// Now returns the current time, with a monotonic reading.
	Now() time.Time
	// NewTimer returns a timer that fires once after d.
	NewTimer(d time.Duration) Timer
}

// Timer is a single-shot timer created by a Clock.
type Timer interface {
	// C returns the channel on which the firing time is delivered.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it was active.
	Stop() bool
}

// realClock is the time package's Clock: what a nil Clock means.
type realClock struct{}

func (realClock) Now() time.Time                 { return time.Now() }
func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

// Since returns time.Since(t): with a monotonic t it reads only the
// monotonic clock, which is cheaper than Now.
func (realClock) Since(t time.Time) time.Duration { return time.Since(t) }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }
