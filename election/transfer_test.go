package election

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sqlelect/sqlelect/internal/ident"
)

// handed returns the targets the backend handed the row to.
func (f *fakeBackend) handedTo() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.handed...)
}

func TestTransferStandsDownThenHandsOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &fakeBackend{followB: beat{held: true, term: 5}}
		h := newHarness(t, b, nil)
		synctest.Wait()
		b.set(func(f *fakeBackend) { f.followB = beat{} })
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()

		for _, tc := range []struct {
			to   string
			want error
		}{
			{"", ErrInvalidConfig},
			{"bad\x00id", ErrInvalidConfig},
			{"me", nil}, // itself: a no-op
		} {
			if err := h.c.Transfer(ctx, tc.to); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Errorf("Transfer(%q) = %v, want %v", tc.to, err, tc.want)
			}
		}
		if !h.c.IsLeader() || len(b.handedTo()) != 0 {
			t.Fatal("a refused or self transfer changed the leadership")
		}

		if err := h.c.Transfer(ctx, "other"); err != nil {
			t.Fatal(err)
		}
		if h.c.IsLeader() {
			t.Fatal("leader after Transfer")
		}
		if got := b.handedTo(); len(got) != 1 || got[0] != "other" {
			t.Fatalf("handed over to %v, want [other]", got)
		}
		if b.window != 2*tRetry {
			t.Errorf("transfer window %v, want 2 × RetryInterval = %v", b.window, 2*tRetry)
		}
		// Stood down before the row was handed over: OnElected returned and
		// OnDemoted was called by the time Transfer returned.
		if got, want := h.ev.String(), "leader:me,elected,elected-returned,demoted:transferred"; got != want {
			t.Fatalf("events %q, want %q", got, want)
		}
		// A non-leader is refused.
		if err := h.c.Transfer(ctx, "other"); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("Transfer by a non-leader = %v, want ErrNotLeader", err)
		}
		// It sits out the transfer window and two retry intervals more, so
		// that the target, or when it never comes another, wins.
		b.mu.Lock()
		follows := b.follows
		b.mu.Unlock()
		synctest.Wait()
		advance(transferWindow(tRetry) + 2*tRetry - time.Millisecond)
		b.mu.Lock()
		if b.follows != follows {
			t.Errorf("campaigned while sitting out after a transfer")
		}
		b.mu.Unlock()
	})
}

func TestTransferNeedsRun(t *testing.T) {
	cfg, err := Config{Name: "unit", ID: "me"}.settings()
	if err != nil {
		t.Fatal(err)
	}
	c := newCandidate(cfg, &fakeBackend{})
	ctx := context.Background()
	if err := c.Transfer(ctx, "other"); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Transfer before Run = %v, want ErrNotRunning", err)
	}
	if err := c.Proclaim(ctx, "v"); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Proclaim before Run = %v, want ErrNotRunning", err)
	}
}

// An operator's request (transfer_to on the live row) is acted on at the
// leader's next renewal: within RenewInterval of the request.
func TestRequestedTransferActedOnAtNextRenewal(t *testing.T) {
	tests := []struct {
		name, to string
	}{
		{"transfer", "node-2"},
		{"step down", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := &fakeBackend{followB: beat{held: true, term: 5}}
				h := newHarness(t, b, nil)
				synctest.Wait()
				b.set(func(f *fakeBackend) {
					f.followB = beat{}
					f.renewB = func(uint64) (beat, error) { return beat{requested: true, to: tc.to}, nil }
				})
				advance(tRenew - time.Millisecond)
				if !h.c.IsLeader() || len(b.handedTo()) != 0 {
					t.Fatal("acted before its renewal")
				}
				advance(time.Millisecond)
				waitFor(t, func() bool { return len(b.handedTo()) == 1 })
				if got := b.handedTo(); got[0] != tc.to {
					t.Fatalf("handed over to %q, want %q", got[0], tc.to)
				}
				if h.c.IsLeader() {
					t.Fatal("leader after handing over")
				}
				if got, want := h.ev.String(), "leader:me,elected,elected-returned,demoted:transferred"; got != want {
					t.Fatalf("events %q, want %q", got, want)
				}
			})
		})
	}
}

