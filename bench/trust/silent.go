package main

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// silentDialers is how many dials are in flight at once.
const silentDialers = 64

// silentAttack opens count TCP connections to addr that never write (each
// reads, and ignores, what the server sends), 64 dials at once, at most
// 60 s of dialling. held says how many it holds; release closes them all
// and says how many the server closed meanwhile.
func silentAttack(addr string, count int) (held string, release func() string) {
	var (
		mu                    sync.Mutex
		conns                 []net.Conn
		readers               sync.WaitGroup
		closedByServer, fails atomic.Int64
		releasing             atomic.Bool
		next                  atomic.Int64
		firstErr              error
	)
	deadline := time.Now().Add(60 * time.Second)
	t0 := time.Now()
	var dialers sync.WaitGroup
	for range silentDialers {
		dialers.Add(1)
		go func() {
			defer dialers.Done()
			for next.Add(1) <= int64(count) && time.Now().Before(deadline) {
				c, err := net.DialTimeout("tcp", addr, 5*time.Second)
				if err != nil {
					fails.Add(1)
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					continue
				}
				rst(c)
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
				readers.Add(1)
				go func() {
					defer readers.Done()
					buf := make([]byte, 64)
					for {
						if _, err := c.Read(buf); err != nil {
							if !releasing.Load() {
								closedByServer.Add(1)
							}
							return
						}
					}
				}()
			}
		}()
	}
	dialers.Wait()
	mu.Lock()
	n := len(conns)
	mu.Unlock()
	held = fmt.Sprintf("%d of %d conns (dialled in %.1f s)", n, count, time.Since(t0).Seconds())
	if fails.Load() > 0 {
		held += fmt.Sprintf(", %d dials failed (%v)", fails.Load(), firstErr)
	}
	return held, func() string {
		// Counted before closing: the connections the server ended while held.
		s := fmt.Sprintf("closed %d of %d while held", closedByServer.Load(), n)
		releasing.Store(true)
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		done := make(chan struct{})
		go func() { readers.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
		}
		return s
	}
}
