package msg_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
	"github.com/choreo-gpu/choreo/collectives/transport/transporttest"
)

// TestStress runs streams of messages between every pair of three ranks
// on several tags at once (eager, announced, read by address), with
// operations whose contexts end at random and, on half the streams, their
// collective aborted midway. Every call must end with nil, its context's
// error or the abort; what a Recv gets must be one of its tag's messages,
// whole, later than the one before; afterwards no Hold is left and no
// peer was lost or broke the protocol.
func TestStress(t *testing.T) {
	for _, pc := range []transporttest.PipeConfig{
		{EagerMax: 64, Chunk: 96, MaxRTS: 32, Window: 1024},
		{EagerMax: 64, Chunk: 96, MaxRTS: 32, Window: 1024, SingleCopyMin: 200},
	} {
		g := newGroup(t, 3, pc, msg.Config{})
		var wg sync.WaitGroup
		var got atomic.Int64
		streams := 0
		errc := make(chan error, 128)
		for src := range 3 {
			for dst := range 3 {
				if src == dst {
					continue
				}
				for k, size := range []int{8, 64, 150, 700} {
					for _, group := range []uint64{20, 99} {
						streams++
						st := &stream{g: g, got: &got, src: src, dst: dst, size: size, seed: uint64(src*100 + dst*10 + k),
							tag: tagOf(group, uint64(src*32+dst*8+k))}
						sd := newSides()
						wg.Add(2)
						go func() { defer wg.Done(); errc <- st.send(sd) }()
						go func() { defer wg.Done(); errc <- st.recv(sd) }()
					}
				}
			}
		}
		wg.Add(1)
		go func() { defer wg.Done(); stressAborts(g) }()
		wg.Wait()
		close(errc)
		for err := range errc {
			if err != nil {
				t.Fatal(err)
			}
		}
		// Most calls have long contexts: most messages arrive.
		if n := got.Load(); n < int64(streams*stressMsgs/4) {
			t.Fatalf("%d of %d messages received", n, streams*stressMsgs)
		}
		t.Logf("single copy %v: %d of %d messages received", pc.SingleCopyMin > 0, got.Load(), streams*stressMsgs)
		g.noHolds(t)
		for r, e := range g.eps {
			if s := e.Stats(); s.PeersLost != 0 || s.ProtocolErrors != 0 {
				t.Fatalf("rank %d: %+v", r, s)
			}
		}
	}
}

const stressMsgs = 60

// stream is one tag's messages from src to dst. Each side's calls end
// shortly after the other side is done (a Send whose Recv will never
// come, a Recv whose message will never come): its context is canceled.
type stream struct {
	g              *group
	got            *atomic.Int64 // messages received, by all streams
	src, dst, size int
	seed           uint64
	tag            transport.Tag
}

// sides are the contexts of a stream's two sides, and how each tells the
// other it is done.
type sides struct {
	send, recv       context.Context
	sentAll, tookAll func()
}

func newSides() *sides {
	send, stopSend := context.WithCancel(context.Background())
	recv, stopRecv := context.WithCancel(context.Background())
	later := func(stop context.CancelFunc) func() {
		return func() { time.AfterFunc(20*time.Millisecond, stop) }
	}
	return &sides{send: send, recv: recv, sentAll: later(stopRecv), tookAll: later(stopSend)}
}

// opCtx is a call's context within side: mostly long, now and then a few
// hundred microseconds.
func opCtx(side context.Context, rng *rand.Rand) (context.Context, context.CancelFunc) {
	d := transporttest.Long
	if rng.IntN(4) == 0 {
		d = time.Duration(rng.IntN(500)) * time.Microsecond
	}
	return context.WithTimeout(side, d)
}

// ok reports whether err is one a stress call may end with.
func (st *stream) ok(err error) bool {
	return err == nil || errors.Is(err, transport.ErrTimeout) || errors.Is(err, context.Canceled) ||
		(st.tag.Group == 99 && errors.Is(err, transport.ErrAborted))
}

func (st *stream) send(sd *sides) error {
	defer sd.sentAll()
	rng := rand.New(rand.NewPCG(st.seed, 1))
	for i := range stressMsgs {
		data := fill(st.size, byte(i))
		binary.LittleEndian.PutUint64(data, uint64(i))
		ctx, cancel := opCtx(sd.send, rng)
		err := st.g.eps[st.src].Send(ctx, st.dst, st.tag, data)
		cancel()
		if !st.ok(err) {
			return fmt.Errorf("send %d: %w", i, err)
		}
	}
	return nil
}

func (st *stream) recv(sd *sides) error {
	defer sd.tookAll()
	rng := rand.New(rand.NewPCG(st.seed, 2))
	last := -1
	for i := range stressMsgs {
		got := make([]byte, st.size)
		ctx, cancel := opCtx(sd.recv, rng)
		err := st.g.eps[st.dst].Recv(ctx, st.src, st.tag, got)
		cancel()
		if !st.ok(err) {
			return fmt.Errorf("recv %d: %w", i, err)
		}
		if err != nil {
			continue
		}
		n := int(binary.LittleEndian.Uint64(got))
		want := fill(st.size, byte(n))
		binary.LittleEndian.PutUint64(want, uint64(n))
		if n <= last || string(got) != string(want) {
			return fmt.Errorf("recv %d on %v: message %d after %d, or corrupted", i, st.tag, n, last)
		}
		last = n
		st.got.Add(1)
	}
	return nil
}

// stressAborts aborts the abortable streams' collectives, one in two, from
// a random rank, while the streams run.
func stressAborts(g *group) {
	rng := rand.New(rand.NewPCG(7, 7))
	for seq := range uint64(96) {
		if seq%2 == 0 {
			time.Sleep(time.Duration(rng.IntN(1000)) * time.Microsecond)
			g.eps[rng.IntN(3)].Abort(tagOf(99, seq), errors.New("stress"))
		}
	}
}
