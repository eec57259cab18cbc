package transporttest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/choreo-gpu/choreo/collectives/transport/msg"
)

// PipeCarrier is the name the pipe carrier registers under.
const PipeCarrier = "pipe"

// RegisterPipeCarrier registers pipe links as a carrier, once: ranks of
// one process that Join with transport "pipe" are linked by in-memory
// pipes (under auto no pair takes it). It is all a new transport has to
// write besides its links: nothing in collectives.
var RegisterPipeCarrier = sync.OnceFunc(func() {
	msg.Register(msg.Carrier{Name: PipeCarrier, Preference: -1, SameHost: true,
		Prepare: func(string) (msg.Prepared, error) {
			return pipePrepared{fmt.Sprintf("pipe-%d", pipeSeq.Add(1))}, nil
		}})
})

var pipeSeq atomic.Uint64

// pipeHub holds the pipes of the process's groups, by (group, lower rank,
// higher rank), until both ends are taken.
var pipeHub struct {
	mu    sync.Mutex
	pairs map[[3]uint64]*pipePair
}

// pipePair is one pipe of a group until both its ends are taken.
type pipePair struct {
	ends  [2]*Pipe
	taken int
}

// pipePrepared is a rank readied for pipes; its address is only a name.
type pipePrepared struct{ addr string }

func (p pipePrepared) Addr() string { return p.addr }
func (p pipePrepared) Close() error { return nil }

func (p pipePrepared) Connect(ctx context.Context, s msg.Setup) ([]msg.Link, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	links := make([]msg.Link, s.Size)
	pipeHub.mu.Lock()
	defer pipeHub.mu.Unlock()
	if pipeHub.pairs == nil {
		pipeHub.pairs = map[[3]uint64]*pipePair{}
	}
	for _, r := range s.Peers {
		lo, hi, side := s.Rank, r, 0
		if r < s.Rank {
			lo, hi, side = r, s.Rank, 1
		}
		key := [3]uint64{s.Group, uint64(lo), uint64(hi)}
		pp := pipeHub.pairs[key]
		if pp == nil {
			a, b := NewPipe(PipeConfig{Window: s.MaxBuffered, EagerMax: 64 << 10, Chunk: 256 << 10, MaxRTS: 1024})
			pp = &pipePair{ends: [2]*Pipe{a, b}}
			pipeHub.pairs[key] = pp
		}
		links[r] = pp.ends[side].Link()
		if pp.taken++; pp.taken == 2 {
			delete(pipeHub.pairs, key)
		}
	}
	return links, nil
}
