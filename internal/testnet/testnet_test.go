package testnet

import (
	"net"
	"testing"
)

func TestFreeAddrs_distinctAndBindable(t *testing.T) {
	addrs := FreeAddrs(t, 8)
	seen := map[string]bool{}
	for _, a := range addrs {
		if seen[a] {
			t.Fatalf("%s returned twice in %v", a, addrs)
		}
		seen[a] = true
		l, err := net.Listen("tcp", a)
		if err != nil {
			t.Fatalf("%s is not free: %v", a, err)
		}
		_ = l.Close()
	}
}
