package fence

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"
)

// conn is one connection to one server: a socket, its buffers, the RESP
// reader. It is used by one goroutine at a time.
type conn struct {
	addr   string
	nc     net.Conn
	br     *bufio.Reader
	rd     respReader
	wbuf   []byte
	dead   bool // an I/O error happened: never reuse
	reused bool // taken from the idle list (the server may have closed it meanwhile)
}

// dialer holds what opening a connection needs (shared by Client and Store).
type dialer struct {
	connect  time.Duration // longest TCP connect + TLS handshake + AUTH (0: up to the deadline)
	tls      *tls.Config
	user     string
	password string
}

// splitAddr turns "unix:/path" into ("unix", "/path") and "host:port" into
// ("tcp", "host:port").
func splitAddr(addr string) (network, address string) {
	if strings.HasPrefix(addr, "unix:") {
		return "unix", addr[len("unix:"):]
	}
	return "tcp", addr
}

// errDial marks a failure to connect (nothing was sent).
type dialError struct {
	addr  string
	cause error
	auth  bool // the login was refused: do not retry
}

func (e *dialError) Error() string { return e.addr + ": " + e.cause.Error() }
func (e *dialError) Unwrap() error { return e.cause }

// dial connects, does the TLS handshake and the AUTH, before deadline.
func (d *dialer) dial(ctx context.Context, addr string, deadline time.Time) (*conn, error) {
	if d.connect > 0 {
		if cd := time.Now().Add(d.connect); cd.Before(deadline) {
			deadline = cd
		}
	}
	network, address := splitAddr(addr)
	nd := net.Dialer{Deadline: deadline}
	nc, err := nd.DialContext(ctx, network, address)
	if err != nil {
		return nil, &dialError{addr: addr, cause: err}
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	if d.tls != nil && network == "tcp" {
		cfg := d.tls
		if cfg.ServerName == "" {
			host, _, err := net.SplitHostPort(address)
			if err == nil {
				cfg = cfg.Clone()
				cfg.ServerName = host
			}
		}
		tc := tls.Client(nc, cfg)
		hctx, cancel := context.WithDeadline(ctx, deadline)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			nc.Close()
			return nil, &dialError{addr: addr, cause: fmt.Errorf("TLS: %w", err)}
		}
		nc = tc
	}
	c := &conn{addr: addr, nc: nc, br: bufio.NewReaderSize(nc, 16<<10)}
	c.rd.r = c.br
	if d.password != "" {
		args := []string{"AUTH", d.password}
		if d.user != "" {
			args = []string{"AUTH", d.user, d.password}
		}
		v, err := c.roundTrip(ctx, deadline, args)
		if err != nil {
			c.close()
			return nil, &dialError{addr: addr, cause: err}
		}
		if v.Kind == KindError {
			c.close()
			serr := parseError(v.Str)
			if errors.Is(serr, ErrLimit) {
				// -LIMIT max clients: not a refused login; retried.
				return nil, &dialError{addr: addr, cause: serr}
			}
			// The server's text, never the password.
			return nil, &dialError{addr: addr, auth: true, cause: newErr(ErrAuth, "AUTH", serr)}
		}
	}
	return c, nil
}

func (c *conn) close() {
	c.dead = true
	c.nc.Close()
}

// roundTrip sends one command and reads its reply, giving up at deadline or
// when ctx is done (the connection is then unusable and closed).
func (c *conn) roundTrip(ctx context.Context, deadline time.Time, args []string) (Value, error) {
	if err := c.nc.SetDeadline(deadline); err != nil {
		c.close()
		return Value{}, err
	}
	var stop chan struct{}
	var watched sync.WaitGroup
	if done := ctx.Done(); done != nil {
		if err := ctx.Err(); err != nil {
			return Value{}, err
		}
		stop = make(chan struct{})
		watched.Add(1)
		go func() {
			defer watched.Done()
			select {
			case <-done:
				// Unblock the read or write at once.
				_ = c.nc.SetDeadline(time.Unix(1, 0))
			case <-stop:
			}
		}()
	}
	c.wbuf = appendCommand(c.wbuf[:0], args)
	_, err := c.nc.Write(c.wbuf)
	var v Value
	if err == nil {
		v, err = c.rd.read()
	}
	if stop != nil {
		close(stop)
		watched.Wait()
		if err == nil && ctx.Err() != nil {
			// The reply arrived, but the watcher may have poisoned the
			// deadline after it: this connection's state is fine, but
			// reset it anyway by not reusing it.
			c.dead = true
		}
	}
	if err != nil {
		c.close()
		if cerr := ctx.Err(); cerr != nil {
			return Value{}, cerr
		}
		return Value{}, err
	}
	return v, nil
}

// LoadTLS builds a tls.Config from PEM files: caFile is the CA that signed
// the servers' certificates ("" for the system's trusted CAs), certFile and
// keyFile an optional client certificate (mTLS; both or neither). The
// server certificate is always verified; TLS 1.2 is the minimum.
func LoadTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("fence: TLS CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("fence: TLS CA file %s: no PEM certificate", caFile)
		}
		cfg.RootCAs = pool
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("fence: TLS: a client certificate needs its key, and a key its certificate")
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("fence: TLS client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
