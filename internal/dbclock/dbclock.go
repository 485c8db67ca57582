// Package dbclock holds the SQL expressions of the database clock that the
// election's statements and the operator's share: the clock itself, the
// session check that trusts it, a live lease and a new term.
package dbclock

// Now is the database clock for the times statements write and judge.
const Now = `SYSDATE(6)`

// Trusted is true when the session's time zone keeps one offset from UTC
// all year (the same offset in January and July), as Run's preflight
// checks, and SYSDATE(6) is the server's clock at the call, not the
// statement's start (NOW(6)): a statement is parsed between the two, so
// they differ by microseconds at least, unless the server runs with
// --sysdate-is-now. A constant the server computes once per statement.
const Trusted = DSTProbe + `=15638400 AND SYSDATE(6)<>NOW(6)`

// DSTProbe is the seconds between two dates half a year apart in the
// session's time zone: 181 days (15,638,400 s) unless it has daylight
// saving time.
const DSTProbe = `UNIX_TIMESTAMP('2030-07-15')-UNIX_TIMESTAMP('2030-01-15')`

// Live is true while the row's lease has not run out by the server's clock
// when it is evaluated.
const Live = `(last_seen_active + INTERVAL lease_ms * 1000 MICROSECOND > ` + Now + `)`

// TermNow is the database clock in microseconds: a new term, or with
// GREATEST(term + 1, …) one never less than the previous term plus one.
const TermNow = `FLOOR(UNIX_TIMESTAMP(` + Now + `)*1000000)`

// TermNew is a new term: the database clock in microseconds, and above the
// election's term floor :floor (see floor.InTx), so above every term issued
// before whatever the clock says.
const TermNew = `GREATEST(` + TermNow + `,:floor+1)`
