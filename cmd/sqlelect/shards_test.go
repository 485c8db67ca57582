package main

import (
	"encoding/json"
	"maps"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestShardsCommand (issue 36, item 4): three `sqlelect shards` processes
// share 6 shards, 2 each, in campaign's JSON lines with the shard's
// election; one is killed (SIGKILL) and the two others take its shards, 3
// each; one leaves (SIGTERM, exit 0) and the last leads all 6. status GROUP
// shows the balance. Per shard,
// the elected and demoted lines of all processes never overlap, and the
// terms rise.
func TestShardsCommand(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 90*time.Second)
	dsn := migrated(t, ctx)
	group := randomName("sh")
	procs := map[string]*proc{}
	for _, id := range []string{"p1", "p2", "p3"} {
		procs[id] = start(t, id, dsn, append([]string{"shards", group, "--shards", "6", "--id", id}, fastFlags...)...)
	}
	// leading counts the shards each process leads by its lines.
	leading := func() map[string]int {
		n := map[string]int{}
		for id, p := range procs {
			for _, e := range p.events(false) {
				if !strings.HasPrefix(e.Election, group+"/") || e.ID != id {
					t.Fatalf("%s: line %+v: want its ID and an election of %s", id, e, group)
				}
				switch e.Event {
				case "elected":
					n[id]++
				case "demoted":
					n[id]--
				}
			}
		}
		return n
	}
	each := func(want int, ids ...string) func() bool {
		return func() bool {
			n := leading()
			for _, id := range ids {
				if n[id] != want {
					return false
				}
			}
			return true
		}
	}
	waitFor(t, ctx, "2 shards each", each(2, "p1", "p2", "p3"))
	// status GROUP shows the balance, in both forms.
	var st []struct {
		Shards struct {
			Shards, Unled, Members int
			Led                    map[string]int
			Balanced               bool
		}
	}
	waitFor(t, ctx, "status: balanced", func() bool {
		r := mustRun(t, ctx, dsn, 0, "status", group, "--json")
		if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || len(st) != 1 {
			t.Fatalf("status --json: %v\n%s", err, r)
		}
		return st[0].Shards.Balanced
	})
	if got := st[0].Shards; got.Shards != 6 || got.Unled != 0 || got.Members != 3 || !maps.Equal(got.Led, map[string]int{"p1": 2, "p2": 2, "p3": 2}) {
		t.Errorf("status --json: shards %+v, want 6 led 2 each by 3 members", got)
	}
	if r := mustRun(t, ctx, dsn, 0, "status", group); !strings.Contains(r.stdout, "\nshards: 6, 0 unled, over 3 members: p1 2, p2 2, p3 2 (balanced)\n") {
		t.Errorf("status: no balanced shards line:\n%s", r)
	}
	killed := time.Now()
	_ = procs["p3"].cmd.Process.Kill()
	procs["p3"].wait(t, ctx)
	waitFor(t, ctx, "p3's shards taken: 3 each", each(3, "p1", "p2"))
	procs["p2"].signal(syscall.SIGTERM)
	if code := procs["p2"].wait(t, ctx); code != 0 {
		t.Errorf("p2 exit %d after SIGTERM, want 0", code)
	}
	waitFor(t, ctx, "p1 leads all 6", each(6, "p1"))
	end := time.Now()
	byShard := map[string]map[string][]jsonEvent{}
	for id, p := range procs {
		for _, e := range p.events(false) {
			if byShard[e.Election] == nil {
				byShard[e.Election] = map[string][]jsonEvent{}
			}
			byShard[e.Election][id] = append(byShard[e.Election][id], e)
		}
	}
	if len(byShard) != 6 {
		t.Errorf("lines for %d shards, want 6", len(byShard))
	}
	for shard, byID := range byShard {
		t.Run(strings.TrimPrefix(shard, group+"/"), func(t *testing.T) {
			// p3 printed no demoted line: its leaderships ended by its
			// renew deadline (1.2 s) after its kill, at the latest.
			p3 := map[string][]jsonEvent{"p3": byID["p3"]}
			delete(byID, "p3")
			checkNoOverlap(t, append(leaderships(t, byID, end), leaderships(t, p3, killed.Add(1200*time.Millisecond))...))
		})
	}
}
