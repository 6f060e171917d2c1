package fence_test

// The coordination kinds of issue 21 against the real fenced (and
// fence-store) of TestMain: elections, shared locks, semaphores,
// multi-locks, each with its stale-holder case at the resource.

import (
	"context"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	fence "fenced/client"
)

// runName is a name of this run only (go test -count=N reuses the servers).
func runName(base string) string {
	return base + "." + strconv.FormatInt(time.Now().UnixNano(), 36)
}

func newSession(t *testing.T, ctx context.Context, c *fence.Client, ttl time.Duration) *fence.Session {
	t.Helper()
	s, err := fence.NewSession(ctx, c, fence.SessionOptions{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s.Close(cctx)
		cancel()
	})
	return s
}

func openStore(t *testing.T) *fence.Store {
	t.Helper()
	st, err := fence.OpenStore(fence.StoreOptions{Addr: os.Getenv("FENCE_STORE")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// waitUntil polls cond (a condition on the servers' state) for up to d.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waiters waits until name has n queued requests (LOCK.INFO).
func waiters(t *testing.T, ctx context.Context, c *fence.Client, name string, n int) {
	t.Helper()
	waitUntil(t, 5*time.Second, strconv.Itoa(n)+" waiters on "+name, func() bool {
		i, err := c.LockInfo(ctx, name)
		return err == nil && i != nil && i.Waiters == n
	})
}

// next reads one state from an observer, or fails after 5 s.
func next(t *testing.T, o *fence.Observer) fence.ElectionState {
	t.Helper()
	select {
	case st, ok := <-o.C:
		if !ok {
			t.Fatalf("observer closed: %v", o.Err())
		}
		return st
	case <-time.After(5 * time.Second):
		t.Fatal("no state within 5 s")
	}
	return fence.ElectionState{}
}

// nextUntil reads states until cond holds; revisions must grow.
func nextUntil(t *testing.T, o *fence.Observer, last uint64, cond func(fence.ElectionState) bool) fence.ElectionState {
	t.Helper()
	for {
		st := next(t, o)
		if st.Revision <= last {
			t.Fatalf("revision %d after %d: not increasing", st.Revision, last)
		}
		last = st.Revision
		if cond(st) {
			return st
		}
	}
}

func TestElection(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	c := newClient(t, fence.Options{})
	st := openStore(t)
	name := runName("t-elect")
	s1 := newSession(t, ctx, c, 5*time.Second)
	s2 := newSession(t, ctx, c, 5*time.Second)
	e1, e2 := fence.NewElection(s1, name), fence.NewElection(s2, name)

	obs := c.ObserveElection(ctx, name, 0)
	first := next(t, obs)
	if first.HasLeader() || first.Value != nil {
		t.Fatalf("first state %+v: want nobody leading", first)
	}
	if err := e1.Campaign(ctx, []byte("a")); err != nil {
		t.Fatal(err)
	}
	t1 := e1.Token()
	if t1.IsZero() {
		t.Fatal("no token")
	}
	lead, err := e2.Leader(ctx)
	if err != nil || string(lead.Value) != "a" || lead.Token != t1.Value || lead.Lease != s1.Lease() {
		t.Fatalf("Leader: %+v %v", lead, err)
	}
	seen := nextUntil(t, obs, first.Revision, func(s fence.ElectionState) bool { return s.Token == t1.Value })
	if err := e1.Campaign(ctx, []byte("other")); err != nil || e1.Token() != t1 {
		t.Fatalf("Campaign by the leader: %v, token %v (want %v)", err, e1.Token(), t1)
	}
	if err := e2.TryCampaign(ctx, []byte("b")); !errors.Is(err, fence.ErrLocked) {
		t.Fatalf("TryCampaign while someone leads: %v, want ErrLocked", err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err = e2.Campaign(short, []byte("b"))
	cancel()
	if !errors.Is(err, fence.ErrLocked) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Campaign past its deadline: %v, want ErrLocked and DeadlineExceeded", err)
	}
	rev, err := e1.Proclaim(ctx, []byte("a2"))
	if err != nil || rev <= seen.Revision {
		t.Fatalf("Proclaim: rev %d (last seen %d) %v", rev, seen.Revision, err)
	}
	seen = nextUntil(t, obs, seen.Revision, func(s fence.ElectionState) bool { return s.Revision >= rev })
	if string(seen.Value) != "a2" || seen.Token != t1.Value || seen.Revision != rev {
		t.Fatalf("observed %+v after the proclaim (rev %d)", seen, rev)
	}

	// e2 queues; e1 resigns; e2 leads with a higher token.
	got := make(chan error, 1)
	go func() { got <- e2.Campaign(ctx, []byte("b")) }()
	waiters(t, ctx, c, name, 1)
	if err := st.Admit(ctx, name, t1); err != nil {
		t.Fatal(err)
	}
	if err := e1.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	t2 := e2.Token()
	if t2.Value <= t1.Value {
		t.Fatalf("the next leader's token %d is not above the resigned one's %d", t2.Value, t1.Value)
	}
	seen = nextUntil(t, obs, seen.Revision, func(s fence.ElectionState) bool { return s.Token == t2.Value })
	if string(seen.Value) != "b" || seen.Lease != s2.Lease() {
		t.Fatalf("observed %+v for the new leader", seen)
	}
	// The resigned leader is fenced out: by the server, and at the resource
	// once the new leader's token is there.
	if !e1.Token().IsZero() {
		t.Fatal("a resigned Election keeps its token")
	}
	if err := e1.Resign(ctx); !errors.Is(err, fence.ErrNotHeld) {
		t.Fatalf("second Resign: %v, want ErrNotHeld", err)
	}
	if v, err := c.Do(ctx, "ELECTION.PROCLAIM", name, strconv.FormatUint(t1.Value, 10), "stale"); err != nil || v.Int != 0 {
		t.Fatalf("PROCLAIM with the old token: %v %v, want 0", v, err)
	}
	if err := st.Set(ctx, name, t2, runName("t-elect-k"), []byte("new leader")); err != nil {
		t.Fatal(err)
	}
	var se *fence.StaleError
	if err := st.Set(ctx, name, t1, runName("t-elect-k"), []byte("old leader")); !errors.As(err, &se) || se.Highest != t2.Value {
		t.Fatalf("the old leader's write: %v, want STALE with highest %d", err, t2.Value)
	}

	// The leader's lease revoked: nobody leads, and the observer sees it.
	if err := s2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	seen = nextUntil(t, obs, seen.Revision, func(s fence.ElectionState) bool { return !s.HasLeader() })
	if seen.Value != nil || seen.Lease != 0 {
		t.Fatalf("no-leader state %+v", seen)
	}
	if lead, err := c.ElectionLeader(ctx, name); err != nil || lead.HasLeader() {
		t.Fatalf("Leader with nobody leading: %+v %v", lead, err)
	}
	if _, err := e2.Proclaim(ctx, []byte("gone")); !errors.Is(err, fence.ErrNotHeld) {
		t.Fatalf("Proclaim by a leader whose lease was revoked: %v, want ErrNotHeld", err)
	}
}

// A watch that resumes after an old revision gets the latest state at
// once, several changes made while nobody reads show up as the latest, and
// the channel closes with ctx.
func TestObserveNeverMisses(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	c := newClient(t, fence.Options{})
	name := runName("t-observe")
	s1 := newSession(t, ctx, c, 5*time.Second)
	e := fence.NewElection(s1, name)
	if err := e.Campaign(ctx, []byte("v0")); err != nil {
		t.Fatal(err)
	}
	now, err := e.Leader(ctx)
	if err != nil || now.Revision == 0 {
		t.Fatalf("Leader: %+v %v", now, err)
	}
	octx, cancel := context.WithCancel(ctx)
	obs := c.ObserveElection(octx, name, now.Revision)
	var last uint64
	for i := 1; i <= 3; i++ { // nobody reads obs meanwhile
		if last, err = e.Proclaim(ctx, []byte("v"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	st := nextUntil(t, obs, now.Revision, func(s fence.ElectionState) bool { return s.Revision == last })
	if string(st.Value) != "v3" {
		t.Fatalf("latest state %+v, want v3", st)
	}
	// Resuming after an old revision answers at once with the latest.
	again := c.ObserveElection(octx, name, now.Revision)
	if st := next(t, again); st.Revision != last || string(st.Value) != "v3" {
		t.Fatalf("resumed watch: %+v, want revision %d", st, last)
	}
	// e.Observe is the etcd shape: the state now first.
	ch := e.Observe(octx)
	select {
	case st := <-ch:
		if st.Revision != last {
			t.Fatalf("Election.Observe: %+v", st)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Election.Observe: nothing")
	}
	cancel()
	for range obs.C {
	}
	if !errors.Is(obs.Err(), context.Canceled) || obs.Revision() != last {
		t.Fatalf("after cancel: err %v revision %d", obs.Err(), obs.Revision())
	}
}

// Observing or campaigning for a lock's name is refused with ErrWrongType;
// the observer closes with the reason.
func TestElectionWrongType(t *testing.T) {
	ctx := ctxT(t, 20*time.Second)
	c := newClient(t, fence.Options{})
	name := runName("t-elect-lock")
	s := newSession(t, ctx, c, 5*time.Second)
	m := fence.NewMutex(s, name)
	if err := m.TryLock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := fence.NewElection(s, name).TryCampaign(ctx, nil); !errors.Is(err, fence.ErrWrongType) {
		t.Fatalf("campaign for a lock's name: %v, want ErrWrongType", err)
	}
	obs := c.ObserveElection(ctx, name, 0)
	for range obs.C {
		t.Fatal("a state for a lock's name")
	}
	var se *fence.ServerError
	if !errors.Is(obs.Err(), fence.ErrWrongType) || !errors.As(obs.Err(), &se) || se.Code != "WRONGTYPE" {
		t.Fatalf("observer of a lock: %v, want WRONGTYPE", obs.Err())
	}
	big := make([]byte, fence.ElectionValueMax+1)
	if err := fence.NewElection(s, runName("t-elect-big")).TryCampaign(ctx, big); err == nil {
		t.Fatal("a value over 4096 bytes was sent")
	}
}

// A watch survives a restart of its server and never goes back: the
// revision after the restart is above the one before.
func TestObserveAcrossRestart(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	p := startFenced(t)
	c := newClient(t, fence.Options{Servers: []string{p.addr}, Timeout: 10 * time.Second})
	name := runName("t-observe-restart")
	s := newSession(t, ctx, c, 10*time.Second)
	e := fence.NewElection(s, name)
	if err := e.Campaign(ctx, []byte("before")); err != nil {
		t.Fatal(err)
	}
	obs := c.ObserveElection(ctx, name, 0)
	before := next(t, obs)
	p.stop()
	p2, err := start(filepathDir(p.log), "fenced", fencedBin, p.addr, p.args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p2.stop)
	// The lease survives the restart (every lease gets its full TTL again).
	rev, err := e.Proclaim(ctx, []byte("after"))
	if err != nil {
		t.Fatal(err)
	}
	st := nextUntil(t, obs, before.Revision, func(s fence.ElectionState) bool { return s.Revision >= rev })
	if string(st.Value) != "after" {
		t.Fatalf("after the restart: %+v", st)
	}
}

func TestSharedLock(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	c := newClient(t, fence.Options{})
	st := openStore(t)
	name := runName("t-rw")
	sr1 := newSession(t, ctx, c, 5*time.Second)
	sr2 := newSession(t, ctx, c, 5*time.Second)
	sr3 := newSession(t, ctx, c, 5*time.Second)
	sw := newSession(t, ctx, c, 5*time.Second)
	r1 := fence.NewMutex(sr1, name, fence.Shared())
	r2 := fence.NewMutex(sr2, name, fence.Shared())
	r3 := fence.NewMutex(sr3, name, fence.Shared())
	w := fence.NewMutex(sw, name)
	if err := r1.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r2.TryLock(ctx); err != nil {
		t.Fatal(err)
	}
	if r1.Token() != r2.Token() {
		t.Fatalf("readers of one phase: tokens %v and %v, want one", r1.Token(), r2.Token())
	}
	info, err := c.LockInfo(ctx, name)
	if err != nil || info == nil || !info.Shared || len(info.Holders) != 2 || info.Token != r1.Token().Value ||
		!info.HeldBy(sr1.Lease()) || !info.HeldBy(sr2.Lease()) || info.HeldBy(sw.Lease()) {
		t.Fatalf("LOCK.INFO of a shared lock: %+v %v", info, err)
	}
	if err := w.TryLock(ctx); !errors.Is(err, fence.ErrLocked) {
		t.Fatalf("writer's TryLock while read: %v, want ErrLocked", err)
	}
	// A plain UNLOCK of a phase's token is refused: the holders share it.
	if _, err := c.Do(ctx, "UNLOCK", name, strconv.FormatUint(r1.Token().Value, 10)); err == nil {
		t.Fatal("UNLOCK without LEASE of a shared lock was accepted")
	}
	got := make(chan error, 1)
	go func() { got <- w.Lock(ctx) }()
	waiters(t, ctx, c, name, 1)
	// A queued writer holds back later readers.
	if err := r3.TryLock(ctx); !errors.Is(err, fence.ErrLocked) {
		t.Fatalf("reader behind a queued writer: %v, want ErrLocked", err)
	}
	rt := r1.Token()
	if err := st.Admit(ctx, name, rt); err != nil {
		t.Fatal(err)
	}
	if err := r1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		t.Fatalf("the writer got the lock while a reader held it: %v", err)
	default:
	}
	if err := r2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	wt := w.Token()
	if wt.Value <= rt.Value {
		t.Fatalf("writer's token %d not above the readers' %d", wt.Value, rt.Value)
	}
	if info, err := c.LockInfo(ctx, name); err != nil || info == nil || info.Shared || info.Lease != sw.Lease() || info.Token != wt.Value {
		t.Fatalf("LOCK.INFO of the writer's hold: %+v %v", info, err)
	}
	// The readers' phase is fenced out once the writer's token is there.
	if err := st.Admit(ctx, name, wt); err != nil {
		t.Fatal(err)
	}
	if err := st.Admit(ctx, name, rt); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("a reader's token after the writer's: %v, want ErrStale", err)
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r1.Unlock(ctx); !errors.Is(err, fence.ErrNotHeld) {
		t.Fatalf("second Unlock of a reader: %v, want ErrNotHeld", err)
	}

	// Acquire with Shared: each reader its own lease, one token.
	a1, err := c.Acquire(ctx, name, fence.AcquireOptions{TTL: time.Second, Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	a2, err := c.Acquire(ctx, name, fence.AcquireOptions{TTL: time.Second, Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	if a1.Token() != a2.Token() || a1.Lease() == a2.Lease() || a1.Token().Value <= wt.Value {
		t.Fatalf("shared Acquire: %v/%d and %v/%d", a1.Token(), a1.Lease(), a2.Token(), a2.Lease())
	}
	if err := a1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if info, err := c.LockInfo(ctx, name); err != nil || info != nil {
		t.Fatalf("after both Releases: %+v %v, want free", info, err)
	}
}

// The readers' phase token r, the writer's w: a reader whose lease
// expired while a writer queued is fenced out (docs/recipes.md's pause
// scenario), with the readers' own token.
func TestSharedPausedReader(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	c := newClient(t, fence.Options{})
	st := openStore(t)
	name := runName("t-rw-pause")
	sr1 := newSession(t, ctx, c, 5*time.Second)
	r1 := fence.NewMutex(sr1, name, fence.Shared())
	if err := r1.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	// Reader 2: a lease nobody renews (the paused reader).
	v, err := c.Do(ctx, "LEASE.GRANT", "500")
	if err != nil {
		t.Fatal(err)
	}
	paused := strconv.FormatInt(v.Int, 10)
	v, err = c.Do(ctx, "LOCK", name, paused, "SHARED")
	if err != nil || uint64(v.Int) != r1.Token().Value {
		t.Fatalf("the paused reader's LOCK SHARED: %v %v", v, err)
	}
	stale := fence.Token{Value: uint64(v.Int)}
	if err := st.Admit(ctx, name, stale); err != nil {
		t.Fatal(err)
	}
	sw := newSession(t, ctx, c, 5*time.Second)
	w := fence.NewMutex(sw, name)
	got := make(chan error, 1)
	go func() { got <- w.Lock(ctx) }()
	waiters(t, ctx, c, name, 1)
	if err := r1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// The paused reader's lease expires: the writer gets the lock.
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if err := st.Set(ctx, name, w.Token(), runName("t-rw-k"), []byte("written")); err != nil {
		t.Fatal(err)
	}
	var se *fence.StaleError
	if err := st.Admit(ctx, name, stale); !errors.As(err, &se) || se.Highest != w.Token().Value {
		t.Fatalf("the paused reader after the writer: %v, want STALE (highest %d)", err, w.Token().Value)
	}
	w.Unlock(ctx)
}

func TestSemaphore(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	c := newClient(t, fence.Options{})
	st := openStore(t)
	name := runName("t-jobs")
	s1 := newSession(t, ctx, c, 5*time.Second)
	s2 := newSession(t, ctx, c, 5*time.Second)
	s3 := newSession(t, ctx, c, 5*time.Second)
	m1, m2, m3 := fence.NewSemaphore(s1, name, 2), fence.NewSemaphore(s2, name, 2), fence.NewSemaphore(s3, name, 2)
	p1, err := m1.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := m2.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p1.Slot() != 0 || p2.Slot() != 1 || p1.Name() != name+"#0" || p2.Name() != name+"#1" ||
		p2.Token().Value <= p1.Token().Value {
		t.Fatalf("slots %d %q %v, %d %q %v", p1.Slot(), p1.Name(), p1.Token(), p2.Slot(), p2.Name(), p2.Token())
	}
	if again, err := m1.TryAcquire(ctx); err != nil || again.Slot() != 0 || again.Token() != p1.Token() {
		t.Fatalf("acquiring again with the same lease: %v %v, want slot 0 and the same token", again, err)
	}
	if _, err := m3.TryAcquire(ctx); !errors.Is(err, fence.ErrLocked) {
		t.Fatalf("a third permit of two: %v, want ErrLocked", err)
	}
	if _, err := fence.NewSemaphore(s3, name, 3).TryAcquire(ctx); !errors.Is(err, fence.ErrWrongType) {
		t.Fatalf("another n: %v, want ErrWrongType", err)
	}
	if err := fence.NewMutex(s3, name+"#1").TryLock(ctx); !errors.Is(err, fence.ErrWrongType) {
		t.Fatalf("LOCK of a slot's name: %v, want ErrWrongType", err)
	}
	info, err := c.SemInfo(ctx, name)
	if err != nil || info == nil || info.Permits != 2 || len(info.Slots) != 2 || info.Slots[0].Lease != s1.Lease() ||
		info.Slots[1].Token != p2.Token().Value || info.Waiters != 0 {
		t.Fatalf("SEM.INFO: %+v %v", info, err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = m3.Acquire(short)
	cancel()
	if !errors.Is(err, fence.ErrLocked) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire past its deadline: %v", err)
	}

	// The holder of slot 0 loses its lease while s3 waits: s3 gets slot 0
	// with a higher token, and the stale holder is fenced out of name#0
	// and only there.
	if err := st.Admit(ctx, p1.Name(), p1.Token()); err != nil {
		t.Fatal(err)
	}
	got := make(chan *fence.Permit, 1)
	go func() {
		p, err := m3.Acquire(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- p
	}()
	waitUntil(t, 5*time.Second, "a waiter on the semaphore", func() bool {
		i, err := c.SemInfo(ctx, name)
		return err == nil && i != nil && i.Waiters == 1
	})
	if _, err := c.Do(ctx, "LEASE.REVOKE", strconv.FormatUint(s1.Lease(), 10)); err != nil {
		t.Fatal(err)
	}
	p3 := <-got
	if p3 == nil {
		t.FailNow()
	}
	if p3.Slot() != 0 || p3.Token().Value <= p2.Token().Value {
		t.Fatalf("the next holder: slot %d token %v", p3.Slot(), p3.Token())
	}
	key := runName("t-jobs-k")
	if err := st.Set(ctx, p3.Name(), p3.Token(), key, []byte("new holder")); err != nil {
		t.Fatal(err)
	}
	var se *fence.StaleError
	if err := st.Set(ctx, p1.Name(), p1.Token(), key, []byte("stale holder")); !errors.As(err, &se) || se.Highest != p3.Token().Value {
		t.Fatalf("the stale slot holder's write: %v, want STALE (highest %d)", err, p3.Token().Value)
	}
	if err := st.Admit(ctx, p2.Name(), p2.Token()); err != nil {
		t.Fatalf("slot 1's holder fenced by slot 0's: %v", err)
	}
	if err := p1.Release(ctx); !errors.Is(err, fence.ErrNotHeld) {
		t.Fatalf("the stale holder's Release: %v, want ErrNotHeld", err)
	}
	if err := p3.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p2.Release(ctx); !errors.Is(err, fence.ErrClosed) {
		t.Fatalf("second Release: %v, want ErrClosed", err)
	}
	if info, err := c.SemInfo(ctx, name); err != nil || info != nil {
		t.Fatalf("SEM.INFO after the releases: %+v %v, want none", info, err)
	}
	if _, err := fence.NewSemaphore(s2, name, 0).TryAcquire(ctx); err == nil {
		t.Fatal("a semaphore of 0 permits was sent")
	}
}

// AcquireSlot: a permit with a lease of its own, kept alive past several
// TTLs; a waiter longer than TTL/2 grants its lease first.
func TestAcquireSlot(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	c := newClient(t, fence.Options{})
	name := runName("t-pool")
	p, err := c.AcquireSlot(ctx, name, 1, fence.AcquireOptions{TTL: 600 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	first := p.ValidUntil()
	waitUntil(t, 5*time.Second, "a renewal", func() bool { return p.ValidUntil().After(first.Add(900 * time.Millisecond)) })
	if p.Err() != nil {
		t.Fatal(p.Err())
	}
	if _, err := c.AcquireSlot(ctx, name, 1, fence.AcquireOptions{TTL: time.Second}); !errors.Is(err, fence.ErrLocked) {
		t.Fatalf("second AcquireSlot: %v, want ErrLocked", err)
	}
	got := make(chan *fence.Permit, 1)
	go func() {
		p2, err := c.AcquireSlot(ctx, name, 1, fence.AcquireOptions{TTL: 600 * time.Millisecond, Wait: 10 * time.Second})
		if err != nil {
			t.Error(err)
		}
		got <- p2
	}()
	waitUntil(t, 5*time.Second, "a waiter on the semaphore", func() bool {
		i, err := c.SemInfo(ctx, name)
		return err == nil && i != nil && i.Waiters == 1
	})
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Do(ctx, "LEASE.INFO", strconv.FormatUint(p.Lease(), 10)); !errors.Is(err, fence.ErrNoLease) {
		t.Fatalf("the released permit's lease: %v, want NOLEASE", err)
	}
	p2 := <-got
	if p2 == nil {
		t.FailNow()
	}
	if p2.Token().Value <= p.Token().Value || p2.Slot() != 0 {
		t.Fatalf("the waiter's permit: slot %d token %v", p2.Slot(), p2.Token())
	}
	if err := p2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Do(ctx, "LEASE.INFO", strconv.FormatUint(p2.Lease(), 10)); !errors.Is(err, fence.ErrNoLease) {
		t.Fatalf("the waiter's lease after Release: %v, want NOLEASE", err)
	}
}

func TestMulti(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	c := newClient(t, fence.Options{})
	st := openStore(t)
	a, b, d := runName("t-acct-a"), runName("t-acct-b"), runName("t-acct-c")
	s1 := newSession(t, ctx, c, 5*time.Second)
	s2 := newSession(t, ctx, c, 5*time.Second)
	m1 := fence.NewMulti(s1, a, b)
	m2 := fence.NewMulti(s2, d, b)
	if err := m1.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	t1 := m1.Token()
	for _, n := range []string{a, b} {
		if i, err := c.LockInfo(ctx, n); err != nil || i == nil || i.Token != t1.Value || i.Lease != s1.Lease() {
			t.Fatalf("LOCK.INFO %s: %+v %v", n, i, err)
		}
	}
	if err := m2.TryLock(ctx); !errors.Is(err, fence.ErrLocked) {
		t.Fatalf("overlapping TryLock: %v, want ErrLocked", err)
	}
	if i, err := c.LockInfo(ctx, d); err != nil || i != nil {
		t.Fatalf("a busy multi-lock took %s: %+v %v", d, i, err)
	}
	got := make(chan error, 1)
	go func() { got <- m2.Lock(ctx) }()
	waiters(t, ctx, c, b, 1)
	if err := st.Admit(ctx, b, t1); err != nil {
		t.Fatal(err)
	}
	if err := m1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	t2 := m2.Token()
	if t2.Value <= t1.Value {
		t.Fatal("token not increasing")
	}
	if i, err := c.LockInfo(ctx, a); err != nil || i != nil {
		t.Fatalf("Unlock left %s held: %+v %v", a, i, err)
	}
	// The old holder is fenced out at b's resource.
	if err := st.Admit(ctx, b, t2); err != nil {
		t.Fatal(err)
	}
	if err := st.Set(ctx, b, t1, runName("t-acct-k"), []byte("stale")); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("the old multi-lock's write: %v, want ErrStale", err)
	}
	if err := m1.Unlock(ctx); !errors.Is(err, fence.ErrNotHeld) {
		t.Fatalf("second Unlock: %v, want ErrNotHeld", err)
	}
	if err := m2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// Bad name lists never reach the server.
	for _, names := range [][]string{nil, {a, a}, {a, "wait"}, {a, ""}} {
		if err := fence.NewMulti(s1, names...).TryLock(ctx); err == nil || errors.Is(err, fence.ErrLocked) {
			t.Fatalf("names %q: %v, want a client error", names, err)
		}
	}
	if _, err := c.AcquireMulti(ctx, []string{a, b}, fence.AcquireOptions{Shared: true}); err == nil {
		t.Fatal("AcquireMulti with Shared was sent")
	}

	// AcquireMulti: a lease of its own; Release frees every name.
	l, err := c.AcquireMulti(ctx, []string{a, b, d}, fence.AcquireOptions{TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Names()) != 3 || l.Token().Value <= t2.Value {
		t.Fatalf("AcquireMulti: %v %v", l.Names(), l.Token())
	}
	if _, err := c.AcquireMulti(ctx, []string{d}, fence.AcquireOptions{TTL: time.Second}); !errors.Is(err, fence.ErrLocked) {
		t.Fatalf("AcquireMulti of a held name: %v, want ErrLocked", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{a, b, d} {
		if i, err := c.LockInfo(ctx, n); err != nil || i != nil {
			t.Fatalf("after Release %s: %+v %v", n, i, err)
		}
	}
}

// Two multi-locks that take the same names in opposite orders, while a
// third holds them: both are granted in turn, no deadlock.
func TestMultiNoDeadlock(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	c := newClient(t, fence.Options{})
	a, b := runName("t-dl-a"), runName("t-dl-b")
	s0 := newSession(t, ctx, c, 5*time.Second)
	s1 := newSession(t, ctx, c, 5*time.Second)
	s2 := newSession(t, ctx, c, 5*time.Second)
	hold := fence.NewMulti(s0, a, b)
	if err := hold.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	m1, m2 := fence.NewMulti(s1, a, b), fence.NewMulti(s2, b, a)
	done := make(chan uint64, 2)
	for _, m := range []*fence.Multi{m1, m2} {
		m := m
		go func() {
			if err := m.Lock(ctx); err != nil {
				t.Error(err)
				done <- 0
				return
			}
			done <- m.Token().Value
			m.Unlock(ctx)
		}()
	}
	waiters(t, ctx, c, a, 2)
	if err := hold.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	x, y := <-done, <-done
	if x == 0 || y == 0 || x == y {
		t.Fatal("the two multi-locks were not both granted, each with its token")
	}
}
