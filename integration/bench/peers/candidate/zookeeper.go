package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// zkPeer is ZooKeeper's standard leader recipe over
// github.com/go-zookeeper/zk: each candidate creates an ephemeral sequential
// node under the election's node; the one with the lowest sequence leads;
// the others each watch the node just before theirs and look again when it
// goes. The session timeout is the lease. Its signal: its node was the
// lowest at the last look and the client's session state is HasSession (a
// disconnection ends leadership at once, as Curator's LeaderLatch does on
// SUSPENDED). Its token is its node's sequence, checked in a multi with
// the node's version: a write with an expired session, or after the node
// is gone, is refused.
type zkPeer struct {
	o    opts
	conn *zk.Conn
	ev   <-chan zk.Event
	dir  string
	node atomic.Pointer[string] // set while leading by the last look
}

func newZK(o opts) (peer, error) {
	conn, ev, err := zk.Connect([]string{o.endpoint}, o.lease, zk.WithLogInfo(false), zk.WithLogger(nopLogger{}))
	if err != nil {
		return nil, err
	}
	return &zkPeer{o: o, conn: conn, ev: ev, dir: "/bench-" + o.election}, nil
}

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}

func (p *zkPeer) leader() bool {
	return p.node.Load() != nil && p.conn.State() == zk.StateHasSession
}

var lastLeaderNode atomic.Pointer[string]

func (p *zkPeer) fence(context.Context) (bool, string) {
	n := lastLeaderNode.Load()
	if n == nil {
		return false, "never elected"
	}
	_, err := p.conn.Multi(&zk.CheckVersionRequest{Path: *n, Version: 0},
		&zk.SetDataRequest{Path: p.dir + "-fence", Data: []byte(p.o.id), Version: -1})
	if err != nil {
		return false, fmt.Sprintf("node %s: %v", *n, err)
	}
	return true, "node " + *n
}

func (p *zkPeer) run(ctx context.Context) error {
	defer p.conn.Close()
	// Session events: a watch channel also gets them; this one is drained
	// so the client never blocks on it.
	go func() {
		for range p.ev {
		}
	}()
	for _, d := range []string{p.dir, p.dir + "-fence"} {
		for ctx.Err() == nil {
			_, err := p.conn.Create(d, nil, 0, zk.WorldACL(zk.PermAll))
			if err == nil || errors.Is(err, zk.ErrNodeExists) {
				break
			}
			sleepCtx(ctx, 100*time.Millisecond)
		}
	}
	for ctx.Err() == nil {
		err := p.campaign(ctx)
		p.node.Store(nil)
		if err != nil && ctx.Err() == nil {
			sleepCtx(ctx, 100*time.Millisecond)
		}
	}
	return nil
}

// campaign creates this candidate's node and follows the recipe until ctx
// ends (it then deletes the node) or the session is lost.
func (p *zkPeer) campaign(ctx context.Context) error {
	path, err := p.conn.Create(p.dir+"/n_", []byte(p.o.id), zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
	if err != nil {
		return err
	}
	defer func() {
		if p.conn.State() == zk.StateHasSession {
			_ = p.conn.Delete(path, -1)
		}
	}()
	mine := path[strings.LastIndex(path, "/")+1:]
	for ctx.Err() == nil {
		kids, _, err := p.conn.Children(p.dir)
		if err != nil {
			return err
		}
		slices.Sort(kids) // same prefix, zero-padded sequence
		i := slices.Index(kids, mine)
		if i < 0 {
			return errors.New("our node is gone (session expired)")
		}
		if i == 0 {
			p.node.Store(&path)
			lastLeaderNode.Store(&path)
			// Lead until the node goes or the session does.
			ok, _, w, err := p.conn.ExistsW(path)
			if err != nil {
				return err
			}
			if !ok {
				return errors.New("our node is gone")
			}
			select {
			case <-ctx.Done():
				return nil
			case ev := <-w:
				if ev.Type == zk.EventSession || ev.Type == zk.EventNotWatching || ev.Type == zk.EventNodeDeleted {
					return fmt.Errorf("leader watch: %v %v", ev.Type, ev.State)
				}
			}
			continue
		}
		ok, _, w, err := p.conn.ExistsW(p.dir + "/" + kids[i-1])
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-w:
		}
	}
	return nil
}
