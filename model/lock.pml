/*
 * lock.pml: the lock backend's protocol (election/lock.go and sql.go,
 * internal/getlock, on campaign.go's state machine), as a Promela model for SPIN. See
 * model/README.md ("The lock backend") for what is modelled, the decision
 * table, the configurations and the mutants; `make model` checks them.
 *
 * Time, clocks and the candidate's state machine (hold, deadline, lock
 * delay, leadership, watchdog, sit-out) are as in sqlelect.pml. What is new
 * is the server's user-level lock, held by a session (a connection id), and
 * the sessions themselves: a client discards its connection after an error
 * (a lost reply, a killed session), and the server ends a discarded
 * session, which frees the lock it holds, at any time (a reset at once, or
 * wait_timeout later: early or late against the old holder's deadline).
 *
 * With -DLIVENESS, faults (operators, crashes, network faults, resignations)
 * happen only before real time TF; from then on a candidate's due step and
 * the server's end of a session idle for wait_timeout happen before time
 * advances (urgency), and a leader must exist from TF + B on.
 */

#ifndef N
#define N 3
#endif
#ifndef H
#define H 8
#endif
#ifndef L
#define L 4            /* LeaseDuration; wait_timeout is L too (whole seconds) */
#endif
#ifndef D
#define D 2            /* RenewDeadline */
#endif
#ifndef K
#define K 1            /* clock drift bound */
#endif
#ifndef LD
#define LD L           /* LockDelay */
#endif
#define QT 2           /* QueryTimeout */
#define RI 1           /* RetryInterval (sit-out 2 x RI) */
#define W (2*RI)       /* TransferWindow */
#define TS 8           /* term units per tick */

#ifndef OPS
#define OPS 1
#endif
#ifndef RES
#define RES 0
#endif
#ifndef CRASH
#define CRASH 0
#endif
#ifndef FEN
#define FEN 0
#endif
#ifndef NET
#define NET 1          /* lost or late replies, killed sessions */
#endif
#ifndef DRIFTS
#define DRIFTS 2
#endif
#ifdef LIVENESS
#ifndef TF
#define TF 2           /* faults stop at TF */
#endif
#ifndef B
#define B (L + 1)      /* a leader B ticks after the last fault */
#endif
#define FAULTS (rt < TF)
#else
#define FAULTS 1
#endif

#define NONE 0
#define ANY 15         /* transfer_to = '' */

/* a follower's planned write, once it holds the lock and read the row */
#define P_INS 1        /* takeNew: insert, lock delay LD */
#define P_TAKE 2       /* takeFree / takeOurs / takeOthers: take term pt, delay pd */

/* a renewal's result (beat) */
#define B_ERR 0
#define B_HELD 1
#define B_REQ 2
#define B_INS 3
#define B_NONE 4

#define PICK(v) if :: v = 1 :: v = 2 :: v = 3 fi
#define TARGET(v) if :: v = 1 :: v = 2 fi
#define MAX(a, b) ((a) > (b) -> (a) : (b))
#define MIN(a, b) ((a) < (b) -> (a) : (b))

byte rt;
#define DBNOW rt
#define TERMNOW (DBNOW * TS + 1)

/* The row. */
bit rx;
byte rsid;
byte rterm;
byte rlsa;
byte rlease;
bit rrel;
byte rxfer;
byte rconn;            /* connection_id: 0 (NULL) when no lock holder wrote it */
#define EXPIRED (rlsa + rlease <= DBNOW)
#define LIVE (rx && !rrel && !EXPIRED)
#define LEFT (rlsa + rlease - DBNOW)   /* LeaseLeft of a live row */

/* The user-level lock: the session (connection id) holding it, 0 free. */
byte lk;
byte lkt;              /* the holding session's last statement (wait_timeout counts from it) */
byte gen;              /* temporary: a fresh connection id */

/* A fenced transaction. */
byte fh;
byte ft;

