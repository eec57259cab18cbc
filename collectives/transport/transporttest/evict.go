package transporttest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
)

// EvictPlan is a process eviction test: the peer timeout both ranks use,
// how long the child's process is stopped (SIGSTOP), and whether it is
// stopped in the middle of receiving a large message (Busy).
type EvictPlan struct {
	PeerTimeout, Pause time.Duration
	Busy               bool
}

// Evicts reports whether the child is stopped past the peer timeout.
func (p EvictPlan) Evicts() bool { return p.Pause > p.PeerTimeout }

var (
	// EvictLong stops the child for two peer timeouts: it is evicted. (A
	// peer timeout of 1 s, four heartbeats, lets a loaded host's live
	// ranks find each other silent.)
	EvictLong = EvictPlan{PeerTimeout: 2 * time.Second, Pause: 4 * time.Second}
	// EvictShort stops it for a tenth of one: nothing happens.
	EvictShort = EvictPlan{PeerTimeout: 3 * time.Second, Pause: 300 * time.Millisecond}
	// EvictBusy is EvictLong while the parent sends the child busySize
	// bytes.
	EvictBusy = EvictPlan{PeerTimeout: 2 * time.Second, Pause: 4 * time.Second, Busy: true}
)

// busySize is the message a Busy plan's child receives while it is
// stopped.
const busySize = 32 << 20

// Evict is one run of the eviction scenario, on one side: its plan and,
// for a Busy plan, the large message's buffer, made before the ranks
// connect (making it may stall a loaded process past a short peer
// timeout, which would be a true verdict on the wrong rank).
type Evict struct {
	Plan EvictPlan
	buf  []byte
}

// NewEvict prepares a run of plan; call it before connecting.
func NewEvict(plan EvictPlan) *Evict {
	e := &Evict{Plan: plan}
	if plan.Busy {
		e.buf = make([]byte, busySize)
		for i := 0; i < len(e.buf); i += 4096 {
			e.buf[i] = byte(i >> 12)
		}
	}
	return e
}

// processBound bounds each step of the eviction scenario: generous, for a
// loaded host.
const processBound = 60 * time.Second

func evictTag(step uint32) transport.Tag { return transport.Tag{Group: 90, Seq: 1, Step: step} }

// Child is the child's part of the eviction scenario, as rank 1 of two,
// over tr: an exchange with rank 0; with plan.Busy, a Recv of
// busySize bytes from rank 0 begun; the line "WAITING"; then (once the
// parent says "GO", after its stop) the large Recv's end, reported as
// "BUSY <class> <error>", and a Recv from rank 0 and a Send to it,
// reported as "RECV <class> <error>" and "SEND <class> <error>" (class:
// OK, Evicted, PeerLost, Timeout or Other); it closes tr once the parent
// says "BYE" (or after processBound).
func (e *Evict) Child(tr transport.Transport) {
	ctx, cancel := context.WithTimeout(context.Background(), processBound)
	defer cancel()
	err := tr.Recv(ctx, 0, evictTag(1), make([]byte, 1))
	if err == nil {
		err = tr.Send(ctx, 0, evictTag(2), []byte{2})
	}
	if err != nil {
		fmt.Println("WARM", errClass(err), err)
		return
	}
	var busy <-chan error
	if e.Plan.Busy {
		busy = Async(func() error { return tr.Recv(ctx, 0, evictTag(6), e.buf) })
	}
	fmt.Println("WAITING")
	if line, err := Heard(processBound); err != nil || line != "GO" {
		fmt.Printf("GO %q %v\n", line, err)
		return
	}
	if busy != nil {
		err := <-busy
		fmt.Println("BUSY", errClass(err), err)
	}
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = tr.Recv(c, 0, evictTag(4), make([]byte, 1))
	fmt.Println("RECV", errClass(err), err)
	err = tr.Send(c, 0, evictTag(5), []byte{5})
	fmt.Println("SEND", errClass(err), err)
	_, _ = Heard(processBound) // the parent looks at its stats before this rank goes
}

