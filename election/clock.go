package election

import "time"

// Clock is the package's only source of local time. The real clock reads the
// monotonic clock through time.Now; tests inject a fake one to drive the
// timing logic without sleeping. A Clock must be safe for concurrent use.
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

// RealClock is the Clock backed by the time package. Its zero value is ready
// to use.
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// Since returns time.Since(t): with a monotonic t it reads only the
// monotonic clock, which is cheaper than Now.
func (RealClock) Since(t time.Time) time.Duration { return time.Since(t) }

// NewTimer returns a time.Timer wrapped as a Timer.
func (RealClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }
