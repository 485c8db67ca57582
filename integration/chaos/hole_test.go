//go:build linux

package chaos

import (
	"bytes"
	"net"
	"sync"
	"testing"
)

// hole is a TCP relay in front of a candidate's toxiproxy (or, on Galera,
// its node) that can freeze connections without closing them: a half-open
// connection, or a partition that TCP rides out. toxiproxy cannot do that
// here (see proxy: every toxiproxy fault begins and ends by cutting the
// connections).
//
// While a connection is frozen, the relay forwards nothing either way and
// closes nothing: bytes already read are held, the rest waits in the
// kernel's buffers, a close by either end (the client's driver giving up
// on a timeout, the server's wait_timeout or KILL) is held too. New
// connections are accepted and frozen at once (their handshake hangs).
// When the hole heals, everything held is delivered in order, late, as TCP
// would after a partition shorter than its retransmission timeout: a
// statement the client gave up on may still run on the server then.
//
// A connection is a wake connection once its client sent the name of a
// table backend's handover lock ("sqlelect.wake#…", see docs/algorithm.md):
// the holder's own connection, and pooled connections a follower waited on
// (they go back to the pool and may carry heartbeats later).
type hole struct {
	ln       net.Listener
	upstream string

	mu    sync.Mutex
	cond  *sync.Cond
	mode  holeMode
	conns map[*holeConn]struct{}
	done  bool
	// arm, when set, freezes the first connection that sends it, right
	// after the client's next message (the execution of a prepared
	// statement whose text held it) went through; tripped is closed then.
	arm     []byte
	tripped chan struct{}
}

type holeMode int

const (
	holeOpen holeMode = iota // forward everything
	holeAll                  // freeze every connection
	holeWake                 // freeze the wake connections only
)

var wakeMarker = []byte("sqlelect.wake#")

type holeConn struct {
	client, server net.Conn
	wake           bool // guarded by hole.mu
	armed, frozen  bool // guarded by hole.mu
}

// newHole starts a relay on a free port of 127.0.0.1 in front of upstream.
func newHole(t *testing.T, upstream string) *hole {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hole{ln: ln, upstream: upstream, conns: map[*holeConn]struct{}{}}
	h.cond = sync.NewCond(&h.mu)
	go h.accept()
	t.Cleanup(h.close)
	return h
}

// Addr is where the candidate connects.
func (h *hole) Addr() string { return h.ln.Addr().String() }

// set changes the mode; healing (holeOpen) delivers what was held and
// disarms.
func (h *hole) set(m holeMode) {
	h.mu.Lock()
	h.mode = m
	if m == holeOpen {
		h.arm = nil
		for hc := range h.conns {
			hc.armed, hc.frozen = false, false
		}
	}
	h.mu.Unlock()
	h.cond.Broadcast()
}

// armAfter freezes the first connection whose client sends marker, once
// its next message went through (see hole.arm); the channel is closed
// then.
func (h *hole) armAfter(marker string) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.arm, h.tripped = []byte(marker), make(chan struct{})
	return h.tripped
}

func (h *hole) close() {
	_ = h.ln.Close()
	h.mu.Lock()
	h.done = true
	for hc := range h.conns {
		_ = hc.client.Close()
		_ = hc.server.Close()
	}
	h.mu.Unlock()
	h.cond.Broadcast()
}

func (h *hole) accept() {
	for {
		c, err := h.ln.Accept()
		if err != nil {
			return
		}
		go h.serve(c)
	}
}

func (h *hole) serve(client net.Conn) {
	server, err := net.Dial("tcp", h.upstream)
	if err != nil {
		_ = client.Close()
		return
	}
	hc := &holeConn{client: client, server: server}
	h.mu.Lock()
	if h.done {
		h.mu.Unlock()
		_ = client.Close()
		_ = server.Close()
		return
	}
	h.conns[hc] = struct{}{}
	h.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); h.pipe(hc, server, client, true) }()
	go func() { defer wg.Done(); h.pipe(hc, client, server, false) }()
	wg.Wait()
	h.mu.Lock()
	delete(h.conns, hc)
	h.mu.Unlock()
}

// wait blocks while hc is frozen.
func (h *hole) wait(hc *holeConn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for !h.done && (hc.frozen || h.mode == holeAll || (h.mode == holeWake && hc.wake)) {
		h.cond.Wait()
	}
}

// pipe copies src to dst; an end or error of src (once the connection is
// not frozen) closes both.
func (h *hole) pipe(hc *holeConn, dst, src net.Conn, fromClient bool) {
	buf := make([]byte, 32<<10)
	var tail []byte // the end of the previous read, for a marker split across reads
	for {
		n, err := src.Read(buf)
		freeze := false
		if fromClient && n > 0 {
			scan := append(tail, buf[:n]...)
			h.mu.Lock()
			if bytes.Contains(scan, wakeMarker) {
				hc.wake = true
			}
			switch {
			case h.arm != nil && hc.armed:
				freeze = true
			case h.arm != nil && bytes.Contains(scan, h.arm):
				hc.armed = true
			}
			h.mu.Unlock()
			tail = append(tail[:0], scan[max(0, len(scan)-64):]...)
		}
		h.wait(hc)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				err = werr
			}
		}
		if freeze {
			h.mu.Lock()
			if h.arm != nil { // not healed meanwhile
				hc.frozen, h.arm = true, nil
				close(h.tripped)
			}
			h.mu.Unlock()
		}
		if err != nil {
			_ = dst.Close()
			_ = src.Close()
			return
		}
	}
}