// A holder still waiting out its lock delay cannot hand over cleanly: it
// gives the row up with the rest of its delay, as Resign does.
func TestRequestedTransferDuringLockDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &fakeBackend{followB: beat{held: true, term: 5, delay: tLease}}
		h := newHarness(t, b, nil)
		synctest.Wait()
		b.set(func(f *fakeBackend) {
			f.followB = beat{}
			f.renewB = func(uint64) (beat, error) { return beat{requested: true, to: "node-2"}, nil }
		})
		advance(tRenew)
		waitFor(t, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.released) == 1 })
		b.mu.Lock()
		unserved := b.unserved[0]
		b.mu.Unlock()
		if unserved != tLease-tRenew {
			t.Errorf("handed on %v of the lock delay, want %v", unserved, tLease-tRenew)
		}
		if len(b.handedTo()) != 0 || strings.Contains(h.ev.String(), "elected") {
			t.Fatalf("a holder that never led handed over cleanly or led: %q", h.ev.String())
		}
	})
}

func TestProclaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &fakeBackend{followB: beat{held: true, term: 5}}
		var seen []string
		h := newHarness(t, b, func(c *Config) {
			c.Value = "v1"
			c.Callbacks.OnLeaderChanged = func(r Record) { seen = append(seen, r.ID+"="+r.Value) }
		})
		synctest.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := h.c.Proclaim(ctx, strings.Repeat("x", ident.MaxValueLen+1)); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Proclaim(too long) = %v, want ErrInvalidConfig", err)
		}
		if err := h.c.Proclaim(ctx, "v1"); err != nil { // unchanged: nothing written
			t.Fatal(err)
		}
		if err := h.c.Proclaim(ctx, "v2"); err != nil {
			t.Fatal(err)
		}
		b.mu.Lock()
		value, proclaims := b.value, len(b.proclaims)
		b.mu.Unlock()
		if value != "v2" || proclaims != 1 {
			t.Fatalf("backend value %q after %d proclaims, want v2 after 1", value, proclaims)
		}
		if h.c.cfg.Value != "v1" {
			t.Errorf("the candidate's Config changed: %q", h.c.cfg.Value)
		}
		if !h.c.IsLeader() || h.c.Term() != 5 {
			t.Fatal("Proclaim changed the leadership")
		}
		if err := h.c.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		if err := h.c.Proclaim(ctx, "v3"); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("Proclaim by a non-leader = %v, want ErrNotLeader", err)
		}
		if got, want := strings.Join(seen, ","), "me=v1,me=v2"; got != want {
			t.Errorf("OnLeaderChanged saw %q, want %q", got, want)
		}
	})
}

// A transfer is reported as a demotion with reason transferred.
func TestMetricsTransferred(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &fakeBackend{followB: beat{held: true, term: 3}}
		h, m := metricsHarness(t, b)
		synctest.Wait()
		b.set(func(f *fakeBackend) { f.followB = beat{} })
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := h.c.Transfer(ctx, "other"); err != nil {
			t.Fatal(err)
		}
		wantLeading(t, m.mustProgress(t, "unit"), false, 0, 0)
		if n := m.n("demoted:transferred"); n != 1 {
			t.Errorf("%d demoted transferred, want 1", n)
		}
	})
}

// lockedBuffer is a bytes.Buffer safe for concurrent use, for a test's logs.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// TestFailedReleaseAndHandoverLogged: a hand-over whose statement fails is
// logged with its target and its error returned, wrapped; a release that
// fails is logged without a target (it has none), as before the two shared
// releaseHold.
func TestFailedReleaseAndHandoverLogged(t *testing.T) {
	for _, handOver := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			logs := &lockedBuffer{}
			gone := errors.New("gone")
			b := &fakeBackend{followB: beat{held: true, term: 5}, giveUpErr: gone}
			h := newHarness(t, b, func(c *Config) { c.Tuning.Logger = slog.New(slog.NewTextHandler(logs, nil)) })
			synctest.Wait()
			b.set(func(f *fakeBackend) { f.followB = beat{} })
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			// After the logger's own attributes (election, id).
			want := `msg="release failed; the lease will expire instead" election=unit id=me term=5 err=gone`
			if handOver {
				err := h.c.Transfer(ctx, "other")
				if !errors.Is(err, gone) || err.Error() != `election: handing over to "other": gone` {
					t.Fatalf("Transfer = %v, want the hand-over's error wrapped", err)
				}
				want = `msg="hand-over failed; the lease will expire instead" election=unit id=me term=5 to=other err=gone`
			} else if err := h.c.Resign(ctx); err != nil {
				t.Fatal(err)
			}
			if got := logs.String(); !strings.Contains(got, want+"\n") {
				t.Fatalf("logs:\n%s\nwant a line ending %s", got, want)
			}
		})
	}
}
