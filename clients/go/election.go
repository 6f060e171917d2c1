package fence

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// ElectionValueMax is the longest value an election takes (bytes).
const ElectionValueMax = 4096

// ElectionState is an election's state (ELECTION.LEADER, OBSERVE).
type ElectionState struct {
	Value    []byte // the leader's value (a hint: who to talk to); nil when nobody leads
	Token    uint64 // the leader's fencing token; 0 when nobody leads
	Lease    uint64 // the leader's lease; 0 when nobody leads
	Revision uint64 // grows with every change (leader, value, no leader); never goes back
}

// HasLeader reports whether somebody leads.
func (s ElectionState) HasLeader() bool { return s.Token != 0 }

// Election is a leader election campaigned for with a Session's lease, as
// etcd's concurrency.Election. The leader holds a fencing token from the
// same counter as locks: every new leader's token is higher than every
// earlier one, so a resource that guards the election's name like a lock's
// fences out a leader paused past its lease. Leadership lasts until
// Resign, the session's Close, or the lease's loss (Session.Done). The
// value is only a hint for clients; the token is what fences. Safe for
// concurrent use.
type Election struct {
	s      *Session
	name   string
	signed bool
	err    error // a bad option, reported by Campaign

	mu    sync.Mutex
	token Token
}

// NewElection returns the election name (1..256 bytes; it shares the one
// name space with locks and semaphores) on session s. Option: Signed.
func NewElection(s *Session, name string, opts ...Option) *Election {
	o := applyOptions(opts)
	e := &Election{s: s, name: name, signed: o.signed}
	if o.shared {
		e.err = errors.New("fence: Shared is for NewMutex only")
	}
	return e
}

// Name is the election's name (use it as the fence name at the resource).
func (e *Election) Name() string { return e.name }

// Session is the session whose lease campaigns and leads.
func (e *Election) Session() *Session { return e.s }

// Token is the leader's fencing token while this Election leads (as far
// as it knows: the lease may have been lost meanwhile), else the zero
// Token. Pass it with every write to the resource.
func (e *Election) Token() Token {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.token
}

func checkValue(value []byte) error {
	if len(value) > ElectionValueMax {
		return fmt.Errorf("fence: an election value is at most %d bytes, not %d", ElectionValueMax, len(value))
	}
	return nil
}

func (e *Election) check(value []byte) error {
	if e.err != nil {
		return e.err
	}
	if err := checkName("election", e.name); err != nil {
		return err
	}
	return checkValue(value)
}

// campaignOn sends ELECTION.CAMPAIGN name lease value [WAIT w] REQID id
// [SIGNED]; ErrLocked when not elected within wait.
func (e *Election) campaignOn(ctx context.Context, value []byte, wait time.Duration) (Token, error) {
	head := []string{"ELECTION.CAMPAIGN", e.name, strconv.FormatUint(e.s.id, 10), string(value)}
	v, err := waitCall(ctx, e.s.c, head, signedTail(e.signed), wait)
	if err != nil {
		return Token{}, err
	}
	if v.Kind == KindNil {
		return Token{}, newErr(ErrLocked, "election "+e.name+": not elected", nil)
	}
	if v.Kind != KindArray || len(v.Array) != 2 || v.Array[1].Kind != KindInt || uint64(v.Array[1].Int) != e.s.id {
		return Token{}, protoErr("ELECTION.CAMPAIGN reply %s", v)
	}
	return parseToken(v.Array[0], e.signed)
}

// Campaign queues the session's lease as a candidate offering value
// (0..4096 bytes; typically the candidate's address) and waits until it is
// elected, or ctx is done (FIFO among the candidates, while the session
// keeps the lease alive). It returns an error matching ErrLocked and ctx's
// error when ctx ends first, ErrLeaseLost when the lease is lost. A
// Campaign by the leader returns at once (its value unchanged: use
// Proclaim).
func (e *Election) Campaign(ctx context.Context, value []byte) error {
	if err := e.check(value); err != nil {
		return err
	}
	return untilDone(ctx, e.s, "election "+e.name, func(wait time.Duration) error {
		tok, err := e.campaignOn(ctx, value, wait)
		if err != nil {
			return err
		}
		return e.elected(tok)
	}, e.cleanup)
}

// TryCampaign is elected now if nobody leads and no candidate waits, else
// ErrLocked (and it does not stay in line).
func (e *Election) TryCampaign(ctx context.Context, value []byte) error {
	if err := e.check(value); err != nil {
		return err
	}
	if err := e.s.Err(); err != nil {
		return err
	}
	tok, err := e.campaignOn(ctx, value, 0)
	if err != nil {
		return err
	}
	return e.elected(tok)
}

