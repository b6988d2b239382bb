package server

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// This file bounds what one client can hold: the time to send a request
// body (bodyDeadline), and the connections open from one address at once
// (clientLimitListener). Idle keep-alive connections and slow headers are
// bounded by http.Server's IdleTimeout and ReadHeaderTimeout (Serve).

// bodyDeadline gives a request BodyTimeout to send its body: it sets the
// connection's read deadline and clears it once the body has been read to
// its end, so that a long plan does not run into it afterwards (an expired
// read deadline would cancel the request's context).
func bodyDeadline(w http.ResponseWriter, r *http.Request, timeout time.Duration) {
	if timeout <= 0 || r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return
	}
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(timeout)) != nil {
		return
	}
	r.Body = &deadlineBody{ReadCloser: r.Body, clear: func() { rc.SetReadDeadline(time.Time{}) }}
}

// deadlineBody calls clear when the body has been read to its end.
type deadlineBody struct {
	io.ReadCloser
	clear func()
	once  sync.Once
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.once.Do(b.clear)
	}
	return n, err
}

// clientLimitListener accepts at most max open connections from one client
// address (IP) at once; a connection beyond that is answered 429 and closed
// at once, before any request is read.
type clientLimitListener struct {
	net.Listener
	max      int
	onRefuse func() // counts refusals

	mu   sync.Mutex // protects open
	open map[string]int
}

func newClientLimitListener(ln net.Listener, max int, onRefuse func()) net.Listener {
	return &clientLimitListener{Listener: ln, max: max, onRefuse: onRefuse, open: map[string]int{}}
}

// tooManyConns is the whole answer to a connection over the bound.
func tooManyConns() string {
	body := `{"code":"` + CodeTooManyConns + `","error":"too many open connections from this address; close some and retry"}`
	return "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nConnection: close\r\nRetry-After: 1\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

// Accept returns the next connection within its client's bound.
func (l *clientLimitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		host := c.RemoteAddr().String()
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		l.mu.Lock()
		if l.open[host] >= l.max {
			l.mu.Unlock()
			l.onRefuse()
			c.SetWriteDeadline(time.Now().Add(time.Second))
			io.WriteString(c, tooManyConns())
			c.Close()
			continue
		}
		l.open[host]++
		l.mu.Unlock()
		return &countedConn{Conn: c, release: func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.open[host]--; l.open[host] <= 0 {
				delete(l.open, host)
			}
		}}, nil
	}
}

// countedConn releases its place in the client's count when closed.
type countedConn struct {
	net.Conn
	release func()
	once    sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}
