#!/bin/bash
# cli-transcript.sh regenerates cli-transcript.txt, the transcript in
# docs/cli.md (docs/docs_test.go checks that docs/cli.md quotes it
# verbatim): it runs each command below in one shell and
# prints it after "$ ", then its output. It needs sqlelect (built with
# `go build -buildvcs=false -o DIR/sqlelect ./cmd/sqlelect`) and mariadb on
# PATH, and a MariaDB server on 127.0.0.1:3307 whose root has no password
# and no database sqlelect_demo. From an empty directory:
#
#	bash .../cmd/sqlelect/cli-transcript.sh > .../cmd/sqlelect/cli-transcript.txt
set -u
mapfile -t cmds <<'COMMANDS'
mariadb -h127.0.0.1 -P3307 -uroot -e 'CREATE DATABASE sqlelect_demo'
export SQLELECT_DSN='root@tcp(127.0.0.1:3307)/sqlelect_demo'
sqlelect version
sqlelect status; echo "exit $?"
sqlelect migrate up
sqlelect migrate version
sqlelect campaign web --id web-1 --value 10.0.0.1:8080 --lease 3s > web-1.jsonl & pids=$!
sleep 3.5
for i in 2 3; do sqlelect campaign web --id web-$i --value 10.0.0.$i:8080 --lease 3s > web-$i.jsonl & pids="$pids $!"; done
sleep 1
sqlelect status
sqlelect status web --json
sqlelect members web
cat web-1.jsonl web-2.jsonl web-3.jsonl
sqlelect watch web --interval 200ms > watch.log & watch=$!
sqlelect assume web web-2; echo "exit $?"
sqlelect assume web web-2 --yes
sleep 4
sqlelect status web
sqlelect reelect web --yes
sleep 4
sqlelect status web
sqlelect transfer web web-1 --yes
sqlelect reelect web --graceful --yes
kill -INT $watch; wait $watch; cat watch.log
kill -TERM $pids; wait $pids
cat web-1.jsonl web-2.jsonl web-3.jsonl
sqlelect history web
sqlelect status
sqlelect run reports --id rep-1 --lease 3s -- sh -c 'echo leading as $SQLELECT_ID term $SQLELECT_TERM; sleep 1000' 2>rep-1.jsonl & rep1=$!
sleep 4
sqlelect run reports --id rep-2 --lease 3s -- sh -c 'echo leading as $SQLELECT_ID term $SQLELECT_TERM; sleep 1000' 2>rep-2.jsonl & rep2=$!
sleep 1
sqlelect status reports
kill -TERM $rep1; wait $rep1; echo "rep-1 exit $?"
sleep 1
sqlelect status reports
cat rep-1.jsonl rep-2.jsonl
kill -TERM $rep2; wait $rep2; echo "rep-2 exit $?"
sqlelect run once --lease 3s -- sh -c 'echo working; exit 3' 2>/dev/null; echo "exit $?"
sqlelect campaign pref --id small --priority 1 --lease 3s --preference-tenure 2s > small.jsonl & small=$!
sleep 3.5
sqlelect campaign pref --id big --priority 10 --lease 3s --preference-tenure 2s > big.jsonl & big=$!
sleep 1.5
sqlelect status pref
kill -TERM $small $big; wait $small $big
cat small.jsonl big.jsonl
sqlelect status nosuch; echo "exit $?"
sqlelect status --dsn 'app:secret@tcp(127.0.0.1:1)/app'; echo "exit $?"
sqlelect campaign web --lease 2s --renew-deadline 3s; echo "exit $?"
sqlelect campaign web --lease 1ms; echo "exit $?"
sqlelect campaign web --priority 1001; echo "exit $?"
sqlelect status --dsn "$SQLELECT_DSN?time_zone=Europe/Berlin"; echo "exit $?"
COMMANDS
for c in "${cmds[@]}"; do
	printf '$ %s\n' "$c"
	eval "$c" </dev/null 2>&1
done
