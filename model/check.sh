#!/bin/sh
# check.sh: builds and runs SPIN's verifier on every configuration of the
# model (0 errors required) and every mutant (a counterexample required).
# Run by `make model`. Each run is exhaustive (no bitstate): -DSAFETY,
# -DCOLLAPSE (lossless compression) and a memory limit of MEMLIM MiB.
set -u
cd "$(dirname "$0")"
MEMLIM=${MEMLIM:-3072}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp sqlelect.pml "$work/"
fail=0
total=0
# run NAME EXPECT FLAGS...: EXPECT is ok (0 errors, the whole state space)
# or cex (an assertion violated: the trail is kept in model/trails/NAME.trail).
run() {
	name=$1 expect=$2; shift 2
	t0=$(date +%s.%N)
	(cd "$work" && rm -f pan pan.* sqlelect.pml.trail &&
		spin "$@" -a sqlelect.pml >/dev/null &&
		gcc -O1 -w -DSAFETY -DCOLLAPSE -DMEMLIM=$MEMLIM -o pan pan.c) || { echo "FAIL $name: does not build"; fail=1; return; }
	out=$(cd "$work" && ./pan -E -m2000000 2>&1)
	t1=$(date +%s.%N)
	states=$(echo "$out" | sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p')
	errors=$(echo "$out" | sed -n 's/.*errors: \([0-9]*\).*/\1/p')
	secs=$(awk "BEGIN { print $t1 - $t0 }")
	total=$(awk "BEGIN { print $total + $secs }")
	incomplete=""
	case "$out" in *"reached -DMEMLIM"*|*"max search depth too small"*) incomplete=1;; esac
	what=""
	case "$out" in
	*"assertion violated"*"cancelled"*) what="a leadership revived after its context was cancelled";;
	*"assertion violated"*"maxLed"*) what="a leader's term not above an earlier leader's";;
	*"assertion violated"*"ft)"*) what="a fenced commit for a term that is not the row's";;
	*"assertion violated"*"lu[1]"*) what="two leaders";;
	*"assertion violated"*) what=$(echo "$out" | grep -m1 -o 'assertion violated.*');;
	esac
	case "$expect" in
	ok)
		if [ "$errors" = 0 ] && [ -z "$incomplete" ]; then
			printf 'ok   %-22s %12s states  %6.1f s  (0 errors, exhaustive)\n' "$name" "$states" "$secs"
		else
			printf 'FAIL %-22s %12s states  %6.1f s  errors=%s incomplete=%s %s\n' "$name" "$states" "$secs" "$errors" "$incomplete" "$what"
			[ -f "$work/sqlelect.pml.trail" ] && mkdir -p trails && cp "$work/sqlelect.pml.trail" "trails/$name.trail"
			fail=1
		fi;;
	cex)
		if [ "${errors:-0}" -gt 0 ]; then
			mkdir -p trails && cp "$work/sqlelect.pml.trail" "trails/$name.trail"
			printf 'ok   %-22s %12s states  %6.1f s  (counterexample: %s)\n' "$name" "$states" "$secs" "$what"
		else
			printf 'FAIL %-22s %12s states  %6.1f s  (mutant survived: no counterexample)\n' "$name" "$states" "$secs"
			fail=1
		fi;;
	esac
}

echo "== the protocol as it is (0 errors required)"
run base             ok  -DH=8 -DOPS=0 -DRES=0 -DNET=0 -DFEN=0
run first            ok  -DH=8 -DOPS=0 -DRES=0 -DNET=1 -DFEN=0 -DINIT_EMPTY
run ops-release      ok  -DH=6 -DOPS=1 -DRES=1 -DNET=0 -DFEN=0
run ops-net          ok  -DH=5 -DOPS=1 -DRES=0 -DNET=1 -DFEN=0 -DNO_REQ
run fenced           ok  -DH=6 -DOPS=0 -DRES=0 -DNET=1 -DFEN=1
run transfer         ok  -DH=7 -DOPS=0 -DRES=1 -DNET=0 -DFEN=0 -DPREF=1
run crash            ok  -DH=6 -DOPS=1 -DRES=0 -DNET=0 -DFEN=0 -DCRASH=1
run recipe           ok  -DH=7 -DOPS=0 -DRES=0 -DNET=1 -DFEN=0 -DRCP=2
echo "== issue 21 item 4: the term floor (a) and the first election without a delay (b)"
run floor-first      ok  -DH=6 -DOPS=1 -DRES=0 -DNET=0 -DFEN=0 -DCBACK=1 -DNO_REQ -DINIT_EMPTY -DFLOOR -DFIRST -DSTRICT
run floor-ops        ok  -DH=6 -DOPS=1 -DRES=0 -DNET=0 -DFEN=0 -DCBACK=1 -DNO_REQ -DFLOOR -DFIRST -DSTRICT
run terms-today      cex -DH=6 -DOPS=1 -DRES=0 -DNET=0 -DFEN=0 -DCBACK=1 -DNO_REQ -DSTRICT
run naive-first      cex -DH=6 -DOPS=1 -DRES=0 -DNET=0 -DFEN=0 -DNO_REQ -DINIT_EMPTY -DFLOOR -DFIRST -DNAIVE_FIRST
echo "== mutants: each must give a counterexample"
run m-release-free   cex -DH=6 -DOPS=1 -DRES=1 -DNET=0 -DFEN=0 -DM_RELEASE_FREE
run m-revive         cex -DH=6 -DOPS=0 -DRES=0 -DNET=1 -DFEN=0 -DM_REVIVE
run m-dbclock        cex -DH=8 -DOPS=0 -DRES=0 -DNET=0 -DFEN=0 -DM_DBCLOCK
run m-insert-nodelay cex -DH=6 -DOPS=1 -DRES=0 -DNET=0 -DFEN=0 -DNO_REQ -DM_INSERT_NODELAY
run m-claim-nodelay  cex -DH=6 -DOPS=1 -DRES=0 -DNET=0 -DFEN=0 -DNO_REQ -DM_CLAIM_NODELAY
run m-fence-nolock   cex -DH=6 -DOPS=0 -DRES=0 -DNET=1 -DFEN=1 -DM_FENCE_NOLOCK
run m-drift          cex -DH=8 -DOPS=0 -DRES=0 -DNET=0 -DFEN=0 -DK=3 -DDRIFTS=3

printf 'total %.0f s\n' "$total"
if [ "$fail" != 0 ]; then
	echo "model: FAILED"
	exit 1
fi
echo "model: all configurations hold, every mutant gives a counterexample"
