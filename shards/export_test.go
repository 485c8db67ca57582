package shards

// Plan is plan, for the tests.
var Plan = plan
