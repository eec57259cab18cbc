package tcp

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport/msg"
	"github.com/choreo-gpu/choreo/collectives/transport/transporttest"
)

// envEvict holds an eviction test's child spec (evictSpec, as JSON).
const envEvict = "CHOREO_TCP_EVICT_TEST"

// evictSpec is what the child of an eviction test is told: the parent's
// address, the group's secret and the plan.
type evictSpec struct {
	Parent string
	Secret []byte
	Plan   transporttest.EvictPlan
}

const evictGroup = 79

// TestEvictChildProcess is the child's process of the eviction tests
// (rank 1); it is skipped unless one of them started it. It prints the
// address it listens on, then runs the child's part of the scenario.
func TestEvictChildProcess(t *testing.T) {
	var spec evictSpec
	if err := json.Unmarshal([]byte(os.Getenv(envEvict)), &spec); err != nil {
		t.Skip("run by the eviction tests as a rank's process")
	}
	run := transporttest.NewEvict(spec.Plan)
	l, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr()
	fmt.Println("ADDR", addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ep, err := connect(ctx, l, Config{Setup: msg.Setup{Addrs: []string{spec.Parent, addr}, Rank: 1, Size: 2,
		Group: evictGroup, Secret: spec.Secret, PeerTimeout: spec.Plan.PeerTimeout}})
	if err != nil {
		fmt.Println("CONNECT", err)
		return
	}
	defer ep.Close()
	run.Child(ep)
}

// TestProcessEvicted: a rank's process stopped (SIGSTOP) past the peer
// timeout is lost by its peer for its silence and, resumed, finds itself
// evicted: its next calls fail with ErrEvicted.
func TestProcessEvicted(t *testing.T) { evictProcess(t, transporttest.EvictLong) }

// TestProcessEvictedMidTransfer: so too when it was stopped while its
// peer sent it a large message; the peer's Send ends with the loss (or
// had ended).
func TestProcessEvictedMidTransfer(t *testing.T) { evictProcess(t, transporttest.EvictBusy) }

// TestProcessPausedNotEvicted is its twin: a process stopped for a tenth
// of the peer timeout is neither lost nor evicted, and talks on.
func TestProcessPausedNotEvicted(t *testing.T) { evictProcess(t, transporttest.EvictShort) }

func evictProcess(t *testing.T, plan transporttest.EvictPlan) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	l, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := json.Marshal(evictSpec{Parent: l.Addr(), Secret: testSecret, Plan: plan})
	c := transporttest.StartChild(t, "TestEvictChildProcess", envEvict+"="+string(spec))
	line, ok := c.Line("ADDR ", 60*time.Second)
	if !ok {
		_ = l.Close()
		t.Fatalf("the child did not listen:\n%s", c.Output())
	}
	run := transporttest.NewEvict(plan)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ep, err := connect(ctx, l, Config{Setup: msg.Setup{Addrs: []string{l.Addr(), strings.TrimPrefix(line, "ADDR ")},
		Rank: 0, Size: 2, Group: evictGroup, Secret: testSecret, PeerTimeout: plan.PeerTimeout}})
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, c.Output())
	}
	defer ep.Close()
	run.Parent(t, ep.Endpoint, c)
}