func errClass(err error) string {
	switch {
	case err == nil:
		return "OK"
	case errors.Is(err, transport.ErrEvicted):
		return "Evicted"
	case errors.Is(err, transport.ErrPeerLost):
		return "PeerLost"
	case errors.Is(err, transport.ErrTimeout):
		return "Timeout"
	}
	return "Other"
}

// Parent is the parent's part, as rank 0 over ep, with the child c
// running Child: after their exchange it stops the child for
// plan.Pause (with plan.Busy, a little after it began to send the child a
// large message). Past the peer timeout, its Recv from the child fails
// with ErrPeerLost for its silence (the child stays stopped until then,
// however late a loaded host makes it), and so does the large Send unless
// it was done; the child, resumed, fails its next calls with ErrEvicted
// (its large Recv ends with nil where it had read the message whole,
// else with ErrEvicted). Short of the timeout, neither side loses the
// other, and they exchange again.
func (e *Evict) Parent(t *testing.T, ep *msg.Endpoint, c *Child) {
	t.Helper()
	plan := e.Plan
	ctx, cancel := context.WithTimeout(context.Background(), processBound)
	defer cancel()
	if err := ep.Send(ctx, 1, evictTag(1), []byte{1}); err != nil {
		t.Fatalf("warm-up send: %v\n%s", err, c.Output())
	}
	if err := ep.Recv(ctx, 1, evictTag(2), make([]byte, 1)); err != nil {
		t.Fatalf("warm-up recv: %v\n%s", err, c.Output())
	}
	if _, ok := c.Line("WAITING", processBound); !ok {
		t.Fatalf("the child did not get ready:\n%s", c.Output())
	}
	var busy <-chan error
	if plan.Busy {
		busy = Async(func() error { return ep.Send(ctx, 1, evictTag(6), e.buf) })
		time.Sleep(5 * time.Millisecond)
	}
	if err := c.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("stopping the child: %v\n%s", err, c.Output())
	}
	stopped := time.Now()
	if busy != nil && len(busy) > 0 {
		t.Logf("the large message was sent before the child stopped")
	}
	if plan.Evicts() {
		err := ep.Recv(ctx, 1, evictTag(3), make([]byte, 1))
		if !errors.Is(err, transport.ErrPeerLost) || errors.Is(err, transport.ErrEvicted) ||
			!strings.Contains(err.Error(), "silent") {
			_ = c.Signal(syscall.SIGCONT)
			t.Fatalf("the parent's Recv from its stopped child: %v; want ErrPeerLost for its silence", err)
		}
	}
	if busy != nil {
		if err := Await(t, busy, Prompt, "the large Send"); err != nil && !errors.Is(err, transport.ErrPeerLost) {
			_ = c.Signal(syscall.SIGCONT)
			t.Fatalf("the large Send to the stopped child: %v; want nil or ErrPeerLost", err)
		}
	}
	time.Sleep(time.Until(stopped.Add(plan.Pause)))
	if err := c.Signal(syscall.SIGCONT); err != nil {
		t.Fatalf("resuming the child: %v\n%s", err, c.Output())
	}
	if err := c.Say("GO"); err != nil {
		t.Fatal(err)
	}
	want := "OK"
	if plan.Evicts() {
		want = "Evicted"
	} else {
		if err := ep.Send(ctx, 1, evictTag(4), []byte{4}); err != nil {
			t.Fatalf("the parent's send after the pause: %v\n%s", err, c.Output())
		}
		if err := ep.Recv(ctx, 1, evictTag(5), make([]byte, 1)); err != nil {
			t.Fatalf("the parent's recv after the pause: %v\n%s", err, c.Output())
		}
		if s := ep.Stats(); s.PeersLost != 0 {
			t.Fatalf("the parent lost its child, stopped %v of a %v timeout: %+v", plan.Pause, plan.PeerTimeout, s)
		}
	}
	e.childAfter(t, c, want)
}

