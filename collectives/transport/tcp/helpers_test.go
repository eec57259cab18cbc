package tcp

import (
	"context"
	"testing"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
	"github.com/choreo-gpu/choreo/collectives/transport/transporttest"
)

// testSecret is the secret of the groups the tests build.
var testSecret = transporttest.Secret()

// listeners opens n listeners on 127.0.0.1 with ports the OS picks.
func listeners(t testing.TB, n int) ([]*Listener, []string) {
	t.Helper()
	ls := make([]*Listener, n)
	addrs := make([]string, n)
	for i := range ls {
		l, err := Listen("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls[i], addrs[i] = l, l.Addr()
	}
	return ls, addrs
}

// endpoint is a test's rank: a msg.Endpoint over its tcp links, as a
// group's Join makes one.
type endpoint struct {
	*msg.Endpoint
	links []*link // by rank
}

// connect links cfg's rank on l (nil where no peer dials it) and starts an
// Endpoint over the links.
func connect(ctx context.Context, l *Listener, cfg Config) (*endpoint, error) {
	n, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	links, err := l.ConnectLinks(ctx, cfg)
	if err != nil {
		return nil, err
	}
	ep, typed, err := transporttest.Endpoint[*link]("tcp", n.Setup, links)
	return &endpoint{Endpoint: ep, links: typed}, err
}

// build connects n ranks on loopback, each configured by tweak (which may
// be nil), and returns them indexed by rank.
func build(t testing.TB, n int, tweak func(*Config)) []*endpoint {
	t.Helper()
	ls, addrs := listeners(t, n)
	cfg := func(r int) Config {
		return Config{Setup: msg.Setup{Addrs: addrs, Rank: r, Size: n, Group: 77, Secret: testSecret}}
	}
	return transporttest.ConnectGroup(t, n, cfg, tweak, func(ctx context.Context, c Config) (*endpoint, error) {
		return connect(ctx, ls[c.Rank], c)
	})
}

// group is build as the conformance suite's MakeFunc.
func group(tweak func(*Config)) transporttest.MakeFunc {
	return func(t *testing.T, n int) []transport.Transport { return transporttest.Transports(build(t, n, tweak)) }
}

// tcpOverhead is what an eager message costs of the window beyond its
// bytes.
const tcpOverhead = msg.Overhead

// writeFrame writes a frame on c with no context.
func (c *conn) writeFrame(f *frame, payload []byte) error {
	_, err := c.write(context.Background(), f, payload)
	return err
}
