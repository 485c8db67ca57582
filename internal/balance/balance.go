// Package balance decides which member of a shard group leads which of its
// shards (issue 36): each live member a fair share, reached by the fewest
// moves, each shard moved at most once for one change of the members. It is
// pure: every member computes the same plan from the same view (the group's
// live members and each shard's holder, as the database says), and acts
// only on its own part of it.
//
// The rule, for N shards over M members (q = N / M, r = N mod M):
//
//  1. Quotas: the members ordered by how many shards they hold now (most
//     first; ties by ID), the first r have a quota of q+1, the others q.
//     Giving the larger quotas to the larger holders makes the fewest
//     shards move: no other fair assignment needs fewer.
//  2. Givers: a member above its quota gives its shards beyond it (it keeps
//     the first ones, in shard order). A shard whose holder is not a live
//     member (it left, died, or the shard was never led) is given too.
//  3. Takers: a member below its quota takes the difference. The shards
//     given (those of no live member first, then in shard order) go to the
//     takers in turn, the least loaded first, one at a time: a dead
//     member's shards are spread over the survivors, not taken by one.
//
// Why it converges without ping-pong: after the moves every member holds
// exactly its quota, so exactly r members hold q+1 and are the first r of
// the order in step 1; Plan of that state is empty. Each shard is in at
// most one move, so no shard moves twice for one change of the members.
package balance

import (
	"cmp"
	"slices"
)

// Move is one shard's change of holder: From is its holder now ("" for
// none), To the member that should lead it.
type Move struct {
	Shard, From, To string
}

// Plan returns the moves that balance shards over members (the live ones),
// given each shard's holder (missing or "" for none). Shards and members
// are sets: their order does not matter, and duplicates count once.
func Plan(shards, members []string, holders map[string]string) []Move {
	shards, members = sorted(shards), sorted(members)
	if len(members) == 0 {
		return nil
	}
	held := make(map[string][]string, len(members))
	for _, m := range members {
		held[m] = nil
	}
	var given []Move // shards of no live member first
	for _, s := range shards {
		h := holders[s]
		if _, live := held[h]; live {
			held[h] = append(held[h], s)
		} else {
			given = append(given, Move{Shard: s, From: h})
		}
	}
	quota := Quotas(len(shards), members, held)
	var extra []Move
	for _, m := range members {
		for _, s := range held[m][min(quota[m], len(held[m])):] {
			extra = append(extra, Move{Shard: s, From: m})
		}
	}
	slices.SortFunc(extra, func(a, b Move) int { return cmp.Compare(a.Shard, b.Shard) })
	given = append(given, extra...)
	// The takers, least loaded first, each as often as it is short.
	takers := slices.Clone(members)
	slices.SortStableFunc(takers, func(a, b string) int { return cmp.Compare(len(held[a]), len(held[b])) })
	short := make(map[string]int, len(takers))
	for _, m := range takers {
		short[m] = max(quota[m]-len(held[m]), 0)
	}
	for i, last := 0, -1; i < len(given) && i != last; {
		last = i // a round that places none ends: cannot happen, the shortfalls add up to the shards given
		for _, m := range takers {
			if i < len(given) && short[m] > 0 {
				given[i].To, short[m], i = m, short[m]-1, i+1
			}
		}
	}
	return given
}

// Quotas returns each member's share of n shards, given the shards each
// holds now (step 1 of the rule): n / len(members), one more for the
// n mod len(members) members that hold the most (ties by ID).
func Quotas(n int, members []string, held map[string][]string) map[string]int {
	order := sorted(members)
	if len(order) == 0 {
		return nil
	}
	slices.SortStableFunc(order, func(a, b string) int { return cmp.Compare(len(held[b]), len(held[a])) })
	quota := make(map[string]int, len(order))
	for i, m := range order {
		quota[m] = n / len(order)
		if i < n%len(order) {
			quota[m]++
		}
	}
	return quota
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}
