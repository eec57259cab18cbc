package shm

import (
	"context"

	"github.com/choreo-gpu/choreo/collectives/transport/msg"
)

// The shm carrier links ranks of one host, and is preferred there; it
// needs Linux (elsewhere ConnectLinks fails with errors.ErrUnsupported).
func init() {
	msg.Register(msg.Carrier{Name: "shm", Preference: 10, SameHost: true, Supported: func() bool { return supported() == nil },
		Prepare: func(string) (msg.Prepared, error) { return prepared{}, nil }})
}

// prepared needs nothing before the ranks meet: a pair finds its socket
// by the run's name and the ranks.
type prepared struct{}

func (prepared) Addr() string { return "" }
func (prepared) Close() error { return nil }

func (prepared) Connect(ctx context.Context, s msg.Setup) ([]msg.Link, error) {
	return ConnectLinks(ctx, Config{Setup: s})
}
