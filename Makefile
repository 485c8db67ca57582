# sqlelect developer targets. CI runs `make ci` (see .ci/run): the model, make test's checks and tests, and the server matrix.

GO ?= go
# Find the Go toolchain even when /usr/local/go/bin is not on PATH.
export PATH := $(PATH):/usr/local/go/bin

SHELL := /bin/sh

# Where internal/mysqld looks for a server binary, after PATH.
SERVER_DIRS := /usr/sbin /usr/local/sbin /usr/local/mysql/bin
# Debian/Ubuntu packages for a local test server, for `go test -race` (cgo),
# and promtool, which checks and unit-tests the alerting rules in monitoring/.
SERVER_PKGS := mariadb-server galera-4 rsync
CGO_PKGS    := gcc libc6-dev
PROMTOOL_PKGS := prometheus
# systemd-analyze, which checks the service unit in examples/systemd.
SYSTEMD_PKGS := systemd
# make demo needs a server only (deps with DEMO=1 installs just this).
DEMO_PKGS := mariadb-server
# For the Galera tests (a 2- and 3-node cluster on loopback) and for
# TestGaleraClockOffset (libfaketime offsets one node's clock). Installed by
# deps when missing and it can (root, apt-get); otherwise those tests skip,
# and deps says so without failing.
GALERA_PKGS := galera-4 rsync
FAKETIME_PKGS := libfaketime
# For the servers of test-matrix and ci (MySQL 9.7, MariaDB 11.8 and Group
# Replication), which internal/mysqld runs from Debian roots it builds with
# debootstrap (as root).
ROOT_PKGS := debootstrap
# zsh and fish, which check the syntax of the completion scripts that
# `sqlelect completion zsh|fish` prints (TestCompletionBash).
SHELL_PKGS := zsh fish
# A headless Chromium, which renders the page of `sqlelect ui` (TestUI).
BROWSER_PKGS := chromium

.PHONY: all deps lint monitoring-test demo-deps-check systemd-check test-checks test test-matrix test-short demo build chaos chaos-short bench bench-peers ci model model-deps

all: build

