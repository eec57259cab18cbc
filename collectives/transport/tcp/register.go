package tcp

import (
	"context"
	"net"

	"github.com/choreo-gpu/choreo/collectives/transport/msg"
)

// The tcp carrier links any two ranks, on one host or two; a pair that
// has a better one (shared memory on one host) takes that.
func init() {
	msg.Register(msg.Carrier{Name: "tcp", Preference: 0, Prepare: prepare})
}

// prepared is a rank's listener, made before the ranks meet so that its
// address goes out with the roster.
type prepared struct{ ln *Listener }

func prepare(host string) (msg.Prepared, error) {
	ln, err := Listen(net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, err
	}
	return prepared{ln}, nil
}

func (p prepared) Addr() string { return p.ln.Addr() }
func (p prepared) Close() error { return p.ln.Close() }

func (p prepared) Connect(ctx context.Context, s msg.Setup) ([]msg.Link, error) {
	return p.ln.ConnectLinks(ctx, Config{Setup: s})
}
