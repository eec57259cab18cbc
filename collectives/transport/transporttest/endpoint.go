package transporttest

import (
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
	"github.com/choreo-gpu/choreo/internal/spin"
)

// Endpoint starts a msg.Endpoint named name over a carrier's links with
// c's settings (as a group's Join does) and returns it with the links as
// the carrier's own type L, for its tests to reach into.
func Endpoint[L msg.Link](name string, c msg.Setup, links []msg.Link) (*msg.Endpoint, []L, error) {
	typed := make([]L, len(links))
	for r, l := range links {
		if l != nil {
			typed[r] = l.(L)
		}
	}
	e, err := msg.New(msg.Config{Rank: c.Rank, Size: c.Size, Name: name, MaxBuffered: c.MaxBuffered,
		PeerTimeout: c.PeerTimeout, HeartbeatInterval: c.HeartbeatInterval, Poll: spin.PollBudget(msg.EnvPoll, c.Size)}, links)
	return e, typed, err
}
