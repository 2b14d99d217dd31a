// Package testnet picks free loopback ports for the tests and benchmarks
// that start a server in another process (serve, the scheduler, a
// registry), which must be told its address before it listens.
package testnet

import (
	"fmt"
	"net"
	"strconv"
	"testing"
)

// FreePorts returns n distinct TCP ports on 127.0.0.1 that were free a
// moment ago. Every listener is held until all are chosen, so the ports
// differ; another process could take one before the server binds it, and
// then that server fails with its own message.
func FreePorts(n int) ([]int, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("pick a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// FreeAddrs returns n distinct 127.0.0.1:port addresses from FreePorts,
// failing the test when none can be had.
func FreeAddrs(t testing.TB, n int) []string {
	t.Helper()
	ports, err := FreePorts(n)
	if err != nil {
		t.Fatal(err)
	}
	addrs := make([]string, n)
	for i, p := range ports {
		addrs[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	}
	return addrs
}
