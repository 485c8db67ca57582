/*
 * sqlelect.pml: the table backend's protocol (docs/algorithm.md), as a
 * Promela model for SPIN. See model/README.md for what is modelled, the
 * heartbeat's decision table, the configurations and the mutants; `make
 * model` checks them all.
 *
 * Time is discrete. rt is real time, in ticks. The database clock (SYSDATE(6)) is
 * rt - back (back > 0 after the clock was stepped back). Candidate i's clock
 * is rt + off[i] - K with off[i] in [0, K]: it drifts against the database
 * clock by at most K ticks and against another candidate's by at most 2K,
 * which with 2K = L - D (below) is the doc's rate bound (L-D)/L over a
 * lease.
 *
 * One process interleaves every actor's steps; each step is atomic (each SQL
 * statement executes atomically under the row lock), and a statement's
 * sending, execution, reply and processing are separate steps, so a reply
 * can be lost, arrive after the candidate's deadline, or be processed late
 * (a stalled goroutine), committed or not. Any actor can be delayed
 * arbitrarily (SIGSTOP, GC, a slow network): nothing forces a step to
 * happen before time advances.
 */

#ifndef N
#define N 3            /* candidates 1..N */
#endif
#ifndef H
#define H 10           /* horizon: real time stops at H */
#endif
#ifndef L
#define L 4            /* LeaseDuration (ticks) */
#endif
#ifndef D
#define D 2            /* RenewDeadline */
#endif
#ifndef K
#define K 1            /* clock drift bound, ticks (L - D >= 2K keeps the doc's margin) */
#endif
#ifndef LD
#define LD L           /* LockDelay: one lease, the default */
#endif
#define QT 2           /* QueryTimeout */
#define RI 1           /* RetryInterval (sit-out: 2 x RI) */
#define W (2*RI)       /* TransferWindow */
#define TR (L-1)       /* the recipe's timeout: adopted rows' lease is TR + 1 */
#define TS 8           /* term units per tick (the clock in microseconds) */

/* Budgets of faults and actions; a configuration sets them with -D. */
#ifndef OPS
#define OPS 1          /* operator statements: REPLACE, DELETE, Assume, requests */
#endif
#ifndef RES
#define RES 1          /* Resign, Run's end, an unhealthy check, Transfer */
#endif
#ifndef CRASH
#define CRASH 0        /* crashes (the process dies; it may restart) */
#endif
#ifndef FEN
#define FEN 1          /* fenced transactions */
#endif
#ifndef RCP
#define RCP 0          /* recipe node statements */
#endif
#ifndef PREF
#define PREF 0         /* followers' preference requests */
#endif
#ifndef NET
#define NET 1          /* network faults: statements split into steps, replies lost or late */
#endif
#ifndef DRIFTS
#define DRIFTS 2       /* changes of a clock's offset (its rate against the others) */
#endif
#ifndef CBACK
#define CBACK 0        /* steps back of the database clock (one tick each) */
#endif
#ifndef TAMP
#define TAMP 0         /* operators' writes to the floor table (TRUNCATE, DELETE of floor rows) */
#endif

/* -DLIVENESS: faults (operators, crashes, network faults, resignations,
 * drift, recipe statements, requests) happen only before real time TF;
 * from the last one on, a candidate's due step and the server's execution
 * of a sent statement happen before time advances (urgency), and a leader
 * must exist B ticks after the last fault. */
#ifdef LIVENESS
#ifndef TF
#define TF 2
#endif
#ifndef B
#define B (L + 1)      /* LockDelay (= LeaseDuration) + RetryInterval */
#endif
#define FAULTS (rt < TF)
#define FAULT lastf = rt
#else
#define FAULTS 1
#define FAULT skip
#endif

#define NONE 0
#define RID (N+1)      /* the recipe node's service_id */
#define ANY 15         /* transfer_to = '' (a step-down request) */

/* acquired */
#define A_INSERT 1
#define A_EXPIRED 2
#define A_RELEASED 3
#define A_TRANSFERRED 4
#define A_CLAIMED 5
#define A_OPERATOR 6
#define A_FIRST 7      /* variant (b): a row inserted for a name that never existed */

/* statement kinds */
#define K_HB 1         /* the heartbeat */
#define K_REL 2        /* release: released = 1 */
#define K_HOFF 3       /* hand-off: the row expires :lease from now (an unserved lock delay) */
#define K_HOVER 4      /* hand-over: released = 1, transfer_to = :to, lease = window */

