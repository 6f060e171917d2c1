// Package fence is a Go client for fenced, the lock service whose every
// grant carries a strictly increasing fencing token, and for the resources
// that check those tokens (fence-store, fence-proxy).
//
// The token is the safety, nothing else is. A process can be paused at any
// instruction for any length of time; while it is paused its lease runs
// out and the lock is granted to someone else. Session.ValidUntil and
// Session.Done are a liveness optimisation (stop early, waste less work);
// only the resource rejecting a stale token keeps a paused holder's late
// write out. Pass Token() with every write (Store, Transport).
//
// It speaks RESP2 over TCP, TLS or a Unix socket, with the standard
// library only. A Client keeps a small pool of connections, follows the
// leader of a cluster (NOTLEADER), retries TRYAGAIN and lost connections
// until the call's deadline, and sends every request that creates
// something (LEASE.GRANT, LOCK, ACQUIRE) with a random REQID reused on
// every retry, so it is applied once: the same rules as libfence
// (docs/client.md). See docs/go.md.
package fence

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	mrand "math/rand"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Options configure a Client. The zero value talks to $FENCE_SERVER, else
// 127.0.0.1:7700, without TLS or login.
type Options struct {
	// Servers: "host:port", "[v6]:port" or "unix:/path" addresses of the
	// cluster's nodes (any of them; the client finds the leader). Empty:
	// the comma-separated list in $FENCE_SERVER, else 127.0.0.1:7700.
	Servers []string
	// TLS, when not nil, makes every TCP connection TLS with this
	// configuration (see LoadTLS). The server certificate is verified
	// against the host of each address unless ServerName is set.
	TLS *tls.Config
	// User and Password: sent as AUTH [user] password on every new
	// connection. A refused login fails the call at once with ErrAuth.
	User, Password string
	// Timeout bounds each call (plus the wait it asks the server for),
	// when the context has no earlier deadline. Default 5 s.
	Timeout time.Duration
	// ConnectTimeout bounds one connection attempt (TCP connect, TLS
	// handshake, AUTH), so that a server that drops packets does not use
	// up the call's whole deadline before the next one is tried. Default
	// 1 s.
	ConnectTimeout time.Duration
	// PoolSize is the most connections used at once for calls (default
	// 16); more calls wait for a free one. Keepalives have their own two,
	// and election observers (ObserveElection) up to PoolSize of their
	// own: one each while its OBSERVE waits.
	PoolSize int
	// BackoffMin and BackoffMax bound the exponential backoff (with
	// jitter) between retries: defaults 20 ms and 1 s.
	BackoffMin, BackoffMax time.Duration
}

// Client is a connection pool to a fenced cluster. It is safe for use by
// many goroutines at once.
type Client struct {
	d          dialer
	timeout    time.Duration
	backoffMin time.Duration
	backoffMax time.Duration

	mu      sync.Mutex
	servers []string
	cur     int
	closed  bool

	calls *pool // connections for calls
	kas   *pool // connections for keepalives (never behind a long WAIT)
	obs   *pool // connections for ELECTION.OBSERVE waits (never in the calls' way)
}

// maxServers bounds the server list: NOTLEADER redirects add addresses.
const maxServers = 64

// New returns a Client. No connection is made until the first call.
func New(o Options) (*Client, error) {
	servers := o.Servers
	if len(servers) == 0 {
		if env := os.Getenv("FENCE_SERVER"); env != "" {
			servers = strings.Split(env, ",")
		} else {
			servers = []string{"127.0.0.1:7700"}
		}
	}
	var list []string
	for _, s := range servers {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !strings.HasPrefix(s, "unix:") {
			if _, _, err := net.SplitHostPort(s); err != nil {
				return nil, fmt.Errorf("fence: server address %q: %w", s, err)
			}
		}
		list = append(list, s)
	}
	if len(list) == 0 || len(list) > maxServers {
		return nil, fmt.Errorf("fence: need 1..%d server addresses", maxServers)
	}
	if o.User != "" && o.Password == "" {
		return nil, errors.New("fence: a user needs a password")
	}
	c := &Client{
		d:          dialer{connect: o.ConnectTimeout, tls: o.TLS, user: o.User, password: o.Password},
		timeout:    o.Timeout,
		backoffMin: o.BackoffMin,
		backoffMax: o.BackoffMax,
		servers:    list,
	}
	if c.timeout <= 0 {
		c.timeout = 5 * time.Second
	}
	if c.d.connect <= 0 {
		c.d.connect = time.Second
	}
	if c.backoffMin <= 0 {
		c.backoffMin = 20 * time.Millisecond
	}
	if c.backoffMax < c.backoffMin {
		c.backoffMax = time.Second
		if c.backoffMax < c.backoffMin {
			c.backoffMax = c.backoffMin
		}
	}
	n := o.PoolSize
	if n <= 0 {
		n = 16
	}
	c.calls = newPool(n)
	c.kas = newPool(2)
	c.obs = newPool(n)
	return c, nil
}

