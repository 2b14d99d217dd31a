package webhook

import (
	"container/list"
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Connection admission on the webhook port.
//
// A connection is unproven from its accept until it has finished its TLS
// handshake and sent a byte of a request: until then it costs the server
// little and tells nothing, and anyone who can reach the port can open
// such connections faster than any timeout closes them. Unproven
// connections have a budget of their own (maxPending). Past it, a new
// connection from the source address that holds the most of them is
// closed at once, before any TLS work; one from a lighter source gets in
// and the oldest connection of the heaviest source is closed instead. A
// flood from a few addresses only pushes out its own connections, and it
// cannot turn its held connections into a stream of new handshakes by
// having them pushed out: a connection that is handshaking goes only if
// its own address holds as many unproven connections as any other.
//
// A proven connection (one that sent a request, or a trusted one) counts
// against total. Trusted connections come from a trusted source range
// (known at accept) or presented a client certificate the TLS
// configuration verified (known at the end of the handshake); only they
// may take the last reserved places of total. When a connection needs a
// place and there is none, the places are shared fairly between source
// addresses: the place comes from the untrusted address holding the most
// proven connections (of those holding the most, one with an idle
// connection), whatever the newcomer's address holds. That address gives
// up its connection idle longest; with none idle, the one that has been
// silent longest (a request in flight whose bytes stopped coming, as a
// slowloris's), if the newcomer's address holds at least two fewer. A
// lighter address's idle connection is never taken for an untrusted
// newcomer: the API server's one kept connection stays while others hold
// more. A trusted newcomer takes, in this order, an idle untrusted
// connection (of the address holding the most with one idle), an idle
// trusted one (idle longest), or the silent-longest busy one of the
// untrusted address holding the most, whatever its own address holds. So
// addresses that fill every place cannot keep out, or push out, another
// address with fewer: the API server, whose source is not trusted in a
// default install, always gets and keeps its share. A connection is
// refused only when every place is taken and its own address holds as
// many as any (less one, when they are all busy).

// Reasons an idle connection was evicted (the label of
// yunikorn_userinfo_connections_evicted_total).
const (
	// EvictedHandshake: its TLS handshake had not finished (a bare TCP
	// connection, or a handshake left half done).
	EvictedHandshake = "handshake"
	// EvictedBeforeRequest: handshake done, no request sent yet.
	EvictedBeforeRequest = "before_request"
	// EvictedKeepAlive: idle between requests.
	EvictedKeepAlive = "keepalive"
	// EvictedBusy: a request in flight, from the address holding the most
	// places, for a newcomer from an address holding fewer.
	EvictedBusy = "busy"
)

// EvictionReasons are all the reasons of OnConnEvicted.
var EvictionReasons = []string{EvictedHandshake, EvictedBeforeRequest, EvictedKeepAlive, EvictedBusy}

// Connection classes.
const (
	untrusted = 0
	trusted   = 1
)

// errNoRoom is what a Read returns on a connection that was refused when
// it sent its first request byte.
var errNoRoom = errors.New("connection refused: every connection place is taken by requests in flight")

// admitConn is an accepted TCP connection under admission.
type admitConn struct {
	net.Conn
	t  *connTable
	ip netip.Addr
	// countedPerClient: the connection counts in t.byClient (not from a
	// trusted source range).
	countedPerClient bool
	// watch: a Read that returns data must tell the table (the connection
	// is unproven after its handshake, or an idle HTTP/1 connection).
	watch     atomic.Bool
	closeOnce sync.Once
	// lastRead is when the connection last sent a byte (UnixNano).
	lastRead atomic.Int64

	// Under t.mu.
	class      int
	proven     bool
	handshaken bool
	requested  bool
	h2         bool
	gone       bool
	in         *list.List // src.conns, t.idle[class] or nil (busy)
	elem       *list.Element
	src        *source // while unproven
	// mine is c's element in t.provenBy[ip].conns while it is proven and
	// untrusted.
	mine *list.Element
}

// Read watches for the first byte of a request.
func (c *admitConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.lastRead.Store(time.Now().UnixNano())
		if c.watch.Load() && !c.t.busy(c) {
			return 0, errNoRoom
		}
	}
	return n, err
}

// Close gives the connection's place back, once.
func (c *admitConn) Close() error {
	err := c.Conn.Close()
	c.closeOnce.Do(func() { c.t.remove(c) })
	return err
}

