package msg_test

import (
	"testing"

	"github.com/choreo-gpu/choreo/collectives/transport/transporttest"
)

// TestPipeLink runs the link conformance suite over the pipe link.
func TestPipeLink(t *testing.T) {
	transporttest.RunLink(t, transporttest.PipePair(transporttest.PipeConfig{}))
}

// TestPipeLinkSingleCopy runs it over pipes that read by address.
func TestPipeLinkSingleCopy(t *testing.T) {
	transporttest.RunLink(t, transporttest.PipePair(transporttest.PipeConfig{SingleCopyMin: 1}))
}