bit up[N+1];
byte off[N+1];
#define CLK(i) (rt + off[i] - K)
byte hold[N+1];
byte hd[N+1];
byte la[N+1];
bit leading[N+1];
byte lu[N+1];
bit cancelled[N+1];
byte lterm[N+1];
byte so[N+1];
bit fin[N+1];
bit busy[N+1];
/* the lock connection (lockConn), as the client sees it */
byte cid[N+1];         /* its connection id, 0 for none */
bit sdead[N+1];        /* the server ended its session (the client finds out at its next statement) */
bit locked[N+1];       /* lc.locked */
byte wrote[N+1];       /* b.wrote */
/* follow: the write planned after the read (pk), the term read, the delay, the send time */
byte pk[N+1], pt[N+1], pd[N+1], fst[N+1];
/* a renewal whose reply is on its way (NET): result, term, to, send time, deadline */
byte rk[N+1], rkt[N+1], rto[N+1], rst[N+1], rdl[N+1];
bit rpend[N+1];

byte ops, res, crashes, fens, nets, drifts;
byte lastf;            /* LIVENESS: when the last fault happened */

#define BEL(i) (up[i] && lu[i] != 0 && CLK(i) < lu[i])
#define WRITABLE (fh == 0)
#define ZOMBIE (lk != 0 && lk != cid[1] && lk != cid[2] && lk != cid[3])

byte i, j, t, nt, bk, bt, bto;

/* ---- the candidate (campaign.go, lead.go), as in sqlelect.pml ---- */

inline demote(c) {
	if
	:: leading[c] -> leading[c] = 0; lu[c] = 0; lterm[c] = 0; cancelled[c] = 1
	:: else -> skip
	fi
}

inline maybeLead(c) {
	if
	:: !leading[c] && hold[c] != 0 && CLK(c) >= la[c] && CLK(c) < hd[c] ->
		leading[c] = 1; lu[c] = hd[c]; lterm[c] = hold[c]; cancelled[c] = 0
	:: else -> skip
	fi
}

/* acquired(send, beat): a hold of term tm with delay dl, sent at st */
inline acquired(c, tm, dl, st) {
	hold[c] = tm;
	hd[c] = st + D;
	la[c] = MAX(la[c], CLK(c));
	if
	:: dl > 0 -> la[c] = MAX(la[c], CLK(c) + dl)
	:: else -> skip
	fi;
	maybeLead(c)
}

inline sitOut(c) {
	so[c] = MAX(CLK(c), la[c]) + 2 * RI
}

inline standDown(c) {
	demote(c); hold[c] = 0; hd[c] = 0; cancelled[c] = 0
}

/* ---- the lock connection (internal/getlock) ---- */

/* discard: the client closes the connection; the server ends the session
 * later (see the server's steps): a lock it holds is kept meanwhile */
inline discard(c) {
	cid[c] = 0; sdead[c] = 0; locked[c] = 0; wrote[c] = 0
}

/* ensureConn */
inline ensure(c) {
	if
	:: cid[c] == 0 ->
		/* a fresh connection id: the server never reuses one, but
		 * only the ids still referenced (by the lock, the row, a
		 * connection) can be told apart: the smallest other one of
		 * the candidate's own (c, c + 4, c + 8, ...), so that the
		 * order in which candidates connect makes no difference */
		gen = c;
		do
		:: gen == lk || gen == rconn || gen == cid[1] || gen == cid[2] || gen == cid[3] -> gen = gen + 4
		:: else -> break
		od;
		cid[c] = gen; gen = 0; sdead[c] = 0; locked[c] = 0; wrote[c] = 0
	:: else -> skip
	fi
}

/* the session ran a statement */
#ifdef LIVENESS
#define USED(c) if :: lk == cid[c] -> lkt = DBNOW :: else -> skip fi
#else
#define USED(c) skip
#endif

/* RELEASE_LOCK on the lock connection */
inline releaseLock(c) {
	if
	:: locked[c] && lk == cid[c] -> lk = 0
	:: else -> skip
	fi;
	locked[c] = 0
}

/* ---- the backend's statements (sql.go, "The lock backend") ---- */

/* the held-row condition of release, hand-off and hand-over */
#define HELD(c, h) (rx && rsid == c && rterm == h && !rrel)

/* giveUp(release or hand-off): the statement on the lock connection, then
 * RELEASE_LOCK; without a connection, the statement on a pooled one */
