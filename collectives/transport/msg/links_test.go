package msg_test

import (
	"cmp"
	"testing"

	"github.com/choreo-gpu/choreo/collectives/transport/transporttest"
)

// pipePair is the link suite's LinkFunc over pipes.
func pipePair(cfg transporttest.PipeConfig) transporttest.LinkFunc {
	return func(*testing.T) transporttest.LinkPair {
		a, b := transporttest.NewPipe(cfg)
		return transporttest.LinkPair{A: a.Link(), B: b.Link(), Window: cmp.Or(cfg.Window, transporttest.DefaultPipe.Window)}
	}
}

// TestPipeLink runs the link conformance suite over the pipe link.
func TestPipeLink(t *testing.T) {
	transporttest.RunLink(t, pipePair(transporttest.PipeConfig{}))
}

// TestPipeLinkSingleCopy runs it over pipes that read by address.
func TestPipeLinkSingleCopy(t *testing.T) {
	transporttest.RunLink(t, pipePair(transporttest.PipeConfig{SingleCopyMin: 1}))
}
