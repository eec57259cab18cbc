package msg_test

import (
	"testing"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
	"github.com/choreo-gpu/choreo/collectives/transport/transporttest"
)

// pipeMake is the suite's MakeFunc over pipe links.
func pipeMake(cfg transporttest.PipeConfig, base msg.Config) transporttest.MakeFunc {
	return func(t *testing.T, n int) []transport.Transport {
		eps, _, err := transporttest.PipeEndpoints(n, cfg, base)
		if err != nil {
			t.Fatal(err)
		}
		return transporttest.Transports(eps)
	}
}

// TestConformance runs the transport conformance suite over endpoints
// joined by pipe links.
func TestConformance(t *testing.T) {
	transporttest.Run(t, pipeMake(transporttest.PipeConfig{}, msg.Config{}))
}

// TestConformanceSingleCopy runs it with every announced message read by
// address.
func TestConformanceSingleCopy(t *testing.T) {
	transporttest.Run(t, pipeMake(transporttest.PipeConfig{SingleCopyMin: 1}, msg.Config{}))
}

// TestConformanceSmall runs it with tiny limits: most messages go by
// rendezvous, in many chunks.
func TestConformanceSmall(t *testing.T) {
	transporttest.Run(t, pipeMake(transporttest.PipeConfig{EagerMax: 16, Chunk: 100, MaxRTS: 16, Window: 256}, msg.Config{}))
}

// TestTrySend checks TrySend's contract over pipes.
func TestTrySend(t *testing.T) {
	eps, _, err := transporttest.PipeEndpoints(2, transporttest.PipeConfig{EagerMax: 1024, Window: 4096}, msg.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer eps[0].Close()
	defer eps[1].Close()
	checkTrySend(t, eps[0], eps[1])
}
