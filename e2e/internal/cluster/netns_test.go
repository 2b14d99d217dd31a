package cluster

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// echo serves one line back, prefixed, on ln until it is closed.
func echo(ln net.Listener, prefix string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			line, _ := bufio.NewReader(c).ReadString('\n')
			_, _ = c.Write([]byte(prefix + line))
		}()
	}
}

func roundTrip(t *testing.T, c net.Conn, msg string) string {
	t.Helper()
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, err := c.Write([]byte(msg + "\n"))
	require.NoError(t, err)
	got, err := bufio.NewReader(c).ReadString('\n')
	require.NoError(t, err)
	return strings.TrimSuffix(got, "\n")
}

// A listener in the namespace, even on the very address and port of one
// outside, is reachable only from inside; forwarders carry one address
// each way; a process started in it sees only its loopback interface.
func TestNetNS(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root (the end-to-end suite runs as root)")
	}
	ns, err := NewNetNS()
	require.NoError(t, err)
	defer ns.Close()

	outside, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer outside.Close()
	go echo(outside, "outside:")
	inside, err := ns.Listen(outside.Addr().String())
	require.NoError(t, err, "the same address is free in the namespace")
	defer inside.Close()
	go echo(inside, "inside:")

	c, err := net.Dial("tcp", outside.Addr().String())
	require.NoError(t, err)
	assert.Equal(t, "outside:a", roundTrip(t, c, "a"), "from the machine, the machine's listener answers")
	c, err = ns.DialContext(t.Context(), outside.Addr().String())
	require.NoError(t, err)
	assert.Equal(t, "inside:b", roundTrip(t, c, "b"), "from the namespace, the namespace's listener answers")

	// Into the namespace: a machine address forwarded to the inside one.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	in := Forward(ln, func(ctx context.Context) (net.Conn, error) { return ns.DialContext(ctx, outside.Addr().String()) })
	defer in.Close()
	c, err = net.Dial("tcp", in.Addr())
	require.NoError(t, err)
	assert.Equal(t, "inside:c", roundTrip(t, c, "c"))

	// Out of it: an inside address forwarded to a machine one.
	ln, err = ns.Listen("127.0.0.1:0")
	require.NoError(t, err)
	out := Forward(ln, func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", outside.Addr().String())
	})
	defer out.Close()
	c, err = ns.DialContext(t.Context(), out.Addr())
	require.NoError(t, err)
	assert.Equal(t, "outside:d", roundTrip(t, c, "d"))
	_, err = net.DialTimeout("tcp", out.Addr(), time.Second)
	if err == nil {
		// The port may be taken on the machine by chance; then it is not
		// the forwarder's (nothing it accepted).
		assert.Zero(t, out.Accepted.Load()-1, "the machine reached the namespace's listener")
	}

	// A process started in it has its loopback interface only.
	devs := filepath.Join(t.TempDir(), "dev")
	cmd := exec.Command("/bin/sh", "-c", "cat /proc/net/dev > "+devs)
	require.NoError(t, ns.Do(cmd.Run))
	b, err := os.ReadFile(devs)
	require.NoError(t, err)
	var ifaces []string
	for _, line := range strings.Split(string(b), "\n") {
		if name, _, ok := strings.Cut(line, ":"); ok {
			ifaces = append(ifaces, strings.TrimSpace(name))
		}
	}
	assert.Equal(t, []string{"lo"}, ifaces, "the child runs in the namespace: %s", b)
	assert.Equal(t, int64(0), in.Failed.Load()+out.Failed.Load())
}
