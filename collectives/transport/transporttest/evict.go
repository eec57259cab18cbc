package transporttest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
)

// EvictPlan is a process eviction test: the peer timeout both ranks use,
// and how long the child's process is stopped (SIGSTOP).
type EvictPlan struct {
	PeerTimeout, Pause time.Duration
}

// Evicts reports whether the child is stopped past the peer timeout.
func (p EvictPlan) Evicts() bool { return p.Pause > p.PeerTimeout }

var (
	// EvictLong stops the child for three peer timeouts: it is evicted.
	EvictLong = EvictPlan{PeerTimeout: time.Second, Pause: 3 * time.Second}
	// EvictShort stops it for a tenth of one: nothing happens.
	EvictShort = EvictPlan{PeerTimeout: 3 * time.Second, Pause: 300 * time.Millisecond}
)

// processBound bounds each step of the eviction scenario: generous, for a
// loaded host.
const processBound = 60 * time.Second

func evictTag(step uint32) transport.Tag { return transport.Tag{Group: 90, Seq: 1, Step: step} }

// EvictChild is the child's part of the eviction scenario, as rank 1 of
// two, over tr: an exchange with rank 0, the line "WAITING", then (once
// the parent says "GO", after its stop) a Recv from rank 0 and a Send to
// it, each reported as "RECV <class> <error>" and "SEND <class> <error>"
// (class: OK, Evicted, PeerLost, Timeout or Other).
func EvictChild(tr transport.Transport) {
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
	fmt.Println("WAITING")
	if line, err := Heard(processBound); err != nil || line != "GO" {
		fmt.Printf("GO %q %v\n", line, err)
		return
	}
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = tr.Recv(c, 0, evictTag(4), make([]byte, 1))
	fmt.Println("RECV", errClass(err), err)
	err = tr.Send(c, 0, evictTag(5), []byte{5})
	fmt.Println("SEND", errClass(err), err)
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

// EvictParent is the parent's part, as rank 0 over ep, with the child c
// running EvictChild: after their exchange it stops the child for
// plan.Pause. Past the peer timeout, its Recv from the child fails with
// ErrPeerLost for its silence (the child stays stopped until then, however
// late a loaded host makes it), and the child, resumed, fails its next
// calls with ErrEvicted. Short of it, neither side loses the other, and
// they exchange again.
func EvictParent(t *testing.T, ep *msg.Endpoint, c *Child, plan EvictPlan) {
	t.Helper()
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
	if err := c.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	if plan.Evicts() {
		err := ep.Recv(ctx, 1, evictTag(3), make([]byte, 1))
		if !errors.Is(err, transport.ErrPeerLost) || errors.Is(err, transport.ErrEvicted) ||
			!strings.Contains(err.Error(), "silent") {
			_ = c.Signal(syscall.SIGCONT)
			t.Fatalf("the parent's Recv from its stopped child: %v; want ErrPeerLost for its silence", err)
		}
	}
	time.Sleep(time.Until(stopped.Add(plan.Pause)))
	if err := c.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
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
	for _, what := range []string{"RECV", "SEND"} {
		line, ok := c.Line(what+" ", processBound)
		if !ok || !strings.HasPrefix(line, what+" "+want+" ") {
			t.Fatalf("the child's %s after its stop of %v (peer timeout %v): %q; want %s\n%s",
				what, plan.Pause, plan.PeerTimeout, line, want, c.Output())
		}
	}
	if !c.Wait(processBound) || !c.Success() {
		t.Fatalf("the child did not end well:\n%s", c.Output())
	}
}
