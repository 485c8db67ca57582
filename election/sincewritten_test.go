package election

import (
	"testing"
	"time"
)

// TestSinceWrittenTrustsLessASecond: the lock delay of a row an operator
// wrote counts from the stored last_seen_active; when that time has no
// fraction (a plain REPLACE with NOW(), truncated to the second), less a
// second: a row written 0.95 s "ago" by its stored time may have been
// written just now, and the whole delay remains. Assume's microseconds are
// trusted as they are.
func TestSinceWrittenTrustsLessASecond(t *testing.T) {
	b := &lockBackend{backendBase: backendBase{cfg: settings{TuningConfig: TuningConfig{LockDelay: 2 * time.Second}}}}
	whole := time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)
	micro := whole.Add(123456 * time.Microsecond)
	for _, tc := range []struct {
		stored        time.Time
		elapsed, want time.Duration // since the stored last_seen_active
	}{
		{whole, 0, 2 * time.Second},
		{whole, 950 * time.Millisecond, 2 * time.Second},
		{whole, 1500 * time.Millisecond, 1500 * time.Millisecond},
		{whole, 3 * time.Second, 0},
		{micro, 950 * time.Millisecond, 1050 * time.Millisecond},
		{micro, 10 * time.Second, 0},
	} {
		rec := Record{Lease: 10 * time.Second, LeaseLeft: 10*time.Second - tc.elapsed, LastRenewal: tc.stored}
		if got := b.sinceWritten(rec); got != tc.want {
			t.Errorf("stored %v ago: lock delay %v, want %v", tc.elapsed, got, tc.want)
		}
	}
}
