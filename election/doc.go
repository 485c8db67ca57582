// Package election is leader election on a MySQL or MariaDB table: exactly
// one of several replicas that share a database leads, and another takes
// over when it dies, with no infrastructure besides the database.
//
// # Backends
//
// Two backends make a *Candidate, which implements the Election interface:
//
//   - NewTable: the anchor table service_election (see package migrations),
//     one row per election, kept by an INSERT … ON DUPLICATE KEY UPDATE
//     heartbeat whose affected rows tell a candidate it holds the row.
//     Tested in CI on MariaDB 10.11 and 11.8, MySQL 9.7, a 3-node Galera
//     cluster (MariaDB 10.11) and Group Replication (MySQL 9.7); written
//     for MySQL 8.0 and MariaDB 10.6 and later (the Batcher needs SKIP
//     LOCKED, which they have), which CI does not test: check any other
//     server with Check or `sqlelect doctor` (docs/servers.md).
//   - NewLock: MySQL GET_LOCK held on a dedicated connection; waiting
//     candidates wait for its holder to let go (without queueing for the
//     lock itself, see NewLock) and take over within milliseconds of a
//     release. The holder still publishes itself in the same table, so "who
//     leads" reads the same for both. Refused on Galera and Group
//     Replication multi-primary, where locks are not cluster-wide.
//
// An election is its name in one table of one database: user-level locks
// are server-wide, so the locks either backend takes (LockName,
// WakeLockName) are named after the database (the table's qualifier, else
// the connection's default database), the table and the election name. All
// candidates of an election must run versions that name them alike: this
// naming is newer than the name alone, and during a rolling upgrade that
// mixes both, lock-backend candidates of each kind hold different locks and
// take the row from each other at every renewal (never two leaders, thanks
// to the term and the lock delay, but leadership flaps).
//
// # The algorithm (table backend)
//
// The row holds the holder (service_id), its last renewal
// (last_seen_active, by the database clock SYSDATE(6)), its lease (lease_ms), a
// fencing term, when the term began, whether it was released, and a value
// the leader publishes. A row is free when released, or when
// last_seen_active + lease <= SYSDATE(6): expiry is judged by the
// database's clock only, never by a client's or a session's.
//
// A follower reads the row every RetryInterval (jittered), and also wakes
// when the current lease runs out by the database clock, so failover takes
// about one lease, not a lease plus a retry interval. Followers write
// nothing while the lease is live. When the row is free, missing, or names
// the follower (an operator's REPLACE), it sends the heartbeat:
//
//	INSERT … ON DUPLICATE KEY UPDATE decision = CASE
//	  WHEN service_id = me AND term = my term AND not released
//	       AND no transfer is asked of me         THEN renewed
//	  WHEN released AND handed to me              THEN transferred
//	  WHEN expired THEN expired (released, if released)
//	  WHEN not released THEN claimed if service_id = me and nothing
//	       is asked of its holder (an operator's REPLACE), else nothing
//	  WHEN released and handed to nobody          THEN released
//	  END (NULL: released and handed to another, in its window),
//	  then a take gets a new term, and any decision writes me, a new
//	  lease, my value and priority; nothing else changes the row.
//
// One statement decides, atomically under the row lock, and its affected
// rows (1 inserted, 2 changed, 0 unchanged) and LAST_INSERT_ID (the term)
// say what happened. Its first assignment decides, once, into the row's
// decision column (renewed, a take's kind, or NULL for no change); every
// other assignment applies that decision, and the last sets the column back
// to NULL, where a CHECK constraint keeps it outside the statement (schema
// version 7). That is the statement's one dependence on the order of its
// SET list: a session of MariaDB's SIMULTANEOUS_ASSIGNMENT sql_mode fails
// on the constraint and changes nothing, and Run refuses such a session
// (ErrSimultaneousAssignment). It is 1.3 KB as written, and as sent with
// a default ID about 1.5 KB (1,523 B on MySQL, 1,552 B on MariaDB, whose
// SET STATEMENT bound is longer; TestHeartbeatSize logs both). It uses no
// VALUES() (deprecated in MySQL 8.0.20), no row aliases (MariaDB has none)
// and no INSERT IGNORE. Renewals write the server's clock in microseconds
// (SYSDATE(6)), so a leader
// renewing several times a second stays leader (the recipe's NOW() reports
// 0 affected rows within one second). An ambiguous answer (1 under
// CLIENT_FOUND_ROWS, as with clientFoundRows=true or ProxySQL's default) or
// a change of term is confirmed by reading the row, so such a DSN cannot
// produce a false leader. Any database error means "not leader this tick".
//
// The leader renews every RenewInterval. The term is the database clock in
// microseconds at the takeover, never less than the previous term plus one,
// and above the election's term floor: a row of the table service_election_floor
// (<table>_floor; migration 6) that holds the highest term the library
// issued for the election, and that DELETE and REPLACE on the election's row
// do not touch. Every statement that assigns a term (the heartbeat's insert
// and take, the lock backend's, Assume) runs in one transaction with the
// floor row (SELECT … FOR UPDATE, the statement, the floor raised to the new
// term); a holder's renewal assigns none and is one UPDATE (the heartbeat's
// renew branch alone), the heartbeat following only when it renews nothing.
// So every leadership's term is above every earlier one's, across
// Assume, Reelect, a plain DELETE or REPLACE, a failover to a server whose
// clock is behind, or a clock stepped back (TestTermsIncreaseAcrossOperators,
// TestTermAfterClockStepBack). Plain SQL can still write a lower term: a
// REPLACE's row has the clock's (the column's default), but no candidate
// leads with it: the named candidate claims the row first, with a new term
// above the floor. An external resource that keeps the highest term it saw
// fences every deposed leader. Deleting floor rows gives that up.
//
// # Safety
//
// A leader stands down by its own monotonic clock: it leads until
// RenewDeadline after it sent its last successful renewal. IsLeader reads the
// clock, so it turns false on time even if the process was frozen (SIGSTOP,
// GC) and no goroutine has run since; the context given to OnElected is
// cancelled at that instant by a watchdog even while the database does not
// answer. No other candidate can take over before the lease, measured by the
// database from the moment the renewal executed (after it was sent), has run
// out. The margin LeaseDuration - RenewDeadline absorbs the difference in
// clock rates and the time the leader's work takes to stop.
//
// A candidate that becomes holder without winning an expired or released
// row — it inserted a new row after an operator's DELETE, or claimed a row
// that already named it (an operator's REPLACE) — waits out LockDelay
// (default: one lease) before it is told it leads, so a predecessor that
// does not yet know it was deposed has stood down (Chubby's and Consul's
// lock-delay). The first election of a name that never existed does not
// wait: its insert writes acquired = 'first', and leads at once, since
// nobody led before it; the floor row it creates makes every later insert
// (after a DELETE) an 'insert', which waits
// (TestFirstElectionSkipsLockDelay). "Never existed" is no floor row while
// the floor table's history is whole: its marker (migration 8, the row whose
// anchor is empty) holds the sum of CRC32(anchor) over the floor rows, which
// the library keeps as it creates them, and was written at least LockDelay
// ago. A TRUNCATE of the floor table or a DELETE of floor rows changes the
// sum or drops the marker; a candidate that finds that writes the marker
// again (after a floor row for every election row), so inserts wait for one
// LockDelay, as they do for LockDelay after migration 8 (a leader of a row
// deleted just before the migration: TestFirstElectionAfterFloorTampering,
// TestFirstElectionAfterUpgrade). DisableLockDelay turns the delay off: faster
// operator actions, at the cost of an overlap of up to the old leader's
// RenewDeadline after a REPLACE or DELETE.
//
// A holder gives a lock delay it has not served to whoever comes next: when
// it lets the row go before its delay ended (it resigns, its Run ends, or it
// finds the row deleted), it does not mark the row released but leaves it to
// expire, by the database clock, when its delay would have ended. A release
// never lets the next holder lead sooner than the releaser could have, so a
// cut-off leader met by an operator's REPLACE or DELETE and then by the named
// candidate's resignation or a second operator action still stands down
// before anyone leads. A candidate that gets a row back before its own
// earlier delay ended waits for that delay too.
//
// Once the leader's deadline has passed, that leadership is over for good:
// the watchdog clears it, and a renewal that was sent before the deadline but
// succeeds after it does not revive it (IsLeader stays false, the elected
// context stays cancelled); OnDemoted is called with ReasonLeaseLost and,
// since the row was still held, a new leadership of the same term begins,
// with OnElected again.
//
// A clean Resign, or the end of Run's context, stands the leader down first
// (the elected context is cancelled, OnElected is waited for, OnDemoted is
// called) and then marks the row released, so a follower takes over at its
// next look without waiting out the lease. Every statement has a deadline
// (QueryTimeout, or less), including those sent while standing down, so a
// connection that went half-open never blocks the campaign.
//
// # Fast handover (table backend)
//
// A follower's next look would come only after RetryInterval, so the
// holder also keeps a user-level lock (GET_LOCK, named by WakeLockName) on
// a connection of its own, and a follower waits for that lock, on a pooled
// connection, instead of sleeping: when the holder releases the row and lets
// the lock go, or its connection dies, the followers wake at once and read
// the row. A clean handover then takes milliseconds whatever RetryInterval
// is. The lock is only a hint: the row alone decides who leads, and when the
// lock is unavailable (no holder keeps it, Galera nodes, errors) a follower
// just waits out its RetryInterval. It costs one connection per candidate,
// taken from the caller's pool only when the pool has a connection to spare
// besides (db.Stats; an unlimited pool always has): with SetMaxOpenConns(n)
// and n or more elections in the process, some of them go without the hint
// and poll instead of starving every election's renewals (counted by
// electionprom.Metrics as sqlelect_fast_handover_skipped_total).
// Config.Tuning.DisableFastHandover turns it off.
//
// # Health
//
// Config.Health.Check ties leadership to the application's health. It runs
// beside the campaign loop, as Kubernetes probes and Consul checks do: a
// goroutine that Run starts and joins runs it every Health.Interval
// (default RenewInterval), bounded by Health.Timeout (default
// RenewDeadline/2), the same for a leader and a follower, and the loop acts
// on its latest result. A check never delays a renewal or a look at the
// election, so a slow check (within its timeout) changes nothing: a
// follower woken by a hand-over looks at once, within the transfer window,
// and a leader renews on time. A run that has not returned by its timeout
// fails at the timeout (sqlelect_health_check_timeouts_total counts it, as
// well as sqlelect_health_check_failures_total) and is waited for before
// the next run.
//
// When the latest result is a failure, a leader stands down at once
// (ReasonUnhealthy), not at its next renewal, and releases the row as
// Resign does: the leader proved it stopped, so a follower takes over at
// once, and a hold still waiting out its lock delay hands the rest of that
// delay on. The candidate then sits out two retry intervals and does not
// campaign while its check fails; a follower does not campaign before its
// first check passed, and campaigns as soon as a failing check passes
// again. A leader stands down at most Health.Timeout plus the longer
// of Health.Interval and Health.Timeout after the state its check
// reads turned bad: the interval plus the timeout while runs take less than
// the interval, but a slower run delays the next, since runs never overlap
// (TestHealthResultAge: 1.8 s for runs of 900 ms every 500 ms).
//
// A flapping check is held down, as routing protocols damp a flapping
// route: a candidate whose check failed within Health.HoldDown
// (default: the longer of Preference.Tenure and three check intervals), or
// whose Run began within it, does not ask for leadership by priority (see
// "Leadership preference"), so that leadership does not move to it only to
// leave again at its next failure. It still takes a free row, and a row
// handed to it: a leader that may fail is better than none.
//
// A campaign loop that makes no progress for more than RenewDeadline past
// when its next step was due is wedged: a callback blocks, or OnElected
// does not return after its context was cancelled (Run waits for it).
// HealthzHandler answers 503 then, electionprom reports sqlelect_wedged, and
// StatusHandler's JSON says wedged (and healthy, the latest check's
// outcome, as sqlelect_healthy). The health check is not part of the loop:
// a check that hangs is a failed check, not a wedged loop.
//
// A database that does not answer (a connection error or a timeout) does not
// wedge the loop either: Run retries every RetryInterval (a leader stands
// down by its own clock meanwhile), logs at Warn level once when the
// database stops answering and at Info once when it answers again, and
// counts each failure (sqlelect_heartbeat_errors_total, kind connection or
// timeout). HealthzHandler still answers 200 then, saying so in its body,
// as client-go's healthz adaptor stays healthy on a candidate that does not
// lead: restarting the elector would not bring the database back.
// LeaderCheckHandler answers not-leader once the leader stood down, and
// StatusHandler 503 (docs/embedding.md, "While the database does not
// answer").
//
// # Many elections in one process
//
// A service with an election per shard runs thousands of candidates. Each
// is its own Election, but with a shared Batcher (Config.Tuning.Batcher) their
// steady-state statements are combined: one transaction renews many
// leaders' rows (SELECT … FOR UPDATE SKIP LOCKED, then one UPDATE), one
// SELECT reads many followers' rows. Anything unusual (a row locked by
// someone else, a changed term, a takeover) is decided by the election's
// own heartbeat, as without a Batcher.
//
// # Operators
//
// Plain SQL steers an election (see docs/operations.md): REPLACE a row to force a
// leader (the old leader's next renewal fails and it stands down; the named
// candidate claims the row and leads after its lock delay), DELETE it to
// force a re-election (the holder stands down at its next renewal and
// releases the row it finds missing; it sits out two retry intervals so that
// another candidate can win). Assume and Reelect do the same from Go, and
// Status and List read the table.
//
// # Planned changes of leader
//
// Assume and Reelect (above) are for a leader that is dead or hung: they
// cannot know the old leader stopped, so the next one waits out its lock
// delay, a whole lease by default, counted from the operator's write (or,
// after a Reelect, from the first follower's new row), on both backends:
// on the lock backend the next holder gets the lock only when the server
// drops the old holder's session (wait_timeout, about a lease after its
// last statement), but its lock delay does not start then. On the table
// backend "from the operator's write" holds for a named candidate that
// looks within a retry interval; one that is sitting out (it just resigned,
// handed over, or lost a hold whose renewal came back after its deadline)
// claims the row when its sit-out ends, so the model's liveness check
// (model/README.md, "Liveness") bounds that case by LockDelay plus three
// retry intervals after the write, not one.
// TestLockOperatorAgainstCutOffLeader measures it: with a 3 s lease and a
// leader cut off from the database, the election is leaderless about 1 s
// (Assume) and 1.5 s (Reelect) after the old leader stood down, within one
// lease. A planned change with a live leader does
// not need that wait, because the leader itself stands down before it lets
// the row go, as a clean Resign does:
//
//   - Election.Transfer(ctx, to) on the leader hands leadership to candidate
//     to. The leader stands down (its elected context is cancelled,
//     OnElected returns, OnDemoted is called with ReasonTransferred), then
//     marks the row released and reserved for to (transfer_to = to, and a
//     lease of the transfer window, TransferWindow(RetryInterval) = two
//     retry intervals, by the database clock), and wakes the followers. to
//     takes the row with a new term (acquired = 'transferred') and leads at
//     once, without a lock delay; every other candidate, the old leader
//     included, leaves a reserved row alone (the heartbeat's take condition
//     excludes it; a lock-backend waiter that gets the lock lets it go again).
//     If to does not run, the window runs out and the released row is taken
//     as after a Resign: nobody waits a lease for a ghost. That holds on both
//     backends, also for a follower whose process is frozen (SIGSTOP) while
//     it waits: a lock-backend follower never queues for the election's
//     lock (see NewLock), so a frozen one cannot capture it at the release
//     (TestLockFrozenQueuedWaiter: the next leader a few milliseconds after
//     a Resign or a Transfer, the transfer window after a Transfer to the
//     frozen candidate). Left: a process frozen in the milliseconds between
//     a lock-backend follower's GET_LOCK(name, 0) and its write of the row
//     keeps the lock until the server drops its session, about a lease.
//     The table backend's followers wait for its handover lock the same way
//     (the server hands the lock on within the waiter's statement), so a
//     frozen follower costs them nothing.
//   - From outside, an operator asks instead, by setting the live row's
//     transfer_to (RequestTransfer, `sqlelect transfer ELECTION ID`, or
//     UPDATE service_election SET transfer_to = 'id' WHERE anchor = …). A
//     request makes the leader's renewal change nothing (renew requires no
//     request), so the leader reads the row, finds it, and acts as above:
//     the change costs at most a renew interval plus a few milliseconds. A
//     request to the leader itself is cleared by its renewal.
//   - StepDown (transfer_to the empty string, `sqlelect reelect --graceful`) is the
//     graceful Reelect: the leader stands down at its next renewal, marks the
//     row released for anyone, and sits out two retry intervals; a follower
//     takes over at once.
//
// The old leader sits out two retry intervals after a hand-over, like after
// a Resign (after a transfer, counted from the end of the window). A holder that does not lead yet (it waits out its lock delay)
// cannot hand over without a delay: asked to, it gives the row up with the
// rest of its delay, as Resign does. A leader that died never sees a
// request: its lease runs out, the next holder takes the row as usual, and
// every take clears transfer_to. Safety is unchanged: the reservation only
// decides who may take a released row, and a row is released only after its
// holder stood down. The column comes with schema version 4 (migration
// 000004); Run refuses an older table with ErrSchemaMismatch. Candidates of
// versions without transfers ignore reservations and requests (they renew
// over a request and take a reserved row), so upgrade an election's
// candidates before using them.
//
// Proclaim changes the value the leader publishes without a re-election:
// it writes the row at once, later renewals and terms keep it, and
// followers' OnLeaderChanged see it at their next look.
//
// # Leadership preference
//
// Config.Preference.Priority (0 to MaxPriority; 0, the default, is no preference)
// makes some candidates preferred leaders: a bigger machine, the one in the
// primary's zone. The holder writes its priority into the row (the priority
// column, schema version 5) whenever it takes the row and on its own
// renewals; a Batcher's renewals leave the column alone, which is enough
// since a candidate's priority never changes while it runs and every take
// writes it. A row an operator wrote with plain SQL has priority 0 until
// its holder writes it. Record.Priority, Leader, Status and the CLI show it.
//
// A follower that runs, whose Health.Check passes and has not failed within
// Health.HoldDown (see "Health"), and whose Priority is strictly
// greater than the live leader's, asks that leader to hand over to
// it, with one conditional statement decided by the database:
//
//	UPDATE service_election SET transfer_to = :me
//	WHERE anchor = :name AND term = :term_seen AND service_id <> :me
//	  AND released = 0 AND NOT expired AND transfer_to IS NULL
//	  AND priority < :priority AND acquired <> 'operator'
//	  AND term_started_at + INTERVAL :tenure_ms * 1000 MICROSECOND <= SYSDATE(6)
//
// It asks a term once (a holder still waiting out its lock delay gives the
// row up without acting on a request, which clears it and keeps the term),
// and never asks about an operator's assignment (Assume) that its
// candidate has not claimed yet: nobody would act on the request, and the
// operator's choice would be lost to the row's expiry.
//
// That is an operator's request (RequestTransfer) made by the follower: the
// leader acts on it at its next renewal, through the existing hand-over
// path (it stands down, OnDemoted with ReasonTransferred, then marks the
// row released and reserved for the follower), and the follower takes the
// row at once, with no lock delay (acquired = 'transferred'). A request
// from a follower that stops meanwhile falls back after the transfer window
// like any transfer to a candidate that does not run. The follower counts
// its requests (electionprom: sqlelect_preference_requests_total) and logs them
// at Info level; the leader cannot tell a follower's request from an
// operator's, so its reason stays ReasonTransferred.
//
// What is guaranteed:
//
//   - Never two leaders: a preference only writes transfer_to on a live row;
//     the change of leader is the planned transfer above, whose safety does
//     not depend on who asked (the row is released only after its holder
//     stood down).
//   - No flapping. Hysteresis: a follower asks only a leader of strictly
//     lower priority, so candidates of equal priority never ask one another
//     and a leader is never asked by one it would ask back. Stickiness: a
//     follower asks only once the leader has led for the follower's
//     Preference.Tenure (default one lease) by the database clock since its
//     term began, so preferences move leadership at most once per tenure;
//     a preferred candidate that restarts gets leadership back once, a
//     tenure after the takeover its absence caused, and never again while
//     it leads (nobody's priority is higher).
//   - Followers write nothing at steady state: a follower reads the row as
//     it always does and writes only when the request may be granted (a
//     higher priority, no request pending, the tenure over by the database
//     clock as the row reports it), at most once per look, and none at all
//     with Priority 0. While the tenure runs it looks again when the tenure
//     ends rather than a retry interval later.
//
// Preferences outlast operators' choices: leadership moved to a candidate
// of lower priority (Transfer, RequestTransfer, Assume) moves back to a
// running candidate of higher priority a tenure later. With several
// candidates of higher priority than the leader, the first request wins (the others find transfer_to set); if the winner is not the
// highest, the highest asks again a tenure later. Candidates of versions
// before priorities leave the column as they find it (a row one of them
// takes keeps its predecessor's priority), never ask, and honour requests
// like any transfer: upgrade an election's candidates before relying on
// preferences. Run refuses a table without the column (ErrSchemaMismatch).
//
// # What is not guaranteed
//
//   - Safety assumes the clocks of the database and of every candidate run
//     at rates within (LeaseDuration-RenewDeadline)/LeaseDuration of each
//     other (a third, with the defaults), that the database clock does not
//     jump, and that the session time zone has no daylight saving time (Run
//     checks this and fails with ErrUnsafeTimeZone). A suspended machine
//     (laptop sleep, a paused VM) stops Linux's monotonic clock: a leader
//     resumed after such a pause may believe it leads for up to
//     RenewDeadline after resuming.
//   - Expiry compares the clock (SYSDATE(6)) of the server that executed
//     the holder's last renewal with that of the server that executes the
//     takeover.
//     When they are different servers (Galera nodes, or the old and new
//     primary after a failover) and the taker's clock is ahead by d, the
//     takeover comes d early: safety needs d, plus the effect of clock
//     rates and the time the leader's work takes to stop, below
//     LeaseDuration - RenewDeadline (5 s with the defaults). With a larger
//     offset two leaders overlap by about d minus that margin. Keep the
//     database servers' clocks synchronized (NTP) well within the margin. A
//     taker's clock that is behind only delays takeovers by the offset.
//   - sqlelect does not trust session state it did not set. The caller owns
//     the pool, and its code may leave SET @@timestamp or a time_zone on a
//     connection that a candidate's statement then runs on. Every time a
//     statement writes or judges (a lease's start, a term, whether a lease
//     ran out or is still live) is SYSDATE(6), the server's clock, which no
//     session sets: no statement reads the session's NOW(6), so a SET
//     @@timestamp changes nothing. Each statement checks that the session's
//     time zone has no daylight saving time, and changes nothing otherwise
//     (the heartbeat fails with ErrUnsafeSession: "not leader this tick").
//     Nor does it trust the session's commit mode: a renewal on a session
//     with autocommit=0, or inside a transaction a COMMIT AND CHAIN left
//     open (completion_type=CHAIN), would stay uncommitted while the leader
//     counts it. Every take and heartbeat runs in a transaction the library
//     begins and ends with COMMIT AND NO CHAIN; every other statement on the
//     pool changes nothing on such a session (a renewal then falls back to
//     the heartbeat, a release runs in a transaction of its own); Run and
//     the doctor refuse it (ErrNoAutocommit). TestSessionCommitModeOnPool.
//     The lock backend sets its own connection's timestamp, time zone and
//     commit mode.
//     Run refuses a server started with --sysdate-is-now (ErrSysdateIsNow),
//     where SYSDATE() is NOW(); every statement checks it again
//     (SYSDATE(6) is not NOW(6)), and a refused heartbeat on such a server
//     stops Run with that error, so that a failover to one under running
//     candidates is refused too (TestSysdateIsNowAfterFailover). Reads (Status, Leader, List) report the
//     lease left by SYSDATE(6), as the heartbeat judges it.
//     TestStatementsReadNoSessionClock checks every statement for NOW(),
//     TestSessionTimestampOnPool and TestSessionTimestampOnLockPool show it
//     on both backends, TestSessionDSTZoneOnPool for a time zone,
//     TestRunRefusesSysdateIsNow for the server option.
//   - Leadership is advisory: a leader that ignores IsLeader, or whose work
//     outlives the elected context, can act after it was deposed. Writes to
//     the same database can be fenced (issue the write through a transaction
//     that checks the term), and the term can be passed to other systems as a
//     fencing token.
//   - Candidate identities must be unique. Two candidates running with the
//     same ID are one candidate to the database: the term check limits the
//     damage (each claim deposes the other), but do not do it.
//   - Never point candidates at an asynchronous replica, or at several
//     servers that replicate to each other asynchronously: each would elect
//     its own leader. A replica that may be promoted must replicate with
//     binlog_format ROW (or MIXED, which logs these statements as rows):
//     with STATEMENT, a replica runs each heartbeat again by its own clock
//     (SYSDATE(6) when it applies it, later than the primary's), so its
//     decision can differ: a renewal the primary applied can change nothing
//     there, and its row then reads as expired while the primary's is live.
//     After a failover to it a follower takes that row at once while the
//     old leader still believes it leads: two leaders (measured: 2 runs of
//     6, 6.5–8 ms). The doctor fails such a server (binlog_format).
//     On Galera use the table backend (write conflicts are retried as "not
//     leader this tick").
//   - All candidates of an election should use the same LeaseDuration, or a
//     LockDelay at least the longest RenewDeadline among them.
//   - Server-side lock waits are bounded to about QueryTimeout (whole
//     seconds, at least 1), so that statements a candidate gave up on do
//     not pile up on the server while an operator or a slow transaction
//     holds the election's row: per statement on MariaDB (SET STATEMENT),
//     per session on the lock backend's connection and a Batcher's
//     renewals. MySQL refuses SET_VAR(innodb_lock_wait_timeout), so there
//     writes on pooled connections (the table backend's heartbeat and
//     release, Assume, Reelect) wait for a row lock up to the server's
//     innodb_lock_wait_timeout (SELECTs are bounded by MAX_EXECUTION_TIME):
//     on MySQL set innodb_lock_wait_timeout near QueryTimeout, for example in
//     the DSN (innodb_lock_wait_timeout=5: the driver sets it on every
//     connection; TestHeldRowLockLeavesServerUsable checks that this keeps a
//     MySQL 9.7 server usable under a held row lock).
//
// # Checking a server
//
// The algorithm relies on what MySQL and MariaDB promise: the heartbeat's
// affected rows, NOW(6) from one clock, GET_LOCK's semantics, and more.
// Servers and proxies that speak MySQL's protocol do not all keep them.
// Check (the CLI's `sqlelect doctor`) tests each property in a scratch
// election and tells which backends are safe on the server; Run's preflight
// sends its cheapest part, the heartbeat's affected rows, in a transaction
// it rolls back (once per *sql.DB), and stops with ErrUnsafeServer on a
// server that answers them wrongly or refuses the heartbeat outright.
//
// # Concurrency and callbacks
//
// The Election methods are safe for concurrent use. The callbacks' contract
// is documented on Callbacks: OnElected runs in its own goroutine with a
// context cancelled when leadership ends; OnDemoted is always called, once,
// after OnElected returned; OnLeaderChanged and OnDemoted run on the
// goroutine that called Run. Run returns only after every goroutine it
// started has exited.
//
// # Observing without campaigning
//
// Observe follows an election without writing anything, as etcd's
// Election.Observe does: it reports each change of the live leader, its
// term, value or priority, timed by the database clock as a follower's
// looks are, and woken at once by a table-backend holder's handover hint.
// The CLI's watch is built on it.
//
// Package electionfake is an in-memory Election with the same callbacks'
// contract, for the unit tests of code that uses this package; the
// behaviour suite (electiontest.RunContract) checks the contract against
// both. It honours Config.Health.Check where the test drives it (before an
// Elect, and in CheckHealth, which stands for a run of the check while
// leading), bounded by Health.Timeout.
package election
