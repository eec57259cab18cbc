package transport_test

import (
	"testing"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/transporttest"
)

func TestLocalConformance(t *testing.T) {
	mk := func(t *testing.T, n int) []transport.Transport { return transport.NewLocal(n) }
	transporttest.Run(t, mk)
	t.Run("PeerAccess", func(t *testing.T) { testPeerAccess(t, mk) })
}

// opaque hides PeerAccess, so the suite also checks the plain contract.
type opaque struct{ transport.Transport }

func TestLocalOpaqueConformance(t *testing.T) {
	transporttest.Run(t, func(t *testing.T, n int) []transport.Transport {
		ts := transport.NewLocal(n)
		for i, tr := range ts {
			ts[i] = opaque{tr}
		}
		return ts
	})
}
