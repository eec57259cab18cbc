package msg_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
	"github.com/choreo-gpu/choreo/collectives/transport/transporttest"
	"github.com/choreo-gpu/choreo/internal/spin"
)

// carrierGroups numbers the groups carrierMake makes (their group ids and
// run names).
var carrierGroups atomic.Uint64

// carrierMake is a transporttest.MakeFunc over the registered carrier called name: it
// makes each group as a rank's Join does, every pair linked by that
// carrier (Prepare on 127.0.0.1, Connect with a fresh group, run and
// secret and the default window, then one msg.Endpoint per rank over its
// links). A test that uses it skips when the carrier is not registered
// or not supported here.
func carrierMake(name string) transporttest.MakeFunc {
	return func(t *testing.T, n int) []transport.Transport {
		t.Helper()
		c, ok := msg.Lookup(name)
		if !ok || (c.Supported != nil && !c.Supported()) {
			t.Skipf("carrier %q is not registered or not supported here", name)
		}
		preps := make([]msg.Prepared, n)
		addrs := make([]string, n)
		for r := range preps {
			p, err := c.Prepare("127.0.0.1")
			if err != nil {
				for _, q := range preps[:r] {
					_ = q.Close()
				}
				t.Fatalf("carrier %s: rank %d: prepare: %v", name, r, err)
			}
			preps[r], addrs[r] = p, p.Addr()
		}
		id := carrierGroups.Add(1)
		secret := transporttest.Secret()
		setup := func(r int) msg.Setup {
			s := msg.Setup{Rank: r, Size: n, Group: id, Run: fmt.Sprintf("tt-%d-%d", os.Getpid(), id),
				Secret: secret, Addrs: addrs, PeerTimeout: 10 * time.Second, MaxBuffered: msg.DefaultMaxBuffered}
			for j := range n {
				if j != r {
					s.Peers = append(s.Peers, j)
				}
			}
			return s
		}
		connect := func(ctx context.Context, s msg.Setup) (*msg.Endpoint, error) {
			links, err := preps[s.Rank].Connect(ctx, s)
			if err != nil {
				return nil, err
			}
			return msg.New(msg.Config{Rank: s.Rank, Size: n, Name: name, MaxBuffered: s.MaxBuffered,
				PeerTimeout: s.PeerTimeout, HeartbeatInterval: s.PeerTimeout / 40,
				Poll: spin.PollBudget(msg.EnvPoll, n)}, links)
		}
		return transporttest.Transports(transporttest.ConnectGroup(t, n, setup, nil, connect))
	}
}