/* slot states: a candidate's statement in flight */
#define S_FREE 0
#define S_SENT 1       /* sent, not executed */
#define S_DONE 2       /* executed, reply on its way */
#define S_GOT 3        /* reply received in time, not processed yet */
#define S_ABANDONED 4  /* the candidate gave up (deadline): may still execute */

/* PICK(v): v is any candidate, 1..N (N = 3) */
#define PICK(v) if :: v = 1 :: v = 2 :: v = 3 fi
/* TARGET(v): whom an operator names: candidate 1 (the leader when the
 * model starts) or 2; 3 is like 2 (same initial state, clocks chosen alike) */
#define TARGET(v) if :: v = 1 :: v = 2 fi

#define MAX(a, b) ((a) > (b) -> (a) : (b))
#define MIN(a, b) ((a) < (b) -> (a) : (b))

byte rt;                /* real time */
byte back;              /* how far the database clock was stepped back */
#define DBNOW (rt - back)
#define TERMNOW (DBNOW * TS + 1)

/* The row (service_election). */
bit rx;                 /* exists */
byte rsid;              /* service_id: 1..N, RID */
byte rterm;
byte rlsa;              /* last_seen_active (database clock) */
byte rlease;            /* lease_ms */
bit rrel;               /* released */
byte racq;              /* acquired */
byte rxfer;             /* transfer_to: NONE (NULL), ANY (''), 1..N */
#define EXPIRED (rlsa + rlease <= DBNOW)
#define LIVE (rx && !rrel && !EXPIRED)

/* Variant (a)/(b): the per-election floor row (service_election_floor). */
byte floor;             /* term_floor: no term at or below it is issued again */
bit existed;            /* the floor row exists: the election existed */

/* Issue 31 item 1 (-DMARKER): the floor table's marker row (anchor ''):
 * the number of floor rows the library created, and since when it exists
 * (the database clock). The fast path (first) needs a complete floor
 * history: the marker, its count matching the floor rows, and since +
 * LockDelay passed. -DUPGRADE: the floor table does not exist yet (mig =
 * 0) and candidate 1 runs a version without the floor (OLD) throughout. */
#ifdef MARKER
bit mk;                 /* the marker exists */
bit mkok;               /* its checksum matches: no floor row deleted since */
bit mky;                /* young: since + LockDelay is still ahead */
byte mks;               /* since, while young (0 after) */
#endif
#ifdef REACH
bit reb;                /* the marker was rebuilt */
#endif
#ifdef UPGRADE
bit mig;                /* the floor table exists (migrated) */
#define OLD(c) (c == 1)
#else
#define mig 1
#define OLD(c) 0
#endif

/* A fenced transaction holding the row's share lock. */
byte fh;                /* candidate, 0 for none */
byte ft;                /* its term */

/* Candidates. Times are on the candidate's own clock. */
bit up[N+1];
byte off[N+1];
#define CLK(i) (rt + off[i] - K)
byte hold[N+1];         /* term held, 0 for none */
byte hd[N+1];           /* holdDeadline */
byte la[N+1];           /* leadAt */
bit leading[N+1];
byte lu[N+1];           /* leadUntil, 0 when cleared */
bit cancelled[N+1];     /* the elected context of the current leadership is cancelled */
byte lterm[N+1];        /* the term of the current leadership (c.term) */
byte so[N+1];           /* sitOutUntil */
/* the statement in flight */
byte sk[N+1], ss[N+1], sh[N+1], sa[N+1], sst[N+1], sdl[N+1], sn[N+1], srt[N+1], sx[N+1];
bit fin[N+1];
bit busy[N+1];          /* sent a statement this tick: a statement takes time */           /* a fenced transaction of this candidate is open */

byte ops, res, crashes, fens, rcps, prefs, cbacks, nets, drifts;
#if TAMP > 0
byte tamps;
#endif
byte lastf;             /* LIVENESS: when the last fault happened */
byte maxLed;            /* the highest term any candidate led with */
byte lastLed;           /* the candidate that led with it */

#define BEL(i) (up[i] && lu[i] != 0 && CLK(i) < lu[i])

/* temporaries of one atomic step, zeroed at its end (CLR) so that they
 * do not tell states apart */
byte i, j, t, n, nt;
bit R, X, T, chk;
byte bHeld, bTerm, bIns, bDelay, bReq, bTo, bRenewed;
byte hv, stv, sxv;
bit fast;    /* the processed statement's hold, send time, execution time */

/* ---- the database ---- */

/* The marker rebuilt (a floor transaction found it missing or its count
 * wrong): a floor row for every election row, since = now. */