inline giveUp(c, h, unserved, to, over) {
	if
	:: cid[c] != 0 && (sdead[c] || !WRITABLE) -> discard(c)     /* fails: the connection is discarded */
	:: cid[c] == 0 && !WRITABLE -> skip                         /* fails */
	:: else ->
		if
		:: HELD(c, h) && over -> rrel = 1; rxfer = (to == ANY -> NONE : to); rlsa = DBNOW; rlease = W
		:: HELD(c, h) && !over && unserved > 0 -> rlsa = DBNOW; rlease = unserved; rxfer = NONE
		:: HELD(c, h) && !over && unserved == 0 -> rrel = 1; rxfer = NONE
		:: else -> skip
		fi;
		if
		:: cid[c] != 0 -> USED(c); releaseLock(c)
		:: else -> skip
		fi
	fi
}

/* releaseHold (lead.go): the deadline passed: lost(drop); else give up
 * the row, handing on an unserved lock delay */
inline releaseHold(c) {
	if
	:: hold[c] == 0 -> skip
	:: hold[c] != 0 && CLK(c) >= hd[c] ->
		if
		:: cid[c] != 0 && sdead[c] -> discard(c)
		:: cid[c] != 0 && !sdead[c] -> USED(c); releaseLock(c)
		:: else -> skip
		fi
	:: hold[c] != 0 && CLK(c) < hd[c] ->
		t = (la[c] > CLK(c) -> la[c] - CLK(c) : 0);
		giveUp(c, hold[c], t, 0, 0)
	fi;
	hold[c] = 0; hd[c] = 0
}

inline standDownRelease(c) {
	if
	:: hold[c] != 0 -> demote(c); releaseHold(c); hold[c] = 0; hd[c] = 0; cancelled[c] = 0
	:: else -> skip
	fi
}

/* handOver (transfer.go) to bto */
inline handOver(c) {
	if
	:: hold[c] == 0 -> skip
	:: hold[c] != 0 && bto == c -> skip
	:: hold[c] != 0 && bto != c && CLK(c) < la[c] -> standDownRelease(c); sitOut(c)
	:: hold[c] != 0 && bto != c && CLK(c) >= la[c] ->
		demote(c);
		if
		:: CLK(c) < hd[c] -> giveUp(c, hold[c], 0, bto, 1)
		:: else ->
			/* past the deadline: lose(drop), as releaseHold's */
			if
			:: cid[c] != 0 && sdead[c] -> discard(c)
			:: cid[c] != 0 && !sdead[c] -> USED(c); releaseLock(c)
			:: else -> skip
			fi
		fi;
		hold[c] = 0; hd[c] = 0; cancelled[c] = 0;
		sitOut(c);
		if
		:: bto != ANY -> so[c] = so[c] + W
		:: else -> skip
		fi
	fi
}

/* follow, with the lock (lock.go): read the row and plan the write (pk,
 * pt, pd), or let the lock go (yieldLock) */
inline decide(c) {
	if
	:: !rx -> pk[c] = P_INS; pd[c] = LD
	:: rx && rrel && rxfer != NONE && rxfer != ANY && rxfer != c && !EXPIRED ->
		releaseLock(c)                                      /* reserved for another */
	:: rx && !(rrel && rxfer != NONE && rxfer != ANY && rxfer != c && !EXPIRED) && (rrel || EXPIRED) ->
		pk[c] = P_TAKE; pt[c] = rterm; pd[c] = 0           /* takeFree */
	:: LIVE && rsid == c ->                                 /* takeOurs */
		pk[c] = P_TAKE; pt[c] = rterm;
		if
		:: rconn == cid[c] && rterm == wrote[c] -> pd[c] = 0
#ifdef M_CLAIM_NODELAY
		:: else -> pd[c] = 0     /* MUTANT: an operator's row naming me is taken without a delay */
#else
		:: rconn != 0 && !(rconn == cid[c] && rterm == wrote[c]) -> pd[c] = MIN(LEFT, LD)   /* holderGone */
		:: rconn == 0 -> pd[c] = (LD > DBNOW - rlsa -> LD - (DBNOW - rlsa) : 0)          /* sinceWritten */
#endif
		fi
	:: LIVE && rsid != c && rconn != 0 ->                   /* takeOthers: the holder's connection is gone */
		pk[c] = P_TAKE; pt[c] = rterm;
#ifdef M_GONE_NODELAY
		pd[c] = 0     /* MUTANT: no lock delay after the holder's connection died */
#else
		pd[c] = MIN(LEFT, LD)
#endif
	:: LIVE && rsid != c && rconn == 0 -> releaseLock(c)    /* an operator named another */
	fi
}