// kill closes the TCP connection with a reset: nothing lingers in
// TIME_WAIT on this side, and the table has already let go of it.
func (c *admitConn) kill() {
	if tc, ok := c.Conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Conn.Close()
}

// connTable counts the connections of one listener by class and state.
type connTable struct {
	perClient, total, reserved, maxPending int // limits; 0: none
	trustedSources                         []netip.Prefix
	trustCerts                             bool
	onRefuse, onEvict                      func(reason string)

	mu       sync.Mutex
	byClient map[netip.Addr]int
	proven   [2]int
	idle     [2]list.List
	// The unproven connections, by source address, and the sources by
	// how many they hold.
	unproven int
	sources  map[netip.Addr]*source
	byCount  map[int]map[*source]struct{}
	heaviest int
	// provenBy holds the proven untrusted connections of each source
	// address, for the fair share of places once every one is taken.
	provenBy map[netip.Addr]*holder
}

// holder is the proven untrusted connections of one address, and how many
// of them are idle.
type holder struct {
	conns list.List
	idle  int
}

// source holds the unproven connections of one address, oldest first.
type source struct {
	ip    netip.Addr
	conns list.List
}

// trustedSource reports whether ip is in a trusted source range.
func (t *connTable) trustedSource(ip netip.Addr) bool {
	for _, p := range t.trustedSources {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// remoteIP is the address raw came from, without formatting it.
func remoteIP(raw net.Conn) netip.Addr {
	if a, ok := raw.RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort().Addr().Unmap()
	}
	return clientIP(raw.RemoteAddr().String())
}

// victims are connections evicted under the lock, closed and reported
// after it.
type victims struct {
	conns   []*admitConn
	reasons []string
}

func (v *victims) add(c *admitConn, reason string) {
	v.conns = append(v.conns, c)
	v.reasons = append(v.reasons, reason)
}

func (v *victims) close(onEvict func(string)) {
	for i, c := range v.conns {
		c.kill()
		onEvict(v.reasons[i])
	}
}

// accept admits raw, or returns why not (refusedPerClient or
// refusedTotal).
func (t *connTable) accept(raw net.Conn) (*admitConn, string) {
	c := &admitConn{Conn: raw, t: t, ip: remoteIP(raw)}
	var v victims
	refused := func() string {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.trustedSource(c.ip) {
			c.class = trusted
			if !t.makeRoom(trusted, c.ip, &v) {
				return refusedTotal
			}
			t.prove(c)
			t.setIdle(c)
			return ""
		}
		if n := t.byClient[c.ip]; t.perClient > 0 && n >= t.perClient {
			return refusedPerClient
		}
		if t.maxPending > 0 && t.unproven >= t.maxPending {
			mine := 0
			if s := t.sources[c.ip]; s != nil {
				mine = s.conns.Len()
			}
			src := t.heaviestSource()
			if src == nil || mine >= t.heaviest {
				// From the heaviest source itself: the newcomer goes, before
				// any TLS work, rather than one its source already paid a
				// handshake for (and would open again).
				return shedPending
			}
			t.evict(src.conns.Front().Value.(*admitConn), &v)
		}
		t.byClient[c.ip]++
		c.countedPerClient = true
		t.pend(c)
		return ""
	}()
	v.close(t.onEvict)
	switch refused {
	case "":
		return c, ""
	case shedPending:
		t.onEvict(EvictedHandshake)
	default:
		t.onRefuse(refused)
	}
	return nil, refused
}

// shedPending is accept's answer for a newcomer closed because the
// unproven budget is full and its source holds the most of it; it counts
// as an eviction before the handshake.
const shedPending = "shed"

// handshakeDone records c's finished handshake: verified tells whether it
// verified a client certificate, h2 whether it speaks HTTP/2. It returns
// false when c was evicted meanwhile, or trusted but refused.
func (t *connTable) handshakeDone(c *admitConn, verified, h2 bool) bool {
	var v victims
	refused := false
	defer func() {
		v.close(t.onEvict)
		if refused {
			t.onRefuse(refusedTotal)
		}
	}()
	t.mu.Lock()
	defer t.mu.Unlock()
	if c.gone {
		return false
	}
	c.handshaken, c.h2 = true, h2
	switch {
	case c.proven:
		// From a trusted source: idle until its first request byte.
		c.watch.Store(!h2)
	case verified && t.trustCerts:
		t.move(c, nil)
		c.class = trusted
		if !t.makeRoom(trusted, c.ip, &v) {
			t.drop(c)
			refused = true
			return false
		}
		t.prove(c)
		t.setIdle(c)
	default:
		// Unproven until it sends a request byte.
		c.watch.Store(true)
	}
	return true
}

// busy records that c has sent something: an unproven connection becomes
// proven (and untrusted), an idle one busy. It returns false when c was
// closed meanwhile or, proven now, finds no place: then it is closed.
func (t *connTable) busy(c *admitConn) bool {
	var v victims
	gone, refused := func() (gone, refused bool) {
		t.mu.Lock()
		defer t.mu.Unlock()
		if c.gone {
			return true, false
		}
		if !c.handshaken {
			// A byte of its handshake: it stays as it is.
			return false, false
		}
		c.watch.Store(false)
		c.requested = true
		t.move(c, nil)
		if c.proven {
			return false, false
		}
		if !t.makeRoom(untrusted, c.ip, &v) {
			t.drop(c)
			return true, true
		}
		t.prove(c)
		return false, false
	}()
	v.close(t.onEvict)
	if refused {
		// Counted first, so that whoever sees it closed sees it counted.
		t.onRefuse(refusedTotal)
		c.kill()
	}
	return !gone
}

// idleAgain records that c has no request in flight any more.
func (t *connTable) idleAgain(c *admitConn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c.gone || !c.proven {
		return
	}
	t.setIdle(c)
	c.watch.Store(!c.h2)
}

// remove forgets c (closed).
func (t *connTable) remove(c *admitConn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !c.gone {
		t.drop(c)
	}
}

// handshaking returns the connections whose handshake has not finished.
func (t *connTable) handshaking() []*admitConn {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*admitConn
	collect := func(l *list.List) {
		for e := l.Front(); e != nil; e = e.Next() {
			if c := e.Value.(*admitConn); !c.handshaken {
				out = append(out, c)
			}
		}
	}
	for _, s := range t.sources {
		collect(&s.conns)
	}
	collect(&t.idle[trusted])
	return out
}

// open returns the connections counted: proven and unproven.
func (t *connTable) open() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.proven[untrusted] + t.proven[trusted] + t.unproven
}

