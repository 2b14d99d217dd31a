package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// conn is one keep-alive HTTP/1.1 connection that its worker alone writes
// and reads, in its own goroutine. net/http's client hands every request
// to the connection's two goroutines and back, which costs the load
// generator a few tens of microseconds of CPU per request; on two CPUs
// shared with the server, that is throughput taken from the server being
// measured. The requests are the same bytes on the wire: POST, HTTP/1.1,
// keep-alive, TLS as the options say.
type conn struct {
	target *endpoint
	nc     net.Conn
	br     *bufio.Reader
	bw     *bufio.Writer
}

// endpoint is where and how the connections of a run connect.
type endpoint struct {
	addr    string // host:port
	tls     *tls.Config
	head    []byte // the request line and headers up to Content-Length's value
	timeout time.Duration
}

func newEndpoint(rawURL string, tlsConfig *tls.Config, timeout time.Duration) (*endpoint, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("parse url: %w", err)
	}
	e := &endpoint{addr: u.Host, timeout: timeout}
	if u.Port() == "" {
		e.addr = net.JoinHostPort(u.Hostname(), map[string]string{"https": "443", "http": "80"}[u.Scheme])
	}
	if u.Scheme == "https" {
		e.tls = tlsConfig.Clone()
		if e.tls == nil {
			e.tls = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		if e.tls.ServerName == "" {
			e.tls.ServerName = u.Hostname()
		}
		e.tls.NextProtos = []string{"http/1.1"}
	}
	e.head = []byte("POST " + u.RequestURI() + " HTTP/1.1\r\nHost: " + u.Host +
		"\r\nUser-Agent: loadgen\r\nContent-Type: application/json\r\nAccept: application/json\r\nContent-Length: ")
	return e, nil
}

// dial connects, with the TLS handshake done.
func (e *endpoint) dial(ctx context.Context) (*conn, error) {
	d := &net.Dialer{Timeout: e.timeout, KeepAlive: 30 * time.Second}
	var nc net.Conn
	var err error
	if e.tls != nil {
		nc, err = (&tls.Dialer{NetDialer: d, Config: e.tls}).DialContext(ctx, "tcp", e.addr)
	} else {
		nc, err = d.DialContext(ctx, "tcp", e.addr)
	}
	if err != nil {
		return nil, err
	}
	return &conn{target: e, nc: nc, br: bufio.NewReaderSize(nc, 16<<10), bw: bufio.NewWriterSize(nc, 16<<10)}, nil
}

// post sends body and reads the answer into dst (reset first), at most
// limit+1 bytes of it. keep is false when the connection cannot carry
// another request.
func (c *conn) post(ctx context.Context, body []byte, dst *bytes.Buffer, limit int64) (status int, keep bool, err error) {
	deadline := time.Now().Add(c.target.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := c.nc.SetDeadline(deadline); err != nil {
		return 0, false, err
	}
	c.bw.Write(c.target.head)
	c.bw.WriteString(strconv.Itoa(len(body)))
	c.bw.WriteString("\r\n\r\n")
	c.bw.Write(body)
	if err := c.bw.Flush(); err != nil {
		return 0, false, fmt.Errorf("send: %w", err)
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return 0, false, fmt.Errorf("read answer: %w", err)
	}
	dst.Reset()
	_, err = dst.ReadFrom(io.LimitReader(resp.Body, limit+1))
	if err == nil {
		// Whatever is left of an oversized answer is drained so that the
		// connection can go on.
		_, err = io.Copy(io.Discard, resp.Body)
	}
	resp.Body.Close()
	if err != nil {
		return resp.StatusCode, false, fmt.Errorf("read answer: %w", err)
	}
	return resp.StatusCode, !resp.Close, nil
}

func (c *conn) close() { _ = c.nc.Close() }
