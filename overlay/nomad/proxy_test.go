package nomad

import (
	"io"
	"net"
	"sync"
	"testing"
)

// cutProxy forwards TCP to a target until the test cuts it: Cut closes
// every open connection and refuses new ones until Restore.
type cutProxy struct {
	l      net.Listener
	target string
	mu     sync.Mutex
	conns  map[net.Conn]bool
	cut    bool
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{l: l, target: target, conns: map[net.Conn]bool{}}
	go p.serve()
	t.Cleanup(func() { _ = l.Close(); p.Cut() })
	return p
}

func (p *cutProxy) Addr() string { return "http://" + p.l.Addr().String() }

func (p *cutProxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		p.conns[c], p.conns[up] = true, true
		p.mu.Unlock()
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

func (p *cutProxy) pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// Cut drops every connection and refuses new ones.
func (p *cutProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
}

// Restore accepts connections again.
func (p *cutProxy) Restore() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}
