package transporttest

import (
	"context"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/internal/spin"
)

// PollRig is what the polling checks need of a transport whose waits
// poll before they park: the variable that sets its budget, how to make
// a fresh group (of two ranks, after Env is set), and a rank's budget.
type PollRig struct {
	Env  string
	Make MakeFunc
	Poll func(tr transport.Transport) *spin.Adaptive
}

// Polling checks a transport's polling: Env sets the budget of a group
// connected after it and 0 turns polling off (whose waits still end when
// their message comes); with polling on, a long wait polls for its budget
// only, then parks (longWaitDoesNotSpin), and tells the budget how long
// it took, which halves it.
func Polling(t *testing.T, rig PollRig) {
	t.Run("Env", func(t *testing.T) { testPollEnv(t, rig) })
	t.Run("LongWaitDoesNotSpin", func(t *testing.T) {
		ts := pollGroup(t, rig, spin.MaxPoll)
		longWaitDoesNotSpin(t, ts[0], ts[1])
	})
	t.Run("Adapts", func(t *testing.T) { testPollAdapts(t, rig) })
}

// pollGroup makes rig's group, closed when the test ends, its budgets max.
func pollGroup(t *testing.T, rig PollRig, max time.Duration) []transport.Transport {
	ts := rig.Make(t, 2)
	t.Cleanup(func() {
		for _, tr := range ts {
			_ = tr.Close()
		}
	})
	for _, tr := range ts {
		rig.Poll(tr).Init(max)
	}
	return ts
}

func testPollEnv(t *testing.T, rig PollRig) {
	for _, c := range []struct {
		env  string
		want time.Duration
	}{{"37us", 37 * time.Microsecond}, {"0", 0}} {
		t.Setenv(rig.Env, c.env)
		ts := rig.Make(t, 2)
		for _, tr := range ts {
			if got := rig.Poll(tr).Budget(); got != c.want {
				t.Errorf("%s=%s: rank %d polls for %v, want %v", rig.Env, c.env, tr.Rank(), got, c.want)
			}
		}
		if err := lateMessage(ts, 20*time.Millisecond, 1); err != nil {
			t.Errorf("%s=%s: %v", rig.Env, c.env, err)
		}
		for _, tr := range ts {
			_ = tr.Close()
		}
	}
}

// testPollAdapts: a wait far longer than the budget halves it (or, where
// the poller lost its CPU, drops it to its least); tried three times, for
// a wait that a reader goroutine served instead of the Recv's own.
func testPollAdapts(t *testing.T, rig PollRig) {
	ts := pollGroup(t, rig, spin.MaxPoll)
	for try := range 3 {
		rig.Poll(ts[0]).Init(spin.MaxPoll)
		if err := lateMessage(ts, 100*time.Millisecond, uint64(1+try)); err != nil {
			t.Fatal(err)
		}
		if got := rig.Poll(ts[0]).Budget(); got < spin.MaxPoll {
			return
		}
	}
	t.Fatalf("after three waits of 100 ms the budget is still %v: the waits did not adapt it", spin.MaxPoll)
}

func lateMessage(ts []transport.Transport, delay time.Duration, seq uint64) error {
	ctx, cancel := context.WithTimeout(context.Background(), Long)
	defer cancel()
	tag := transport.Tag{Group: 78, Seq: seq}
	sent := Async(func() error {
		time.Sleep(delay)
		return ts[1].Send(ctx, 0, tag, make([]byte, 4096))
	})
	if err := ts[0].Recv(ctx, 1, tag, make([]byte, 4096)); err != nil {
		return err
	}
	return <-sent
}
