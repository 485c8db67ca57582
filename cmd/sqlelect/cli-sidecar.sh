#!/bin/bash
# cli-sidecar.sh regenerates cli-sidecar.txt, the transcript of
# --http-addr and --health-cmd in docs/cli.md (docs/docs_test.go checks
# that docs/cli.md quotes it verbatim), like cli-transcript.sh: it needs sqlelect, mariadb and curl on PATH, free
# ports 8081 and 8082, and a MariaDB server on 127.0.0.1:3307 whose root has
# no password and no database sqlelect_sidecar. From an empty directory:
#
#	bash .../cmd/sqlelect/cli-sidecar.sh > .../cmd/sqlelect/cli-sidecar.txt
set -u
mapfile -t cmds <<'COMMANDS'
mariadb -h127.0.0.1 -P3307 -uroot -e 'CREATE DATABASE sqlelect_sidecar'
export SQLELECT_DSN='root@tcp(127.0.0.1:3307)/sqlelect_sidecar'
sqlelect migrate up
sqlelect campaign web --id web-1 --lease 3s --http-addr 127.0.0.1:8081 --metrics-addr 127.0.0.1:8081 --health-cmd 'test ! -e maintenance || { echo "in maintenance" >&2; exit 1; }' > web-1.jsonl & web1=$!
sleep 3.5
sqlelect campaign web --id web-2 --lease 3s --http-addr 127.0.0.1:8082 > web-2.jsonl & web2=$!
sleep 1
curl -s -w '%{http_code}\n' http://127.0.0.1:8081/leader http://127.0.0.1:8082/leader
curl -s http://127.0.0.1:8082/status
curl -s http://127.0.0.1:8081/healthz; curl -s http://127.0.0.1:8081/metrics | grep '^sqlelect_leader'
touch maintenance; sleep 1
curl -s -w '%{http_code}\n' http://127.0.0.1:8081/leader http://127.0.0.1:8082/leader
curl -s http://127.0.0.1:8081/status
rm maintenance; sleep 1
kill -TERM $web2; wait $web2; sleep 0.5
curl -s -w '%{http_code}\n' http://127.0.0.1:8081/leader
kill -TERM $web1; wait $web1
cat web-1.jsonl
sqlelect campaign web --id web-3 --http-addr 127.0.0.1:8081 > web-3.jsonl & web3=$!; sleep 0.5
sqlelect campaign web --id web-4 --http-addr 127.0.0.1:8081; echo "exit $?"
kill -TERM $web3; wait $web3
sqlelect campaign web --http-addr 8081; echo "exit $?"
COMMANDS
for c in "${cmds[@]}"; do
	printf '$ %s\n' "$c"
	eval "$c" </dev/null 2>&1
done