# deps makes sure tests can get a MariaDB/MySQL server and that -race can
# build: it installs what is missing with apt-get when running as root on
# Debian/Ubuntu, and otherwise says what to install and fails. The system
# MariaDB service is not started (a policy-rc.d is in place during the
# install); tests start their own throwaway servers.
deps:
	@need=""; \
	if [ -n "$$SQLELECT_TEST_DSN" ]; then \
		echo "deps: tests use SQLELECT_TEST_DSN; no local server needed"; \
	elif command -v mariadbd >/dev/null 2>&1 || command -v mysqld >/dev/null 2>&1; then \
		:; \
	else \
		found=""; \
		for d in $(SERVER_DIRS); do \
			if [ -x "$$d/mariadbd" ] || [ -x "$$d/mysqld" ]; then found=1; fi; \
		done; \
		[ -n "$$found" ] || need=" $(SERVER_PKGS)"; \
	fi; \
	if [ -n "$(DEMO)" ]; then need="$${need:+ $(DEMO_PKGS)}"; fi; \
	[ -n "$(DEMO)" ] || { \
	cc="$$($(GO) env CC)"; \
	command -v "$${cc%% *}" >/dev/null 2>&1 || need="$$need $(CGO_PKGS)"; \
	command -v promtool >/dev/null 2>&1 || need="$$need $(PROMTOOL_PKGS)"; \
	command -v systemd-analyze >/dev/null 2>&1 || need="$$need $(SYSTEMD_PKGS)"; \
	optional=""; \
	[ -e /usr/lib/galera/libgalera_smm.so ] && command -v rsync >/dev/null 2>&1 || optional=" $(GALERA_PKGS)"; \
	ls /usr/lib/*/faketime/libfaketime.so.1 >/dev/null 2>&1 || optional="$$optional $(FAKETIME_PKGS)"; \
	command -v debootstrap >/dev/null 2>&1 || optional="$$optional $(ROOT_PKGS)"; \
	command -v zsh >/dev/null 2>&1 && command -v fish >/dev/null 2>&1 || optional="$$optional $(SHELL_PKGS)"; \
	command -v chromium >/dev/null 2>&1 || optional="$$optional $(BROWSER_PKGS)"; \
	if [ -n "$$optional" ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			need="$$need$$optional"; \
		else \
			echo "deps: not installed:$$optional; the tests that need them (Galera, the clock offset, the other servers, the zsh and fish completions, the ui page in a browser) will skip." >&2; \
		fi; \
	fi; }; \
	if [ -z "$$need" ]; then exit 0; fi; \
	if [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then \
		case "$$need" in *mariadb-server*) \
			echo "deps: no MariaDB/MySQL server found (mariadbd or mysqld on PATH or in $(SERVER_DIRS))." >&2; \
			echo "deps:   Install one (Debian/Ubuntu: sudo apt-get install -y mariadb-server), or set" >&2; \
			echo "deps:   SQLELECT_TEST_DSN to the DSN of a user that may CREATE DATABASE, or run a Docker engine." >&2;; \
		esac; \
		case "$$need" in *gcc*) \
			echo "deps: no C compiler ($$cc), needed by go test -race (Debian/Ubuntu: sudo apt-get install -y gcc libc6-dev)." >&2;; \
		esac; \
		case "$$need" in *prometheus*) \
			echo "deps: no promtool, needed to test monitoring/ (Debian/Ubuntu: sudo apt-get install -y prometheus)." >&2;; \
		esac; \
		case "$$need" in *systemd*) \
			echo "deps: no systemd-analyze, needed to check examples/systemd (Debian/Ubuntu: sudo apt-get install -y systemd)." >&2;; \
		esac; \
		exit 1; \
	fi; \
	echo "deps: apt-get install$$need"; \
	policy=""; \
	if [ ! -e /usr/sbin/policy-rc.d ]; then \
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && policy=1; \
	fi; \
	rc=0; \
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$need || rc=$$?; \
	if [ -n "$$policy" ]; then rm -f /usr/sbin/policy-rc.d; fi; \
	exit $$rc

# The repository holds two modules: the library (this directory; its
# requirements are the driver, sqlx, golang-migrate, client_golang and, for
# election/electionotel alone, the OpenTelemetry metrics API) and
# integration/ (the end-to-end, chaos and bench suites, with dockertest and
# toxiproxy). Targets that cover everything run in both.
MODULES := . integration

# INTEGRATION_PARALLEL is go test's -parallel in integration/: the behaviour
# suite's subtests (40 per backend, each on a database of its own; the
# three backends' at once, TestBehaviour) wait on leases and the server, not
# on the CPU, and at the default (GOMAXPROCS, 2 here) they ran two at a
# time: 4 of the module's 6 minutes per server. Six at once brought its
# runs to about a minute and a half; the few that measure against windows
# of a renew interval run alone, first (electiontest.Run). Ten at once,
# the three backends together (2026-11-29, a load average of 3 from other
# work): TestBehaviour 83 s where six took 105 s and 114 s, and the module
# 164 s (0.6 cores) where the host's leg had taken 205 s.
# ROOT_PACKAGES is go test's -p in the root module: how many of its
# packages run at once. Each starts a server of its own and waits on it and
# on leases far more than it computes; at the default (GOMAXPROCS, 2 here)
# the leg took the sum of its packages over two (MySQL 9.7: 320 s of
# packages in 164 s), at 3 about its longest package (election) or the
# sum over three. Not 4: at 4, on the machine shared with six other
# sessions (load average 14 to 22), MySQL 9.7 starts outlasted their 60 s
# timeout and a 1.2 s renew deadline was missed (TestSessionDSTZoneOnPool
# failed so at -p 2 too at that load); 3 adds half again to the leg's own
# load where 4 would double it.
# MATRIX_ROOT_PACKAGES is the same for the other servers' legs (MySQL 9.7
# and MariaDB 11.8, each in a Debian root): at 3, beside two other
# sessions' tests (load average 10), MySQL 9.7's leg lost leases it
# renewed (TestRestoreWithFreshLease) and a server start took a test's
# deadline (TestMetricsOnServer), where the host's leg at 3 passed.
# ROOT_PARALLEL is go test's -parallel in the root module: at the default
# (GOMAXPROCS, 2 here) election's parallel tests, which wait on leases,
# ran two at a time. At 6, the machine otherwise idle (2026-12-01): the
# election package 97 s where it took 149 s (MariaDB 10.11), and in CI
# the legs 489 s (host), 384 s (MySQL 9.7) and 251 s (MariaDB 11.8) where
# they took 482 s, 411 s and 272 s.
# PARALLEL_FLAG gives them to go test in the module $$m (for the server
# $$1 in gotest).
INTEGRATION_PARALLEL ?= 10
ROOT_PACKAGES ?= 3
MATRIX_ROOT_PACKAGES ?= 2
ROOT_PARALLEL ?= 6
PARALLEL_FLAG = $$(case $$m:$${1:-mariadb-10.11} in (integration:*) echo -parallel $(INTEGRATION_PARALLEL);; \
	(*:mariadb-10.11) echo -p $(ROOT_PACKAGES) -parallel $(ROOT_PARALLEL);; \
	(*) echo -p $(MATRIX_ROOT_PACKAGES) -parallel $(ROOT_PARALLEL);; esac)

# TEST_TMPDIR is the tests' TMPDIR (make test, test-matrix, ci, chaos): where
# internal/mysqld keeps the host's test servers (the Debian roots' servers
# keep theirs in the root's tmp: MEMROOT_SH), /dev/shm when it is a
# writable directory, as MySQL's own test runner does with --mem; empty,
# the system's (and the roots' tmp stays on disk). On disk,
# each subtest's database (CREATE and ALTER TABLE, DROP DATABASE, CREATE
# USER) waits on the disk while holding the server's dictionary, and the
# other subtests' statements wait behind it: 2026-12-02, during one
# TestBehaviour, 39 statements of other elections took over 300 ms in
# "Opening tables", "creating table", "Commit" and DROP DATABASE (a
# poll of the process list every 50 ms), and a leader's renewal timed out;
# with the data in /dev/shm, none but row lock waits (the suite's stalls,
# the term floor's marker). The benchmarks keep the disk.
TEST_TMPDIR ?= $(shell [ -d /dev/shm ] && [ -w /dev/shm ] && echo /dev/shm)

# test-checks is make test but for its go test: lint, promtool, the demo's
# deps, the unit file and go vet. make ci runs it in the background.
test-checks: deps lint monitoring-test demo-deps-check systemd-check
	@set -e; for m in $(MODULES); do (cd $$m && echo "== $$m: go vet" && $(GO) vet ./...); done

test: test-checks
	@set -e; for m in $(MODULES); do (cd $$m && echo "== $$m: go test" && \
		TMPDIR=$(TEST_TMPDIR) SQLELECT_CHAOS_ROUNDS=0 $(GO) test -race -count=1 $(PARALLEL_FLAG) -timeout 20m ./...); done

# lint runs staticcheck (the version below, built into bin/ on first use
# from the Go module proxy) on both modules, with the checks staticcheck.conf
# lists.
STATICCHECK_VERSION := v0.8.2
STATICCHECK := $(CURDIR)/bin/staticcheck-$(STATICCHECK_VERSION)
$(STATICCHECK):
	@echo "== lint: go install staticcheck@$(STATICCHECK_VERSION)"
	@d=$$(mktemp -d) && GOBIN=$$d GOFLAGS= $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) && \
		mkdir -p $(CURDIR)/bin && mv $$d/staticcheck $@ && rmdir $$d
lint: $(STATICCHECK)
	@set -e; for m in $(MODULES); do (cd $$m && echo "== $$m: staticcheck" && $(STATICCHECK) ./...); done

# monitoring-test checks the alerting rules and runs their unit tests
# (monitoring/sqlelect-alerts_test.yml) with promtool; the Go test in
# monitoring/ checks that the rules and the dashboard name exported series.
monitoring-test: deps
	@echo "== monitoring: promtool"
	@cd monitoring && promtool check rules sqlelect-alerts.yml && promtool test rules sqlelect-alerts_test.yml

# systemd-check verifies the service unit of examples/systemd with
# systemd-analyze, its binaries replaced by /bin/true (verify wants them
# to exist). A setting verify cannot parse is only a warning to it: any
# output fails the check.
systemd-check: deps
	@echo "== examples/systemd: systemd-analyze verify"
	@d=$$(mktemp -d); trap 'rm -rf "$$d"' EXIT; \
	sed -e 's|/usr/local/bin/[a-z]*|/bin/true|g' examples/systemd/sqlelect-run.service >"$$d/sqlelect-run.service"; \
	out=$$(systemd-analyze verify "$$d/sqlelect-run.service" 2>&1) && [ -z "$$out" ] || { echo "$$out" >&2; exit 1; }

# demo-deps-check runs deps as make demo does (DEMO=1) where no server is
# found, with an apt-get that only records its arguments, and checks that
# it would install the server and nothing else.
demo-deps-check:
	@d=$$(mktemp -d); trap 'rm -rf "$$d"' EXIT; \
	printf '#!/bin/sh\necho "$$*" >>"%s/args"\n' "$$d" >"$$d/apt-get"; chmod +x "$$d/apt-get"; \
	env PATH="$$d:/usr/bin:/bin" SQLELECT_TEST_DSN= $(MAKE) --no-print-directory deps DEMO=1 SERVER_DIRS="$$d" >/dev/null 2>&1; \
	got=$$(grep install "$$d/args" 2>/dev/null); \
	if [ "$$(id -u)" = 0 ] && [ "$$got" != "install -y -qq $(DEMO_PKGS)" ]; then \
		echo "demo-deps-check: make demo would run apt-get $${got:-nothing}, want install -y -qq $(DEMO_PKGS)" >&2; exit 1; fi; \
	echo "== demo-deps-check: make demo installs $(DEMO_PKGS) only"

# The servers test-matrix runs on (internal/mysqld, $$SQLELECT_TEST_SERVER):
# the host's MariaDB 10.11, Oracle MySQL 9.7 (Debian sid) and MariaDB 11.8
# (Debian trixie), the last two each in a Debian root that internal/mysqld
# builds with debootstrap on first use (as root; about 30 s each, once per
# machine, kept in /var/cache/sqlelect/roots).
MATRIX ?= mariadb-10.11 mysql-9.7 mariadb-11.8

# The packages whose tests use no server: the docs, the Go test of the
# alerting rules, the adoption layout, the fake election, the OpenTelemetry
# adapter, the bench report, testdb's Docker helpers, the span union
# (internal/spans) and the chaos checker
# (the chaos runs skipped, as gotest does). And those that test no SQL of
# their own against the server: the CLI (its statements are the library's:
# election, operator, doctor and schema, each tested on every server; its
# own SHOW TABLES is plain), and the test harness (internal/mysqld,
# internal/testdb: it starts every server of every other leg). gotest runs
# them on the host's MariaDB 10.11 only (make test and test-matrix's first
# server), not again on each server: the CLI's were MySQL 9.7's longest
# package after election (102 s of its leg's 222 s at -p 2, 2026-11-28).
SERVERLESS_PKGS := docs monitoring internal/adoption election/electionfake election/electionotel \
	integration/bench integration/testdb integration/chaos internal/spans cmd/sqlelect internal/mysqld internal/testdb
SERVERLESS_GREP := grep -vxF $(foreach p,$(SERVERLESS_PKGS),-e github.com/sqlelect/sqlelect/$(p))

# Shell functions for test-matrix and ci; each needs a function leg NAME
# that says which leg starts. gotest SERVER runs go test -race of both
# modules on SERVER, one after the other (chaos suite skipped;
# SERVERLESS_PKGS on mariadb-10.11 only). chaos SERVER ROUNDS [FLAG...]
# runs the chaos suite (-run Chaos, then the go test flags FLAG..., e.g.
# -skip or a narrower -run) on SERVER
# with ROUNDS rounds of each fault ("" for the short version: two rounds
# of the quick faults, one of the long ones), prints the tail of its
# output (the summary tables) and fails as it does. The suite runs
# TestChaos (table, lock, batch, shards) on SERVER, Galera on the host's MariaDB
# only when SERVER is the host's, Group Replication only on mysql-9.7, and
# the long fenced transaction. CHAOS_PARALLEL is its go test -parallel:
# once TestChaos (which keeps two of its four runs at once whatever
# -parallel says) has ended, the short tests (RecipeAdoption, SessionState,
# RollingUpgrade, FencedLongTransaction: a server each, both backends at
# once but the last) and TestChaosGroupReplication (its two modes at
# once since 2026-11-29: MySQL 9.7's chaos-short took 375 s, from 423 s)
# run side by side, four runs at once (their servers started one at a
# time), instead of one test after another; TestChaosGalera still runs
# alone.
CHAOS_PARALLEL ?= 4
# MEMROOT_SH: memroot SERVER mounts a tmpfs on the tmp of SERVER's Debian
# root (mysql-9.7, mariadb-11.8), where internal/mysqld keeps that server's
# data, as TEST_TMPDIR does for the host's: when TEST_TMPDIR is set, the
# root exists, we are root and it is no mount point yet. It stays mounted;
# what it hides on disk (the data templates) is made again in it. The
# integration module's TestBehaviour on MySQL 9.7, alone (2026-12-03): 86
# s in memory, 94 s on disk.
MEMROOT_SH = memroot() { r=/var/cache/sqlelect/roots/$$1/tmp; \
	if [ -n "$(TEST_TMPDIR)" ] && [ -d $$r ] && [ "$$(id -u)" = 0 ] && ! mountpoint -q $$r; then \
	mount -t tmpfs -o mode=1777 sqlelect-test $$r; fi; }
GOTEST_SH = $(MEMROOT_SH); gotest() { [ "$$1" = mariadb-10.11 ] || memroot $$1; for m in $(MODULES); do leg "$$1: $$m: go test"; \
	(cd $$m && pkgs=./... && if [ "$$1" != mariadb-10.11 ]; then pkgs=$$($(GO) list ./... | $(SERVERLESS_GREP)); fi && \
	TMPDIR=$(TEST_TMPDIR) SQLELECT_TEST_SERVER=$$1 SQLELECT_CHAOS_ROUNDS=0 $(GO) test -race -count=1 $(PARALLEL_FLAG) $(GOTEST_FLAGS) -timeout 20m $$pkgs) || return; done; }
CHAOS_SH = $(MEMROOT_SH); chaos() { chaos_server=$$1 chaos_rounds=$$2; shift 2; [ -z "$$chaos_server" ] || memroot $$chaos_server; \
	leg "$${chaos_server:-host}: chaos-short$${chaos_rounds:+ ($$chaos_rounds round(s) of each fault)}$${1:+ $$*}"; log=$$(mktemp); rc=0; \
	(cd integration && TMPDIR=$(TEST_TMPDIR) SQLELECT_TEST_SERVER=$$chaos_server SQLELECT_CHAOS_ROUNDS=$$chaos_rounds \
		$(GO) test -count=1 -v -parallel $(CHAOS_PARALLEL) -timeout 20m -run Chaos "$$@" ./chaos/) >$$log 2>&1 || rc=$$?; \
	if [ $$rc != 0 ]; then echo "== the failed tests' lines:"; grep -n -A30 -e '--- FAIL' -e '^FAIL' $$log | head -n 300; fi; \
	tail -n 120 $$log; rm -f $$log; return $$rc; }

# test-matrix runs vet, the tests (unit, behaviour suite on both backends, CLI,
# examples) and chaos-short on every server of MATRIX, one after the other.
test-matrix: deps
	@set -e; for m in $(MODULES); do (cd $$m && $(GO) vet ./...); done
	@set -e; leg() { echo "== test-matrix: $$1"; }; $(GOTEST_SH); $(CHAOS_SH); \
	roots=$$(echo $(MATRIX) | tr ' ' '\n' | grep -v '^mariadb-10.11$$' || true); \
	[ -z "$$roots" ] || $(GO) run ./internal/mysqld/roots $$roots; \
	for s in $(MATRIX); do gotest $$s; chaos $$s ""; done

# ci is what .ci/run runs. In the background, each in a session of its
# own (AUTOGROUP, below) and printed at the end:
#   - the Debian roots of MySQL 9.7 and MariaDB 11.8, where they are
#     missing, at nice 10, waited for after the host's leg, which needs
#     none;
#   - make model (see model/) at nice 19, killed if a leg fails;
#   - builds ahead at the legs' share (at nice 19 they ran into the MySQL
#     9.7 leg): the library without -race (what the CLI's and the
#     examples' tests build) and the integration module's test binaries,
#     so that the later legs start on a warm cache, then make test-checks
#     (make test but for its go test), waited for at the end.
# In front, one leg after another (two legs of go test at once lost the
# behaviour suite's 1 s leases):
#   - on the host's MariaDB 10.11: go test -race of both modules, Galera
#     included (make test's go test);
#   - on Oracle MySQL 9.7, then on MariaDB 11.8: go test -race of both
#     modules (Galera runs on the host's server only; Group Replication is
#     chaos-short's);
#   - chaos-short, one round of each fault, in two lanes, never more than
#     two runs at once (three put the Batcher's runs past the liveness
#     bound): MySQL 9.7's (with Group Replication), then the host's short
#     tests (RecipeAdoption, SessionState, RollingUpgrade,
#     FencedLongTransaction); beside it MariaDB 11.8's, then the host's
#     TestChaosGalera. The host's TestChaos (the fault table on MariaDB
#     10.11) is left out: MariaDB 11.8's run injects the same faults into
#     the same backends; make chaos, chaos-short and test-matrix run it.
# Each leg prints when it starts. The tests wait on servers and timers
# more than they compute, and the background jobs take the CPU they
# leave. .ci/timings.md keeps the measurements behind each choice, and
# what was tried and not kept.

# GOTEST_FLAGS are more flags for gotest's go test. ci skips
# internal/mysqld's TestGroupFailover (48 s on MySQL 9.7, the only server
# it runs on): the chaos suite's TestChaosGroupReplication, in MySQL 9.7's
# chaos-short, makes each of its calls (StartGroup, Primary, Kill,
# WaitPrimary, Rejoin, WaitOnline, Leave: gr_primary_kill and
# gr_primary_leave), and fails if one does.
GOTEST_FLAGS ?=
# AUTOGROUP,N gives the shell's session (its autogroup) nice N. The
# kernel's autogroups (sched_autogroup_enabled, on in Debian's kernels)
# share the CPU between sessions first and by nice only within each: a job
# started with setsid and nice 19 still gets as much CPU as the whole of
# ci's own session, the legs and their servers (measured 2026-12-02: two
# busy loops beside two such hogs did half their work alone; beside the
# same hogs with their session at nice 19, 92 %). Without autogroups the
# write fails, and nice alone does what it says.
AUTOGROUP = { echo $(1) >/proc/self/autogroup; } 2>/dev/null;

ci: GOTEST_FLAGS = -skip '^TestGroupFailover$$'

ci: deps model-deps
	@set -e; t0=$$(date +%s); \
	leg() { echo "== ci: $$1: $$(( $$(date +%s) - t0 )) s since start"; }; $(GOTEST_SH); $(CHAOS_SH); \
	leg "Debian roots of MySQL 9.7 and MariaDB 11.8, in the background at nice 10"; rdir=$$(mktemp -d); \
	( set +e; setsid sh -c 'echo $$$$ >'"$$rdir/pid"'; $(call AUTOGROUP,10) exec nice -n 10 $(GO) run ./internal/mysqld/roots mysql-9.7 mariadb-11.8' >$$rdir/log 2>&1; echo $$? >$$rdir/rc; \
	  echo "== ci: the roots ended: $$(( $$(date +%s) - t0 )) s since start" >>$$rdir/log ) & rpid=$$!; \
	leg "make model (SPIN), in the background at nice 19"; mdir=$$(mktemp -d); \
	( set +e; setsid sh -c 'echo $$$$ >'"$$mdir/pid"'; $(call AUTOGROUP,19) exec nice -n 19 sh model/check.sh' >$$mdir/log 2>&1; echo $$? >$$mdir/rc; \
	  echo "== ci: make model ended: $$(( $$(date +%s) - t0 )) s since start" >>$$mdir/log ) & mpid=$$!; \
	leg "builds ahead (the library without -race, the integration module's tests), then make test-checks (lint, promtool, vet...), in the background"; kdir=$$(mktemp -d); \
	( set +e; setsid sh -c 'echo $$$$ >'"$$kdir/pid"'; $(GO) build ./... && (cd integration && \
		$(GO) test -race -c -o '"$$kdir/race/"' ./... && $(GO) test -c -o '"$$kdir/chaos.test"' ./chaos/) && \
		echo "== ci: the builds ahead ended: $$(( $$(date +%s) - '"$$t0"' )) s since start" && \
		exec $(MAKE) --no-print-directory test-checks' >$$kdir/log 2>&1; echo $$? >$$kdir/rc; \
	  echo "== ci: make test-checks and the builds ended: $$(( $$(date +%s) - t0 )) s since start" >>$$kdir/log ) & kpid=$$!; \
	trap 'for d in $$rdir $$mdir $$kdir; do if [ ! -f $$d/rc ] && [ -f $$d/pid ]; then kill -- -$$(cat $$d/pid) 2>/dev/null || true; \
		echo "== ci: stopped a background job at $$(( $$(date +%s) - t0 )) s; its output:"; tail -n 40 $$d/log; fi; done' EXIT; \
	gotest mariadb-10.11; \
	leg "waiting for the roots"; wait $$rpid; cat $$rdir/log; rc=$$(cat $$rdir/rc); rm -rf $$rdir; \
	[ "$$rc" = 0 ] || { echo "== ci: the Debian roots failed (exit $$rc)"; exit 1; }; \
	for s in mysql-9.7 mariadb-11.8; do gotest $$s; done; \
	leg "chaos-short: MySQL 9.7 then the host's short tests, beside them MariaDB 11.8 then Galera"; c=$$(mktemp -d); cpids=""; \
	for lane in "mysql-9.7 host" "mariadb-11.8 galera"; do ( for s in $$lane; do \
		( set +e; case $$s in \
			(host) chaos "" 1 -skip '^TestChaos(Galera)?$$';; \
			(galera) chaos "" 1 -run '^TestChaosGalera$$';; \
			(*) chaos $$s 1;; \
		  esac >$$c/$$s 2>&1; echo $$? >$$c/$$s.rc; \
		  echo "== ci: $$s: chaos-short ended: $$(( $$(date +%s) - t0 )) s since start" >>$$c/$$s ); \
	done ) & cpids="$$cpids $$!"; done; wait $$cpids; crc=0; \
	for s in host galera mysql-9.7 mariadb-11.8; do cat $$c/$$s; [ "$$(cat $$c/$$s.rc)" = 0 ] || crc=1; done; rm -rf $$c; \
	[ $$crc = 0 ] || { echo "== ci: chaos-short failed"; exit 1; }; \
	leg "waiting for make test-checks"; wait $$kpid; cat $$kdir/log; rc=$$(cat $$kdir/rc); rm -rf $$kdir; \
	[ "$$rc" = 0 ] || { echo "== ci: make test-checks failed (exit $$rc)"; exit 1; }; \
	leg "waiting for make model"; wait $$mpid; cat $$mdir/log; rc=$$(cat $$mdir/rc); rm -rf $$mdir; \
	[ "$$rc" = 0 ] || { echo "== ci: make model failed (exit $$rc)"; exit 1; }; \
	leg "done"

# model checks the protocol's Promela models (model/sqlelect.pml, the table
# backend, and model/lock.pml, the lock backend) with SPIN, two at a time,
# exhaustively (no bitstate): every configuration must hold (0 errors) and
# every mutant must give a counterexample (model/check.sh; see
# model/README.md and RELIABILITY.md, "The model"). model-deps installs spin
# and gcc (to compile SPIN's verifier) with apt-get when missing and root.
model: model-deps
	@sh model/check.sh

model-deps:
	@need=""; \
	command -v spin >/dev/null 2>&1 || need="$$need spin"; \
	command -v gcc >/dev/null 2>&1 || need="$$need gcc libc6-dev"; \
	if [ -z "$$need" ]; then exit 0; fi; \
	if [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then \
		echo "model-deps: not installed:$$need (Debian/Ubuntu: sudo apt-get install -y$$need)" >&2; exit 1; \
	fi; \
	echo "model-deps: apt-get install$$need"; \
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$need || \
	{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$need; }

test-short:
	@set -e; for m in $(MODULES); do (cd $$m && $(GO) test -short ./...); done

demo:
	@$(MAKE) --no-print-directory deps DEMO=1
	$(GO) run ./examples/demo

build:
	$(GO) build -buildvcs=auto -o bin/sqlelect ./cmd/sqlelect

CHAOS_ROUNDS ?= 8
# CHAOS_FAULTS, when set, injects only the fault kinds it names, e.g.
# CHAOS_FAULTS=op_assume_resign,net_halfopen (see RELIABILITY.md).
CHAOS_FAULTS ?=

# chaos runs the fault-injection suite (integration/chaos) on both backends,
# the Batcher and a 3-node Galera cluster, CHAOS_ROUNDS rounds per fault, and
# prints the summary table. chaos-short is the version CI runs on every
# change (two rounds of the quick faults, one of the long ones).
chaos: deps
	cd integration && TMPDIR=$(TEST_TMPDIR) SQLELECT_CHAOS_ROUNDS=$(CHAOS_ROUNDS) SQLELECT_CHAOS_FAULTS=$(CHAOS_FAULTS) $(GO) test -count=1 -v -timeout 60m -run Chaos ./chaos/

chaos-short: deps
	cd integration && TMPDIR=$(TEST_TMPDIR) SQLELECT_CHAOS_FAULTS=$(CHAOS_FAULTS) $(GO) test -count=1 -v -timeout 15m -run Chaos ./chaos/

# Flags for the harness, e.g. BENCH_FLAGS='-trials 10 -scenarios failover,handover'.
BENCH_FLAGS ?=
# The server the harness starts (SQLELECT_TEST_SERVER): mariadb-10.11 (the
# host's, default), mysql-9.7 or mariadb-11.8, e.g. make bench BENCH_SERVER=mysql-9.7.
BENCH_SERVER ?= $(SQLELECT_TEST_SERVER)

# bench runs the Go benchmarks (IsLeader, the clock read, the Batcher) and
# then the harness in integration/bench (failover, handover, database cost,
# the seed recipe side by side, scale), which prints a summary table and
# writes integration/bench/results/ (summary.md, trials.csv and, with
# gnuplot, distributions.png). About 45 minutes with the defaults; see
# BENCHMARKS.md.
bench: deps
	@command -v gnuplot >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "bench: apt-get install gnuplot-nox (for the plot)"; \
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gnuplot-nox >/dev/null || \
			{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gnuplot-nox >/dev/null; } || \
			echo "bench: could not install gnuplot; no plot"; \
		else echo "bench: gnuplot not found; no plot (Debian: apt-get install gnuplot-nox)"; fi; }
	$(GO) test -run '^$$' -bench . -benchmem ./election/
	cd integration && SQLELECT_TEST_SERVER=$(BENCH_SERVER) $(GO) run ./bench $(BENCH_FLAGS)

# Flags for the peers' harness, e.g. PEERS_FLAGS='-peers etcd,zookeeper -trials 5'.
PEERS_FLAGS ?=
# What bench-peers needs from Debian besides the test server: etcd
# (etcd-server), ZooKeeper (zookeeper: the server's jar, run as a throwaway
# process, not the zookeeperd service), a Java runtime for it, and gnuplot
# for the plot.
PEERS_PKGS := etcd-server zookeeper default-jre-headless gnuplot-nox

# bench-peers runs integration/bench/peers: sqlelect's two backends beside
# etcd's election, ZooKeeper's leader recipe, client-go's leaderelection,
# go-mysql-lock's scheme and the seed recipe, 3 candidate processes each,
# lease 2 s (first election, failover, handover, transfer to a named
# candidate (sqlelect only), a stalled leader, cost).
# It writes integration/bench/results/peers/ (summary.md, trials.csv,
# results.json, distributions.png). About 25 minutes with the defaults (an
# estimate from the 38 minutes of a run with 30 trials of everything); see
# BENCHMARKS.md. Its Go dependencies (etcd's client, go-zookeeper,
# client-go) live in that directory's own module.
bench-peers: deps
	@need=""; \
	command -v etcd >/dev/null 2>&1 || need="$$need etcd-server"; \
	[ -e /usr/share/java/zookeeper.jar ] || need="$$need zookeeper"; \
	command -v java >/dev/null 2>&1 || need="$$need default-jre-headless"; \
	command -v gnuplot >/dev/null 2>&1 || need="$$need gnuplot-nox"; \
	if [ -n "$$need" ]; then \
		if [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then \
			echo "bench-peers: not installed:$$need (Debian: apt-get install$$need)" >&2; exit 1; \
		fi; \
		echo "bench-peers: apt-get install$$need"; \
		policy=""; \
		if [ ! -e /usr/sbin/policy-rc.d ]; then \
			printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && policy=1; \
		fi; \
		rc=0; \
		{ DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$need >/dev/null || \
		  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$need >/dev/null; }; } || rc=$$?; \
		if [ -n "$$policy" ]; then rm -f /usr/sbin/policy-rc.d; fi; \
		[ $$rc = 0 ] || exit $$rc; \
	fi
	cd integration/bench/peers && SQLELECT_TEST_SERVER=$(BENCH_SERVER) $(GO) run . $(PEERS_FLAGS)