// Close closes the idle connections; calls after it fail with ErrClosed.
// Sessions and locks of the client stop renewing (their leases expire on
// the server after their TTL): close or release them first.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.calls.closeIdle()
	c.kas.closeIdle()
	c.obs.closeIdle()
	return nil
}

// Do sends one command and returns its reply, with the client's retries:
// TRYAGAIN, NOTLEADER and lost connections are retried until the deadline.
// Use it only for commands that are safe to repeat (reads, UNLOCK,
// LEASE.KEEPALIVE, LEASE.REVOKE) or that carry a REQID. An error reply is
// returned as an error (*ServerError), not as a Value.
func (c *Client) Do(ctx context.Context, args ...string) (Value, error) {
	return c.do(ctx, c.calls, args, 0)
}

// Ping checks that the current server answers.
func (c *Client) Ping(ctx context.Context) error {
	_, err := c.do(ctx, c.calls, []string{"PING"}, 0)
	return err
}

// Request ids: a random 64-bit start drawn once per process, then a
// counter ("a per-client counter with a random prefix", docs/protocol.md),
// so that ids never repeat within a process and two processes' ids
// collide only if their starts are within the calls they make.
var (
	reqBase    = randomUint64()
	reqCounter uint64
)

func randomUint64() uint64 {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return uint64(time.Now().UnixNano()) ^ mrand.Uint64()
	}
	return binary.LittleEndian.Uint64(b[:])
}

// newReqID returns the id of a new logical call, reused on its retries.
func newReqID() string {
	return strconv.FormatUint(reqBase+atomic.AddUint64(&reqCounter, 1), 10)
}

// current returns the server to send to.
func (c *Client) current() (string, int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.servers[c.cur], len(c.servers), c.closed
}

// moveOn moves to the next listed server after addr failed (unless another
// call already moved).
func (c *Client) moveOn(addr string) {
	c.mu.Lock()
	if c.servers[c.cur] == addr {
		c.cur = (c.cur + 1) % len(c.servers)
	}
	c.mu.Unlock()
}

// redirect makes addr (from NOTLEADER) the current server, adding it to
// the list when new (while the list has room).
func (c *Client) redirect(addr string) bool {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, s := range c.servers {
		if s == addr {
			c.cur = i
			return true
		}
	}
	if len(c.servers) >= maxServers {
		return false
	}
	c.servers = append(c.servers, addr)
	c.cur = len(c.servers) - 1
	return true
}

// backoff sleeps for the attempt's delay, at most until deadline; false
// when ctx is done or the deadline passed.
func (c *Client) backoff(ctx context.Context, attempt int, deadline time.Time) bool {
	d := c.backoffMin
	for i := 0; i < attempt && d < c.backoffMax; i++ {
		d *= 2
	}
	if d > c.backoffMax {
		d = c.backoffMax
	}
	d = d/2 + time.Duration(mrand.Int63n(int64(d/2)+1))
	if left := time.Until(deadline); d > left {
		d = left
	}
	if d <= 0 {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return time.Now().Before(deadline)
	}
}

