package tcp

import (
	"context"
	"net"

	"github.com/choreo-gpu/choreo/collectives/transport/msg"
)

// The tcp carrier links any two ranks, on one host or two; a pair that
// has a better one (shared memory on one host) takes that. A rank's
// Listener, made before the ranks meet, is its msg.Prepared.
func init() {
	msg.Register(msg.Carrier{Name: "tcp", Preference: 0, Prepare: func(host string) (msg.Prepared, error) {
		l, err := Listen(net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, err // not a nil *Listener in a non-nil msg.Prepared
		}
		return l, nil
	}})
}

// Connect is ConnectLinks with the Setup Join gives every carrier.
func (l *Listener) Connect(ctx context.Context, s msg.Setup) ([]msg.Link, error) {
	return l.ConnectLinks(ctx, Config{Setup: s})
}