/* the planned write runs (claim/write): the take (WHERE term = pt) or the
 * insert; 0 rows or a duplicate key: nothing held, the lock kept */
inline writePlan(c) {
	nt = 0;
	if
	:: pk[c] == P_INS && !rx ->
		nt = TERMNOW;
		rx = 1; rsid = c; rterm = nt; rlsa = DBNOW; rlease = L; rrel = 0; rxfer = NONE; rconn = cid[c]
	:: pk[c] == P_TAKE && rx && rterm == pt[c] ->
		nt = MAX(rterm + 1, TERMNOW);
		assert(nt > rterm);      /* terms never decrease while the row exists */
		rsid = c; rterm = nt; rlsa = DBNOW; rlease = L; rrel = 0; rxfer = NONE; rconn = cid[c]
	:: else -> skip
	fi;
	USED(c)
}

/* renewOnce's UPDATE and renewLost, on the connection that holds the lock:
 * sets bk (the beat), bt (a new term), bto (to) */
inline renewStmt(c) {
	if
	:: rx && rsid == c && rterm == hold[c] && !rrel && (rxfer == NONE || rxfer == c) ->
		rlsa = DBNOW; rlease = L; rxfer = NONE; rconn = cid[c]; wrote[c] = hold[c]; bk = B_HELD
	:: rx && rsid == c && rterm == hold[c] && !rrel && !(rxfer == NONE || rxfer == c) ->
		bk = B_REQ; bto = rxfer
	:: rx && !(rsid == c && rterm == hold[c] && !rrel) -> bk = B_NONE   /* keep the lock */
	:: !rx ->   /* deleted: insert a row naming me, released once I stood down */
		nt = TERMNOW;
		rx = 1; rsid = c; rterm = nt; rlsa = DBNOW; rlease = L; rrel = 0; rxfer = NONE; rconn = cid[c];
		wrote[c] = nt; bk = B_INS; bt = nt
	fi;
	USED(c)
}

/* renew (lock.go): renewOnce; after a failed connection, once more on a
 * fresh one, which keeps the term only if it gets the lock at once
 * (keepLock: GET_LOCK(name, 0)) */
inline renewOnce(c) {
	ensure(c);
	if
	:: sdead[c] || !WRITABLE -> discard(c); bk = B_ERR       /* the statement fails */
	:: else ->
		if
		:: !locked[c] && lk == 0 -> lk = cid[c]; locked[c] = 1; renewStmt(c)
#ifdef M_KEEP_TERM
		/* MUTANT: the retry renews the term although another session
		 * holds the lock (it would come back later, not at once) */
		:: !locked[c] && lk != 0 -> renewStmt(c)
#else
		:: !locked[c] && lk != 0 -> bk = B_NONE                 /* held by another connection */
#endif
		:: locked[c] -> renewStmt(c)
		fi
	fi
}

/* holdTick's handling of the renewal's beat (campaign.go) */
inline processRenew(c, st) {
	if
	:: bk == B_ERR -> skip
	:: bk == B_REQ -> handOver(c)
	:: bk == B_HELD ->
		hd[c] = st + D;
		if
		:: leading[c] ->
			if
			:: lu[c] == 0 || CLK(c) >= lu[c] -> demote(c)
			:: else -> lu[c] = hd[c]
			fi
		:: else -> skip
		fi;
		maybeLead(c)
	:: bk == B_INS ->
		t = hd[c];
		standDown(c);
		hold[c] = bt; hd[c] = t;
		releaseHold(c);
		sitOut(c)
	:: bk == B_NONE -> standDown(c)      /* deposed; the lock is kept */
	fi
}

