// Command candidate is one candidate process of the peers' benchmark
// (integration/bench/peers): it campaigns in one election with one of the
// peers and prints one JSON line per event on stdout, by this machine's wall
// clock:
//
//	{"event":"started","id":"c1","time":"…"}          first thing main does
//	{"event":"elected","id":"c1","time":"…"}          the leader signal turned true
//	{"event":"demoted","id":"c1","time":"…","last_true":"…"}  it turned false; last_true is the last sample that was true
//	{"event":"resumed","id":"c1","time":"…","leader":true,"gap_ms":3001}
//	{"event":"fence","id":"c1","time":"…","accepted":false,"detail":"…"}
//	{"event":"exit","id":"c1","time":"…"}
//
// The leader signal is each peer's own "am I leader" answer (see leaderSignal
// in each peer's file), sampled every --sample (1 ms): elected and demoted
// are its transitions as the sampler sees them, so every peer is judged the
// same way. When two samples are more than 100 ms apart (the process was
// stopped), the sampler prints resumed with the signal's value at the first
// sample after the gap, and, with --fence, the candidate attempts one fenced
// write with the token it held before the gap (etcd: the election key's
// create revision; ZooKeeper: the version of its sequential node, in a
// multi; sqlelect: Election.Fenced with its term), and prints whether the
// coordination server accepted it. Peers without a token (go-mysql-lock's
// scheme, client-go, the seed recipe) print accepted true, detail "no
// token": nothing could reject the write.
//
// SIGTERM ends the campaign the peer's own clean way (etcd: Resign and
// close the session; ZooKeeper: delete the node and close; client-go:
// ReleaseOnCancel; go-mysql-lock: Release; sqlelect: Run's context ends and
// it resigns; the seed recipe has no release and just stops) and exits.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

type line struct {
	Event    string     `json:"event"`
	ID       string     `json:"id"`
	Time     time.Time  `json:"time"`
	Leader   *bool      `json:"leader,omitempty"`
	LastTrue *time.Time `json:"last_true,omitempty"`
	GapMs    int64      `json:"gap_ms,omitempty"`
	Accepted *bool      `json:"accepted,omitempty"`
	Detail   string     `json:"detail,omitempty"`
}

type printer struct {
	mu  sync.Mutex
	id  string
	enc *json.Encoder
}

func (p *printer) emit(l line) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l.ID = p.id
	l.Time = time.Now().Round(0)
	_ = p.enc.Encode(l)
}

// opts are the flags every peer reads.
type opts struct {
	id, election string
	dsn          string // MariaDB peers
	endpoint     string // etcd, ZooKeeper, the Lease server
	lease        time.Duration
	// sqlelect peers run through members.Run: members.Options
	appVersion, follow string
	holdDown           time.Duration
}

// peer is one election implementation.
type peer interface {
	// run campaigns until ctx ends, then leaves the peer's clean way.
	run(ctx context.Context) error
	// leader is the peer's own "am I leader" signal; it must be cheap.
	leader() bool
	// fence attempts one write guarded by the token held when the leader
	// signal was last true; accepted says whether the server took it.
	fence(ctx context.Context) (accepted bool, detail string)
}

func main() {
	var o opts
	kind := flag.String("peer", "", "sqlelect-table, sqlelect-lock, sqlelect-table-nolockdelay, sqlelect-members, sqlelect-members-lock, etcd, zookeeper, client-go, mysql-lock or seed")
	flag.StringVar(&o.id, "id", "", "candidate id (required)")
	flag.StringVar(&o.election, "election", "bench", "election name")
	flag.StringVar(&o.dsn, "dsn", "", "MariaDB DSN (sqlelect, mysql-lock, seed)")
	flag.StringVar(&o.endpoint, "endpoint", "", "etcd client URL, ZooKeeper host:port or the Lease server's URL")
	flag.DurationVar(&o.lease, "lease", 2*time.Second, "lease or session TTL")
	flag.StringVar(&o.appVersion, "app-version", "bench", "sqlelect-members*: the member's version (members.Options.Version)")
	flag.StringVar(&o.follow, "follow", "none", "sqlelect-members*: none, newest or oldest (members.Options.Follow)")
	flag.DurationVar(&o.holdDown, "hold-down", 0, "sqlelect-members*: members.Options.HoldDown (0: the lease)")
	sample := flag.Duration("sample", time.Millisecond, "how often the leader signal is sampled")
	doFence := flag.Bool("fence", false, "after a stop (a gap in the sampling), attempt one fenced write")
	flag.Parse()
	p := &printer{id: o.id, enc: json.NewEncoder(os.Stdout)}
	p.emit(line{Event: "started"})
	if o.id == "" {
		fmt.Fprintln(os.Stderr, "candidate: --id is required")
		os.Exit(2)
	}
	var pr peer
	var err error
	switch *kind {
	case "sqlelect-table", "sqlelect-lock", "sqlelect-members", "sqlelect-members-lock":
		pr, err = newSqlelect(o, strings.HasSuffix(*kind, "-lock"), false)
		if err == nil && strings.HasPrefix(*kind, "sqlelect-members") {
			err = pr.(*sqlelectPeer).asMember(o)
		}
	case "sqlelect-table-nolockdelay":
		pr, err = newSqlelect(o, false, true)
	case "etcd":
		pr, err = newEtcd(o)
	case "zookeeper":
		pr, err = newZK(o)
	case "client-go":
		pr, err = newClientGo(o)
	case "mysql-lock":
		pr, err = newMySQLLock(o)
	case "seed":
		pr, err = newSeed(o)
	default:
		err = fmt.Errorf("unknown --peer %q", *kind)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "candidate:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	var done atomic.Bool
	go sampler(p, pr, *sample, *doFence, &done)
	if err := pr.run(ctx); err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "candidate:", err)
		p.emit(line{Event: "error", Detail: err.Error()})
	}
	done.Store(true)
	p.emit(line{Event: "exit"})
}

// sampler samples pr's leader signal every d and prints its transitions,
// and a resumed line (with one fenced write when fence is set) after a gap.
func sampler(p *printer, pr peer, d time.Duration, fence bool, done *atomic.Bool) {
	was := false
	last := time.Now()
	var lastTrue time.Time
	for !done.Load() {
		time.Sleep(d)
		now := time.Now()
		is := pr.leader()
		if gap := now.Sub(last); gap > 100*time.Millisecond {
			v := is
			p.emit(line{Event: "resumed", Leader: &v, GapMs: gap.Milliseconds()})
			if fence && was {
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					defer cancel()
					ok, detail := pr.fence(ctx)
					p.emit(line{Event: "fence", Accepted: &ok, Detail: detail})
				}()
			}
		}
		last = now
		switch {
		case is && !was:
			p.emit(line{Event: "elected"})
		case !is && was:
			lt := lastTrue.Round(0)
			p.emit(line{Event: "demoted", LastTrue: &lt})
		}
		if is {
			lastTrue = now
		}
		was = is
	}
}

// noToken is fence for peers without a fencing token.
func noToken() (bool, string) { return true, "no token" }

// sleepCtx sleeps d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
