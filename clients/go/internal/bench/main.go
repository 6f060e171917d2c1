// Command bench is the Go client's load generator for make bench: N
// goroutines, each with a lock of its own ("uncontended"), or all on one
// lock ("contended"), cycle Client.Acquire + Lock.Release for a duration,
// as `fencectl bench` does with libfence (each worker its own Client of
// one connection, TTL 10 s, wait TTL/2). Output: fencectl bench's TSV
// columns, one line per cell.
//
//	go run ./internal/bench -server 127.0.0.1:7700 -conns 1,64 -duration 3s
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	fence "fenced/client"
)

func main() {
	server := flag.String("server", "127.0.0.1:7700", "fenced address(es), comma-separated")
	conns := flag.String("conns", "1,64", "goroutines per cell, comma-separated")
	dur := flag.Duration("duration", 3*time.Second, "length of each cell")
	mode := flag.String("mode", "uncontended", "uncontended or contended")
	ttl := flag.Duration("ttl", 10*time.Second, "lease TTL")
	prefix := flag.String("prefix", fmt.Sprintf("gobench.%d", os.Getpid()), "lock name prefix")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile here")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(2)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	fmt.Println("mode\tconns\tcycles_per_s\tcycles\tp50_us\tp99_us\tp999_us\tmax_us\tmin_cycles\tmax_cycles\terrors")
	for _, f := range strings.Split(*conns, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > 10000 {
			fmt.Fprintln(os.Stderr, "bench: bad -conns", f)
			os.Exit(2)
		}
		if err := cell(strings.Split(*server, ","), *mode, n, *dur, *ttl, *prefix); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			pprof.StopCPUProfile()
			os.Exit(1)
		}
	}
}

type result struct {
	cycles, errors int
	lat            []time.Duration
	last           error
}

func cell(servers []string, mode string, n int, dur, ttl time.Duration, prefix string) error {
	res := make([]result, n)
	clients := make([]*fence.Client, n)
	for i := range clients {
		c, err := fence.New(fence.Options{Servers: servers, PoolSize: 1})
		if err != nil {
			return err
		}
		if err := c.Ping(context.Background()); err != nil {
			return err
		}
		clients[i] = c
	}
	start := time.Now().Add(200 * time.Millisecond)
	stop := start.Add(dur)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r := &res[i]
			c := clients[i]
			name := fmt.Sprintf("%s.u%d.%d", prefix, n, i)
			if mode == "contended" {
				name = fmt.Sprintf("%s.c%d.contended", prefix, n)
			}
			ctx := context.Background()
			time.Sleep(time.Until(start))
			for time.Now().Before(stop) {
				t0 := time.Now()
				l, err := c.Acquire(ctx, name, fence.AcquireOptions{TTL: ttl, Wait: ttl / 2})
				t1 := time.Now()
				if err != nil {
					r.errors++
					r.last = err
					if errors.Is(err, fence.ErrUnreachable) {
						time.Sleep(10 * time.Millisecond)
					}
					continue
				}
				if err := l.Release(ctx); err != nil {
					r.errors++
					r.last = err
					continue
				}
				if !t1.After(stop) {
					r.cycles++
					r.lat = append(r.lat, t1.Sub(t0))
				}
			}
		}(i)
	}
	wg.Wait()
	var all []time.Duration
	cycles, errs, cmin, cmax := 0, 0, -1, 0
	var last error
	for i := range res {
		cycles += res[i].cycles
		errs += res[i].errors
		if res[i].last != nil {
			last = res[i].last
		}
		if cmin < 0 || res[i].cycles < cmin {
			cmin = res[i].cycles
		}
		if res[i].cycles > cmax {
			cmax = res[i].cycles
		}
		all = append(all, res[i].lat...)
		clients[i].Close()
	}
	sort.Slice(all, func(a, b int) bool { return all[a] < all[b] })
	q := func(p float64) int64 {
		if len(all) == 0 {
			return 0
		}
		i := int(p * float64(len(all)))
		if i >= len(all) {
			i = len(all) - 1
		}
		return all[i].Microseconds()
	}
	var mx int64
	if len(all) > 0 {
		mx = all[len(all)-1].Microseconds()
	}
	fmt.Printf("%s\t%d\t%.1f\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", mode, n,
		float64(cycles)/dur.Seconds(), cycles, q(0.50), q(0.99), q(0.999), mx, cmin, cmax, errs)
	if cycles == 0 && errs > 0 {
		return fmt.Errorf("every cycle failed (last: %v)", last)
	}
	return nil
}
