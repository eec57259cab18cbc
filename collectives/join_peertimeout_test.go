package collectives

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/cluster"
	"github.com/choreo-gpu/choreo/collectives/transport/shm"
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
		if !errors.Is(c.Err, ErrBadArgument) || !strings.Contains(c.Err.Error(), EnvPeerTimeout) || !strings.Contains(c.Err.Error(), bad) {
			t.Errorf("%q: %v, want ErrBadArgument naming %s and the value", bad, c.Err, EnvPeerTimeout)
		}
	}
}

// TestPeerTimeoutReachesBothPlanes: WithPeerTimeout wins over
// JoinConfig.PeerTimeout, which wins over the default; the value Join
// takes is the one in the control plane's and both data planes'
// configurations.
func TestPeerTimeoutReachesBothPlanes(t *testing.T) {
	if DefaultPeerTimeout < 10*time.Second {
		t.Fatalf("default peer timeout %v, want at least 10 s", DefaultPeerTimeout)
	}
	cfg := JoinConfig{Rank: 1, Size: 2, Secret: []byte("0123456789abcdef"), Run: "r"}
	roster := cluster.Roster{Group: 7, Members: []cluster.Member{{Rank: 0, Data: "a:1"}, {Rank: 1, Data: "a:2"}}}
	withEnv := cfg
	withEnv.PeerTimeout = 3 * time.Second
	for _, c := range []struct {
		cfg  JoinConfig
		opts []Option
		want time.Duration
	}{
		{cfg, nil, DefaultPeerTimeout},
		{withEnv, nil, 3 * time.Second},
		{withEnv, []Option{WithTimeout(time.Minute), WithPeerTimeout(7 * time.Second)}, 7 * time.Second},
		{cfg, []Option{WithPeerTimeout(0)}, DefaultPeerTimeout},
	} {
		pt := c.cfg.peerTimeout(c.opts)
		if pt != c.want {
			t.Errorf("config %v, %d options: peer timeout %v, want %v", c.cfg.PeerTimeout, len(c.opts), pt, c.want)
		}
		rc, tc, sc := c.cfg.remoteConfig("127.0.0.1:0", pt), c.cfg.tcpConfig(roster, pt), c.cfg.shmConfig(roster, pt)
		if rc.PeerTimeout != c.want || tc.PeerTimeout != c.want || sc.PeerTimeout != c.want {
			t.Errorf("control %v, tcp %v, shm %v; want %v on each", rc.PeerTimeout, tc.PeerTimeout, sc.PeerTimeout, c.want)
		}
		if tc.Group != 7 || sc.Group != 7 || tc.Addrs[1] != "a:2" {
			t.Errorf("tcp %+v, shm %+v", tc, sc)
		}
	}
	bad := cfg
	bad.Coordinator, bad.PeerTimeout = "a:1", -time.Second
	if err := bad.check(nil); !errors.Is(err, ErrBadArgument) {
		t.Errorf("negative peer timeout: %v", err)
	}
}

// TestResolveTransport: every rank's choice resolves by one rule (auto is
// shm on one host where shared memory works, else tcp); where they differ
// the error is ErrMismatch naming each rank's.
func TestResolveTransport(t *testing.T) {
	auto := "tcp"
	if shm.Supported() {
		auto = "shm"
	}
	members := func(host1 string, kinds ...string) cluster.Roster {
		r := cluster.Roster{Group: 1}
		for i, k := range kinds {
			host := "h"
			if i == 1 {
				host = host1
			}
			r.Members = append(r.Members, cluster.Member{Rank: i, Host: host, Transport: k})
		}
		return r
	}
	for _, c := range []struct {
		roster cluster.Roster
		want   string
	}{
		{members("h", "auto", "", "auto"), auto},
		{members("other", "auto", "auto"), "tcp"},
		{members("h", "tcp", "tcp"), "tcp"},
		{members("other", "tcp", "auto"), "tcp"},
	} {
		if got, err := resolveTransport(c.roster); err != nil || got != c.want {
			t.Errorf("%+v: %q, %v; want %q", c.roster.Members, got, err, c.want)
		}
	}
	_, err := resolveTransport(members("h", "tcp", "shm", "auto"))
	want := "rank 0 tcp, rank 1 shm, rank 2 " + auto + " (auto)"
	if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), want) {
		t.Errorf("%v, want ErrMismatch naming %q", err, want)
	}
	if _, err := resolveTransport(members("h", "tcp", "udp")); !errors.Is(err, ErrBadArgument) {
		t.Errorf("udp: %v", err)
	}
}
