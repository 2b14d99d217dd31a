package cluster

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// echoBackend answers each line with its name and the line, and reports
// ready while ready is set.
type echoBackend struct {
	name  string
	ln    net.Listener
	ready atomic.Bool
	probe *httptest.Server
}

func newEchoBackend(t *testing.T, name string) *echoBackend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &echoBackend{name: name, ln: ln}
	b.ready.Store(true)
	b.probe = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !b.ready.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(b.probe.Close)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					if _, err := c.Write([]byte(name + ":" + sc.Text() + "\n")); err != nil {
						return
					}
				}
			}()
		}
	}()
	return b
}

func ask(t *testing.T, c net.Conn, line string) (string, error) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

// New connections go only to ready backends, spread over them; an open
// connection stays on its backend when that backend turns unready; a
// backend that is gone resets the connections sent to it.
func TestBalancerFollowsReadiness(t *testing.T) {
	a, b := newEchoBackend(t, "a"), newEchoBackend(t, "b")
	lb, err := StartBalancer(BalancerOptions{
		Backends: []BalancerBackend{
			{Addr: a.ln.Addr().String(), ReadyURL: a.probe.URL},
			{Addr: b.ln.Addr().String(), ReadyURL: b.probe.URL},
		},
		Probe:         http.DefaultClient,
		ProbeInterval: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	for i := range 2 {
		if err := lb.WaitReady(t.Context(), i, true, 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}

	seen := map[string]int{}
	for range 40 {
		c, err := net.Dial("tcp", lb.Addr)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ask(t, c, "x")
		_ = c.Close()
		if err != nil {
			t.Fatal(err)
		}
		seen[got[:1]]++
	}
	if seen["a"] == 0 || seen["b"] == 0 {
		t.Fatalf("connections not spread over both ready backends: %v", seen)
	}

	// A connection open on a, then a turns unready.
	var onA net.Conn
	for onA == nil {
		c, err := net.Dial("tcp", lb.Addr)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ask(t, c, "x")
		if err != nil {
			t.Fatal(err)
		}
		if got[:1] == "a" {
			onA = c
		} else {
			_ = c.Close()
		}
	}
	defer onA.Close()
	a.ready.Store(false)
	if err := lb.WaitReady(t.Context(), 0, false, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		c, err := net.Dial("tcp", lb.Addr)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ask(t, c, "y")
		_ = c.Close()
		if err != nil || got != "b:y\n" {
			t.Fatalf("a new connection while a is unready answered %q, %v; want b", got, err)
		}
	}
	if got, err := ask(t, onA, "still"); err != nil || got != "a:still\n" {
		t.Fatalf("the connection open on a answered %q, %v; want it kept on a", got, err)
	}

	// b gone but still ready (before its probe fails): a connection sent
	// to it is reset, not moved to another backend.
	a.ready.Store(true)
	if err := lb.WaitReady(t.Context(), 0, true, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	_ = b.ln.Close()
	resets := 0
	for range 20 {
		c, err := net.Dial("tcp", lb.Addr)
		if errors.Is(err, syscall.ECONNRESET) {
			resets++ // reset before connect returned
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		got, err := ask(t, c, "z")
		_ = c.Close()
		switch {
		case err == nil && got == "a:z\n":
		case err != nil && (errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)):
			resets++
		default:
			t.Fatalf("answered %q, %v", got, err)
		}
	}
	if resets == 0 || lb.Stats(1).Failed != int64(resets) {
		t.Fatalf("%d connections reset, balancer counted %d failed for b; want the same, not 0", resets, lb.Stats(1).Failed)
	}
}