// childAfter checks what the child reported after its stop (want: the
// class of its Recv and Send) and lets it end.
func (e *Evict) childAfter(t *testing.T, c *Child, want string) {
	t.Helper()
	plan := e.Plan
	if plan.Busy {
		line, ok := c.Line("BUSY ", processBound)
		if !ok || !strings.HasPrefix(line, "BUSY OK ") && !strings.HasPrefix(line, "BUSY Evicted ") {
			t.Fatalf("the child's large Recv: %q; want OK or Evicted\n%s", line, c.Output())
		}
		t.Logf("the child's large Recv: %s", line)
	}
	for _, what := range []string{"RECV", "SEND"} {
		line, ok := c.Line(what+" ", processBound)
		if !ok || !strings.HasPrefix(line, what+" "+want+" ") {
			t.Fatalf("the child's %s after its stop of %v (peer timeout %v): %q; want %s\n%s",
				what, plan.Pause, plan.PeerTimeout, line, want, c.Output())
		}
	}
	if err := c.Say("BYE"); err != nil {
		t.Fatal(err)
	}
	if !c.Wait(processBound) || !c.Success() {
		t.Fatalf("the child did not end well:\n%s", c.Output())
	}
}

// EvictSpec is what the parent of a process eviction test tells its
// child: how the ranks find each other (Meet: a run's name, the parent's
// address), the group's secret and the plan.
type EvictSpec struct {
	Meet   string
	Secret []byte
	Plan   EvictPlan
}

// EvictCarrier is a carrier's part in the process eviction tests
// (EvictProcesses): how its two ranks connect, rank 0 in the test's
// process and rank 1 in a child's, which runs the carrier's test function
// ChildTest (whose body is EvictChildProcess) with the EvictSpec, as
// JSON, in the environment variable Env.
type EvictCarrier struct {
	ChildTest, Env string
	// Secret is the group's secret.
	Secret []byte
	// Meet is called in the parent before its child starts: it returns
	// EvictSpec.Meet and connect, which connects rank 0 once the child c
	// runs.
	Meet func(t *testing.T) (meet string, connect func(ctx context.Context, spec EvictSpec, c *Child) (*msg.Endpoint, error))
	// Child connects rank 1 in the child's process.
	Child func(ctx context.Context, spec EvictSpec) (transport.Transport, error)
}

// EvictChildProcess is the body of the carrier's ChildTest: it is skipped
// unless an eviction test started it; it connects rank 1 and runs the
// child's part of the scenario (Evict.Child), printing "CONNECT <error>"
// where it cannot connect.
func EvictChildProcess(t *testing.T, ec EvictCarrier) {
	var spec EvictSpec
	if err := json.Unmarshal([]byte(os.Getenv(ec.Env)), &spec); err != nil {
		t.Skip("run by the eviction tests as a rank's process")
	}
	run := NewEvict(spec.Plan)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tr, err := ec.Child(ctx, spec)
	if err != nil {
		fmt.Println("CONNECT", err)
		return
	}
	defer tr.Close()
	run.Child(tr)
}

// EvictProcesses runs the eviction scenario over the carrier ec, each
// plan in a subtest: Evicted (EvictLong: a rank's process stopped past
// the peer timeout is lost by its peer for its silence and, resumed,
// finds itself evicted: its next calls fail with ErrEvicted),
// EvictedMidTransfer (EvictBusy: so too when it was stopped while its
// peer sent it a large message; the peer's Send ends with the loss, or
// had ended) and its twin PausedNotEvicted (EvictShort: a process stopped
// for a tenth of the peer timeout is neither lost nor evicted, and talks
// on). It is skipped in short mode.
func EvictProcesses(t *testing.T, ec EvictCarrier) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	for _, p := range []struct {
		name string
		plan EvictPlan
	}{{"Evicted", EvictLong}, {"EvictedMidTransfer", EvictBusy}, {"PausedNotEvicted", EvictShort}} {
		t.Run(p.name, func(t *testing.T) { evictProcess(t, ec, p.plan) })
	}
}

// evictProcess is one run of plan over ec, as the parent.
func evictProcess(t *testing.T, ec EvictCarrier, plan EvictPlan) {
	meet, connect := ec.Meet(t)
	spec := EvictSpec{Meet: meet, Secret: ec.Secret, Plan: plan}
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	c := StartChild(t, ec.ChildTest, ec.Env+"="+string(b))
	run := NewEvict(plan)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ep, err := connect(ctx, spec, c)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, c.Output())
	}
	defer ep.Close()
	run.Parent(t, ep, c)
}
