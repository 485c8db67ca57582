#!/bin/sh
# check.sh: builds and runs SPIN's verifier on every configuration of the
# models (0 errors required) and every mutant (a counterexample required).
# Run by `make model`. Each run is exhaustive (no bitstate): -DSAFETY,
# -DCOLLAPSE (lossless compression) and a memory limit of MEMLIM MiB.
#
# The runs go JOBS at a time (default: 2, the CI machine's cores), the
# longest first. A verifier is compiled with -O0, or -O1 above 5 million
# states: gcc -O1 takes about 6 s more per verifier and searches about 1.4
# times as fast, which pays only above about 5 million states (-O2: 10 s
# more than -O1 to compile, and no faster).
#
# ./check.sh NAME... runs only the named runs.
set -u
cd "$(dirname "$0")"
MEMLIM=${MEMLIM:-3072}
JOBS=${JOBS:-2}

# NAME EXPECT MODEL STATES FLAGS: EXPECT is ok (0 errors, the whole state
# space) or cex (an assertion violated: the trail is kept in
# model/trails/NAME.trail); MODEL is sqlelect or lock (.pml); STATES the
# millions of states it stores (last measured: the order they run in, and
# gcc's -O level). Printed in this order.
runs() {
	cat <<'EOF'
== the table backend (sqlelect.pml): the protocol as it is (0 errors required)
base             ok  sqlelect 0.1  -DH=8 -DOPS=0 -DRES=0 -DNET=0 -DFEN=0
first            ok  sqlelect 13.4 -DH=8 -DOPS=0 -DRES=0 -DNET=1 -DFEN=0 -DINIT_EMPTY
ops-release      ok  sqlelect 9.3  -DH=6 -DOPS=1 -DRES=1 -DNET=0 -DFEN=0
ops-net          ok  sqlelect 8.4  -DH=5 -DOPS=1 -DRES=0 -DNET=1 -DFEN=0 -DNO_REQ
fenced           ok  sqlelect 9.6  -DH=6 -DOPS=0 -DRES=0 -DNET=1 -DFEN=1
transfer         ok  sqlelect 2.9  -DH=7 -DOPS=0 -DRES=1 -DNET=0 -DFEN=0 -DPREF=1
crash            ok  sqlelect 5.2  -DH=6 -DOPS=1 -DRES=0 -DNET=0 -DFEN=0 -DCRASH=1
recipe           ok  sqlelect 2.5  -DH=7 -DOPS=0 -DRES=0 -DNET=1 -DFEN=0 -DRCP=2
== the table backend: a leader LockDelay + 3 RetryIntervals after the last fault (urgency)
live-ops         ok  sqlelect 0.8  -DLIVENESS -DB=7 -DTF=3 -DH=11 -DOPS=1 -DRES=0 -DNET=1 -DFEN=0 -DDRIFTS=1
live-res         ok  sqlelect 0.4  -DLIVENESS -DB=7 -DTF=2 -DH=10 -DOPS=0 -DRES=1 -DPREF=1 -DNET=1 -DCRASH=1 -DFEN=0 -DDRIFTS=0
live-sitout      cex sqlelect 0    -DLIVENESS -DB=6 -DTF=3 -DH=10 -DOPS=1 -DRES=0 -DNET=1 -DFEN=0 -DDRIFTS=1
== a woken follower takes without its look (-DBLIND: any follower may send the heartbeat, whatever the row says)
blind-transfer   ok  sqlelect 7.9  -DH=7 -DOPS=0 -DRES=1 -DNET=0 -DFEN=0 -DPREF=1 -DBLIND
blind-crash      ok  sqlelect 13.5 -DH=6 -DOPS=1 -DRES=0 -DNET=0 -DFEN=0 -DCRASH=1 -DBLIND
blind-recipe     ok  sqlelect 17.4 -DH=7 -DOPS=0 -DRES=0 -DNET=1 -DFEN=0 -DRCP=2 -DBLIND
blind-floor-ops  ok  sqlelect 8.7  -DH=6 -DOPS=1 -DRES=0 -DNET=0 -DFEN=0 -DCBACK=1 -DNO_REQ -DFLOOR -DFIRST -DSTRICT -DBLIND
== issue 21 item 4: the term floor (a) and the first election without a delay (b)
floor-first      ok  sqlelect 19.3 -DH=6 -DOPS=1 -DRES=0 -DNET=0 -DFEN=0 -DCBACK=1 -DNO_REQ -DINIT_EMPTY -DFLOOR -DFIRST -DSTRICT
floor-ops        ok  sqlelect 3.6  -DH=6 -DOPS=1 -DRES=0 -DNET=0 -DFEN=0 -DCBACK=1 -DNO_REQ -DFLOOR -DFIRST -DSTRICT
terms-today      cex sqlelect 0.4  -DH=6 -DOPS=1 -DRES=0 -DNET=0 -DFEN=0 -DCBACK=1 -DNO_REQ -DSTRICT
naive-first      cex sqlelect 0    -DH=6 -DOPS=1 -DRES=0 -DNET=0 -DFEN=0 -DNO_REQ -DINIT_EMPTY -DFLOOR -DFIRST -DNAIVE_FIRST
== issue 31 item 1: the floor table tampered with, the upgrade from a version without the floor (-DMARKER: the marker row)
floor-tamper     ok  sqlelect 9.1  -DH=6 -DOPS=1 -DRES=0 -DNET=0 -DFEN=0 -DNO_REQ -DTAMP=1 -DFLOOR -DFIRST -DMARKER
floor-upgrade    ok  sqlelect 3.8  -DH=6 -DOPS=1 -DRES=0 -DNET=0 -DFEN=0 -DNO_REQ -DUPGRADE -DFLOOR -DFIRST -DMARKER
first-rebuilt    cex sqlelect 0.1  -DH=8 -DOPS=0 -DRES=0 -DNET=0 -DFEN=0 -DTAMP=1 -DINIT_EMPTY -DFLOOR -DFIRST -DMARKER -DREACH
today-tamper     cex sqlelect 0    -DH=6 -DOPS=1 -DRES=0 -DNET=0 -DFEN=0 -DNO_REQ -DTAMP=1 -DFLOOR -DFIRST
today-upgrade    cex sqlelect 0    -DH=6 -DOPS=1 -DRES=0 -DNET=0 -DFEN=0 -DNO_REQ -DUPGRADE -DFLOOR -DFIRST
m-marker-since   cex sqlelect 0    -DH=6 -DOPS=1 -DRES=0 -DNET=0 -DFEN=0 -DNO_REQ -DUPGRADE -DFLOOR -DFIRST -DMARKER -DM_MARKER_NOSINCE
m-marker-count   cex sqlelect 0    -DH=6 -DOPS=1 -DRES=0 -DNET=0 -DFEN=0 -DNO_REQ -DTAMP=1 -DFLOOR -DFIRST -DMARKER -DM_MARKER_NOCOUNT
upgrade-newname  cex sqlelect 0.8  -DH=8 -DOPS=1 -DRES=0 -DNET=0 -DFEN=0 -DNO_REQ -DUPGRADE -DINIT_EMPTY -DFLOOR -DFIRST -DMARKER
== the table backend's mutants: each must give a counterexample
m-release-free   cex sqlelect 0    -DH=6 -DOPS=1 -DRES=1 -DNET=0 -DFEN=0 -DM_RELEASE_FREE
m-revive         cex sqlelect 0    -DH=6 -DOPS=0 -DRES=0 -DNET=1 -DFEN=0 -DM_REVIVE
m-dbclock        cex sqlelect 0    -DH=8 -DOPS=0 -DRES=0 -DNET=0 -DFEN=0 -DM_DBCLOCK
m-insert-nodelay cex sqlelect 0    -DH=6 -DOPS=1 -DRES=0 -DNET=0 -DFEN=0 -DNO_REQ -DM_INSERT_NODELAY
m-claim-nodelay  cex sqlelect 0    -DH=6 -DOPS=1 -DRES=0 -DNET=0 -DFEN=0 -DNO_REQ -DM_CLAIM_NODELAY
m-fence-nolock   cex sqlelect 0    -DH=6 -DOPS=0 -DRES=0 -DNET=1 -DFEN=1 -DM_FENCE_NOLOCK
m-drift          cex sqlelect 0.1  -DH=8 -DOPS=0 -DRES=0 -DNET=0 -DFEN=0 -DK=3 -DDRIFTS=3
== the lock backend (lock.pml): safety (0 errors required)
lock-base        ok  lock     0.8  -DH=7 -DOPS=0 -DRES=1 -DNET=0 -DDRIFTS=2
lock-ops         ok  lock     1.9  -DH=6 -DOPS=1 -DRES=1 -DNET=0 -DDRIFTS=0
lock-net         ok  lock     4.0  -DH=5 -DOPS=0 -DRES=0 -DNET=1 -DCRASH=1 -DDRIFTS=0
lock-ops-net     ok  lock     3.5  -DH=5 -DOPS=1 -DRES=0 -DNET=1 -DDRIFTS=0 -DNO_REQ
lock-fenced      ok  lock     2.4  -DH=5 -DOPS=0 -DRES=0 -DNET=1 -DFEN=1 -DDRIFTS=0
lock-margin      ok  lock     0    -DH=6 -DOPS=0 -DRES=0 -DNET=1 -DDRIFTS=0 -DK=0 -DD=3
== the lock backend: a leader LockDelay + RetryInterval after the last fault (urgency)
live-lock-ops    ok  lock     0.8  -DLIVENESS -DTF=3 -DH=9 -DOPS=1 -DRES=1 -DNET=0 -DDRIFTS=1
live-lock-net    ok  lock     2.6  -DLIVENESS -DTF=3 -DH=9 -DOPS=0 -DRES=0 -DNET=1 -DCRASH=1 -DDRIFTS=1
live-lock-tight  cex lock     0    -DLIVENESS -DTF=2 -DB=4 -DH=7 -DOPS=1 -DRES=0 -DNET=0 -DDRIFTS=0
== the lock backend's mutants: each must give a counterexample
m-lock-gone      cex lock     0    -DH=5 -DOPS=0 -DRES=0 -DNET=1 -DCRASH=1 -DDRIFTS=0 -DM_GONE_NODELAY
m-lock-claim     cex lock     0    -DH=5 -DOPS=1 -DRES=0 -DNET=1 -DDRIFTS=0 -DNO_REQ -DM_CLAIM_NODELAY
m-lock-keepterm  cex lock     0    -DH=6 -DOPS=0 -DRES=0 -DNET=1 -DDRIFTS=0 -DK=0 -DD=3 -DM_KEEP_TERM
EOF
}

