package shm

import (
	"testing"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
	"github.com/choreo-gpu/choreo/collectives/transport/transporttest"
	"github.com/choreo-gpu/choreo/internal/spin"
)

// A call that waits for its peer polls the incoming lane first:
// CHOREO_POLL sets for how long, and the lane's waits adapt the
// Endpoint's budget.
func TestPolling(t *testing.T) {
	transporttest.Polling(t, transporttest.PollRig{Env: msg.EnvPoll, Make: asMake(nil),
		Poll: func(tr transport.Transport) *spin.Adaptive { return tr.(*endpoint).links[1-tr.Rank()].peer.Poll() }})
}