inline rebuild() {
	if
	:: rx -> existed = 1; floor = MAX(floor, rterm)
	:: else -> skip
	fi;
	mk = 1; mkok = 1; mky = 1; mks = DBNOW;
#ifdef REACH
	reb = 1
#else
	skip
#endif
}

/* the insert's acquired: first (no lock delay) or insert; with MARKER the
 * transaction that finds no floor row reads the marker, rebuilding it if
 * need be */
inline firstOf() {
	racq = A_INSERT;
#ifdef MARKER
	if
	:: existed -> skip
	:: !existed && !(mk && mkok) -> rebuild()
#if defined(M_MARKER_NOSINCE)
	/* MUTANT: a marker just created (migration, rebuild) allows the fast path */
	:: !existed && mk && mkok -> racq = A_FIRST
#else
	:: !existed && mk && mkok && mky -> skip
	:: !existed && mk && mkok && !mky -> racq = A_FIRST
#endif
	fi
#else
	/* today's rule: no floor row, a first election */
	if :: !existed -> racq = A_FIRST :: else -> skip fi
#endif
}

/* a library statement assigns term nt: with the floor (variant a), above
 * it; creating the floor row counts it in the marker */
inline issue() {
#ifdef FLOOR
	nt = MAX(nt, floor + 1);
	floor = nt;
#endif
#ifdef MARKER
	if
	:: !existed && !(mk && mkok) -> rebuild()
	:: else -> skip
	fi;
#endif
	existed = 1
}

/* The heartbeat of candidate i holding h (0 for none), executed atomically. */
inline hbExec(i, h) {
	if
	:: !rx ->
		nt = TERMNOW;
		racq = A_INSERT;
		if
		:: OLD(i) -> skip        /* an old version: no floor, never first */
		:: else ->
#ifdef FIRST
			firstOf();
#ifdef REACH
			/* not a property: the fast path comes back after a rebuild */
			assert(!(racq == A_FIRST && reb));
#endif
#endif
			issue()
		fi;
		rx = 1; rsid = i; rlsa = DBNOW; rterm = nt; rlease = L; rrel = 0; rxfer = NONE;
		sn[i] = 1
	:: else ->
		R = (rsid == i && rterm == h && !rrel && (rxfer == NONE || rxfer == i));
		X = (rrel && rxfer != NONE && rxfer != ANY && rxfer != i && !EXPIRED);
		T = (!R && !X && (rrel || EXPIRED || (rsid == i && rxfer == NONE)));
		if
		:: T ->
			if
			:: rrel && rxfer == i -> racq = A_TRANSFERRED
			:: rrel && rxfer != i -> racq = A_RELEASED
			:: !rrel && EXPIRED -> racq = A_EXPIRED
			:: else -> racq = A_CLAIMED
			fi;
			nt = MAX(rterm + 1, TERMNOW);
			if :: OLD(i) -> skip :: else -> issue() fi;
			assert(nt > rterm);      /* terms never decrease while the row exists */
			rterm = nt
		:: else -> skip
		fi;
		if
		:: R || T -> rxfer = NONE; rsid = i; rrel = 0; rlease = L; rlsa = DBNOW; sn[i] = 2
		:: else -> sn[i] = 0
		fi
	fi;
	srt[i] = rterm;
#ifdef M_DBCLOCK
	sx[i] = DBNOW
#else
	skip
#endif
}

/* Candidate i's statement in its slot executes. */
inline execSlot(i) {
	if
	:: sk[i] == K_HB -> hbExec(i, sh[i])
	:: sk[i] == K_REL ->
		if
		:: rx && rsid == i && rterm == sh[i] && !rrel -> rrel = 1; rxfer = NONE
		:: else -> skip
		fi
	:: sk[i] == K_HOFF ->
		if
		:: rx && rsid == i && rterm == sh[i] && !rrel -> rlsa = DBNOW; rlease = sa[i]; rxfer = NONE
		:: else -> skip
		fi
	:: sk[i] == K_HOVER ->
		if
		:: rx && rsid == i && rterm == sh[i] && !rrel ->
			rrel = 1; rxfer = (sa[i] == ANY -> NONE : sa[i]); rlsa = DBNOW; rlease = W
		:: else -> skip
		fi
	fi
}

/* ---- the candidate (election/campaign.go, lead.go) ---- */

/* the slot is free again: forget the statement */
inline FREE(c) {
	ss[c] = S_FREE; sk[c] = 0; sh[c] = 0; sa[c] = 0; sst[c] = 0; sdl[c] = 0; sn[c] = 0; srt[c] = 0; sx[c] = 0
}