# one NAME EXPECT MODEL STATES FLAGS...: builds and runs one verifier in
# its own directory under $work and writes its result line to
# $work/NAME.res.
one() {
	name=$1 expect=$2 model=$3 opt=O0; shift 3
	case $1 in [5-9]*|[1-9][0-9]*) opt=O1;; esac
	shift
	dir=$work/$name
	mkdir -p "$dir" && cp "$model.pml" "$dir/"
	t0=$(date +%s.%N)
	(cd "$dir" && spin "$@" -a "$model.pml" >/dev/null &&
		gcc -"$opt" -w -DSAFETY -DCOLLAPSE -DMEMLIM=$MEMLIM -o pan pan.c) || {
		echo "FAIL $name: does not build" >"$work/$name.res"; return; }
	out=$(cd "$dir" && ./pan -E -m2000000 2>&1)
	t1=$(date +%s.%N)
	states=$(echo "$out" | sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p')
	errors=$(echo "$out" | sed -n 's/.*errors: \([0-9]*\).*/\1/p')
	secs=$(awk "BEGIN { print $t1 - $t0 }")
	incomplete=""
	case "$out" in *"reached -DMEMLIM"*|*"max search depth too small"*) incomplete=1;; esac
	what=""
	case "$out" in
	*"assertion violated"*"cancelled"*) what="a leadership revived after its context was cancelled";;
	*"assertion violated"*"maxLed"*) what="a leader's term not above an earlier leader's";;
	*"assertion violated"*"ft)"*) what="a fenced commit for a term that is not the row's";;
	*"assertion violated"*"lastf"*) what="no leader B ticks after the last fault";;
	*"assertion violated"*"lu[1]"*) what="two leaders";;
	*"assertion violated"*) what=$(echo "$out" | grep -m1 -o 'assertion violated.*');;
	esac
	trail=$dir/$model.pml.trail
	case "$expect" in
	ok)
		if [ "$errors" = 0 ] && [ -z "$incomplete" ]; then
			printf 'ok   %-17s %12s states  %6.1f s  (0 errors, exhaustive)\n' "$name" "$states" "$secs"
		else
			printf 'FAIL %-17s %12s states  %6.1f s  errors=%s incomplete=%s %s\n' "$name" "$states" "$secs" "$errors" "$incomplete" "$what"
			[ -f "$trail" ] && mkdir -p trails && cp "$trail" "trails/$name.trail"
		fi;;
	cex)
		if [ "${errors:-0}" -gt 0 ]; then
			mkdir -p trails && cp "$trail" "trails/$name.trail"
			printf 'ok   %-17s %12s states  %6.1f s  (counterexample: %s)\n' "$name" "$states" "$secs" "$what"
		else
			printf 'FAIL %-17s %12s states  %6.1f s  (mutant survived: no counterexample)\n' "$name" "$states" "$secs"
		fi;;
	esac >"$work/$name.res"
	rm -rf "$dir"
}

