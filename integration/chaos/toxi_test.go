//go:build linux

package chaos

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// proxy is the toxiproxy between one candidate and the database server,
// embedded in the test process, on a fixed address of 127.0.0.1.
//
// Toxics are never added to or removed from a proxy that carries
// connections: in toxiproxy 2.5 that can deadlock (the proxy's toxic
// collection stays locked while a toxic of a link whose other end is gone
// blocks on a send that nobody reads). A fault instead swaps in a fresh
// proxy, on the same address, whose toxics were set before it accepted
// anything, and healing swaps in a clean one. A swap closes the
// connections through the old proxy: every network fault begins and ends
// with the candidate's connections cut.
type proxy struct {
	srv      *toxiproxy.ApiServer
	name     string
	upstream string
	listen   string

	mu  sync.Mutex
	cur *toxiproxy.Proxy // nil while down
	gen int
}

// toxic is one toxic: type, stream (upstream or downstream) and attributes
// as JSON.
type toxic struct{ typ, stream, attrs string }

// toxiServer is an embedded toxiproxy (no HTTP API: the test drives the
// proxies directly).
func toxiServer() *toxiproxy.ApiServer {
	return toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
}

// newProxy starts a proxy on a free port of 127.0.0.1 in front of upstream.
func newProxy(t *testing.T, srv *toxiproxy.ApiServer, name, upstream string) *proxy {
	t.Helper()
	x := &proxy{srv: srv, name: name, upstream: upstream, listen: "127.0.0.1:0"}
	if err := x.swap(true); err != nil {
		t.Fatalf("toxiproxy %s: %v", name, err)
	}
	t.Cleanup(func() { _ = x.swap(false) })
	return x
}

// Addr is where the candidate connects.
func (x *proxy) Addr() string { return x.listen }

// swap stops the current proxy (cutting its connections) and, when up,
// starts a fresh one on the same address with the given toxics.
func (x *proxy) swap(up bool, toxics ...toxic) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if p := x.cur; p != nil {
		x.cur = nil
		done := make(chan struct{})
		go func() { p.Stop(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			return fmt.Errorf("toxiproxy %s: stopping the proxy hangs", p.Name)
		}
	}
	if !up {
		return nil
	}
	x.gen++
	p := toxiproxy.NewProxy(x.srv, fmt.Sprintf("%s#%d", x.name, x.gen), x.listen, x.upstream)
	for i, tx := range toxics {
		_, err := p.Toxics.AddToxicJson(strings.NewReader(fmt.Sprintf(
			`{"name":"t%d","type":%q,"stream":%q,"toxicity":1,"attributes":%s}`, i, tx.typ, tx.stream, tx.attrs)))
		if err != nil {
			return fmt.Errorf("toxiproxy %s: toxic %s: %w", p.Name, tx.typ, err)
		}
	}
	var err error
	for range 100 { // the port may be taken for a moment
		if err = p.Start(); err == nil {
			x.cur, x.listen = p, p.Listen
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("toxiproxy %s: %w", p.Name, err)
}

// Network faults between the leader and the database, through its proxy.
// Each lasts longer than the lease, so the leader must stand down and
// another take over, and then heals.

// netLatency delays every answer by more than the renew deadline.
func netLatency(c *cluster, l *slot) (string, error) {
	ms := (c.tm.RenewDeadline + 300*time.Millisecond).Milliseconds()
	return netFault(c, l, toxic{"latency", "downstream", fmt.Sprintf(`{"latency":%d,"jitter":50}`, ms)})
}

// netBlackhole drops everything both ways without closing (a partition).
func netBlackhole(c *cluster, l *slot) (string, error) {
	return netFault(c, l, toxic{"timeout", "upstream", `{"timeout":0}`}, toxic{"timeout", "downstream", `{"timeout":0}`})
}

// netReset resets every connection as soon as it carries data: dropped
// connections that reconnecting cannot cure while it lasts.
func netReset(c *cluster, l *slot) (string, error) {
	return netFault(c, l, toxic{"reset_peer", "upstream", `{"timeout":0}`})
}

// netSlicer slices the answers into small packets, each delayed: a slow,
// lossy link on which statements outlast the query timeout.
func netSlicer(c *cluster, l *slot) (string, error) {
	return netFault(c, l, toxic{"slicer", "downstream", `{"average_size":16,"size_variation":8,"delay":30000}`})
}

// netLimit closes each connection after it carried 2 kB: connections
// dropped over and over, a few statements in.
func netLimit(c *cluster, l *slot) (string, error) {
	return netFault(c, l, toxic{"limit_data", "upstream", `{"bytes":2048}`})
}

// netDown takes the proxy away: connections are cut and new ones refused.
func netDown(c *cluster, l *slot) (string, error) {
	return netFaultDown(c, l, false)
}

func netFault(c *cluster, l *slot, toxics ...toxic) (string, error) {
	return netFaultDown(c, l, true, toxics...)
}

// netFaultDown puts the fault on the leader's proxy for longer than the
// lease, then heals it.
func netFaultDown(c *cluster, l *slot, up bool, toxics ...toxic) (string, error) {
	id := l.proc.id
	if err := l.px.swap(up, toxics...); err != nil {
		return id, err
	}
	c.pause(c.tm.Lease + 500*time.Millisecond + c.jitter(time.Second))
	return id, l.px.swap(true)
}
