package shm

import (
	"testing"

	"github.com/choreo-gpu/choreo/collectives/transport/transporttest"
	"github.com/choreo-gpu/choreo/internal/spin"
)

// TestLongWaitDoesNotSpin: a Recv whose message comes late polls for its
// budget only, then blocks.
func TestLongWaitDoesNotSpin(t *testing.T) {
	ts := build(t, 2, nil)
	defer func() {
		for _, tr := range ts {
			_ = tr.Close()
		}
	}()
	for r, tr := range ts {
		tr.links[1-r].peer.Poll().Init(spin.MaxPoll) // polling on, whatever this host's CPUs
	}
	transporttest.LongWaitDoesNotSpin(t, ts[0], ts[1])
}
