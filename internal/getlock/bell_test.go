package getlock_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/internal/getlock"
	"github.com/sqlelect/sqlelect/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

type nopMetrics struct{}

func (nopMetrics) Heartbeat(string, time.Duration, error) {}
func (nopMetrics) HandoverSkipped(string)                 {}

// TestBellWaitsInGetLock: the bell's connection waits in GET_LOCK, never
// in SLEEP. On MariaDB a KILL QUERY of a thread that is leaving a SLEEP
// (its time ran out, or another KILL woke it: two rings at once) holds
// the mutex every SLEEP of the server waits on for 2 s, stalling them all;
// that is how a shard group's join, which rings a member from several
// processes at once, stalled the whole server. And every ring of many at
// once, from several connections, wakes the bell.
func TestBellWaitsInGetLock(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db := testdb.Open(t, testdb.DSN(t))
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "bell-" + hex.EncodeToString(b)
	rang := make(chan struct{}, 1)
	bell := &getlock.Bell{Hint: getlock.Hint{DB: db, Log: slog.Default(), Election: name, Metrics: nopMetrics{}, Timeout: 5 * time.Second},
		// Every outlasts the test: a wait that ran out just before the
		// rings came would let them all fall between two waits.
		Table: "service_election", Every: 2 * time.Minute,
		Sleep: func(ctx context.Context, d time.Duration) bool {
			select {
			case <-time.After(d):
				return true
			case <-ctx.Done():
				return false
			}
		}}
	stop := bell.Start(rang)
	t.Cleanup(func() {
		stop()
		bell.Free(context.Background())
	})

	// waiting waits until the bell's connection waits in its statement (a
	// ring that comes between two of its waits is missed), and returns the
	// state its thread waits in: "User lock" for GET_LOCK, "User sleep"
	// for SLEEP, on MariaDB and MySQL alike. A statement a ring has ended
	// may be seen running still, but no longer in either state: the bell
	// sends on rang once the server answered it, after its thread left the
	// wait.
	waiting := func() string {
		for {
			var state sql.NullString
			err := db.QueryRowContext(ctx, `SELECT STATE FROM information_schema.PROCESSLIST
WHERE ID = IS_USED_LOCK(`+getlock.BellSQL("service_election", name)+`) AND COMMAND = 'Query'
AND INFO LIKE 'SELECT%' AND STATE IN ('User lock', 'User sleep')`).Scan(&state)
			if err == nil && state.String != "" {
				return state.String
			}
			if err != nil && err != sql.ErrNoRows {
				t.Fatal(err)
			}
			select {
			case <-ctx.Done():
				t.Fatal("the bell never waited")
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	if state := waiting(); state == "User sleep" {
		t.Fatalf("the bell's connection waits in SLEEP (state %q), want GET_LOCK", state)
	}

	for round := range 20 {
		waiting()
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				if err := getlock.Ring(ctx, db, "service_election", name); err != nil {
					t.Errorf("round %d: ring: %v", round, err)
				}
			})
		}
		wg.Wait()
		select {
		case <-rang:
		case <-ctx.Done():
			t.Fatalf("round %d: three rings at once never woke the bell", round)
		}
	}
}
