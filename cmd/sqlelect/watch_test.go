package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sqlelect/sqlelect/election"
	"github.com/sqlelect/sqlelect/internal/testdb"
)

// TestWatchProclaim: a leader (the library's, in this process) proclaims a
// new value without a re-election: watch prints the change of value of the
// same leader and term, as text and with --json, and a campaign follower
// reports it in a leader event.
func TestWatchProclaim(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 60*time.Second)
	dsn := migrated(t, ctx)
	name := randomName("wp")
	e, err := election.NewTable(testdb.Open(t, dsn), election.Config{Name: name, ID: "lib-1", Value: "10.0.0.1:80",
		LeaseDuration: 2 * time.Second, Tuning: election.TuningConfig{RenewDeadline: 1200 * time.Millisecond, RenewInterval: 200 * time.Millisecond, RetryInterval: 200 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- e.Run(rctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	waitFor(t, ctx, "lib-1 leads", e.IsLeader)
	term := e.Term()

	text := start(t, "watch", dsn, "watch", name, "--interval", "50ms")
	js := start(t, "watch --json", dsn, "watch", name, "--interval", "50ms", "--json")
	c2 := start(t, "c2", dsn, append([]string{"campaign", name, "--id", "c2"}, fastFlags...)...)
	waitFor(t, ctx, "watch's first lines", func() bool { return len(text.lines(false)) >= 1 && len(js.lines(false)) >= 1 })
	waitFor(t, ctx, "c2 following", func() bool { return hasEvent(c2.events(false), "leader", "lib-1") })

	const proclaimed = "10.0.0.2:80 draining" // quoted by the text form
	if err := e.Proclaim(ctx, proclaimed); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "watch prints the new value", func() bool { return len(text.lines(false)) >= 2 && len(js.lines(false)) >= 2 })
	waitFor(t, ctx, "c2 sees the new value", func() bool {
		for _, ev := range c2.events(false) {
			if ev.Event == "leader" && ev.Term == term && ev.Value == proclaimed {
				return true
			}
		}
		return false
	})
	if e.Term() != term {
		t.Fatalf("term %d after Proclaim, want %d", e.Term(), term)
	}
	time.Sleep(200 * time.Millisecond) // four more looks: nothing else to print
	text.signal(syscall.SIGINT)
	js.signal(syscall.SIGINT)
	for _, p := range []*proc{text, js} {
		if code := p.wait(t, ctx); code != 0 {
			t.Errorf("%s exit %d", p.name, code)
		}
	}

	// Text: one line per change, the same leader and term, the new value.
	var got []string
	for _, l := range text.lines(false) {
		_, rest, ok := strings.Cut(l, " ")
		if _, err := time.Parse(time.RFC3339Nano, strings.Fields(l)[0]); err != nil || !ok {
			t.Errorf("watch line %q: %v", l, err)
		}
		got = append(got, rest)
	}
	want := []string{
		fmt.Sprintf("leader=lib-1 term=%d state=live priority=0 value=10.0.0.1:80", term),
		fmt.Sprintf("leader=lib-1 term=%d state=live priority=0 value=%q", term, proclaimed),
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("watch printed\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// JSON lines: campaign's leader event, without id, with the state.
	evs := js.events(false)
	if len(evs) != 2 || len(evs) != len(js.lines(false)) {
		t.Fatalf("watch --json printed %q", js.lines(false))
	}
	for i, value := range []string{"10.0.0.1:80", proclaimed} {
		ev := evs[i]
		if ev.Event != "leader" || ev.Election != name || ev.ID != "" || ev.Term != term || ev.Leader == nil ||
			*ev.Leader != "lib-1" || ev.Value != value || ev.State != "live" || ev.Time.IsZero() {
			t.Errorf("watch --json line %d: %s", i, js.lines(false)[i])
		}
		var keys map[string]json.RawMessage
		if err := json.Unmarshal([]byte(js.lines(false)[i]), &keys); err != nil {
			t.Fatal(err)
		}
		if _, ok := keys["id"]; ok {
			t.Errorf("watch --json line with an id: %s", js.lines(false)[i])
		}
	}
}
