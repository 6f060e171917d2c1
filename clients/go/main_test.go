package fence_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	fence "fenced/client"
)

// TestMain starts one fenced and one fence-store for the Example functions
// (they find them through $FENCE_SERVER and $FENCE_STORE), or runs a helper
// mode when the test binary is started as a helper process.
func TestMain(m *testing.M) {
	if os.Getenv("FENCE_GO_HELPER") == "holder" {
		os.Exit(holderMain())
	}
	for _, a := range os.Args[1:] {
		if strings.HasPrefix(a, "-test.fuzzworker") {
			// A fuzzing worker runs only FuzzReader: no servers.
			os.Exit(m.Run())
		}
	}
	for _, b := range []string{fencedBin, storeBin} {
		if _, err := os.Stat(b); err != nil {
			fmt.Fprintf(os.Stderr, "%s is not built (make build/release/fenced build/release/fence-store, or set FENCED_BIN/FENCE_STORE_BIN)\n", b)
			os.Exit(1)
		}
	}
	dir, err := os.MkdirTemp("", "fence-go.")
	if err != nil {
		panic(err)
	}
	fport, sport := freePort(), freePort()
	f, err := start(dir, "fenced", fencedBin, fmt.Sprintf("127.0.0.1:%d", fport),
		"--port", fmt.Sprint(fport), "--data-dir", dir+"/fenced")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	s, err := start(dir, "fence-store", storeBin, fmt.Sprintf("127.0.0.1:%d", sport), storeArgs(dir, sport)...)
	if err != nil {
		f.stop()
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("FENCE_SERVER", f.addr)
	os.Setenv("FENCE_STORE", s.addr)
	rc := m.Run()
	f.stop()
	s.stop()
	if rc == 0 && os.Getenv("KEEP_TMP") == "" {
		os.RemoveAll(dir)
	}
	os.Exit(rc)
}

// holderMain is the paused holder of TestPausedHolder: it takes the lock
// "pause" with a short lease, admits its token at fence-store, says
// "TOKEN n", then waits for a line on stdin (it is SIGSTOPped meanwhile)
// and writes with its now stale token, as a holder paused between its
// check and its write would. It reports the write's outcome and, later,
// the session's end.
func holderMain() int {
	ctx := context.Background()
	c, err := fence.New(fence.Options{})
	if err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	s, err := fence.NewSession(ctx, c, fence.SessionOptions{TTL: 600 * time.Millisecond})
	if err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	m := fence.NewMutex(s, "pause")
	if err := m.Lock(ctx); err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	st, _ := fence.OpenStore(fence.StoreOptions{Addr: os.Getenv("FENCE_STORE")})
	if err := st.Admit(ctx, "pause", m.Token()); err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	fmt.Printf("TOKEN %d\n", m.Token().Value)
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fmt.Println("ERR stdin", err)
		return 1
	}
	err = st.Set(ctx, "pause", m.Token(), "pause-key", []byte("written by the stale holder"))
	var se *fence.StaleError
	switch {
	case errors.As(err, &se):
		fmt.Printf("SET STALE %d %d\n", se.Token, se.Highest)
	case err == nil:
		fmt.Println("SET OK")
	default:
		fmt.Println("SET ERR", strings.ReplaceAll(err.Error(), "\n", " "))
	}
	select {
	case <-s.Done():
		fmt.Printf("LOST %v lease-lost=%v\n", s.Err(), errors.Is(s.Err(), fence.ErrLeaseLost))
	case <-time.After(10 * time.Second):
		fmt.Println("NOT LOST")
	}
	return 0
}

// ctxT is a context that ends with the test's own deadline budget.
func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