// elected records a win, unless the lease was lost meanwhile (then it
// resigns and returns ErrLeaseLost).
func (e *Election) elected(tok Token) error {
	if err := e.s.Err(); err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), e.s.c.timeout)
		_, _ = e.resign(ctx, tok)
		cancel()
		return newErr(ErrLeaseLost, "the lease was lost while campaigning", err)
	}
	e.mu.Lock()
	e.token = tok
	e.mu.Unlock()
	return nil
}

// cleanup resigns if the session's lease leads (a Campaign cancelled with
// its request in flight).
func (e *Election) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), e.s.c.timeout)
	defer cancel()
	st, err := e.s.c.ElectionLeader(ctx, e.name)
	if err == nil && st.HasLeader() && st.Lease == e.s.id {
		_, _ = e.resign(ctx, Token{Value: st.Token})
	}
}

// forget clears the token if it is still tok.
func (e *Election) forget(tok Token) {
	e.mu.Lock()
	if e.token == tok {
		e.token = Token{}
	}
	e.mu.Unlock()
}

// Proclaim replaces the election's value without losing leadership
// (ELECTION.PROCLAIM name token value) and returns the new revision.
// ErrNotHeld when this Election does not lead, or no longer does (it
// resigned, or its lease was lost and a successor may lead).
func (e *Election) Proclaim(ctx context.Context, value []byte) (uint64, error) {
	if err := checkValue(value); err != nil {
		return 0, err
	}
	tok := e.Token()
	if tok.IsZero() {
		return 0, newErr(ErrNotHeld, "election "+e.name+": not the leader", nil)
	}
	v, err := e.s.c.do(ctx, e.s.c.calls, []string{"ELECTION.PROCLAIM", e.name,
		strconv.FormatUint(tok.Value, 10), string(value)}, 0)
	if err != nil {
		return 0, err
	}
	rev, ok := uintOf(v)
	if !ok {
		return 0, protoErr("ELECTION.PROCLAIM reply %s", v)
	}
	if rev == 0 {
		e.forget(tok)
		return 0, newErr(ErrNotHeld, "election "+e.name+": token "+strconv.FormatUint(tok.Value, 10)+" does not lead any more", nil)
	}
	return rev, nil
}

func (e *Election) resign(ctx context.Context, tok Token) (bool, error) {
	v, err := e.s.c.do(ctx, e.s.c.calls, []string{"ELECTION.RESIGN", e.name, strconv.FormatUint(tok.Value, 10)}, 0)
	if err != nil {
		return false, err
	}
	if v.Kind != KindInt {
		return false, protoErr("ELECTION.RESIGN reply %s", v)
	}
	return v.Int == 1, nil
}

// Resign steps down (ELECTION.RESIGN name token; safe to retry): the first
// live candidate is elected with a higher token. The lease stays (it may
// hold other locks). ErrNotHeld when this Election did not lead, or no
// longer did.
func (e *Election) Resign(ctx context.Context) error {
	tok := e.Token()
	if tok.IsZero() {
		return newErr(ErrNotHeld, "election "+e.name+": not the leader", nil)
	}
	ok, err := e.resign(ctx, tok)
	if err != nil {
		return err
	}
	e.forget(tok)
	if !ok {
		return newErr(ErrNotHeld, "election "+e.name+": token "+strconv.FormatUint(tok.Value, 10)+" did not lead any more", nil)
	}
	return nil
}

// Leader is the election's leader now (ELECTION.LEADER, linearizable):
// see Client.ElectionLeader.
func (e *Election) Leader(ctx context.Context) (ElectionState, error) {
	return e.s.c.ElectionLeader(ctx, e.name)
}

// Observe watches the election: see Client.ObserveElection (the channel
// is closed when ctx is done, or on a refusal that retrying cannot fix).
func (e *Election) Observe(ctx context.Context) <-chan ElectionState {
	return e.s.c.ObserveElection(ctx, e.name, 0).C
}

// parseState reads [value|nil, token, lease, revision].
func parseState(v Value, what string) (ElectionState, error) {
	var st ElectionState
	if v.Kind != KindArray || len(v.Array) != 4 || !uints(v.Array[1:], &st.Token, &st.Lease, &st.Revision) {
		return st, protoErr("%s reply %s", what, v)
	}
	switch val := v.Array[0]; {
	case val.Kind == KindNil && st.Token == 0:
	case val.Kind == KindBulk && len(val.Str) <= ElectionValueMax && st.Token != 0:
		st.Value = append([]byte{}, val.Str...)
	default:
		return st, protoErr("%s reply %s", what, v)
	}
	return st, nil
}

// ElectionLeader is the leader of the election name now (ELECTION.LEADER:
// linearizable; in a cluster the leader answers it). The zero
// ElectionState (HasLeader false, Revision 0) when nobody leads; Observe
// gives the revision then.
func (c *Client) ElectionLeader(ctx context.Context, name string) (ElectionState, error) {
	if err := checkName("election", name); err != nil {
		return ElectionState{}, err
	}
	v, err := c.do(ctx, c.calls, []string{"ELECTION.LEADER", name}, 0)
	if err != nil || v.Kind == KindNil {
		return ElectionState{}, err
	}
	return parseState(v, "ELECTION.LEADER")
}

