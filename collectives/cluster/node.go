package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/choreo-gpu/choreo/actors"
	"github.com/choreo-gpu/choreo/actors/remoting"
	"github.com/choreo-gpu/choreo/internal/errs"
	"github.com/choreo-gpu/choreo/wire"
)

// Name is the well-known name of a rank's Node on its runtime's remote: a
// peer reaches rank r's Node at actor.NewPID(r's control address, Name).
const Name = "choreo-node"

// goneGrace is how long a rank waits, after rank 0's control connection
// ended before the roster, for a word from rank 0 that explains it (a
// Leave sent as it gave up) before it reports rank 0 lost.
const goneGrace = 200 * time.Millisecond

// helloEvery is how often a rank repeats its hello until rank 0 answers
// with the roster: the first may arrive before rank 0's Node exists.
const helloEvery = 300 * time.Millisecond

// Spec is what a rank brings to the rendezvous.
type Spec struct {
	Rank, Size int
	// Run names the run; rank 0 refuses ranks of another run.
	Run string
	// Coordinator is rank 0's control-plane address.
	Coordinator string
	// Data is this rank's data-plane listener address.
	Data string
	// Backend names this rank's GPU backend, for messages.
	Backend string
	// Transport is the data plane this rank asks for ("auto", "tcp",
	// "shm"); the roster carries every rank's.
	Transport string
	// Host is this rank's host identity in the roster; empty: this
	// machine's (its host name and boot id). Ranks of one identity are
	// linked through shared memory.
	Host string
	// PeerTimeout is how long signs that a peer may be gone (its watch
	// not answered, its connection ended) may go on while its address
	// still accepts connections before it is lost; 0: DefaultPeerTimeout.
	PeerTimeout time.Duration
}

// closeWait bounds how long Close waits for the Node's actor to stop.
const closeWait = 2 * time.Second

// Node is a rank's control-plane actor, spawned under Name on its
// runtime's remote: it runs the rendezvous (hosting it on rank 0) and then
// watches the peers. A Node serves one group; Close stops it, after which
// the runtime may Start another.
//
// The Node follows the ends of its runtime's control connections
// (remoting.Remote.OnEndpointTerminated): on rank 0 a rank whose connection
// ends before the roster is complete is dropped from the rendezvous (a
// replacement may take its rank); on another rank, rank 0's connection
// ending after rank 0 answered fails the rendezvous with ErrPeerLost. Once
// the roster is out, a member whose connection ends or whose watch ends is
// lost when its address refuses connections (its process is gone), when
// it said it leaves, or when such signs go on for the peer timeout while
// its address still accepts (a loaded host may drop a watch or a connect
// of a live peer).
//
// The Node's actor is supervised (supervise.go): a panic while it handles
// a message restarts it, keeping its state (the roster, the peers watched,
// lost and suspected, the callback Watch set), which lives in the Node and
// not in the actor, and watching its peers again, so that a restart loses
// no peer and misses no loss. Past maxRestarts restarts within
// restartWindow the actor stops and the Node fails: Err names the panic,
// the rendezvous (if still waiting) fails with it, every peer not yet lost
// is reported lost through Watch's callback with it (an error wrapping
// ErrPeerLost and ErrEvicted: this rank is out of its group), and the
// peers are told that this rank leaves.
type Node struct {
	rt      *actors.Runtime
	rem     *remoting.Remote
	pid     *actor.PID
	spec    Spec
	control string
	// authBefore counts the runtime's authentication failures when the
	// Node started: only a later one fails this rendezvous.
	authBefore uint64
	stopEvents func() // ends the OnEndpointTerminated calls

	final    chan result                 // the roster or a refusal, once
	progress atomic.Pointer[wire.Roster] // rank 0's latest partial roster

	// state is the actor's state; only the actor's goroutine touches it
	// (see nodeState), so that it survives the actor's restarts.
	state *nodeState
	// incarnations counts the actor's incarnations: 1 once spawned, one
	// more per restart.
	incarnations atomic.Int32
	// fault, set by tests only, runs first on each message the actor
	// handles (but Stopping and Stopped): it panics to test supervision.
	fault atomic.Pointer[func(msg any)]

	mu     sync.Mutex
	probes *probes // Watch's, until StopProbes
	closed bool
	// onLost is Watch's callback, for the actor's failure (it may come
	// before the actor handled watchPeers).
	onLost func(rank int, cause error)
	failed error // why the actor stopped past its restart bound, once it did
	// growing is the member's ask to grow its group waiting for rank 0's
	// answer (rejoin.go), nil when none waits.
	growing *growWait

	// broken is set by the supervisor as it stops the actor past its
	// restart bound: why the Node fails.
	broken atomic.Pointer[error]

	closeOnce sync.Once
}

// result is how the rendezvous ended for this rank.
type result struct {
	roster Roster
	err    error
}

