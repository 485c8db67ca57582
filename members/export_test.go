package members

import "fmt"

// Counts returns the batched UPDATEs b ran and how many members refreshed
// on their own after one, for the tests of package members_test.
func Counts(b *Batcher) (statements, fallbacks uint64) {
	return b.statements.Load(), b.fallbacks.Load()
}

// RefreshStatement returns b's UPDATE for the refreshes of n members: ID
// "m" of elections prefix-0 … prefix-(n-1), incarnation i in 16 hex digits.
func RefreshStatement(b *Batcher, prefix string, n int) (string, []any) {
	reqs := make([]refreshReq, n)
	for i := range reqs {
		reqs[i] = refreshReq{name: fmt.Sprintf("%s-%d", prefix, i), id: "m", inc: fmt.Sprintf("%016x", i), healthy: true}
	}
	return b.refreshStatement(reqs)
}
