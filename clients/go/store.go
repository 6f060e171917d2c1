package fence

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"

	"strings"
	"sync"
	"time"
)

// StoreOptions configure OpenStore.
type StoreOptions struct {
	// Addr of the fence-store: "host:port" or "unix:/path" (default
	// 127.0.0.1:7710).
	Addr string
	// TLS, when not nil, makes the connection TLS (as Options.TLS).
	TLS *tls.Config
	// User and Password: AUTH [user] password on every new connection
	// (fence-store with --acl-file); a refused login is ErrAuth.
	User     string
	Password string // see User
	// Timeout bounds each call when the context has no earlier deadline
	// (default 5 s).
	Timeout time.Duration
}

// Store is a client of fence-store, the key/value store that refuses
// stale fencing tokens. It holds one connection and serialises its calls.
// Writes are not retried after a lost connection (their outcome is
// unknown: ErrOutcomeUnknown); the next call reconnects. Retrying the same
// write with the same token is safe for the fencing rule.
type Store struct {
	addr    string
	d       dialer
	timeout time.Duration

	mu     sync.Mutex
	cn     *conn
	closed bool
}

// OpenStore returns a Store; the connection is made by the first call.
func OpenStore(o StoreOptions) (*Store, error) {
	if o.Addr == "" {
		o.Addr = "127.0.0.1:7710"
	}
	if !strings.HasPrefix(o.Addr, "unix:") {
		if _, _, err := net.SplitHostPort(o.Addr); err != nil {
			return nil, fmt.Errorf("fence: store address %q: %w", o.Addr, err)
		}
	}
	if o.User != "" && o.Password == "" {
		return nil, errors.New("fence: a user needs a password")
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	return &Store{addr: o.Addr, d: dialer{tls: o.TLS, user: o.User, password: o.Password},
		timeout: o.Timeout}, nil
}

// Close closes the connection.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.cn != nil {
		s.cn.close()
		s.cn = nil
	}
	return nil
}

// call sends one command; reads (retry true) are sent once more on a new
// connection after a lost one.
func (s *Store) call(ctx context.Context, retry bool, args ...string) (Value, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	deadline := time.Now().Add(s.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	for attempt := 0; ; attempt++ {
		if s.closed {
			return Value{}, ErrClosed
		}
		if s.cn == nil {
			cn, err := s.d.dial(ctx, s.addr, deadline)
			if err != nil {
				var de *dialError
				if errors.As(err, &de) && de.auth {
					return Value{}, de.cause
				}
				if ctx.Err() != nil {
					return Value{}, newErr(ErrUnreachable, s.addr, ctx.Err())
				}
				return Value{}, newErr(ErrUnreachable, "", err)
			}
			s.cn = cn
		}
		v, err := s.cn.roundTrip(ctx, deadline, args)
		if err != nil {
			s.cn.close()
			s.cn = nil
			if retry && attempt == 0 && ctx.Err() == nil && time.Now().Before(deadline) && !errors.Is(err, ErrProtocol) {
				continue
			}
			if errors.Is(err, ErrProtocol) {
				return Value{}, err
			}
			return Value{}, newErr(ErrOutcomeUnknown, s.addr, err)
		}
		if s.cn.dead {
			s.cn.nc.Close()
			s.cn = nil
		}
		if v.Kind == KindError {
			return Value{}, parseError(v.Str)
		}
		return v, nil
	}
}

func okReply(v Value, what string) error {
	if v.Kind != KindStatus {
		return protoErr("%s reply %s", what, v)
	}
	return nil
}

// Admit raises the fence's mark to tok without writing anything
// (FENCE.ADMIT): from then on every older holder's write is refused. Do it
// before a read whose result you will write back (admit, read, write).
// A *StaleError (ErrStale) when a newer token was admitted: stop.
func (s *Store) Admit(ctx context.Context, fence string, tok Token) error {
	v, err := s.call(ctx, false, "FENCE.ADMIT", fence, tok.String())
	if err != nil {
		return err
	}
	return okReply(v, "FENCE.ADMIT")
}

// Set writes key = value if tok is not older than the fence's mark (FSET).
// *StaleError (ErrStale) when it is; ErrWrongFence when the key belongs
// to another fence. Nothing is written then.
func (s *Store) Set(ctx context.Context, fence string, tok Token, key string, value []byte) error {
	v, err := s.call(ctx, false, "FSET", fence, tok.String(), key, string(value))
	if err != nil {
		return err
	}
	return okReply(v, "FSET")
}

// Del deletes key if tok is admitted (FDEL); true if the key existed.
func (s *Store) Del(ctx context.Context, fence string, tok Token, key string) (bool, error) {
	v, err := s.call(ctx, false, "FDEL", fence, tok.String(), key)
	if err != nil {
		return false, err
	}
	if v.Kind != KindInt {
		return false, protoErr("FDEL reply %s", v)
	}
	return v.Int == 1, nil
}

// Incr adds 1 to the integer at key if tok is admitted (FINCR; a missing
// key counts as 0) and returns the new value.
func (s *Store) Incr(ctx context.Context, fence string, tok Token, key string) (int64, error) {
	v, err := s.call(ctx, false, "FINCR", fence, tok.String(), key)
	if err != nil {
		return 0, err
	}
	if v.Kind != KindInt {
		return 0, protoErr("FINCR reply %s", v)
	}
	return v.Int, nil
}

// Get reads key (FGET); ok is false when it does not exist.
func (s *Store) Get(ctx context.Context, key string) (value []byte, ok bool, err error) {
	v, err := s.call(ctx, true, "FGET", key)
	if err != nil {
		return nil, false, err
	}
	switch v.Kind {
	case KindNil:
		return nil, false, nil
	case KindBulk:
		return v.Str, true, nil
	}
	return nil, false, protoErr("FGET reply %s", v)
}

// High returns the fence's mark, the highest token admitted (FENCE.HIGH;
// 0 if never seen).
func (s *Store) High(ctx context.Context, fence string) (uint64, error) {
	v, err := s.call(ctx, true, "FENCE.HIGH", fence)
	if err != nil {
		return 0, err
	}
	if v.Kind != KindInt || v.Int < 0 {
		return 0, protoErr("FENCE.HIGH reply %s", v)
	}
	return uint64(v.Int), nil
}

// Do sends any other command (read-only ones are retried once after a lost
// connection only if retry is true).
func (s *Store) Do(ctx context.Context, retry bool, args ...string) (Value, error) {
	return s.call(ctx, retry, args...)
}
