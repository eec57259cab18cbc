package shm

import (
	"context"
	"testing"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
	"github.com/choreo-gpu/choreo/collectives/transport/transporttest"
)

// evictCarrier connects the ranks of the process eviction tests over
// shared memory: they meet by the run's name.
var evictCarrier = transporttest.EvictCarrier{
	ChildTest: "TestEvictChildProcess", Env: "CHOREO_SHM_EVICT_TEST", Secret: testSecret,
	Meet: func(t *testing.T) (string, func(context.Context, transporttest.EvictSpec, *transporttest.Child) (*msg.Endpoint, error)) {
		return testRun(t), func(ctx context.Context, spec transporttest.EvictSpec, _ *transporttest.Child) (*msg.Endpoint, error) {
			ep, err := connect(ctx, evictConfig(spec, 0))
			if err != nil {
				return nil, err
			}
			return ep.Endpoint, nil
		}
	},
	Child: func(ctx context.Context, spec transporttest.EvictSpec) (transport.Transport, error) {
		return connect(ctx, evictConfig(spec, 1))
	},
}

// evictConfig is rank's configuration in an eviction test.
func evictConfig(spec transporttest.EvictSpec, rank int) Config {
	return Config{Setup: msg.Setup{Run: spec.Meet, Rank: rank, Size: 2, Group: 79, Secret: spec.Secret,
		PeerTimeout: spec.Plan.PeerTimeout}}
}

// TestEvictChildProcess is the child's process of the eviction tests
// (rank 1); it is skipped unless one of them started it.
func TestEvictChildProcess(t *testing.T) { transporttest.EvictChildProcess(t, evictCarrier) }

// TestProcessEvict runs the process eviction scenarios over shared
// memory (transporttest.EvictProcesses).
func TestProcessEvict(t *testing.T) {
	needShm(t)
	transporttest.EvictProcesses(t, evictCarrier)
}
