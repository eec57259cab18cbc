package tcp

import (
	"testing"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
	"github.com/choreo-gpu/choreo/collectives/transport/transporttest"
	"github.com/choreo-gpu/choreo/internal/spin"
)

// A Recv that reads its socket itself polls it first: CHOREO_POLL sets
// for how long, and the link's waits adapt the Endpoint's budget.
func TestPolling(t *testing.T) {
	poll := func(tr transport.Transport) *spin.Adaptive { return tr.(*endpoint).links[1-tr.Rank()].poll }
	transporttest.Polling(t, transporttest.PollRig{Env: msg.EnvPoll, Make: group(nil), Poll: poll})
}
