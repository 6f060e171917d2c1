package fence_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	fence "fenced/client"
)

// Every kind's holder gives Transport and Store its fence name and token.
var (
	_ fence.TokenHolder = (*fence.Election)(nil)
	_ fence.TokenHolder = (*fence.Multi)(nil)
	_ fence.TokenHolder = (*fence.Permit)(nil)
	_ fence.TokenHolder = (*fence.Mutex)(nil)
	_ fence.TokenHolder = (*fence.Lock)(nil)
)

// Campaign waits to lead; the leader's token fences the resource on the
// election's name; Observe follows every leader (the state now first).
func ExampleElection() {
	ctx := context.Background()
	c, _ := fence.New(fence.Options{})
	defer c.Close()
	s, err := fence.NewSession(ctx, c, fence.SessionOptions{TTL: 10 * time.Second})
	if err != nil {
		panic(err)
	}
	defer s.Close(ctx)

	octx, stop := context.WithCancel(ctx)
	defer stop()
	changes := c.ObserveElection(octx, "example-primary", 0)
	fmt.Println("leader at first:", (<-changes.C).HasLeader())

	e := fence.NewElection(s, "example-primary")
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := e.Campaign(cctx, []byte("pg-a.internal:5432")); err != nil {
		panic(err) // ErrLocked + DeadlineExceeded: not elected in time
	}
	store, _ := fence.OpenStore(fence.StoreOptions{Addr: os.Getenv("FENCE_STORE")})
	defer store.Close()
	fmt.Println("write as leader:", store.Set(ctx, e.Name(), e.Token(), "example-primary-conf", []byte("v1")))
	st := <-changes.C
	fmt.Printf("observed: %s\n", st.Value)
	if _, err := e.Proclaim(ctx, []byte("pg-a.internal:6432")); err != nil {
		panic(err)
	}
	fmt.Printf("observed: %s\n", (<-changes.C).Value)
	fmt.Println("resign:", e.Resign(ctx))
	fmt.Println("leader after resigning:", (<-changes.C).HasLeader())
	// Output:
	// leader at first: false
	// write as leader: <nil>
	// observed: pg-a.internal:5432
	// observed: pg-a.internal:6432
	// resign: <nil>
	// leader after resigning: false
}

// Readers share a lock and its token; a writer has it alone, with a
// higher token that fences out every reader of the phase before.
func ExampleShared() {
	ctx := context.Background()
	c, _ := fence.New(fence.Options{})
	defer c.Close()
	s1, _ := fence.NewSession(ctx, c, fence.SessionOptions{})
	defer s1.Close(ctx)
	s2, _ := fence.NewSession(ctx, c, fence.SessionOptions{})
	defer s2.Close(ctx)

	r1 := fence.NewMutex(s1, "example-catalog", fence.Shared())
	r2 := fence.NewMutex(s2, "example-catalog", fence.Shared())
	if err := r1.Lock(ctx); err != nil {
		panic(err)
	}
	if err := r2.Lock(ctx); err != nil {
		panic(err)
	}
	fmt.Println("one phase, one token:", r1.Token() == r2.Token())
	info, _ := c.LockInfo(ctx, "example-catalog")
	fmt.Println("shared holders:", info.Shared, len(info.Holders))
	read := r1.Token()
	r1.Unlock(ctx)
	r2.Unlock(ctx)

	w, err := c.Acquire(ctx, "example-catalog", fence.AcquireOptions{Wait: time.Second})
	if err != nil {
		panic(err)
	}
	defer w.Release(ctx)
	fmt.Println("writer's token above the readers':", w.Token().Value > read.Value)
	// Output:
	// one phase, one token: true
	// shared holders: true 2
	// writer's token above the readers': true
}

// A semaphore of 2 permits is 2 slots, each its own fence "name#slot".
func ExampleSemaphore() {
	ctx := context.Background()
	c, _ := fence.New(fence.Options{})
	defer c.Close()
	s, _ := fence.NewSession(ctx, c, fence.SessionOptions{})
	defer s.Close(ctx)

	sem := fence.NewSemaphore(s, "example-workers", 2)
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	p, err := sem.Acquire(actx)
	if err != nil {
		panic(err)
	}
	store, _ := fence.OpenStore(fence.StoreOptions{Addr: os.Getenv("FENCE_STORE")})
	defer store.Close()
	fmt.Println("slot", p.Slot(), "fenced as", p.Name())
	fmt.Println("write:", store.Set(ctx, p.Name(), p.Token(), "example-partition-0", []byte("offset 4711")))

	// A permit with a lease of its own.
	q, err := c.AcquireSlot(ctx, "example-workers", 2, fence.AcquireOptions{TTL: 10 * time.Second})
	if err != nil {
		panic(err)
	}
	fmt.Println("second slot:", q.Name())
	_, err = c.AcquireSlot(ctx, "example-workers", 2, fence.AcquireOptions{})
	fmt.Println("third:", errors.Is(err, fence.ErrLocked))
	fmt.Println(p.Release(ctx), q.Release(ctx))
	// Output:
	// slot 0 fenced as example-workers#0
	// write: <nil>
	// second slot: example-workers#1
	// third: true
	// <nil> <nil>
}

// A multi-lock takes every name or none, with one token valid at each.
func ExampleMulti() {
	ctx := context.Background()
	c, _ := fence.New(fence.Options{})
	defer c.Close()
	s, _ := fence.NewSession(ctx, c, fence.SessionOptions{})
	defer s.Close(ctx)

	m := fence.NewMulti(s, "example-acct:17", "example-acct:42")
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := m.Lock(lctx); err != nil {
		panic(err)
	}
	store, _ := fence.OpenStore(fence.StoreOptions{Addr: os.Getenv("FENCE_STORE")})
	defer store.Close()
	for _, name := range m.Names() { // the same token at every name's fence
		fmt.Println(name, store.Set(ctx, name, m.Token(), name+":balance", []byte("100")))
	}
	fmt.Println("unlock:", m.Unlock(ctx)) // releases every name
	// Output:
	// example-acct:17 <nil>
	// example-acct:42 <nil>
	// unlock: <nil>
}
