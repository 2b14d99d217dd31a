package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// NetNS is a network namespace of its own, as a Pod has: its only
// interface is a loopback one, up, so a program started in it that listens
// on every interface (":9089") is reachable from nowhere but the namespace
// itself, and can reach nothing outside it (no route, no DNS server). The
// harness connects it to the machine's loopback through forwarders it
// chooses (Listen and Dial, below), one address at a time.
//
// Creating one needs CAP_SYS_ADMIN (the suite runs as root). Nothing is
// named or mounted: the namespace lives as long as its file descriptor or
// a process in it, so a crashed run leaves nothing behind.
type NetNS struct {
	f      *os.File
	closed atomic.Bool
}

// NewNetNS creates a network namespace and brings its loopback interface
// up.
func NewNetNS() (*NetNS, error) {
	type result struct {
		f   *os.File
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// The namespace is made by the thread that calls unshare; it goes
		// back to the original one before the thread is given back, or the
		// thread ends with this goroutine.
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("create a network namespace: open the current one: %w", err)}
			return
		}
		defer orig.Close()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("create a network namespace: unshare: %w (the suite needs root)", err)}
			return
		}
		f, err := os.Open("/proc/thread-self/ns/net")
		if err == nil {
			err = loopbackUp()
		}
		if errBack := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); errBack != nil {
			// The thread stays locked and ends with this goroutine.
			if f != nil {
				_ = f.Close()
			}
			ch <- result{err: fmt.Errorf("create a network namespace: return to the original one: %w", errBack)}
			return
		}
		runtime.UnlockOSThread()
		if err != nil {
			if f != nil {
				_ = f.Close()
			}
			ch <- result{err: fmt.Errorf("create a network namespace: %w", err)}
			return
		}
		ch <- result{f: f}
	}()
	r := <-ch
	if r.err != nil {
		return nil, r.err
	}
	return &NetNS{f: r.f}, nil
}

// loopbackUp sets the flag IFF_UP on "lo" of the calling thread's network
// namespace (what `ip link set lo up` does).
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("bring lo up: socket: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("bring lo up: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring lo up: read its flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring lo up: set its flags: %w", err)
	}
	return nil
}

// Do runs fn on an OS thread that is in the namespace: sockets fn creates
// belong to it, and so do processes it starts (a child inherits the network
// namespace of the thread that forks it). Whatever fn leaves running (a
// listener, a process) stays in the namespace after Do returns.
func (n *NetNS) Do(fn func() error) error {
	if n.closed.Load() {
		return errors.New("network namespace: closed")
	}
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- fmt.Errorf("network namespace: open the current one: %w", err)
			return
		}
		defer orig.Close()
		if err := unix.Setns(int(n.f.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- fmt.Errorf("network namespace: enter: %w", err)
			return
		}
		fnErr := fn()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			// Never give a thread in the wrong namespace back to the
			// runtime: it ends with this goroutine.
			ch <- errors.Join(fnErr, fmt.Errorf("network namespace: leave: %w", err))
			return
		}
		runtime.UnlockOSThread()
		ch <- fnErr
	}()
	return <-ch
}

// Listen listens on a TCP address inside the namespace.
func (n *NetNS) Listen(addr string) (net.Listener, error) {
	var ln net.Listener
	err := n.Do(func() error {
		var err error
		ln, err = net.Listen("tcp", addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listen on %s in the network namespace: %w", addr, err)
	}
	return ln, nil
}

// DialContext connects to a TCP address inside the namespace.
func (n *NetNS) DialContext(ctx context.Context, addr string) (net.Conn, error) {
	var c net.Conn
	err := n.Do(func() error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, "tcp", addr)
		return err
	})
	return c, err
}

// Close drops the harness's reference to the namespace; it disappears once
// no process and no socket is left in it.
func (n *NetNS) Close() error {
	if n.closed.Swap(true) {
		return nil
	}
	return n.f.Close()
}

// Forwarder accepts TCP connections on one listener and joins each to a
// connection its dial function opens, copying both ways: a stand-in for
// the piece of a cluster network that carries one address to another (a
// Service's port to a Pod's, a Pod to the API server).
type Forwarder struct {
	ln     net.Listener
	dial   func(ctx context.Context) (net.Conn, error)
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// Accepted counts the connections accepted, Failed those whose dial
	// failed (the client's connection is then reset).
	Accepted, Failed atomic.Int64
}

// Forward starts forwarding from ln; Close stops it.
func Forward(ln net.Listener, dial func(ctx context.Context) (net.Conn, error)) *Forwarder {
	ctx, cancel := context.WithCancel(context.Background())
	f := &Forwarder{ln: ln, dial: dial, ctx: ctx, cancel: cancel}
	f.wg.Add(1)
	go f.accept()
	return f
}

// Addr is the address the forwarder listens on.
func (f *Forwarder) Addr() string { return f.ln.Addr().String() }

func (f *Forwarder) accept() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.Accepted.Add(1)
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			f.join(c.(*net.TCPConn))
		}()
	}
}

func (f *Forwarder) join(client *net.TCPConn) {
	conn, err := f.dial(f.ctx)
	if err != nil {
		f.Failed.Add(1)
		_ = client.SetLinger(0)
		_ = client.Close()
		return
	}
	splice(f.ctx, client, conn.(*net.TCPConn))
}

// Close stops listening, ends the connections in flight and waits for the
// forwarder's goroutines.
func (f *Forwarder) Close() error {
	err := f.ln.Close()
	f.cancel()
	f.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
