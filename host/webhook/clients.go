package webhook

import (
	"net"
	"net/netip"
	"sync"
)

// clientIP is the address a connection or request came from, the key of
// the per-client limits: an IPv4 address seen through an IPv6 socket is
// the IPv4 address. The zero Addr stands for a peer whose address cannot
// be read (none of the listeners here produce one).
func clientIP(addr string) netip.Addr {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// clientCounts counts what each client holds (connections, requests) and
// in total, against a per-client and a total limit.
type clientCounts struct {
	perClient, total int // limits; 0: none

	mu       sync.Mutex
	byClient map[netip.Addr]int
	all      int
}

func newClientCounts(perClient, total int) *clientCounts {
	return &clientCounts{perClient: perClient, total: total, byClient: map[netip.Addr]int{}}
}

// Reasons a clientCounts refuses.
const (
	refusedPerClient = "per_client"
	refusedTotal     = "total"
)

// acquire counts one more for ip, or returns why it may not: the client
// already holds perClient, or all clients together hold total.
func (c *clientCounts) acquire(ip netip.Addr) (refused string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.byClient[ip]
	switch {
	case c.perClient > 0 && n >= c.perClient:
		return refusedPerClient
	case c.total > 0 && c.all >= c.total:
		return refusedTotal
	}
	c.byClient[ip] = n + 1
	c.all++
	return ""
}

// release gives back one acquired for ip.
func (c *clientCounts) release(ip netip.Addr) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.byClient[ip]; n > 1 {
		c.byClient[ip] = n - 1
	} else {
		delete(c.byClient, ip)
	}
	c.all--
}

// held returns what ip holds and what all clients hold.
func (c *clientCounts) held(ip netip.Addr) (client, all int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byClient[ip], c.all
}

// limitListener accepts at most perClient connections from one address
// and total at once. A connection past a limit is closed as soon as it is
// accepted, before any TLS work, and reported to onRefuse; Accept goes on
// with the next one, so that other clients are never kept waiting behind
// it.
type limitListener struct {
	net.Listener
	counts   *clientCounts
	onRefuse func(reason string)
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := clientIP(c.RemoteAddr().String())
		if reason := l.counts.acquire(ip); reason != "" {
			if tc, ok := c.(*net.TCPConn); ok {
				// A reset rather than a FIN: nothing of the connection
				// lingers in TIME_WAIT on this side.
				_ = tc.SetLinger(0)
			}
			_ = c.Close()
			l.onRefuse(reason)
			continue
		}
		return &limitConn{Conn: c, release: func() { l.counts.release(ip) }}, nil
	}
}

// limitConn gives its place back once, when it is closed.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