// Start spawns this rank's Node on rt, whose remoting must be started.
func Start(rt *actors.Runtime, spec Spec) (*Node, error) {
	rem := remoting.Of(rt)
	if rem == nil {
		return nil, fmt.Errorf("cluster: start: %w: the runtime's remoting is not started", errs.ErrBadArgument)
	}
	if spec.Size < 1 || spec.Rank < 0 || spec.Rank >= spec.Size {
		return nil, fmt.Errorf("cluster: start: %w: rank %d of %d", errs.ErrBadArgument, spec.Rank, spec.Size)
	}
	n := &Node{rt: rt, rem: rem, spec: spec, control: rem.Address(), final: make(chan result, 1), state: &nodeState{}}
	n.authBefore, _ = rem.AuthFailures()
	if spec.Rank == 0 {
		n.state.gather = newGather(spec.Size, spec.Run)
	}
	log := rt.Logger().Named("cluster")
	// A thin receiver over n.state, made anew on each restart.
	produce := func() actor.Actor {
		return &nodeActor{nodeState: n.state, n: n, log: log, restarted: n.incarnations.Add(1) > 1}
	}
	pid, err := rt.ActorSystem().Root.SpawnNamed(actor.PropsFromProducer(produce, actor.WithGuardian(supervisor{})), Name)
	if err != nil {
		return nil, fmt.Errorf("cluster: start rank %d: %w (a runtime serves one joined group at a time)", spec.Rank, err)
	}
	n.pid = pid
	root := rt.ActorSystem().Root
	n.stopEvents = rem.OnEndpointTerminated(func(addr string) { root.Send(pid, endpointGone{addr: addr}) })
	return n, nil
}

// authFailure is the runtime's latest failed authentication of a dial,
// if there was one since the Node started (remoting.ErrAuth: the peer refused this rank's
// proof of the secret, or its own was wrong), nil if none.
func (n *Node) authFailure() error {
	if count, last := n.rem.AuthFailures(); count > n.authBefore {
		return last
	}
	return nil
}

// Control is this rank's control-plane address.
func (n *Node) Control() string { return n.control }

// hostID names this machine: its host name and, where the system tells
// it (Linux), its boot id, so that two machines (containers) that share a
// host name are not taken for one.
func hostID() string {
	host, _ := os.Hostname()
	if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
		host += "/" + strings.TrimSpace(string(b))
	}
	return host
}

// hello is this rank's Hello.
func (n *Node) hello() *wire.Hello {
	host := n.spec.Host
	if host == "" {
		host = hostID()
	}
	return &wire.Hello{Rank: uint32(n.spec.Rank), Size: uint32(n.spec.Size), ControlAddr: n.control,
		DataAddr: n.spec.Data, Host: host, Pid: int32(os.Getpid()), Run: n.spec.Run,
		Backend: n.spec.Backend, Version: Version, Transport: n.spec.Transport}
}

// Rendezvous meets the other ranks and returns the roster, or fails when
// ctx ends (naming the ranks still missing, as far as this rank knows),
// rank 0 refuses this rank (ErrMismatch: another world size, run or
// version, or a rank taken twice), this rank's dial fails to authenticate
// (remoting.ErrAuth: the secrets differ; within helloEvery of the failure),
// or rank 0's control connection ends after rank 0 answered (ErrPeerLost).
func (n *Node) Rendezvous(ctx context.Context) (Roster, error) {
	root := n.rt.ActorSystem().Root
	if n.spec.Rank == 0 {
		root.Send(n.pid, n.hello())
		r, err := n.await(ctx, nil)
		if err != nil { // tell the ranks that came: they would wait for nothing
			root.Send(n.pid, giveUp{reason: err.Error(), timeout: errors.Is(err, errs.ErrTimeout)})
		}
		return r, err
	}
	if err := reachable(ctx, n.spec.Coordinator); err != nil {
		return Roster{}, fmt.Errorf("cluster: rank %d: rendezvous: rank 0's control plane at %s not reachable: %w",
			n.spec.Rank, n.spec.Coordinator, err)
	}
	coord := actor.NewPID(n.spec.Coordinator, Name)
	h := n.hello()
	return n.await(ctx, func() { root.Send(coord, h) })
}

// await waits for the roster, calling again (if set) every helloEvery,
// and fails as soon as a dial of this rank failed to authenticate.
func (n *Node) await(ctx context.Context, again func()) (Roster, error) {
	tick := time.NewTicker(helloEvery)
	defer tick.Stop()
	for {
		if again != nil {
			again()
		}
		if err := n.authFailure(); err != nil {
			return Roster{}, fmt.Errorf("cluster: rank %d: rendezvous: %w", n.spec.Rank, err)
		}
		select {
		case r := <-n.final:
			n.final <- r // later calls see it too
			if r.err != nil {
				return Roster{}, fmt.Errorf("cluster: rank %d: rendezvous: %w", n.spec.Rank, r.err)
			}
			return r.roster, nil
		case <-ctx.Done():
			return Roster{}, n.timedOut(ctx)
		case <-tick.C:
		}
	}
}