if [ "${1:-}" = "--one" ]; then
	shift
	work=$1; shift
	one "$@"
	exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
want=" $* "
selected() { [ "$want" = "  " ] || case "$want" in *" $1 "*) true;; *) false;; esac; }
t0=$(date +%s)
# The big runs first, so that the cores finish together.
runs | grep -v '^==' | while read -r name rest; do
	selected "$name" && echo "$name $rest"
done | sort -s -k4,4gr | while read -r line; do
	printf '%s\0' "$line"
done | xargs -0 -P "$JOBS" -I{} sh -c 'exec sh ./check.sh --one "$0" $1' "$work" {}
t1=$(date +%s)
fail=0
runs | while read -r name rest; do
	case "$name" in
	==) [ "$want" = "  " ] && echo "$name $rest";;
	*) selected "$name" || continue
		if [ -f "$work/$name.res" ]; then cat "$work/$name.res"; else echo "FAIL $name: did not run"; fi;;
	esac
done
grep -l '^FAIL' "$work"/*.res >/dev/null 2>&1 && fail=1
runs | grep -v '^==' | while read -r name rest; do
	selected "$name" && [ ! -f "$work/$name.res" ] && echo missing
done | grep -q missing && fail=1
printf 'total %d s wall, %s jobs at a time\n' "$((t1 - t0))" "$JOBS"
if [ "$fail" != 0 ]; then
	echo "model: FAILED"
	exit 1
fi
echo "model: all configurations hold, every mutant gives a counterexample"
