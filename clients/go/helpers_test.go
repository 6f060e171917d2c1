package fence_test

// Test harness: starts real fenced and fence-store processes (binaries from
// $FENCED_BIN / $FENCE_STORE_BIN, default ../../build/release/), each on
// free 127.0.0.1 ports with a temp data dir, and stops them by PID.

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func binPath(env, name string) string {
	if p := os.Getenv(env); p != "" {
		return p
	}
	p, _ := filepath.Abs(filepath.Join("..", "..", "build", "release", name))
	return p
}

var (
	fencedBin = binPath("FENCED_BIN", "fenced")
	storeBin  = binPath("FENCE_STORE_BIN", "fence-store")
	proxyBin  = binPath("FENCE_PROXY_BIN", "fence-proxy")
)

// freePort returns a port nothing listens on right now.
func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// proc is one server process.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	addr string // plain client address
	args []string
	done chan struct{}
}

// start runs bin with args, logging to dir/name.log, and waits until addr
// answers PING (or the process exits, or 15 s pass).
func start(dir, name, bin, addr string, args ...string) (*proc, error) {
	return startReady(dir, name, bin, addr, func() bool { return pingOK(addr) }, args...)
}

// startReady is start with another readiness check.
func startReady(dir, name, bin, addr string, ready func() bool, args ...string) (*proc, error) {
	logPath := filepath.Join(dir, name+".log")
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(lf, "### start %s %s\n", bin, strings.Join(args, " "))
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, err
	}
	p := &proc{name: name, cmd: cmd, log: logPath, addr: addr, args: args, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); lf.Close(); close(p.done) }()
	end := time.Now().Add(15 * time.Second)
	for time.Now().Before(end) {
		select {
		case <-p.done:
			return nil, fmt.Errorf("%s exited at start; log:\n%s", name, p.tail())
		default:
		}
		if ready() {
			return p, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.stop()
	return nil, fmt.Errorf("%s did not answer PING on %s; log:\n%s", name, addr, p.tail())
}

func pingOK(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "+PONG")
}

func (p *proc) tail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// signal sends sig by PID.
func (p *proc) signal(sig syscall.Signal) { _ = p.cmd.Process.Signal(sig) }

// stop: SIGTERM, then SIGKILL after 10 s; waits for the exit.
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	p.signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.signal(syscall.SIGKILL)
		<-p.done
	}
}

// kill: SIGKILL and wait.
func (p *proc) kill() {
	p.signal(syscall.SIGKILL)
	<-p.done
}

func needBins(t testing.TB) {
	for _, b := range []string{fencedBin, storeBin} {
		if _, err := os.Stat(b); err != nil {
			t.Fatalf("%s is not built (make build/release/fenced build/release/fence-store, or set FENCED_BIN/FENCE_STORE_BIN)", b)
		}
	}
}

// startFenced starts a single-node fenced in a new temp dir under t.
func startFenced(t testing.TB, extra ...string) *proc {
	t.Helper()
	needBins(t)
	dir := t.TempDir()
	port := freePort()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	args := append([]string{"--port", fmt.Sprint(port), "--bind", "127.0.0.1",
		"--data-dir", filepath.Join(dir, "data")}, extra...)
	p, err := start(dir, "fenced", fencedBin, addr, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.stop)
	return p
}

func storeArgs(dir string, port int) []string {
	return []string{"--port", fmt.Sprint(port), "--bind", "127.0.0.1",
		"--data-dir", filepath.Join(dir, "store"), "--wal-size", "64k", "--map-size", "16m"}
}

// startStore starts a fence-store in a new temp dir under t.
func startStore(t testing.TB, extra ...string) *proc {
	t.Helper()
	needBins(t)
	dir := t.TempDir()
	port := freePort()
	p, err := start(dir, "fence-store", storeBin, fmt.Sprintf("127.0.0.1:%d", port),
		append(storeArgs(dir, port), extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.stop)
	return p
}

func execOut(bin string, args ...string) (string, error) {
	out, err := exec.Command(bin, args...).CombinedOutput()
	return string(out), err
}

func filepathDir(p string) string { return filepath.Dir(p) }