/* Sending a statement: usually it runs at once and its reply is processed
 * in the same step (fast); a network fault (budget NET) splits sending,
 * execution, reply and processing into steps that the other actors
 * interleave with, and lets the reply be lost or come too late. */
inline sendStmt(i, kind, h, a, dl) {
	busy[i] = 1;
	if
	:: fast = 1
	:: FAULTS && nets < NET -> nets++; FAULT; fast = 0
	fi;
	sk[i] = kind; sh[i] = h; sa[i] = a; sst[i] = CLK(i); sdl[i] = dl; ss[i] = S_SENT
}

inline demote(i) {
	if
	:: leading[i] -> leading[i] = 0; lu[i] = 0; lterm[i] = 0; cancelled[i] = 1
	:: else -> skip
	fi
}

inline maybeLead(i) {
	if
	:: !leading[i] && hold[i] != 0 && CLK(i) >= la[i] && CLK(i) < hd[i] ->
		leading[i] = 1; lu[i] = hd[i]; lterm[i] = hold[i]; cancelled[i] = 0;
#ifdef STRICT
		/* A leader's term is above every earlier leader's: an external
		 * resource that keeps the highest term it saw fences a deposed
		 * leader (the sequencer pattern). */
		assert(hold[i] > maxLed || hold[i] == maxLed && lastLed == i);
#endif
		if
		:: hold[i] > maxLed -> maxLed = hold[i]; lastLed = i
		:: else -> skip
		fi
	:: else -> skip
	fi
}

/* acquired: a hold of term bTerm that began with the statement sent at sst */
inline acquired(i) {
	hold[i] = bTerm;
#ifdef M_DBCLOCK
	/* MUTANT: the deadline is the row's expiry by the database clock
	 * (last_seen_active + lease), read against the candidate's clock. */
	hd[i] = sxv + L;
#else
	hd[i] = stv + D;
#endif
	la[i] = MAX(la[i], CLK(i));
	if
	:: bDelay -> la[i] = MAX(la[i], CLK(i) + LD)
	:: else -> skip
	fi;
	maybeLead(i)
}

/* releaseHold: give the row up, handing on an unserved lock delay */
inline releaseHold(i) {
	if
	:: hold[i] == 0 -> skip
	:: hold[i] != 0 && CLK(i) >= hd[i] -> hold[i] = 0; hd[i] = 0    /* not ours to give: drop */
	:: hold[i] != 0 && CLK(i) < hd[i] ->
#ifdef M_RELEASE_FREE
		/* MUTANT: the row is marked released even when the hold had not served its delay */
		sendStmt(i, K_REL, hold[i], 0, CLK(i) + QT);
#else
		if
		:: la[i] > CLK(i) -> sendStmt(i, K_HOFF, hold[i], la[i] - CLK(i), CLK(i) + QT)
		:: else -> sendStmt(i, K_REL, hold[i], 0, CLK(i) + QT)
		fi;
#endif
		hold[i] = 0; hd[i] = 0
	fi
}

inline sitOut(i) {
	so[i] = MAX(CLK(i), la[i]) + 2 * RI
}

/* standDown with release */
inline standDownRelease(i) {
	if
	:: hold[i] != 0 -> demote(i); releaseHold(i); hold[i] = 0; hd[i] = 0; cancelled[i] = 0
	:: else -> skip
	fi
}

inline standDown(i) {
	demote(i); hold[i] = 0; hd[i] = 0; cancelled[i] = 0
}

/* handOver (transfer.go): to bTo */
inline handOver(i) {
	if
	:: hold[i] == 0 -> skip
	:: hold[i] != 0 && bTo == i -> skip
	:: hold[i] != 0 && bTo != i && CLK(i) < la[i] ->
		standDownRelease(i); sitOut(i)
	:: hold[i] != 0 && bTo != i && CLK(i) >= la[i] ->
		demote(i);
		if
		:: CLK(i) < hd[i] -> sendStmt(i, K_HOVER, hold[i], bTo, CLK(i) + QT)
		:: else -> skip
		fi;
		hold[i] = 0; hd[i] = 0; cancelled[i] = 0;
		sitOut(i);
		if
		:: bTo != ANY -> so[i] = so[i] + W
		:: else -> skip
		fi
	fi
}

/* The heartbeat's reply, read as heartbeatOnce does (the check SELECT reads
 * the row now): sets bHeld, bTerm, bIns, bDelay, bReq, bTo, bRenewed. */
