package shards

// Plan is plan, for the tests.
var Plan = plan

// MaxPending is maxPending, for the tests.
const MaxPending = maxPending
