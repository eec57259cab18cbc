package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// usage is a process's resident memory and open file descriptors at one
// moment; -1 where it could not be read (the process has gone).
type usage struct {
	rss int64 // bytes
	fds int
}

// usageOf reads pid's VmRSS from /proc/<pid>/status and counts
// /proc/<pid>/fd.
func usageOf(pid int) usage {
	u := usage{rss: -1, fds: -1}
	if f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
				fs := strings.Fields(v) // "12345 kB"
				if len(fs) >= 1 {
					if kb, err := strconv.ParseInt(fs[0], 10, 64); err == nil {
						u.rss = kb << 10
					}
				}
			}
		}
		_ = f.Close()
	}
	if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
		u.fds = len(ents)
	}
	return u
}

// peak is the larger of each field of u and v.
func (u usage) peak(v usage) usage {
	return usage{rss: max(u.rss, v.rss), fds: max(u.fds, v.fds)}
}
