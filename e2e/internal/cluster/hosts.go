package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
)

// LoopbackHostName returns a host name that /etc/hosts maps to addresses
// in 127.0.0.0/8 only, other than "localhost": the machine's own name
// first. Resolving it reads /etc/hosts and never asks a DNS server.
//
// The API server calls a webhook URL whose host is a loopback address or
// "localhost" over HTTP/2 when the webhook offers it, but a Service (and
// any other URL) over HTTP/1.1 only (k8s.io/apiserver
// pkg/util/webhook/client.go): a test that stands in for a Service must
// name its address.
func LoopbackHostName() (string, error) {
	f, err := os.Open("/etc/hosts")
	if err != nil {
		return "", fmt.Errorf("find a loopback host name: %w", err)
	}
	defer f.Close()
	loopbackOnly := map[string]bool{}
	var order []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		ip := net.ParseIP(fields[0])
		loop := ip != nil && ip.To4() != nil && ip.IsLoopback()
		for _, name := range fields[1:] {
			name = strings.ToLower(name)
			if prev, seen := loopbackOnly[name]; seen {
				loopbackOnly[name] = prev && loop
				continue
			}
			loopbackOnly[name] = loop
			order = append(order, name)
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("find a loopback host name: %w", err)
	}
	if h, err := os.Hostname(); err == nil && loopbackOnly[strings.ToLower(h)] && strings.ToLower(h) != "localhost" {
		return strings.ToLower(h), nil
	}
	for _, name := range order {
		if loopbackOnly[name] && name != "localhost" && net.ParseIP(name) == nil && !strings.HasSuffix(name, ".localhost") {
			return name, nil
		}
	}
	return "", errors.New("find a loopback host name: /etc/hosts maps no name but localhost to 127.0.0.0/8 only (add one, e.g. `127.0.0.1 <hostname>`)")
}