// timedOut is the error of a rendezvous whose ctx ended, naming the ranks
// missing as far as this rank knows.
func (n *Node) timedOut(ctx context.Context) error {
	cause := ctx.Err()
	if errors.Is(cause, context.DeadlineExceeded) {
		cause = fmt.Errorf("%w: %w", errs.ErrTimeout, cause)
	}
	if n.spec.Rank == 0 {
		reply := make(chan absence, 1)
		n.rt.ActorSystem().Root.Send(n.pid, askMissing{reply: reply})
		select {
		case m := <-reply:
			var parts []string
			if len(m.never) > 0 {
				parts = append(parts, fmt.Sprintf("ranks %v never joined", m.never))
			}
			if len(m.left) > 0 {
				parts = append(parts, fmt.Sprintf("ranks %v joined and their control connection ended", m.left))
			}
			return fmt.Errorf("cluster: rank 0: rendezvous: %s: %w", strings.Join(parts, "; "), cause)
		case <-time.After(time.Second):
			return fmt.Errorf("cluster: rank 0: rendezvous: %w", cause)
		}
	}
	if p := n.progress.Load(); p != nil && len(p.GetMembers()) == n.spec.Size {
		return fmt.Errorf("cluster: rank %d: rendezvous: the group at rank 0 (%s) had formed already; this process waited to take rank %d when its members grow the group back (Group.Grow), which they did not do in time: %w",
			n.spec.Rank, n.spec.Coordinator, n.spec.Rank, cause)
	}
	if p := n.progress.Load(); p != nil {
		return fmt.Errorf("cluster: rank %d: rendezvous: rank 0 at %s was still waiting for ranks %v: %w",
			n.spec.Rank, n.spec.Coordinator, missing(ranksOf(p), n.spec.Size), cause)
	}
	return fmt.Errorf("cluster: rank %d: rendezvous: no answer from rank 0 at %s: %w", n.spec.Rank, n.spec.Coordinator, cause)
}

// reachable waits until addr accepts TCP connections or ctx ends: a hello
// sent to a remote that does not listen yet would cost protoactor's
// connect retries.
func reachable(ctx context.Context, addr string) error {
	var d net.Dialer
	for {
		dctx, cancel := context.WithTimeout(ctx, time.Second)
		c, err := d.DialContext(dctx, "tcp", addr)
		cancel()
		if err == nil {
			_ = c.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Watch makes the Node watch every peer of roster: when a peer's Node or
// its whole endpoint goes away, onLost is called once for that rank (on the
// Node's goroutine; it must not block nor call the Node) with the cause. A
// peer lost since the roster arrived, before Watch, is reported at once.
// Rank 0 also tells the other ranks of each loss it sees (wire.Lost), so
// that a rank with no connection to the lost one yet learns it as soon as
// rank 0. Until StopProbes, Watch also dials every peer's control address
// every probeEvery: one that refuses is lost (see probes). When the Node
// has failed (Err), every peer not lost before is reported lost at once
// with its failure (on the caller's goroutine).
func (n *Node) Watch(roster Roster, onLost func(rank int, cause error)) {
	root, pid := n.rt.ActorSystem().Root, n.pid
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.failed != nil { // the actor is gone: its state is still, and settled under n.mu
		n.state.onLost = onLost
		n.state.reportAll(roster, n.spec.Rank, n.failed)
		return
	}
	n.onLost = onLost
	root.Send(pid, watchPeers{roster: roster, onLost: onLost})
	if n.probes == nil && !n.closed {
		n.probes = startProbes(roster, n.spec.Rank, func(rank int, cause error) { root.Send(pid, peerRefused{rank: rank, cause: cause}) })
	}
}

// StopProbes ends Watch's dials: once the data plane is connected it sees
// a dead peer's connections end by itself.
func (n *Node) StopProbes() {
	n.mu.Lock()
	p := n.probes
	n.mu.Unlock()
	if p != nil {
		p.close()
	}
}

// Close tells the watched peers this rank leaves (reason says why) and
// stops the Node, waiting at most closeWait for its actor to stop.
func (n *Node) Close(reason string) {
	n.closeOnce.Do(func() {
		n.mu.Lock()
		n.closed = true
		n.mu.Unlock()
		n.StopProbes()
		n.endGrow(fmt.Errorf("the rank's node closed (%s): %w", reason, errs.ErrClosed))
		n.stopEvents()
		root := n.rt.ActorSystem().Root
		root.Send(n.pid, leave{reason: reason})
		stopped := make(chan struct{})
		f := root.PoisonFuture(n.pid)
		go func() { // ends by itself: protoactor's future times out after 10 s
			_ = f.Wait()
			close(stopped)
		}()
		t := time.NewTimer(closeWait)
		defer t.Stop()
		select {
		case <-stopped:
		case <-t.C:
			n.rt.Logger().Named("cluster").Warn("node did not stop in time", zap.Int("rank", n.spec.Rank), zap.Duration("waited", closeWait))
		}
	})
}