// The methods below run under t.mu.

// makeRoom makes a place for a proven connection of class from ip,
// evicting a connection if need be, as the fair share says (see the top
// of this file); false: there is none to evict.
func (t *connTable) makeRoom(class int, ip netip.Addr, v *victims) bool {
	if t.total <= 0 {
		return true
	}
	all := t.proven[untrusted] + t.proven[trusted]
	if class == untrusted {
		if all < t.total && t.proven[untrusted] < t.total-t.reserved {
			return true
		}
	} else if all < t.total {
		return true
	}
	if class == trusted {
		if h := t.heaviestProven(true); h != nil {
			t.evict(longestIdle(h, &t.idle[untrusted]), v)
			return true
		}
		if e := t.idle[trusted].Front(); e != nil {
			t.evict(e.Value.(*admitConn), v)
			return true
		}
		if h := t.heaviestProven(false); h != nil {
			t.evict(silentLongest(h), v)
			return true
		}
		return false
	}
	h := t.heaviestProven(false)
	switch {
	case h == nil:
		return false
	case h.idle > 0:
		t.evict(longestIdle(h, &t.idle[untrusted]), v)
		return true
	case h.conns.Len() > t.provenOf(ip)+1:
		t.evict(silentLongest(h), v)
		return true
	}
	return false
}

// heaviestProven is the proven untrusted connections of an address
// holding the most of them, preferring one with an idle connection among
// those; withIdle: of the addresses holding an idle one only. nil when
// there is none. It runs only when every place is taken.
func (t *connTable) heaviestProven(withIdle bool) *holder {
	var h *holder
	for _, l := range t.provenBy {
		if withIdle && l.idle == 0 {
			continue
		}
		if h == nil || l.conns.Len() > h.conns.Len() || (l.conns.Len() == h.conns.Len() && h.idle == 0 && l.idle > 0) {
			h = l
		}
	}
	return h
}

// provenOf is how many proven untrusted connections ip holds.
func (t *connTable) provenOf(ip netip.Addr) int {
	if l := t.provenBy[ip]; l != nil {
		return l.conns.Len()
	}
	return 0
}

