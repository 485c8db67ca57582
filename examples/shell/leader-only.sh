#!/bin/sh
# leader-only.sh: a program kept leader-only by `sqlelect run`. It knows
# nothing about elections: sqlelect starts it when its candidate is elected,
# with SQLELECT_ELECTION, SQLELECT_ID and SQLELECT_TERM in its environment,
# and sends SIGTERM to its process group when leadership ends (SIGKILL after
# --grace). Every line starts with the time (Unix seconds) so that runs on
# several machines can be compared.
#
#   sqlelect run leader-only --dsn "$SQLELECT_DSN" -- ./examples/shell/leader-only.sh

now() { t=$(date +%s.%N); case $t in *N) date +%s ;; *) echo "$t" ;; esac; } # %N: GNU date
say() { echo "$(now) leader-only.sh[$$] $*"; }

stop=
trap 'stop=1' TERM INT

say "started: leading ${SQLELECT_ELECTION:-?} as ${SQLELECT_ID:-?} with term ${SQLELECT_TERM:-?}"
# Pass SQLELECT_TERM to whatever this program writes to, as a fencing token:
# a system that remembers the highest term it saw can refuse a stale leader.

n=0
while [ -z "$stop" ]; do
	n=$((n + 1))
	say "working: tick $n (term ${SQLELECT_TERM:-?})"
	# Sleep in the background and wait for it: the shell runs the trap as
	# soon as SIGTERM arrives, instead of after the sleep. A SIGTERM that
	# came before the wait has already set stop.
	sleep 1 &
	sleeper=$!
	[ -n "$stop" ] || wait $sleeper 2>/dev/null
done
kill $sleeper 2>/dev/null
say "stopped: SIGTERM (term ${SQLELECT_TERM:-?}); cleaning up"
exit 0
