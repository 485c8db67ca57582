// Package election is leader election on a MySQL or MariaDB table: exactly
// one of several replicas that share a database leads, and another takes
// over when it dies, with no infrastructure besides the database.
//
// Each replica runs a Candidate for the election's name. It campaigns until
// Run's context ends; while it leads, Callbacks.OnElected runs with a
// context that ends when leadership does and a Leadership that carries the
// term (a fencing token) and Fenced, for database writes checked against
// that term. Two backends make a Candidate:
//
//   - NewTable: one row per election in the table service_election (see
//     package migrations), kept by an INSERT … ON DUPLICATE KEY UPDATE
//     heartbeat whose affected rows tell a candidate it holds the row.
//     Tested on MariaDB, MySQL, Galera and Group Replication; check any
//     other server with the doctor (sqlelect doctor).
//   - NewLock: MySQL GET_LOCK held on a dedicated connection, with the
//     holder published in the same table; waiting candidates take over
//     within milliseconds of a release. Refused on Galera and Group
//     Replication multi-primary, where locks are not cluster-wide.
//
// Create the table first (sqlelect migrate up, or package schema). The
// *sql.DB is the caller's: the library never opens or closes it.
//
//	e, err := election.NewTable(db, election.Config{
//		Name: "orders-scheduler",
//		Callbacks: election.Callbacks{
//			OnElected: func(ctx context.Context, l election.Leadership) {
//				runScheduler(ctx) // leader-only work; ctx ends with leadership
//			},
//		},
//	})
//	if err != nil {
//		return err
//	}
//	return e.Run(ctx) // campaigns until ctx ends, then hands over at once
//
// Config needs only Name; the rest have defaults (a 15 s lease, as
// client-go's). Health ties leadership to the application's health,
// Preference makes some candidates preferred leaders, Tuning holds the
// timing and the rest. Package doctor checks that a server keeps what the
// algorithm relies on, package operator changes or reads an election from
// outside (Assume, Reelect, Transfer, StepDown, Status, List,
// Observe), package members lists who runs, package history reads every
// term (written in the transaction that assigns it), package electionprom
// exports metrics and package electionfake is an in-memory stand-in for
// unit tests.
//
// # Guarantees
//
//   - At most one leader at any instant, as the leaders see it (IsLeader,
//     the context given to OnElected): a leader stands down by its own
//     monotonic clock, Tuning.RenewDeadline after it sent its last
//     successful renewal, even while frozen or cut off from the database,
//     and nobody takes over before the lease has run out by the database
//     clock. Operators' writes keep this with a lock delay (one lease):
//     a candidate whose predecessor may still lead waits it out first.
//     Transfers, failed health checks and preferences release the row
//     only after the leader stood down.
//   - Terms strictly increase from one leadership to the next, across
//     operators' writes and a database clock stepped back (the term floor):
//     use the term as a fencing token.
//   - A dead leader is replaced about one lease after its last renewal; a
//     clean Resign, a Transfer or the end of Run hands over in
//     milliseconds. Any database error is "not leader this tick".
//
// # What is not guaranteed
//
//   - Leadership is advisory: work that ignores IsLeader or the elected
//     context can outlive it. Fence writes (Leadership.Fenced) or pass the
//     term on.
//   - Safety assumes clock rates within (LeaseDuration - RenewDeadline) /
//     LeaseDuration of each other (a third with the defaults), a database
//     clock that does not jump, database servers that judge the lease
//     (Galera nodes, an old and a new primary) with clocks well within
//     LeaseDuration - RenewDeadline of each other, and a session time zone
//     without DST (Run checks). A leader on a suspended machine (a paused
//     VM) may believe it leads for up to RenewDeadline after it resumes.
//   - Candidate IDs must be unique, and all candidates of an election must
//     write to one primary (never an asynchronous replica) with the same
//     LeaseDuration. On MySQL, set innodb_lock_wait_timeout near
//     Tuning.QueryTimeout (in the DSN).
//
// # Further reading
//
// In the repository's docs/ directory:
//
//   - [docs/algorithm.md]: the backends, the candidate's phases and its
//     single transition point, the heartbeat, terms and the term floor, the
//     lock delay, fast handover, the lock backend, health, the Batcher,
//     planned changes of leader, transfer windows and leadership preference.
//   - [docs/guarantees.md]: each guarantee and each assumption, in full,
//     with the tests that show them; RELIABILITY.md has the chaos suite's
//     and the model's results.
//   - [docs/embedding.md]: the table, the DSN, timing, the Batcher, health
//     checks, observing, testing.
//   - [docs/operations.md]: plain SQL, the fleet (members, history),
//     planned changes of leader, preference, lock names and upgrades,
//     monitoring.
//   - [docs/servers.md]: the servers tested, and checking another one.
//
// [docs/algorithm.md]: https://github.com/sqlelect/sqlelect/blob/main/docs/algorithm.md
// [docs/guarantees.md]: https://github.com/sqlelect/sqlelect/blob/main/docs/guarantees.md
// [docs/embedding.md]: https://github.com/sqlelect/sqlelect/blob/main/docs/embedding.md
// [docs/operations.md]: https://github.com/sqlelect/sqlelect/blob/main/docs/operations.md
// [docs/servers.md]: https://github.com/sqlelect/sqlelect/blob/main/docs/servers.md
package election