// longestIdle is the connection of h in idle that sent its last byte
// the longest ago; h has one.
func longestIdle(h *holder, idle *list.List) *admitConn {
	var out *admitConn
	for e := h.conns.Front(); e != nil; e = e.Next() {
		if c := e.Value.(*admitConn); c.in == idle && (out == nil || c.lastRead.Load() < out.lastRead.Load()) {
			out = c
		}
	}
	return out
}

// silentLongest is the connection of h that sent its last byte the
// longest ago.
func silentLongest(h *holder) *admitConn {
	var out *admitConn
	for e := h.conns.Front(); e != nil; e = e.Next() {
		if c := e.Value.(*admitConn); out == nil || c.lastRead.Load() < out.lastRead.Load() {
			out = c
		}
	}
	return out
}

// evict drops c and adds it to v, with the reason.
func (t *connTable) evict(c *admitConn, v *victims) {
	reason := EvictedKeepAlive
	switch {
	case c.proven && c.in == nil:
		reason = EvictedBusy
	case !c.handshaken:
		reason = EvictedHandshake
	case !c.requested:
		reason = EvictedBeforeRequest
	}
	t.drop(c)
	v.add(c, reason)
}

// prove counts c as proven in its class (busy: in no list).
func (t *connTable) prove(c *admitConn) {
	c.proven = true
	t.proven[c.class]++
	if c.class == untrusted {
		if t.provenBy == nil {
			t.provenBy = map[netip.Addr]*holder{}
		}
		l := t.provenBy[c.ip]
		if l == nil {
			l = &holder{}
			t.provenBy[c.ip] = l
		}
		c.mine = l.conns.PushBack(c)
		if c.lastRead.Load() == 0 {
			c.lastRead.Store(time.Now().UnixNano())
		}
	}
}

// setIdle puts c at the back of its class's idle list.
func (t *connTable) setIdle(c *admitConn) {
	t.move(c, &t.idle[c.class])
}

// move takes c out of its list and, unless to is nil, puts it at the back
// of to.
func (t *connTable) move(c *admitConn, to *list.List) {
	if c.in != nil {
		if c.in == &t.idle[untrusted] {
			t.provenBy[c.ip].idle--
		}
		c.in.Remove(c.elem)
		c.in, c.elem = nil, nil
	}
	if s := c.src; s != nil {
		c.src = nil
		t.unproven--
		n := s.conns.Len()
		t.recount(s, n+1, n)
		if n == 0 {
			delete(t.sources, s.ip)
		}
	}
	if to != nil {
		c.in, c.elem = to, to.PushBack(c)
		if to == &t.idle[untrusted] {
			t.provenBy[c.ip].idle++
		}
	}
}

// pend adds c to the unproven connections of its source.
func (t *connTable) pend(c *admitConn) {
	s := t.sources[c.ip]
	if s == nil {
		s = &source{ip: c.ip}
		t.sources[c.ip] = s
	}
	t.move(c, &s.conns)
	c.src = s
	t.unproven++
	n := s.conns.Len()
	t.recount(s, n-1, n)
}

// recount files s under its new count of unproven connections.
func (t *connTable) recount(s *source, from, to int) {
	if from > 0 {
		b := t.byCount[from]
		delete(b, s)
		if len(b) == 0 {
			delete(t.byCount, from)
			if t.heaviest == from {
				// Counts change by one: from-1 holds s, or nobody is left.
				t.heaviest = from - 1
			}
		}
	}
	if to > 0 {
		b := t.byCount[to]
		if b == nil {
			b = map[*source]struct{}{}
			t.byCount[to] = b
		}
		b[s] = struct{}{}
		t.heaviest = max(t.heaviest, to)
	}
}

// heaviestSource is a source holding the most unproven connections, nil
// when there are none.
func (t *connTable) heaviestSource() *source {
	for s := range t.byCount[t.heaviest] {
		return s
	}
	return nil
}

// drop forgets c: out of its list, its counts given back.
func (t *connTable) drop(c *admitConn) {
	t.move(c, nil)
	if c.proven {
		t.proven[c.class]--
		c.proven = false
	}
	if c.mine != nil {
		l := t.provenBy[c.ip]
		l.conns.Remove(c.mine)
		c.mine = nil
		if l.conns.Len() == 0 {
			delete(t.provenBy, c.ip)
		}
	}
	if c.countedPerClient {
		if n := t.byClient[c.ip]; n > 1 {
			t.byClient[c.ip] = n - 1
		} else {
			delete(t.byClient, c.ip)
		}
		c.countedPerClient = false
	}
	c.watch.Store(false)
	c.gone = true
}