inline crash(c) {
	up[c] = 0; hold[c] = 0; leading[c] = 0; lu[c] = 0; cancelled[c] = 0; lterm[c] = 0;
	hd[c] = 0; la[c] = 0; so[c] = 0;
	discard(c);      /* its session lives until the server ends it */
	pk[c] = 0; pt[c] = 0; pd[c] = 0; fst[c] = 0;
	rpend[c] = 0; rk[c] = 0; rkt[c] = 0; rto[c] = 0; rst[c] = 0; rdl[c] = 0
}

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
	if
	:: so[c] != 0 && so[c] <= CLK(c) -> so[c] = 0
	:: else -> skip
	fi;
	if
	:: la[c] != 0 && la[c] <= CLK(c) -> la[c] = 0
	:: else -> skip
	fi
}

/* The candidate's steps, as guards (urgency in LIVE needs them). */
/* followTick: with the lock (or it is free), read and plan; without it,
 * watch: write a placeholder when there is no row */
#define G_FOLLOW(c) (up[c] && !busy[c] && hold[c] == 0 && pk[c] == 0 && CLK(c) >= so[c] && \
	(cid[c] == 0 || sdead[c] || locked[c] || lk == 0 || !rx && WRITABLE))
#define G_WRITE(c) (up[c] && pk[c] != 0 && WRITABLE)
#define G_LOST(c) (up[c] && !busy[c] && hold[c] != 0 && !rpend[c] && CLK(c) >= hd[c])
#define G_RENEW(c) (up[c] && !busy[c] && hold[c] != 0 && !rpend[c] && CLK(c) < hd[c])
#define G_REPLY(c) (up[c] && rpend[c])
#define DUE(c) (G_FOLLOW(c) || G_WRITE(c) || G_LOST(c) || G_RENEW(c) || G_REPLY(c))

#ifdef LIVENESS
/* urgency once faults stopped: every due step first, and the server ends a
 * discarded session idle for wait_timeout */
#define URGENT_DONE (FAULTS || !DUE(1) && !DUE(2) && !DUE(3) && !(ZOMBIE && DBNOW >= lkt + L))
#else
#define URGENT_DONE 1
#endif

#define TWO (BEL(1) && BEL(2) || BEL(1) && BEL(3) || BEL(2) && BEL(3))
#define REVIVED (BEL(1) && cancelled[1] || BEL(2) && cancelled[2] || BEL(3) && cancelled[3])
#ifdef LIVENESS
/* after faults stop, a leader within the bound: at the end of tick
 * lastf + B and every tick after it (checked before time advances) */
#define LEADS assert(rt < lastf + B || BEL(1) || BEL(2) || BEL(3))
#define FAULT lastf = rt
/* a stall (time advancing past a due step, before TF) is a fault too */
#define STALL if :: DUE(1) || DUE(2) || DUE(3) || ZOMBIE && DBNOW >= lkt + L -> FAULT :: else -> skip fi
#else
#define LEADS skip
#define FAULT skip
#define STALL skip
#endif
/* States that differ only in what nothing can tell apart any more are made
 * one: a connection that is gone is id 14 while its session holds the lock
 * (a zombie), else 15 in the row; a term the connection wrote that is no
 * longer the row's is forgotten (terms do not come back). */
#define DEAD_LOCK 14
#define DEAD_CONN 15
inline canon() {
	if
	:: ZOMBIE && lk != DEAD_LOCK ->
		if
		:: rconn == lk -> rconn = DEAD_LOCK
		:: else -> skip
		fi;
		lk = DEAD_LOCK
	:: else -> skip
	fi;
	if
	:: rconn != 0 && rconn != lk && rconn != cid[1] && rconn != cid[2] && rconn != cid[3] -> rconn = DEAD_CONN
	:: else -> skip
	fi;
	if :: wrote[1] != 0 && (!rx || wrote[1] != rterm) -> wrote[1] = 0 :: else -> skip fi;
	if :: wrote[2] != 0 && (!rx || wrote[2] != rterm) -> wrote[2] = 0 :: else -> skip fi;
	if :: wrote[3] != 0 && (!rx || wrote[3] != rterm) -> wrote[3] = 0 :: else -> skip fi
}
#define SAFE assert(!TWO); assert(!REVIVED); canon(); \
	i = 0; j = 0; t = 0; nt = 0; bk = 0; bt = 0; bto = 0