// do runs one logical call: the args are sent again unchanged on every
// retry (so a REQID in them is reused). extra is the wait asked of the
// server, added to the call's timeout.
func (c *Client) do(ctx context.Context, p *pool, args []string, extra time.Duration) (Value, error) {
	deadline := time.Now().Add(c.timeout + extra)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	var lastErr error
	var lastKind error // nil until something failed: then what to report at the deadline
	connected, staleRetried := false, false
	refused, redirects, attempt := 0, 0, 0
	for {
		if err := ctx.Err(); err != nil {
			return Value{}, c.fail(lastKind, lastErr, err)
		}
		if !time.Now().Before(deadline) {
			return Value{}, c.fail(lastKind, lastErr, context.DeadlineExceeded)
		}
		addr, nservers, closed := c.current()
		if closed {
			return Value{}, ErrClosed
		}
		cn, err := p.get(ctx, deadline, addr, &c.d)
		if err != nil {
			var de *dialError
			if errors.As(err, &de) {
				if de.auth {
					return Value{}, de.cause
				}
				if ctx.Err() != nil {
					return Value{}, c.fail(lastKind, err, ctx.Err())
				}
				lastErr, lastKind = err, ErrUnreachable
				c.moveOn(addr)
				if !isTimeout(de.cause) {
					refused++
					if !connected && refused >= 2*nservers {
						return Value{}, newErr(ErrUnreachable, "every server refused", err)
					}
					if refused%nservers != 0 {
						continue // try the next server at once
					}
				}
				attempt++
				c.backoff(ctx, attempt, deadline)
				continue
			}
			// The pool wait ended (ctx or deadline).
			return Value{}, c.fail(lastKind, lastErr, err)
		}
		connected = true
		reused := cn.reused
		v, err := cn.roundTrip(ctx, deadline, args)
		p.put(cn)
		if err != nil {
			if ctx.Err() != nil {
				return Value{}, c.fail(ErrOutcomeUnknown, err, ctx.Err())
			}
			if errors.Is(err, ErrProtocol) {
				return Value{}, err
			}
			lastErr, lastKind = err, ErrOutcomeUnknown
			if reused && !staleRetried {
				// An idle connection the server had closed (a restart,
				// --idle-timeout-ms): once, at once, on a new one to the
				// same server. (The request is safe to repeat: see do.)
				staleRetried = true
				continue
			}
			c.moveOn(addr)
			attempt++
			c.backoff(ctx, attempt, deadline)
			continue
		}
		if v.Kind != KindError {
			return v, nil
		}
		serr := parseError(v.Str)
		se, _ := serr.(*ServerError)
		switch {
		case se != nil && se.Code == "NOTLEADER":
			lastErr, lastKind = serr, ErrNotLeader
			target := strings.TrimSpace(se.Message)
			if i := strings.IndexByte(target, ' '); i >= 0 {
				target = target[:i]
			}
			if target == "" || !c.redirect(target) {
				c.moveOn(addr)
			}
			redirects++
			if redirects > 3 {
				attempt++
				c.backoff(ctx, attempt, deadline)
			}
			continue
		case se != nil && se.Code == "TRYAGAIN":
			lastErr, lastKind = serr, ErrTryAgain
			attempt++
			c.backoff(ctx, attempt, deadline)
			continue
		}
		return Value{}, serr
	}
}

// fail builds the error of a call that ran out of time or was cancelled:
// it matches kind and the context error, and tells the last failure.
func (c *Client) fail(kind, last, ctxErr error) error {
	if kind == nil {
		return fmt.Errorf("fence: %w before anything was sent", ctxErr)
	}
	detail := ""
	if last != nil {
		detail = "last error: " + last.Error()
	}
	return newErr(kind, detail, ctxErr)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// pool is a bounded set of connections: at most cap(slots) checked out or
// idle at once.
type pool struct {
	slots chan struct{}
	mu    sync.Mutex
	idle  []*conn
}

func newPool(n int) *pool { return &pool{slots: make(chan struct{}, n)} }

// get checks out a connection to addr, connecting when none is idle;
// idle connections to other addresses (an old leader) are closed.
func (p *pool) get(ctx context.Context, deadline time.Time, addr string, d *dialer) (*conn, error) {
	select {
	case p.slots <- struct{}{}:
	default:
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		select {
		case p.slots <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
			return nil, context.DeadlineExceeded
		}
	}
	p.mu.Lock()
	for len(p.idle) > 0 {
		cn := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if cn.addr == addr {
			p.mu.Unlock()
			cn.reused = true
			return cn, nil
		}
		cn.close()
	}
	p.mu.Unlock()
	cn, err := d.dial(ctx, addr, deadline)
	if err != nil {
		<-p.slots
		return nil, err
	}
	return cn, nil
}

// put returns a checked-out connection (closed ones are dropped).
func (p *pool) put(cn *conn) {
	if !cn.dead {
		p.mu.Lock()
		p.idle = append(p.idle, cn)
		p.mu.Unlock()
	} else {
		cn.nc.Close()
	}
	<-p.slots
}

func (p *pool) closeIdle() {
	p.mu.Lock()
	for _, cn := range p.idle {
		cn.close()
	}
	p.idle = nil
	p.mu.Unlock()
}
