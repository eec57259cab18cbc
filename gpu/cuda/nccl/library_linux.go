//go:build linux

package nccl

import (
	"fmt"
	"runtime"
	"strings"
	"syscall"

	"github.com/ebitengine/purego"
)

// openLibrary opens the first of paths that dlopen accepts and resolves
// the table from it. A library that opens but lacks a required entry point
// is an error (not a reason to try the next path: the user's choice of
// library must not be silently replaced). The error wraps ErrUnavailable
// and lists every path tried with dlopen's message for it.
func openLibrary(paths []string) (*library, error) {
	if len(paths) == 0 {
		return nil, unavailablef("no library path to try")
	}
	// dlerror's message belongs to the thread that called dlopen.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var tried []string
	for _, p := range paths {
		h, err := purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s (%v)", p, err))
			continue
		}
		l := &library{path: p}
		for _, s := range l.symbols() {
			sym, err := purego.Dlsym(h, s.name)
			if err != nil {
				if s.optional {
					continue
				}
				_ = purego.Dlclose(h)
				return nil, unavailablef("%s lacks %s (NCCL too old?): %v", p, s.name, err)
			}
			purego.RegisterFunc(s.fn, sym)
		}
		return l, nil
	}
	return nil, unavailablef("no NCCL library found (set %s to its path); tried %s", LibEnv, strings.Join(tried, "; "))
}

// threadID is the calling OS thread's id (gettid), which is stable for a
// goroutine locked to its thread.
func threadID() int { return syscall.Gettid() }
