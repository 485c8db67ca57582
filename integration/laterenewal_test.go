package integration

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/election"
)

// offsetClock is the real clock plus an offset the test moves forward: to
// the candidate, time jumps, as when its process is descheduled or paused
// between sending a renewal and reading the answer. Timers run on real time.
type offsetClock struct{ off atomic.Int64 }

func (c *offsetClock) Now() time.Time                          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *offsetClock) NewTimer(d time.Duration) election.Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ *time.Timer }

func (t realTimer) C() <-chan time.Time { return t.Timer.C }

// TestLateRenewalDoesNotReviveLeadership: a renewal sent before the
// leader's deadline whose answer is read after it (by the leader's clock)
// must not extend a leadership that already ran out: IsLeader turned false,
// so that leadership is over (OnDemoted, lease lost), and since the row is
// still held a new one begins (OnElected again). Before, the late success
// extended the deadline: IsLeader went back to true within the same
// leadership, with no demotion (and, when the watchdog had fired, with its
// context cancelled: a zombie leader).
func TestLateRenewalDoesNotReviveLeadership(t *testing.T) {
	t.Parallel()
	const (
		lease = 2 * time.Second
		rd    = 1200 * time.Millisecond
		ri    = 200 * time.Millisecond
	)
	db, p := proxiedDB(t)

	var mu sync.Mutex
	var events []string
	add := func(s string) { mu.Lock(); events = append(events, s); mu.Unlock() }
	clock := &offsetClock{}
	e, err := election.NewTable(db, election.Config{
		Name: "late", ID: "node-1", LeaseDuration: lease, Tuning: election.TuningConfig{RenewDeadline: rd, RenewInterval: ri, RetryInterval: ri, QueryTimeout: 500 * time.Millisecond, DisableFastHandover: true, Clock: clock},
		Callbacks: election.Callbacks{
			OnElected: func(ctx context.Context, l election.Leadership) { add("elected"); <-ctx.Done() },
			OnDemoted: func(d election.Demotion) { add("demoted:" + string(d.Reason)) },
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	deadline := time.Now().Add(2 * lease)
	// Leading, and OnElected ran (it starts in a goroutine of its own
	// after IsLeader turned true).
	elected := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(events) > 0
	}
	for !e.IsLeader() || !elected() {
		if time.Now().After(deadline) {
			t.Fatal("not elected")
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(2 * ri) // steady renewals

	// The next renewal: as it leaves, the leader's clock jumps past the
	// deadline of its last renewal (sent about ri before this one) but not
	// past the deadline this renewal would set.
	// The events are counted in the hook, before the renewal reaches the
	// server: once the hook returns, the answer can come back and be acted
	// on (a demotion, a new leadership) before this goroutine runs again.
	type jump struct {
		leading bool
		n       int // events before the renewal
	}
	jumped := make(chan jump, 1)
	// A holder's renewal is one UPDATE (election/table.go, tableStmts.renew);
	// the heartbeat runs only when that renews nothing.
	p.On([]byte("backend = 'table', connection_id = NULL, transfer_to = NULL"), func() {
		clock.off.Add(int64(rd - ri/2))
		mu.Lock()
		n := len(events)
		mu.Unlock()
		jumped <- jump{e.IsLeader(), n}
	})
	var n int
	select {
	case j := <-jumped:
		if j.leading {
			t.Fatal("IsLeader true past the deadline")
		}
		n = j.n
	case <-time.After(5 * time.Second):
		t.Fatal("no renewal")
	}
	// Until the renewal's answer has been processed and well after: the
	// leader may lead again only as a new leadership, after a demotion.
	for end := time.Now().Add(ri); time.Now().Before(end); time.Sleep(time.Millisecond) {
		leading := e.IsLeader()
		mu.Lock()
		since := strings.Join(events[n:], ",")
		mu.Unlock()
		if leading && !strings.HasPrefix(since, "demoted:lease_lost") {
			t.Fatalf("IsLeader true again after the deadline with events %q since: the late renewal revived the leadership that had run out", since)
		}
	}
	mu.Lock()
	after := strings.Join(events[n:], ",")
	mu.Unlock()
	t.Logf("events after the late renewal: %q; leader: %v", after, e.IsLeader())
}
