package remoting_test

// A peer that is paused (SIGSTOP, as swapping, a debugger, a suspended
// job or a starved VM would) is silent, not dead: it is reported lost
// only when the silence outlasts Config.PeerTimeout.

import (
	"syscall"
	"testing"
	"time"
)

// pause stops p's process for d and continues it.
func (p *peer) pause(d time.Duration) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		p.t.Fatal(err)
	}
	time.Sleep(d)
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		p.t.Fatal(err)
	}
}

// watchEachOther has a and b watch each other's endpoint and echo actor.
func watchEachOther(a, b *peer) {
	a.ping(b, 1, 1) // both directions connected
	b.ping(a, 2, 0)
	for _, w := range [][2]*peer{{a, b}, {b, a}} {
		w[0].do("watch")
		w[0].do("watch-actor " + w[1].addr)
	}
}

// TestRemotePauseShorterThanPeerTimeout is the false-positive twin: a
// peer paused for 3 s under a 10 s peer timeout is reported by no one,
// and messages flow both ways once it continues.
func TestRemotePauseShorterThanPeerTimeout(t *testing.T) {
	noLeaks(t)
	env := peerTimeoutEnv + "=10s"
	a, b := startPeer(t, "node", 0, secret, env), startPeer(t, "node", 1, secret, env)
	watchEachOther(a, b)
	b.pause(3 * time.Second)
	b.ping(a, 3, 0)
	a.ping(b, 4, 1)
	time.Sleep(2 * time.Second) // let a late report, if any, arrive
	a.ping(b, 5, 1)
	for _, p := range []*peer{a, b} {
		if p.saw("terminated") != 0 {
			t.Fatalf("%s reported a paused peer lost:\n%s", p.name, p.out.String())
		}
	}
	a.close()
	b.close()
}

// TestRemotePauseLongerThanPeerTimeout: a peer paused for 6 s under a 2 s
// peer timeout is reported lost by the other while it is still paused; it goes on
// (and closes) normally once continued.
func TestRemotePauseLongerThanPeerTimeout(t *testing.T) {
	noLeaks(t)
	env := peerTimeoutEnv + "=2s"
	a, b := startPeer(t, "node", 0, secret, env), startPeer(t, "node", 1, secret, env)
	watchEachOther(a, b)
	if err := b.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	t.Cleanup(func() { _ = b.cmd.Process.Signal(syscall.SIGCONT) })
	// reported while b is still stopped
	if l := a.expect("terminated "); l != "terminated "+b.addr {
		t.Fatalf("%q, want terminated %s", l, b.addr)
	}
	if l := a.expect("actor-terminated "); l != "actor-terminated "+b.addr+"/echo AddressTerminated" {
		t.Fatalf("%q, want b's echo AddressTerminated", l)
	}
	t.Logf("reported after %v of silence", time.Since(start).Round(time.Millisecond))
	time.Sleep(6*time.Second - time.Since(start)) // the whole pause
	if err := b.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	a.close()
	b.close()
}
