package shm

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
	"github.com/choreo-gpu/choreo/collectives/transport/transporttest"
)

// The conformance suite, with the defaults and tight: small slots, a
// short ring and a small window, so that messages go in many chunks,
// senders wait for room and the window runs out (sends fall back to
// rendezvous).
func TestConformance(t *testing.T) {
	transporttest.RunTight(t, asMake, func(c *Config) { c.SlotSize, c.Slots, c.MaxBuffered, c.EagerMax = 4096, 2, 16<<10, 4096 })
}

// A group of one rank connects at once, has no peer, and closes.
func TestSingleRank(t *testing.T) {
	needShm(t)
	tr, err := connect(context.Background(), Config{Setup: msg.Setup{Run: testRun(t), Rank: 0, Size: 1, Secret: testSecret}})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Send(context.Background(), 0, transport.Tag{}, nil); !errors.Is(err, transport.ErrBadPeer) {
		t.Errorf("send to itself: %v", err)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
}

// Any run name works: one that cannot be a socket name as it is is
// hashed.
func TestRunNames(t *testing.T) {
	needShm(t)
	for _, run := range []string{"", "job.42", "a/b c", strings.Repeat("x", 200), "ünï"} {
		ts := build(t, 2, func(c *Config) { c.Run = run })
		closeAll(ts)
	}
	if sockName("a/b", 1, 0) == sockName("a_b", 1, 0) || len(sockName(strings.Repeat("x", 200), 1<<63, 1<<30)) > 107 {
		t.Error("run names collide or are too long")
	}
}
