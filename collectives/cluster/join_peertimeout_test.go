package cluster

import (
	"errors"
	"github.com/choreo-gpu/choreo/internal/errs"
	"strings"
	"testing"
	"time"
)

// choreoVars is a complete demo-launch environment plus extra.
func choreoVars(extra map[string]string) func(string) string {
	vars := map[string]string{EnvRank: "1", EnvWorldSize: "2", EnvHostfile: `["127.0.0.1:1","127.0.0.1:2"]`,
		EnvSecret: "0123456789abcdef"}
	for k, v := range extra {
		vars[k] = v
	}
	return func(k string) string { return vars[k] }
}

// TestPeerTimeoutFromEnv: CHOREO_PEER_TIMEOUT is a Go duration; a bad or
// non-positive one is an ErrBadArgument naming the variable.
func TestPeerTimeoutFromEnv(t *testing.T) {
	if c := fromEnv(choreoVars(nil)); c.Err != nil || c.PeerTimeout != 0 {
		t.Fatalf("unset: %v, %v", c.PeerTimeout, c.Err)
	}
	if c := fromEnv(choreoVars(map[string]string{EnvPeerTimeout: " 2500ms"})); c.Err != nil || c.PeerTimeout != 2500*time.Millisecond {
		t.Fatalf("2500ms: %v, %v", c.PeerTimeout, c.Err)
	}
	for _, bad := range []string{"ten", "10", "0s", "-1s"} {
		c := fromEnv(choreoVars(map[string]string{EnvPeerTimeout: bad}))
		if !errors.Is(c.Err, errs.ErrBadArgument) || !strings.Contains(c.Err.Error(), EnvPeerTimeout) || !strings.Contains(c.Err.Error(), bad) {
			t.Errorf("%q: %v, want ErrBadArgument naming %s and the value", bad, c.Err, EnvPeerTimeout)
		}
	}
}

// TestPeerTimeoutReachesBothPlanes: JoinConfig.PeerTimeout wins over the
// default; the value Join takes is the one in the control plane's and
// both data planes' configurations.
func TestPeerTimeoutReachesBothPlanes(t *testing.T) {
	if DefaultPeerTimeout < 10*time.Second {
		t.Fatalf("default peer timeout %v, want at least 10 s", DefaultPeerTimeout)
	}
	cfg := JoinConfig{Rank: 1, Size: 2, Secret: []byte("0123456789abcdef"), Run: "r"}
	roster := Roster{Group: 7, Members: []Member{{Rank: 0, Data: "a:1"}, {Rank: 1, Data: "a:2"}}}
	withEnv := cfg
	withEnv.PeerTimeout = 3 * time.Second
	for _, c := range []struct {
		cfg  JoinConfig
		want time.Duration
	}{
		{cfg, DefaultPeerTimeout},
		{withEnv, 3 * time.Second},
	} {
		pt := c.cfg.peerTimeout()
		if pt != c.want {
			t.Errorf("config %v: peer timeout %v, want %v", c.cfg.PeerTimeout, pt, c.want)
		}
		rc, sc := c.cfg.remoteConfig("127.0.0.1:0", pt), c.cfg.setup(roster, pt)
		ec := c.cfg.endpointConfig(roster, linkPlan{kinds: "tcp"}, pt)
		if rc.PeerTimeout != c.want || sc.PeerTimeout != c.want || ec.PeerTimeout != c.want {
			t.Errorf("control %v, links %v, message layer %v; want %v on each", rc.PeerTimeout, sc.PeerTimeout, ec.PeerTimeout, c.want)
		}
		if sc.Group != 7 || ec.Name != "tcp" || ec.HeartbeatInterval > c.want/3 {
			t.Errorf("links %+v, message layer %+v", sc, ec)
		}
	}
	bad := cfg
	bad.Coordinator, bad.PeerTimeout = "a:1", -time.Second
	if err := bad.check(nil); !errors.Is(err, errs.ErrBadArgument) {
		t.Errorf("negative peer timeout: %v", err)
	}
}
