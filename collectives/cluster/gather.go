package cluster

import (
	"fmt"
	"slices"

	"github.com/choreo-gpu/choreo/wire"
)

// gather is rank 0's side of the rendezvous: the hellos seen so far, one
// per rank. It is owned by rank 0's Node actor.
type gather struct {
	size   int
	run    string
	hellos []*wire.Hello // indexed by rank; nil until the rank said hello
	have   int
	left   map[int]bool // ranks whose hello was dropped, until a new one
	sealed bool         // the roster went out: the ranks are whose they are
}

func newGather(size int, run string) *gather {
	return &gather{size: size, run: run, hellos: make([]*wire.Hello, size)}
}

// add records h, or returns why h is refused: another version, world size
// or run, a rank out of range, or a rank already taken by another process.
// A hello repeated by the same process is accepted again, and so is one
// from another process at the same control address and host: that
// address cannot be the old process's any more (two processes do not
// listen on one address), so the new one replaces it (replaced), until
// the roster went out (seal): after that only the roster's own processes
// are accepted (the Node takes another process's hello then as one that
// waits to take a rank when the group grows back: grow.go).
func (g *gather) add(h *wire.Hello) (replaced bool, err error) {
	if err := g.check(h); err != nil {
		return false, err
	}
	r := int(h.GetRank())
	if old := g.hellos[r]; old != nil {
		switch {
		case g.sealed && !sameProcess(old, h):
			return false, fmt.Errorf("rank %d: the group formed with pid %d at %s on %s", r, old.GetPid(), old.GetControlAddr(), old.GetHost())
		case old.GetControlAddr() != h.GetControlAddr() || old.GetHost() != h.GetHost():
			return false, fmt.Errorf("rank %d already joined from %s (pid %d on %s)", r, old.GetControlAddr(), old.GetPid(), old.GetHost())
		case old.GetPid() != h.GetPid():
			g.hellos[r] = h
			return true, nil
		}
		return false, nil
	}
	g.hellos[r] = h
	g.have++
	delete(g.left, r)
	return false, nil
}

// check returns why h does not belong to this rendezvous: another
// version, world size or run, or a rank out of range.
func (g *gather) check(h *wire.Hello) error {
	r := int(h.GetRank())
	switch {
	case h.GetVersion() != Version:
		return fmt.Errorf("control protocol version %d, rank 0 speaks %d", h.GetVersion(), Version)
	case int(h.GetSize()) != g.size:
		return fmt.Errorf("world size %d, rank 0 has %d", h.GetSize(), g.size)
	case h.GetRun() != g.run:
		return fmt.Errorf("run %q, rank 0 is in run %q", h.GetRun(), g.run)
	case r >= g.size:
		return fmt.Errorf("rank %d out of range for world size %d", r, g.size)
	}
	return nil
}

// drop forgets the hello of the rank whose control address is addr (its
// control connection ended: the process died or went silent), so that a
// replacement may take the rank; rank 0's own is never dropped. It
// returns the rank dropped, if any.
func (g *gather) drop(addr string) (rank int, ok bool) {
	for r, h := range g.hellos {
		if r != 0 && h != nil && h.GetControlAddr() == addr {
			g.hellos[r] = nil
			g.have--
			if g.left == nil {
				g.left = map[int]bool{}
			}
			g.left[r] = true
			return r, true
		}
	}
	return 0, false
}

// has reports whether h's process holds its rank already.
func (g *gather) has(h *wire.Hello) bool {
	r := int(h.GetRank())
	return r < g.size && g.hellos[r] != nil && sameProcess(g.hellos[r], h)
}

// sameProcess reports whether two hellos come from one process.
func sameProcess(a, b *wire.Hello) bool {
	return a.GetControlAddr() == b.GetControlAddr() && a.GetPid() == b.GetPid() && a.GetHost() == b.GetHost()
}

// seal closes the rendezvous: the roster went out.
func (g *gather) seal() { g.sealed = true }

// complete reports whether every rank said hello.
func (g *gather) complete() bool { return g.have == g.size }

// ranks lists the ranks that said hello.
func (g *gather) ranks() []int {
	var out []int
	for r, h := range g.hellos {
		if h != nil {
			out = append(out, r)
		}
	}
	return out
}

// missing lists the ranks that did not.
func (g *gather) missing() []int { return missing(g.ranks(), g.size) }

// absent splits the missing ranks into those that never said hello and
// those whose hello was dropped when their control connection ended.
func (g *gather) absent() (never, left []int) {
	for _, r := range g.missing() {
		if g.left[r] {
			left = append(left, r)
		} else {
			never = append(never, r)
		}
	}
	return never, left
}

// roster is the roster of the hellos seen so far, under group (0 for a
// partial roster, which tells a waiting rank who is there).
func (g *gather) roster(group uint64) *wire.Roster {
	w := &wire.Roster{Group: group, Version: Version}
	for r, h := range g.hellos {
		if h != nil {
			w.Members = append(w.Members, &wire.Member{Rank: uint32(r), ControlAddr: h.GetControlAddr(),
				DataAddr: h.GetDataAddr(), Host: h.GetHost(), Pid: h.GetPid(), Transport: h.GetTransport()})
		}
	}
	return w
}

// controls lists the control addresses of the ranks that said hello,
// but rank 0's.
func (g *gather) controls() []string {
	var out []string
	for _, h := range g.hellos[1:] {
		if h != nil && !slices.Contains(out, h.GetControlAddr()) {
			out = append(out, h.GetControlAddr())
		}
	}
	return out
}