inline decide(i) {
	n = sn[i]; t = srt[i];
	bHeld = 0; bTerm = 0; bIns = 0; bDelay = 0; bReq = 0; bTo = 0; bRenewed = 0;
	chk = (rx && rsid == i && !rrel);
	if
	:: n == 0 && sh[i] == 0 -> skip
	:: n == 2 && sh[i] != 0 && t == sh[i] -> bHeld = 1; bTerm = sh[i]; bRenewed = 1
	:: else ->
		if
		:: !chk -> skip
		:: chk && rterm != t -> skip                 /* changed again since */
		:: chk && rterm == t && n < 2 && sh[i] != 0 && rterm == sh[i] && rxfer != NONE ->
			bReq = 1; bTo = rxfer
		:: chk && rterm == t && !(n < 2 && sh[i] != 0 && rterm == sh[i] && rxfer != NONE) ->
			if
			:: n == 0 -> skip
			:: n == 2 && sh[i] != 0 && rterm == sh[i] -> bHeld = 1; bTerm = sh[i]; bRenewed = 1
			:: n == 1 && (racq == A_INSERT || racq == A_FIRST) ->
				bHeld = 1; bTerm = rterm; bIns = 1;
#if defined(M_INSERT_NODELAY) || defined(NAIVE_FIRST)
				/* MUTANT: a new row is led at once, as if the name never existed */
				bDelay = 0
#else
				bDelay = (racq == A_INSERT)
#endif
			:: n == 2 && (racq == A_EXPIRED || racq == A_RELEASED || racq == A_TRANSFERRED) ->
				bHeld = 1; bTerm = rterm
			:: n == 2 && !(sh[i] != 0 && rterm == sh[i]) &&
			   !(racq == A_EXPIRED || racq == A_RELEASED || racq == A_TRANSFERRED) ->
				bHeld = 1; bTerm = rterm;
#ifdef M_CLAIM_NODELAY
				bDelay = 0
#else
				bDelay = 1
#endif
			:: n == 1 && !(racq == A_INSERT || racq == A_FIRST) -> skip
			fi
		fi
	fi
}

/* Process the heartbeat's reply (followTick / holdTick). */
inline processHB(i) {
	decide(i);
	hv = sh[i]; stv = sst[i]; sxv = sx[i];
	FREE(i);
	if
	:: hv == 0 ->                 /* followTick */
		if
		:: bHeld -> acquired(i)
		:: else -> skip
		fi
	:: hv != 0 && hold[i] != hv -> skip   /* (cannot happen: one statement at a time) */
	:: hv != 0 && hold[i] == hv ->   /* holdTick */
		if
		:: bReq -> handOver(i)
		:: !bReq && bRenewed ->
#ifdef M_DBCLOCK
			hd[i] = sxv + L;
#else
			hd[i] = stv + D;
#endif
			if
			:: leading[i] ->
				/* extendLead */
#ifdef M_REVIVE
				/* MUTANT: a renewal processed after the deadline extends the leadership */
				lu[i] = hd[i]
#else
				if
				:: lu[i] == 0 || CLK(i) >= lu[i] -> demote(i)   /* over: lead anew */
				:: else -> lu[i] = hd[i]
				fi
#endif
			:: else -> skip
			fi;
			maybeLead(i)
		:: !bReq && !bRenewed && bHeld && bIns ->
			/* the row was deleted: let go of the row this renewal recreated */
			t = hd[i];
			standDown(i);
			hold[i] = bTerm; hd[i] = t;
			releaseHold(i);
			sitOut(i)
		:: !bReq && !bRenewed && bHeld && !bIns ->
			standDown(i);
			acquired(i)
		:: !bReq && !bHeld -> standDown(i)       /* deposed */
		fi
	fi
}

inline crash(i) {
	up[i] = 0; hold[i] = 0; leading[i] = 0; lu[i] = 0; cancelled[i] = 0; lterm[i] = 0;
	hd[i] = 0; la[i] = 0; so[i] = 0;
	if
	:: ss[i] == S_SENT -> ss[i] = S_ABANDONED   /* the server may still run it */
	:: ss[i] == S_DONE || ss[i] == S_GOT -> FREE(i)
	:: else -> skip
	fi
}

/* ---- operators and recipe nodes ---- */

