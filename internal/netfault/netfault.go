// Package netfault is a TCP proxy on loopback for fault tests: in front of
// one upstream address, it forwards every connection until told to
// blackhole, and then drops the data of every connection, both ways, while
// keeping the connections open, even when one end closes its side: what a
// client sees across a partition that lets nothing through, not even a
// reset or a FIN (a half-open connection). Healing forwards again (and
// passes on a close that happened meanwhile); what was dropped stays lost,
// so a request sent meanwhile is never answered.
package netfault

import (
	"bytes"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy is a blackholing TCP proxy. Its methods are safe for concurrent use.
type Proxy struct {
	ln       net.Listener
	upstream string
	black    atomic.Bool
	wg       sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	quit   chan struct{} // closed by Close
	marker []byte        // the armed trigger's marker; nil when none is armed
	fire   func()        // what the trigger does, before the data is forwarded
}

// Start listens on a free port of 127.0.0.1 and forwards to upstream
// (host:port, which must be a loopback address).
func Start(upstream string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, upstream: upstream, conns: map[net.Conn]struct{}{}, quit: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address clients connect to.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Blackhole starts (on) or ends dropping every connection's data.
func (p *Proxy) Blackhole(on bool) { p.black.Store(on) }

// BlackholeOn arms a trigger: the blackhole starts as soon as a client sends
// data containing marker (that data is dropped, so the statement carrying
// it never reaches the server). The returned channel is closed then.
func (p *Proxy) BlackholeOn(marker []byte) <-chan struct{} {
	hit := make(chan struct{})
	p.On(marker, func() { p.black.Store(true); close(hit) })
	return hit
}

// On arms a trigger: the first time a client sends data containing marker,
// fn runs, on the proxy's goroutine, before that data is forwarded (or
// dropped). It replaces a trigger armed before and not fired yet.
func (p *Proxy) On(marker []byte, fn func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.marker, p.fire = append([]byte(nil), marker...), fn
}

// trigger fires an armed trigger whose marker client data b contains.
func (p *Proxy) trigger(b []byte) {
	p.mu.Lock()
	if p.marker == nil || !bytes.Contains(b, p.marker) {
		p.mu.Unlock()
		return
	}
	fn := p.fire
	p.marker, p.fire = nil, nil
	p.mu.Unlock()
	fn()
}

// Close stops listening, closes every connection and waits for the proxy's
// goroutines.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	if !p.closed {
		close(p.quit)
	}
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// track adds c to the open connections; false once the proxy is closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		down, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(down) {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer p.untrack(down)
			up, err := net.Dial("tcp", p.upstream)
			if err != nil {
				return
			}
			if !p.track(up) {
				return
			}
			defer p.untrack(up)
			done := make(chan struct{}, 2)
			go func() { p.pipe(up, down, true); done <- struct{}{} }()
			go func() { p.pipe(down, up, false); done <- struct{}{} }()
			<-done // one side ended: end both
			_ = up.Close()
			_ = down.Close()
			<-done
		}()
	}
}

// pipe copies from src to dst, dropping what arrives while blackholed;
// fromClient says src is the client.
func (p *Proxy) pipe(dst, src net.Conn, fromClient bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && fromClient {
			p.trigger(buf[:n])
		}
		if n > 0 && !p.black.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			// A partition passes no close on either: hold the other
			// side open until it heals.
			for p.black.Load() {
				select {
				case <-p.quit:
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
			return
		}
	}
}
