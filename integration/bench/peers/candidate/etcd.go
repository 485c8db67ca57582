package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

// etcdPeer is client/v3/concurrency's Election: a session (a lease with
// the lease's TTL in whole seconds, kept alive by the client every TTL/3)
// and Campaign, which returns once this candidate's key has the lowest
// create revision under the prefix. Its signal: Campaign returned and the
// session's Done channel is open (the client closes it when the lease's
// keep-alive fails: the server says the lease is gone, or no keep-alive
// answer came within the TTL, checked every 500 ms). Its token is the key's
// create revision (Election.Rev).
type etcdPeer struct {
	cli *clientv3.Client
	o   opts
	cur atomic.Pointer[etcdTerm]
	won atomic.Pointer[etcdTerm] // the last term won, kept for fence
	ttl int
	pfx string
}

type etcdTerm struct {
	sess     *concurrency.Session
	key      string
	rev      int64
	campaign bool
}

func newEtcd(o opts) (peer, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{o.endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	ttl := int((o.lease + time.Second - 1) / time.Second)
	return &etcdPeer{cli: cli, o: o, ttl: ttl, pfx: "/bench/" + o.election}, nil
}

func (p *etcdPeer) leader() bool {
	t := p.cur.Load()
	if t == nil || !t.campaign {
		return false
	}
	select {
	case <-t.sess.Done():
		return false
	default:
		return true
	}
}

func (p *etcdPeer) fence(ctx context.Context) (bool, string) {
	t := p.won.Load()
	if t == nil {
		return false, "never elected"
	}
	r, err := p.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(t.key), "=", t.rev)).
		Then(clientv3.OpPut(p.pfx+"-fence", p.o.id)).Commit()
	if err != nil {
		return false, fmt.Sprintf("rev %d: %v", t.rev, err)
	}
	if !r.Succeeded {
		return false, fmt.Sprintf("rev %d: compare failed (key %s gone)", t.rev, t.key)
	}
	return true, fmt.Sprintf("rev %d", t.rev)
}

func (p *etcdPeer) run(ctx context.Context) error {
	defer p.cli.Close()
	for ctx.Err() == nil {
		sess, err := concurrency.NewSession(p.cli, concurrency.WithTTL(p.ttl))
		if err != nil {
			sleepCtx(ctx, 200*time.Millisecond)
			continue
		}
		e := concurrency.NewElection(sess, p.pfx)
		p.cur.Store(&etcdTerm{sess: sess})
		cctx, cancel := context.WithCancel(ctx)
		go func() { // a campaign ends when the session does
			select {
			case <-sess.Done():
			case <-cctx.Done():
			}
			cancel()
		}()
		err = e.Campaign(cctx, p.o.id)
		if err == nil {
			t := &etcdTerm{sess: sess, key: e.Key(), rev: e.Rev(), campaign: true}
			p.won.Store(t)
			p.cur.Store(t)
			select {
			case <-ctx.Done():
			case <-sess.Done():
			}
		}
		cancel()
		if ctx.Err() != nil {
			rctx, rcancel := context.WithTimeout(context.Background(), time.Second)
			if err == nil {
				_ = e.Resign(rctx)
			}
			rcancel()
			p.cur.Store(nil)
			_ = sess.Close()
			return nil
		}
		p.cur.Store(nil)
		_ = sess.Close()
	}
	return nil
}