inline plainReplace(who) {
	/* REPLACE INTO service_election (anchor, service_id, last_seen_active)
	 * VALUES (…, who, NOW()): the other columns take their defaults. */
	nt = TERMNOW;
	rx = 1; rsid = who; rlsa = DBNOW; rterm = nt; rlease = L; rrel = 0; racq = A_OPERATOR; rxfer = NONE
}

inline assume(who) {
	/* election.Assume: REPLACE … SELECT from the row, a term above its term */
	nt = MAX(rterm + 1, TERMNOW);
	issue();
	assert(nt > rterm);
	rsid = who; rlsa = DBNOW; rterm = nt; rrel = 0; racq = A_OPERATOR; rxfer = NONE
}

inline recipe() {
	/* the seed's statement, by recipe node RID (left-to-right assignment) */
	if
	:: !rx -> nt = TERMNOW; rx = 1; rsid = RID; rlsa = DBNOW; rterm = nt; rlease = L; rrel = 0;
		racq = A_OPERATOR; rxfer = NONE
	:: else ->
		if
		:: rlsa + TR < DBNOW -> rsid = RID
		:: else -> skip
		fi;
		if
		:: rsid == RID -> rlsa = DBNOW
		:: else -> skip
		fi
	fi
}

#define WRITABLE (fh == 0)

/* The candidates' and the server's steps, as guards (urgency needs them). */
/* followTick: read the row; send the heartbeat unless someone else holds
 * a live lease, a live row naming this candidate carries a request, or the
 * row is reserved for another. With -DBLIND, send it whatever the row says:
 * a follower woken by the handover hint sends it before its read (table.go's
 * follow), and any follower may here, a superset. */
#ifdef BLIND
#define G_FOLLOW(c) ((mig || OLD(c)) && up[c] && ss[c] == S_FREE && !busy[c] && hold[c] == 0 && CLK(c) >= so[c])
#else
#define G_FOLLOW(c) ((mig || OLD(c)) && up[c] && ss[c] == S_FREE && !busy[c] && hold[c] == 0 && CLK(c) >= so[c] && \
	!(LIVE && (rsid != c || rxfer != NONE)) && \
	!(rx && rrel && rxfer != NONE && rxfer != c && !EXPIRED))
#endif
#define G_LOST(c) (up[c] && ss[c] == S_FREE && !busy[c] && hold[c] != 0 && CLK(c) >= hd[c])
#define G_RENEW(c) (up[c] && ss[c] == S_FREE && !busy[c] && hold[c] != 0 && CLK(c) < hd[c])
#define G_GIVEUP(c) (up[c] && (ss[c] == S_SENT || ss[c] == S_DONE) && CLK(c) >= sdl[c])
#define G_REPLY(c) (up[c] && ss[c] == S_DONE && CLK(c) < sdl[c])
#define G_PROCESS(c) (up[c] && ss[c] == S_GOT)
/* a statement the candidate gave up on runs late only while faults happen
 * (the server bounds its waits by QueryTimeout; LIVENESS) */
#define G_EXEC(c) ((ss[c] == S_SENT || ss[c] == S_ABANDONED && FAULTS) && WRITABLE)
#define DUE(c) (G_FOLLOW(c) || G_LOST(c) || G_RENEW(c) || G_GIVEUP(c) || G_REPLY(c) || G_PROCESS(c) || \
	ss[c] == S_SENT && WRITABLE || ss[c] == S_ABANDONED)
#ifdef LIVENESS
#define URGENT_DONE (FAULTS || !DUE(1) && !DUE(2) && !DUE(3))
/* after faults stop, a leader within the bound: at the end of tick lastf + B
 * and of every tick after it (checked before time advances) */
#define LEADS assert(rt < lastf + B || BEL(1) || BEL(2) || BEL(3))
/* a stall (time advancing past a due step, before TF) is a fault too */
#define STALL if :: DUE(1) || DUE(2) || DUE(3) -> FAULT :: else -> skip fi
#else
#define STALL skip
#define URGENT_DONE 1
#define LEADS skip
#endif

/* a clock's initial offset, anywhere in [0, K] */
inline OFFSET(c) {
	if
	:: off[c] = 0
	:: K > 0 -> off[c] = K
	fi
}

inline WATCHDOG(c) {
	if
	:: lu[c] != 0 && CLK(c) >= lu[c] -> lu[c] = 0; cancelled[c] = 1
	:: else -> skip
	fi;
	/* instants that have passed are all alike: forget them */
	if
	:: so[c] != 0 && so[c] <= CLK(c) -> so[c] = 0
	:: else -> skip
	fi;
	if
	:: la[c] != 0 && la[c] <= CLK(c) -> la[c] = 0
	:: else -> skip
	fi
}

