package shm

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport/msg"
	"github.com/choreo-gpu/choreo/collectives/transport/transporttest"
)

// envEvict holds an eviction test's child spec (evictSpec, as JSON).
const envEvict = "CHOREO_SHM_EVICT_TEST"

// evictSpec is what the child of an eviction test is told: the run, the
// group's secret and the plan.
type evictSpec struct {
	Run    string
	Secret []byte
	Plan   transporttest.EvictPlan
}

// evictConfig is rank's configuration in an eviction test.
func evictConfig(spec evictSpec, rank int) Config {
	return Config{Setup: msg.Setup{Run: spec.Run, Rank: rank, Size: 2, Group: 79, Secret: spec.Secret,
		PeerTimeout: spec.Plan.PeerTimeout}}
}

// TestEvictChildProcess is the child's process of the eviction tests
// (rank 1); it is skipped unless one of them started it. It runs the
// child's part of the scenario.
func TestEvictChildProcess(t *testing.T) {
	var spec evictSpec
	if err := json.Unmarshal([]byte(os.Getenv(envEvict)), &spec); err != nil {
		t.Skip("run by the eviction tests as a rank's process")
	}
	run := transporttest.NewEvict(spec.Plan)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ep, err := connect(ctx, evictConfig(spec, 1))
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
	needShm(t)
	if testing.Short() {
		t.Skip("starts processes")
	}
	spec := evictSpec{Run: testRun(t), Secret: testSecret, Plan: plan}
	b, _ := json.Marshal(spec)
	c := transporttest.StartChild(t, "TestEvictChildProcess", envEvict+"="+string(b))
	run := transporttest.NewEvict(plan)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ep, err := connect(ctx, evictConfig(spec, 0))
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, c.Output())
	}
	defer ep.Close()
	run.Parent(t, ep.Endpoint, c)
}
