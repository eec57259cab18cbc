//go:build linux

package sim

import (
	"bufio"
	"bytes"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"
)

// hostAvailable returns the bytes this process can still take on this
// machine: the least of its memory cgroups' room, MemAvailable and the
// address space RLIMIT_AS leaves; false if none could be read.
func hostAvailable() (uint64, bool) {
	return probe{read: os.ReadFile, rlimitAS: rlimitAS, pageSize: uint64(os.Getpagesize())}.available()
}

// rlimitAS returns the soft RLIMIT_AS, false when there is none.
func rlimitAS() (uint64, bool) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_AS, &rl); err != nil || rl.Cur >= unlimited {
		return 0, false
	}
	return rl.Cur, true
}

// unlimited: limits at or above it mean none (cgroup v1 writes
// 9223372036854771712, RLIM_INFINITY is all ones).
const unlimited = 1 << 62

// probe reads the machine's memory limits through read (the file system)
// and rlimitAS, so tests can feed it made-up files.
type probe struct {
	read     func(name string) ([]byte, error)
	rlimitAS func() (uint64, bool)
	pageSize uint64
}

func (p probe) available() (uint64, bool) {
	best, ok := uint64(0), false
	take := func(v uint64, found bool) {
		if found && (!ok || v < best) {
			best, ok = v, true
		}
	}
	take(p.cgroupRoom())
	take(p.memAvailable())
	take(p.addressRoom())
	return best, ok
}

// memAvailable is /proc/meminfo's MemAvailable.
func (p probe) memAvailable() (uint64, bool) {
	b, err := p.read("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	s := bufio.NewScanner(bytes.NewReader(b))
	for s.Scan() {
		f := strings.Fields(s.Text())
		if len(f) >= 2 && f[0] == "MemAvailable:" {
			kb, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				return 0, false
			}
			return kb << 10, true
		}
	}
	return 0, false
}

// addressRoom is what RLIMIT_AS leaves beyond the process's current
// virtual size (/proc/self/statm, in pages).
func (p probe) addressRoom() (uint64, bool) {
	limit, ok := p.rlimitAS()
	if !ok {
		return 0, false
	}
	var size uint64
	if b, err := p.read("/proc/self/statm"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			if pages, err := strconv.ParseUint(f[0], 10, 64); err == nil {
				size = pages * p.pageSize
			}
		}
	}
	if size >= limit {
		return 0, true
	}
	return limit - size, true
}

// cgroupRoom is the least room (limit minus usage, page cache that can be
// reclaimed not counted as usage) of the process's memory cgroup and its
// ancestors, under cgroup v2 or v1, false if none sets a limit.
func (p probe) cgroupRoom() (uint64, bool) {
	v2, v1 := "", ""
	if b, err := p.read("/proc/self/cgroup"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.SplitN(line, ":", 3)
			if len(f) != 3 {
				continue
			}
			switch {
			case f[0] == "0" && f[1] == "":
				v2 = f[2]
			case hasController(f[1], "memory"):
				v1 = f[2]
			}
		}
	}
	best, ok := uint64(0), false
	take := func(v uint64, found bool) {
		if found && (!ok || v < best) {
			best, ok = v, true
		}
	}
	for _, dir := range cgroupDirs("/sys/fs/cgroup", v2) {
		take(p.cgroupLevel(dir, "memory.max", "memory.current", "inactive_file"))
	}
	for _, dir := range cgroupDirs("/sys/fs/cgroup/memory", v1) {
		take(p.cgroupLevel(dir, "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file"))
	}
	return best, ok
}

func hasController(list, name string) bool {
	for c := range strings.SplitSeq(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// cgroupDirs lists the directories of cgroup rel under root and of its
// ancestors, up to root itself (which, inside a container, is the
// container's own cgroup).
func cgroupDirs(root, rel string) []string {
	dirs := []string{root}
	for rel = path.Clean("/" + rel); rel != "/"; rel = path.Dir(rel) {
		dirs = append(dirs, root+rel)
	}
	return dirs
}

// cgroupLevel is one cgroup's room: its limit (file limitFile) minus its
// usage (usageFile) less the reclaimable page cache (the statKey entry of
// memory.stat); false without a limit.
func (p probe) cgroupLevel(dir, limitFile, usageFile, statKey string) (uint64, bool) {
	limit, ok := p.readUint(dir + "/" + limitFile)
	if !ok || limit >= unlimited {
		return 0, false
	}
	usage, _ := p.readUint(dir + "/" + usageFile)
	if b, err := p.read(dir + "/memory.stat"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) == 2 && f[0] == statKey {
				if v, err := strconv.ParseUint(f[1], 10, 64); err == nil {
					usage -= min(usage, v)
				}
				break
			}
		}
	}
	if usage >= limit {
		return 0, true
	}
	return limit - usage, true
}

// readUint reads a file holding one number ("max" and unreadable files
// give false).
func (p probe) readUint(name string) (uint64, bool) {
	b, err := p.read(name)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return v, err == nil
}