/* Safety, asserted after every step: never two candidates that believe
 * they lead (IsLeader), and IsLeader never true while the elected context
 * of that leadership is cancelled (a leadership that ended is never
 * revived). N = 3. */
#define TWO (BEL(1) && BEL(2) || BEL(1) && BEL(3) || BEL(2) && BEL(3))
#define REVIVED (BEL(1) && cancelled[1] || BEL(2) && cancelled[2] || BEL(3) && cancelled[3])
#define SAFE assert(!TWO); assert(!REVIVED); \
	i = 0; j = 0; t = 0; n = 0; nt = 0; R = 0; X = 0; T = 0; chk = 0; \
	bHeld = 0; bTerm = 0; bIns = 0; bDelay = 0; bReq = 0; bTo = 0; bRenewed = 0; \
	hv = 0; stv = 0; sxv = 0; fast = 0

init {
	atomic {
		up[1] = 1; up[2] = 1; up[3] = 1;
		OFFSET(1); OFFSET(2); OFFSET(3);
		rt = K;     /* so that every clock starts at 0 or more */
#ifndef INIT_EMPTY
		/* candidate 1 leads, elected before the model starts */
		rx = 1; rsid = 1; rterm = TERMNOW; rlsa = DBNOW; rlease = L; racq = A_EXPIRED; existed = 1;
		floor = rterm;
		hold[1] = rterm; hd[1] = CLK(1) + D; leading[1] = 1; lu[1] = hd[1]; lterm[1] = rterm;
		maxLed = rterm; lastLed = 1;
#endif
#ifdef UPGRADE
		/* elected by a version without the floor: no floor table yet */
		existed = 0; floor = 0; mig = 0
#elif defined(MARKER)
		mk = 1; mkok = 1            /* an intact floor table, its marker old */
#else
		skip
#endif
	}
	do
	/* ---- time ---- */
	:: atomic { rt < H && URGENT_DONE -> STALL; LEADS; rt++;
		/* the watchdogs: a leadership whose deadline passed ends */
		WATCHDOG(1); WATCHDOG(2); WATCHDOG(3);
		busy[1] = 0; busy[2] = 0; busy[3] = 0;
#ifdef MARKER
		if
		:: mky && mks + LD <= DBNOW -> mky = 0; mks = 0
		:: else -> skip
		fi;
#endif
		SAFE }
	:: atomic { FAULTS && cbacks < CBACK && back < DBNOW -> cbacks++; FAULT; back++; SAFE }
	/* ---- candidates ---- */
	:: atomic {
		PICK(i);
		if
		/* followTick: read the row; send the heartbeat unless someone
		 * else holds a live lease, a live row naming this candidate
		 * carries a request, or the row is reserved for another */
		:: G_FOLLOW(i) ->
			sendStmt(i, K_HB, 0, 0, CLK(i) + QT)
		/* holdTick: lease lost */
		:: G_LOST(i) -> standDown(i)
		/* holdTick: renew */
		:: G_RENEW(i) ->
			t = CLK(i) + MIN(QT, hd[i] - CLK(i));
			sendStmt(i, K_HB, hold[i], 0, t)
		/* Resign, the end of Run's context, or a failed health check */
		:: up[i] && ss[i] == S_FREE && !busy[i] && hold[i] != 0 && FAULTS && res < RES ->
			res++; FAULT; standDownRelease(i); sitOut(i)
		/* Transfer(to) by the leader */
		:: up[i] && ss[i] == S_FREE && !busy[i] && leading[i] && BEL(i) && FAULTS && res < RES ->
			res++; FAULT; PICK(j);
			if
			:: j != i -> bTo = j; handOver(i)
			:: else -> skip
			fi
		/* a preference request (prefer.go, preferSQL): a higher-priority follower asks */
		:: up[i] && ss[i] == S_FREE && !busy[i] && hold[i] == 0 && FAULTS && prefs < PREF && WRITABLE &&
		   LIVE && rsid != i && rxfer == NONE && racq != A_OPERATOR ->
			prefs++; FAULT; rxfer = i
		/* the statement's deadline passed (reply lost or late) */
		:: G_GIVEUP(i) ->
			if
			:: ss[i] == S_SENT -> ss[i] = S_ABANDONED
			:: else -> FREE(i)
			fi
		/* the reply arrives in time */
		:: G_REPLY(i) -> ss[i] = S_GOT
		/* the reply is processed (perhaps late: a stalled goroutine) */
		:: G_PROCESS(i) ->
			if
			:: sk[i] == K_HB -> processHB(i)
			:: else -> FREE(i)
			fi
		/* crash and restart */
		:: up[i] && FAULTS && crashes < CRASH -> crashes++; FAULT; crash(i)
		:: !up[i] && FAULTS -> FAULT; up[i] = 1      /* restart (counts as a fault: a restarted candidate claims its own row with a lock delay) */
		/* a clock runs faster or slower: its offset moves by a tick, within [0, K] */
		:: FAULTS && drifts < DRIFTS && off[i] < K -> drifts++; FAULT; off[i]++
		:: FAULTS && drifts < DRIFTS && off[i] > 0 -> drifts++; FAULT; off[i]--
		/* Fenced: begin (the check takes the row's share lock) */
		:: up[i] && FAULTS && fens < FEN && !fin[i] && BEL(i) && fh == 0 ->
			fens++;
			if
			:: LIVE && rsid == i && rterm == lterm[i] ->
				fin[i] = 1; ft = lterm[i];
#ifndef M_FENCE_NOLOCK
				fh = i
#endif
			:: else -> skip      /* ErrNotLeader */
			fi
		/* Fenced: commit (also after the candidate crashed: the server commits) */
		:: fin[i] ->
			assert(rx && rterm == ft);   /* a fenced write commits only for the row's term */
			fin[i] = 0; fh = 0
		/* Fenced: rollback (error, context ended, session killed when idle) */
		:: fin[i] -> fin[i] = 0; fh = 0
		fi;
		/* a fast statement runs now, and its reply is processed now */
		do
		:: fast && ss[i] == S_SENT && WRITABLE ->
			fast = 0;
			execSlot(i);
			if
			:: sk[i] == K_HB -> processHB(i)
			:: else -> FREE(i)
			fi
		:: else -> break
		od;
		SAFE
	}
	/* ---- the server runs a statement ---- */
	:: atomic {
		PICK(i);
		if
		:: G_EXEC(i) ->
			execSlot(i);
			if
			:: ss[i] == S_SENT -> ss[i] = S_DONE
			:: else -> FAULT; FREE(i)     /* a late statement */
			fi
		:: ss[i] == S_ABANDONED -> FREE(i)   /* never runs (connection killed) */
		fi;
		SAFE
	}
	/* ---- operators ---- */
	:: atomic {
		FAULTS && ops < OPS && WRITABLE -> ops++; FAULT;
		if
		:: TARGET(j); plainReplace(j)
		:: rx = 0                                  /* DELETE, Reelect */
		:: rx && mig -> TARGET(j); assume(j)     /* Assume (refuses a database without the floor) */
#ifndef NO_REQ
		:: LIVE -> TARGET(j); rxfer = j   /* RequestTransfer */
		:: LIVE -> rxfer = ANY                     /* StepDown */
#endif
		fi;
		SAFE
	}
	/* ---- operators on the floor table (issue 31 item 1) ---- */
#if TAMP > 0
	:: atomic {
		FAULTS && tamps < TAMP && mig -> tamps++; FAULT;
		if
		:: existed -> existed = 0; floor = 0    /* DELETE of the election's floor row */
#if defined(MARKER) && !defined(M_MARKER_NOCOUNT)
			; mkok = 0                          /* (MUTANT: the marker's sum not checked) */
#endif
#ifdef MARKER
		:: mk -> mkok = 0                       /* DELETE of another election's floor row */
		:: existed = 0; floor = 0; mk = 0; mkok = 0; mky = 0; mks = 0   /* TRUNCATE */
#else
		:: existed = 0; floor = 0               /* TRUNCATE */
#endif
		fi;
		SAFE
	}
#endif
#ifdef MARKER
	/* another election's floor transaction finds no floor row of its own
	 * and the marker missing or wrong: it rebuilds it (any time) */
	:: atomic { mig && !(mk && mkok) -> rebuild(); SAFE }
#endif
#ifdef UPGRADE
	/* the migrations (6 and the marker's): floor rows for the existing
	 * rows; the marker, since = now */
	:: atomic { !mig -> mig = 1;
		if
		:: rx -> existed = 1; floor = rterm
		:: else -> skip
		fi;
#ifdef MARKER
		mk = 1; mkok = 1; mky = 1; mks = DBNOW;
#endif
		SAFE }
#endif
	/* ---- a recipe node ---- */
	:: atomic { FAULTS && rcps < RCP && WRITABLE -> rcps++; FAULT; recipe(); SAFE }
	od
}
