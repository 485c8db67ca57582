// Package balance decides which member of a shard group leads which of its
// shards (issue 36): each live member a fair share, reached by the fewest
// moves, each shard moved at most once for one change of the members. It is
// pure: every member computes the same plan from the same view (the group's
// live members and each shard's holder, as the database says), and acts
// only on its own part of it.
//
// The rule, for N shards over M members (q = N / M, r = N mod M):
//
//  1. Quotas: r members have a quota of q+1, the others q: first those
//     that hold more than q now, then the others, each in the order of
//     their IDs. Giving the larger quotas to members above q makes the
//     fewest shards move (each saves one move; no other fair assignment
//     needs fewer), and the order does not change while the moves are
//     carried out (see step 3).
//  2. Givers: a member above its quota gives its shards beyond it (it keeps
//     the first ones, in shard order). A shard whose holder is not a live
//     member (it left, died, or the shard was never led) is given too.
//  3. Takers: a member below its quota takes the difference. The shards
//     given (those of no live member first, then in shard order) fill the
//     takers in the order of their IDs, each up to its quota: a dead
//     member's shards are spread over the survivors, not taken by one, and
//     while they are taken the plan of what is left designates the same
//     takers (each has taken the first of its own).
//
// Why it converges without ping-pong: after the moves every member holds
// exactly its quota, so the r members of quota q+1 are those above q, and
// Plan of that state is empty. Each shard is in at most one move, and
// while the moves are carried out, one by one in any order, the plan of
// what is left is the rest of the first (the quotas and the takers' order
// do not change): so no shard moves twice for one change of the members,
// even when the processes act on the plan at different times.
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
	quota := quotas(len(shards), members, held)
	var extra []Move
	for _, m := range members {
		for _, s := range held[m][min(quota[m], len(held[m])):] {
			extra = append(extra, Move{Shard: s, From: m})
		}
	}
	slices.SortFunc(extra, func(a, b Move) int { return cmp.Compare(a.Shard, b.Shard) })
	given = append(given, extra...)
	// The takers in the order of their IDs, each filled up to its quota
	// (the shortfalls add up to the shards given).
	i := 0
	for _, m := range members {
		for short := quota[m] - len(held[m]); short > 0 && i < len(given); short-- {
			given[i].To, i = m, i+1
		}
	}
	return given
}

// quotas returns each member's share of n shards, given the shards each
// holds now (step 1 of the rule): q = n / len(members), one more for
// n mod len(members) members, first those that hold more than q now. members
// is sorted by ID and not empty; the stable sort keeps that order in each
// group.
func quotas(n int, members []string, held map[string][]string) map[string]int {
	q := n / len(members)
	below := func(m string) int { // 0 above q, 1 not
		if len(held[m]) > q {
			return 0
		}
		return 1
	}
	order := slices.Clone(members)
	slices.SortStableFunc(order, func(a, b string) int { return cmp.Compare(below(a), below(b)) })
	quota := make(map[string]int, len(order))
	for i, m := range order {
		quota[m] = q
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
