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
}

func newGather(size int, run string) *gather {
	return &gather{size: size, run: run, hellos: make([]*wire.Hello, size)}
}

// add records h, or returns why h is refused: another version, world size
// or run, a rank out of range, or a rank already taken by another process.
// A hello repeated by the same process is accepted again.
func (g *gather) add(h *wire.Hello) error {
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
	if old := g.hellos[r]; old != nil {
		if old.GetControlAddr() != h.GetControlAddr() || old.GetPid() != h.GetPid() || old.GetHost() != h.GetHost() {
			return fmt.Errorf("rank %d already joined from %s (pid %d on %s)", r, old.GetControlAddr(), old.GetPid(), old.GetHost())
		}
		return nil
	}
	g.hellos[r] = h
	g.have++
	return nil
}

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

// roster is the roster of the hellos seen so far, under group (0 for a
// partial roster, which tells a waiting rank who is there).
func (g *gather) roster(group uint64) *wire.Roster {
	w := &wire.Roster{Group: group, Version: Version}
	for r, h := range g.hellos {
		if h != nil {
			w.Members = append(w.Members, &wire.Member{Rank: uint32(r), ControlAddr: h.GetControlAddr(),
				DataAddr: h.GetDataAddr(), Host: h.GetHost(), Pid: h.GetPid()})
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