init {
	atomic {
		up[1] = 1; up[2] = 1; up[3] = 1;
		OFFSET(1); OFFSET(2); OFFSET(3);
		rt = K;
		/* candidate 1 leads: it holds the lock on connection 1 and wrote the row */
		cid[1] = 1; locked[1] = 1; lk = 1; USED(1);
		cid[2] = 2; cid[3] = 3;    /* the followers' connections */
		rx = 1; rsid = 1; rterm = TERMNOW; rlsa = DBNOW; rlease = L; rconn = 1; wrote[1] = rterm;
		hold[1] = rterm; hd[1] = CLK(1) + D; leading[1] = 1; lu[1] = hd[1]; lterm[1] = rterm
	}
	do
	/* ---- time ---- */
	:: atomic { rt < H && URGENT_DONE
		-> STALL; LEADS;
		rt++;
		WATCHDOG(1); WATCHDOG(2); WATCHDOG(3);
		busy[1] = 0; busy[2] = 0; busy[3] = 0;
		printf("t=%d row(x=%d id=%d term=%d lsa=%d lease=%d rel=%d xfer=%d conn=%d) lock=%d | 1: up=%d cid=%d dead=%d hold=%d hd=%d la=%d lu=%d so=%d pk=%d | 2: up=%d cid=%d dead=%d hold=%d hd=%d la=%d lu=%d so=%d pk=%d | 3: cid=%d hold=%d la=%d lu=%d so=%d\n",
			rt, rx, rsid, rterm, rlsa, rlease, rrel, rxfer, rconn, lk,
			up[1], cid[1], sdead[1], hold[1], hd[1], la[1], lu[1], so[1], pk[1],
			up[2], cid[2], sdead[2], hold[2], hd[2], la[2], lu[2], so[2], pk[2],
			cid[3], hold[3], la[3], lu[3], so[3]);
		SAFE }
	/* ---- candidates ---- */
	:: atomic {
		PICK(i);
		if
		/* followTick → follow */
		:: G_FOLLOW(i) ->
			busy[i] = 1; fst[i] = CLK(i);
			ensure(i);
			if
			:: sdead[i] -> discard(i)                    /* the statement fails */
			:: !sdead[i] && !locked[i] && lk == 0 ->     /* GET_LOCK(name, 0) */
				lk = cid[i]; locked[i] = 1; USED(i);
				decide(i)
			:: !sdead[i] && locked[i] -> USED(i); decide(i)
			:: !sdead[i] && !locked[i] && lk != 0 ->    /* watch: the placeholder */
				if
				:: !rx && WRITABLE -> rx = 1; rsid = i; rterm = TERMNOW; rlsa = DBNOW; rlease = L;
					rrel = 0; rxfer = NONE; rconn = 0
				:: else -> skip
				fi
			fi
		/* the planned write (its reply may be lost: NET) */
		:: G_WRITE(i) ->
			if
			:: sdead[i] -> discard(i)
			:: !sdead[i] ->
				writePlan(i);
				if
				:: nt != 0 -> wrote[i] = nt; acquired(i, nt, pd[i], fst[i])
				:: else -> skip
				fi
			:: !sdead[i] && FAULTS && nets < NET -> nets++; FAULT;      /* reply lost, the write ran */
				writePlan(i); discard(i)
			fi;
			pk[i] = 0; pt[i] = 0; pd[i] = 0; fst[i] = 0
		/* holdTick: lease lost (stand down; the lock is kept) */
		:: G_LOST(i) -> standDown(i)
		/* holdTick: renew */
		:: G_RENEW(i) ->
			busy[i] = 1;
			t = CLK(i);
			renewOnce(i);
			if
			:: bk == B_ERR -> renewOnce(i)     /* the retry on a fresh connection */
			:: else -> skip
			fi;
			if
			:: processRenew(i, t)
			/* the reply comes later, or never (NET): the statement ran */
			:: bk != B_ERR && FAULTS && nets < NET -> nets++; FAULT;
				rpend[i] = 1; rk[i] = bk; rkt[i] = bt; rto[i] = bto; rst[i] = t;
				rdl[i] = t + MIN(QT, hd[i] - t)
			fi
		/* the renewal's reply: in time, processed (perhaps late: a stalled goroutine) */
		:: G_REPLY(i) ->
			if
			:: CLK(i) < rdl[i] -> bk = rk[i]; bt = rkt[i]; bto = rto[i]; t = rst[i]
			:: CLK(i) >= rdl[i] -> discard(i); bk = B_ERR; t = 0     /* timed out */
			:: FAULTS -> FAULT; discard(i); bk = B_ERR; t = 0        /* lost */
			fi;
			rpend[i] = 0; rk[i] = 0; rkt[i] = 0; rto[i] = 0; rst[i] = 0; rdl[i] = 0;
			processRenew(i, t)
		/* Resign, the end of Run, a failed health check */
		:: up[i] && !busy[i] && hold[i] != 0 && !rpend[i] && FAULTS && res < RES ->
			res++; FAULT; standDownRelease(i); sitOut(i)
		/* Transfer by the leader */
		:: up[i] && !busy[i] && leading[i] && BEL(i) && !rpend[i] && FAULTS && res < RES ->
			res++; FAULT; PICK(j);
			if
			:: j != i -> bto = j; handOver(i)
			:: else -> skip
			fi
		/* crash and restart */
		:: up[i] && FAULTS && crashes < CRASH -> crashes++; FAULT; crash(i)
		:: !up[i] && FAULTS -> FAULT; up[i] = 1      /* restart (counts as a fault: a restarted candidate claims its own row with a lock delay) */
		/* the server ends this candidate's session (killed, network): NET */
		:: up[i] && cid[i] != 0 && !sdead[i] && FAULTS && nets < NET -> nets++; FAULT;
			sdead[i] = 1;
			if
			:: lk == cid[i] -> lk = 0
			:: else -> skip
			fi
		/* clock rates */
		:: FAULTS && drifts < DRIFTS && off[i] < K -> drifts++; FAULT; off[i]++
		:: FAULTS && drifts < DRIFTS && off[i] > 0 -> drifts++; FAULT; off[i]--
		/* Fenced */
		:: up[i] && fens < FEN && !fin[i] && BEL(i) && fh == 0 ->
			fens++;
			if
			:: LIVE && rsid == i && rterm == lterm[i] -> fin[i] = 1; ft = lterm[i]; fh = i
			:: else -> skip
			fi
		:: fin[i] -> assert(rx && rterm == ft); fin[i] = 0; fh = 0
		:: fin[i] -> fin[i] = 0; fh = 0
		fi;
		SAFE
	}
	/* ---- the server ends a discarded session (early or late), freeing its lock ---- */
	:: atomic { ZOMBIE -> lk = 0; SAFE }
	/* ---- operators ---- */
	:: atomic {
		FAULTS && ops < OPS && WRITABLE -> ops++; FAULT;
		if
		:: TARGET(j); rx = 1; rsid = j; rterm = TERMNOW; rlsa = DBNOW; rlease = L; rrel = 0;
			rxfer = NONE; rconn = 0                       /* plain REPLACE */
		:: rx = 0; rsid = 0; rterm = 0; rlsa = 0; rlease = 0; rrel = 0; rxfer = NONE; rconn = 0  /* DELETE, Reelect */
		:: rx -> TARGET(j); nt = MAX(rterm + 1, TERMNOW); assert(nt > rterm);
			rsid = j; rterm = nt; rlsa = DBNOW; rrel = 0; rxfer = NONE; rconn = 0   /* Assume */
#ifndef NO_REQ
		:: LIVE -> TARGET(j); rxfer = j                   /* RequestTransfer */
		:: LIVE -> rxfer = ANY                            /* StepDown */
#endif
		fi;
		SAFE
	}
	od
}