// ObserveWait is how long one ELECTION.OBSERVE waits on the server before
// it is asked again (at most until a little before ctx's deadline).
const ObserveWait = 30 * time.Second

// Observer is a watch of an election (Client.ObserveElection).
type Observer struct {
	// C delivers the election's states in revision order, each the latest
	// when it was answered. It is closed when the watch ends (Err).
	C <-chan ElectionState

	mu  sync.Mutex
	err error
	rev uint64
}

// Err is nil while the watch runs; after C is closed, why it ended: ctx's
// error, or a refusal that retrying cannot fix (ErrWrongType: the name is
// a lock; ErrNoPerm; ErrAuth; ErrProtocol; ErrClosed).
func (o *Observer) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

// Revision is the revision of the last state delivered on C (or the after
// the watch began with).
func (o *Observer) Revision() uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.rev
}

// permanent reports an observe failure that retrying cannot fix.
func permanent(err error) bool {
	var se *ServerError
	if errors.As(err, &se) {
		switch se.Code {
		case "TRYAGAIN", "NOTLEADER", "LIMIT":
			return false
		}
		return true
	}
	return errors.Is(err, ErrProtocol) || errors.Is(err, ErrClosed) || errors.Is(err, ErrAuth)
}

// ObserveElection watches the election name until ctx is done, with one
// outstanding ELECTION.OBSERVE name AFTER rev WAIT ms at a time (answered
// by any node, followers too, without polling). With after 0 the first
// state is the state now (also when nobody leads: Value nil, Token 0);
// with after > 0 it is the first state above that revision (to resume a
// watch). It never misses a change: every request asks for the state after
// the last revision delivered, so a change between two requests is
// answered at once; each state is the latest one when answered (several
// quick changes may be seen as the last of them), and revisions only grow,
// also when the client moves to another node. Lost connections, a
// restarting server and -LIMIT are retried with backoff until ctx is done.
// Each waiting request holds a connection of the client's observer pool
// (PoolSize of them, apart from the calls'). Cancel ctx to end the watch:
// a watch whose channel nobody reads waits on it until then.
func (c *Client) ObserveElection(ctx context.Context, name string, after uint64) *Observer {
	ch := make(chan ElectionState)
	o := &Observer{C: ch, rev: after}
	go c.observe(ctx, name, after, ch, o)
	return o
}

func (c *Client) observe(ctx context.Context, name string, rev uint64, ch chan<- ElectionState, o *Observer) {
	finish := func(err error) {
		o.mu.Lock()
		o.err = err
		o.mu.Unlock()
		close(ch)
	}
	if err := checkName("election", name); err != nil {
		finish(err)
		return
	}
	first := rev == 0
	attempt := 0
	for {
		if err := ctx.Err(); err != nil {
			finish(err)
			return
		}
		args := []string{"ELECTION.OBSERVE", name}
		var wait time.Duration
		if !first {
			wait = ObserveWait
			if w := waitFor(ctx); w < wait {
				wait = w
			}
			if wait < time.Millisecond {
				<-ctx.Done()
				finish(ctx.Err())
				return
			}
			args = append(args, "AFTER", strconv.FormatUint(rev, 10),
				"WAIT", strconv.FormatInt(wait.Milliseconds(), 10))
		}
		t0 := time.Now()
		v, err := c.do(ctx, c.obs, args, wait)
		if err != nil {
			if ctx.Err() != nil {
				finish(ctx.Err())
				return
			}
			if permanent(err) {
				finish(err)
				return
			}
			attempt++
			c.backoff(ctx, attempt, time.Now().Add(c.backoffMax))
			continue
		}
		if v.Kind == KindNil {
			// Nothing changed within the wait: ask again. A nil well
			// before the wait was up (a cancelled wait) is asked again
			// with backoff, so a server that keeps doing it is not spun on.
			if time.Since(t0) < wait/2 {
				attempt++
				c.backoff(ctx, attempt, time.Now().Add(c.backoffMax))
			} else {
				attempt = 0
			}
			continue
		}
		st, err := parseState(v, "ELECTION.OBSERVE")
		if err != nil {
			finish(err)
			return
		}
		if !first && st.Revision <= rev {
			// Never back: ask again after the last one delivered (a
			// server that answers this at once is asked with backoff).
			attempt++
			c.backoff(ctx, attempt, time.Now().Add(c.backoffMax))
			continue
		}
		select {
		case ch <- st:
		case <-ctx.Done():
			finish(ctx.Err())
			return
		}
		attempt = 0
		first = false
		rev = st.Revision
		o.mu.Lock()
		o.rev = rev
		o.mu.Unlock()
	}
}