// acceptLoops is how many goroutines accept on the webhook port.
const acceptLoops = 4

// admitListener accepts TCP connections, admits them through its table,
// completes their TLS handshakes itself (each in its own goroutine, with
// a deadline) and hands http.Server finished *tls.Conn, so that what a
// handshake proves is known before the connection is served.
type admitListener struct {
	inner            net.Listener
	t                *connTable
	tlsConfig        *tls.Config
	handshakeTimeout time.Duration
	log              *slog.Logger

	ready     chan *tls.Conn
	errc      chan error
	ctx       context.Context
	cancel    context.CancelFunc
	startOnce sync.Once
}

func newAdmitListener(inner net.Listener, t *connTable, tlsConfig *tls.Config, handshakeTimeout time.Duration, log *slog.Logger) *admitListener {
	ctx, cancel := context.WithCancel(context.Background())
	return &admitListener{inner: inner, t: t, tlsConfig: tlsConfig, handshakeTimeout: handshakeTimeout, log: log,
		ready: make(chan *tls.Conn), errc: make(chan error), ctx: ctx, cancel: cancel}
}

// Accept returns the next connection whose handshake finished.
func (l *admitListener) Accept() (net.Conn, error) {
	l.startOnce.Do(func() {
		// Accepting is serialized on the socket, but admitting and closing
		// are not: several loops keep the kernel's accept queue short in a
		// flood, where a new connection waits behind everything queued.
		for range acceptLoops {
			go l.acceptLoop()
		}
	})
	select {
	case c := <-l.ready:
		return c, nil
	case err := <-l.errc:
		return nil, err
	case <-l.ctx.Done():
		return nil, net.ErrClosed
	}
}

// Close stops accepting; connections still handshaking are closed.
func (l *admitListener) Close() error {
	l.cancel()
	err := l.inner.Close()
	for _, c := range l.t.handshaking() {
		c.kill()
	}
	return err
}

func (l *admitListener) Addr() net.Addr { return l.inner.Addr() }

func (l *admitListener) acceptLoop() {
	for {
		raw, err := l.inner.Accept()
		if err != nil {
			// http.Server backs off on temporary errors and stops on
			// others, closing the listener.
			select {
			case l.errc <- err:
			case <-l.ctx.Done():
				return
			}
			continue
		}
		c, refused := l.t.accept(raw)
		if refused != "" {
			if tc, ok := raw.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			_ = raw.Close()
			continue
		}
		go l.handshake(c)
	}
}

// handshake finishes c's TLS handshake within the handshake timeout. It
// sets a deadline rather than passing a context: a context per handshake
// derived from the listener's made thousands of goroutines queue on the
// parent's lock in a flood; Close closes the handshakes in progress
// instead.
func (l *admitListener) handshake(c *admitConn) {
	_ = c.SetDeadline(time.Now().Add(l.handshakeTimeout))
	tc := tls.Server(c, l.tlsConfig)
	if err := tc.Handshake(); err != nil {
		l.log.Debug("TLS handshake failed", "remote", c.RemoteAddr().String(), "error", err)
		_ = c.Close()
		return
	}
	_ = c.SetDeadline(time.Time{})
	cs := tc.ConnectionState()
	if !l.t.handshakeDone(c, len(cs.VerifiedChains) > 0, cs.NegotiatedProtocol == "h2") {
		c.kill()
		_ = c.Close()
		return
	}
	select {
	case l.ready <- tc:
	case <-l.ctx.Done():
		_ = c.Close()
	}
}

// connState follows http.Server's view of a connection: a request started
// (which proves an unproven connection, if its bytes arrived with the end
// of the handshake) or none in flight any more.
func (l *admitListener) connState(nc net.Conn, state http.ConnState) {
	tc, ok := nc.(*tls.Conn)
	if !ok {
		return
	}
	c, ok := tc.NetConn().(*admitConn)
	if !ok {
		return
	}
	switch state {
	case http.StateActive:
		l.t.busy(c)
	case http.StateIdle:
		l.t.idleAgain(c)
	}
}
