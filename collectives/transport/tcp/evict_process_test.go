package tcp

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
	"github.com/choreo-gpu/choreo/collectives/transport/transporttest"
)

// evictCarrier connects the ranks of the process eviction tests over TCP:
// the child is told the parent's address and prints its own ("ADDR
// <address>") before it connects.
var evictCarrier = transporttest.EvictCarrier{
	ChildTest: "TestEvictChildProcess", Env: "CHOREO_TCP_EVICT_TEST", Secret: testSecret,
	Meet: func(t *testing.T) (string, func(context.Context, transporttest.EvictSpec, *transporttest.Child) (*msg.Endpoint, error)) {
		l, err := Listen("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return l.Addr(), func(ctx context.Context, spec transporttest.EvictSpec, c *transporttest.Child) (*msg.Endpoint, error) {
			line, ok := c.Line("ADDR ", 60*time.Second)
			if !ok {
				_ = l.Close()
				return nil, fmt.Errorf("the child did not listen")
			}
			ep, err := connect(ctx, l, evictConfig(spec, 0, l.Addr(), strings.TrimPrefix(line, "ADDR ")))
			if err != nil {
				return nil, err
			}
			return ep.Endpoint, nil
		}
	},
	Child: func(ctx context.Context, spec transporttest.EvictSpec) (transport.Transport, error) {
		l, err := Listen("127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		fmt.Println("ADDR", l.Addr())
		return connect(ctx, l, evictConfig(spec, 1, spec.Meet, l.Addr()))
	},
}

// evictConfig is rank's configuration in an eviction test, with the
// parent's and the child's addresses.
func evictConfig(spec transporttest.EvictSpec, rank int, parent, child string) Config {
	return Config{Setup: msg.Setup{Addrs: []string{parent, child}, Rank: rank, Size: 2, Group: 79,
		Secret: spec.Secret, PeerTimeout: spec.Plan.PeerTimeout}}
}

// TestEvictChildProcess is the child's process of the eviction tests
// (rank 1); it is skipped unless one of them started it.
func TestEvictChildProcess(t *testing.T) { transporttest.EvictChildProcess(t, evictCarrier) }

// TestProcessEvict runs the process eviction scenarios over TCP
// (transporttest.EvictProcesses).
func TestProcessEvict(t *testing.T) { transporttest.EvictProcesses(t, evictCarrier) }
