package balance

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%02d", prefix, i)
	}
	return out
}

// apply returns holders after moves.
func apply(holders map[string]string, moves []Move) map[string]string {
	out := make(map[string]string, len(holders))
	for s, h := range holders {
		out[s] = h
	}
	for _, m := range moves {
		out[m.Shard] = m.To
	}
	return out
}

func counts(shards, members []string, holders map[string]string) map[string]int {
	c := make(map[string]int)
	for _, m := range members {
		c[m] = 0
	}
	for _, s := range shards {
		if _, ok := c[holders[s]]; ok {
			c[holders[s]]++
		}
	}
	return c
}

// check asserts what the rule promises of moves, planned for holders: every
// shard led by a live member after them, each member within one of the
// others, each shard moved at most once and only from a member above its
// quota or from no live member, the fewest moves of any fair assignment
// (least), and nothing more to do after them (no ping-pong).
func check(t *testing.T, shards, members []string, holders map[string]string, moves []Move) {
	t.Helper()
	before := counts(shards, members, holders)
	after := apply(holders, moves)
	c := counts(shards, members, after)
	lo, hi := len(shards), 0
	total := 0
	for _, n := range c {
		lo, hi, total = min(lo, n), max(hi, n), total+n
	}
	if total != len(shards) || hi-lo > 1 {
		t.Fatalf("after %v: counts %v (want all %d shards, within one)", moves, c, len(shards))
	}
	seen := map[string]bool{}
	fromLive := 0
	for _, m := range moves {
		if seen[m.Shard] || m.From != holders[m.Shard] || m.To == m.From {
			t.Fatalf("move %+v: a shard twice, from a member that does not hold it, or to itself (%v)", m, moves)
		}
		seen[m.Shard] = true
		if _, live := before[m.From]; live {
			fromLive++
		}
	}
	// The least moves from live members: the excess over the best
	// assignment of quotas (q+1 to the r largest holders).
	q, r := len(shards)/len(members), len(shards)%len(members)
	var held []int
	for _, n := range before {
		held = append(held, n)
	}
	slices.Sort(held)
	slices.Reverse(held)
	least := 0
	for i, n := range held {
		least += max(n-q-map[bool]int{true: 1}[i < r], 0)
	}
	if fromLive != least {
		t.Fatalf("%d moves from live members, want %d (%v)", fromLive, least, moves)
	}
	if again := Plan(shards, members, after); len(again) != 0 {
		t.Fatalf("after %v, Plan moves again: %v", moves, again)
	}
}

func TestPlan(t *testing.T) {
	four := names("s", 10)
	for _, tc := range []struct {
		name    string
		members []string
		holders map[string]string
		want    map[string]int // moves to each member
	}{
		{"first start: all to spread", []string{"a", "b", "c"}, nil, map[string]int{"a": 4, "b": 3, "c": 3}},
		{"balanced: nothing", []string{"a", "b", "c"}, apply(nil, Plan(four, []string{"a", "b", "c"}, nil)), map[string]int{}},
		{"one led all (the first to look)", []string{"a", "b", "c"}, holdAll(four, "a"), map[string]int{"b": 3, "c": 3}},
		{"a fourth joins: two move, both to it", []string{"a", "b", "c", "d"},
			apply(nil, Plan(four, []string{"a", "b", "c"}, nil)), map[string]int{"d": 2}},
		{"c dies: its 3 spread over a and b", []string{"a", "b"},
			apply(nil, Plan(four, []string{"a", "b", "c"}, nil)), map[string]int{"a": 1, "b": 2}},
		{"no members: nothing", nil, holdAll(four, "a"), map[string]int{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			moves := Plan(four, tc.members, tc.holders)
			got := map[string]int{}
			for _, m := range moves {
				got[m.To]++
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("moves to each member %v, want %v (%v)", got, tc.want, moves)
			}
			if len(tc.members) > 0 {
				check(t, four, tc.members, tc.holders, moves)
			}
		})
	}
}

func holdAll(shards []string, m string) map[string]string {
	h := map[string]string{}
	for _, s := range shards {
		h[s] = m
	}
	return h
}

// TestPlanProperties: from random states (shards led by members, by
// members gone, or by none), one plan balances, moves the least, and
// leaves nothing to do; then a member joins or leaves, and the next plan
// does the same.
func TestPlanProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(36, 1))
	for trial := range 2000 {
		shards, pool, members, holders := randomState(rng)
		moves := Plan(shards, members, holders)
		check(t, shards, members, holders, moves)
		holders = apply(holders, moves)
		if len(members) > 1 && rng.IntN(2) == 0 {
			members = slices.Delete(slices.Clone(members), 0, 1) // one leaves or dies
		} else if len(members) < len(pool) {
			members = pool[:len(members)+1] // one joins
		}
		if t.Failed() {
			t.Fatalf("trial %d", trial)
		}
		check(t, shards, members, holders, Plan(shards, members, holders))
	}
}

// TestPlanStable: while the moves of a plan are carried out, one by one in
// any order, the plan of what is left is the rest of the first plan: the
// same shards to the same members. So a member that started to take a
// shard it was given keeps it, and none moves twice (a dead member's
// shards, taken by the survivors as their leases run out one by one).
func TestPlanStable(t *testing.T) {
	rng := rand.New(rand.NewPCG(36, 2))
	for trial := range 2000 {
		shards, _, members, holders := randomState(rng)
		rest := Plan(shards, members, holders)
		for len(rest) > 0 {
			k := rng.IntN(len(rest))
			holders = apply(holders, rest[k:k+1])
			rest = slices.Delete(slices.Clone(rest), k, k+1)
			if again := Plan(shards, members, holders); fmt.Sprint(sortMoves(again)) != fmt.Sprint(sortMoves(rest)) {
				t.Fatalf("trial %d: after a move, the plan is %v, want the rest of the first: %v", trial, again, rest)
			}
		}
	}
}

func sortMoves(ms []Move) []Move {
	ms = slices.Clone(ms)
	slices.SortFunc(ms, func(a, b Move) int { return strings.Compare(a.Shard, b.Shard) })
	return ms
}

// randomState returns up to 40 shards, a pool of up to 8 members of which
// the first are live, and each shard's holder: a member of the pool (live
// or gone) or none.
func randomState(rng *rand.Rand) (shards, pool, members []string, holders map[string]string) {
	shards, pool = names("s", rng.IntN(40)), names("m", 1+rng.IntN(8))
	members, holders = pool[:1+rng.IntN(len(pool))], map[string]string{}
	for _, s := range shards {
		if k := rng.IntN(len(pool) + 1); k < len(pool) {
			holders[s] = pool[k]
		}
	}
	return shards, pool, members, holders
}
