// Package faulttest inflicts network faults on a real server for tests: a TCP proxy that passes, refuses or freezes traffic.
//
// It is a folder of its own because the faults concern every dependency
// alike (PostgreSQL, the SMTP relay, the AI provider) and belong to none
// of their packages.
package faulttest

import (
	"net"
	"sync"
	"testing"
)

// Proxy forwards TCP connections from Addr to a target, until told to
// fail: Refuse closes the port (connection refused), Freeze keeps every
// connection open but lets nothing through (a server that hangs), Sever
// cuts the open connections. Each fault lasts until it is undone.
type Proxy struct {
	Addr   string
	target string

	mu      sync.Mutex
	cond    *sync.Cond
	ln      net.Listener
	frozen  bool
	closed  bool
	conns   map[net.Conn]struct{}
	accepts int
}

// Start proxies a new loopback port to target and closes it when the test ends.
func Start(tb testing.TB, target string) *Proxy {
	tb.Helper()
	p, err := Listen(target)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.Close)
	return p
}

// Listen proxies a new loopback port to target.
func Listen(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, conns: map[net.Conn]struct{}{}}
	p.cond = sync.NewCond(&p.mu)
	p.ln = ln
	go p.serve(ln)
	return p, nil
}

// Refuse closes the port and every connection through it: new connections
// are refused until Pass.
func (p *Proxy) Refuse() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	p.severLocked()
}

// Sever cuts every open connection; new ones are taken as before.
func (p *Proxy) Sever() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.severLocked()
}

func (p *Proxy) severLocked() {
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

// Freeze lets nothing through, either way, on old or new connections,
// which stay open: the other side sees a server that hangs.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.frozen = true
}

// Pass ends every fault: the port takes connections again (on the same
// address) and bytes flow.
func (p *Proxy) Pass() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.frozen = false
	p.cond.Broadcast()
	if p.ln == nil && !p.closed {
		ln, err := net.Listen("tcp", p.Addr)
		if err != nil {
			return err
		}
		p.ln = ln
		go p.serve(ln)
	}
	return nil
}

// Accepted is how many connections the proxy took so far.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepts
}

// Close stops the proxy and cuts every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed, p.frozen = true, false
	p.cond.Broadcast()
	p.mu.Unlock()
	p.Refuse()
}

func (p *Proxy) serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.closed || p.ln != ln {
			p.mu.Unlock()
			_ = c.Close()
			return
		}
		p.accepts++
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		go p.forward(c)
	}
}

func (p *Proxy) forward(client net.Conn) {
	defer p.drop(client)
	if !p.waitThawed() {
		return
	}
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	p.mu.Lock()
	if _, open := p.conns[client]; !open {
		p.mu.Unlock()
		_ = server.Close()
		return
	}
	p.conns[server] = struct{}{}
	p.mu.Unlock()
	defer p.drop(server)
	done := make(chan struct{}, 2)
	go func() { p.pipe(server, client); done <- struct{}{} }()
	go func() { p.pipe(client, server); done <- struct{}{} }()
	<-done
}

// pipe copies from src to dst, holding each chunk while the proxy is frozen.
func (p *Proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.waitThawed() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			// Either side's end ends the connection: the protocols this
			// proxies (SMTP, PostgreSQL, HTTP) do not half-close.
			_ = dst.Close()
			_ = src.Close()
			return
		}
	}
}

// waitThawed blocks while the proxy is frozen; false once it is closed.
func (p *Proxy) waitThawed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.frozen && !p.closed {
		p.cond.Wait()
	}
	return !p.closed
}

func (p *Proxy) drop(c net.Conn) {
	_ = c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}
